// Golden outputs: `emo analyze TRACE --json` and `emo optimize TRACE --device h200 --json` on
// traces shipped in the repository, compared field by field with the checked-in files
// tests/golden/expected/<folder>.<trace>.{analyze,optimize}.json.
//
// Regenerate them all (after a change of behaviour, then review the diff and commit it):
//     scripts/regen_golden.sh
// which builds `emo` and this test and runs it with EMO_REGENERATE_GOLDEN=1 (same as
// `EMO_REGENERATE_GOLDEN=1 ctest --preset ci -R GoldenOutput` on a built tree).
//
// Comparison (json_compare.h): strings, booleans and nulls exactly; arrays by length and
// element; objects by their keys (a new or vanished field is a difference). Numbers:
//  - 1e-6 relative (1e-9 absolute) everywhere: replay, analysis and device-model numbers are
//    deterministic; the margin absorbs only floating-point evaluation order between builds
//    (Debug+ASan against RelWithDebInfo, FMA contraction);
//  - 1e-5 relative (1e-4 absolute) where a solver decides (optimize: plan, pack_graph, solver,
//    baselines): CBC stops once within a relative gap of 1e-6 (SolveOptions::relative_gap) and
//    the fast solver treats durations within 1e-3 ns as equal, so a plan can move that much
//    between builds; 1e-5 is ten times CBC's gap, and 1e-4 absolute covers percentages near
//    zero (gap_pct).
// Ignored (they vary from run to run or with the checkout): the keys solve_ms and plan_ms
// (wall-clock timings) and trace (the path as given), and /model/source (the device file's
// absolute path). Regenerated files leave them out.
//
// The traces: both examples and one of each held-out workload, the profiler configurations
// (sync/async x light/shapes) spread over them; all of data/ would take minutes under ASan.
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/emo_run.h"
#include "golden/json_compare.h"

namespace emo::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Traces (relative to the source directory) whose outputs are checked in.
constexpr std::array<const char*, 8> kTraces = {
    "examples/gpt_train_h200.json.gz",
    "examples/multistream_h200.json.gz",
    "data/h200_heldout/bert_infer_async_light.json.gz",
    "data/h200_heldout/cnn_dataload_train_sync_shapes.json.gz",
    "data/h200_heldout/mlp_small_train_async_shapes.json.gz",
    "data/h200_heldout2/gpt_small_train_sync_light.json.gz",
    "data/h200_heldout2/lstm_lm_train_sync_shapes.json.gz",
    "data/h200_heldout2/resnet_small_train_async_light.json.gz",
};

struct Command {
  const char* name;  // file suffix
  const char* args;  // after the trace
};
constexpr std::array<Command, 2> kCommands = {{
    {"analyze", ""},
    {"optimize", "--device h200"},
}};

const fs::path kExpectedDir = fs::path(EMO_SOURCE_DIR) / "tests" / "golden" / "expected";

bool Regenerating() {
  const char* v = std::getenv("EMO_REGENERATE_GOLDEN");
  return v != nullptr && *v != '\0' && std::string(v) != "0";
}

Tolerance ToleranceFor(const std::string& command, const std::string& path) {
  if (command == "optimize") {
    for (const char* solved : {"/plan", "/pack_graph", "/solver", "/baselines"}) {
      const std::string prefix(solved);
      if (path == prefix || path.starts_with(prefix + "/")) return {1e-5, 1e-4};
    }
  }
  return {1e-6, 1e-9};
}

CompareRules RulesFor(const std::string& command) {
  CompareRules r;
  r.tolerance = [command](const std::string& path) { return ToleranceFor(command, path); };
  r.ignored_keys = {"solve_ms", "plan_ms", "trace"};
  r.ignored_paths = {"/model/source"};
  return r;
}

// "examples.gpt_train_h200" for examples/gpt_train_h200.json.gz.
std::string CaseName(const std::string& trace) {
  const fs::path p(trace);
  std::string stem = p.filename().string();
  stem = stem.substr(0, stem.find('.'));
  return p.parent_path().filename().string() + "." + stem;
}

using emo::testing::EmoRun;

// Runs emo in the source directory (so relative trace paths work as a user types them).
EmoRun RunEmo(const std::string& args) { return emo::testing::Emo(args, EMO_SOURCE_DIR); }

class GoldenOutput : public ::testing::TestWithParam<const char*> {};

