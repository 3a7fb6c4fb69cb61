// The `emo` command line as users call it: the JSON fields of the BRIEF's contract, exit codes,
// and errors that name the file. Runs the built binary on traces shipped in the repository.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "emo_run.h"

namespace {

using emo::testing::Emo;
using emo::testing::EmoJson;
using emo::testing::EmoRun;
using emo::testing::ReadJson;
using emo::testing::TempPath;

const std::string kExample = EMO_SOURCE_DIR "/examples/gpt_train_h200.json.gz";
const std::string kHeldout = EMO_SOURCE_DIR "/data/h200_heldout/bert_infer_sync_light.json.gz";

TEST(CliTest, AnalyzeWritesTheContractFields) {
  const auto j = EmoJson("analyze " + kExample + " --hta-critical-path", "analyze");
  ASSERT_TRUE(j.is_object());
  EXPECT_GE(j["iterations"].get<int>(), 3);
  EXPECT_GT(j["iteration_time_us"]["measured"].get<double>(), 0.0);
  EXPECT_GT(j["iteration_time_us"]["replayed"].get<double>(), 0.0);
  EXPECT_GT(j["iteration_time_us"]["corrected"].get<double>(), 0.0);  // PyTorch trace: correction on
  EXPECT_LE(j["replay_error_pct"].get<double>(), 1.0);
  for (const char* k : {"gpu_pct", "cpu_pct", "comm_pct"}) {
    const double v = j["critical_path"][k].get<double>();
    EXPECT_GE(v, 0.0) << k;
    EXPECT_LE(v, 100.0) << k;
  }
  ASSERT_EQ(j["gpus"].size(), 1u);
  for (const char* k : {"rank", "device", "busy_pct", "slack_pct"}) EXPECT_TRUE(j["gpus"][0].contains(k)) << k;
  EXPECT_GT(j["graph"]["nodes"].get<int>(), 1000);
  EXPECT_GT(j["graph"]["edges"].get<int>(), 1000);
  ASSERT_TRUE(j["diagnostics"].is_array());
  for (const auto& d : j["diagnostics"]) {
    for (const char* k : {"name", "severity", "count"}) EXPECT_TRUE(d.contains(k)) << k;
  }
  EXPECT_GT(j["hta_critical_path"]["gpu_ops"].get<int>() + j["hta_critical_path"]["api_calls"].get<int>(), 0);
}

TEST(CliTest, WhatIfScalesMatchingOps) {
  const auto j = EmoJson("whatif " + kExample + " --scale 'nvjet|gemm=1.5'", "whatif");
  ASSERT_TRUE(j.is_object());
  const double base = j["iteration_time_us"]["baseline"].get<double>();
  const double whatif = j["iteration_time_us"]["whatif"].get<double>();
  EXPECT_GT(base, 0.0);
  EXPECT_GT(whatif, base);  // GEMMs 1.5x slower: the iteration gets longer
}

// Two ranks of a 128-rank job: analysed as a job, the ranks not given listed once, as runs.
TEST(CliTest, AJobWithMissingRanksListsThemAsRuns) {
  EMO_REQUIRE_SHARED();
  const EmoRun r = Emo("analyze " + SharedPath("traces/hta/sampled_rank0_of128.json.gz") + " " +
                       SharedPath("traces/hta/sampled_rank1_of128.json.gz"));
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("job               2 of 128 ranks given (missing: 2-127);"), std::string::npos) << r.out;
}

// --slow-rank replays the ranks of a job jointly: a straggler delays its peer (the library's
// tests in tests/analysis/joint_replay_test.cc); its usage errors exit with 2 and say why.
TEST(CliTest, WhatIfSlowRankNeedsAJobAndSaysWhatItChanged) {
  for (const auto& [args, says] : std::vector<std::pair<std::string, std::string>>{
           {"whatif " + kExample, "give --scale REGEX=FACTOR, --slow-rank RANK=FACTOR, or both"},
           {"whatif " + kExample + " --slow-rank 1=2", "--slow-rank needs the traces of every rank of the job"},
           {"whatif " + kExample + " " + kExample + " --slow-rank 1=x", "expected RANK=FACTOR"},
       }) {
    const EmoRun r = Emo(args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.out;
    EXPECT_NE(r.out.find(says), std::string::npos) << args << "\n" << r.out;
  }
  EMO_REQUIRE_SHARED();
  const std::string ddp = SharedPath("traces/h200/ddp_gpt_rank0.json.gz") + " " +
                          SharedPath("traces/h200/ddp_gpt_rank1.json.gz");
  const auto j = EmoJson("whatif " + ddp + " --slow-rank 1=1.5", "whatif");
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j["collectives_matched"], 42);
  EXPECT_TRUE(j["converged"].get<bool>());
  ASSERT_EQ(j["ranks"].size(), 2u);
  EXPECT_GT(j["ranks"][0]["change_pct"].get<double>(), 5.0);  // rank 0 waits for the straggler
  EXPECT_GT(j["job"]["change_pct"].get<double>(), 5.0);
  const EmoRun missing = Emo("whatif " + ddp + " --slow-rank 4=2");
  EXPECT_NE(missing.out.find("no trace of rank 4 was given (ranks given: 0, 1)"), std::string::npos) << missing.out;
}

