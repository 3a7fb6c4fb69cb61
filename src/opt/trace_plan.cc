#include "emo/opt/trace_plan.h"

#include <algorithm>
#include <limits>
#include <array>
#include <chrono>
#include <cmath>
#include <map>
#include <optional>
#include <span>
#include <unordered_map>

#include <fmt/format.h>

#include "emo/base/check.h"
#include "emo/model/kernel_work.h"
#include "emo/model/pack_model.h"

namespace emo::opt {
namespace {

using graph::NodeKind;

// Everything the search needs about one pack.
struct PackModel {
  std::vector<model::ClockOption> options;  // ascending clock
  std::vector<size_t> front;                // Pareto options, fastest first
  size_t default_index = 0;                 // index of the default clock in options
  std::vector<uint8_t> op_kind;             // share kind (model::ShareKindOf) of each of the pack's ops
};

// What every packing of one trace is planned against: the analysis, the device model, the
// clock the measured GPU durations ran at, and the node durations a plan stretches.
struct Basis {
  Basis(const analysis::TraceAnalysis& analysis, const model::DeviceModel& d, MegaHertz measured,
        TimeNs switch_latency = 0)
      : a(analysis), device(d), measured_clock(measured), stretch(model::ShareKindTimeRatios(d, measured)),
        kinds(model::ShareKindsOf(*analysis.trace)), work(model::KernelWorkFromTrace(*analysis.trace, kinds, d)),
        durations(analysis.durations),
        switch_latency_ns(switch_latency) {}
  // A rank of a job (TracePlanOptions::joint_*).
  Basis(const analysis::TraceAnalysis& analysis, const model::DeviceModel& d, MegaHertz measured,
        const TracePlanOptions& options)
      : Basis(analysis, d, measured, options.switch_latency_ns) {
    if (!options.joint_durations.empty()) {
      durations = options.joint_durations;
      end_bounds = options.joint_end_bounds;
      for (size_t v = 0; v < options.joint_arrival_limits.size(); ++v) {
        if (options.joint_arrival_limits[v] != std::numeric_limits<TimeNs>::max()) {
          arrival_limits.emplace_back(static_cast<uint32_t>(v), options.joint_arrival_limits[v]);
        }
      }
    }
  }
  const analysis::TraceAnalysis& a;
  const model::DeviceModel& device;
  // The default clock, or the clock the power limiter held the iteration at when the model's
  // power at the default clock is above the device's cap (ThrottledClock): the trace's GPU
  // durations ran there, and a higher clock changes nothing.
  MegaHertz measured_clock;
  // Per clock of the device and share kind (model::ShareKindOf): an op's time there over its
  // measured time, so a clock stretches an op the same whatever pack holds it.
  std::vector<std::array<double, model::kNumShareKinds>> stretch;
  // Per GPU op of the trace, its share kind (model::ShareKindsOf: a GEMM kernel a convolution
  // launched is a convolution).
  std::vector<int> kinds;
  // Per GPU op of the trace, its work per µs where its operator's work is known (model::OpShare).
  std::vector<model::KernelWork> work;
  // Per node, the durations plans are scored on: the analysis timeline's, one end of the
  // overhead correction's band, or the joint replay's for a rank of a job.
  std::span<const TimeNs> durations;
  // Per node, a lower bound on its end from outside the graph (the rank's peers); empty: none.
  std::span<const TimeNs> end_bounds;
  // (node, latest start): collective kernels whose later start would make the peers wait longer.
  std::vector<std::pair<uint32_t, TimeNs>> arrival_limits;
  // A clock switch takes this long: ops that start in the first switch_latency_ns of a pack
  // whose clock differs from the pack before it (on its device, cyclically: the first pack
  // follows the last of the previous iteration) run at the earlier pack's clock.
  TimeNs switch_latency_ns = 0;
};

class Evaluator {
 public:
  Evaluator(const Basis& basis, const std::vector<packing::Pack>& packs, const std::vector<PackModel>& models)
      : b_(basis), packs_(packs), models_(models), previous_(packs.size()), lead_(packs.size()), lead_share_(packs.size(), 0.0) {
    // Each pack's predecessor on its device (cyclic), and the ops a switch into it catches.
    for (size_t p = 0; p < packs.size(); ++p) {
      size_t q = p;
      if (p > 0 && packs[p - 1].device == packs[p].device) {
        q = p - 1;
      } else {
        while (q + 1 < packs.size() && packs[q + 1].device == packs[p].device) ++q;  // the device's last
      }
      previous_[p] = q;
      if (basis.switch_latency_ns <= 0) continue;
      TimeNs lead = 0, all = 0;
      for (size_t k = 0; k < packs[p].ops.size(); ++k) {
        const uint32_t v = packs[p].ops[k].value();
        all += basis.durations[v];
        if (basis.a.timeline.start[v] < packs[p].start + basis.switch_latency_ns) {
          lead_[p].push_back(k);
          lead += basis.durations[v];
        }
      }
      lead_share_[p] = all > 0 ? static_cast<double>(lead) / static_cast<double>(all) : 0.0;
    }
  }

