#include "emo/graph/graph.h"

namespace emo::graph {

std::string_view NodeKindName(NodeKind k) {
  switch (k) {
    case NodeKind::kCpuInterval: return "cpu_interval";
    case NodeKind::kApiCall: return "api_call";
    case NodeKind::kGpuOp: return "gpu_op";
  }
  return "?";
}

std::string_view EdgeKindName(EdgeKind k) {
  switch (k) {
    case EdgeKind::kThreadOrder: return "thread_order";
    case EdgeKind::kLaunch: return "launch";
    case EdgeKind::kStreamOrder: return "stream_order";
    case EdgeKind::kEventWait: return "event_wait";
    case EdgeKind::kHostSync: return "host_sync";
    case EdgeKind::kCrossThread: return "cross_thread";
    case EdgeKind::kGpuContention: return "gpu_contention";
    case EdgeKind::kCount: break;
  }
  return "?";
}

std::span<const uint32_t> Graph::InEdges(NodeId v) const {
  return {in_index_.data() + in_offsets_[v.value()],
          in_index_.data() + in_offsets_[v.value() + 1]};
}

std::span<const uint32_t> Graph::OutEdges(NodeId v) const {
  return {out_index_.data() + out_offsets_[v.value()],
          out_index_.data() + out_offsets_[v.value() + 1]};
}

}  // namespace emo::graph
