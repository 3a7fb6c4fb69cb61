// Event-wait pairing: which cudaEventRecord a cudaStreamWaitEvent / cudaEventSynchronize waits
// for when the trace leaves wait_on_stream = -1 (CUDA >= 12.9 Kineto). By the event id where
// the trace has one, first in first out only where it has none; each rule counted.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <fmt/format.h>

#include "emo/graph/graph_builder.h"
#include "emo/trace/reader.h"
#include "trace_builder.h"

namespace emo {
namespace {

using testing::TraceBuilder;

// The GPU op named `name`, or invalid.
trace::GpuOpId OpNamed(const trace::Trace& t, std::string_view name) {
  for (uint32_t i = 0; i < t.gpu.size(); ++i) {
    if (t.Name(t.gpu.name[i]) == name) return trace::GpuOpId(i);
  }
  return {};
}

// Names of the GPU ops with an edge of `kind` into node `dst`.
std::vector<std::string> SourcesOf(const graph::Graph& g, graph::NodeId dst, graph::EdgeKind kind) {
  std::vector<std::string> out;
  const trace::Trace& t = g.trace();
  for (const graph::Edge& e : g.edges()) {
    if (e.kind != kind || e.dst != dst) continue;
    const uint32_t ref = g.nodes().ref[e.src.value()];
    out.emplace_back(g.nodes().kind[e.src.value()] == graph::NodeKind::kGpuOp
                         ? t.Name(t.gpu.name[ref])
                         : "(not a GPU op)");
  }
  return out;
}

std::vector<std::string> WaitSourcesOf(const graph::Graph& g, std::string_view op) {
  const trace::GpuOpId id = OpNamed(g.trace(), op);
  EXPECT_TRUE(id.valid()) << op;
  return id.valid() ? SourcesOf(g, g.NodeOfGpuOp(id), graph::EdgeKind::kEventWait)
                    : std::vector<std::string>{};
}

// One thread records event 11 after k1 (stream 7) and event 12 after k2 (stream 8), then makes
// streams 20, 21 and 22 wait on 11, 12 and 11 again; k3, k4, k5 run on them. The waits carry
// only the event id (wait_on_stream = -1), the records none: FIFO pairs the third wait with the
// next record (12, so k2), the id with the record the first wait on 11 consumed (k1). Without
// event ids (`with_ids` false) the trace has the first two waits only.
trace::Trace RecordsAndWaits(bool with_ids) {
  TraceBuilder b;
  b.Api("cudaLaunchKernel", 0, 2, 1);
  b.Api("cudaEventRecordWithFlags", 3, 4, 2);
  b.Api("cudaLaunchKernel", 5, 7, 3);
  b.Api("cudaEventRecordWithFlags", 8, 9, 4);
  b.Api("cudaStreamWaitEvent", 10, 11, 5);
  b.Api("cudaLaunchKernel", 12, 13, 6);
  b.Api("cudaStreamWaitEvent", 14, 15, 7);
  b.Api("cudaLaunchKernel", 16, 17, 8);
  b.Kernel("k1", 7, 5, 40, 1);
  b.Kernel("k2", 8, 8, 45, 3);
  b.Kernel("k3", 20, 50, 60, 6);
  b.Kernel("k4", 21, 50, 60, 8);
  if (!with_ids) {
    b.Sync(trace::SyncKind::kStreamWaitEvent, 20, 10, 11, 5);
    b.Sync(trace::SyncKind::kStreamWaitEvent, 21, 14, 15, 7);
    return b.Build();
  }
  b.Api("cudaStreamWaitEvent", 18, 19, 9);
  b.Api("cudaLaunchKernel", 20, 21, 10);
  b.Kernel("k5", 22, 50, 60, 10);
  b.Sync(trace::SyncKind::kStreamWaitEvent, 20, 10, 11, 5, -1, -1, /*event_id=*/11);
  b.Sync(trace::SyncKind::kStreamWaitEvent, 21, 14, 15, 7, -1, -1, /*event_id=*/12);
  b.Sync(trace::SyncKind::kStreamWaitEvent, 22, 18, 19, 9, -1, -1, /*event_id=*/11);
  return b.Build();
}

TEST(EventPairingTest, RepeatedEventIdReusesItsRecordNotTheNextOne) {
  trace::Trace t = RecordsAndWaits(true);
  auto g = graph::BuildGraph(t);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(WaitSourcesOf(*g, "k3"), std::vector<std::string>{"k1"});
  EXPECT_EQ(WaitSourcesOf(*g, "k4"), std::vector<std::string>{"k2"});
  EXPECT_EQ(WaitSourcesOf(*g, "k5"), std::vector<std::string>{"k1"});  // FIFO: k2
  EXPECT_EQ(g->diagnostics().Count(Diag::kWaitEdgeRecordPair), 2u);
  EXPECT_EQ(g->diagnostics().Count(Diag::kWaitEdgeEventIdRepeat), 1u);
}

// Without event ids the same trace pairs first in first out, and says so.
TEST(EventPairingTest, WithoutEventIdsFifoIsTheFallback) {
  trace::Trace t = RecordsAndWaits(false);
  auto g = graph::BuildGraph(t);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(WaitSourcesOf(*g, "k3"), std::vector<std::string>{"k1"});
  EXPECT_EQ(WaitSourcesOf(*g, "k4"), std::vector<std::string>{"k2"});
  EXPECT_EQ(g->diagnostics().Count(Diag::kWaitEdgeRecordPair), 2u);
  EXPECT_EQ(g->diagnostics().Count(Diag::kWaitEdgeEventId), 0u);
  EXPECT_EQ(g->diagnostics().Count(Diag::kWaitEdgeEventIdRepeat), 0u);
}

// A hand-written trace in the Kineto >= 2025-11 layout: cuda_event records name the event id,
// the recorded stream and the cudaEventRecord's correlation.
class KinetoEvents {
 public:
  void Runtime(const char* name, double ts, double dur, int corr) {
    Add(fmt::format(R"({{"ph": "X", "cat": "cuda_runtime", "name": "{}", "pid": 1, "tid": 1, )"
                    R"("ts": {}, "dur": {}, "args": {{"cbid": 1, "correlation": {}}}}})",
                    name, ts, dur, corr));
  }
  void Kernel(const char* name, int stream, double ts, double dur, int corr) {
    Add(fmt::format(R"({{"ph": "X", "cat": "kernel", "name": "{}", "pid": 0, "tid": {}, "ts": {}, )"
                    R"("dur": {}, "args": {{"device": 0, "context": 1, "stream": {}, "correlation": {}}}}})",
                    name, stream, ts, dur, stream, corr));
  }
  void CudaEvent(int event_id, int stream, int record_corr, double ts) {
    Add(fmt::format(R"({{"ph": "X", "cat": "cuda_event", "name": "cudaEvent", "pid": 0, "tid": {}, )"
                    R"("ts": {}, "dur": 1, "args": {{"event_id": {}, "stream": {}, "correlation": {}, )"
                    R"("device": 0, "context": 1}}}})",
                    stream, ts, event_id, stream, record_corr));
  }
  // A Stream Wait Event (stream >= 0) or Event Sync (stream -1) that Kineto left unresolved.
  void Sync(const char* kind, int stream, double ts, double dur, int corr, int event_id) {
    Add(fmt::format(R"({{"ph": "X", "cat": "cuda_sync", "name": "{}", "pid": 0, "tid": 1, "ts": {}, )"
                    R"("dur": {}, "args": {{"cuda_sync_kind": "{}", "wait_on_stream": -1, )"
                    R"("wait_on_cuda_event_record_corr_id": -1, "wait_on_cuda_event_id": {}, )"
                    R"("stream": {}, "correlation": {}, "device": 0, "context": 1}}}})",
                    kind, ts, dur, kind, event_id, stream, corr));
  }
  trace::Trace Read() {
    std::string json = R"({"schemaVersion": 1, "traceEvents": [)";
    for (size_t i = 0; i < events_.size(); ++i) json += (i ? ",\n" : "\n") + events_[i];
    json += "]}";
    for (const auto& r : trace::Readers()) {
      if (r->Name() != "kineto-json") continue;
      Result<trace::Trace> t = r->Read("hand_built.json", json);
      EXPECT_TRUE(t.ok()) << t.status().ToString();
      if (t.ok()) return std::move(*t);
    }
    ADD_FAILURE() << "no kineto-json reader";
    return {};
  }

