// The overhead calibration's fit (FitCalibrationRatios: coarse-to-fine grids for the gauge
// exponent and the ratios) against an exhaustive reference search (every exponent on a 0.05 grid,
// every ratio on a 0.01 grid over [0.2, 1.5] then 0.00025 around the best: the fit until
// 2c1078c), on the 36 H200 traces with unprofiled truths (../shared/traces/h200/overhead and
// data/h200_heldout, data/h200_heldout2).
//
//   build/ci/bench/overhead_fit_bench                      # speed, the three overhead workloads
//   build/ci/bench/overhead_fit_bench --compare            # first: both fits on 16 subsets (~9 min)
// --compare prints, per subset (the three workloads, each leave-one-out of them, all nine, each
// leave-one-out of the nine, two held-out sets), both fits and whether they agree, and exits 1
// when one differs.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "emo/analysis/analyze.h"
#include "emo/base/file.h"

namespace emo::analysis {
namespace {

double ReferenceFitRatio(const std::vector<CalibrationSample>& samples, double exponent, double* fitted_loss) {
  auto loss = [&](double ratio) {
    double sum = 0;
    for (const auto& s : samples) {
      const TimeNs c = CorrectedIterationTime(*s.graph, *s.iterations, s.steady, *s.traced, *s.floors,
                                              ratio * std::pow(s.b, exponent));
      const double r = std::log(static_cast<double>(std::max<TimeNs>(1, c)) / static_cast<double>(s.unprofiled_ns));
      sum += r * r;
    }
    return sum;
  };
  double best_ratio = 0.2, best = loss(best_ratio);
  auto scan = [&](double lo, double hi, double step) {
    const int steps = static_cast<int>(std::lround((hi - lo) / step));
    for (int k = 0; k <= steps; ++k) {
      const double ratio = lo + step * k;
      const double l = loss(ratio);
      if (l < best - 1e-12) {
        best = l;
        best_ratio = ratio;
      }
    }
  };
  scan(0.2, 1.5, 0.01);
  scan(std::max(0.2, best_ratio - 0.01), best_ratio + 0.01, 0.00025);
  *fitted_loss = best;
  return best_ratio;
}

void ReferenceFit(const std::vector<CalibrationSample>& light, const std::vector<CalibrationSample>& shapes,
                  OverheadCalibration& cal) {
  double best = std::numeric_limits<double>::infinity();
  for (int k = 0; k <= 30; ++k) {
    const double exponent = 0.05 * k;
    double loss_light = 0, loss_shapes = 0;
    const double rl = light.empty() ? 0.0 : ReferenceFitRatio(light, exponent, &loss_light);
    const double rs = shapes.empty() ? 0.0 : ReferenceFitRatio(shapes, exponent, &loss_shapes);
    if (loss_light + loss_shapes < best - 1e-12) {
      best = loss_light + loss_shapes;
      cal.gauge_exponent = exponent;
      cal.ratio_light = rl;
      cal.ratio_shapes = rs;
    }
  }
}

struct Run {
  std::string workload;
  TraceAnalysis a;
  TimeNs unprofiled_ns;
};

std::vector<Run>& Runs() {
  static std::vector<Run> runs;
  return runs;
}

const std::vector<std::pair<std::string, std::string>> kWorkloads = {
    {"gpt_train", EMO_SHARED_DIR "/traces/h200/overhead/"},
    {"resnet_train", EMO_SHARED_DIR "/traces/h200/overhead/"},
    {"multistream", EMO_SHARED_DIR "/traces/h200/overhead/"},
    {"mlp_small_train", EMO_SOURCE_DIR "/data/h200_heldout/"},
    {"bert_infer", EMO_SOURCE_DIR "/data/h200_heldout/"},
    {"cnn_dataload_train", EMO_SOURCE_DIR "/data/h200_heldout/"},
    {"gpt_small_train", EMO_SOURCE_DIR "/data/h200_heldout2/"},
    {"resnet_small_train", EMO_SOURCE_DIR "/data/h200_heldout2/"},
    {"lstm_lm_train", EMO_SOURCE_DIR "/data/h200_heldout2/"}};

bool LoadRuns() {
  AnalyzeOptions options;
  options.overhead.mode = OverheadOptions::Mode::kOff;
  for (const auto& [w, dir] : kWorkloads) {
    auto text = ReadFileMaybeGzip(dir + "truth.json");
    if (!text.ok()) {
      std::cerr << "overhead_fit_bench: " << text.status().ToString() << "\n";
      return false;
    }
    const auto truth = nlohmann::json::parse(*text);
    for (const char* mode : {"sync", "async"}) {
      for (const char* cfg : {"light", "shapes"}) {
        auto a = AnalyzeTrace(fmt::format("{}{}_{}_{}.json.gz", dir, w, mode, cfg), options);
        if (!a.ok()) {
          std::cerr << "overhead_fit_bench: " << a.status().ToString() << "\n";
          return false;
        }
        const double s = truth[w][std::string("unprofiled_") + mode]["median_s"].get<double>();
        Runs().push_back({w, std::move(a).value(), static_cast<TimeNs>(s * 1e9)});
      }
    }
  }
  return true;
}

// The samples of the runs of `workloads`, under the reference table fitted on them.
struct Samples {
  OverheadCalibration base;
  std::vector<CalibrationSample> light, shapes;
};
Samples SamplesOf(const std::vector<std::string>& workloads) {
  Samples s;
  std::vector<const graph::Graph*> graphs;
  std::vector<const IterationMap*> its;
  std::vector<const Run*> chosen;
  for (const Run& r : Runs()) {
    if (std::find(workloads.begin(), workloads.end(), r.workload) == workloads.end()) continue;
    chosen.push_back(&r);
    graphs.push_back(r.a.graph.get());
    its.push_back(&r.a.iterations);
  }
  s.base.reference_ns = GaugeReference(graphs, its);
  for (const Run* r : chosen) {
    const auto& a = r->a;
    const double b = MeasureSpeedGauge(*a.graph, a.iterations, a.steady, s.base.reference_ns).b();
    (a.trace->meta.record_shapes ? s.shapes : s.light)
        .push_back({a.graph.get(), &a.iterations, a.steady, &a.traced_durations, &a.cpu_floors, b, r->unprofiled_ns});
  }
  return s;
}

const std::vector<std::string> kThree = {"gpt_train", "resnet_train", "multistream"};

using FitFunction = void (*)(const std::vector<CalibrationSample>&, const std::vector<CalibrationSample>&,
                            OverheadCalibration&);

void BM_Fit(benchmark::State& state, FitFunction fit) {
  const Samples s = SamplesOf(kThree);
  for (auto _ : state) {
    OverheadCalibration c = s.base;
    fit(s.light, s.shapes, c);
    benchmark::DoNotOptimize(c.ratio_light);
  }
}
BENCHMARK_CAPTURE(BM_Fit, coarse_to_fine, &FitCalibrationRatios)->Unit(benchmark::kSecond)->Iterations(3);
BENCHMARK_CAPTURE(BM_Fit, exhaustive_reference, &ReferenceFit)->Unit(benchmark::kSecond)->Iterations(3);

int Compare() {
  std::vector<std::pair<std::string, std::vector<std::string>>> subsets;
  std::vector<std::string> nine;
  for (const auto& w : kWorkloads) nine.push_back(w.first);
  auto without = [](const std::vector<std::string>& all, const std::string& held) {
    std::vector<std::string> out;
    for (const auto& w : all) {
      if (w != held) out.push_back(w);
    }
    return out;
  };
  subsets.push_back({"three", kThree});
  for (const auto& h : kThree) subsets.push_back({"three without " + h, without(kThree, h)});
  subsets.push_back({"nine", nine});
  for (const auto& h : nine) subsets.push_back({"nine without " + h, without(nine, h)});
  subsets.push_back({"h200_heldout", {nine[3], nine[4], nine[5]}});
  subsets.push_back({"h200_heldout2", {nine[6], nine[7], nine[8]}});
  int differ = 0;
  std::cout << fmt::format("{:<34} {:>28}   {:>28}\n", "subset", "reference: alpha light shapes",
                           "coarse-to-fine (seconds)");
  for (const auto& [name, workloads] : subsets) {
    const Samples s = SamplesOf(workloads);
    OverheadCalibration ref = s.base, fit = s.base;
    const auto t0 = std::chrono::steady_clock::now();
    ReferenceFit(s.light, s.shapes, ref);
    const auto t1 = std::chrono::steady_clock::now();
    FitCalibrationRatios(s.light, s.shapes, fit);
    const auto t2 = std::chrono::steady_clock::now();
    const bool same = std::abs(ref.gauge_exponent - fit.gauge_exponent) < 1e-9 &&
                      std::abs(ref.ratio_light - fit.ratio_light) < 1e-9 &&
                      std::abs(ref.ratio_shapes - fit.ratio_shapes) < 1e-9;
    differ += same ? 0 : 1;
    const auto secs = [](auto d) { return std::chrono::duration<double>(d).count(); };
    std::cout << fmt::format("{:<34} {:.2f} {:.5f} {:.5f} ({:5.1f} s)   {:.2f} {:.5f} {:.5f} ({:5.1f} s)  {}\n",
                             name, ref.gauge_exponent, ref.ratio_light, ref.ratio_shapes, secs(t1 - t0),
                             fit.gauge_exponent, fit.ratio_light, fit.ratio_shapes, secs(t2 - t1),
                             same ? "same" : "DIFFERENT")
              << std::flush;
  }
  std::cout << fmt::format("{} of {} subsets differ\n", differ, subsets.size());
  return differ == 0 ? 0 : 1;
}

}  // namespace
}  // namespace emo::analysis

int main(int argc, char** argv) {
  bool compare = false;
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::strcmp(argv[i], "--compare") == 0) {
      compare = true;
    } else {
      args.push_back(argv[i]);
    }
  }
  if (!std::filesystem::exists(EMO_SHARED_DIR "/traces/h200/overhead")) {
    std::cerr << "overhead_fit_bench: " EMO_SHARED_DIR "/traces/h200/overhead is missing (../shared beside the "
                 "repository)\n";
    return 2;
  }
  if (!emo::analysis::LoadRuns()) return 2;
  if (compare && emo::analysis::Compare() != 0) return 1;
  int n = static_cast<int>(args.size());
  benchmark::Initialize(&n, args.data());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
