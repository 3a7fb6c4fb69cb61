// The profiler-overhead correction: the CPU speed gauge on hand-built traces where every
// speed is known, the CPU-scale fit, and the calibration file.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "emo/analysis/analyze.h"
#include "emo/analysis/overhead.h"
#include "emo/analysis/slack.h"
#include "emo/graph/graph_builder.h"
#include "trace_builder.h"

namespace emo::analysis {
namespace {

using testing::TraceBuilder;

const std::map<std::string, double> kReference = {{"aten::empty", 5000.0}, {"cudaLaunchKernel", 7000.0}};

// Four iterations of 1 ms; in each, every thread runs 25 x (aten::empty, an aten::add that
// allocates through it, cudaLaunchKernel) at `speed[th]` times the reference durations, and
// each launch runs a 1 us kernel. Thread 1 also carries the ProfilerStep annotations.
struct Built {
  trace::Trace trace;
  graph::Graph graph;
  IterationMap iterations;
};
std::unique_ptr<Built> SpeedTrace(std::vector<double> speed, bool with_fixed_cost_events = true) {
  TraceBuilder b;
  int64_t corr = 1;
  for (int k = 0; k < 4; ++k) {
    const double t0 = 1000.0 * k;
    b.Annotation(("ProfilerStep#" + std::to_string(k)).c_str(), t0, t0 + 900);
    for (size_t th = 0; th < speed.size(); ++th) {
      const double s = speed[th];
      const auto tid = static_cast<int64_t>(th + 1);
      double t = t0 + 10;
      for (int i = 0; i < 25; ++i) {
        // aten::add (3 us of its own at reference speed) around a leaf aten::empty.
        b.Op("aten::add", t, t + (5 + 3) * s, tid);
        b.Op(with_fixed_cost_events ? "aten::empty" : "aten::zeros_like", t + 1 * s, t + 6 * s, tid);
        t += 8 * s;
        b.Api(with_fixed_cost_events ? "cudaLaunchKernel" : "cudaLaunchKernelExC", t, t + 7 * s, corr, tid);
        b.Kernel("k", 7, t + 7 * s + 1, t + 7 * s + 2, corr);
        ++corr;
        t += 7 * s + 1;
      }
    }
  }
  auto out = std::make_unique<Built>();
  out->trace = b.Build();
  auto g = graph::BuildGraph(out->trace, {});
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  out->graph = std::move(g).value();
  auto it = FindIterations(out->graph, "");
  EXPECT_TRUE(it.ok()) << it.status().ToString();
  out->iterations = std::move(it).value();
  return out;
}

TEST(SpeedGaugeTest, ReadsEachThreadsSpeedAgainstTheReference) {
  auto t = SpeedTrace({2.0, 1.0});
  const SpeedGauge g = MeasureSpeedGauge(t->graph, t->iterations, 2, kReference);
  ASSERT_TRUE(g.measured);
  ASSERT_EQ(g.threads.size(), 2u);
  // aten::empty's leaf durations 10 and 5 us against the reference 5 us; launches 14 and 7.
  EXPECT_NEAR(g.threads[0].gauge, 2.0, 1e-9);
  EXPECT_NEAR(g.threads[1].gauge, 1.0, 1e-9);
  // The trace's slowdown is the busy-weighted harmonic mean of its threads' gauges.
  const double b0 = static_cast<double>(g.threads[0].busy_ns), b1 = static_cast<double>(g.threads[1].busy_ns);
  ASSERT_GT(b0, 0.0);
  ASSERT_GT(b1, 0.0);
  EXPECT_NEAR(g.slowdown, (b0 + b1) / (b0 / 2.0 + b1 / 1.0), 1e-9);
  EXPECT_EQ(g.leaf_ops, 50u);  // the aten::empty of both threads (aten::add has a child)
  EXPECT_EQ(g.gauge_events, 3u * 2 * 50);  // iterations after the first, both threads
}

// A unit with too few fixed-cost events of its own still gets its speed: its leaf operators
// against their medians over the trace give its speed relative to the trace, and the trace's
// fixed-cost events pin the absolute speed. Here iteration 2 runs 1.5x slower than the others
// and records no fixed-cost event at all.
TEST(SpeedGaugeTest, AUnitWithoutFixedCostEventsTakesItsSpeedFromItsLeafOperators) {
  TraceBuilder b;
  int64_t corr = 1;
  for (int k = 0; k < 4; ++k) {
    const double t0 = 1000.0 * k, s = k == 2 ? 3.0 : 2.0;
    b.Annotation(("ProfilerStep#" + std::to_string(k)).c_str(), t0, t0 + 900);
    double t = t0 + 10;
    for (int i = 0; i < 25; ++i) {
      b.Op("aten::mul", t, t + 4 * s);  // 4 us at reference speed, not a fixed-cost event
      t += 4 * s;
      if (k != 2) {
        b.Op("aten::empty", t, t + 5 * s);
        t += 5 * s;
      }
      b.Api(k == 2 ? "cudaLaunchKernelExC" : "cudaLaunchKernel", t, t + 7 * s, corr);
      b.Kernel("k", 7, t + 7 * s + 1, t + 7 * s + 2, corr++);
      t += 7 * s + 1;
    }
  }
  trace::Trace tr = b.Build();
  auto g = graph::BuildGraph(tr, {});
  ASSERT_TRUE(g.ok());
  auto it = FindIterations(*g, "");
  ASSERT_TRUE(it.ok());
  const SpeedGauge steady = MeasureSpeedGauge(*g, *it, 2, kReference);
  ASSERT_EQ(steady.threads.size(), 1u);
  EXPECT_NEAR(steady.threads[0].gauge, 3.0, 1e-9);
  EXPECT_NEAR(MeasureSpeedGauge(*g, *it, 1, kReference).threads[0].gauge, 2.0, 1e-9);
}

TEST(SpeedGaugeTest, ScalesWithTheReference) {
  auto t = SpeedTrace({1.5, 1.5});
  std::map<std::string, double> slow_reference = kReference;
  for (auto& [name, ns] : slow_reference) ns *= 3.0;
  const double at_reference = MeasureSpeedGauge(t->graph, t->iterations, 1, kReference).slowdown;
  EXPECT_NEAR(at_reference, 1.5, 1e-9);
  EXPECT_NEAR(MeasureSpeedGauge(t->graph, t->iterations, 1, slow_reference).slowdown, 0.5, 1e-9);
}

TEST(SpeedGaugeTest, WithoutFixedCostEventsTheSpeedIsUnmeasured) {
  auto t = SpeedTrace({2.0}, /*with_fixed_cost_events=*/false);
  const SpeedGauge g = MeasureSpeedGauge(t->graph, t->iterations, 1, kReference);
  EXPECT_FALSE(g.measured);
  EXPECT_EQ(g.slowdown, 1.0);
  OverheadCalibration c;
  c.reference_ns = kReference;
  c.ratio_light = 0.6;
  c.source = "test";
  const OverheadModel m = ModelFromCalibration(t->graph, t->iterations, 1, false, c);
  EXPECT_EQ(m.confidence, "low");
  EXPECT_NEAR(m.cpu_scale, 0.6, 1e-12);
}

TEST(OverheadModelTest, ScaleIsRatioTimesReferenceShareAndConfidenceFollowsTheDensity) {
  auto t = SpeedTrace({2.0, 2.0});
  OverheadCalibration c;
  c.reference_ns = kReference;
  c.ratio_light = 0.6;
  c.ratio_shapes = 0.5;
  c.source = "test";
  const SpeedGauge g = MeasureSpeedGauge(t->graph, t->iterations, 2, kReference);
  const double density = g.Density();
  ASSERT_GT(density, 0.0);
  c.density_lo = density * 0.9;
  c.density_hi = density * 1.1;
  const OverheadModel in = ModelFromCalibration(t->graph, t->iterations, 2, false, c);
  EXPECT_NEAR(in.cpu_scale, 0.6 / 2.0, 1e-9);
  EXPECT_EQ(in.confidence, "medium");
  EXPECT_NEAR(ModelFromCalibration(t->graph, t->iterations, 2, true, c).cpu_scale, 0.5 / 2.0, 1e-9);
  c.density_lo = density * 2;
  c.density_hi = density * 3;
  EXPECT_EQ(ModelFromCalibration(t->graph, t->iterations, 2, false, c).confidence, "low");
  c.ratio_light = 0;
  EXPECT_EQ(ModelFromCalibration(t->graph, t->iterations, 2, false, c).source, OverheadSource::kOff);
}

TEST(OverheadModelTest, OutsideTheCalibrationsGroundIsLowAndNeverScaledBeyondWhatItSaw) {
  OverheadCalibration c;
  c.reference_ns = kReference;
  c.ratio_light = 0.6;
  c.source = "test";
  c.slowdown_lo = 1.5;  // the calibration's traces ran their fixed-cost events at 1.5-2.5x
  c.slowdown_hi = 2.5;
  {
    // The same speed as the calibration's hosts: medium, the plain ratio x reference share.
    auto t = SpeedTrace({2.0});
    const OverheadModel m = ModelFromCalibration(t->graph, t->iterations, 2, false, c);
    EXPECT_EQ(m.confidence, "medium") << m.note;
    EXPECT_NEAR(m.cpu_scale, 0.6 / 2.0, 1e-9);
  }
  {
    // A CPU that runs them 8x slower (another host): low, and the scale is the smallest the
    // calibration counts as seen (0.6 / (2.5 x 1.25), its range widened by the tolerance that
    // still counts as like it), not 0.6 / 8.
    auto t = SpeedTrace({8.0});
    const OverheadModel m = ModelFromCalibration(t->graph, t->iterations, 2, false, c);
    EXPECT_EQ(m.confidence, "low");
    EXPECT_NEAR(m.cpu_scale, 0.6 / (2.5 * 1.25), 1e-9);
    EXPECT_NE(m.note.find("8.00x"), std::string::npos) << m.note;
    EXPECT_NEAR(m.band_hi * m.cpu_scale, 1.0, 1e-9) << "the range reaches the traced time";
  }
  {
    // A faster CPU than any the calibration saw: never corrected upward.
    auto t = SpeedTrace({0.5});
    const OverheadModel m = ModelFromCalibration(t->graph, t->iterations, 2, false, c);
    EXPECT_EQ(m.confidence, "low");
    EXPECT_NEAR(m.cpu_scale, 0.6 / (1.5 / 1.25), 1e-9);
    EXPECT_LE(m.cpu_scale, 1.0);
  }
  {
    // Calibrated on H200 hosts; the trace names no GPU: its host cannot be matched.
    c.gpus = {"NVIDIA H200"};
    auto t = SpeedTrace({2.0});
    const OverheadModel m = ModelFromCalibration(t->graph, t->iterations, 2, false, c);
    EXPECT_EQ(m.confidence, "low");
    EXPECT_NE(m.note.find("names no GPU"), std::string::npos) << m.note;
    // ... and on another GPU's host.
    t->trace.meta.device_names = {"NVIDIA A100-SXM4-80GB"};
    const OverheadModel other = ModelFromCalibration(t->graph, t->iterations, 2, false, c);
    EXPECT_EQ(other.confidence, "low");
    EXPECT_NE(other.note.find("A100"), std::string::npos) << other.note;
    t->trace.meta.device_names = {"NVIDIA H200"};
    EXPECT_EQ(ModelFromCalibration(t->graph, t->iterations, 2, false, c).confidence, "medium");
  }
}

TEST(OverheadModelTest, CorrectionScalesCpuNodesAndKeepsGpuOps) {
  auto t = SpeedTrace({2.0});
  const auto traced = MeasuredDurations(t->graph);
  const auto floors = CpuFloorsNs(t->graph, traced);
  const auto d = CorrectedDurations(traced, floors, 0.5);
  const auto& n = t->graph.nodes();
  const auto& tr = t->graph.trace();
  for (uint32_t v = 0; v < n.size(); ++v) {
    if (n.kind[v] == graph::NodeKind::kGpuOp) {
      EXPECT_EQ(d[v], traced[v]);
    } else if (n.kind[v] == graph::NodeKind::kApiCall) {
      // A 14 us launch keeps half, above the 2 us floor of a launch.
      EXPECT_EQ(d[v], std::max(ApiCallFloorNs(tr.Name(tr.cpu.name[n.ref[v]]), traced[v]), traced[v] / 2));
    } else {
      EXPECT_NEAR(static_cast<double>(d[v]), 0.5 * static_cast<double>(traced[v]), 1.0);
    }
  }
  // A launch never drops below its 2 us floor.
  const auto tiny = CorrectedDurations(traced, floors, 0.05);
  for (uint32_t v = 0; v < n.size(); ++v) {
    if (n.kind[v] == graph::NodeKind::kApiCall) {
      EXPECT_GE(tiny[v], 2000);
    }
  }
}

TEST(OverheadModelTest, FitCpuScaleHitsAReachableStepTime) {
  auto t = SpeedTrace({2.0});
  const auto traced = MeasuredDurations(t->graph);
  const auto floors = CpuFloorsNs(t->graph, traced);
  const TimeNs full = CorrectedIterationTime(t->graph, t->iterations, 2, traced, floors, 1.0);
  const TimeNs target = full * 6 / 10;
  const double r = FitCpuScale(t->graph, t->iterations, 2, traced, floors, target);
  EXPECT_GT(r, 0.05);
  EXPECT_LT(r, 1.0);
  EXPECT_NEAR(static_cast<double>(CorrectedIterationTime(t->graph, t->iterations, 2, traced, floors, r)),
              static_cast<double>(target), 0.002 * static_cast<double>(target));
  // Faster than the GPU work allows: the smallest scale.
  EXPECT_EQ(FitCpuScale(t->graph, t->iterations, 2, traced, floors, 1), 0.05);
}

// Samples whose unprofiled times follow ratio x b^0.5 on the same CPU-bound loop, at gauge
// readings from fast to slow: the fit finds the exponent and the ratio, where the exponent 1 it
// replaces would miss the fast and the slow readings in opposite directions.
TEST(OverheadCalibrationTest, TheGaugeExponentIsFittedWithTheRatios) {
  auto t = SpeedTrace({2.0});
  const auto traced = MeasuredDurations(t->graph);
  const auto floors = CpuFloorsNs(t->graph, traced);
  constexpr double kRatio = 0.5, kExponent = 0.5;
  std::vector<CalibrationSample> light;
  for (double slowdown : {0.7, 0.85, 1.0, 1.2, 1.4}) {
    const double b = 1.0 / slowdown;
    const TimeNs truth =
        CorrectedIterationTime(t->graph, t->iterations, 2, traced, floors, kRatio * std::pow(b, kExponent));
    light.push_back({&t->graph, &t->iterations, 2, &traced, &floors, b, truth});
  }
  OverheadCalibration c;
  FitCalibrationRatios(light, {}, c);
  EXPECT_NEAR(c.gauge_exponent, kExponent, 0.051);
  EXPECT_NEAR(c.ratio_light, kRatio, 0.01);
  EXPECT_EQ(c.ratio_shapes, 0.0);  // no record_shapes sample
  EXPECT_NEAR(c.Scale(false, 0.7), kRatio * std::pow(1 / 0.7, kExponent), 0.01);
  // With the exponent held at 1, the loss is larger than at the fitted one.
  double at_one = 0, fitted = 0;
  FitRatio(light, 1.0, &at_one);
  FitRatio(light, c.gauge_exponent, &fitted);
  EXPECT_GT(at_one, 10 * fitted);
}

TEST(OverheadCalibrationTest, FileRoundTripsAndBadFilesNameThemselves) {
  OverheadCalibration c = ShippedCalibration();
  c.density_lo = 10;
  c.density_hi = 40;
  c.gauge_exponent = 0.35;
  const auto dir = std::filesystem::temp_directory_path();
  const auto path = (dir / "emo_overhead_calibration_test.json").string();
  std::ofstream(path) << CalibrationToJson(c).dump(2);
  auto back = LoadOverheadCalibration(path);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->reference_ns, c.reference_ns);
  EXPECT_EQ(back->ratio_light, c.ratio_light);
  EXPECT_EQ(back->ratio_shapes, c.ratio_shapes);
  EXPECT_EQ(back->density_lo, 10);
  EXPECT_EQ(back->density_hi, 40);
  EXPECT_EQ(back->gauge_exponent, 0.35);
  EXPECT_EQ(back->source, path);
  // A file from before the exponent existed means the exponent 1.
  auto old = CalibrationToJson(c);
  old.erase("gauge_exponent");
  std::ofstream(path) << old.dump();
  auto before = LoadOverheadCalibration(path);
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  EXPECT_EQ(before->gauge_exponent, 1.0);

