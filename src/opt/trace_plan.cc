#include "emo/opt/trace_plan.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include <fmt/format.h>

#include "emo/model/pack_model.h"

namespace emo::opt {
namespace {

using graph::NodeKind;

// Everything the search needs about one pack.
struct PackModel {
  std::vector<model::ClockOption> options;  // ascending clock
  std::vector<size_t> front;                // Pareto options, fastest first
  size_t default_index = 0;                 // index of the default clock in options
};

class Evaluator {
 public:
  Evaluator(const analysis::TraceAnalysis& a, const model::DeviceModel& d, const std::vector<packing::Pack>& packs,
            const std::vector<PackModel>& models)
      : a_(a), d_(d), packs_(packs), models_(models) {}

  // Iteration time and energy with pack p at option choice[p] (an index into its options).
  PlanPoint Evaluate(const std::vector<size_t>& choice) {
    ++replays;
    std::vector<TimeNs> dur = a_.durations;
    for (size_t p = 0; p < packs_.size(); ++p) {
      const auto& m = models_[p];
      const double ratio = m.options[choice[p]].time_s / std::max(1e-12, m.options[m.default_index].time_s);
      for (auto v : packs_[p].ops) dur[v.value()] = static_cast<TimeNs>(std::llround(static_cast<double>(dur[v.value()]) * ratio));
    }
    const auto s = analysis::Replay(*a_.graph, dur);
    const auto ends = analysis::IterationEnds(*a_.graph, a_.iterations, s);
    const TimeNs lo = a_.steady == 0 ? analysis::FirstIterationStart(*a_.graph, a_.iterations, s) : ends[a_.steady - 1];
    const TimeNs hi = ends[a_.steady];
    PlanPoint out{hi - lo, 0.0};
    // Pack windows tile [lo, hi): each from its first op's new start (the first from lo).
    for (size_t p = 0; p < packs_.size(); ++p) {
      auto start_of = [&](size_t q) {
        TimeNs st = INT64_MAX;
        for (auto v : packs_[q].ops) st = std::min(st, s.start[v.value()]);
        return st;
      };
      const bool first = p == 0 || packs_[p - 1].device != packs_[p].device;
      const bool last = p + 1 == packs_.size() || packs_[p + 1].device != packs_[p].device;
      const TimeNs w0 = first ? lo : std::max(lo, start_of(p));
      const TimeNs w1 = last ? hi : std::min(hi, start_of(p + 1));
      const auto& opt = models_[p].options[choice[p]];
      const double idle_s = std::max(0.0, NsToS(w1 - w0) - opt.time_s);
      out.energy_j += opt.energy_j + d_.IdlePower(opt.clock).value() * idle_s;
    }
    return out;
  }

  size_t replays = 0;