// The ranks of a job are planned with their peers held where the joint replay puts them, and
// every plan is then replayed jointly at once: the job meets the target. Planned each alone
// (--per-rank), the DDP pair's plans miss it (each rank's +2 % adds up across the all-reduces),
// and the pipeline's lighter stage saves less (its bubbles are not slack to it).
TEST(CliTest, OptimizePlansTheRanksOfAJobAgainstTheJobsTime) {
  EMO_REQUIRE_SHARED();
  auto pair = [](const char* job) {
    return SharedPath("traces/h200/" + std::string(job) + "_rank0.json.gz") + " " +
           SharedPath("traces/h200/" + std::string(job) + "_rank1.json.gz");
  };
  for (const char* job : {"ddp_gpt", "pp_gpt"}) {
    SCOPED_TRACE(job);
    const auto joint = EmoJson("optimize " + pair(job) + " --device h200", "optimize");
    ASSERT_TRUE(joint.contains("job")) << joint.dump().substr(0, 400);
    EXPECT_EQ(joint["job"]["planned"], "jointly");
    EXPECT_TRUE(joint["job"]["met"].get<bool>());
    EXPECT_LE(joint["job"]["slowdown_pct"].get<double>(), 2.0 + 1e-9);
    EXPECT_TRUE(joint["job"]["converged"].get<bool>());
    // One policy for the job: a plan per GPU and the job's own figures.
    const std::string policy = TempPath(std::string(job) + "_policy.json");
    ASSERT_EQ(Emo("optimize " + pair(job) + " --device h200 --policy " + policy).exit_code, 0);
    const auto p = ReadJson(policy);
    ASSERT_EQ(p["gpus"].size(), 2u);
    ASSERT_TRUE(p.contains("job")) << p.dump().substr(0, 400);
    EXPECT_EQ(p["job"]["planned_us"], joint["job"]["planned_us"]);
    EXPECT_TRUE(p["job"]["met"].get<bool>());
    double energy = 0;
    for (const auto& g : p["gpus"]) energy += g["predicted"]["energy_j"].get<double>();
    EXPECT_NEAR(p["job"]["energy_j"].get<double>(), energy, 1e-9);
    EXPECT_LT(p["job"]["energy_j"].get<double>(), p["job"]["baseline_energy_j"].get<double>());
    std::remove(policy.c_str());
    const auto alone = EmoJson("optimize " + pair(job) + " --device h200 --per-rank", "optimize");
    EXPECT_EQ(alone["job"]["planned"], "per rank (--per-rank)");
    if (std::string(job) == "ddp_gpt") {
      EXPECT_FALSE(alone["job"]["met"].get<bool>());
      EXPECT_GT(alone["job"]["slowdown_pct"].get<double>(), 4.0);
      ASSERT_EQ(Emo("optimize " + pair(job) + " --device h200 --per-rank --policy " + policy).exit_code, 0);
      const std::string warnings = ReadJson(policy)["warnings"].dump();
      EXPECT_NE(warnings.find("the job: every rank's plan at once"), std::string::npos) << warnings;
      std::remove(policy.c_str());
    } else {
      const double lighter_joint = joint["traces"][1]["plan"]["energy_j"].get<double>();
      const double lighter_alone = alone["traces"][1]["plan"]["energy_j"].get<double>();
      EXPECT_LT(lighter_joint, 0.9 * lighter_alone);
    }
  }
}

TEST(CliTest, OptimizeWritesTheContractFields) {
  const auto j = EmoJson("optimize " + kHeldout + " --device h200", "optimize");
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j["timeline"], "corrected");
  const double base_t = j["baseline"]["time_us"].get<double>(), base_e = j["baseline"]["energy_j"].get<double>();
  EXPECT_GT(base_t, 0.0);
  EXPECT_GT(base_e, 0.0);
  const auto& p = j["plan"];
  EXPECT_LE(p["time_us"].get<double>(), 1.02 * base_t + 1e-3);
  EXPECT_LE(p["energy_j"].get<double>(), j["static_best"]["energy_j"].get<double>() + 1e-9);
  for (const char* k : {"saving_pct", "slowdown_pct", "packs", "switches"}) EXPECT_TRUE(p.contains(k)) << k;
  for (const char* k : {"clock_mhz", "time_us", "energy_j", "saving_pct"}) EXPECT_TRUE(j["static_best"].contains(k)) << k;
  for (const char* k : {"name", "outcome", "solve_ms", "gap_pct"}) EXPECT_TRUE(j["solver"].contains(k)) << k;
  EXPECT_EQ(j["model"]["device"], "h200");
  EXPECT_TRUE(j["model"]["source"].get<std::string>().ends_with("h200.json"));
  EXPECT_GT(j["pack_graph"]["plan"]["time_us"].get<double>(), 0.0);
}

