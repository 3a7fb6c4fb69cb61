#include "emo/opt/trace_plan.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <unordered_map>

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
    const auto bounds = analysis::BoundsOf(*a_.graph, a_.iterations, s, a_.steady);
    const TimeNs lo = bounds.start, hi = bounds.end;
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

// Clock options of every pack from its busy time per kernel class.
std::vector<PackModel> BuildModels(const analysis::TraceAnalysis& a, const model::DeviceModel& device,
                                   const std::vector<packing::Pack>& packs) {
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
  return models;
}

// Phases of the steady iteration for the pass-level baseline: maximal runs (in time order) of
// ops launched by one CPU thread (the forward on the main thread, the backward on the autograd
// thread, the optimizer back on the main thread); a run shorter than the minimum pack length
// joins the one before (the same clock-switch constraint the plan obeys).
std::vector<packing::Pack> Phases(const analysis::TraceAnalysis& a, const std::vector<packing::Pack>& packs,
                                  TimeNs min_len) {
  const auto& n = a.graph->nodes();
  std::vector<graph::NodeId> ops;
  for (const auto& p : packs) ops.insert(ops.end(), p.ops.begin(), p.ops.end());
  std::sort(ops.begin(), ops.end(), [&](graph::NodeId x, graph::NodeId y) {
    return a.timeline.start[x.value()] < a.timeline.start[y.value()];
  });
  auto thread_of = [&](graph::NodeId v) -> int64_t {
    for (uint32_t ei : a.graph->InEdges(v)) {
      const auto& e = a.graph->edges()[ei];
      if (e.kind == graph::EdgeKind::kLaunch) return n.resource[e.src.value()];
    }
    return -1;
  };
  std::vector<packing::Pack> phases;
  int64_t cur_thread = -2;
  for (auto v : ops) {
    const int64_t th = thread_of(v);
    const bool short_run = !phases.empty() && a.timeline.start[v.value()] - phases.back().start < min_len;
    if (phases.empty() || (th != cur_thread && !short_run)) {
      packing::Pack p;
      p.device = packs.front().device;
      p.start = a.timeline.start[v.value()];
      phases.push_back(std::move(p));
    }
    cur_thread = th;
    phases.back().ops.push_back(v);
  }
  for (size_t i = 0; i < phases.size(); ++i) phases[i].end = i + 1 < phases.size() ? phases[i + 1].start : packs.back().end;
  return phases;
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
  const std::vector<PackModel> models = BuildModels(a, device, packs);
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
  std::vector<size_t> best_choice = use_static ? from_static : from_default;
  plan.plan = use_static ? b_pt : a_pt;
  // Pass-level baseline (Perseus' granularity): one clock per phase, best found by the same
  // descent from the default and from the static-best clock.
  if (packs.size() > 0 && std::all_of(packs.begin(), packs.end(), [&](const packing::Pack& p) { return p.device == packs.front().device; })) {
    const auto phases = Phases(a, packs, options.packing.min_pack_ns);
    const auto phase_models = BuildModels(a, device, phases);
    Evaluator pev(a, device, phases, phase_models);
    std::vector<size_t> d0(phases.size()), s0(phases.size());
    for (size_t p = 0; p < phases.size(); ++p) {
      d0[p] = phase_models[p].default_index;
      s0[p] = static_choice.front();
    }
    const PlanPoint x = Descend(pev, phase_models, plan.deadline_ns, d0, nullptr);
    const PlanPoint y = Descend(pev, phase_models, plan.deadline_ns, s0, nullptr);
    plan.pass_level = x.energy_j <= y.energy_j ? x : y;
    plan.pass_level_phases = phases.size();
    // A third start for the plan: each pack at the pass-level clock of the phase holding most
    // of its busy time; the plan is kept if this descent ends cheaper.
    const auto& phase_choice = x.energy_j <= y.energy_j ? d0 : s0;
    std::unordered_map<uint32_t, size_t> phase_of;
    for (size_t q = 0; q < phases.size(); ++q) {
      for (auto v : phases[q].ops) phase_of[v.value()] = q;
    }
    std::vector<size_t> from_pass(packs.size());
    for (size_t p = 0; p < packs.size(); ++p) {
      std::vector<TimeNs> busy(phases.size(), 0);
      for (auto v : packs[p].ops) busy[phase_of.at(v.value())] += a.durations[v.value()];
      const size_t q = static_cast<size_t>(std::max_element(busy.begin(), busy.end()) - busy.begin());
      from_pass[p] = phase_choice[q];
    }
    const PlanPoint z = Descend(ev, models, plan.deadline_ns, from_pass, nullptr);
    if (z.time_ns <= plan.deadline_ns && z.energy_j < plan.plan.energy_j) {
      plan.plan = z;
      best_choice = from_pass;
    }
    // Dependency-blind per-kernel baseline: every memory-class op at the clock that minimises
    // its own modelled energy, the rest at the default clock, slack not considered.
    std::vector<packing::Pack> singles;
    for (const auto& p : packs) {
      for (auto v : p.ops) {
        packing::Pack one;
        one.device = p.device;
        one.start = a.timeline.start[v.value()];
        one.ops = {v};
        singles.push_back(std::move(one));
      }
    }
    std::sort(singles.begin(), singles.end(), [](const packing::Pack& x1, const packing::Pack& x2) { return x1.start < x2.start; });
    const auto single_models = BuildModels(a, device, singles);
    std::vector<size_t> blind(singles.size());
    const auto& t = *a.trace;
    for (size_t p = 0; p < singles.size(); ++p) {
      const auto& m = single_models[p];
      blind[p] = m.default_index;
      const auto v = singles[p].ops.front().value();
      if (model::Classify(t.Name(t.gpu.name[a.graph->nodes().ref[v]])) != model::KernelClass::kMemory) continue;
      for (size_t i = 0; i < m.options.size(); ++i) {
        if (m.options[i].energy_j < m.options[blind[p]].energy_j) blind[p] = i;
      }
    }
    Evaluator bev(a, device, singles, single_models);
    plan.per_kernel_blind = bev.Evaluate(blind);
    plan.replays += pev.replays + bev.replays;
  }
  for (size_t p = 0; p < packs.size(); ++p) {
    const auto& m = models[p];
    plan.packs.push_back({packs[p], m.options[best_choice[p]].clock, m.options[m.default_index].time_s,
                          m.options[best_choice[p]].time_s});
  }
  for (size_t p = 0; p < plan.packs.size(); ++p) {
    if (plan.packs[(p + 1) % plan.packs.size()].clock != plan.packs[p].clock) ++plan.switches;
  }
  plan.replays += ev.replays;
  plan.solve_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return plan;
}

}  // namespace emo::opt