 private:
  const analysis::TraceAnalysis& a_;
  const model::DeviceModel& d_;
  const std::vector<packing::Pack>& packs_;
  const std::vector<PackModel>& models_;
};

// Greedy descent: from `choice`, repeatedly take the move of one pack to its next slower
// Pareto option with the most energy saved per unit of added time, while the deadline holds
// and energy falls. Visited points go to `trail`.
PlanPoint Descend(Evaluator& ev, const std::vector<PackModel>& models, TimeNs deadline, std::vector<size_t>& choice,
                  std::vector<PlanPoint>* trail) {
  PlanPoint cur = ev.Evaluate(choice);
  if (trail) trail->push_back(cur);
  while (true) {
    double best_score = -1;
    size_t best_pack = SIZE_MAX, best_option = 0;
    PlanPoint best_point;
    for (size_t p = 0; p < choice.size(); ++p) {
      const auto& front = models[p].front;
      auto pos = std::find(front.begin(), front.end(), choice[p]);
      size_t next_pos = pos == front.end() ? 0 : static_cast<size_t>(pos - front.begin()) + 1;
      // Off-front start (the static clock may be dominated for this pack): the first front
      // option slower than the current one.
      if (pos == front.end()) {
        while (next_pos < front.size() && models[p].options[front[next_pos]].time_s <= models[p].options[choice[p]].time_s) ++next_pos;
      }
      if (next_pos >= front.size()) continue;
      const size_t saved = choice[p];
      choice[p] = front[next_pos];
      const PlanPoint pt = ev.Evaluate(choice);
      choice[p] = saved;
      const double de = cur.energy_j - pt.energy_j;
      if (pt.time_ns > deadline || de <= 0) continue;
      const double dt = std::max(1.0, static_cast<double>(pt.time_ns - cur.time_ns));
      const double score = de / dt;
      if (score > best_score) {
        best_score = score;
        best_pack = p;
        best_option = front[next_pos];
        best_point = pt;
      }
    }
    if (best_pack == SIZE_MAX) return cur;
    choice[best_pack] = best_option;
    cur = best_point;
    if (trail) trail->push_back(cur);
  }
}

}  // namespace

Result<TracePlan> PlanTrace(const analysis::TraceAnalysis& a, const model::DeviceModel& device,
                            const TracePlanOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  TracePlan plan;
  plan.device = device.name;
  plan.model_source = device.path;
  auto packs = packing::PackSteadyIteration(a, options.packing);
  if (packs.empty()) {
    return InvalidArgument(fmt::format("{}: the steady iteration has no GPU ops to plan", a.trace->meta.source_path));
  }
  const auto& n = a.graph->nodes();
  const auto& t = *a.trace;
  std::vector<PackModel> models(packs.size());
  for (size_t p = 0; p < packs.size(); ++p) {
    model::ClassTimes times;
    for (auto v : packs[p].ops) {
      const auto cls = model::Classify(t.Name(t.gpu.name[n.ref[v.value()]]));
      times.busy_s[static_cast<size_t>(cls)] += NsToS(a.durations[v.value()]);
    }
    const auto unit = model::PackUnitModel(device, times, device.default_clock);
    auto& m = models[p];
    m.options = model::ClockOptions(device, unit);
    m.front = model::ParetoFront(m.options);
    m.default_index = 0;
    for (size_t i = 0; i < m.options.size(); ++i) {
      if (std::abs(m.options[i].clock.value() - device.default_clock.value()) <
          std::abs(m.options[m.default_index].clock.value() - device.default_clock.value())) {
        m.default_index = i;
      }
    }
  }
  Evaluator ev(a, device, packs, models);
  std::vector<size_t> base_choice(packs.size());
  for (size_t p = 0; p < packs.size(); ++p) base_choice[p] = models[p].default_index;
  plan.baseline = ev.Evaluate(base_choice);
  plan.deadline_ns = static_cast<TimeNs>(std::floor(static_cast<double>(plan.baseline.time_ns) * (1.0 + options.max_slowdown)));

  // Best single static clock meeting the deadline.
  std::vector<size_t> static_choice = base_choice;
  plan.static_best = plan.baseline;
  plan.static_best_clock = device.default_clock;
  for (size_t i = 0; i < models[0].options.size(); ++i) {
    std::vector<size_t> c(packs.size(), i);
    const PlanPoint pt = ev.Evaluate(c);
    if (pt.time_ns <= plan.deadline_ns && pt.energy_j < plan.static_best.energy_j) {
      plan.static_best = pt;
      plan.static_best_clock = models[0].options[i].clock;
      static_choice = c;
    }
  }
  // Descents from the default clocks and from the static best; keep the cheaper.
  std::vector<size_t> from_default = base_choice;
  const PlanPoint a_pt = Descend(ev, models, plan.deadline_ns, from_default, &plan.frontier);
  std::vector<size_t> from_static = static_choice;
  const PlanPoint b_pt = Descend(ev, models, plan.deadline_ns, from_static, nullptr);
  const bool use_static = b_pt.energy_j < a_pt.energy_j;
  const auto& choice = use_static ? from_static : from_default;
  plan.plan = use_static ? b_pt : a_pt;
  for (size_t p = 0; p < packs.size(); ++p) {
    const auto& m = models[p];
    PlannedPack pp{packs[p], m.options[choice[p]].clock, m.options[m.default_index].time_s, m.options[choice[p]].time_s};
    plan.packs.push_back(std::move(pp));
  }
  for (size_t p = 0; p < plan.packs.size(); ++p) {
    const auto& next = plan.packs[(p + 1) % plan.packs.size()];
    if (next.clock != plan.packs[p].clock) ++plan.switches;
  }
  plan.replays = ev.replays;
  plan.solve_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return plan;
}

}  // namespace emo::opt