// The calibration calibrate-overhead writes, given to analyze, reproduces the corrected time
// the fit reported (both start from the traced durations, not from an already corrected
// timeline); --step-time on analyze hits the measured time.
TEST(CliTest, CalibratedOverheadReproducesInAnalyze) {
  const std::string dir = EMO_SOURCE_DIR "/data/h200_heldout/";
  const std::string light = dir + "mlp_small_train_sync_light.json.gz", shapes = dir + "mlp_small_train_sync_shapes.json.gz";
  const auto cal = emo::testing::TempPath("cli_overhead_calibration.json");
  const auto fit = EmoJson("calibrate-overhead " + light + " " + shapes + " --step-time 8.29 8.29 --out " + cal, "calibrate");
  ASSERT_TRUE(fit.is_object());
  EXPECT_EQ(fit["format"], "emo-overhead-calibration-1");
  EXPECT_GT(fit["ratio"]["light"].get<double>(), 0.0);
  EXPECT_GT(fit["ratio"]["shapes"].get<double>(), 0.0);
  for (size_t i = 0; i < 2; ++i) {
    const auto& t = fit["traces"][i];
    const double fitted_us = t["corrected_us"].get<double>();
    EXPECT_NEAR(fitted_us, 8290.0, 0.02 * 8290.0);  // one trace per ratio: fitted exactly
    const auto a = EmoJson("analyze " + t["trace"].get<std::string>() + " --overhead-calibration " + cal,
                           "analyze_calibrated");
    ASSERT_TRUE(a.is_object());
    EXPECT_NEAR(a["iteration_time_us"]["corrected"].get<double>(), fitted_us, 1.0);
    EXPECT_EQ(a["overhead"]["source"], "calibration");
    EXPECT_NEAR(a["overhead"]["cpu_scale"].get<double>(), t["cpu_scale"].get<double>(), 1e-9);
  }
  std::filesystem::remove(cal);

  const auto s = EmoJson("analyze " + light + " --step-time 8.29", "analyze_step_time");
  ASSERT_TRUE(s.is_object());
  EXPECT_NEAR(s["iteration_time_us"]["corrected"].get<double>(), 8290.0, 0.005 * 8290.0);
  EXPECT_EQ(s["overhead"]["source"], "step-time");
  EXPECT_EQ(s["overhead"]["confidence"], "high");

  // A file of step times: by path or by file name; a trace it does not list keeps the
  // calibration; a malformed line is an error naming the file and the line.
  const auto file = emo::testing::TempPath("cli_step_times.txt");
  std::ofstream(file) << "# unprofiled step times\n" << light << " 8.29\nmlp_small_train_sync_shapes.json.gz, 9.5\n";
  const std::string other = dir + "bert_infer_sync_light.json.gz";
  const auto many = EmoJson("analyze " + light + " " + shapes + " " + other + " --step-times " + file, "analyze_step_times");
  ASSERT_TRUE(many.is_object());
  const auto& traces = many["traces"];
  ASSERT_EQ(traces.size(), 3u);
  EXPECT_NEAR(traces[0]["iteration_time_us"]["corrected"].get<double>(), 8290.0, 0.005 * 8290.0);
  EXPECT_NEAR(traces[1]["iteration_time_us"]["corrected"].get<double>(), 9500.0, 0.005 * 9500.0);
  EXPECT_EQ(traces[2]["overhead"]["source"], "calibration");
  std::ofstream(file) << light << " fast\n";
  const EmoRun bad = Emo("analyze " + light + " --step-times " + file);
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.out.find(file + ":1:"), std::string::npos) << bad.out;
  std::filesystem::remove(file);
}

// A calibration marks how far to trust it: a loop unlike the ones it was fitted on gets a low
// confidence and a range around the corrected time. Here a calibration fitted on training loops
// only (23-36 leaf operators per ms of CPU time, the shipped table and ratios) meets an
// inference loop with many more operators per ms; the shipped calibration, fitted on it too,
// calls it medium.
TEST(CliTest, OverheadCorrectionSaysHowSureItIs) {
  const auto shipped = EmoJson("analyze " + kHeldout, "analyze_confidence_shipped");
  ASSERT_TRUE(shipped.is_object());
  EXPECT_EQ(shipped["overhead"]["confidence"], "medium") << shipped["overhead"].dump();
  const double density = shipped["overhead"]["speed_gauge"]["leaf_ops_per_ms"].get<double>();
  EXPECT_GT(density, 36 * 1.25);  // beyond the narrow calibration's range and its tolerance
  const std::string cal = (std::filesystem::temp_directory_path() / "emo_cli_training_only_calibration.json").string();
  std::ofstream(cal) << R"({"format": "emo-overhead-calibration-1",
    "reference_ns": {"aten::empty": 4821.0, "aten::empty_strided": 5137.0, "cudaLaunchKernel": 6939.0,
                     "cuLaunchKernelEx": 7477.0, "cudaMemsetAsync": 3617.0},
    "ratio": {"light": 0.53825, "shapes": 0.459}, "gauge_exponent": 0.6,
    "leaf_ops_per_ms": [23.0, 36.0], "cpu_slowdown": [0.678, 1.444], "gpus": ["NVIDIA H200"]})";
  const auto j = EmoJson("analyze " + kHeldout + " --overhead-calibration " + cal, "analyze_confidence");
  ASSERT_TRUE(j.is_object());
  const auto& o = j["overhead"];
  EXPECT_EQ(o["confidence"], "low") << o.dump();
  EXPECT_NE(o["note"].get<std::string>().find("leaf operators per ms"), std::string::npos) << o.dump();
  for (const char* k : {"per_event_ns", "events", "source", "cpu_scale", "note"}) EXPECT_TRUE(o.contains(k)) << k;
  const auto& it = j["iteration_time_us"];
  const double lo = it["corrected_range"][0].get<double>(), hi = it["corrected_range"][1].get<double>();
  EXPECT_LT(lo, it["corrected"].get<double>());
  EXPECT_GT(hi, it["corrected"].get<double>());
  // The same correction either way: only the confidence differs.
  EXPECT_DOUBLE_EQ(it["corrected"].get<double>(), shipped["iteration_time_us"]["corrected"].get<double>());
  std::filesystem::remove(cal);
  const auto bad = Emo("analyze " + kHeldout + " --overhead-calibration " + kHeldout);
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.out.find("not an overhead calibration"), std::string::npos) << bad.out;
}

