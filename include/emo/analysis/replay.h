// Replay: the earliest-start schedule of a Graph with given per-node durations (BRIEF stage 3).
#pragma once

#include <span>
#include <vector>

#include "emo/graph/graph.h"

namespace emo::analysis {

// Start and end time of every node, indexed by NodeId.
struct Schedule {
  std::vector<TimeNs> start;
  std::vector<TimeNs> end;
};

// The measured durations of the graph's nodes (the identity what-if).
std::vector<TimeNs> MeasuredDurations(const graph::Graph& g);

// Earliest-start schedule: a root starts at its measured time; any other node starts at the
// latest of its start constraints; a node ends at max(start + duration, its end constraints).
// `durations` has one entry per node.
Schedule Replay(const graph::Graph& g, std::span<const TimeNs> durations);
// The same with a lower bound on each node's end (`end_bounds`, one per node; INT64_MIN: none),
// standing for constraints from outside the graph (another rank's arrival at a collective).
Schedule Replay(const graph::Graph& g, std::span<const TimeNs> durations, std::span<const TimeNs> end_bounds);

}  // namespace emo::analysis
