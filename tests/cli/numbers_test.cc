// Every number true, flagged or refused: what `emo` writes when a trace or a flag is unlike the
// ones its models were made on. Each test pins one class of defect a new user met (several
// traces losing all plans but the last, energies below zero or above the board's power limit,
// a model of another GPU, a correction or a plan whose ground is weak said without a caveat,
// a critical path that silently stops, degenerate input accepted).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <cctype>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "emo_run.h"

namespace emo::testing {
namespace {

const std::string kGpt = EMO_SOURCE_DIR "/examples/gpt_train_h200.json.gz";
const std::string kMultistream = EMO_SOURCE_DIR "/examples/multistream_h200.json.gz";

void Write(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
}

// A minimal Kineto trace: one launch and one kernel in a ProfilerStep annotation. `kernel_ts`
// is written as given (a number, or a broken value such as a string).
std::string TinyTrace(const std::string& kernel_ts, double kernel_dur_us, double step_us) {
  return R"({"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H200"}], "traceEvents": [
  {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 100, "dur": )" +
         std::to_string(step_us) + R"(},
  {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 100.1, "dur": 0.05},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 100.1, "dur": 0.05,
   "args": {"correlation": 7}},
  {"ph": "X", "cat": "kernel", "name": "add_kernel", "pid": 0, "tid": 7, "ts": )" +
         kernel_ts + R"(, "dur": )" + std::to_string(kernel_dur_us) + R"(,
   "args": {"correlation": 7, "device": 0, "stream": 7}}]})";
}

// The minimum pack follows the clock-switch latency: the device file's (h200: 500 us, assumed),
// --switch-latency-us, or --min-pack-ms; every packing planned is reported and the plan is the
// cheapest of them.
TEST(NumbersTest, MinimumPackFollowsTheSwitchLatencyAndThePlanIsTheCheapestPacking) {
  const auto by_file = EmoJson("optimize " + kGpt + " --device h200", "minpack_file");
  EXPECT_DOUBLE_EQ(by_file["plan"]["min_pack_ms"].get<double>(), 10.0);
  EXPECT_NE(by_file["plan"]["min_pack_source"].get<std::string>().find("500 us, an assumption"), std::string::npos);
  const auto fast = EmoJson("optimize " + kGpt + " --device h200 --switch-latency-us 100", "minpack_flag");
  EXPECT_DOUBLE_EQ(fast["plan"]["min_pack_ms"].get<double>(), 2.0);
  const auto given = EmoJson("optimize " + kGpt + " --device h200 --switch-latency-us 100 --min-pack-ms 4", "minpack_ms");
  EXPECT_DOUBLE_EQ(given["plan"]["min_pack_ms"].get<double>(), 4.0);
  EXPECT_EQ(given["plan"]["min_pack_source"], "--min-pack-ms");
  for (const auto* j : {&by_file, &fast, &given}) {
    const auto& packings = (*j)["packings"];
    ASSERT_TRUE(packings.contains("time-window") && packings.contains("dependency") && packings.contains("phases"))
        << packings.dump(1);
    double cheapest = 1e300;
    for (const auto& [name, k] : packings.items()) cheapest = std::min(cheapest, k["energy_j"].get<double>());
    EXPECT_DOUBLE_EQ((*j)["plan"]["energy_j"].get<double>(), cheapest);
    EXPECT_DOUBLE_EQ(packings[(*j)["plan"]["packing"].get<std::string>()]["energy_j"].get<double>(), cheapest);
  }
  // Shorter packs can only help: more of them, and a plan no worse.
  EXPECT_GT(fast["packings"]["time-window"]["packs"].get<int>(), by_file["packings"]["time-window"]["packs"].get<int>());
  EXPECT_LE(fast["plan"]["energy_j"].get<double>(), by_file["plan"]["energy_j"].get<double>() + 1e-9);
}