TEST(CliTest, ErrorsNameTheFileAndFail) {
  const EmoRun missing = Emo("analyze /nonexistent/trace.json.gz");
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_NE(missing.out.find("/nonexistent/trace.json.gz"), std::string::npos) << missing.out;

  const auto not_trace = emo::testing::TempPath("cli_not_a_trace.json");
  std::ofstream(not_trace) << "[1, 2, 3]";
  const EmoRun bad = Emo("analyze " + not_trace);
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.out.find(not_trace), std::string::npos) << bad.out;
  std::filesystem::remove(not_trace);

  const EmoRun no_device = Emo("optimize " + kHeldout + " --device no-such-gpu");
  EXPECT_NE(no_device.exit_code, 0);
  EXPECT_NE(no_device.out.find("no-such-gpu"), std::string::npos) << no_device.out;
}

// --perfetto with several traces writes one file, each rank its own processes; a Perfetto file
// that cannot be written costs neither the analysis nor the JSON.
TEST(CliTest, PerfettoTakesSeveralTracesAndNeverCostsTheJson) {
  const auto tmp = std::filesystem::temp_directory_path();
  const auto json_path = (tmp / "emo_cli_test_perfetto_analysis.json").string();
  const auto perfetto_path = (tmp / "emo_cli_test_perfetto.json").string();
  const EmoRun two = Emo("analyze " + kExample + " " + kHeldout + " --json " + json_path + " --perfetto " + perfetto_path);
  EXPECT_EQ(two.exit_code, 0) << two.out;
  std::ifstream in(perfetto_path);
  const auto p = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(p.is_object()) << perfetto_path;
  std::set<std::string> cpu_processes;
  for (const auto& e : p["traceEvents"]) {
    if (e["ph"] != "M" || e["name"] != "process_name") continue;
    const std::string name = e["args"]["name"];
    if (name.find(" CPU, ") != std::string::npos) cpu_processes.insert(name.substr(0, name.find(',')));
  }
  EXPECT_EQ(cpu_processes, (std::set<std::string>{"rank 0 CPU", "rank 1 CPU"}));
  EXPECT_EQ(p["otherData"]["ranks"].size(), 2u);
  std::filesystem::remove(perfetto_path);
  std::filesystem::remove(json_path);

  const EmoRun unwritable = Emo("analyze " + kExample + " --json " + json_path + " --perfetto /nonexistent/p.json");
  EXPECT_NE(unwritable.exit_code, 0);
  EXPECT_NE(unwritable.out.find("/nonexistent/p.json"), std::string::npos) << unwritable.out;
  std::ifstream written(json_path);
  const auto j = nlohmann::json::parse(written, nullptr, /*allow_exceptions=*/false);
  EXPECT_TRUE(j.is_object() && j.contains("iterations")) << "the JSON was not written: " << unwritable.out;
  std::filesystem::remove(json_path);
}

TEST(CliTest, EveryCommandHasHelp) {
  for (const char* cmd : {"analyze", "whatif", "optimize", "calibrate-overhead", "devices", "model validate", "model fit",
                          "model calibrate", "model classify", "pipeline"}) {
    const EmoRun r = Emo(std::string(cmd) + " --help");
    EXPECT_EQ(r.exit_code, 0) << cmd;
    EXPECT_NE(r.out.find("--json"), std::string::npos) << cmd << ": " << r.out;
  }
}

TEST(CliTest, ModelClassifyNamesTheClassOfEachKernelFromArgumentsOrStandardInput) {
  const std::string gemm = "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT";
  const std::string sgemm = "void cutlass::Kernel2<cutlass_80_simt_sgemm_256x128_8x4_nn_align1>(Params)";
  const std::string add = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>(int)";
  const std::string nccl = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)";
  const auto j = EmoJson("model classify '" + gemm + "' '" + sgemm + "' '" + add + "' '" + nccl + "'", "classify");
  ASSERT_EQ(j["kernels"].size(), 4u) << j.dump();
  const std::vector<std::array<std::string, 3>> want = {
      {gemm, "compute", "gemm"}, {sgemm, "compute", "gemm"}, {add, "memory", "elementwise"}, {nccl, "communication", "collective"}};
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(j["kernels"][i]["name"], want[i][0]);
    EXPECT_EQ(j["kernels"][i]["class"], want[i][1]) << want[i][0];
    EXPECT_EQ(j["kernels"][i]["kind"], want[i][2]) << want[i][0];
    EXPECT_EQ(j["kernels"][i]["cuda_core_gemm"], i == 1) << want[i][0];
  }
  // One name per line on standard input, names with spaces kept whole; the human table too.
  const EmoRun piped = emo::testing::RunShell("printf '%s\\n%s\\n' '" + add + "' '" + gemm + "' | timeout 60 '" +
                                              std::string(EMO_BINARY) + "' model classify -");
  ASSERT_EQ(piped.exit_code, 0) << piped.out;
  auto row = [](std::string cls, std::string kind, const std::string& name) {
    cls.resize(13, ' ');
    kind.resize(11, ' ');
    return cls + " " + kind + " " + name + "\n";
  };
  EXPECT_NE(piped.out.find(row("memory", "elementwise", add)), std::string::npos) << piped.out;
  EXPECT_NE(piped.out.find(row("compute", "gemm", gemm)), std::string::npos) << piped.out;
  const EmoRun empty = emo::testing::RunShell("timeout 60 '" + std::string(EMO_BINARY) + "' model classify - </dev/null");
  EXPECT_NE(empty.exit_code, 0);
  EXPECT_NE(empty.out.find("no kernel names"), std::string::npos) << empty.out;
}