  for (const char* text : {"[1]", "{\"format\": \"emo-overhead-calibration-1\"}",
                           "{\"format\": \"other\", \"reference_ns\": {}, \"ratio\": {}}",
                           "{\"format\": \"emo-overhead-calibration-1\", \"reference_ns\": {\"x\": -1}, \"ratio\": {}}",
                           "{\"format\": \"emo-overhead-calibration-1\", \"reference_ns\": {}, \"ratio\": {\"light\": \"a\"}}",
                           "{\"format\": 1, \"reference_ns\": {}, \"ratio\": {}}",  // threw before the type check
                           "{\"format\": \"emo-overhead-calibration-1\", \"reference_ns\": {}, \"ratio\": {}, "
                           "\"gauge_exponent\": 2}",
                           "{\"format\": \"emo-overhead-calibration-1\", \"reference_ns\": {}, \"ratio\": {}, "
                           "\"gauge_exponent\": \"1\"}",
                           "not json"}) {
    std::ofstream(path) << text;
    auto bad = LoadOverheadCalibration(path);
    ASSERT_FALSE(bad.ok()) << text;
    EXPECT_NE(bad.status().ToString().find(path), std::string::npos) << bad.status().ToString();
  }
  std::filesystem::remove(path);
  EXPECT_FALSE(LoadOverheadCalibration((dir / "emo_no_such_calibration.json").string()).ok());
}

// A rank of a pipeline job: each iteration launches 400 us of compute and then an op `second`
// of 500 us (a receive that waits for a peer the profiler slowed, when it is an NCCL kernel), and
// waits for both (cudaDeviceSynchronize). The CPU work is a few us: the iteration is GPU-bound.
trace::Trace WaitingRankTrace(const char* second) {
  TraceBuilder b;
  int64_t corr = 1;
  for (int k = 0; k < 4; ++k) {
    const double t0 = 1000.0 * k;
    b.Annotation(("ProfilerStep#" + std::to_string(k)).c_str(), t0, t0 + 915);
    b.Api("cudaLaunchKernel", t0 + 2, t0 + 8, corr);
    b.Kernel("ampere_bf16_gemm", 7, t0 + 10, t0 + 410, corr++);
    b.Api("cudaLaunchKernel", t0 + 9, t0 + 14, corr);
    b.Kernel(second, 7, t0 + 410, t0 + 910, corr++);
    b.Api("cudaDeviceSynchronize", t0 + 15, t0 + 912);
  }
  return b.Build();
}

TraceAnalysis AnalyzeWithStep(trace::Trace t, TimeNs step_ns, bool fit_collective_waits = true) {
  AnalyzeOptions options;
  options.overhead.step_time_ns = step_ns;
  options.overhead.fit_collective_waits = fit_collective_waits;
  auto a = AnalyzeTrace(std::move(t), options);
  EXPECT_TRUE(a.ok()) << a.status().ToString();
  return std::move(a).value();
}

TEST(OverheadModelTest, AStepShorterThanTheGpuWorkShortensTheCollectivesWaits) {
  const TraceAnalysis traced = AnalyzeWithStep(WaitingRankTrace("ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)"), -1);
  ASSERT_GT(traced.timeline_ns(), 900'000);
  const TraceAnalysis a =
      AnalyzeWithStep(WaitingRankTrace("ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)"), 600'000);
  EXPECT_EQ(a.overhead.source, OverheadSource::kStepTime);
  // Not a profiler trace: the CPU keeps its traced time, and the receive what fits the step.
  EXPECT_EQ(a.overhead.cpu_scale, 1.0);
  EXPECT_GT(a.overhead.comm_scale, 0.0);
  EXPECT_LT(a.overhead.comm_scale, 0.5);
  EXPECT_NEAR(static_cast<double>(a.timeline_ns()), 600'000.0, 0.002 * 600'000.0);
  EXPECT_EQ(a.overhead.confidence, "medium");
  EXPECT_NE(a.overhead.note.find("communication kernels keep"), std::string::npos) << a.overhead.note;
  // Only the collectives changed: every other GPU op keeps its traced time.
  const auto& n = a.graph->nodes();
  const auto& t = *a.trace;
  int comm = 0;
  for (uint32_t v = 0; v < n.size(); ++v) {
    if (n.kind[v] != graph::NodeKind::kGpuOp) continue;
    if (IsCommunicationKernel(t.Name(t.gpu.name[n.ref[v]]))) {
      ++comm;
      EXPECT_NEAR(static_cast<double>(a.durations[v]), a.overhead.comm_scale * 500'000.0, 1.0);
    } else {
      EXPECT_EQ(a.durations[v], a.traced_durations[v]);
    }
  }
  EXPECT_EQ(comm, 4);
}

TEST(OverheadModelTest, WithoutCollectivesOrForAJobTheStepOutOfReachStaysLowConfidence) {
  // The same loop with a compute kernel in the receive's place: nothing can give way.
  const TraceAnalysis compute = AnalyzeWithStep(WaitingRankTrace("ampere_bf16_gemm_2"), 600'000);
  EXPECT_EQ(compute.overhead.comm_scale, 1.0);
  EXPECT_EQ(compute.overhead.cpu_scale, kMinCpuScale);
  EXPECT_EQ(compute.overhead.confidence, "low");
  EXPECT_GT(compute.timeline_ns(), 900'000);
  // The ranks of a job read together: the joint replay times the collectives, not the fit.
  const TraceAnalysis rank =
      AnalyzeWithStep(WaitingRankTrace("ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)"), 600'000, false);
  EXPECT_EQ(rank.overhead.comm_scale, 1.0);
  EXPECT_EQ(rank.overhead.confidence, "low");
  // A step the collectives cannot reach even at no time at all (the compute alone is 400 us).
  const TraceAnalysis short_step =
      AnalyzeWithStep(WaitingRankTrace("ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)"), 300'000);
  EXPECT_EQ(short_step.overhead.comm_scale, 1.0);
  EXPECT_EQ(short_step.overhead.confidence, "low");
}

// A GPU-bound loop measured slower than its trace however slow its CPU: only its GPU ops can
// explain it (they ran at a lower clock), so they are lengthened to meet the step; a CPU-bound
// loop, a step within noise of the trace, or a rank with collectives keep the CPU fit.
// A loop whose CPU runs ahead: each step launches a 400 us and a 500 us kernel (`second`) within
// 20 us, so the kernels queue back to back; the host waits once, at the end.
trace::Trace RunAheadTrace(const char* second) {
  TraceBuilder b;
  int64_t corr = 1;
  for (int k = 0; k < 6; ++k) {
    const double t0 = 30.0 * k, g0 = 10.0 + 900.0 * k;
    b.Annotation(("ProfilerStep#" + std::to_string(k)).c_str(), t0, t0 + 20);
    b.Api("cudaLaunchKernel", t0 + 2, t0 + 8, corr);
    b.Kernel("ampere_bf16_gemm", 7, g0, g0 + 400, corr++);
    b.Api("cudaLaunchKernel", t0 + 9, t0 + 14, corr);
    b.Kernel(second, 7, g0 + 400, g0 + 900, corr++);
  }
  b.Api("cudaDeviceSynchronize", 200, 5412);
  return b.Build();
}

TEST(OverheadModelTest, AGpuBoundLoopSlowerThanItsTraceLengthensItsGpuOps) {
  const TraceAnalysis traced = AnalyzeWithStep(RunAheadTrace("ampere_bf16_gemm_2"), -1);
  const double iteration = static_cast<double>(traced.timeline_ns());
  ASSERT_NEAR(iteration, 900'000.0, 1'000.0);
  const TraceAnalysis a = AnalyzeWithStep(RunAheadTrace("ampere_bf16_gemm_2"), 1'200'000);
  EXPECT_EQ(a.overhead.source, OverheadSource::kStepTime);
  EXPECT_EQ(a.overhead.cpu_scale, 1.0);  // not a profiler trace: the CPU as traced
  EXPECT_NEAR(a.overhead.gpu_scale, 1200.0 / 900.0, 0.01);
  EXPECT_EQ(a.overhead.comm_scale, 1.0);
  EXPECT_NEAR(static_cast<double>(a.timeline_ns()), 1'200'000.0, 0.002 * 1'200'000.0);
  EXPECT_EQ(a.overhead.confidence, "medium");
  EXPECT_NE(a.overhead.note.find("GPU-bound: its GPU ops are taken as"), std::string::npos) << a.overhead.note;
  const auto& n = a.graph->nodes();
  for (uint32_t v = 0; v < n.size(); ++v) {
    const double want = n.kind[v] == graph::NodeKind::kGpuOp
                            ? a.overhead.gpu_scale * static_cast<double>(a.traced_durations[v])
                            : static_cast<double>(a.traced_durations[v]);
    EXPECT_NEAR(static_cast<double>(a.durations[v]), want, 1.0) << v;
  }
  // Within the noise of the trace: the CPU fit's reading stands (at its bound, low confidence).
  const TraceAnalysis close = AnalyzeWithStep(RunAheadTrace("ampere_bf16_gemm_2"),
                                              static_cast<TimeNs>(iteration * 1.01));
  EXPECT_EQ(close.overhead.gpu_scale, 1.0);
  // Past what any GPU scale explains: not taken as a clock.
  const TraceAnalysis far = AnalyzeWithStep(RunAheadTrace("ampere_bf16_gemm_2"), 3'000'000);
  EXPECT_EQ(far.overhead.gpu_scale, 1.0);
  EXPECT_EQ(far.overhead.confidence, "low");
  // A rank whose receive waits for a peer: its peers may be what made the step longer.
  const TraceAnalysis rank =
      AnalyzeWithStep(RunAheadTrace("ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)"), 1'200'000);
  EXPECT_EQ(rank.overhead.gpu_scale, 1.0);
  // A loop that waits for its GPU every step and then works on the host (WaitingRankTrace: 85 us
  // of each 1000 us on the CPU alone) is not GPU-bound: the CPU fit stands.
  const TraceAnalysis waiting = AnalyzeWithStep(WaitingRankTrace("ampere_bf16_gemm_2"), 1'200'000);
  EXPECT_EQ(waiting.overhead.gpu_scale, 1.0);
}

// A CPU-bound loop (each iteration 600 us of CPU work, then a 20 us kernel it waits for) measured
// far slower than even a CPU 1.5x as slow allows: the CPU sets its pace, so no GPU scale.
TEST(OverheadModelTest, ACpuBoundLoopSlowerThanItsTraceKeepsItsGpuOps) {
  TraceBuilder b;
  int64_t corr = 1;
  for (int k = 0; k < 4; ++k) {
    const double t0 = 1000.0 * k;
    b.Annotation(("ProfilerStep#" + std::to_string(k)).c_str(), t0, t0 + 640);
    b.Op("aten::slow_host_work", t0 + 1, t0 + 601);
    b.Api("cudaLaunchKernel", t0 + 602, t0 + 608, corr);
    b.Kernel("ampere_bf16_gemm", 7, t0 + 610, t0 + 630, corr++);
    b.Api("cudaDeviceSynchronize", t0 + 609, t0 + 632);
  }
  const TraceAnalysis a = AnalyzeWithStep(b.Build(), 3'000'000);
  EXPECT_EQ(a.overhead.gpu_scale, 1.0);
  EXPECT_EQ(a.overhead.cpu_scale, kMaxCpuScale);
  EXPECT_EQ(a.overhead.confidence, "low");
}

// A GPU-bound loop (900 us of kernels, 928 us per iteration at the least CPU time): a measured
// step just under that is run-to-run noise, and the timeline keeps high confidence with a note
// that says so; a step well under it stays low.
TEST(OverheadModelTest, AStepWithinNoiseOfTheGpuWorkIsAGpuBoundLoop) {
  const TraceAnalysis near = AnalyzeWithStep(WaitingRankTrace("ampere_bf16_gemm_2"), 920'000);
  EXPECT_EQ(near.overhead.cpu_scale, kMinCpuScale);
  EXPECT_EQ(near.overhead.confidence, "high");
  EXPECT_NE(near.overhead.note.find("GPU-bound: the traced GPU work alone takes"), std::string::npos) << near.overhead.note;
  EXPECT_GT(near.timeline_ns(), 920'000);
  EXPECT_LE(near.timeline_ns(), 920'000 * 102 / 100);
  const TraceAnalysis far = AnalyzeWithStep(WaitingRankTrace("ampere_bf16_gemm_2"), 850'000);
  EXPECT_EQ(far.overhead.cpu_scale, kMinCpuScale);
  EXPECT_EQ(far.overhead.confidence, "low");
  EXPECT_NE(far.overhead.note.find("shorter than the traced GPU work allows"), std::string::npos) << far.overhead.note;
}

}  // namespace
}  // namespace emo::analysis
