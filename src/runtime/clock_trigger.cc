#include "emo/runtime/clock_trigger.h"

#include <algorithm>
#include <sstream>

namespace emo::runtime {
namespace {

constexpr const char* kMagic = "emo-clock-schedule 1";
// With the guard on, iterations of the planned loop timed at the default clock before the plan
// starts: this run's own baseline.
constexpr size_t kBaselineIterations = 5;
// Iterations under the plan whose median the guard compares with its limit, and how many
// consecutive iterations that median must stay over it: one slow step (a collection, a
// checkpoint) is not a slow plan.
constexpr size_t kGuardWindow = 15;
constexpr int kGuardPersist = 3;
// Followed iterations between two re-timings of the default clock (kBaselineIterations + 1
// iterations at the default clock each: about a tenth of the plan's iterations).
constexpr uint64_t kReprobeEvery = 50;

int64_t Median(std::vector<int64_t> v) {
  std::nth_element(v.begin(), v.begin() + static_cast<ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

}  // namespace

std::string FormatClockSchedule(const ClockSchedule& s) {
  std::ostringstream out;
  out << kMagic << "\n";
  out << "actuator " << s.actuator << "\n";
  if (!s.log_path.empty()) out << "log " << s.log_path << "\n";
  if (!s.policy.empty()) out << "policy " << s.policy << "\n";
  if (!s.model.empty()) out << "model " << s.model << "\n";
  out << "guard_pct " << s.guard_pct << "\n";
  for (const auto& g : s.gpus) {
    out << "gpu " << g.rank << " " << g.device << " " << g.calls_per_iteration << " " << g.deadline_ns << " "
        << g.baseline_ns << " " << g.gpu_name << "\n";
    if (g.plan_ns > 0) out << "predicted " << g.plan_ns << "\n";
    for (const auto& p : g.packs) {
      out << "pack " << p.first_call << " " << p.switch_call << " " << p.mhz << (p.on_gpu ? " gpu" : "") << "\n";
    }
    for (const auto& sp : g.spins) out << "spin " << sp.call << " " << sp.ns << "\n";
  }
  return out.str();
}

bool ParseClockSchedule(const std::string& text, ClockSchedule* out, std::string* error) {
  *out = ClockSchedule{};
  std::istringstream in(text);
  std::string line;
  if (!std::getline(in, line) || line != kMagic) {
    *error = "not an emo clock schedule (first line is not '" + std::string(kMagic) + "')";
    return false;
  }
  int number = 1;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty()) continue;
    std::istringstream fields(line);
    std::string key;
    fields >> key;
    std::string rest;
    std::getline(fields >> std::ws, rest);
    std::istringstream values(rest);
    bool ok = true;
    if (key == "actuator") {
      out->actuator = rest;
    } else if (key == "log") {
      out->log_path = rest;
    } else if (key == "policy") {
      out->policy = rest;
    } else if (key == "model") {
      out->model = rest;
    } else if (key == "predicted") {
      ok = !out->gpus.empty() && static_cast<bool>(values >> out->gpus.back().plan_ns) && out->gpus.back().plan_ns > 0;
    } else if (key == "guard_pct") {
      ok = static_cast<bool>(values >> out->guard_pct) && out->guard_pct >= 0;
    } else if (key == "gpu") {
      ScheduleGpu g;
      ok = static_cast<bool>(values >> g.rank >> g.device >> g.calls_per_iteration >> g.deadline_ns >> g.baseline_ns) &&
           g.calls_per_iteration > 0;
      std::getline(values >> std::ws, g.gpu_name);
      out->gpus.push_back(std::move(g));
    } else if (key == "pack") {
      ScheduleGpu::Pack p;
      ok = !out->gpus.empty() && static_cast<bool>(values >> p.first_call >> p.switch_call >> p.mhz) && p.mhz > 0;
      std::string where;
      if (ok && values >> where) {
        p.on_gpu = where == "gpu";
        ok = p.on_gpu && !(values >> where);
      }
      if (ok) out->gpus.back().packs.push_back(p);
    } else if (key == "spin") {
      ScheduleGpu::Spin sp;
      ok = !out->gpus.empty() && static_cast<bool>(values >> sp.call >> sp.ns) && sp.call >= 0 &&
           static_cast<uint64_t>(sp.call) < out->gpus.back().calls_per_iteration && sp.ns > 0;
      if (ok) out->gpus.back().spins.push_back(sp);
    } else {
      ok = false;
    }
    if (!ok) {
      *error = "line " + std::to_string(number) + " of the clock schedule is not understood: " + line;
      return false;
    }
  }
  if (out->actuator.empty() || out->gpus.empty()) {
    *error = "the clock schedule names no actuator or no GPU";
    return false;
  }
  return true;
}

const ScheduleGpu* PickScheduleGpu(const ClockSchedule& s, int rank, int device) {
  if (rank >= 0) {
    for (const auto& g : s.gpus) {
      if (g.rank == rank) return &g;
    }
  }
  for (const auto& g : s.gpus) {
    if (g.rank < 0 && g.device == device) return &g;
  }
  return s.gpus.size() == 1 ? &s.gpus.front() : nullptr;
}

ClockTrigger::ClockTrigger(const ScheduleGpu& gpu, double guard_pct)
    : gpu_(gpu), guard_pct_(guard_pct), timing_(guard_pct > 0) {}

void ClockTrigger::Ask(unsigned mhz, int pack, int64_t iteration, const char* why, uint64_t position, uint64_t now,
                       std::vector<Switch>* out, uint64_t iteration_start, bool on_gpu) {
  if (mhz == current_mhz_) {
    ++counters_.redundant;
    return;
  }
  current_mhz_ = mhz;
  Switch s;
  s.mhz = mhz;
  s.pack = pack;
  s.iteration = iteration;
  s.why = why;
  s.position = position;
  s.iteration_start = iteration_start;
  s.on_gpu = on_gpu;
  s.late_by = now > position ? now - position : 0;
  if (s.late_by > 0) ++counters_.late;
  ++counters_.switches;
  out->push_back(s);
}

void ClockTrigger::Fallback(uint64_t now, const char* why, std::vector<Switch>* out) {
  pending_.clear();
  recent_ns_.clear();
  over_ = 0;
  following_ = false;
  placed_any_ = false;
  ++counters_.fallbacks;
  Ask(0, -1, -1, why, now, now, out);
}

void ClockTrigger::Place(const LaunchIteration& done) {
  const uint64_t start = done.first_launch + done.launches;  // the next iteration's first launch
  if (placed_any_ && start <= placed_from_) return;
  const auto n = static_cast<int64_t>(gpu_.calls_per_iteration);
  const int64_t next = static_cast<int64_t>(done.loop_index) + 1;
  for (size_t i = 0; i < gpu_.packs.size(); ++i) {
    const auto& p = gpu_.packs[i];
    const int pack = static_cast<int>(i);
    if (p.switch_call >= 0) {
      pending_.push_back({start + static_cast<uint64_t>(p.switch_call), p.mhz, pack, next, start, p.on_gpu});
    } else {
      // Asked for during this iteration for the next one; the first time, for this one too (late,
      // and at once: the launch it would wait for is past).
      pending_.push_back({start + static_cast<uint64_t>(n + p.switch_call), p.mhz, pack, next + 1,
                          start + static_cast<uint64_t>(n), p.on_gpu});
      if (!placed_any_) {
        pending_.push_back({start - static_cast<uint64_t>(-p.switch_call), p.mhz, pack, next, start, false});
      }
    }
  }
  std::stable_sort(pending_.begin(), pending_.end(),
                   [](const Pending& a, const Pending& b) { return a.position < b.position; });
  if (!placed_any_) plan_from_ = start;
  placed_from_ = start;
  placed_any_ = true;
}

double ClockTrigger::GuardLimit() const {
  // The plan's allowed slowdown (predicted), applied to this run's own baseline.
  double allowed = 1.0;
  if (gpu_.baseline_ns > 0 && gpu_.deadline_ns > gpu_.baseline_ns) {
    allowed = static_cast<double>(gpu_.deadline_ns) / static_cast<double>(gpu_.baseline_ns);
  }
  return static_cast<double>(counters_.guard_baseline_ns) * allowed * (1.0 + guard_pct_ / 100.0);
}

bool ClockTrigger::GuardSuspects(const LaunchIteration& it) {
  if (guard_pct_ <= 0 || counters_.guard_baseline_ns <= 0) return false;
  recent_ns_.push_back(it.end_ns - it.start_ns);
  if (recent_ns_.size() > kGuardWindow) recent_ns_.erase(recent_ns_.begin());
  if (recent_ns_.size() < kGuardWindow) return false;
  const double limit = GuardLimit();
  counters_.guard_limit_ns = static_cast<int64_t>(limit);
  const int64_t median = Median(recent_ns_);
  over_ = static_cast<double>(median) > limit ? over_ + 1 : 0;
  if (over_ < kGuardPersist) return false;
  suspect_ns_ = median;
  ++counters_.guard_checks;
  return true;
}

void ClockTrigger::OnLaunch(uint64_t position, const std::vector<LaunchIteration>& completed, bool locked,
                            std::vector<Switch>* out) {
  if (counters_.guard_tripped) return;
  // Switches are placed from the newest iteration that matches the plan: a finder that just
  // locked reports older iterations too, whose switches are long past.
  const LaunchIteration* newest = nullptr;
  for (const LaunchIteration& it : completed) {
    if (it.launches != gpu_.calls_per_iteration) {
      if (following_) Fallback(position, "fallback", out);
      continue;
    }
    if (!following_ && timing_ && baseline_samples_.empty()) timing_from_ = position;
    following_ = true;
    if (timing_) {
      // The default clock's iterations, timed: only those that began after the timing did (not
      // the finder's first report, from the program's start-up, nor one that ran partly at the
      // plan's clocks).
      if (it.first_launch >= timing_from_) baseline_samples_.push_back(it.end_ns - it.start_ns);
      if (baseline_samples_.size() < kBaselineIterations) continue;
      counters_.guard_baseline_ns = Median(baseline_samples_);
      baseline_samples_.clear();
      timing_ = false;
      if (suspect_ns_ > 0) {
        // A suspicion checked against the default clock's pace now: the plan is slow, or the
        // program changed pace by itself.
        const int64_t suspect = suspect_ns_;
        suspect_ns_ = 0;
        if (static_cast<double>(suspect) > GuardLimit()) {
          counters_.guard_median_ns = suspect;
          counters_.guard_tripped = true;
          Fallback(position, "guard", out);
          return;
        }
      }
      newest = &it;
      continue;
    }
    if (placed_any_ && it.first_launch >= plan_from_) {
      ++counters_.iterations_followed;
      const bool suspect = GuardSuspects(it);
      if (suspect || (guard_pct_ > 0 && ++since_probe_ >= kReprobeEvery)) {
        // Time the default clock (again): to check a suspicion, or because the program's own
        // pace drifts (a growing KV cache, new data).
        pending_.clear();
        placed_any_ = false;
        since_probe_ = 0;
        recent_ns_.clear();
        over_ = 0;
        timing_ = true;
        timing_from_ = position;
        ++counters_.probes;
        Ask(0, -1, static_cast<int64_t>(it.loop_index) + 1, suspect ? "guard check" : "probe", position, position, out);
        newest = nullptr;
        continue;
      }
    }
    newest = &it;
  }
  if (following_ && !locked) Fallback(position, "fallback", out);
  if (following_ && !timing_ && newest != nullptr) Place(*newest);
  size_t fired = 0;
  while (fired < pending_.size() && pending_[fired].position <= position) {
    const Pending& p = pending_[fired++];
    Ask(p.mhz, p.pack, p.iteration, "pack", p.position, position, out, p.iteration_start, p.on_gpu);
  }
  pending_.erase(pending_.begin(), pending_.begin() + static_cast<ptrdiff_t>(fired));
}

}  // namespace emo::runtime
