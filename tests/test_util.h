// Shared helpers for EMO tests: where ../shared is, and a clear skip when it is missing.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

namespace emo::testing {

// The shared data folder (../shared beside the repository), or "" when it is absent.
inline std::string SharedDir() {
  std::filesystem::path p(EMO_SHARED_DIR);
  return std::filesystem::exists(p / "traces") ? p.string() : std::string();
}

inline std::string SourceDir() { return EMO_SOURCE_DIR; }

}  // namespace emo::testing

// Skips the current test, saying why, when ../shared is not there. Use only for tests that
// read ../shared; never to hide a failure.
#define EMO_REQUIRE_SHARED()                                                         \
  do {                                                                               \
    if (::emo::testing::SharedDir().empty()) {                                       \
      GTEST_SKIP() << "../shared is missing (looked in " EMO_SHARED_DIR              \
                   "): this test reads the shared traces and data; skipped";          \
    }                                                                                \
  } while (0)

// A path under ../shared (call EMO_REQUIRE_SHARED first).
inline std::string SharedPath(const std::string& rel) {
  return ::emo::testing::SharedDir() + "/" + rel;
}
