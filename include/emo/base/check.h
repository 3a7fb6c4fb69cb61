// EMO_CHECK: aborts with file, line and message when an internal invariant is broken.
// Not for user input (use Status) nor for per-event trace problems (use Diagnostics).
#pragma once

namespace emo::internal {
[[noreturn]] void CheckFailed(const char* file, int line, const char* condition, const char* message);
}  // namespace emo::internal

#define EMO_CHECK(condition)                                                 \
  do {                                                                       \
    if (!(condition)) ::emo::internal::CheckFailed(__FILE__, __LINE__, #condition, ""); \
  } while (0)

#define EMO_CHECK_MSG(condition, message)                                    \
  do {                                                                       \
    if (!(condition))                                                        \
      ::emo::internal::CheckFailed(__FILE__, __LINE__, #condition, message); \
  } while (0)