  // Iteration time and energy with pack p at option choice[p] (an index into its options);
  // `windows`, when given, receives each pack's window length.
  PlanPoint Evaluate(const std::vector<size_t>& choice, std::vector<TimeNs>* windows = nullptr) {
    ++replays;
    std::vector<TimeNs> dur(b_.durations.begin(), b_.durations.end());
    for (size_t p = 0; p < packs_.size(); ++p) {
      OpStretches(choice, p, stretch_);
      const auto& stretch = stretch_;
      const auto& ops = packs_[p].ops;
      for (size_t k = 0; k < ops.size(); ++k) {
        auto& d = dur[ops[k].value()];
        d = static_cast<TimeNs>(std::llround(static_cast<double>(d) * stretch[k]));
      }
    }
    const auto s = analysis::Replay(*b_.a.graph, dur, b_.end_bounds);
    const auto bounds = analysis::BoundsOf(*b_.a.graph, b_.a.iterations, s, b_.a.steady);
    const TimeNs lo = bounds.start, hi = bounds.end;
    // A rank of a job that arrives later at a collective than its peers did delays them: charged.
    TimeNs late = 0;
    for (const auto& [v, limit] : b_.arrival_limits) late = std::max(late, s.start[v] - limit);
    PlanPoint out{hi - lo + late, 0.0};
    if (windows) windows->clear();
    // Pack windows tile [lo, hi): each from its first op's new start (the first from lo),
    // clamped into [lo, hi] and never before the previous boundary, so no window is negative
    // and a device's windows sum to the iteration (a stretched replay may reorder the packs'
    // first ops, and a run-ahead iteration's ops may start before its CPU bounds).
    TimeNs boundary = lo;
    for (size_t p = 0; p < packs_.size(); ++p) {
      auto start_of = [&](size_t q) {
        TimeNs st = INT64_MAX;
        for (auto v : packs_[q].ops) st = std::min(st, s.start[v.value()]);
        return std::clamp(st, lo, hi);
      };
      const bool first = p == 0 || packs_[p - 1].device != packs_[p].device;
      const bool last = p + 1 == packs_.size() || packs_[p + 1].device != packs_[p].device;
      const TimeNs w0 = first ? lo : boundary;
      const TimeNs w1 = last ? hi : std::max(w0, start_of(p + 1));
      boundary = w1;
      if (windows) windows->push_back(w1 - w0);
      const auto& opt = models_[p].options[choice[p]];
      // After a switch, the share of the pack's busy time caught by it is spent at the earlier
      // clock: its busy energy and time are mixed accordingly.
      double busy_j = opt.energy_j, busy_s = opt.time_s;
      if (Switches(choice, p)) {
        const auto& before = models_[p].options[choice[previous_[p]]];
        busy_j += lead_share_[p] * (before.energy_j - opt.energy_j);
        busy_s += lead_share_[p] * (before.time_s - opt.time_s);
      }
      // Idle power over the window minus the modelled busy time. Where ops of several streams
      // overlap, busy time exceeds the window and this term turns negative: it removes the
      // idle power that the overlapping ops' energies both include. Unclamped, the sum over
      // packs at one clock does not depend on how the iteration is cut into packs.
      const double idle_s = NsToS(w1 - w0) - busy_s;
      out.energy_j += busy_j + b_.device.IdlePower(opt.clock).value() * idle_s;
    }
    return out;
  }

  // Per op of pack p, the factor its duration is stretched by under `choice`: its pack's clock
  // option's; after a switch into the pack, its lead ops' at the previous pack's clock (they run
  // before the new clock holds).
  // Written into `f` (resized), so the replay loop reuses one buffer.
  void OpStretches(const std::vector<size_t>& choice, size_t p, std::vector<double>& f) const {
    const auto& kind = models_[p].op_kind;
    const auto& stretch = b_.stretch[choice[p]];  // options follow the device's clock table
    f.resize(packs_[p].ops.size());
    for (size_t k = 0; k < f.size(); ++k) f[k] = stretch[kind[k]];
    if (Switches(choice, p)) {
      const auto& old_stretch = b_.stretch[choice[previous_[p]]];
      for (size_t k : lead_[p]) f[k] = old_stretch[kind[k]];
    }
  }

  size_t replays = 0;

 private:
  bool Switches(const std::vector<size_t>& choice, size_t p) const {
    return b_.switch_latency_ns > 0 && !lead_[p].empty() && choice[previous_[p]] != choice[p];
  }