// With a device, each kernel's power share for unknown work: its kind's figure from the file (as
// `emo devices` lists it), 1 for a kind the file gives none.
TEST(CliTest, ModelClassifyWithADeviceGivesTheKindsPowerShare) {
  const std::string conv = "sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x64";
  const std::string gemm = "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT";
  const auto j = EmoJson("model classify --device h200 '" + conv + "' '" + gemm + "'", "classify_power");
  ASSERT_EQ(j["kernels"].size(), 2u) << j.dump();
  EXPECT_EQ(j["kernels"][0]["kind"], "conv");
  const auto devices = EmoJson("devices", "devices_power");
  const nlohmann::json* h200 = nullptr;
  for (const auto& d : devices["devices"]) h200 = d["name"] == "h200" ? &d : h200;
  ASSERT_NE(h200, nullptr) << devices.dump();
  ASSERT_TRUE((*h200)["kinds"].contains("conv") && (*h200)["kinds"]["conv"].contains("power_share")) << h200->dump();
  const double listed = (*h200)["kinds"]["conv"]["power_share"];
  EXPECT_GT(listed, 0.0);
  EXPECT_LT(listed, 1.0);
  EXPECT_DOUBLE_EQ(j["kernels"][0]["power_share"].get<double>(), listed);
  EXPECT_FALSE((*h200)["kinds"].contains("gemm") && (*h200)["kinds"]["gemm"].contains("power_share"));
  EXPECT_DOUBLE_EQ(j["kernels"][1]["power_share"].get<double>(), 1.0);
}

// ---- Usage: help, bounds, conflicts, wording ----

// Every command and command group, as typed after `emo`.
const std::vector<std::string> kCommands = {"analyze",        "whatif",         "optimize",  "calibrate-overhead",
                                            "devices",        "model fit",      "model validate", "model calibrate",
                                            "model classify", "pipeline",       "report"};

// A per-stage, per-clock table in Perseus' format (`stage,instruction,frequency,time,energy`):
// `stages` stages, clocks 1000-1400 MHz; lower clocks are slower and cheaper. Returns its path.
std::string WriteStageProfile(const std::string& name, int stages) {
  const auto path = (std::filesystem::temp_directory_path() / ("emo_cli_test_" + name + ".csv")).string();
  std::ofstream out(path);
  out << "stage,instruction,frequency,time,energy\n";
  for (int s = 0; s < stages; ++s) {
    for (int f = 1000; f <= 1400; f += 50) {
      const double fwd = 0.010 * (1 + 0.2 * s) * 1400.0 / f, bwd = 2 * fwd;
      const double power = 100.0 + 0.0002 * f * f;  // W: more at higher clocks
      out << s << ",forward," << f << "," << fwd << "," << power * fwd << "\n";
      out << s << ",backward," << f << "," << bwd << "," << power * bwd << "\n";
    }
  }
  return path;
}

// The option entries of a help text's "Options:" section: the first line of each entry plus its
// continuation lines, joined.
std::vector<std::string> HelpOptionEntries(const std::string& help) {
  std::vector<std::string> entries;
  std::istringstream in(help.substr(std::min(help.size(), help.find("Options:"))));
  std::string line;
  std::getline(in, line);  // "Options:"
  while (std::getline(in, line)) {
    if (line.empty() || line[0] != ' ') break;  // the section ends
    if (line.starts_with("  -")) {
      entries.push_back(line);
    } else if (!entries.empty()) {
      entries.back() += "\n" + line;
    }
  }
  return entries;
}

// Every option that takes a value shows its default in --help, as `=VALUE` after its type or as
// "default" in its text; required options, outputs and flags have none to show.
TEST(CliTest, HelpShowsEveryDefault) {
  const std::vector<std::string> outputs = {"--json",   "--perfetto", "--policy",       "--frontier",
                                            "--report", "--out",      "--update-device"};
  size_t checked = 0;
  for (const auto& cmd : kCommands) {
    const EmoRun r = Emo(cmd + " --help");
    ASSERT_EQ(r.exit_code, 0) << cmd;
    for (const auto& entry : HelpOptionEntries(r.out)) {
      const std::string first = entry.substr(2, entry.find('\n') - 2);
      const std::string opts = first.substr(0, first.find("  "));  // "--name TYPE=DEFAULT ..."
      const std::string name = opts.substr(0, opts.find(' '));
      const bool flag = opts.find(' ') == std::string::npos;  // no value: a flag (or --help)
      const bool output = std::find(outputs.begin(), outputs.end(), name) != outputs.end();
      if (flag || output || opts.find("REQUIRED") != std::string::npos) continue;
      ++checked;
      const bool shown = opts.find('=') != std::string::npos || entry.find("default") != std::string::npos;
      EXPECT_TRUE(shown) << "emo " << cmd << " " << name << " hides its default:\n" << entry;
    }
  }
  EXPECT_GT(checked, 20u);
  // Defaults users ask about, with their values.
  const std::string optimize = Emo("optimize --help").out;
  // The minimum pack follows the clock-switch latency (20 of them; the H200 file's assumed 500 us
  // gives the 10 ms default).
  for (const char* s : {"--max-slowdown FLOAT:in [0, 1]=0.02", "--min-pack-ms FLOAT:POSITIVE=20x-switch-latency",
                        "so 10 ms", "--switch-latency-us FLOAT:POSITIVE=device-file", "=auto"}) {
    EXPECT_NE(optimize.find(s), std::string::npos) << s << "\n" << optimize;
  }
  EXPECT_NE(Emo("analyze --help").out.find("--slack-threshold-us FLOAT:NONNEGATIVE=20"), std::string::npos);
  EXPECT_NE(Emo("pipeline --help").out.find("--solver TEXT:{fast,exact}=fast"), std::string::npos);
}

