// STYLE: a stage may use stages to its left, never to its right; stages base..policy use no
// CUDA header. This test reads every source and header and checks its #include lines.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "test_util.h"

namespace {

const std::vector<std::string> kStages = {"base",  "trace", "graph",  "analysis", "packing",
                                          "model", "opt",   "policy", "runtime",  "report"};

int StageIndex(const std::string& s) {
  for (size_t i = 0; i < kStages.size(); ++i) {
    if (kStages[i] == s) return static_cast<int>(i);
  }
  return -1;
}

TEST(LayeringTest, StagesIncludeOnlyEarlierStages) {
  namespace fs = std::filesystem;
  const fs::path root = emo::testing::SourceDir();
  const std::regex include_re(R"re(#include\s+"emo/([a-z_]+)/)re");
  const std::regex cuda_re(R"re(#include\s+[<"](cuda|cupti|nvml)[^>"]*[>"])re");
  size_t files = 0;
  for (const auto& stage : kStages) {
    const int own = StageIndex(stage);
    for (const fs::path& dir : {root / "src" / stage, root / "include" / "emo" / stage}) {
      if (!fs::exists(dir)) continue;
      for (const auto& entry : fs::recursive_directory_iterator(dir)) {
        if (!entry.is_regular_file()) continue;
        auto ext = entry.path().extension();
        if (ext != ".h" && ext != ".cc") continue;
        ++files;
        std::ifstream in(entry.path());
        std::string line;
        while (std::getline(in, line)) {
          std::smatch m;
          if (std::regex_search(line, m, include_re)) {
            const int used = StageIndex(m[1]);
            EXPECT_GE(used, 0) << entry.path() << ": unknown stage in '" << line << "'";
            EXPECT_LE(used, own) << entry.path() << " (stage " << stage << ") includes a later stage: " << line;
          }
          if (own <= StageIndex("policy")) {
            EXPECT_FALSE(std::regex_search(line, cuda_re))
                << entry.path() << ": stages base..policy must build without CUDA headers: " << line;
          }
        }
      }
    }
  }
  EXPECT_GT(files, 10u);
}

}  // namespace
