#include "emo/opt/problem.h"

#include <algorithm>

#include <fmt/format.h>

#include "emo/base/check.h"
#include "emo/base/text.h"
#include "prepared.h"

namespace emo::opt {

NodeIndex Problem::AddNode(std::span<const Option> options, int32_t gpu) {
  options_.insert(options_.end(), options.begin(), options.end());
  option_begin_.push_back(static_cast<uint32_t>(options_.size()));
  gpu_.push_back(gpu);
  return static_cast<NodeIndex>(gpu_.size() - 1);
}

void Problem::AddEdge(NodeIndex from, NodeIndex to, TimeNs min_delay_ns) {
  edge_from_.push_back(from);
  edge_to_.push_back(to);
  edge_delay_.push_back(min_delay_ns);
}

Status Problem::Validate() const {
  const uint32_t n = num_nodes();
  if (n == 0) return InvalidArgument("the problem has no activities");
  if (idle_power_w_ < 0) return InvalidArgument("idle power must be >= 0 W");
  for (uint32_t i = 0; i < n; ++i) {
    if (option_begin_[i] == option_begin_[i + 1]) {
      return InvalidArgument(fmt::format("activity {} has no options", i));
    }
    for (const Option& o : options(i)) {
      if (o.duration_ns < 0) {
        return InvalidArgument(fmt::format("activity {} has a negative duration", i));
      }
    }
    if (gpu_[i] != kNoGpu && (gpu_[i] < 0 || gpu_[i] >= num_gpus_)) {
      return InvalidArgument(
          fmt::format("activity {} is on GPU {} but the problem has {}", i, gpu_[i],
                      Plural(static_cast<uint64_t>(num_gpus_), "GPU")));
    }
  }
  for (size_t e = 0; e < edge_from_.size(); ++e) {
    if (edge_from_[e] >= n || edge_to_[e] >= n) {
      return InvalidArgument(fmt::format("edge {} names a missing activity", e));
    }
    if (edge_delay_[e] < 0) return InvalidArgument(fmt::format("edge {} has a negative delay", e));
  }
  std::vector<uint32_t> order;
  int64_t on_cycle = TopologicalOrder(*this, order);
  if (on_cycle >= 0) {
    return InvalidArgument(fmt::format("the graph has a cycle through activity {}", on_cycle));
  }
  return Status::Ok();
}

Evaluation Evaluate(const Problem& problem, std::span<const uint32_t> plan) {
  const uint32_t n = problem.num_nodes();
  EMO_CHECK(plan.size() == n);
  std::vector<TimeNs> dur(n);
  Evaluation ev;
  double busy_s = 0.0;
  for (uint32_t i = 0; i < n; ++i) {
    const Option& o = problem.options(i)[plan[i]];
    dur[i] = o.duration_ns;
    ev.active_energy_j += o.energy_j;
    if (problem.gpu(i) != kNoGpu) busy_s += NsToS(o.duration_ns);
  }
  ev.makespan_ns = Makespan(problem, dur);
  ev.energy_j = ev.active_energy_j +
                problem.idle_power_w() * (problem.num_gpus() * NsToS(ev.makespan_ns) - busy_s);
  return ev;
}

Plan MaxKnobPlan(const Problem& problem) {
  Plan plan(problem.num_nodes(), 0);
  for (uint32_t i = 0; i < problem.num_nodes(); ++i) {
    auto opts = problem.options(i);
    for (uint32_t k = 1; k < opts.size(); ++k) {
      const Option& best = opts[plan[i]];
      if (opts[k].knob > best.knob ||
          (opts[k].knob == best.knob && opts[k].duration_ns < best.duration_ns)) {
        plan[i] = k;
      }
    }
  }
  return plan;
}

}  // namespace emo::opt
