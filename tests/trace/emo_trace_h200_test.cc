// The EMO traces recorded on the H200 (data/h200_emo, examples/; the DDP ranks on two H200s): read
// whole, analysed with an exact replay and no inferred cross-stream edge, the CUDA graph's kernels
// in place, and the untraced step time and energy the tracer measured beside them.
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "emo/analysis/analyze.h"
#include "emo/trace/reader.h"

namespace emo::testing {
namespace {

struct Case {
  const char* file;
  int traced;       // iterations traced (--iterations)
  bool streams;     // several streams with event waits and a CUDA graph
  int untraced = 100;  // fewer untraced iterations than this would say the window was lost
  bool clocks = false;  // recorded with NVML SM clock reads (ClockRecord)
};

class EmoTraceH200Test : public ::testing::TestWithParam<Case> {};

double WindowSeconds(const trace::GpuEnergy& g) { return static_cast<double>(g.window_end - g.window_start) * 1e-9; }

TEST_P(EmoTraceH200Test, ReadsAndAnalysesExactly) {
  const Case& c = GetParam();
  const std::string path = std::string(EMO_SOURCE_DIR) + "/" + c.file;
  auto t = trace::ReadTrace(path);
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_TRUE(t->meta.run.has_value());
  const auto& run = *t->meta.run;
  EXPECT_TRUE(run.complete) << run.end_note;
  EXPECT_EQ(run.dropped_records, 0);
  EXPECT_EQ(run.traced_iterations, c.traced);
  EXPECT_GT(run.untraced_iterations, c.untraced);
  EXPECT_GT(run.untraced_step_ns, 0);
  ASSERT_EQ(run.gpus.size(), 1u);
  EXPECT_EQ(run.gpus[0].name, "NVIDIA H200");
  const auto& g = run.gpus[0];
  EXPECT_GT(g.energy_per_iteration_j, 0.0);
  EXPECT_EQ(g.traced_clock.Known(), c.clocks);
  EXPECT_EQ(g.clock.Known(), c.clocks);
  if (c.clocks) {
    EXPECT_GT(g.clock.samples, static_cast<int64_t>(WindowSeconds(g) / 0.06));  // a read every ~50 ms
    // Five traced steps of 27 or 43 ms: read over at least 200 ms around them.
    EXPECT_GE(g.traced_clock.samples, 3);
  }
  // The counter updates every ~100 ms; each end of the window is known to within one update,
  // so the relative uncertainty is two counter periods over the window (a 0.4 s window, as the
  // streams program's, knows little; the training loops' 2 s windows about 10 %).
  const double window_s = static_cast<double>(g.window_end - g.window_start) * 1e-9;
  EXPECT_GT(g.counter_period_ns, 50'000'000);
  EXPECT_LT(g.counter_period_ns, 200'000'000);
  EXPECT_NEAR(g.uncertainty_per_iteration_j / g.energy_per_iteration_j,
              2.0 * static_cast<double>(g.counter_period_ns) * 1e-9 / window_s, 1e-9);

  analysis::AnalyzeOptions options;
  options.overhead.mode = analysis::OverheadOptions::Mode::kOff;  // the traced timeline
  auto a = analysis::AnalyzeTrace(path, options);
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(static_cast<int>(a->iterations.iterations.size()), c.traced);
  EXPECT_LE(std::abs(a->replay_error_pct()), 1.0);
  const auto d = a->AllDiagnostics();
  EXPECT_EQ(d.Count(Diag::kWaitEdgeRecordPair) + d.Count(Diag::kWaitEdgeLastLaunch) + d.Count(Diag::kWaitEdgeNone) +
                d.Count(Diag::kWaitEdgeEventId),
            0u)
      << "every stream wait names its record (cudaEventSyncId)";
  if (c.streams) {
    EXPECT_GT(d.Count(Diag::kWaitEdgeExact), 0u);
    EXPECT_GT(d.Count(Diag::kCudaGraphKernels), 0u);
    size_t graph_kernels = 0;
    for (size_t i = 0; i < t->gpu.size(); ++i) graph_kernels += t->gpu.graph_id[i] >= 0 ? 1 : 0;
    EXPECT_EQ(graph_kernels % 6, 0u) << "the captured graph has 6 kernels: whole graphs only";
    EXPECT_GE(graph_kernels, 6u * static_cast<size_t>(c.traced));
  }
  // By default the analysis stands on the untraced step time the tracer measured.
  auto fitted = analysis::AnalyzeTrace(path, {});
  ASSERT_TRUE(fitted.ok());
  EXPECT_EQ(fitted->overhead.source, analysis::OverheadSource::kStepTime);
  // ... and shows the energy it measured, beside whatever a model predicts.
  const auto j = analysis::AnalysisToJson(*fitted);
  ASSERT_TRUE(j.contains("measured_energy")) << j.dump(1);
  EXPECT_DOUBLE_EQ(j["measured_energy"]["gpus"][0]["energy_per_iteration_j"].get<double>(), g.energy_per_iteration_j);
}

INSTANTIATE_TEST_SUITE_P(Recorded, EmoTraceH200Test,
                         ::testing::Values(Case{"data/h200_emo/train_loop.emotrace", 5, false},
                                           Case{"data/h200_emo/train_loop_nvtx.emotrace", 5, false},
                                           Case{"data/h200_emo/decode_loop.emotrace", 5, false},
                                           Case{"examples/streams_graph_h200.emotrace", 4, true},
                                           // two ranks of a torchrun DDP job (120 steps each)
                                           Case{"data/h200_emo/ddp_train_rank0.emotrace", 5, false, 80},
                                           Case{"data/h200_emo/ddp_train_rank1.emotrace", 5, false, 80},
                                           // GEMM loops with the SM clock read (bench/gpu/clock_record.sh)
                                           Case{"data/h200_emo/gemm_bf16_8192.emotrace", 5, false, 100, true},
                                           Case{"data/h200_emo/gemm_fp32_4096.emotrace", 5, false, 100, true}),
                         [](const auto& p) {
                           std::string n = p.param.file;
                           n = n.substr(n.rfind('/') + 1);
                           n = n.substr(0, n.find('.'));
                           return n;
                         });

}  // namespace
}  // namespace emo::testing
