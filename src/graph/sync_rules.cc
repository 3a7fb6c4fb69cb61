// Synchronization rules: cross-stream event waits and GPU -> CPU host syncs.
//
// Exact when the trace resolves them (cuda_sync with wait_on_stream / record correlation);
// otherwise the fallback rules of research §7, each counted in the diagnostics. Every inferred
// edge is checked against the measured run (its source must end before the constrained time,
// within the skew tolerance) and dropped otherwise, so a wrong guess can never make the replay
// of the measured run disagree with the measurement.
#include <algorithm>
#include <unordered_map>

#include "builder_internal.h"

namespace emo::graph {

using trace::CpuEventId;
using trace::GpuOpId;
using trace::StreamId;
using trace::SyncKind;

namespace {

bool Contains(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}

bool IsEventRecordCall(std::string_view name) { return Contains(name, "EventRecord"); }

}  // namespace

void GraphBuilder::AddSyncEdges() {
  for (uint32_t i = 0; i < t_.syncs.size(); ++i) {
    if (t_.syncs.kind[i] == SyncKind::kStreamWaitEvent) AddStreamWaitEdges(i);
  }
  AddHostSyncEdgesFromRecords();
  AddHostSyncEdgesFromCalls();
}

// Stream Wait Event: the first op enqueued on the waiting stream after the wait call waits for
// the last op enqueued on the recorded stream before the matching cudaEventRecord.
void GraphBuilder::AddStreamWaitEdges(uint32_t row) {
  const auto& sy = t_.syncs;
  CpuEventId wait_call = ApiByCorrelation(sy.correlation[row]);
  TimeNs wait_time = wait_call.valid() ? t_.cpu.start[wait_call.value()] : sy.start[row];
  int32_t device = sy.device[row];
  if (device < 0 || static_cast<size_t>(device) >= device_streams_.size()) {
    g_.diagnostics_.Add(Diag::kWaitEdgeNone);
    return;
  }
  StreamId waiting;
  for (StreamId s : device_streams_[device]) {
    if (t_.streams[s.value()].stream == sy.stream[row]) waiting = s;
  }
  if (!waiting.valid()) return;  // nothing ever ran on the waiting stream in the window
  GpuOpId dst = FirstLaunchedAfter(waiting, wait_time);
  if (!dst.valid()) return;

  GpuOpId src;
  Diag rule = Diag::kWaitEdgeExact;
  if (sy.wait_on_stream[row] >= 0) {
    CpuEventId record = ApiByCorrelation(sy.wait_on_record_corr[row]);
    TimeNs record_time = record.valid() ? t_.cpu.start[record.value()] : wait_time;
    for (StreamId s : device_streams_[device]) {
      if (t_.streams[s.value()].stream == sy.wait_on_stream[row]) src = LastLaunchedBefore(s, record_time);
    }
  } else {
    // Fallback (a): the cudaEventRecord call the wait consumes, on the same thread, paired by
    // the event id the wait names (CUDA >= 12.9 Kineto keeps wait_on_cuda_event_id only).
    // Records not yet consumed are paired first-in first-out; a wait on an id seen before with
    // no fresh record reuses that id's record. The recorded stream is that of the last op the
    // process launched before the record call on a stream other than the waiting one.
    TimeNs record_time = -1;
    if (wait_call.valid()) {
      uint32_t th = t_.cpu.thread[wait_call.value()].value();
      const auto& calls = thread_api_[th];
      // Records on this thread since the previous wait with the same event id.
      auto pos = std::lower_bound(calls.begin(), calls.end(), wait_call.value(),
                                  [&](uint32_t a, uint32_t b) { return t_.cpu.start[a] < t_.cpu.start[b]; });
      std::vector<uint32_t> records;
      // Walk back at most kMaxWalk calls: pairing looks at the recent past only.
      constexpr std::ptrdiff_t kMaxWalk = 512;
      const auto walk_end = pos - std::min<std::ptrdiff_t>(kMaxWalk, pos - calls.begin());
      for (auto it = pos; it != walk_end;) {
        --it;
        std::string_view name = ApiName(CpuEventId(*it));
        if (IsEventRecordCall(name)) records.push_back(*it);
        if (Contains(name, "StreamWaitEvent") && records.size() > 0) {
          // Stop at the previous wait once a record was found: that wait consumed older ones.
          break;
        }
      }
      // records is newest-first; count waits between the oldest candidate record and this
      // wait to pick the FIFO position.
      if (!records.empty()) {
        size_t waits_before = 0;
        for (auto it = pos; it != walk_end;) {
          --it;
          if (*it == records.back()) break;
          if (Contains(ApiName(CpuEventId(*it)), "StreamWaitEvent")) ++waits_before;
        }
        size_t idx = std::min(waits_before, records.size() - 1);
        record_time = t_.cpu.start[records[records.size() - 1 - idx]];
        rule = Diag::kWaitEdgeRecordPair;
      }
    }
    if (record_time < 0) {
      record_time = wait_time;
      rule = Diag::kWaitEdgeLastLaunch;
    }
    TimeNs best = INT64_MIN;
    for (StreamId s : device_streams_[device]) {
      if (s == waiting) continue;
      GpuOpId cand = LastLaunchedBefore(s, record_time);
      if (cand.valid() && launch_time_[cand.value()] > best) {
        best = launch_time_[cand.value()];
        src = cand;
      }
    }
  }
  if (!src.valid() || src == dst || t_.gpu.end[src.value()] > t_.gpu.start[dst.value()] + o_.skew_tolerance_ns) {
    g_.diagnostics_.Add(Diag::kWaitEdgeNone);
    return;
  }
  g_.diagnostics_.Add(rule);
  AddEdge(g_.gpu_node_[src.value()], g_.gpu_node_[dst.value()], EdgeKind::kEventWait,
          Constraint::kEndToStart, 0);
}

bool GraphBuilder::AddHostSync(GpuOpId op, CpuEventId call) {
  if (!op.valid() || !call.valid()) return false;
  NodeId cn = g_.cpu_node_[call.value()];
  if (!cn.valid()) return false;
  if (t_.gpu.end[op.value()] > t_.cpu.end[call.value()] + o_.skew_tolerance_ns) return false;
  if (launcher_[op.value()] == call) {
    // The call launched the op it waits for (synchronous memcpy): an edge into the call's end
    // would close a node-level cycle with the launch edge. The thread's next node waits for
    // the op instead, and the call keeps only its cost up to the copy's start.
    NodeId next = NextOnThread(cn);
    if (!next.valid()) return false;
    AddEdge(g_.gpu_node_[op.value()], next, EdgeKind::kHostSync, Constraint::kEndToStart, 0);
    auto& dur = g_.nodes_.duration[cn.value()];
    const TimeNs to_copy = t_.gpu.start[op.value()] - t_.cpu.start[call.value()];
    dur = std::min(dur, std::max<TimeNs>(0, to_copy) + o_.blocking_call_floor_ns);
    return true;
  }
  AddEdge(g_.gpu_node_[op.value()], cn, EdgeKind::kHostSync, Constraint::kEndToEnd, 0);
  return true;
}

NodeId GraphBuilder::NextOnThread(NodeId api) const {
  // API nodes are created followed by nothing, and each later API node is preceded by its
  // interval; the interval after `api` is the node whose thread-order predecessor is `api`.
  auto it = next_on_thread_.find(api.value());
  return it == next_on_thread_.end() ? NodeId::Invalid() : NodeId(it->second);
}

// cuda_sync records for Context Sync, Stream Sync and Event Sync name the blocking call.
void GraphBuilder::AddHostSyncEdgesFromRecords() {
  const auto& sy = t_.syncs;
  for (uint32_t i = 0; i < sy.size(); ++i) {
    CpuEventId call = ApiByCorrelation(sy.correlation[i]);
    if (!call.valid()) continue;
    TimeNs t = t_.cpu.start[call.value()];
    int32_t device = sy.device[i];
    if (device < 0 || static_cast<size_t>(device) >= device_streams_.size()) continue;
    switch (sy.kind[i]) {
      case SyncKind::kContextSync:
        for (StreamId s : device_streams_[device]) {
          if (AddHostSync(LastLaunchedBefore(s, t), call)) g_.diagnostics_.Add(Diag::kSyncEdgeContext);
        }
        break;
      case SyncKind::kStreamSync:
        for (StreamId s : device_streams_[device]) {
          if (t_.streams[s.value()].stream == sy.stream[i] &&
              AddHostSync(LastLaunchedBefore(s, t), call)) {
            g_.diagnostics_.Add(Diag::kSyncEdgeStream);
          }
        }
        break;
      case SyncKind::kEventSync:
        if (sy.wait_on_stream[i] >= 0) {
          CpuEventId record = ApiByCorrelation(sy.wait_on_record_corr[i]);
          TimeNs rt = record.valid() ? t_.cpu.start[record.value()] : t;
          for (StreamId s : device_streams_[device]) {
            if (t_.streams[s.value()].stream == sy.wait_on_stream[i] &&
                AddHostSync(LastLaunchedBefore(s, rt), call)) {
              g_.diagnostics_.Add(Diag::kSyncEdgeEvent);
            }
          }
        }
        // Unresolved Event Syncs of blocking calls are handled by the call rule below;
        // cudaEventQuery polls (NCCL watchdog) never block and get no edge.
        break;
      default:
        break;
    }
  }
}

// Blocking calls by name, for traces without cuda_sync records (most public ones) and for
// unresolved ones: the call waits for the last op launched before it that finished while the
// call ran; a synchronous memcpy or a copy to pageable memory waits for its own copy.
void GraphBuilder::AddHostSyncEdgesFromCalls() {
  // Calls already covered by a record-based edge.
  std::vector<bool> has_sync(g_.nodes_.size(), false);
  for (const Edge& e : g_.edges_) {
    if (e.kind == EdgeKind::kHostSync) has_sync[e.dst.value()] = true;
  }
  std::unordered_map<uint32_t, std::vector<uint32_t>> ops_of_call;
  for (uint32_t i = 0; i < t_.gpu.size(); ++i) {
    if (launcher_[i].valid()) ops_of_call[launcher_[i].value()].push_back(i);
  }
  for (const auto& calls : thread_api_) {
    for (uint32_t ev : calls) {
      NodeId node = g_.cpu_node_[ev];
      if (!node.valid() || has_sync[node.value()]) continue;
      std::string_view name = ApiName(CpuEventId(ev));
      TimeNs cs = t_.cpu.start[ev], ce = t_.cpu.end[ev];
      bool device_sync = Contains(name, "DeviceSynchronize") || Contains(name, "CtxSynchronize");
      bool stream_or_event_sync = Contains(name, "StreamSynchronize") || Contains(name, "EventSynchronize");
      bool memcpy_call = Contains(name, "Memcpy") && !Contains(name, "Peer");
      if (memcpy_call) {
        auto it = ops_of_call.find(ev);
        if (it == ops_of_call.end()) continue;
        for (uint32_t op : it->second) {
          std::string_view op_name = t_.Name(t_.gpu.name[op]);
          // A synchronous copy, or an async one to/from pageable host memory, blocks the
          // host until it is done; an async device-to-device or pinned copy never does, even
          // when (in a slow, profiled run) it happened to finish before its call returned.
          const bool blocking = !Contains(name, "Async") || Contains(op_name, "Pageable");
          if (blocking && t_.gpu.end[op] >= cs &&
              AddHostSync(GpuOpId(op), CpuEventId(ev))) {
            g_.diagnostics_.Add(Diag::kSyncEdgeBlockingCall);
          }
        }
        continue;
      }
      if (!device_sync && !stream_or_event_sync) continue;
      if (device_sync) {
        for (const auto& streams : device_streams_) {
          for (StreamId s : streams) {
            if (AddHostSync(LastLaunchedBefore(s, cs), CpuEventId(ev))) {
              g_.diagnostics_.Add(Diag::kSyncEdgeContext);
            }
          }
        }
        continue;
      }
      // Stream/event sync with the stream unknown: the last-finishing op (ending inside the
      // call) among the ops launched before it; else the op this thread launched last.
      GpuOpId best;
      for (const auto& streams : device_streams_) {
        for (StreamId s : streams) {
          GpuOpId cand = LastLaunchedBefore(s, cs);
          if (!cand.valid()) continue;
          TimeNs e = t_.gpu.end[cand.value()];
          if (e >= cs && e <= ce + o_.skew_tolerance_ns &&
              (!best.valid() || e > t_.gpu.end[best.value()])) {
            best = cand;
          }
        }
      }
      if (AddHostSync(best, CpuEventId(ev))) g_.diagnostics_.Add(Diag::kSyncEdgeBlockingCall);
    }
  }
}

}  // namespace emo::graph