TEST_P(GoldenOutput, MatchesExpected) {
  const std::string trace = GetParam();
  const std::string name = CaseName(trace);
  for (const Command& command : kCommands) {
    SCOPED_TRACE(std::string(command.name) + " " + trace);
    const fs::path out = fs::temp_directory_path() /
                         fmt::format("emo_golden_{}_{}.{}.json", ::getpid(), name, command.name);
    const EmoRun run = RunEmo(fmt::format("{} {} {} --json '{}'", command.name, trace, command.args,
                                       out.string()));
    ASSERT_EQ(run.exit_code, 0) << run.out;
    std::ifstream in(out);
    const json actual = json::parse(in, nullptr, /*allow_exceptions=*/false);
    fs::remove(out);
    ASSERT_FALSE(actual.is_discarded()) << out << " is not JSON";
    const CompareRules rules = RulesFor(command.name);
    const fs::path expected_path = kExpectedDir / (name + "." + command.name + ".json");
    if (Regenerating()) {
      fs::create_directories(kExpectedDir);
      std::ofstream(expected_path) << WithoutIgnored(actual, rules).dump(2) << "\n";
      std::cout << "regenerated " << expected_path.string() << "\n";
      continue;
    }
    std::ifstream expected_in(expected_path);
    ASSERT_TRUE(expected_in.good())
        << expected_path << " is missing: regenerate with scripts/regen_golden.sh";
    const json expected = json::parse(expected_in, nullptr, /*allow_exceptions=*/false);
    ASSERT_FALSE(expected.is_discarded()) << expected_path << " is not JSON";
    std::vector<std::string> diffs;
    CompareJson(expected, actual, rules, &diffs);
    std::string report;
    for (size_t i = 0; i < diffs.size() && i < 40; ++i) report += "  " + diffs[i] + "\n";
    if (diffs.size() > 40) report += fmt::format("  ... and {} more\n", diffs.size() - 40);
    EXPECT_TRUE(diffs.empty()) << diffs.size() << " difference(s) from " << expected_path.string()
                               << " (if the change is intended: scripts/regen_golden.sh)\n"
                               << report;
  }
}

INSTANTIATE_TEST_SUITE_P(Traces, GoldenOutput, ::testing::ValuesIn(kTraces),
                         [](const ::testing::TestParamInfo<const char*>& p) {
                           std::string n = CaseName(p.param);
                           for (char& c : n) {
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return n;
                         });

// The comparison itself: a difference beyond the tolerance is found and named by its path; a
// field in the ignore list is not compared.
TEST(JsonCompareTest, ReportsEachDifferenceWithItsPath) {
  const json expected = json::parse(R"({"a": 1.0, "b": [1, 2, {"c": "x"}], "plan": {"e": 10.0},
                                        "solve_ms": 3, "d": true})");
  CompareRules rules = RulesFor("optimize");
  std::vector<std::string> diffs;
  CompareJson(expected, expected, rules, &diffs);
  EXPECT_TRUE(diffs.empty());

  json actual = expected;
  actual["a"] = 1.0 + 5e-7;              // within 1e-6 relative
  actual["plan"]["e"] = 10.0 * (1 + 5e-6);  // solver field: within 1e-5
  actual["solve_ms"] = 999;              // ignored
  CompareJson(expected, actual, rules, &diffs);
  EXPECT_TRUE(diffs.empty()) << diffs.front();

  actual["a"] = 1.00001;
  actual["b"][2]["c"] = "y";
  actual["b"].push_back(3);
  actual["d"] = 1;
  actual.erase("plan");
  actual["new"] = 0;
  CompareJson(expected, actual, rules, &diffs);
  ASSERT_EQ(diffs.size(), 6u);
  EXPECT_EQ(diffs[0], "/a: expected 1.0, actual 1.00001 (tolerance rel 1e-06, abs 1e-09)");
  EXPECT_EQ(diffs[1], "/b: expected 3 elements, actual 4");
  EXPECT_EQ(diffs[2], "/b/2/c: expected \"x\", actual \"y\"");
  EXPECT_EQ(diffs[3], "/d: expected true (boolean), actual 1 (number)");
  EXPECT_EQ(diffs[4], "/plan: expected {\"e\":10.0}, actual: missing");
  EXPECT_EQ(diffs[5], "/new: not in the expected file, actual 0");
  EXPECT_FALSE(WithoutIgnored(expected, rules).contains("solve_ms"));
}

}  // namespace
}  // namespace emo::testing
