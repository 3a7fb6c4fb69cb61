// The `emo` command line as users call it: the JSON fields of the BRIEF's contract, exit codes,
// and errors that name the file. Runs the built binary on traces shipped in the repository.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

namespace {

struct EmoRun {
  int exit_code = -1;
  std::string out;  // stdout and stderr together
};

EmoRun Emo(const std::string& args) {
  EmoRun r;
  const std::string cmd = std::string(EMO_BINARY) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// Runs emo with `--json FILE` and parses FILE.
nlohmann::json EmoJson(const std::string& args, const std::string& name) {
  const auto path = (std::filesystem::temp_directory_path() / ("emo_cli_test_" + name + ".json")).string();
  const EmoRun r = Emo(args + " --json " + path);
  EXPECT_EQ(r.exit_code, 0) << r.out;
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  auto j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  std::filesystem::remove(path);
  return j;
}

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
  const auto cal = (std::filesystem::temp_directory_path() / "emo_cli_test_overhead_calibration.json").string();
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
  const auto file = (std::filesystem::temp_directory_path() / "emo_cli_test_step_times.txt").string();
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

// The shipped calibration marks how far to trust it: a loop unlike the ones it was fitted on
// (here inference: many more operators per ms of CPU time) gets a low confidence and a range
// around the corrected time.
TEST(CliTest, OverheadCorrectionSaysHowSureItIs) {
  const auto j = EmoJson("analyze " + kHeldout, "analyze_confidence");
  ASSERT_TRUE(j.is_object());
  const auto& o = j["overhead"];
  EXPECT_EQ(o["confidence"], "low") << o.dump();
  for (const char* k : {"per_event_ns", "events", "source", "cpu_scale", "note"}) EXPECT_TRUE(o.contains(k)) << k;
  const auto& it = j["iteration_time_us"];
  const double lo = it["corrected_range"][0].get<double>(), hi = it["corrected_range"][1].get<double>();
  EXPECT_LT(lo, it["corrected"].get<double>());
  EXPECT_GT(hi, it["corrected"].get<double>());
  const auto bad = Emo("analyze " + kHeldout + " --overhead-calibration " + kHeldout);
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.out.find("not an overhead calibration"), std::string::npos) << bad.out;
}

TEST(CliTest, ErrorsNameTheFileAndFail) {
  const EmoRun missing = Emo("analyze /nonexistent/trace.json.gz");
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_NE(missing.out.find("/nonexistent/trace.json.gz"), std::string::npos) << missing.out;

  const auto not_trace = (std::filesystem::temp_directory_path() / "emo_cli_test_not_a_trace.json").string();
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
                          "model calibrate", "pipeline"}) {
    const EmoRun r = Emo(std::string(cmd) + " --help");
    EXPECT_EQ(r.exit_code, 0) << cmd;
    EXPECT_NE(r.out.find("--json"), std::string::npos) << cmd << ": " << r.out;
  }
}

}  // namespace
