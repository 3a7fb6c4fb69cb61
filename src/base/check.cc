#include "emo/base/check.h"

#include <cstdio>
#include <cstdlib>

namespace emo::internal {

void CheckFailed(const char* file, int line, const char* condition, const char* message) {
  std::fprintf(stderr, "EMO_CHECK failed at %s:%d: %s %s\n", file, line, condition, message);
  std::abort();
}

}  // namespace emo::internal
