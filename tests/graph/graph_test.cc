// Graph rules and replay on small hand-built traces, where every edge and time is known.
#include <gtest/gtest.h>

#include "emo/analysis/replay.h"
#include "emo/analysis/slack.h"
#include "emo/analysis/whatif.h"
#include "emo/graph/graph_builder.h"
#include "trace_builder.h"

namespace emo {
namespace {

using testing::TraceBuilder;

// Two streams: A on stream 7, then B on stream 20 waits for A through an event, then C on
// stream 7 waits for B through an event; C is launched late, so its launch is binding and B
// has slack. The host synchronizes on the device at the end.
//   API (us): launchA 0-5, record 6-7, wait(S20 on S7) 8-9, launchB 10-15, record 16-17,
//             wait(S7 on S20) 18-19, launchC 140-145, deviceSync 146-260.
//   GPU (us): A on 7: 10-110; B on 20: 112-120; C on 7: 150-250.
trace::Trace TwoStreamTrace() {
  TraceBuilder b;
  b.Annotation("ProfilerStep#1", 0, 261);
  b.Api("cudaLaunchKernel", 0, 5, 1);
  b.Api("cudaEventRecord", 6, 7, 2);
  b.Api("cudaStreamWaitEvent", 8, 9, 3);
  b.Api("cudaLaunchKernel", 10, 15, 4);
  b.Api("cudaEventRecord", 16, 17, 5);
  b.Api("cudaStreamWaitEvent", 18, 19, 6);
  b.Api("cudaLaunchKernel", 140, 145, 7);
  b.Api("cudaDeviceSynchronize", 146, 260, 8);
  b.Kernel("gemm_A", 7, 10, 110, 1);
  b.Kernel("elementwise_B", 20, 112, 120, 4);
  b.Kernel("gemm_C", 7, 150, 250, 7);
  b.Sync(trace::SyncKind::kStreamWaitEvent, 20, 8, 9, 3, 7, 2);
  b.Sync(trace::SyncKind::kStreamWaitEvent, 7, 18, 19, 6, 20, 5);
  b.Sync(trace::SyncKind::kContextSync, -1, 146, 260, 8);
  return b.Build();
}

TEST(GraphTest, EdgesOfTwoStreamTrace) {
  trace::Trace t = TwoStreamTrace();
  auto g = graph::BuildGraph(t);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->EdgeCount(graph::EdgeKind::kLaunch), 3u);
  EXPECT_EQ(g->EdgeCount(graph::EdgeKind::kStreamOrder), 1u);   // A -> C
  EXPECT_EQ(g->EdgeCount(graph::EdgeKind::kEventWait), 2u);     // A -> B, B -> C
  EXPECT_EQ(g->EdgeCount(graph::EdgeKind::kHostSync), 2u);      // last op of each stream
  EXPECT_EQ(g->diagnostics().Count(Diag::kWaitEdgeExact), 2u);
  // 8 API calls, 7 intervals between them, 3 kernels.
  EXPECT_EQ(g->num_nodes(), 18u);
}

TEST(GraphTest, IdentityReplayReproducesMeasuredTimes) {
  trace::Trace t = TwoStreamTrace();
  auto g = graph::BuildGraph(t);
  ASSERT_TRUE(g.ok());
  auto s = analysis::Replay(*g, analysis::MeasuredDurations(*g));
  const auto& n = g->nodes();
  for (size_t v = 0; v < n.size(); ++v) {
    EXPECT_EQ(s.start[v], n.start[v]) << "node " << v;
    EXPECT_EQ(s.end[v], n.end[v]) << "node " << v;
  }
}

TEST(GraphTest, WhatIfPropagatesAlongDependencies) {
  trace::Trace t = TwoStreamTrace();
  auto g = graph::BuildGraph(t);
  ASSERT_TRUE(g.ok());
  auto base = analysis::MeasuredDurations(*g);
  // Stretch A by 50 us: B waits on A (observed 2 us gap kept), C waits on B, and the
  // device sync returns 10 us after C as measured; its own CPU cost is the 2 us floor.
  auto d = analysis::ScaledDurations(*g, base, {{"gemm_A", 1.5}});
  ASSERT_TRUE(d.ok());
  auto s = analysis::Replay(*g, *d);
  const auto& n = g->nodes();
  auto node_of = [&](uint32_t op) { return g->NodeOfGpuOp(trace::GpuOpId(op)).value(); };
  // GPU ops sorted by start: A=0, B=1, C=2.
  EXPECT_EQ(s.end[node_of(0)], TraceBuilder::Ns(160));
  EXPECT_EQ(s.start[node_of(1)], TraceBuilder::Ns(162));
  EXPECT_EQ(s.start[node_of(2)], TraceBuilder::Ns(170));
  TimeNs last_end = 0;
  for (size_t v = 0; v < n.size(); ++v) last_end = std::max(last_end, s.end[v]);
  EXPECT_EQ(last_end, TraceBuilder::Ns(280));
  // Shrinking B below its slack changes nothing on stream 7 ... but B ends earlier.
  auto d2 = analysis::ScaledDurations(*g, base, {{"elementwise", 0.5}});
  auto s2 = analysis::Replay(*g, *d2);
  EXPECT_EQ(s2.start[node_of(2)], TraceBuilder::Ns(150));
}

TEST(GraphTest, SlackOfParallelBranch) {
  trace::Trace t = TwoStreamTrace();
  auto g = graph::BuildGraph(t);
  ASSERT_TRUE(g.ok());
  auto d = analysis::MeasuredDurations(*g);
  auto s = analysis::Replay(*g, d);
  std::vector<bool> window(g->num_nodes(), true);
  TimeNs horizon = 0;
  for (TimeNs e : s.end) horizon = std::max(horizon, e);
  auto slack = analysis::ComputeSlack(*g, d, s, window, horizon);
  auto node_of = [&](uint32_t op) { return g->NodeOfGpuOp(trace::GpuOpId(op)).value(); };
  // C's start is bound by its late launch (150 us); B ends at 120 us: 30 us of slack.
  EXPECT_EQ(slack.slack[node_of(1)], TraceBuilder::Ns(30));
  // A feeds B with the observed 2 us gap, so A inherits B's slack.
  EXPECT_EQ(slack.slack[node_of(0)], TraceBuilder::Ns(30));
  // C ends the GPU work the sync waits for: zero slack.
  EXPECT_EQ(slack.slack[node_of(2)], 0);
}

// Kernel a on stream 7, an event recorded after it, stream 20 waiting on that event
// (wait_on_* = -1, as CUDA >= 12.9 writes it), then kernel b on stream 20 starting at b_start_us.
trace::Trace RecordWaitTrace(double b_start_us) {
  TraceBuilder b;
  b.Api("cudaLaunchKernel", 0, 5, 1);
  b.Api("cudaEventRecordWithFlags", 6, 7, 2);
  b.Api("cudaStreamWaitEvent", 8, 9, 3);
  b.Api("cudaLaunchKernel", 10, 15, 4);
  b.Kernel("a", 7, 10, 100, 1);
  b.Kernel("b", 20, b_start_us, 150, 4);
  b.Sync(trace::SyncKind::kStreamWaitEvent, 20, 8, 9, 3);
  return b.Build();
}

TEST(GraphTest, UnresolvedWaitUsesRecordPairFallback) {
  trace::Trace t = RecordWaitTrace(101);
  auto g = graph::BuildGraph(t);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->diagnostics().Count(Diag::kWaitEdgeRecordPair), 1u);
  EXPECT_EQ(g->EdgeCount(graph::EdgeKind::kEventWait), 1u);
}