// The policy never schedules a switch the latency cannot honour: every pack a switch leads into
// lasts at least the switch latency (at the default and at a short latency, on a single-stream
// and a multi-stream trace, with the dependency packs' uncut waits among them).
TEST(NumbersTest, EverySwitchLeadsIntoAPackLongerThanTheLatency) {
  size_t switches = 0;
  for (const std::string& trace : {kGpt, kMultistream}) {
    for (const double latency_us : {500.0, 100.0}) {
      const std::string policy = TempPath("switch_policy.json");
      const auto j = EmoJson("optimize " + trace + " --device h200 --switch-latency-us " +
                                 std::to_string(latency_us) + " --policy " + policy,
                             "switch_latency");
      const auto p = ReadJson(policy);
      ASSERT_TRUE(p.contains("gpus")) << p.dump(1);
      for (const auto& g : p["gpus"]) {
        const auto& packs = g["packs"];
        for (size_t i = 0; i < packs.size(); ++i) {
          const auto& prev = packs[(i + packs.size() - 1) % packs.size()];
          if (prev["clock_mhz"] == packs[i]["clock_mhz"]) continue;
          ++switches;
          EXPECT_GE(packs[i]["window_us"].get<double>(), latency_us) << trace << " pack " << i;
        }
      }
      EXPECT_EQ(j["plan"]["switch_latency_us"].get<double>(), latency_us);
      std::filesystem::remove(policy);
    }
  }
  EXPECT_GT(switches, 0u) << "no plan switched: the check checked nothing";
}

// EMO traces carry their own measured energy: `emo model calibrate` takes it when --measured is
// not given (or does not list the workload), and says so; a Kineto trace without a measurement
// is refused by name.
TEST(NumbersTest, CalibrateTakesAnEmoTracesOwnMeasurement) {
  const std::string train = EMO_SOURCE_DIR "/data/h200_emo/train_loop.emotrace";
  const std::string decode = EMO_SOURCE_DIR "/data/h200_emo/decode_loop.emotrace";
  const auto j = EmoJson("model calibrate --device h200 --trace " + train + " --trace " + decode, "calibrate_emo");
  ASSERT_EQ(j["traces"].size(), 2u) << j.dump(1);
  const auto analysis = EmoJson("analyze " + train, "calibrate_emo_analyze");
  const double measured = analysis["measured_energy"]["gpus"][0]["energy_per_iteration_j"].get<double>();
  for (const auto& t : j["traces"]) EXPECT_EQ(t["measured_by"], "the trace's own run");
  EXPECT_DOUBLE_EQ(j["traces"][0]["measured_energy_j"].get<double>(), measured);
  EXPECT_DOUBLE_EQ(j["traces"][0]["step_ms"].get<double>(), analysis["iteration_time_us"]["untraced"].get<double>() * 1e-3);
  // Two workloads: each is scored with the scale fitted on the other (numbers in BENCHMARKS.md);
  // the fit on both is a positive scale.
  EXPECT_EQ(j["leave_one_out"].size(), 2u);
  EXPECT_GT(j["activity_scale_all"].get<double>(), 0.0);
  EXPECT_TRUE(std::isfinite(j["activity_scale_all"].get<double>()));

  const EmoRun refused = Emo("model calibrate --device h200 --trace " + kGpt + " --trace " + train);
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.out.find(kGpt), std::string::npos) << refused.out;
  EXPECT_NE(refused.out.find("not an EMO trace"), std::string::npos) << refused.out;
}