// A bound is printed as a reader would write it: never CLI11's "0 to 1.797693e+308" or the
// 309-digit expansion of DBL_MAX, in --help or in the error.
bool UnreadableNumber(const std::string& text) {
  return text.find("e+308") != std::string::npos || std::regex_search(text, std::regex("[0-9]{20,}"));
}

TEST(CliTest, BoundsPrintReadably) {
  for (const auto& cmd : kCommands) {
    const EmoRun r = Emo(cmd + " --help");
    EXPECT_FALSE(UnreadableNumber(r.out)) << cmd << ":\n" << r.out;
  }
  const std::string profile = WriteStageProfile("bounds", 2);
  for (const std::string& args : {"pipeline --profile " + profile + " --stages 0 --microbatches 2",
                                 "pipeline --profile " + profile + " --stages 2 --microbatches 2 --idle-w -1",
                                 "analyze " + kExample + " --slack-threshold-us -1",
                                 "optimize " + kExample + " --device h200 --min-pack-ms 0"}) {
    const EmoRun r = Emo(args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.out;
    EXPECT_FALSE(UnreadableNumber(r.out)) << args << "\n" << r.out;
    EXPECT_NE(r.out.find("out of bounds"), std::string::npos) << args << "\n" << r.out;
  }
  std::filesystem::remove(profile);
}

// `emo foo` names the unknown command and lists the real ones; `emo` alone (and `emo model`
// alone) prints the usage with the list.
TEST(CliTest, UnknownCommandListsTheCommands) {
  const EmoRun foo = Emo("foo");
  EXPECT_EQ(foo.exit_code, 2) << foo.out;
  EXPECT_NE(foo.out.find("unknown command 'foo'"), std::string::npos) << foo.out;
  for (const char* c : {"analyze", "whatif", "optimize", "pipeline", "model", "devices", "calibrate-overhead"}) {
    EXPECT_NE(foo.out.find(c), std::string::npos) << c << "\n" << foo.out;
  }
  const EmoRun bare = Emo("");
  EXPECT_EQ(bare.exit_code, 0) << bare.out;
  EXPECT_NE(bare.out.find("Usage: emo"), std::string::npos) << bare.out;
  for (const char* c : {"analyze", "optimize", "pipeline"}) EXPECT_NE(bare.out.find(c), std::string::npos) << c;

  const EmoRun model_foo = Emo("model foo");
  EXPECT_EQ(model_foo.exit_code, 2) << model_foo.out;
  EXPECT_NE(model_foo.out.find("unknown command 'foo'"), std::string::npos) << model_foo.out;
  for (const char* c : {"validate", "fit", "calibrate"}) EXPECT_NE(model_foo.out.find(c), std::string::npos) << c;
  const EmoRun model = Emo("model");
  EXPECT_NE(model.out.find("Usage: emo model"), std::string::npos) << model.out;
  EXPECT_NE(model.out.find("validate"), std::string::npos) << model.out;
}

// Flags that contradict each other, or one the other makes meaningless, are refused as a usage
// error naming both, before any work.
TEST(CliTest, ConflictingFlagsAreRefused) {
  const auto steps = emo::testing::TempPath("cli_conflict_steps.txt");
  std::ofstream(steps) << "gpt_train_h200.json.gz 20\n";
  const std::string profile = WriteStageProfile("conflict", 2);
  struct Case {
    std::string args, first, second;
  };
  for (const Case& c : std::vector<Case>{
           {"analyze " + kExample + " --step-time 20 --step-times " + steps, "--step-time", "--step-times"},
           {"optimize " + kExample + " --device h200 --step-time 20 --step-times " + steps, "--step-time", "--step-times"},
           {"analyze " + kExample + " --correct-overhead off --step-time 20", "--correct-overhead off", "--step-time"},
           {"whatif " + kExample + " --scale gemm=2 --correct-overhead off --step-times " + steps, "--correct-overhead off",
            "--step-times"},
           {"model validate --profile " + profile + " --device h200 --device-from " + profile, "--device", "--device-from"},
           {"model validate --profile " + profile + " --devices-dir " + EMO_SOURCE_DIR "/devices", "--devices-dir",
            "--device"},
           {"pipeline --profile " + profile + " --stages 2 --microbatches 2 --idle-w 50 --time-limit 5", "--time-limit",
            "--solver exact"},
           // Two outputs on stdout would interleave.
           {"pipeline --profile " + profile + " --stages 2 --microbatches 2 --idle-w 50 --json - --frontier -", "--json -",
            "--frontier -"},
           {"optimize " + kExample + " --device h200 --json - --policy -", "--json -", "--policy -"},
           {"analyze " + kExample + " --json - --perfetto -", "--json -", "--perfetto -"},
           {"calibrate-overhead " + kExample + " --step-time 20 --json - --out -", "--json -", "--out -"},
           {"calibrate-overhead " + kExample + " " + kHeldout + " --step-time 20", "2 traces", "1 --step-time value"},
       }) {
    const EmoRun r = Emo(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.out;
    EXPECT_NE(r.out.find(c.first), std::string::npos) << c.args << "\n" << r.out;
    EXPECT_NE(r.out.find(c.second), std::string::npos) << c.args << "\n" << r.out;
  }
  std::filesystem::remove(steps);
  std::filesystem::remove(profile);
}

// Every numeric flag is bounded to what makes sense, NaN and infinities included; the error is a
// usage error that names the flag.
TEST(CliTest, NumericFlagsAreBounded) {
  const std::string profile = WriteStageProfile("numeric", 2);
  const std::string pipeline = "pipeline --profile " + profile + " --stages 2 --microbatches 2 --idle-w 50 ";
  const std::string optimize = "optimize " + kExample + " --device h200 ";
  struct Case {
    std::string args, flag;
  };
  for (const Case& c : std::vector<Case>{
           {pipeline + "--max-slowdown 5", "--max-slowdown"},
           {pipeline + "--max-slowdown nan", "--max-slowdown"},
           {pipeline + "--max-slowdown -0.1", "--max-slowdown"},
           {"pipeline --profile " + profile + " --stages 2 --microbatches 0 --idle-w 50", "--microbatches"},
           {pipeline + "--time-unit -1", "--time-unit"},
           {pipeline + "--frontier-step nan", "--frontier-step"},
           {pipeline + "--solver exact --time-limit 0", "--time-limit"},
           {pipeline + "--idle-w inf", "--idle-w"},
           {optimize + "--max-slowdown nan", "--max-slowdown"},
           {optimize + "--min-pack-ms inf", "--min-pack-ms"},
           {"analyze " + kExample + " --step-time nan", "--step-time"},
           {"analyze " + kExample + " --slack-threshold-us nan", "--slack-threshold-us"},
           {"calibrate-overhead " + kExample + " --step-time -5", "--step-time"},
           {"whatif " + kExample + " --scale gemm=-1", "--scale"},
           {"model validate --profile " + profile + " --clocks 1", "--clocks"},
           {"model fit --profile " + profile + " --clocks 1", "--clocks"},
       }) {
    const EmoRun r = Emo(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.out;
    EXPECT_NE(r.out.find(c.flag), std::string::npos) << c.args << "\n" << r.out;
  }
  // The pipeline's --max-slowdown is optimize's: a fraction (0.02 = 2 %), not a percentage.
  EXPECT_NE(Emo("pipeline --help").out.find("--max-slowdown FLOAT:in [0, 1]=0"), std::string::npos);
  std::filesystem::remove(profile);
}

// A regex that does not compile is a usage error found before any trace is read.
TEST(CliTest, BadRegexIsAUsageError) {
  for (const std::string& args : {"analyze " + kExample + " --iteration '['",
                                  "optimize " + kExample + " --device h200 --iteration '('",
                                  "whatif " + kExample + " --scale '[=2'"}) {
    const EmoRun r = Emo(args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.out;
    EXPECT_NE(r.out.find("not a valid ECMAScript regex"), std::string::npos) << args << "\n" << r.out;
    EXPECT_EQ(r.out.find("reading"), std::string::npos) << args << "\n" << r.out;
  }
}

// `pipeline --solver exact --time-limit S` bounds the whole frontier sweep, not each deadline:
// with a budget far below one MILP solve the sweep stops after its first deadline (the latency
// target) and says the frontier is partial, in the text, the JSON and the progress on stderr.
// No wall time is asserted (Emo's `timeout` keeps a regression from hanging the suite).
TEST(CliTest, PipelineTimeLimitBoundsTheWholeSweep) {
  const std::string profile = WriteStageProfile("time_limit", 2);
  const auto json = emo::testing::TempPath("cli_time_limit.json");
  const std::string args = "pipeline --profile " + profile +
                           " --stages 2 --microbatches 4 --idle-w 50 --max-slowdown 0.05 --frontier-step 0.0005"
                           " --solver exact --time-limit 0.000001 --json " + json;
  const EmoRun r = Emo(args);
  if (r.out.find("without COIN-OR CBC") != std::string::npos) GTEST_SKIP() << "built without CBC";
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("PARTIAL"), std::string::npos) << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex("ran out after 1 of [0-9]+ deadlines"))) << r.out;
  std::ifstream in(json);
  const auto j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(j.is_object()) << r.out;
  EXPECT_EQ(j["frontier_partial"], true) << j.dump(1);
  ASSERT_TRUE(j.contains("frontier_deadlines")) << j.dump(1);
  EXPECT_EQ(j["frontier_deadlines"]["solved"], 1) << j.dump(1);
  EXPECT_GT(j["frontier_deadlines"]["total"], 10) << j.dump(1);
  EXPECT_EQ(j["solver"]["time_limit_s"], 1e-6) << j.dump(1);
  // The latency target is solved first, so it has its answer even when the sweep is cut short.
  EXPECT_TRUE(j["target"].contains("energy_j")) << j.dump(1);
  std::filesystem::remove(json);
  std::filesystem::remove(profile);
}

// Progress goes to a terminal only: one line rewritten in place ("\r", cleared to its end), gone
// when the work ends; nothing when stderr is a file or a pipe, or with --quiet. `script` (util-linux)
// gives the command a terminal.
TEST(CliTest, ProgressIsShownOnATerminalOnly) {
  const std::string sample = std::string(EMO_SOURCE_DIR) + "/examples/gpt_train_h200.json.gz";
  const std::string analyze = "'" + std::string(EMO_BINARY) + "' analyze '" + sample + "'";
  const EmoRun tty = emo::testing::RunShell("script -qec \"" + analyze + " >/dev/null\" /dev/null");
  ASSERT_EQ(tty.exit_code, 0) << tty.out;
  EXPECT_NE(tty.out.find("\remo analyze: reading " + sample + " ... "), std::string::npos) << tty.out;
  EXPECT_NE(tty.out.find(" s\x1b[K"), std::string::npos) << tty.out;
  EXPECT_TRUE(tty.out.ends_with("\r\x1b[K")) << tty.out;  // cleared at the end
  for (const char* quiet : {"--quiet", "-q"}) {
    const EmoRun q = emo::testing::RunShell("script -qec \"" + analyze + " " + quiet + " >/dev/null\" /dev/null");
    EXPECT_EQ(q.exit_code, 0) << q.out;
    EXPECT_EQ(q.out, "") << quiet;
  }
  const EmoRun piped = emo::testing::RunShell(analyze + " >/dev/null");
  EXPECT_EQ(piped.exit_code, 0);
  EXPECT_EQ(piped.out, "");
  // A failure on a terminal starts its message on a line of its own.
  const EmoRun bad = emo::testing::RunShell("script -qec \"'" + std::string(EMO_BINARY) + "' analyze /dev/null\" /dev/null");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.out.find("\r\x1b[Kemo analyze: "), std::string::npos) << bad.out;
}