  const Basis& b_;
  const std::vector<packing::Pack>& packs_;
  const std::vector<PackModel>& models_;
  std::vector<size_t> previous_;             // the pack before each on its device (cyclic)
  std::vector<std::vector<size_t>> lead_;    // its ops that start within the switch latency
  std::vector<double> lead_share_;           // their share of its busy time
  std::vector<double> stretch_;              // Evaluate's per-op stretch buffer
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

// The index of the device's clock nearest its default clock: in its clock table, and so in every
// pack's options and in Basis::stretch, which follow it.
size_t DefaultClockIndex(const model::DeviceModel& device) {
  size_t d = 0;
  for (size_t i = 0; i < device.clocks.size(); ++i) {
    if (std::abs(device.clocks[i].value() - device.default_clock.value()) <
        std::abs(device.clocks[d].value() - device.default_clock.value())) {
      d = i;
    }
  }
  return d;
}

// Clock options of every pack from its busy time per kernel class, measured at the basis'
// measured clock. Each op counts with its share (model::OpShare: its work per µs where the trace
// knows it, else its KernelShare), scaled where it overlaps other ops of its GPU
// (ConcurrencyFactors, on the analysis timeline).
std::vector<PackModel> BuildModels(const Basis& b, const std::vector<packing::Pack>& packs) {
  const auto& a = b.a;
  const auto& device = b.device;
  const auto& n = a.graph->nodes();
  const auto& t = *a.trace;
  struct OpInfo {
    model::KernelClass cls;
    double share;
    int kind;  // model::ShareKindOf
  };
  std::unordered_map<uint32_t, OpInfo> info;  // by node
  std::map<int32_t, std::vector<std::pair<uint32_t, model::OpSpan>>> by_device;
  for (const auto& pack : packs) {
    for (auto v : pack.ops) {
      const uint32_t op = n.ref[v.value()];
      const int kind = b.kinds[op];
      const auto cls = model::ShareKindClass(kind);
      const double share = model::OpShare(device, b.work[op], trace::Blocks(t.gpu.launch[op]),
                                          trace::Threads(t.gpu.launch[op]), NsToS(a.durations[v.value()]), kind);
      const TimeNs start = a.timeline.start[v.value()];
      by_device[pack.device].push_back({v.value(), {start, start + a.durations[v.value()], cls, share}});
      info[v.value()] = {cls, share, kind};
    }
  }
  for (auto& [dev, ops] : by_device) {
    std::vector<model::OpSpan> spans;
    spans.reserve(ops.size());
    for (const auto& [v, span] : ops) spans.push_back(span);
    const std::vector<double> f = model::ConcurrencyFactors(device, spans);
    for (size_t i = 0; i < ops.size(); ++i) info[ops[i].first].share *= f[i];
  }
  std::vector<PackModel> models(packs.size());
  for (size_t p = 0; p < packs.size(); ++p) {
    model::ClassTimes times;
    auto& m = models[p];
    for (auto v : packs[p].ops) {
      const OpInfo& o = info.at(v.value());
      times.Add(o.cls, NsToS(a.durations[v.value()]), o.share, device.CompShare(o.kind));
      m.op_kind.push_back(static_cast<uint8_t>(o.kind));
    }
    m.options = model::PackClockOptions(device, times, b.measured_clock);
    m.front = model::ParetoFront(m.options);
    m.default_index = DefaultClockIndex(device);
  }
  return models;
}

// Power of a plan point (W).
double AveragePower(const PlanPoint& p) { return p.time_ns > 0 ? p.energy_j / NsToS(p.time_ns) : 0.0; }

// The model's average power of the steady iteration with every pack at the default clock, the
// trace's durations taken as having run at `measured`.
double BaselinePower(const analysis::TraceAnalysis& a, const model::DeviceModel& device,
                     const std::vector<packing::Pack>& packs, MegaHertz measured) {
  const Basis b(a, device, measured);
  const auto models = BuildModels(b, packs);
  Evaluator ev(b, packs, models);
  std::vector<size_t> base(packs.size());
  for (size_t p = 0; p < packs.size(); ++p) base[p] = models[p].default_index;
  return AveragePower(ev.Evaluate(base));
}

// The clock the power limiter holds the steady iteration at. The trace's durations ran at it:
// the default clock when the model's power of the iteration at the default clock stays within
// the device's cap power, else the highest table clock whose modelled power, with the measured
// durations taken as having run there, does. The limiter averages power over about a second,
// longer than an iteration, so it acts on the iteration's average, the same however the
// iteration is cut into packs.
MegaHertz ThrottledClock(const analysis::TraceAnalysis& a, const model::DeviceModel& device,
                         const std::vector<packing::Pack>& packs) {
  auto power_at = [&](MegaHertz measured) { return BaselinePower(a, device, packs, measured); };
  const double cap = device.cap_power.value();
  if (power_at(device.default_clock) <= cap) return device.default_clock;
  // Bisection over the table below the default clock: power falls with the clock.
  size_t lo = 0, hi = 0;  // lo: within the cap (or the lowest clock); hi: above it
  while (hi < device.clocks.size() && device.clocks[hi] < device.default_clock) ++hi;
  if (hi == 0 || power_at(device.clocks[0]) > cap) return device.clocks.front();
  while (hi - lo > 1) {
    const size_t mid = (lo + hi) / 2;
    (power_at(device.clocks[mid]) <= cap ? lo : hi) = mid;
  }
  return device.clocks[lo];
}

// The clock the trace's durations ran at as the trace itself recorded it: the median SM clock
// NVML reported over the traced iterations of an EMO trace (median over its GPUs), snapped to
// the nearest table clock at or below the default. nullopt when the trace has no clock reads,
// or when they show a clock below the default that the power limit did not hold (a locked
// clock, a thermal slowdown): the plan's "held, so higher clocks do nothing" reading would be
// wrong there, and the model's test stands.
std::optional<MegaHertz> RecordedClock(const trace::Trace& t, const model::DeviceModel& device) {
  if (!t.meta.run || device.clocks.empty()) return std::nullopt;
  std::vector<double> mhz;
  bool not_the_limit = false;
  for (const auto& g : t.meta.run->gpus) {
    if (!g.traced_clock.Known()) continue;
    mhz.push_back(g.traced_clock.median_mhz);
    not_the_limit |= g.traced_clock.power_capped_share >= 0 && g.traced_clock.power_capped_share < 0.5;
  }
  if (mhz.empty()) return std::nullopt;
  std::sort(mhz.begin(), mhz.end());
  const double median = mhz[mhz.size() / 2];
  MegaHertz snapped = device.clocks.front();
  for (const MegaHertz f : device.clocks) {
    if (f > device.default_clock) break;
    if (std::abs(f.value() - median) < std::abs(snapped.value() - median)) snapped = f;
  }
  if (snapped < device.default_clock && not_the_limit) return std::nullopt;
  return snapped;
}

// The clock a measured step implies for a GPU-bound trace whose GPU ops the analysis lengthened
// to meet it (OverheadModel::gpu_scale): the table clock at or below the default at which the
// steady iteration's GPU ops, each stretched by its kind's ratio from the default clock
// (ShareKindTimeRatios), take nearest gpu_scale times their traced time. nullopt without such a
// lengthening, or when even the lowest clock stretches them less: then it is not a clock.
std::optional<MegaHertz> StepClock(const analysis::TraceAnalysis& a, const model::DeviceModel& device) {
  const double scale = a.overhead.gpu_scale;
  if (!(scale > 1.0) || device.clocks.empty()) return std::nullopt;
  const auto ratios = model::ShareKindTimeRatios(device, device.default_clock);
  const auto& n = a.graph->nodes();
  const auto& t = *a.trace;
  std::array<double, model::kNumShareKinds> time_by_kind{};
  const std::vector<int> kinds = model::ShareKindsOf(t);
  double total = 0;
  for (uint32_t v = 0; v < n.size(); ++v) {
    if (n.kind[v] != graph::NodeKind::kGpuOp || a.iterations.node_iteration[v] != static_cast<int32_t>(a.steady)) {
      continue;
    }
    const auto d = static_cast<double>(a.traced_durations[v]);
    time_by_kind[static_cast<size_t>(kinds[n.ref[v]])] += d;
    total += d;
  }
  if (total <= 0) return std::nullopt;
  auto stretch = [&](size_t i) {
    double s = 0;
    for (int k = 0; k < model::kNumShareKinds; ++k) s += time_by_kind[static_cast<size_t>(k)] * ratios[i][static_cast<size_t>(k)];
    return s / total;
  };
  if (stretch(0) < scale) return std::nullopt;
  size_t best = 0;
  for (size_t i = 0; i < device.clocks.size() && device.clocks[i] <= device.default_clock; ++i) {
    if (std::abs(stretch(i) - scale) < std::abs(stretch(best) - scale)) best = i;
  }
  return device.clocks[best];
}

// A recorded clock is also a measure of power: a GPU the power limit held ran at the cap power,
// and one at the default clock drew at most that. The factor on the device's activity that makes
// the model's average power of the steady iteration at `recorded` (the trace's durations) agree:
// the cap power when held, at most it at the default clock; 1 when the model already agrees.
// Found by bisection on a log scale (power grows with the factor, up to where the model caps it).
double TracePowerScale(const analysis::TraceAnalysis& a, const model::DeviceModel& device,
                       const std::vector<packing::Pack>& packs, MegaHertz recorded) {
  auto power_at = [&](double scale) {
    model::DeviceModel scaled = device;
    scaled.activity_scale *= scale;
    return BaselinePower(a, scaled, packs, recorded);
  };
  const double cap = device.cap_power.value();
  const bool held = recorded < device.default_clock;
  const double at_one = power_at(1.0);
  if (held ? std::abs(at_one - cap) <= 1e-3 * cap : at_one <= cap) return 1.0;
  double lo = at_one < cap ? 1.0 : 1.0 / 64, hi = at_one < cap ? 64.0 : 1.0;
  if (power_at(hi) < cap) return hi;  // the model cannot reach the cap: as near as it gets
  for (int i = 0; i < 40 && hi / lo > 1.0 + 1e-4; ++i) {
    const double mid = std::sqrt(lo * hi);
    (power_at(mid) < cap ? lo : hi) = mid;
  }
  return std::sqrt(lo * hi);
}

// The pack graph: per device a chain of its packs in time order. A pack's options are its
// Pareto-optimal clocks (models[p].front, fastest first); at clock f it lasts its default
// window plus the stretch the kernel graph shows when that pack alone runs at f (one replay
// per pack and option: slack inside the pack and around it absorbs what it can). Its energy
// is the modelled busy energy plus idle power at f over the rest of the window, as the
// kernel-graph evaluator charges it; the problem's own idle power is 0. Stretches of
// different packs are summed along the chain, which ignores slack they could share.
Problem BuildPackProblem(Evaluator& ev, const model::DeviceModel& device, const std::vector<packing::Pack>& packs,
                         const std::vector<PackModel>& models, const std::vector<size_t>& base_choice,
                         TimeNs baseline_ns, const std::vector<TimeNs>& windows) {
  Problem problem;
  std::vector<int32_t> device_index;
  std::vector<size_t> choice = base_choice;
  for (size_t p = 0; p < packs.size(); ++p) {
    const auto& m = models[p];
    std::vector<Option> options;
    for (size_t k : m.front) {
      const auto& o = m.options[k];
      choice[p] = k;
      const TimeNs stretch = k == m.default_index ? 0 : ev.Evaluate(choice).time_ns - baseline_ns;
      const auto duration = std::max<TimeNs>(0, windows[p] + stretch);
      const double idle_s = NsToS(duration) - o.time_s;  // as the evaluator charges it
      options.push_back({duration, o.energy_j + device.IdlePower(o.clock).value() * idle_s,
                         static_cast<int32_t>(std::lround(o.clock.value()))});
    }
    choice[p] = base_choice[p];
    auto it = std::find(device_index.begin(), device_index.end(), packs[p].device);
    const auto gpu = static_cast<int32_t>(it - device_index.begin());
    if (it == device_index.end()) device_index.push_back(packs[p].device);
    const NodeIndex node = problem.AddNode(options, gpu);
    if (p > 0 && packs[p - 1].device == packs[p].device) problem.AddEdge(node - 1, node);
  }
  problem.set_num_gpus(static_cast<int32_t>(device_index.size()));
  problem.set_idle_power_w(0.0);
  return problem;
}

// The pack-graph solve: the solver's plan at the pack-graph deadline, tightened until its
// kernel-graph replay meets `deadline_ns`. Fills `pg` and `frontier`; returns
// the solver's choice as indices into the packs' options.
Result<std::vector<size_t>> SolvePackGraph(const Problem& problem, Evaluator& ev, const std::vector<PackModel>& models,
                                           const TracePlanOptions& options, TimeNs kernel_baseline_ns, TimeNs deadline_ns,
                                           TracePlan::PackGraph& pg, std::vector<PlanPoint>& frontier) {
  EMO_RETURN_IF_ERROR(problem.Validate());
  const uint32_t num = problem.num_nodes();
  auto to_choice = [&](std::span<const uint32_t> pack_plan) {
    std::vector<size_t> c(num);
    for (uint32_t i = 0; i < num; ++i) c[i] = models[i].front[pack_plan[i]];
    return c;
  };
  std::vector<uint32_t> base(num);
  for (uint32_t i = 0; i < num; ++i) {
    const auto& f = models[i].front;
    base[i] = static_cast<uint32_t>(std::find(f.begin(), f.end(), models[i].default_index) - f.begin());
    if (base[i] == f.size()) base[i] = 0;  // the default clock is dominated: the fastest option
  }
  const Evaluation b = Evaluate(problem, base);
  pg.baseline = {b.makespan_ns, b.energy_j};
  EMO_ASSIGN_OR_RETURN(auto solver, MakeSolver(options.solver));
  pg.solver = options.solver == SolverKind::kExact ? "exact" : "fast";
  SolveOptions so;
  so.time_limit_s = options.exact_time_limit_s;
  so.deadline_ns = static_cast<TimeNs>(std::floor(static_cast<double>(b.makespan_ns) * (1.0 + options.max_slowdown)));
  std::vector<size_t> choice;
  SolveOptions solved_at = so;  // the deadline of the last plan found
  for (int attempt = 0; attempt < 12; ++attempt) {
    EMO_ASSIGN_OR_RETURN(Solution sol, solver->Solve(problem, so));
    pg.solve_ms += sol.solve_ms;
    pg.outcome = sol.outcome;
    if (!sol.has_plan()) break;
    pg.gap_pct = sol.gap_pct();
    pg.solved = {sol.makespan_ns, sol.energy_j};
    solved_at = so;
    choice = to_choice(sol.plan);
    pg.solved_replayed = ev.Evaluate(choice);
    if (pg.solved_replayed.time_ns <= deadline_ns) break;
    // The replay found more stretch than the pack graph (stretches of neighbouring packs
    // compound): shrink the pack graph's time budget in proportion to the overshoot.
    ++pg.tightenings;
    const double budget = static_cast<double>(so.deadline_ns - b.makespan_ns);
    const double used = static_cast<double>(pg.solved_replayed.time_ns - kernel_baseline_ns);
    const double allowed = static_cast<double>(deadline_ns - kernel_baseline_ns);
    const double factor = used > 0 ? std::min(0.9, 0.95 * allowed / used) : 0.5;
    so.deadline_ns = b.makespan_ns + static_cast<TimeNs>(std::floor(budget * std::max(0.0, factor)));
  }
  if (pg.solved_replayed.time_ns > deadline_ns || choice.empty()) {
    choice = to_choice(base);
    pg.solved_replayed = ev.Evaluate(choice);
  }
  // The fast solver's gap to CBC on the same pack graph and deadline, where CBC runs.
  if (options.solver == SolverKind::kFast && HaveExactSolver() && num <= options.exact_check_max_packs &&
      pg.solved.energy_j > 0) {
    EMO_ASSIGN_OR_RETURN(auto exact, MakeSolver(SolverKind::kExact));
    EMO_ASSIGN_OR_RETURN(Solution ex, exact->Solve(problem, solved_at));
    pg.exact_outcome = OutcomeName(ex.outcome);
    if (ex.has_plan() && ex.energy_j > 0) pg.exact_gap_pct = 100.0 * (pg.solved.energy_j - ex.energy_j) / ex.energy_j;
  }
  FrontierOptions fo;
  fo.max_points = 200;
  fo.time_limit_s = options.exact_time_limit_s;
  EMO_ASSIGN_OR_RETURN(Frontier f, solver->SolveFrontier(problem, fo));
  for (const auto& pt : f.points) frontier.push_back({pt.makespan_ns, pt.energy_j});
  return choice;
}

// A plan candidate: a start refined by the kernel-graph descent.
struct Candidate {
  std::string from;
  std::vector<size_t> choice;  // option index per pack
  PlanPoint point;             // kernel-graph replay
};

// Everything planned on one partition of the steady iteration into packs.
struct PackingPlan {
  std::vector<packing::Pack> packs;
  std::vector<PackModel> models;
  std::vector<Candidate> candidates;
  size_t best = SIZE_MAX;  // cheapest candidate meeting the deadline
  TracePlan::PackGraph pack_graph;
  std::vector<PlanPoint> frontier;
  size_t replays = 0;
};

// Solves the pack graph of `packs` (with their `models`, BuildModels), then descends on the
// kernel graph from the solver's plan, the default clocks, the static clock `static_index` and
// any `starts`.
Result<PackingPlan> PlanPacking(const Basis& b, std::vector<packing::Pack> packs, std::vector<PackModel> models_in,
                                const TracePlanOptions& options, TimeNs deadline_ns, size_t static_index,
                                std::vector<Candidate> starts) {
  const auto& device = b.device;
  PackingPlan out;
  out.packs = std::move(packs);
  out.models = std::move(models_in);
  const auto& models = out.models;
  Evaluator ev(b, out.packs, models);
  std::vector<size_t> base(out.packs.size());
  for (size_t p = 0; p < base.size(); ++p) base[p] = models[p].default_index;
  std::vector<TimeNs> windows;
  const PlanPoint baseline = ev.Evaluate(base, &windows);
  const Problem problem = BuildPackProblem(ev, device, out.packs, models, base, baseline.time_ns, windows);
  EMO_ASSIGN_OR_RETURN(std::vector<size_t> solved,
                       SolvePackGraph(problem, ev, models, options, baseline.time_ns, deadline_ns, out.pack_graph,
                                      out.frontier));
  starts.insert(starts.begin(), {{"pack-graph solver", solved, {}},
                                 {"default clocks", base, {}},
                                 {"static best", std::vector<size_t>(base.size(), static_index), {}}});
  for (auto& c : starts) {
    c.point = Descend(ev, models, deadline_ns, c.choice, nullptr);
    out.candidates.push_back(std::move(c));
  }
  for (size_t i = 0; i < out.candidates.size(); ++i) {
    const auto& c = out.candidates[i];
    if (c.point.time_ns > deadline_ns) continue;
    if (out.best == SIZE_MAX || c.point.energy_j < out.candidates[out.best].point.energy_j) out.best = i;
  }
  EMO_CHECK(out.best != SIZE_MAX);  // the descent from the default clocks never leaves the target
  // The best plan on the pack graph: each pack's clock mapped to the front option of equal or
  // next higher clock (a descent may leave a pack on a dominated clock).
  const auto& chosen = out.candidates[out.best].choice;
  std::vector<uint32_t> on_front(out.packs.size());
  for (size_t p = 0; p < out.packs.size(); ++p) {
    const auto& m = models[p];
    const double want = m.options[chosen[p]].clock.value();
    uint32_t k = 0;
    for (uint32_t i = 0; i < m.front.size(); ++i) {
      const double f = m.options[m.front[i]].clock.value(), fk = m.options[m.front[k]].clock.value();
      if (f >= want && (fk < want || f < fk)) k = i;
    }
    on_front[p] = k;
  }
  const Evaluation e = Evaluate(problem, on_front);
  out.pack_graph.plan = {e.makespan_ns, e.energy_j};
  out.replays = ev.replays;
  return out;
}

// The plan's header: the device and the packing options it was made with.
TracePlan EmptyPlan(const model::DeviceModel& device, const TracePlanOptions& options) {
  TracePlan plan;
  plan.device = device.name;
  plan.model_source = device.path;
  plan.min_pack_ns = options.packing.min_pack_ns;
  plan.min_pack_source = options.min_pack_source;
  plan.switch_latency_ns = options.switch_latency_ns;
  return plan;
}

// The baseline (every pack at the default clock), the model's power before the limiter, the
// latency target and the best single static clock meeting it, scored on the time-window `packs`.
// Returns the static clock's option index.
size_t ScoreDefaults(const Basis& basis, const std::vector<packing::Pack>& packs, const std::vector<PackModel>& models,
                     const TracePlanOptions& options, TracePlan& plan) {
  const auto& device = basis.device;
  // The model's power at the default clock before the limiter, for the report.
  plan.default_demand_w = BaselinePower(basis.a, device, packs, device.default_clock);
  Evaluator ev(basis, packs, models);
  std::vector<size_t> base_choice(packs.size());
  for (size_t p = 0; p < packs.size(); ++p) base_choice[p] = models[p].default_index;
  plan.baseline = ev.Evaluate(base_choice);
  plan.deadline_ns = static_cast<TimeNs>(std::floor(static_cast<double>(plan.baseline.time_ns) * (1.0 + options.max_slowdown)));
  size_t static_index = models[0].default_index;
  plan.static_best = plan.baseline;
  plan.static_best_clock = device.default_clock;
  for (size_t i = 0; i < models[0].options.size(); ++i) {
    const PlanPoint pt = ev.Evaluate(std::vector<size_t>(packs.size(), i));
    if (pt.time_ns <= plan.deadline_ns && pt.energy_j < plan.static_best.energy_j) {
      plan.static_best = pt;
      plan.static_best_clock = models[0].options[i].clock;
      static_index = i;
    }
  }
  plan.replays += ev.replays;
  return static_index;
}

// Dependency-blind per-kernel baseline: every memory-class op at the clock that minimises its own
// modelled energy, the rest at the default clock, slack not considered. Scored without the switch
// latency: this baseline shows what ignoring slack costs; with a switch per kernel, far shorter
// than the latency, the clock could not follow at all.
void ScorePerKernelBlind(const Basis& basis, const packing::PackingInput& input, const TracePlanOptions& options,
                         TracePlan& plan) {
  const auto& a = basis.a;
  const std::vector<packing::Pack> singles = packing::MakePacks(packing::PackingKind::kPerOp, input, options.packing);
  const auto single_models = BuildModels(basis, singles);
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
  const Basis no_latency(a, basis.device, basis.measured_clock);
  Evaluator bev(no_latency, singles, single_models);
  plan.per_kernel_blind = bev.Evaluate(blind);
  plan.replays += bev.replays;
}

// A start for a packing's descent: each pack at the pass-level clock of the phase holding most of
// its busy time. None without a pass-level plan.
std::vector<Candidate> PassLevelStart(const analysis::TraceAnalysis& a, const PackingPlan* phases,
                                      const std::vector<packing::Pack>& packs) {
  if (phases == nullptr) return {};
  std::unordered_map<uint32_t, size_t> phase_of;
  for (size_t q = 0; q < phases->packs.size(); ++q) {
    for (auto v : phases->packs[q].ops) phase_of[v.value()] = q;
  }
  std::vector<size_t> from_pass(packs.size());
  for (size_t p = 0; p < packs.size(); ++p) {
    std::vector<TimeNs> busy(phases->packs.size(), 0);
    for (auto v : packs[p].ops) busy[phase_of.at(v.value())] += a.durations[v.value()];
    const size_t q = static_cast<size_t>(std::max_element(busy.begin(), busy.end()) - busy.begin());
    from_pass[p] = phases->candidates[phases->best].choice[q];
  }
  return {{"pass level", std::move(from_pass), {}}};
}

// Plans one packing: its packs' models, the pass-level start when there is one, PlanPacking.
Result<PackingPlan> PlanKind(const Basis& basis, std::vector<packing::Pack> packs, const TracePlanOptions& options,
                             const TracePlan& plan, size_t static_index, const PackingPlan* phases) {
  auto models = BuildModels(basis, packs);
  std::vector<Candidate> starts = PassLevelStart(basis.a, phases, packs);
  return PlanPacking(basis, std::move(packs), std::move(models), options, plan.deadline_ns, static_index,
                     std::move(starts));
}

// Keeps the packing whose best plan is cheapest (the plan is then never worse than the pass-level
// baseline; ties keep the earlier of `tried`), records every packing's result, and returns the
// winner.
const PackingPlan& KeepCheapest(const std::vector<std::pair<packing::PackingKind, const PackingPlan*>>& tried,
                                TracePlan& plan) {
  size_t w = 0;
  for (size_t k = 0; k < tried.size(); ++k) {
    const PackingPlan& c = *tried[k].second;
    plan.packings.push_back({std::string(packing::PackingName(tried[k].first)), c.candidates[c.best].point, c.packs.size()});
    if (c.candidates[c.best].point.energy_j < tried[w].second->candidates[tried[w].second->best].point.energy_j) w = k;
  }
  const PackingPlan& won = *tried[w].second;
  plan.packing = std::string(packing::PackingName(tried[w].first));
  const Candidate& best = won.candidates[won.best];
  plan.plan = best.point;
  switch (tried[w].first) {
    case packing::PackingKind::kPhases:
      plan.plan_from = "pass-level phases, " + best.from;
      break;
    case packing::PackingKind::kDependency:
      plan.plan_from = "dependency packs, " + best.from;
      break;
    default:
      plan.plan_from = best.from;
      break;
  }
  plan.pack_graph = won.pack_graph;
  plan.frontier = won.frontier;
  return won;
}

// The winner's packs with their clocks; adjacent packs of one device planned at the same clock
// are one pack to the policy (no switch between them). Counts the switches per iteration.
void RecordPacks(const Basis& basis, const PackingPlan& won, TracePlan& plan) {
  const Candidate& best = won.candidates[won.best];
  const Evaluator ev(basis, won.packs, won.models);
  for (size_t p = 0; p < won.packs.size(); ++p) {
    const auto& m = won.models[p];
    PlannedPack planned{won.packs[p], m.options[best.choice[p]].clock, m.options[m.default_index].time_s,
                        m.options[best.choice[p]].time_s, {}};
    // Each op's extra time as the plan's replay stretches it, the switch's lead included.
    std::vector<double> at_plan;
    ev.OpStretches(best.choice, p, at_plan);
    const auto& at_default = basis.stretch[m.default_index];
    for (size_t k = 0; k < planned.pack.ops.size(); ++k) {
      const auto d = static_cast<double>(basis.durations[planned.pack.ops[k].value()]);
      planned.op_extra_ns.push_back(std::llround(d * (at_plan[k] - at_default[m.op_kind[k]])));
    }
    if (!plan.packs.empty() && plan.packs.back().pack.device == planned.pack.device &&
        plan.packs.back().clock == planned.clock) {
      auto& into = plan.packs.back();
      packing::Absorb(&into.pack, planned.pack);
      into.busy_s_default += planned.busy_s_default;
      into.busy_s += planned.busy_s;
      into.op_extra_ns.insert(into.op_extra_ns.end(), planned.op_extra_ns.begin(), planned.op_extra_ns.end());
      ++plan.merged_packs;
      continue;
    }
    plan.packs.push_back(std::move(planned));
  }
  for (size_t p = 0; p < plan.packs.size(); ++p) {
    if (plan.packs[(p + 1) % plan.packs.size()].clock != plan.packs[p].clock) ++plan.switches;
  }
}

// The same clocks scored at both ends of the overhead correction's band: what the plan saves, and
// how much slower it runs, if the real timeline is at either end.
void ScoreBand(const Basis& basis, const PackingPlan& won, TracePlan& plan) {
  const auto& a = basis.a;
  // The band is the rank's own correction's: a rank timed with its job has none.
  if (!basis.end_bounds.empty()) return;
  for (const double factor : {a.overhead.band_lo, a.overhead.band_hi}) {
    if (!a.HasBand()) break;
    const std::vector<TimeNs> durations = analysis::BandDurations(a, factor);
    Basis at_end(a, basis.device, basis.measured_clock, basis.switch_latency_ns);
    at_end.durations = durations;
    Evaluator e(at_end, won.packs, won.models);
    std::vector<size_t> base(won.packs.size());
    for (size_t p = 0; p < base.size(); ++p) base[p] = won.models[p].default_index;
    plan.band.push_back({factor, e.Evaluate(base), e.Evaluate(won.candidates[won.best].choice)});
    plan.replays += e.replays;
  }
}

// `basis` with every op's modelled extra time over the default clock multiplied by `factor`: each
// stretch s becomes s0 + factor x (s - s0), s0 its kind's stretch at the default clock (the
// clock options follow the device's clock table), so the default clock's times stay as they are.
Basis Inflated(const Basis& basis, double factor) {
  Basis inflated = basis;
  const auto& at_default = basis.stretch[DefaultClockIndex(basis.device)];
  for (auto& per_kind : inflated.stretch) {
    for (size_t k = 0; k < per_kind.size(); ++k) per_kind[k] = at_default[k] + factor * (per_kind[k] - at_default[k]);
  }
  return inflated;
}

// A packing's best plan scored on `basis` (its replay counted in plan.replays).
PlanPoint ScoreOn(const Basis& basis, const PackingPlan& k, TracePlan& plan) {
  Evaluator e(basis, k.packs, k.models);
  const PlanPoint p = e.Evaluate(k.candidates[k.best].choice);
  plan.replays += e.replays;
  return p;
}

// The plan's clocks replayed with every op's modelled extra time multiplied by each of
// kSensitivityFactors (TracePlan::sensitivity).
void ScoreSensitivity(const Basis& basis, const PackingPlan& won, TracePlan& plan) {
  for (const double factor : kSensitivityFactors) {
    plan.sensitivity.push_back({factor, ScoreOn(Inflated(basis, factor), won, plan)});
  }
}

}  // namespace

Result<TracePlan> PlanTrace(const analysis::TraceAnalysis& a, const model::DeviceModel& device,
                            const TracePlanOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  EMO_RETURN_IF_ERROR(analysis::CheckIterationLength(a, "a clock plan"));
  TracePlan plan = EmptyPlan(device, options);
  const trace::Trace& t = *a.trace;
  const packing::PackingInput input = packing::InputOf(
      a, [&](uint32_t op) { return static_cast<uint8_t>(model::Classify(t.Name(t.gpu.name[op]))); });
  auto make = [&](packing::PackingKind kind) { return packing::MakePacks(kind, input, options.packing); };
  auto windows = make(packing::PackingKind::kTimeWindow);
  if (windows.empty()) {
    return InvalidArgument(fmt::format("{}: the steady iteration has no GPU ops to plan", a.trace->meta.source_path));
  }
  // The clock the trace's durations ran at, then the baselines every plan is compared with.
  // An EMO trace that read the SM clock says it, and with it the power it ran at; so does a
  // GPU-bound loop whose measured step only a lower clock explains (held there by the power
  // limit, as a recorded clock would say). The device's activity is scaled to agree for this
  // trace (TracePowerScale).
  model::DeviceModel traced_device = device;
  std::optional<MegaHertz> measured = RecordedClock(*a.trace, device);
  const char* source = "trace";
  if (!measured) {
    measured = StepClock(a, device);
    source = "step";
  }
  if (measured) {
    plan.throttle_clock = *measured;
    plan.throttle_clock_source = source;
    plan.trace_power_scale = TracePowerScale(a, device, windows, *measured);
    traced_device.activity_scale *= plan.trace_power_scale;
  } else {
    plan.throttle_clock = ThrottledClock(a, device, windows);
  }
  // Plans are made on `basis`: the model's times, or with a margin its extra times inflated; every
  // figure reported is scored on `nominal`, the model's own times.
  const Basis nominal(a, traced_device, plan.throttle_clock, options);
  plan.work_coverage = model::CoverageOf(*a.trace, nominal.kinds, nominal.work, device);
  plan.work_curves = device.work_power.known;
  const bool margin = options.time_margin > 0;
  const Basis basis = margin ? Inflated(nominal, 1.0 + options.time_margin) : nominal;
  plan.time_margin = options.time_margin;
  plan.joint = !options.joint_durations.empty();
  auto window_models = BuildModels(basis, windows);
  const size_t static_index = ScoreDefaults(basis, windows, window_models, options, plan);
  if (margin) {
    Evaluator ev(nominal, windows, window_models);
    plan.static_best = ev.Evaluate(std::vector<size_t>(windows.size(), static_index));
    plan.replays += ev.replays;
  }
  const bool one_device = std::all_of(windows.begin(), windows.end(),
                                      [&](const packing::Pack& p) { return p.device == windows.front().device; });
  // Pass-level phases (Perseus' granularity; one GPU only), planned like the packs.
  std::optional<PackingPlan> by_phase;
  if (one_device) {
    EMO_ASSIGN_OR_RETURN(by_phase, PlanKind(basis, make(packing::PackingKind::kPhases), options, plan, static_index, nullptr));
    plan.pass_level = margin ? ScoreOn(nominal, *by_phase, plan) : by_phase->candidates[by_phase->best].point;
    plan.pass_level_phases = by_phase->packs.size();
    ScorePerKernelBlind(nominal, input, options, plan);
  }
  const PackingPlan* phases = by_phase ? &*by_phase : nullptr;
  std::vector<Candidate> window_starts = PassLevelStart(a, phases, windows);
  EMO_ASSIGN_OR_RETURN(PackingPlan by_window, PlanPacking(basis, std::move(windows), std::move(window_models), options,
                                                          plan.deadline_ns, static_index, std::move(window_starts)));
  EMO_ASSIGN_OR_RETURN(PackingPlan by_dependency,
                       PlanKind(basis, make(packing::PackingKind::kDependency), options, plan, static_index, phases));
  // The cheapest packing wins; its packs and clocks are the plan.
  std::vector<std::pair<packing::PackingKind, const PackingPlan*>> tried = {
      {packing::PackingKind::kTimeWindow, &by_window}, {packing::PackingKind::kDependency, &by_dependency}};
  if (phases) tried.push_back({packing::PackingKind::kPhases, phases});
  for (const auto& [kind, p] : tried) plan.replays += p->replays;
  const PackingPlan& won = KeepCheapest(tried, plan);
  if (margin) {
    for (size_t k = 0; k < tried.size(); ++k) plan.packings[k].point = ScoreOn(nominal, *tried[k].second, plan);
    plan.plan = ScoreOn(nominal, won, plan);
  }
  RecordPacks(nominal, won, plan);
  ScoreBand(nominal, won, plan);
  ScoreSensitivity(nominal, won, plan);
  plan.solve_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return plan;
}

std::vector<TimeNs> PlannedDurations(const TracePlan& plan, std::span<const TimeNs> base) {
  std::vector<TimeNs> d(base.begin(), base.end());
  for (const PlannedPack& p : plan.packs) {
    for (size_t k = 0; k < p.pack.ops.size() && k < p.op_extra_ns.size(); ++k) d[p.pack.ops[k].value()] += p.op_extra_ns[k];
  }
  return d;
}

double SavingPct(const PlanPoint& baseline, const PlanPoint& p) {
  return baseline.energy_j > 0 ? 100.0 * (baseline.energy_j - p.energy_j) / baseline.energy_j : 0.0;
}

double SlowdownPct(const PlanPoint& baseline, const PlanPoint& p) {
  return baseline.time_ns > 0 ? 100.0 * static_cast<double>(p.time_ns - baseline.time_ns) / static_cast<double>(baseline.time_ns)
                              : 0.0;
}

namespace {
template <typename F>
std::array<double, 2> RangeOverBand(const TracePlan& plan, F f) {
  std::array<double, 2> r{f(plan.baseline, plan.plan), f(plan.baseline, plan.plan)};
  for (const auto& e : plan.band) {
    r[0] = std::min(r[0], f(e.baseline, e.plan));
    r[1] = std::max(r[1], f(e.baseline, e.plan));
  }
  return r;
}
}  // namespace

std::array<double, 2> SavingRangePct(const TracePlan& plan) { return RangeOverBand(plan, SavingPct); }
std::array<double, 2> SlowdownRangePct(const TracePlan& plan) { return RangeOverBand(plan, SlowdownPct); }

double TargetPct(const TracePlan& plan) { return SlowdownPct(plan.baseline, PlanPoint{plan.deadline_ns, 0.0}); }

const TracePlan::Sensitivity* FragileTime(const TracePlan& plan) {
  const double planned = SlowdownPct(plan.baseline, plan.plan);
  const double target = TargetPct(plan);
  for (const auto& s : plan.sensitivity) {
    if (s.extra_factor != kFragileFactor) continue;
    const double at = SlowdownPct(plan.baseline, s.plan);
    const double proportional = std::max(planned, 0.0) * s.extra_factor;
    if (at > target && at > proportional + kFragileExcessPct) return &s;
  }
  return nullptr;
}

std::string FragileTimeWarning(const TracePlan& plan, const TracePlan::Sensitivity& fragile) {
  return fmt::format(
      "fragile plan: with {:g} times the extra time the model gives its clocks, the iteration is {:+.1f} % against "
      "the planned {:+.1f} % (target +{:.1f} %): the plan spends slack that runs out just beyond it, so a small error "
      "in the model's times costs far more than itself; a larger --time-margin (auto, the default, tries up to 1) "
      "plans clear of it, and `emo run --guard` falls back to the default clock when iterations overrun",
      fragile.extra_factor, SlowdownPct(plan.baseline, fragile.plan), SlowdownPct(plan.baseline, plan.plan),
      TargetPct(plan));
}

}  // namespace emo::opt