// `--time-margin auto` (the default) plans at 0, 0.1, 0.25, ... in turn and keeps the first plan
// that is not fragile: the CPU-bound training loop's plans at 0 and 0.1 are (tests/opt/trace_plan_test.cc),
// so it lands on the same plan as --time-margin 0.25 and says which margins it passed; a loop
// whose first plan is not fragile keeps it, as with 0. A margin that is not a fraction from 0 to
// 4 or "auto" is refused by name.
TEST(NumbersTest, AnAutoTimeMarginIsTheFirstThatLeavesNoFragilePlan) {
  const std::string train = EMO_SOURCE_DIR "/data/h200_emo/train_loop.emotrace";
  const std::string decode = EMO_SOURCE_DIR "/data/h200_emo/decode_loop.emotrace";
  const auto at0 = EmoJson("optimize " + train + " --device h200 --time-margin 0", "margin_0");
  ASSERT_TRUE(at0["plan"]["fragile_time"].get<bool>()) << "the check checks nothing: the plan at 0 is not fragile";
  const auto fixed = EmoJson("optimize " + train + " --device h200 --time-margin 0.25", "margin_025");
  const auto autom = EmoJson("optimize " + train + " --device h200 --time-margin auto", "margin_auto");
  EXPECT_FALSE(autom["plan"]["fragile_time"].get<bool>());
  EXPECT_DOUBLE_EQ(autom["plan"]["time_margin"].get<double>(), 0.25);
  EXPECT_EQ(autom["plan"]["time_margin_auto_fragile_at"], nlohmann::json::parse("[0.0, 0.1]"));
  EXPECT_DOUBLE_EQ(autom["plan"]["energy_j"].get<double>(), fixed["plan"]["energy_j"].get<double>());
  EXPECT_FALSE(fixed["plan"].contains("time_margin_auto_fragile_at"));
  const EmoRun text = Emo("optimize " + train + " --device h200");  // auto is the default
  EXPECT_NE(text.out.find("time margin: auto, 0.25 (the plans at 0, 0.1 were fragile)"), std::string::npos)
      << text.out;

  const auto d0 = EmoJson("optimize " + decode + " --device h200 --time-margin 0", "margin_decode_0");
  ASSERT_FALSE(d0["plan"]["fragile_time"].get<bool>());
  const auto dauto = EmoJson("optimize " + decode + " --device h200 --time-margin auto", "margin_decode_auto");
  EXPECT_DOUBLE_EQ(dauto["plan"]["time_margin"].get<double>(), 0.0);
  EXPECT_TRUE(dauto["plan"]["time_margin_auto_fragile_at"].empty());
  EXPECT_DOUBLE_EQ(dauto["plan"]["energy_j"].get<double>(), d0["plan"]["energy_j"].get<double>());

  for (const char* bad : {"x", "-0.1", "4.5", "0.25x"}) {
    const EmoRun refused = Emo("optimize " + train + " --device h200 --time-margin " + bad);
    EXPECT_EQ(refused.exit_code, 2) << bad;
    EXPECT_NE(refused.out.find("--time-margin: "), std::string::npos) << refused.out;
    EXPECT_NE(refused.out.find(bad), std::string::npos) << refused.out;
    EXPECT_NE(refused.out.find("expected a number in [0, 4] or auto"), std::string::npos) << refused.out;
  }
}

// `emo optimize` on an EMO trace shows the energy NVML measured over the same run beside the
// model's baseline, with the model's error, and the clock the trace recorded; a Kineto trace has
// no measurement to show.
TEST(NumbersTest, OptimizeShowsAnEmoTracesMeasuredEnergyBesideTheModels) {
  const std::string gemm = EMO_SOURCE_DIR "/data/h200_emo/gemm_bf16_8192.emotrace";
  const auto j = EmoJson("optimize " + gemm + " --device h200", "optimize_measured");
  const auto analysis = EmoJson("analyze " + gemm, "optimize_measured_analyze");
  const double measured = analysis["measured_energy"]["gpus"][0]["energy_per_iteration_j"].get<double>();
  ASSERT_TRUE(j["baseline"].contains("measured")) << j["baseline"].dump(1);
  const auto& m = j["baseline"]["measured"];
  EXPECT_DOUBLE_EQ(m["energy_j"].get<double>(), measured);
  EXPECT_GT(m["uncertainty_j"].get<double>(), 0.0);
  EXPECT_NEAR(m["model_error_pct"].get<double>(), 100.0 * (j["baseline"]["energy_j"].get<double>() / measured - 1.0), 1e-9);
  EXPECT_EQ(j["power"]["throttle_clock_from"], "trace");
  const EmoRun text = Emo("optimize " + gemm + " --device h200");
  EXPECT_EQ(text.exit_code, 0) << text.out;
  EXPECT_NE(text.out.find("measured at default"), std::string::npos) << text.out;

  const auto kineto = EmoJson("optimize " + kGpt + " --device h200", "optimize_measured_kineto");
  EXPECT_FALSE(kineto["baseline"].contains("measured"));
  EXPECT_EQ(kineto["power"]["throttle_clock_from"], "model");
}

