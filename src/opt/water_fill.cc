#include "water_fill.h"

#include <algorithm>

namespace emo::opt {

namespace {

constexpr double kTol = 1e-3;  // ns

// The fitting slower option of node u (within `room` ns) with the steepest saving per ns, if
// that rate is ≥ min_rate; returns the current choice otherwise.
uint32_t BestStep(const Prepared& p, uint32_t u, uint32_t c, double room, double min_rate) {
  const uint32_t last = p.SlowestWithin(u, room + kTol);
  uint32_t to = c;
  double best = min_rate;
  for (uint32_t k = c + 1; k <= last; ++k) {
    const double r = (p.opt_cost[c] - p.opt_cost[k]) / (p.opt_dur[k] - p.opt_dur[c]);
    if (r >= best) {
      best = r;
      to = k;
    }
  }
  return to;
}

bool ForwardRound(const Prepared& p, double deadline, double min_rate, std::vector<uint32_t>& choice,
                  std::vector<double>& dur, std::vector<double>& ef, std::vector<double>& lf) {
  BackwardPass(p, dur, deadline, lf);
  bool changed = false;
  for (uint32_t u : p.topo) {
    const double es = EarliestStart(p, ef, u);
    const uint32_t c = choice[u];
    if (c + 1 < p.opt_begin[u + 1] && lf[u] - es >= p.opt_dur[c + 1] - kTol) {
      const uint32_t to = BestStep(p, u, c, lf[u] - es, min_rate);
      if (to != c) {
        choice[u] = to;
        dur[u] = p.opt_dur[to];
        changed = true;
      }
    }
    ef[u] = es + dur[u];
  }
  return changed;
}

bool BackwardRound(const Prepared& p, double deadline, double min_rate, std::vector<uint32_t>& choice,
                   std::vector<double>& dur, std::vector<double>& ef, std::vector<double>& lf) {
  ForwardPass(p, dur, ef);
  lf.assign(p.n, deadline);
  bool changed = false;
  for (auto it = p.topo.rbegin(); it != p.topo.rend(); ++it) {
    const uint32_t u = *it;
    const double f = LatestFinish(p, dur, lf, u, deadline);
    const double es = ef[u] - dur[u];
    const uint32_t c = choice[u];
    if (c + 1 < p.opt_begin[u + 1] && f - es >= p.opt_dur[c + 1] - kTol) {
      const uint32_t to = BestStep(p, u, c, f - es, min_rate);
      if (to != c) {
        choice[u] = to;
        dur[u] = p.opt_dur[to];
        changed = true;
      }
    }
    lf[u] = f;
  }
  return changed;
}

}  // namespace

std::vector<uint32_t> WaterFill(const Prepared& p, double deadline) {
  const uint32_t n = p.n;
  std::vector<uint32_t> choice(n);
  std::vector<double> dur(n), ef(n, 0.0), lf;
  double max_rate = 0.0;
  for (uint32_t i = 0; i < n; ++i) {
    choice[i] = p.opt_begin[i];
    dur[i] = p.opt_dur[choice[i]];
    for (uint32_t k = p.opt_begin[i] + 1; k < p.opt_begin[i + 1]; ++k) {
      max_rate = std::max(max_rate, (p.opt_cost[choice[i]] - p.opt_cost[k]) / (p.opt_dur[k] - p.opt_dur[choice[i]]));
    }
  }
  constexpr int kLevels = 40;
  constexpr int kRoundsPerLevel = 6;
  double level = max_rate;
  for (int l = 0; l <= kLevels; ++l) {
    level = l == kLevels ? 0.0 : level * 0.8;
    for (int r = 0; r < kRoundsPerLevel; ++r) {
      const bool a = ForwardRound(p, deadline, level, choice, dur, ef, lf);
      const bool b = BackwardRound(p, deadline, level, choice, dur, ef, lf);
      if (!a && !b) break;
    }
  }
  return choice;
}

}  // namespace emo::opt