TEST(GraphTest, InconsistentInferredEdgeIsDropped) {
  // b starts before a ends: a cross-stream wait edge a -> b would contradict the measurement.
  trace::Trace t = RecordWaitTrace(20);
  auto g = graph::BuildGraph(t);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->EdgeCount(graph::EdgeKind::kEventWait), 0u);
  EXPECT_EQ(g->diagnostics().Count(Diag::kWaitEdgeNone), 1u);
}

// A wait on an event recorded (known exactly) on a stream with no work in the trace, as DDP
// records on a side stream before each NCCL call: the wait orders nothing and is not reported as
// a wait whose source is missing.
TEST(GraphTest, ExactWaitOnAnIdleStreamMakesNoEdgeAndNoWarning) {
  TraceBuilder b;
  b.Api("cudaLaunchKernel", 0, 5, 1);
  b.Api("cudaEventRecord", 6, 7, 2);
  b.Api("cudaStreamWaitEvent", 8, 9, 3);
  b.Api("cudaLaunchKernel", 10, 15, 4);
  b.Kernel("a", 7, 10, 100, 1);
  b.Kernel("nccl_b", 20, 20, 150, 4);
  b.Sync(trace::SyncKind::kStreamWaitEvent, 20, 8, 9, 3, /*wait_on_stream=*/14, /*record_corr=*/2);
  trace::Trace t = b.Build();
  auto g = graph::BuildGraph(t);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->EdgeCount(graph::EdgeKind::kEventWait), 0u);
  EXPECT_EQ(g->diagnostics().Count(Diag::kWaitEdgeIdleStream), 1u);
  EXPECT_EQ(g->diagnostics().Count(Diag::kWaitEdgeNone), 0u);
}