// Multi-trace runs: every trace's plan goes into the one policy, and every frontier into the CSV.
TEST(NumbersTest, SeveralTracesWriteEveryPlanAndFrontier) {
  const auto policy = TempPath("several_policy.json"), frontier = TempPath("several_frontier.csv");
  const auto j = EmoJson("optimize " + kGpt + " " + kMultistream + " --device h200 --policy " + policy +
                             " --frontier " + frontier,
                         "several");
  ASSERT_TRUE(j.contains("traces"));
  EXPECT_EQ(j["traces"].size(), 2u);
  const auto p = ReadJson(policy);
  std::set<std::string> in_policy;
  for (const auto& g : p["gpus"]) in_policy.insert(g["trace"].get<std::string>());
  EXPECT_EQ(in_policy, (std::set<std::string>{kGpt, kMultistream})) << p.dump(1);
  const std::string csv = ReadText(frontier);
  EXPECT_EQ(csv.rfind("trace,rank,pack_graph_time_us,energy_j\n", 0), 0u) << csv.substr(0, 200);
  EXPECT_NE(csv.find(kGpt + ","), std::string::npos);
  EXPECT_NE(csv.find(kMultistream + ","), std::string::npos);
  std::filesystem::remove(policy);
  std::filesystem::remove(frontier);
}

// The GPU a trace names is checked against the device model: refused unless overridden, and
// then every output says so.
TEST(NumbersTest, AModelOfAnotherGpuIsRefusedOrSaid) {
  const EmoRun refused = Emo("optimize " + kGpt + " --device a100-sxm");
  EXPECT_EQ(refused.exit_code, 1) << refused.out;
  EXPECT_NE(refused.out.find("NVIDIA H200"), std::string::npos) << refused.out;
  EXPECT_NE(refused.out.find("a100-sxm"), std::string::npos) << refused.out;
  EXPECT_NE(refused.out.find("--allow-device-mismatch"), std::string::npos) << refused.out;

  const auto policy = TempPath("mismatch_policy.json");
  const auto j = EmoJson("optimize " + kGpt + " --device a100-sxm --allow-device-mismatch --policy " + policy,
                         "mismatch");
  EXPECT_EQ(j["model"]["device_check"]["outcome"], "mismatch");
  EXPECT_TRUE(j["model"]["device_check"]["overridden"].get<bool>());
  EXPECT_NE(j["warnings"].dump().find("device mismatch"), std::string::npos) << j["warnings"].dump();
  const auto p = ReadJson(policy);
  EXPECT_TRUE(p["gpus"][0]["device_check"]["overridden"].get<bool>());
  EXPECT_FALSE(p["warnings"].empty());
  std::filesystem::remove(policy);

  const auto same = EmoJson("optimize " + kGpt + " --device h200", "match");
  EXPECT_EQ(same["model"]["device_check"]["outcome"], "match");
}

// A GEMM branch beside a memory-bound branch: the model's power at the default clock is above
// what the board's limiter allows, so the iteration runs power-capped and no predicted power
// exceeds the limit.
TEST(NumbersTest, NoPredictedPowerAboveTheLimit) {
  const auto j = EmoJson("optimize " + kMultistream + " --device h200", "capped");
  EXPECT_TRUE(j["power"]["capped"].get<bool>()) << j["power"].dump();
  EXPECT_LT(j["power"]["throttle_clock_mhz"].get<double>(), 1980.0);
  const double limit = j["power"]["limit_w"].get<double>();
  for (const char* row : {"baseline", "plan", "static_best"}) {
    const double w = j[row]["energy_j"].get<double>() / (j[row]["time_us"].get<double>() * 1e-6);
    EXPECT_LE(w, limit) << row;
    EXPECT_GE(j[row]["energy_j"].get<double>(), 0.0) << row;
  }
}

