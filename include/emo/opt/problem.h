// The time–energy problem the opt stage solves: a DAG of activities, each run with one of a
// discrete list of options (duration, energy), minimising energy within a makespan bound.
//
// Energy accounting (the one contract every solver and caller shares):
//   E(plan) = Σ_i e_i(k_i) + P_idle · (G · T − Σ_{i on a GPU} t_i(k_i))
// where e_i(k) is the MEASURED energy of activity i while it runs with option k (the GPU's
// whole power, idle part included), T the plan's makespan, G the number of GPUs and P_idle
// the power a GPU draws while it waits (Perseus' "P2P blocking power"). Idle power is thus
// charged over the makespan on every GPU, and a GPU activity pays only its energy above what
// the GPU would have drawn idling for the same time. Equivalently each GPU option has the
// effective cost c = e − P_idle·t and E = Σ c + P_idle·G·T, which is what the solvers
// minimise. Perseus does the same (it subtracts P_block·t from every option). Consequence: an
// option slower AND costlier in raw energy than another can still be worth taking in slack
// if its extra energy is below P_idle × its extra time; the solvers keep every option that is
// Pareto-optimal in (t, c), not in (t, e).
// Activities on one GPU must be serialised by edges (a GPU's idle time is G·T minus its busy
// time only if its activities never overlap). Off-GPU activities (kNoGpu: CPU work, fixed
// waits) are charged e only; give them a single option with energy 0 when they cost nothing.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "emo/base/status.h"
#include "emo/base/units.h"

namespace emo::opt {

// One way to run an activity: how long it takes and how much energy it draws meanwhile.
struct Option {
  TimeNs duration_ns = 0;
  double energy_j = 0.0;  // measured energy while running (not above-idle)
  int32_t knob = 0;       // what the option sets, e.g. the SM clock in MHz (a label)
};

using NodeIndex = uint32_t;
inline constexpr int32_t kNoGpu = -1;

// A DAG of activities with options, plus edges with a minimum delay. Built once, then
// Validate()d; solvers read it and never change it. Plans are per-node option indices into
// the options exactly as they were added.
class Problem {
 public:
  // Adds an activity; `options` must be non-empty; `gpu` in [0, num_gpus) or kNoGpu.
  NodeIndex AddNode(std::span<const Option> options, int32_t gpu);
  // Adds "to starts no earlier than `min_delay_ns` after from ends".
  void AddEdge(NodeIndex from, NodeIndex to, TimeNs min_delay_ns = 0);

  void set_idle_power_w(double watts) { idle_power_w_ = watts; }
  void set_num_gpus(int32_t gpus) { num_gpus_ = gpus; }

  // Checks every node has options with durations ≥ 0, GPU indices are in range, edges name
  // existing nodes with delays ≥ 0, and the graph is acyclic (the error names a node on a
  // cycle).
  Status Validate() const;

  uint32_t num_nodes() const { return static_cast<uint32_t>(option_begin_.size() - 1); }
  size_t num_edges() const { return edge_from_.size(); }
  std::span<const Option> options(NodeIndex i) const {
    return {options_.data() + option_begin_[i], options_.data() + option_begin_[i + 1]};
  }
  int32_t gpu(NodeIndex i) const { return gpu_[i]; }
  double idle_power_w() const { return idle_power_w_; }
  int32_t num_gpus() const { return num_gpus_; }
  NodeIndex edge_from(size_t e) const { return edge_from_[e]; }
  NodeIndex edge_to(size_t e) const { return edge_to_[e]; }
  TimeNs edge_delay(size_t e) const { return edge_delay_[e]; }

 private:
  std::vector<uint32_t> option_begin_{0};
  std::vector<Option> options_;
  std::vector<int32_t> gpu_;
  std::vector<NodeIndex> edge_from_, edge_to_;
  std::vector<TimeNs> edge_delay_;
  double idle_power_w_ = 0.0;
  int32_t num_gpus_ = 0;
};

// A plan: for every node, the index of its chosen option.
using Plan = std::vector<uint32_t>;

// Makespan and energy of a plan under the accounting above.
struct Evaluation {
  TimeNs makespan_ns = 0;
  double energy_j = 0.0;         // Σ e + P_idle·(G·T − Σ GPU busy time)
  double active_energy_j = 0.0;  // Σ e
};

// Evaluates `plan` (one valid option index per node) on a Validate()d problem.
Evaluation Evaluate(const Problem& problem, std::span<const uint32_t> plan);

// The plan choosing, on every node, the option with the largest knob (ties: the fastest),
// e.g. "every computation at the maximum clock".
Plan MaxKnobPlan(const Problem& problem);

}  // namespace emo::opt
