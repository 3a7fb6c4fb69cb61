// Packing (the stage after analysis, docs/architecture.md): the SM clock is GPU-wide, so a
// decision unit is a window of one GPU's timeline covering every op that starts in it, on any
// stream. Every way EMO cuts the steady iteration into such packs lives here, behind one call
// (MakePacks) on a narrow input: per GPU, its ops in time order with their slack, their launch
// order, the CPU thread that launched them, their clock-sensitivity class and whether they wait
// on a sync. Nothing here reads the analysis except InputOf, the adapter.
//
// Packs of one device are contiguous and in time order, so on one device the pack graph (an
// edge wherever an op edge crosses packs) points forward in time. Across streams and devices
// that is not enough (two packs overlapping in time can wait on each other); kDependency also
// starts a pack at every op that waits on another device (`waits_on_device`), so each edge goes
// to a pack that starts later and its pack graph is acyclic by construction on a feasible
// timeline (PackGraphEdges, IsAcyclic; tested).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string_view>
#include <utility>
#include <vector>

#include "emo/analysis/analyze.h"

namespace emo::packing {

// One GPU op of the steady iteration, as the packers see it.
struct PackOp {
  graph::NodeId node;
  TimeNs start = 0;     // on the analysis timeline
  TimeNs duration = 0;  // busy time
  TimeNs slack = 0;     // how much later it may end without delaying the iteration
  size_t launch = 0;    // index in its device's launch order (the anchor a policy counts)
  int64_t thread = -1;  // the CPU thread that launched it (-1: unknown)
  uint8_t clock_class = 0;  // how its time follows the SM clock (the caller's classes; 0 when none)
  bool waits_on_stream = false;  // it waits on another stream's op of its device (a sync point)
  bool waits_on_device = false;  // it waits on another device's op
};

// One GPU's ops of the steady iteration, in start order; `end` is the iteration's end.
struct DeviceOps {
  int32_t device = 0;
  TimeNs end = 0;
  std::vector<PackOp> ops;
};

struct PackingInput {
  std::vector<DeviceOps> devices;  // by device id
};

// The steady iteration of an analysis. `classify` gives each GPU op (its index in the trace's gpu
// table) its clock class (the model's kernel classes or kinds; packing sits before the model, so
// the caller passes it). Event waits mark `waits_on_stream` (same device) or `waits_on_device`;
// waits through the host (a sync, then a launch) are not marked yet.
PackingInput InputOf(const analysis::TraceAnalysis& a,
                     const std::function<uint8_t(uint32_t gpu_op)>& classify = {});

enum class PackingKind {
  kTimeWindow,  // windows of at least the minimum length, cut where the slack class changes
  kPhases,      // maximal runs of ops launched by one CPU thread (Perseus' pass level)
  kPerOp,       // one pack per op (the dependency-blind per-kernel baseline)
  kDependency,  // cut where criticality or clock class changes and at syncs; critical ops never
                // share a pack with slack ones unless the minimum length forces it; a cut
                // where an op waits on another device always stays
};
std::string_view PackingName(PackingKind kind);

struct PackOptions {
  // Minimum pack length: the clock-switch latency must fit in it. The H200's is not measured
  // (setting clocks is not allowed on our machine): 10 ms is a stated assumption.
  TimeNs min_pack_ns = 10'000'000;
  // An op "has slack" when its slack exceeds this share of its duration.
  double slack_share = 0.05;
};

// One pack: a window of one device's timeline and the GPU ops that start in it, in start
// order. `first_launch` is the index of its first op in the iteration's launch order on the
// device (the anchor a run-time policy uses).
struct Pack {
  int32_t device = 0;
  TimeNs start = 0;  // first op start (timeline)
  TimeNs end = 0;    // next pack's start, or the iteration end
  std::vector<graph::NodeId> ops;
  size_t first_launch = 0;
  TimeNs busy_ns = 0;        // summed op durations
  TimeNs slack_busy_ns = 0;  // of which ops with slack
  bool has_slack = false;    // the majority of its busy time has slack
  bool critical = false;   // it holds an op without slack (kDependency: such packs stay whole)
};

// Packs of every device, per device in time order (devices in the input's order).
std::vector<Pack> MakePacks(PackingKind kind, const PackingInput& input, const PackOptions& options);

// The time-window packs of an analysis' steady iteration (MakePacks(kTimeWindow, InputOf(a))).
std::vector<Pack> PackSteadyIteration(const analysis::TraceAnalysis& a, const PackOptions& options);

// `next`, the pack right after `into` on its device, becomes part of it.
void Absorb(Pack* into, const Pack& next);

// Adjacent packs of one device with the same planned clock become one (`clocks[p]`: pack p's
// clock, any comparable id). Returns the merged packs; `merged_clocks` gets their clocks.
std::vector<Pack> MergeEqualClocks(const std::vector<Pack>& packs, const std::vector<int64_t>& clocks,
                                   std::vector<int64_t>* merged_clocks);

// Edges of the pack graph: one (src pack, dst pack) per distinct pair that an op edge joins,
// src != dst. Ops in no pack are ignored.
std::vector<std::pair<size_t, size_t>> PackGraphEdges(const std::vector<Pack>& packs,
                                                      const std::vector<std::pair<graph::NodeId, graph::NodeId>>& op_edges);
// Whether a graph of `n` nodes with these edges has no cycle.
bool IsAcyclic(size_t n, const std::vector<std::pair<size_t, size_t>>& edges);

}  // namespace emo::packing
