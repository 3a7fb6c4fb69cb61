// The injection library's configuration from the environment, and its output path.
#include "emo/runtime/inject_config.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace emo::runtime {
namespace {

InjectConfig Read(const std::map<std::string, std::string>& env, std::vector<std::string>* warnings) {
  return ReadInjectConfig(
      [&env](const char* name) -> const char* {
        const auto it = env.find(name);
        return it == env.end() ? nullptr : it->second.c_str();
      },
      warnings);
}

TEST(InjectConfigTest, Defaults) {
  std::vector<std::string> warnings;
  const InjectConfig c = Read({}, &warnings);
  EXPECT_TRUE(warnings.empty());
  EXPECT_EQ(c.output_pattern, "emo_trace_%r.emotrace");
  EXPECT_EQ(c.mode, TraceMode::kTrace);
  EXPECT_EQ(c.warmup, 5);
  EXPECT_EQ(c.iterations, 5);
  EXPECT_EQ(c.buffer_pool_mib, 256);
  EXPECT_EQ(c.nvtx_regex, kDefaultNvtxRegex);
  EXPECT_EQ(c.quiet_ms, 0);
  EXPECT_EQ(c.quiet_log, "");
}

TEST(InjectConfigTest, ValuesFromTheEnvironment) {
  std::vector<std::string> warnings;
  const InjectConfig c = Read({{"EMO_TRACE_OUT", "/tmp/t_%r_%p.emotrace"},
                               {"EMO_TRACE_MODE", "monitor"},
                               {"EMO_TRACE_WARMUP", "0"},
                               {"EMO_TRACE_ITERATIONS", "12"},
                               {"EMO_TRACE_BUFFER_MIB", "64"},
                               {"EMO_TRACE_NVTX_REGEX", "^train_step$"},
                               {"EMO_TRACE_QUIET_MS", "1500"},
                               {"EMO_TRACE_QUIET_LOG", "/tmp/q.txt"}},
                              &warnings);
  EXPECT_TRUE(warnings.empty());
  EXPECT_EQ(c.quiet_ms, 1500);
  EXPECT_EQ(c.quiet_log, "/tmp/q.txt");
  EXPECT_EQ(c.output_pattern, "/tmp/t_%r_%p.emotrace");
  EXPECT_EQ(c.mode, TraceMode::kMonitor);
  EXPECT_EQ(c.warmup, 0);
  EXPECT_EQ(c.iterations, 12);
  EXPECT_EQ(c.buffer_pool_mib, 64);
  EXPECT_EQ(c.nvtx_regex, "^train_step$");
}

TEST(InjectConfigTest, BadValuesKeepTheirDefaultsAndSaySo) {
  std::vector<std::string> warnings;
  const InjectConfig c = Read({{"EMO_TRACE_MODE", "full"},
                               {"EMO_TRACE_WARMUP", "five"},
                               {"EMO_TRACE_ITERATIONS", "0"},
                               {"EMO_TRACE_BUFFER_MIB", "12abc"},
                               {"EMO_TRACE_NVTX_REGEX", "step(["},
                               {"EMO_TRACE_QUIET_MS", "-3"}},
                              &warnings);
  EXPECT_EQ(c.quiet_ms, 0);
  EXPECT_EQ(c.mode, TraceMode::kTrace);
  EXPECT_EQ(c.warmup, 5);
  EXPECT_EQ(c.iterations, 5);
  EXPECT_EQ(c.buffer_pool_mib, 256);
  EXPECT_EQ(c.nvtx_regex, kDefaultNvtxRegex);
  ASSERT_EQ(warnings.size(), 6u);
  EXPECT_NE(warnings[0].find("EMO_TRACE_MODE='full'"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[1].find("EMO_TRACE_WARMUP='five'"), std::string::npos) << warnings[1];
  EXPECT_NE(warnings[2].find("EMO_TRACE_ITERATIONS='0'"), std::string::npos) << warnings[2];
  EXPECT_NE(warnings[3].find("EMO_TRACE_BUFFER_MIB='12abc'"), std::string::npos) << warnings[3];
  EXPECT_NE(warnings[4].find("EMO_TRACE_QUIET_MS='-3'"), std::string::npos) << warnings[4];
  EXPECT_NE(warnings[5].find("EMO_TRACE_NVTX_REGEX"), std::string::npos) << warnings[5];
}

TEST(InjectConfigTest, OutputPathExpansion) {
  EXPECT_EQ(ExpandOutputPath("emo_trace_%r.emotrace", "3", 1234, "node7"), "emo_trace_3.emotrace");
  EXPECT_EQ(ExpandOutputPath("emo_trace_%r.emotrace", "pid1234", 1234, "node7"), "emo_trace_pid1234.emotrace");
  EXPECT_EQ(ExpandOutputPath("/out/%h/%p-%r.emotrace", "0", 42, "node7"), "/out/node7/42-0.emotrace");
  EXPECT_EQ(ExpandOutputPath("100%%_%x_%", "0", 1, "h"), "100%_%x_%");
}

}  // namespace
}  // namespace emo::runtime
