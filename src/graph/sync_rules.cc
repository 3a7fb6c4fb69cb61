// Synchronization rules: cross-stream event waits and GPU -> CPU host syncs.
//
// Exact when the trace resolves them (cuda_sync with wait_on_stream / record correlation);
// otherwise, in order: the wait's event id (wait_on_cuda_event_id, which CUDA >= 12.9 Kineto
// keeps) paired with the cuda_event record of that id; the same id as an earlier wait of the
// thread with no record call between; the cudaEventRecord calls before the wait on its thread,
// first in first out (the only rule left when no record carries an id); the last op launched on
// another stream. Each rule is counted in the diagnostics. Every inferred edge is checked
// against the measured run (its source must end before the constrained time, within the skew
// tolerance) and dropped otherwise, so a wrong guess can never make the replay of the measured
// run disagree with the measurement.
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
  const auto& ce = t_.cuda_events;
  for (uint32_t r = 0; r < ce.size(); ++r) {
    cuda_events_by_id_[{ce.device[r], ce.event_id[r]}].push_back(r);
  }
  for (auto& [key, rows] : cuda_events_by_id_) {
    std::stable_sort(rows.begin(), rows.end(),
                     [&](uint32_t a, uint32_t b) { return ce.correlation[a] < ce.correlation[b]; });
  }
  for (uint32_t i = 0; i < t_.syncs.size(); ++i) {
    if (t_.syncs.kind[i] == SyncKind::kStreamWaitEvent) AddStreamWaitEdges(i);
  }
  AddHostSyncEdgesFromRecords();
  AddHostSyncEdgesFromCalls();
}

int64_t GraphBuilder::CudaEventBefore(int32_t device, int64_t event_id, int64_t correlation) const {
  auto it = cuda_events_by_id_.find({device, event_id});
  if (it == cuda_events_by_id_.end()) return -1;
  const auto& rows = it->second;
  auto pos = std::lower_bound(rows.begin(), rows.end(), correlation, [&](uint32_t r, int64_t c) {
    return t_.cuda_events.correlation[r] < c;
  });
  return pos == rows.begin() ? -1 : static_cast<int64_t>(*std::prev(pos));
}

TimeNs GraphBuilder::CallTime(int64_t correlation, TimeNs fallback) const {
  CpuEventId call = ApiByCorrelation(correlation);
  return call.valid() ? t_.cpu.start[call.value()] : fallback;
}

StreamId GraphBuilder::StreamOn(int32_t device, int64_t stream) const {
  if (device < 0 || static_cast<size_t>(device) >= device_streams_.size()) return {};
  for (StreamId s : device_streams_[device]) {
    if (t_.streams[s.value()].stream == stream) return s;
  }
  return {};
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
  StreamId waiting = StreamOn(device, sy.stream[row]);
  if (!waiting.valid()) return;  // nothing ever ran on the waiting stream in the window
  GpuOpId dst = FirstLaunchedAfter(waiting, wait_time);
  if (!dst.valid()) return;

  GpuOpId src;
  Diag rule = Diag::kWaitEdgeExact;
  EventRecord record;
  if (sy.wait_on_stream[row] >= 0) {
    record = {CallTime(sy.wait_on_record_corr[row], wait_time), sy.wait_on_stream[row]};
  } else {
    record = FindWaitRecord(row, wait_time, wait_call, &rule);
  }
  if (record.stream >= 0) {
    StreamId s = StreamOn(device, record.stream);
    if (s.valid()) src = LastLaunchedBefore(s, record.time);
  } else {
    // The recorded stream is that of the last op the process launched before the record call
    // on a stream other than the waiting one.
    TimeNs best = INT64_MIN;
    for (StreamId s : device_streams_[device]) {
      if (s == waiting) continue;
      GpuOpId cand = LastLaunchedBefore(s, record.time);
      if (cand.valid() && launch_time_[cand.value()] > best) {
        best = launch_time_[cand.value()];
        src = cand;
      }
    }
  }
  if (!src.valid() && record.stream >= 0 &&
      (rule == Diag::kWaitEdgeExact || rule == Diag::kWaitEdgeEventId)) {
    // The record is known exactly and its stream had no work launched before it (a side stream
    // a framework records on, e.g. DDP's before each NCCL call): the event is complete when
    // recorded, so the wait orders nothing.
    g_.diagnostics_.Add(Diag::kWaitEdgeIdleStream);
    return;
  }
  if (!src.valid() || src == dst || t_.gpu.end[src.value()] > t_.gpu.start[dst.value()] + o_.skew_tolerance_ns) {
    g_.diagnostics_.Add(Diag::kWaitEdgeNone);
    return;
  }
  g_.diagnostics_.Add(rule);
  AddEdge(g_.gpu_node_[src.value()], g_.gpu_node_[dst.value()], EdgeKind::kEventWait,
          Constraint::kEndToStart, 0);
}

