// Runs the built `emo` binary from a test: exit code and output, or the JSON it wrote.
#pragma once

#include <unistd.h>

#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "test_util.h"

namespace emo::testing {

struct EmoRun {
  int exit_code = -1;
  std::string out;  // stdout and stderr together
};

// Runs a shell command: its exit code and its stdout and stderr together.
inline EmoRun RunShell(const std::string& cmd) {
  EmoRun r;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// Runs `emo ARGS` (in `dir` when given, so relative paths work as a user types them).
// `timeout` (coreutils) ends a run that hangs, so a regression fails the test (exit code 124)
// instead of stalling the suite; no test asserts on wall time.
inline EmoRun Emo(const std::string& args, const std::string& dir = "") {
  return RunShell((dir.empty() ? std::string() : "cd '" + dir + "' && ") + "timeout 600 '" + std::string(EMO_BINARY) +
                  "' " + args);
}

// A path in the temporary folder for this test's files.
// A scratch file of this test process: named by pid too, so that two test runs on one machine
// (a build tree and a clean clone, say) never share one.
inline std::string TempPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("emo_test_" + std::to_string(getpid()) + "_" + name)).string();
}

inline nlohmann::json ReadJson(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  return nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
}

inline std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs emo with `--json FILE`, expects success, and parses FILE.
inline nlohmann::json EmoJson(const std::string& args, const std::string& name) {
  const auto path = TempPath(name + ".json");
  const EmoRun r = Emo(args + " --json " + path);
  EXPECT_EQ(r.exit_code, 0) << r.out;
  auto j = ReadJson(path);
  std::filesystem::remove(path);
  return j;
}

}  // namespace emo::testing
