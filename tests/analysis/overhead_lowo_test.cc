// Issue Order 2's acceptance criterion as a regression test: on every trace of
// ../shared/traces/h200/overhead (3 workloads x sync/async x light/shapes) the corrected
// iteration time is within 10 % of the measured unprofiled median, scored leave-one-workload-
// out: the reference table and the ratios come from the other two workloads' traces only.
// (bench/overhead_lowo.sh prints the same table through the command line.) And the shipped
// calibration is what the fit gives on the nine workloads with truths.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "emo/analysis/analyze.h"
#include "emo/base/file.h"
#include "test_util.h"

namespace emo::analysis {
namespace {

TEST(OverheadLowoTest, HeldOutWorkloadWithinTenPercent) {
  EMO_REQUIRE_SHARED();
  const std::string dir = SharedPath("traces/h200/overhead/");
  auto truth_text = ReadFileMaybeGzip(dir + "truth.json");
  ASSERT_TRUE(truth_text.ok()) << truth_text.status().ToString();
  const auto truth = nlohmann::json::parse(*truth_text);
  const std::vector<std::string> workloads = {"gpt_train", "resnet_train", "multistream"};
  struct Run {
    std::string workload;
    TraceAnalysis a;
    TimeNs unprofiled_ns;
  };
  std::vector<Run> runs;
  AnalyzeOptions options;
  options.overhead.mode = OverheadOptions::Mode::kOff;
  for (const auto& w : workloads) {
    for (const char* mode : {"sync", "async"}) {
      for (const char* cfg : {"light", "shapes"}) {
        auto a = AnalyzeTrace(fmt::format("{}{}_{}_{}.json.gz", dir, w, mode, cfg), options);
        ASSERT_TRUE(a.ok()) << a.status().ToString();
        const double s = truth[w][std::string("unprofiled_") + mode]["median_s"].get<double>();
        runs.push_back({w, std::move(a).value(), static_cast<TimeNs>(s * 1e9)});
      }
    }
  }
  double worst = 0;
  for (const auto& held : workloads) {
    std::vector<const TraceAnalysis*> training;
    std::vector<TimeNs> training_ns;
    for (const auto& r : runs) {
      if (r.workload == held) continue;
      training.push_back(&r.a);
      training_ns.push_back(r.unprofiled_ns);
    }
    ASSERT_EQ(training.size(), 8u);
    const OverheadCalibration cal = FitOverheadCalibration(training, training_ns).calibration;
    for (const auto& r : runs) {
      if (r.workload != held) continue;
      const auto& a = r.a;
      const OverheadModel m = ModelFromCalibration(*a.graph, a.iterations, a.steady, a.trace->meta.record_shapes, cal);
      const TimeNs corrected =
          CorrectedIterationTime(*a.graph, a.iterations, a.steady, a.traced_durations, a.cpu_floors, m.cpu_scale);
      const double err = 100.0 * (static_cast<double>(corrected) / static_cast<double>(r.unprofiled_ns) - 1.0);
      std::cout << fmt::format("{:<60} traced {:7.2f} ms, corrected {:7.2f} ms, unprofiled {:7.2f} ms: {:+5.1f} %\n",
                               a.trace->meta.source_path, NsToMs(a.measured_ns()), NsToMs(corrected),
                               NsToMs(r.unprofiled_ns), err);
      EXPECT_LE(std::abs(err), 10.0) << a.trace->meta.source_path;
      worst = std::max(worst, std::abs(err));
    }
  }
  std::cout << fmt::format("worst |error|: {:.1f} %\n", worst);
}

// ShippedCalibration's numbers are the fit of FitOverheadCalibration (what `emo calibrate-overhead`
// runs) on the 36 traces of the nine H200 workloads with unprofiled truths, rounded as written
// there: a change to the fit that moves them fails here until the shipped numbers are refitted.
TEST(OverheadLowoTest, TheShippedCalibrationIsTheFitOnTheNineWorkloads) {
  EMO_REQUIRE_SHARED();
  const std::map<std::string, std::string> folders = {
      {"gpt_train", SharedPath("traces/h200/overhead/")},
      {"resnet_train", SharedPath("traces/h200/overhead/")},
      {"multistream", SharedPath("traces/h200/overhead/")},
      {"mlp_small_train", EMO_SOURCE_DIR "/data/h200_heldout/"},
      {"bert_infer", EMO_SOURCE_DIR "/data/h200_heldout/"},
      {"cnn_dataload_train", EMO_SOURCE_DIR "/data/h200_heldout/"},
      {"gpt_small_train", EMO_SOURCE_DIR "/data/h200_heldout2/"},
      {"resnet_small_train", EMO_SOURCE_DIR "/data/h200_heldout2/"},
      {"lstm_lm_train", EMO_SOURCE_DIR "/data/h200_heldout2/"}};
  AnalyzeOptions options;
  options.overhead.mode = OverheadOptions::Mode::kOff;
  std::vector<TraceAnalysis> all;
  std::vector<TimeNs> unprofiled;
  for (const auto& [w, dir] : folders) {
    auto truth_text = ReadFileMaybeGzip(dir + "truth.json");
    ASSERT_TRUE(truth_text.ok()) << truth_text.status().ToString();
    const auto truth = nlohmann::json::parse(*truth_text);
    for (const char* mode : {"sync", "async"}) {
      for (const char* cfg : {"light", "shapes"}) {
        auto a = AnalyzeTrace(fmt::format("{}{}_{}_{}.json.gz", dir, w, mode, cfg), options);
        ASSERT_TRUE(a.ok()) << a.status().ToString();
        all.push_back(std::move(a).value());
        unprofiled.push_back(static_cast<TimeNs>(truth[w][std::string("unprofiled_") + mode]["median_s"].get<double>() * 1e9));
      }
    }
  }
  std::vector<const TraceAnalysis*> runs;
  for (const auto& a : all) runs.push_back(&a);
  const OverheadCalibration fit = FitOverheadCalibration(runs, unprofiled).calibration;
  const OverheadCalibration shipped = ShippedCalibration();
  ASSERT_EQ(fit.reference_ns.size(), shipped.reference_ns.size());
  for (const auto& [name, ns] : shipped.reference_ns) EXPECT_NEAR(fit.reference_ns.at(name), ns, 0.5) << name;
  EXPECT_NEAR(fit.ratio_light, shipped.ratio_light, 1e-9);
  EXPECT_NEAR(fit.ratio_shapes, shipped.ratio_shapes, 1e-9);
  EXPECT_NEAR(fit.gauge_exponent, shipped.gauge_exponent, 1e-9);
  EXPECT_NEAR(fit.density_lo, shipped.density_lo, 1e-4);
  EXPECT_NEAR(fit.density_hi, shipped.density_hi, 1e-4);
  EXPECT_NEAR(fit.slowdown_lo, shipped.slowdown_lo, 1e-4);
  EXPECT_NEAR(fit.slowdown_hi, shipped.slowdown_hi, 1e-4);
  EXPECT_EQ(fit.gpus, shipped.gpus);
}

}  // namespace
}  // namespace emo::analysis