// A count and its noun agree: "1 stage", "1 microbatch", "1 iteration", "1 pack", "1 switch".
TEST(CliTest, CountsAgreeWithTheirNouns) {
  const std::regex one_plural(
      "\\b1 (stages|microbatches|instructions|points|deadlines|iterations|packs|switches|phases|nodes|edges|"
      "slack windows|GPU ops|min cuts|MILP solves|clocks|units|traces)\\b");
  const std::string profile = WriteStageProfile("plural", 1);
  const EmoRun pipeline = Emo("pipeline --profile " + profile + " --stages 1 --microbatches 1 --idle-w 50");
  EXPECT_EQ(pipeline.exit_code, 0) << pipeline.out;
  EXPECT_NE(pipeline.out.find("1 stage x 1 microbatch ("), std::string::npos) << pipeline.out;
  EXPECT_FALSE(std::regex_search(pipeline.out, one_plural)) << pipeline.out;
  // No marker matches: the whole trace is one iteration.
  const EmoRun analyze = Emo("analyze " + kExample + " --iteration no-such-marker");
  EXPECT_EQ(analyze.exit_code, 0) << analyze.out;
  EXPECT_NE(analyze.out.find("(1 iteration)"), std::string::npos) << analyze.out;
  EXPECT_FALSE(std::regex_search(analyze.out, one_plural)) << analyze.out;
  // Packs longer than the iteration: one pack, no switch.
  const EmoRun optimize = Emo("optimize " + kExample + " --device h200 --min-pack-ms 1000");
  EXPECT_EQ(optimize.exit_code, 0) << optimize.out;
  EXPECT_NE(optimize.out.find("(1 pack, 0 switches per iteration"), std::string::npos) << optimize.out;
  EXPECT_FALSE(std::regex_search(optimize.out, one_plural)) << optimize.out;
  std::filesystem::remove(profile);
}