// A timeline outside the calibration's ground is low confidence, and a plan on it says so in
// its text, JSON and policy, with the saving over the timeline's range.
TEST(NumbersTest, APlanOnALowConfidenceTimelineSaysSo) {
  // The shipped calibration's numbers, said to come from A100 hosts: the H200 trace is then from
  // another machine.
  const auto cal = TempPath("a100_calibration.json");
  Write(cal, R"({"format": "emo-overhead-calibration-1",
    "reference_ns": {"aten::empty": 5093.0, "aten::empty_strided": 5949.5, "cuLaunchKernelEx": 8198.5,
                     "cudaLaunchKernel": 7322.0, "cudaMemsetAsync": 5886.0},
    "ratio": {"light": 0.64, "shapes": 0.59}, "leaf_ops_per_ms": [23.5, 36.4], "cpu_slowdown": [0.83, 1.34],
    "gpus": ["NVIDIA A100-SXM4-80GB"]})");
  const auto analysis = EmoJson("analyze " + kGpt + " --overhead-calibration " + cal, "low_analyze");
  EXPECT_EQ(analysis["overhead"]["confidence"], "low");
  EXPECT_NE(analysis["overhead"]["note"].get<std::string>().find("A100"), std::string::npos);

  const auto policy = TempPath("low_policy.json");
  const auto text = Emo("optimize " + kGpt + " --device h200 --overhead-calibration " + cal);
  EXPECT_NE(text.out.find("timeline confidence low"), std::string::npos) << text.out;
  const auto j =
      EmoJson("optimize " + kGpt + " --device h200 --overhead-calibration " + cal + " --policy " + policy, "low");
  EXPECT_EQ(j["confidence"], "low");
  const auto range = j["plan"]["saving_range_pct"];
  ASSERT_EQ(range.size(), 2u);
  const double saving = j["plan"]["saving_pct"].get<double>();
  EXPECT_LE(range[0].get<double>(), saving + 1e-9);
  EXPECT_GE(range[1].get<double>(), saving - 1e-9);
  EXPECT_LT(range[0].get<double>(), range[1].get<double>()) << "a low-confidence timeline has a range";
  EXPECT_FALSE(j["warnings"].empty());
  const auto p = ReadJson(policy);
  EXPECT_EQ(p["gpus"][0]["confidence"], "low");
  EXPECT_EQ(p["gpus"][0]["predicted"]["saving_range_pct"], range);
  EXPECT_FALSE(p["warnings"].empty());
  std::filesystem::remove(policy);
  std::filesystem::remove(cal);
}

// The first step of the GPT trace: the autograd thread starts when the forward pass hands it the
// loss, so the critical path runs through the forward pass and spans the step.
TEST(NumbersTest, CriticalPathSpansAStepAcrossThreads) {
  const auto j = EmoJson("analyze " + kGpt + " --correct-overhead off --iteration '^ProfilerStep#3$'", "step3");
  EXPECT_GE(j["critical_path"]["covered_pct"].get<double>(), 99.0) << j["critical_path"].dump(1);
  EXPECT_GT(j["graph"]["edge_kinds"]["cross_thread"].get<int>(), 0);
}

// An iteration marker that outlasts the recorded work: the path cannot cover it and says why.
TEST(NumbersTest, CriticalPathSaysWhereItStops) {
  const auto path = TempPath("long_marker_trace.json");
  Write(path, TinyTrace("101", 50.0, 5000.0));
  const auto j = EmoJson("analyze " + path, "long_marker");
  const auto& cp = j["critical_path"];
  EXPECT_LT(cp["covered_pct"].get<double>(), 10.0);
  ASSERT_FALSE(cp["uncovered"].empty()) << cp.dump(1);
  const auto& gap = cp["uncovered"].back();
  EXPECT_EQ(gap["where"], "end");
  EXPECT_GT(gap["us"].get<double>(), 4000.0);
  EXPECT_NE(gap["reason"].get<std::string>().find("ProfilerStep#1"), std::string::npos);
  const auto text = Emo("analyze " + path);
  EXPECT_NE(text.out.find("not on the path"), std::string::npos) << text.out;
  std::filesystem::remove(path);
}

// A 0.3 us iteration: nothing about clocks or what-ifs can be said; refused, not "+50 %".
TEST(NumbersTest, ADegenerateIterationIsRefused) {
  const auto path = TempPath("tiny_trace.json");
  Write(path, TinyTrace("100.15", 0.1, 0.3));
  for (const std::string& cmd : {"whatif " + path + " --scale add=2", "optimize " + path + " --device h200"}) {
    const EmoRun r = Emo(cmd);
    EXPECT_EQ(r.exit_code, 1) << cmd << "\n" << r.out;
    EXPECT_NE(r.out.find("under the 10 us"), std::string::npos) << r.out;
  }
  const auto j = EmoJson("analyze " + path, "tiny");
  EXPECT_NE(j["diagnostics"].dump().find("iteration_too_short"), std::string::npos);
  std::filesystem::remove(path);
}