TEST(GraphTest, NoGpuOpsIsAClearError) {
  TraceBuilder b;
  b.Api("cudaLaunchKernel", 0, 5, 1);
  trace::Trace t = b.Build();
  auto g = graph::BuildGraph(t);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("no GPU ops"), std::string::npos);
}

// A training step's thread hand-offs. The main thread (tid 1) runs the forward pass and calls
// backward(), where it sleeps; the autograd thread (tid 2) starts with the loss the forward pass
// hands it, launches the backward kernel and ends; the main thread wakes and runs the optimizer.
//   main:     forward op 0-400 (launches at 100-110 and 390-400), asleep 400-900, launch 900-910
//   autograd: evaluate_function 450-700 (launch 460-470)
trace::Trace HandOffTrace() {
  TraceBuilder b;
  b.Annotation("ProfilerStep#1", 0, 1000);
  b.Op("forward", 0, 400, 1);
  b.Api("cudaLaunchKernel", 100, 110, 1, 1);
  b.Api("cudaLaunchKernel", 390, 400, 2, 1);
  b.Op("autograd::engine::evaluate_function", 450, 700, 2);
  b.Api("cudaLaunchKernel", 460, 470, 3, 2);
  b.Op("optimizer", 890, 960, 1);
  b.Api("cudaLaunchKernel", 900, 910, 4, 1);
  b.Kernel("fwd_a", 7, 120, 300, 1);
  b.Kernel("fwd_b", 7, 405, 440, 2);
  b.Kernel("bwd", 7, 480, 800, 3);
  b.Kernel("opt", 7, 915, 950, 4);
  return b.Build();
}

// The CPU nodes of thread `tid` (trace tid), in time order.
std::vector<uint32_t> NodesOfThread(const graph::Graph& g, int64_t tid) {
  std::vector<uint32_t> out;
  const auto& n = g.nodes();
  for (uint32_t v = 0; v < n.size(); ++v) {
    if (n.kind[v] != graph::NodeKind::kGpuOp && g.trace().threads[n.resource[v]].tid == tid) out.push_back(v);
  }
  return out;
}