// The policy names the iteration its plan was made for (the steady one, which analyze reports),
// the marker regex that finds every iteration at run time, and the latency target.
TEST(CliTest, PolicyNamesTheSteadyIteration) {
  const auto policy_path = emo::testing::TempPath("cli_policy.json");
  const auto plan = EmoJson("optimize " + kExample + " --device h200 --policy " + policy_path, "policy_plan");
  ASSERT_TRUE(plan.is_object());
  std::ifstream in(policy_path);
  const auto policy = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(policy.is_object());
  const auto analysis = EmoJson("analyze " + kExample, "policy_analyze");
  ASSERT_TRUE(analysis.is_object());
  const std::string steady = analysis["steady_iteration"].get<std::string>();
  ASSERT_NE(steady, analysis["per_iteration"][0]["name"].get<std::string>())
      << "the example's steady iteration is its first: the test needs another example";
  const auto& gpu = policy["gpus"][0];
  EXPECT_EQ(gpu["steady_iteration"], steady) << policy.dump(1);
  EXPECT_EQ(policy["iteration_regex"], "^ProfilerStep#\\d+$") << policy.dump(1);
  EXPECT_EQ(analysis["iteration_regex"], "^ProfilerStep#\\d+$");
  EXPECT_NEAR(gpu["predicted"]["iteration_time_us"].get<double>(), plan["plan"]["time_us"].get<double>(), 1e-6);
  EXPECT_GE(gpu["predicted"]["deadline_us"].get<double>(), gpu["predicted"]["iteration_time_us"].get<double>());
  std::filesystem::remove(policy_path);
}

}  // namespace