// Kernels whose times are not numbers: named, and the error says the trace is damaged, not that
// the profiler missed CUDA activity.
TEST(NumbersTest, UnreadableKernelTimesAreNamed) {
  const auto path = TempPath("bad_times_trace.json");
  Write(path, TinyTrace("\"abc\"", 1.0, 20.0));
  const EmoRun r = Emo("analyze " + path);
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("add_kernel"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("unreadable"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("ProfilerActivity.CUDA"), std::string::npos) << r.out;
  std::filesystem::remove(path);
}

// The held-out truths match their traces: each trace's loop was timed, and its energy measured,
// in the trace's own process before it was traced, with the same loop structure (a run-ahead
// trace beside a run-ahead truth), and both loop structures have their energy.
TEST(NumbersTest, HeldOutTruthsComeFromEachTracesOwnProcessAndLoop) {
  for (const std::string folder : {"data/h200_heldout", "data/h200_heldout2"}) {
    SCOPED_TRACE(folder);
    const auto truth = ReadJson(EMO_SOURCE_DIR "/" + folder + "/truth.json");
    const auto measured = ReadJson(EMO_SOURCE_DIR "/" + folder + "/measured.json");
    size_t traces = 0;
    for (const auto& entry : std::filesystem::directory_iterator(EMO_SOURCE_DIR "/" + folder)) {
      std::string name = entry.path().filename().string();
      if (!name.ends_with(".json.gz")) continue;
      name.resize(name.size() - std::string(".json.gz").size());
      // <workload>_<sync|async>_<light|shapes>
      const size_t c = name.rfind('_'), l = name.rfind('_', c - 1);
      const std::string workload = name.substr(0, l), loop = name.substr(l + 1, c - l - 1);
      const std::string key = name.substr(l + 1);
      ASSERT_TRUE(truth.contains(workload)) << name;
      ASSERT_TRUE(truth[workload].contains("traces") && truth[workload]["traces"].contains(key)) << name;
      const auto& own = truth[workload]["traces"][key];
      EXPECT_GT(own["unprofiled"]["median_s"].get<double>(), 0.0) << name;
      EXPECT_GT(own["energy_per_iter_j"].get<double>(), 0.0) << name;
      ASSERT_TRUE(measured["workloads"][workload].contains(loop)) << name << ": no " << loop << " loop energy";
      EXPECT_EQ(measured["workloads"][workload][loop]["loop"], loop) << name;
      ++traces;
    }
    EXPECT_EQ(traces, 12u);
  }
}


// The README's tables explain every line `emo analyze` and `emo optimize` print, on traces that
// take each branch (a plan from phases, a power-capped one, a plan without a marker on another
// GPU's trace, a partial critical path), and it tells a user how to trace their own job.
// Labels compare with numbers folded to '#': the README writes `static N MHz` for
// "static 1770 MHz" and `pass-level (k phases)` for "pass-level (1 phase)".
std::string FoldNumbers(std::string s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    const bool digit = std::isdigit(static_cast<unsigned char>(s[i])) != 0;
    const bool symbol = (s[i] == 'N' || s[i] == 'n' || s[i] == 'k' || s[i] == 'a' || s[i] == 'b') &&
                        (i == 0 || !std::isalnum(static_cast<unsigned char>(s[i - 1]))) &&
                        (i + 1 == s.size() || !std::isalnum(static_cast<unsigned char>(s[i + 1])));
    if (!digit && !symbol) {
      out += s[i];
      continue;
    }
    while (i + 1 < s.size() && (std::isdigit(static_cast<unsigned char>(s[i + 1])) || s[i + 1] == '.')) ++i;
    out += '#';
    // "1 phase" and "k phases" are one label.
    if (i + 1 < s.size() && s[i + 1] == ' ') {
      size_t e = i + 2;
      while (e < s.size() && std::isalpha(static_cast<unsigned char>(s[e]))) ++e;
      if (e > i + 3 && s[e - 1] == 's') {
        out += s.substr(i + 1, e - i - 2);
        i = e - 1;
      }
    }
  }
  return out;
}

