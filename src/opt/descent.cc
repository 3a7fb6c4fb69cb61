#include "descent.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "emo/base/check.h"

namespace emo::opt {

namespace {
constexpr double kTol = 1e-3;  // ns: durations closer than this are equal
constexpr double kInf = 1e30;  // an infinite slope (node at its fastest)
constexpr double kJPerNsToW = 1e9;
}  // namespace

Descent::Descent(const Prepared& p) : p_(p) {
  d_.resize(p.n);
  for (uint32_t i = 0; i < p.n; ++i) d_[i] = p.hull_dur[p.hull_begin[i + 1] - 1];
  dir_.assign(p.n, 0);
  net_id_.assign(p.n, -1);
  Cpm();
}

void Descent::Cpm() {
  makespan_ = ForwardPass(p_, d_, ef_);
  BackwardPass(p_, d_, makespan_, lf_);
}

double Descent::HullCost(uint32_t i, double d) const {
  const uint32_t hb = p_.hull_begin[i], he = p_.hull_begin[i + 1];
  const double* x = p_.hull_dur.data();
  const double* y = p_.hull_cost.data();
  if (d >= x[he - 1]) return y[he - 1];
  if (d <= x[hb]) return y[hb];
  const uint32_t j = static_cast<uint32_t>(std::upper_bound(x + hb, x + he, d) - x) - 1;
  return y[j] + (y[j + 1] - y[j]) * (d - x[j]) / (x[j + 1] - x[j]);
}

double Descent::RelaxedCost() const {
  double sum = 0.0;
  for (uint32_t i = 0; i < p_.n; ++i) sum += HullCost(i, d_[i]);
  return sum;
}

double Descent::SpeedSlope(uint32_t i, double d) const {
  const uint32_t hb = p_.hull_begin[i], he = p_.hull_begin[i + 1];
  const double* x = p_.hull_dur.data();
  const double* y = p_.hull_cost.data();
  if (d > x[he - 1] + kTol) return 0.0;  // stretched: shrinking the idle tail is free
  if (d <= x[hb] + kTol) return kInf;
  const uint32_t j = static_cast<uint32_t>(std::lower_bound(x + hb, x + he, d - kTol) - x) - 1;
  return (y[j] - y[j + 1]) / (x[j + 1] - x[j]) * kJPerNsToW;
}

double Descent::SlowSlope(uint32_t i, double d) const {
  const uint32_t hb = p_.hull_begin[i], he = p_.hull_begin[i + 1];
  const double* x = p_.hull_dur.data();
  const double* y = p_.hull_cost.data();
  if (d >= x[he - 1] - kTol) return 0.0;
  const uint32_t j = static_cast<uint32_t>(std::upper_bound(x + hb, x + he, d + kTol) - x) - 1;
  return (y[j] - y[j + 1]) / (x[j + 1] - x[j]) * kJPerNsToW;
}

double Descent::NextLower(uint32_t i, double d) const {
  const uint32_t hb = p_.hull_begin[i], he = p_.hull_begin[i + 1];
  const double* x = p_.hull_dur.data();
  if (d > x[he - 1] + kTol) return x[he - 1];
  const auto it = std::lower_bound(x + hb, x + he, d - kTol);
  return it == x + hb ? x[hb] : *(it - 1);
}

double Descent::NextUpper(uint32_t i, double d) const {
  const uint32_t hb = p_.hull_begin[i], he = p_.hull_begin[i + 1];
  const double* x = p_.hull_dur.data();
  if (d >= x[he - 1] - kTol) return std::numeric_limits<double>::infinity();
  return *std::upper_bound(x + hb, x + he, d + kTol);
}

bool Descent::FindCut() {
  for (uint32_t i : moved_) dir_[i] = 0;
  moved_.clear();
  for (uint32_t i : crit_) net_id_[i] = -1;
  crit_.clear();
  for (uint32_t i = 0; i < p_.n; ++i) {
    if (lf_[i] - ef_[i] <= kTol) {
      net_id_[i] = static_cast<int32_t>(crit_.size());
      crit_.push_back(i);
    }
  }
  const uint32_t kS = 0, kT = 1;
  const uint32_t nodes = 2 + 2 * static_cast<uint32_t>(crit_.size());
  ub_.resize(crit_.size());
  lb_.resize(crit_.size());
  // "Infinite" arcs get a capacity above the sum of all finite ones: a flow that large means
  // every cut crosses one, i.e. the makespan cannot shrink any more.
  double finite_sum = 1.0, scale = 1.0;
  for (size_t k = 0; k < crit_.size(); ++k) {
    const uint32_t i = crit_[k];
    ub_[k] = SpeedSlope(i, d_[i]);
    lb_[k] = SlowSlope(i, d_[i]);
    if (ub_[k] < kInf / 2) {
      lb_[k] = std::min(lb_[k], ub_[k]);
      finite_sum += ub_[k] - lb_[k];
      scale = std::max(scale, ub_[k]);
    }
    finite_sum += 2 * lb_[k];
  }
  const double big = 2 * finite_sum;
  flow_.Reset(nodes);
  excess_.assign(nodes, 0.0);
  for (size_t k = 0; k < crit_.size(); ++k) {
    const uint32_t i = crit_[k];
    const uint32_t in = 2 + 2 * static_cast<uint32_t>(k), out = in + 1;
    const double ub = ub_[k], lb = lb_[k];
    flow_.AddArc(in, out, ub >= kInf / 2 ? big : ub - lb);
    excess_[out] += lb;
    excess_[in] -= lb;
    if (ef_[i] - d_[i] <= kTol) flow_.AddArc(kS, in, big);
    if (ef_[i] >= makespan_ - kTol) flow_.AddArc(out, kT, big);
    for (uint32_t e = p_.succ_begin[i]; e < p_.succ_begin[i + 1]; ++e) {
      const uint32_t j = p_.succ[e];
      if (net_id_[j] < 0) continue;
      if (ef_[i] + p_.succ_delay[e] >= ef_[j] - d_[j] - kTol) {
        flow_.AddArc(out, 2 + 2 * static_cast<uint32_t>(net_id_[j]), big);
      }
    }
  }
  // The cut with lower bounds, Σ_fwd ub − Σ_bwd lb, equals Σ_fwd (ub − lb) + Σ_{v∈T} ex(v)
  // with ex(v) = lb into v − lb out of v. The node term becomes arcs s→v (ex > 0) and v→t
  // (ex < 0) minus a constant, so ONE ordinary max-flow gives the minimum cut — no feasible-
  // flow phase (lowtime's two max-flows and its LowtimeFlowError), and short augmenting paths.
  flow_.set_epsilon(1e-12 * scale);
  double constant = 0.0;
  for (uint32_t v = 2; v < nodes; ++v) {
    if (excess_[v] > 0) {
      flow_.AddArc(kS, v, excess_[v]);
    } else if (excess_[v] < 0) {
      flow_.AddArc(v, kT, -excess_[v]);
      constant -= excess_[v];
    }
  }
  const double flow = flow_.Run(kS, kT);
  if (flow >= big * (1 - 1e-9)) return false;
  marginal_w_ = flow - constant;
  flow_.SourceSide(kT, reach_);
  for (size_t k = 0; k < crit_.size(); ++k) {
    const uint32_t in = 2 + 2 * static_cast<uint32_t>(k), out = in + 1;
    const uint32_t i = crit_[k];
    if (reach_[in] && !reach_[out]) {
      dir_[i] = -1;
      moved_.push_back(i);
    } else if (!reach_[in] && reach_[out]) {
      dir_[i] = +1;
      moved_.push_back(i);
    }
  }
  return !moved_.empty();
}

double Descent::StepLimit(double target) const {
  double delta = std::isfinite(target) ? makespan_ - target : std::numeric_limits<double>::infinity();
  for (uint32_t i : moved_) {
    if (dir_[i] < 0) {
      delta = std::min(delta, d_[i] - NextLower(i, d_[i]));
    } else {
      delta = std::min(delta, NextUpper(i, d_[i]) - d_[i]);
    }
  }
  return delta;
}

double Descent::LimitByOtherPaths(double delta) {
  // The makespan after a step δ is the longest path with durations d + δ·dir, a convex
  // piecewise-linear function of δ; paths in the critical network shrink by ≥ δ. Newton
  // (Dinkelbach) iterations on the path that is longest at δ find the largest δ for which
  // no other path overtakes.
  lp_val_.resize(p_.n);
  lp_a_.resize(p_.n);
  lp_k_.resize(p_.n);
  for (int round = 0; round < 64; ++round) {
    double best_val = -1.0, best_a = 0.0;
    int32_t best_k = 0;
    for (uint32_t u : p_.topo) {
      double val = 0.0, a = 0.0;
      int32_t k = 0;
      for (uint32_t e = p_.pred_begin[u]; e < p_.pred_begin[u + 1]; ++e) {
        const uint32_t v = p_.pred[e];
        const double cand = lp_val_[v] + p_.pred_delay[e];
        if (cand > val + kTol * 1e-3 || (cand >= val - kTol * 1e-3 && lp_k_[v] > k)) {
          val = cand;
          a = lp_a_[v] + p_.pred_delay[e];
          k = lp_k_[v];
        }
      }
      lp_val_[u] = val + d_[u] + delta * dir_[u];
      lp_a_[u] = a + d_[u];
      lp_k_[u] = k + dir_[u];
      if (lp_val_[u] > best_val) {
        best_val = lp_val_[u];
        best_a = lp_a_[u];
        best_k = lp_k_[u];
      }
    }
    if (best_val <= makespan_ - delta + kTol * 0.5) return delta;
    const double next = (makespan_ - best_a) / (1.0 + best_k);
    if (!(next < delta)) return delta;
    delta = std::max(next, 0.0);
  }
  return delta;
}

void Descent::Apply(double delta) {
  for (uint32_t i : moved_) {
    double d = d_[i] + delta * dir_[i];
    const uint32_t hb = p_.hull_begin[i], he = p_.hull_begin[i + 1];
    const double* x = p_.hull_dur.data();
    // Snap onto a hull vertex reached up to rounding.
    const auto it = std::lower_bound(x + hb, x + he, d - kTol);
    if (it != x + he && std::abs(*it - d) <= kTol) d = *it;
    d_[i] = std::max(d, x[hb]);
  }
  Cpm();
}

void Descent::Run(std::span<const double> targets, const TargetFn& on_target,
                  bool continue_while_cheaper, size_t max_cuts) {
  breakpoints_.clear();
  breakpoints_.emplace_back(makespan_, RelaxedCost());
  size_t ti = 0;
  bool have_cut = false;
  int stalls = 0;
  while (true) {
    while (ti < targets.size() && makespan_ <= targets[ti] + kTol) on_target(ti++);
    if (ti == targets.size() && !continue_while_cheaper) break;
    if (!have_cut) {
      if (iterations_ >= max_cuts) {
        budget_exhausted_ = true;
        break;
      }
      ++iterations_;
      if (!FindCut()) {
        reached_fastest_ = true;
        break;
      }
    }
    if (ti == targets.size() && marginal_w_ >= p_.idle_term_w) break;
    const double target =
        ti < targets.size() ? targets[ti] : -std::numeric_limits<double>::infinity();
    const double node_limit = StepLimit(-std::numeric_limits<double>::infinity());
    const double target_limit =
        std::isfinite(target) ? makespan_ - target : std::numeric_limits<double>::infinity();
    const double limit = std::min(node_limit, target_limit);
    const double delta = LimitByOtherPaths(limit);
    if (!(delta > 1e-9)) {
      // A path just became critical: recompute the cut on the new critical network.
      have_cut = false;
      if (++stalls > 1000) break;
      // Force a recompute; Cpm is current.
      continue;
    }
    stalls = 0;
    Apply(delta);
    breakpoints_.emplace_back(makespan_, RelaxedCost());
    // Only a requested makespan stopped the step: the same cut is still a minimum cut.
    have_cut = target_limit < node_limit - kTol && delta >= target_limit - kTol;
  }
}

std::vector<uint32_t> RoundAndRepair(const Prepared& p, std::span<const double> durations,
                                     double deadline) {
  const uint32_t n = p.n;
  std::vector<uint32_t> choice(n);
  std::vector<double> dur(n);
  for (uint32_t i = 0; i < n; ++i) {
    choice[i] = p.SlowestWithin(i, durations[i] + kTol);
    dur[i] = p.opt_dur[choice[i]];
  }
  // Rounding down frees time on paths: give it back greedily, upstream first (a forward
  // pass), then what is left downstream first (the mirrored backward pass). In the forward
  // pass earliest starts are exact (upstream already updated) and latest finishes come from the
  // still-unchanged downstream, so every upgrade that fits is safe; mirrored for the backward
  // pass. (Water-filling by saving rate over several passes was tried: on the Perseus cases it
  // moved the frontier by < 0.01% for 6x the work.)
  std::vector<double> ef(n, 0.0), lf;
  BackwardPass(p, dur, deadline, lf);
  for (uint32_t u : p.topo) {
    const double es = EarliestStart(p, ef, u);
    const uint32_t c = choice[u];
    if (c + 1 < p.opt_begin[u + 1] && lf[u] - es >= p.opt_dur[c + 1] - kTol) {
      choice[u] = p.SlowestWithin(u, lf[u] - es + kTol);
      dur[u] = p.opt_dur[choice[u]];
    }
    ef[u] = es + dur[u];
  }
  ForwardPass(p, dur, ef);
  lf.assign(n, deadline);
  for (auto it = p.topo.rbegin(); it != p.topo.rend(); ++it) {
    const uint32_t u = *it;
    const double f = LatestFinish(p, dur, lf, u, deadline);
    const double es = ef[u] - dur[u];
    const uint32_t c = choice[u];
    if (c + 1 < p.opt_begin[u + 1] && f - es >= p.opt_dur[c + 1] - kTol) {
      choice[u] = p.SlowestWithin(u, f - es + kTol);
      dur[u] = p.opt_dur[choice[u]];
    }
    lf[u] = f;
  }
  return choice;
}

}  // namespace emo::opt