 private:
  void Add(std::string e) { events_.push_back(std::move(e)); }
  std::vector<std::string> events_;
};

// Event 11 recorded after k1 (stream 7), event 12 after k2 (stream 8); stream 20 waits on 12.
// FIFO takes the older record (11, so k1); the wait's event id names record 12 on stream 8: k2.
TEST(EventPairingTest, WaitPairedByCudaEventRecordOfItsId) {
  KinetoEvents k;
  k.Runtime("cudaLaunchKernel", 0, 2, 1);
  k.Runtime("cudaEventRecordWithFlags", 3, 1, 2);
  k.Runtime("cudaLaunchKernel", 5, 2, 3);
  k.Runtime("cudaEventRecordWithFlags", 8, 1, 4);
  k.Runtime("cudaStreamWaitEvent", 10, 1, 5);
  k.Runtime("cudaLaunchKernel", 12, 2, 6);
  k.Kernel("k1", 7, 5, 35, 1);
  k.Kernel("k2", 8, 8, 37, 3);
  k.Kernel("k3", 20, 50, 10, 6);
  k.CudaEvent(11, 7, 2, 40);
  k.CudaEvent(12, 8, 4, 45);
  k.Sync("Stream Wait Event", 20, 10, 1, 5, /*event_id=*/12);
  trace::Trace t = k.Read();
  auto g = graph::BuildGraph(t);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(WaitSourcesOf(*g, "k3"), std::vector<std::string>{"k2"});  // FIFO: k1
  EXPECT_EQ(g->diagnostics().Count(Diag::kWaitEdgeEventId), 1u);
  EXPECT_EQ(g->diagnostics().Count(Diag::kWaitEdgeRecordPair), 0u);
}

// An Event Sync on event 11 (recorded after k1 on stream 7) while k2 (stream 8) runs longer:
// the blocking call waits for k1, the op its event recorded, not for the last op to finish
// during the call (the rule for blocking calls without a record).
TEST(EventPairingTest, EventSyncWaitsForTheOpItsEventIdRecorded) {
  KinetoEvents k;
  k.Runtime("cudaLaunchKernel", 0, 2, 1);
  k.Runtime("cudaEventRecordWithFlags", 3, 1, 2);
  k.Runtime("cudaLaunchKernel", 5, 2, 3);
  k.Runtime("cudaEventSynchronize", 10, 110, 4);
  k.Kernel("k1", 7, 5, 95, 1);
  k.Kernel("k2", 8, 8, 102, 3);
  k.CudaEvent(11, 7, 2, 100);
  k.Sync("Event Sync", -1, 10, 110, 4, /*event_id=*/11);
  trace::Trace t = k.Read();
  auto g = graph::BuildGraph(t);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  trace::CpuEventId call;
  for (uint32_t i = 0; i < t.cpu.size(); ++i) {
    if (t.cpu.correlation[i] == 4) call = trace::CpuEventId(i);
  }
  ASSERT_TRUE(call.valid());
  EXPECT_EQ(SourcesOf(*g, g->NodeOfCpuEvent(call), graph::EdgeKind::kHostSync),
            std::vector<std::string>{"k1"});  // without the id: k2
  EXPECT_EQ(g->diagnostics().Count(Diag::kSyncEdgeEvent), 1u);
}

}  // namespace
}  // namespace emo