// The backquoted labels in the first column of the table under `heading`, numbers folded.
std::vector<std::string> ReadmeLabels(const std::string& readme, const std::string& heading) {
  std::vector<std::string> labels;
  const size_t start = readme.find("\n## " + heading);
  if (start == std::string::npos) return labels;
  const size_t end = readme.find("\n## ", start + 1);
  std::istringstream section(readme.substr(start, end - start));
  for (std::string line; std::getline(section, line);) {
    if (line.rfind("| `", 0) != 0) continue;
    const std::string cell = line.substr(0, line.find(" |", 2));
    for (size_t a = cell.find('`'); a != std::string::npos; a = cell.find('`', cell.find('`', a + 1) + 1)) {
      const size_t b = cell.find('`', a + 1);
      if (b == std::string::npos) break;
      labels.push_back(FoldNumbers(cell.substr(a + 1, b - a - 1)));
    }
  }
  return labels;
}

// The lines of a command's report: indented by two spaces, without the progress lines.
std::vector<std::string> ReportLines(const std::string& out) {
  std::vector<std::string> lines;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("  ", 0) != 0) continue;
    const size_t first = line.find_first_not_of(' ');
    if (first != std::string::npos) lines.push_back(FoldNumbers(line.substr(first)));
  }
  return lines;
}

TEST(NumbersTest, TheReadmeExplainsEveryLineAndHowToTraceYourOwnJob) {
  const std::string readme = ReadText(EMO_SOURCE_DIR "/README.md");
  const auto optimize_labels = ReadmeLabels(readme, "Reading `emo optimize`");
  const auto analyze_labels = ReadmeLabels(readme, "Reading `emo analyze`");
  ASSERT_FALSE(optimize_labels.empty()) << "README has no table under \"## Reading `emo optimize`\"";
  ASSERT_FALSE(analyze_labels.empty()) << "README has no table under \"## Reading `emo analyze`\"";

  const auto no_marker = TempPath("readme_no_marker_trace.json");
  std::string trace = TinyTrace("101", 50.0, 5000.0);
  trace.replace(trace.find("ProfilerStep#1"), std::string("ProfilerStep#1").size(), "train_step");
  trace.replace(trace.find("NVIDIA H200"), std::string("NVIDIA H200").size(), "NVIDIA A100-SXM4-80GB");
  Write(no_marker, trace);
  const auto partial = TempPath("readme_partial_trace.json");
  Write(partial, TinyTrace("101", 50.0, 5000.0));

  // An optimize line is explained when it starts with a row's label; an analyze line when its
  // label (the text before the column gap) starts a row's label (`GPU n busy … slack windows`).
  for (const std::string& args : {"optimize " + kGpt + " --device h200", "optimize " + kMultistream + " --device h200",
                                  "optimize " + no_marker + " --device h200 --allow-device-mismatch"}) {
    const EmoRun r = Emo(args);
    ASSERT_EQ(r.exit_code, 0) << args << "\n" << r.out;
    const auto lines = ReportLines(r.out);
    ASSERT_GT(lines.size(), 6u) << r.out;
    for (const auto& line : lines) {
      if (line.rfind("time us", 0) == 0) continue;  // the column header
      bool explained = false;
      for (const auto& label : optimize_labels) explained = explained || line.rfind(label, 0) == 0;
      EXPECT_TRUE(explained) << "README's optimize table does not explain: " << line;
    }
  }
  for (const std::string& path : {kGpt, partial, no_marker}) {
    const EmoRun r = Emo("analyze " + path);
    ASSERT_EQ(r.exit_code, 0) << path << "\n" << r.out;
    for (const auto& line : ReportLines(r.out)) {
      const std::string label = line.substr(0, line.find("  "));
      bool explained = false;
      for (const auto& row : analyze_labels) explained = explained || row.rfind(label, 0) == 0;
      EXPECT_TRUE(explained) << "README's analyze table does not explain: " << line;
    }
  }
  std::filesystem::remove(no_marker);
  std::filesystem::remove(partial);

  // How to trace: the profiler settings EMO reads, and the unprofiled step time it corrects to.
  const size_t own = readme.find("\n## Trace your own job");
  ASSERT_NE(own, std::string::npos) << "README has no \"Trace your own job\" section";
  const std::string section = readme.substr(own, readme.find("\n## ", own + 1) - own);
  for (const char* must : {"torch.profiler", "ProfilerActivity.CUDA", "--step-time", "export_chrome_trace"})
    EXPECT_NE(section.find(must), std::string::npos) << "\"Trace your own job\" does not mention " << must;
}

}  // namespace
}  // namespace emo::testing