TEST(GraphTest, ThreadHandOffsAreEdgesBothWays) {
  trace::Trace t = HandOffTrace();
  auto g = graph::BuildGraph(t);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  const auto& n = g->nodes();
  bool main_to_autograd = false, autograd_to_main = false;
  for (const auto& e : g->edges()) {
    if (e.kind != graph::EdgeKind::kCrossThread) continue;
    const int64_t from = t.threads[n.resource[e.src.value()]].tid, to = t.threads[n.resource[e.dst.value()]].tid;
    main_to_autograd |= from == 1 && to == 2;
    autograd_to_main |= from == 2 && to == 1;
  }
  EXPECT_TRUE(main_to_autograd) << "the autograd thread waits for the forward pass that feeds it";
  EXPECT_TRUE(autograd_to_main) << "the main thread waits in backward() for the autograd thread";

  // Identity first; then a what-if that shortens one thread's CPU work moves the other thread.
  const auto measured = analysis::MeasuredDurations(*g);
  const auto base = analysis::Replay(*g, measured);
  for (uint32_t v = 0; v < n.size(); ++v) ASSERT_EQ(base.start[v], n.start[v]) << v;
  const auto main_nodes = NodesOfThread(*g, 1), autograd_nodes = NodesOfThread(*g, 2);
  auto faster = [&](const std::vector<uint32_t>& nodes) {
    auto d = measured;
    for (uint32_t v : nodes) d[v] /= 2;
    return analysis::Replay(*g, d);
  };
  const auto main_faster = faster(main_nodes);
  EXPECT_LT(main_faster.start[autograd_nodes.front()], base.start[autograd_nodes.front()])
      << "a shorter forward pass starts the backward thread earlier";
  const auto autograd_faster = faster(autograd_nodes);
  EXPECT_LT(autograd_faster.start[main_nodes.back()], base.start[main_nodes.back()])
      << "a shorter backward thread wakes the main thread earlier";
}

// The GPU's own gap between queued ops of one stream: 30 kernels launched 1-2 us apart, each
// 20 us long, so every one after the first waits for the one before; the gaps alternate 1 and 3
// us (median 3 us over 29 pairs: 15 of 3, 14 of 1). A kernel launched while the stream was idle
// does not count. With fewer pairs than queued_min_pairs, none is measured.
TEST(GraphTest, TheGapBetweenQueuedOpsOfAStreamIsMeasured) {
  auto trace_of = [](int kernels) {
    TraceBuilder b;
    b.Annotation("ProfilerStep#1", 0, 5000);
    double gpu = 10;
    for (int k = 0; k < kernels; ++k) {
      b.Api("cudaLaunchKernel", 1.5 * k, 1.5 * k + 1, k + 1);
      b.Kernel("gemm", 7, gpu, gpu + 20, k + 1);
      gpu += 20 + (k % 2 == 0 ? 3 : 1);
    }
    // Launched long after the stream went idle: not queued.
    b.Api("cudaLaunchKernel", 4000, 4001, 1000);
    b.Kernel("gemm", 7, 4003, 4010, 1000);
    return b.Build();
  };
  trace::Trace t = trace_of(30);
  auto g = graph::BuildGraph(t);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->queued_stream_gap_pairs(), 29u);
  EXPECT_EQ(g->queued_stream_gap_ns(), TraceBuilder::Ns(3));
  // Reported only: the identity replay is untouched.
  const auto s = analysis::Replay(*g, analysis::MeasuredDurations(*g));
  for (uint32_t v = 0; v < g->nodes().size(); ++v) ASSERT_EQ(s.start[v], g->nodes().start[v]) << v;
  trace::Trace few = trace_of(10);
  auto h = graph::BuildGraph(few);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(h->queued_stream_gap_pairs(), 9u);
  EXPECT_EQ(h->queued_stream_gap_ns(), -1);
}

TEST(WhatIfTest, ParsesScaleRules) {
  auto r = analysis::ParseScaleRule("a=b=1.5");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->regex, "a=b");
  EXPECT_DOUBLE_EQ(r->factor, 1.5);
  EXPECT_FALSE(analysis::ParseScaleRule("gemm").ok());
  EXPECT_FALSE(analysis::ParseScaleRule("gemm=x").ok());
  EXPECT_FALSE(analysis::ParseScaleRule("gemm=-1").ok());
}

}  // namespace
}  // namespace emo