GraphBuilder::EventRecord GraphBuilder::FindWaitRecord(uint32_t row, TimeNs wait_time,
                                                       CpuEventId wait_call, Diag* rule) {
  const auto& sy = t_.syncs;
  const int64_t event_id = sy.event_id[row];
  // By event id, exact: the latest record of that event before the wait (correlation order).
  if (event_id >= 0) {
    const int64_t r = CudaEventBefore(sy.device[row], event_id, sy.correlation[row]);
    if (r >= 0) {
      *rule = Diag::kWaitEdgeEventId;
      return {CallTime(t_.cuda_events.correlation[r], wait_time), t_.cuda_events.stream[r]};
    }
  }
  if (!wait_call.valid()) {
    *rule = Diag::kWaitEdgeLastLaunch;
    return {wait_time, -1};
  }
  const uint32_t th = t_.cpu.thread[wait_call.value()].value();
  const auto& calls = thread_api_[th];
  auto pos = std::lower_bound(calls.begin(), calls.end(), wait_call.value(),
                              [&](uint32_t a, uint32_t b) { return t_.cpu.start[a] < t_.cpu.start[b]; });
  uint32_t records_before = 0;
  if (event_id >= 0) {
    // By event id, from the waits alone (records without ids): a wait on the id an earlier
    // wait of this thread named, with no cudaEventRecord called since, waits for the same
    // record; FIFO would hand it the next unconsumed record instead.
    if (records_before_.empty()) {
      records_before_.resize(thread_api_.size());
      for (size_t t = 0; t < thread_api_.size(); ++t) {
        uint32_t n = 0;
        records_before_[t].reserve(thread_api_[t].size());
        for (uint32_t ev : thread_api_[t]) {
          records_before_[t].push_back(n);
          n += IsEventRecordCall(ApiName(CpuEventId(ev))) ? 1 : 0;
        }
      }
    }
    if (pos != calls.end()) records_before = records_before_[th][static_cast<size_t>(pos - calls.begin())];
    auto it = last_wait_by_id_.find({th, event_id});
    if (it != last_wait_by_id_.end() && it->second.records_before == records_before) {
      repeat_waits_.insert(wait_call.value());
      *rule = Diag::kWaitEdgeEventIdRepeat;
      return it->second.record;
    }
  }
  EventRecord record = FifoRecord(calls, pos);
  *rule = Diag::kWaitEdgeRecordPair;
  if (record.time < 0) {
    record = {wait_time, -1};
    *rule = Diag::kWaitEdgeLastLaunch;
  }
  if (event_id >= 0) last_wait_by_id_[{th, event_id}] = {records_before, record};
  return record;
}

// Fallback (a): the cudaEventRecord calls on the wait's thread since the previous wait that
// consumed one, paired with the waits after them first in first out. Waits that reused an
// earlier wait's record (same event id) consume none.
GraphBuilder::EventRecord GraphBuilder::FifoRecord(const std::vector<uint32_t>& calls,
                                                   std::vector<uint32_t>::const_iterator pos) const {
  auto is_consuming_wait = [&](uint32_t ev) {
    return Contains(ApiName(CpuEventId(ev)), "StreamWaitEvent") && !repeat_waits_.count(ev);
  };
  std::vector<uint32_t> records;  // newest first
  // Walk back at most kMaxWalk calls: pairing looks at the recent past only.
  constexpr std::ptrdiff_t kMaxWalk = 512;
  const auto walk_end = pos - std::min<std::ptrdiff_t>(kMaxWalk, pos - calls.begin());
  for (auto it = pos; it != walk_end;) {
    --it;
    if (IsEventRecordCall(ApiName(CpuEventId(*it)))) records.push_back(*it);
    // Stop at the previous wait once a record was found: that wait consumed older ones.
    if (is_consuming_wait(*it) && !records.empty()) break;
  }
  if (records.empty()) return {};
  // Count the waits between the oldest candidate record and this wait to pick the FIFO position.
  size_t waits_before = 0;
  for (auto it = pos; it != walk_end;) {
    --it;
    if (*it == records.back()) break;
    if (is_consuming_wait(*it)) ++waits_before;
  }
  const size_t idx = std::min(waits_before, records.size() - 1);
  return {t_.cpu.start[records[records.size() - 1 - idx]], -1};
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
      case SyncKind::kEventSync: {
        // The recorded stream and record call: resolved by Kineto, else by the event id.
        int64_t stream = sy.wait_on_stream[i];
        TimeNs rt = CallTime(sy.wait_on_record_corr[i], t);
        if (stream < 0 && sy.event_id[i] >= 0) {
          const int64_t r = CudaEventBefore(device, sy.event_id[i], sy.correlation[i]);
          if (r >= 0) {
            stream = t_.cuda_events.stream[r];
            rt = CallTime(t_.cuda_events.correlation[r], t);
          }
        }
        const StreamId recorded = stream >= 0 ? StreamOn(device, stream) : StreamId();
        if (recorded.valid() && AddHostSync(LastLaunchedBefore(recorded, rt), call)) {
          g_.diagnostics_.Add(Diag::kSyncEdgeEvent);
        }
        // Unresolved Event Syncs of blocking calls are handled by the call rule below;
        // cudaEventQuery polls (NCCL watchdog) never block and get no edge.
        break;
      }
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
