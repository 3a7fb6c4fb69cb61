// Iterations: ProfilerStep#N (or a user regex on CPU annotations), the nodes of each, and
// iteration times measured from a schedule.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "emo/analysis/replay.h"
#include "emo/base/status.h"
#include "emo/graph/graph.h"

namespace emo::analysis {

struct Iteration {
  std::string name;
  trace::ThreadId thread;  // the thread carrying the annotation
  TimeNs start = 0;        // annotation interval (measured)
  TimeNs end = 0;
};

// The iteration structure of one graph: iterations in time order and, per node, the index of
// the iteration it belongs to (-1 when outside every iteration). A CPU node belongs to the
// iteration whose annotation contains its start; a GPU op to the iteration of its launch call.
struct IterationMap {
  std::vector<Iteration> iterations;
  std::vector<int32_t> node_iteration;
  bool from_marker = true;  // false: no marker matched, the whole trace is one iteration
  std::string regex;        // the marker regex searched (the default or the caller's)
};

// The iteration marker when none is given: PyTorch profiler's step annotations.
inline constexpr const char* kDefaultIterationRegex = "^ProfilerStep#\\d+$";

// The iteration whose annotation window [start, end) contains `time`, or -1.
int32_t IterationAt(const IterationMap& m, TimeNs time);

// The CPU nodes (API calls and CPU intervals) of every thread in time order, by ThreadId.
using ThreadNodes = std::vector<std::vector<uint32_t>>;
ThreadNodes CpuNodesByThread(const graph::Graph& g);

// Where a measured time inside a node lands under another schedule: at the same offset from
// the node's start, capped at its end (kShift), or at the same fraction of its duration (kScale).
enum class InNode : uint8_t { kShift, kScale };

// Maps a measured time on a CPU thread onto schedule `s`, given the thread's nodes in time
// order (CpuNodesByThread): a time inside a node moves with that node (`in_node`); a time after
// a node keeps its distance from that node's end; a time before the first node keeps its
// distance from that node's start. Monotone when the thread's nodes keep their order under `s`.
// Iteration bounds map their annotations with kShift; the Perfetto output maps the recorded CPU
// operators with kScale, which keeps operators inside a shortened node apart.
TimeNs MapOnThread(const graph::Graph& g, std::span<const uint32_t> thread_nodes, const Schedule& s, TimeNs t,
                   InNode in_node = InNode::kShift);

// Default marker: kDefaultIterationRegex. `regex` (ECMAScript, searched) overrides it.
Result<IterationMap> FindIterations(const graph::Graph& g, const std::string& regex);

// End of every iteration under schedule `s`: max(the annotation end, shifted with the node of
// the annotation's thread that contains it, and the end of every node of the iteration).
// The overloads with `thread_nodes` take CpuNodesByThread(g) from a caller that measures many
// schedules of one graph (the overhead fits), so it is built once.
std::vector<TimeNs> IterationEnds(const graph::Graph& g, const IterationMap& m, const Schedule& s);
std::vector<TimeNs> IterationEnds(const graph::Graph& g, const IterationMap& m, const Schedule& s,
                                  const ThreadNodes& thread_nodes);
// Start of the first iteration under `s` (its annotation start, shifted like the ends).
TimeNs FirstIterationStart(const graph::Graph& g, const IterationMap& m, const Schedule& s);
TimeNs FirstIterationStart(const graph::Graph& g, const IterationMap& m, const Schedule& s,
                           const ThreadNodes& thread_nodes);

// Start and end of iteration i under `s`: from the previous iteration's end (the first
// iteration's annotation start, shifted) to its own end. The time of iteration i is their gap.
struct IterationBounds {
  TimeNs start = 0;
  TimeNs end = 0;
};
IterationBounds BoundsOf(const graph::Graph& g, const IterationMap& m, const Schedule& s, size_t i);

// The node that ends iteration i under `s`: the latest end among its calls and GPU ops.
graph::NodeId IterationSink(const graph::Graph& g, const IterationMap& m, const Schedule& s, size_t i);

// Per-iteration times: end[i] - end[i-1] (the period, right for loops where the CPU runs
// ahead as well as for synchronized ones); the first is end[0] - start.
std::vector<TimeNs> IterationTimes(const graph::Graph& g, const IterationMap& m, const Schedule& s);
std::vector<TimeNs> IterationTimes(const graph::Graph& g, const IterationMap& m, const Schedule& s,
                                   const ThreadNodes& thread_nodes);

// Index of the steady-state iteration: the (lower) median of the measured iteration times,
// leaving out the first iteration when there are three or more.
size_t SteadyIteration(const std::vector<TimeNs>& measured_times);

}  // namespace emo::analysis
