#include "clock_follower.h"

#include "clock_reference.h"
#include "thread_name.h"
#include "trace_writer.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace emo::runtime {

bool ClockFollower::Load(const std::string& schedule_path, std::string* error) {
  schedule_path_ = schedule_path;
  std::ifstream in(schedule_path);
  if (!in) {
    *error = "cannot read the clock schedule " + schedule_path + " (" + std::strerror(errno) + ")";
    return false;
  }
  std::stringstream text;
  text << in.rdbuf();
  if (!ParseClockSchedule(text.str(), &schedule_, error)) {
    *error = schedule_path + ": " + *error;
    return false;
  }
  ActuatorOptions options;
  options.log_path = schedule_.log_path;
  actuator_ = MakeActuator(schedule_.actuator, options, error);
  if (actuator_ == nullptr) return false;
  if (schedule_.actuator == "emulate") emulator_ = std::make_unique<Emulator>();
  if (SwitchMarks::Wanted(schedule_)) marks_ = std::make_unique<SwitchMarks>();
  // Spins are launched only by the emulator: a policy's spins under another actuator are inert.
  may_follow_by_anchor_ = emulator_ == nullptr;
  for (const auto& g : schedule_.gpus) {
    for (const auto& p : g.packs) {
      if (p.mhz != g.packs.front().mhz) may_follow_by_anchor_ = false;
    }
  }
  if (const char* rank = std::getenv("RANK"); rank != nullptr && *rank != '\0') rank_ = std::atoi(rank);
  if (const char* pid = std::getenv(kRunPidEnv); pid != nullptr && *pid != '\0') emo_pid_ = std::atoi(pid);
  return true;
}

void ClockFollower::Start(const DriverApi* driver) {
  driver_ = driver;
  thread_ = StartNamedThread("emo-clocks", [this] { Run(); });
}

void ClockFollower::OnDevice(uint32_t ordinal) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (device_) return;
    device_ = ordinal;
  }
  wake_.notify_one();
}

void ClockFollower::OnLaunch(uint64_t position, uint64_t seq, int64_t time_ns,
                             const std::vector<LaunchIteration>& completed, bool locked) {
  shifted_ = completed;
  for (LaunchIteration& it : shifted_) {
    it.first_launch += position_base_;
    next_loop_index_ = std::max(next_loop_index_, it.loop_index + 1);
  }
  Follow(position + position_base_, seq, time_ns, shifted_, locked, /*at_once=*/false);
}

bool ClockFollower::SettledForAnchor() const {
  return may_follow_by_anchor_ && ready_.load(std::memory_order_acquire) && trigger_->plan_in_force() &&
         trigger_->current_mhz() != 0;
}

void ClockFollower::OnAnchoredIteration(int64_t start_ns, int64_t end_ns) {
  if (!ready_.load(std::memory_order_acquire)) return;
  LaunchIteration it;
  it.loop_index = next_loop_index_++;
  it.first_launch = next_position_;
  it.launches = static_cast<uint32_t>(plan_->calls_per_iteration);
  it.start_ns = start_ns;
  it.end_ns = end_ns;
  ++anchored_iterations_;
  const uint64_t next = it.first_launch + it.launches;
  shifted_.assign(1, it);
  Follow(next, next, end_ns, shifted_, /*locked=*/true, /*at_once=*/true);
  next_position_ = next;  // the made-up launch at `next` is the next iteration's first
}

void ClockFollower::OnAnchorLost() {
  position_base_ = next_position_;
  ++anchors_lost_;
}

void ClockFollower::Follow(uint64_t position, uint64_t seq, int64_t time_ns,
                           const std::vector<LaunchIteration>& completed, bool locked, bool at_once) {
  next_position_ = std::max(next_position_, position + 1);
  if (!ready_.load(std::memory_order_acquire)) {
    if (no_plan_.load(std::memory_order_acquire) && !told_no_plan_) {
      told_no_plan_ = true;
      std::fprintf(stderr, "emo run (%s): the policy has no plan for this process (rank %d); the clocks are left at "
                   "the default\n", schedule_.policy.c_str(), rank_);
    }
    return;
  }
  due_.clear();
  trigger_->OnLaunch(position, completed, locked, &due_);
  // The finder's positions and the application's launch numbers differ by a constant (launches
  // made before the finder started, or before it was replaced).
  const uint64_t offset = seq - position;
  if (emulator_) emulator_->Publish(trigger_->plan_in_force(), trigger_->plan_from() + offset);
  if (marks_) marks_->Publish(trigger_->plan_in_force(), trigger_->plan_from() + offset);
  launch_times_[position % kLaunchTimesKept] = time_ns;
  if (due_.empty() && awaiting_.empty()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // Iterations that began now, for the switches asked for them.
    for (size_t i = 0; i < awaiting_.size();) {
      SwitchTime& t = switch_times_[awaiting_[i]];
      if (t.iteration_start > position) {
        ++i;
        continue;
      }
      if (t.iteration_start == position) t.iteration_start_ns = time_ns;
      awaiting_[i] = awaiting_.back();
      awaiting_.pop_back();
    }
    for (ClockTrigger::Switch& s : due_) {
      s.seq = s.position + offset;
      if (at_once) s.on_gpu = false;  // no launch to wait for: the callbacks are off
      if (!s.on_gpu) interrupt_.store(true, std::memory_order_release);
      if (s.mhz == 0 || s.pack < 0 || switch_times_.size() >= kMaxSwitchTimes) continue;
      s.tag = static_cast<uint32_t>(switch_times_.size()) + 1;
      SwitchTime t;
      t.pack = s.pack;
      t.iteration_start = s.iteration_start;
      if (s.iteration_start > position) {
        awaiting_.push_back(s.tag - 1);
      } else if (position - s.iteration_start < kLaunchTimesKept) {
        t.iteration_start_ns = launch_times_[s.iteration_start % kLaunchTimesKept];
      }
      switch_times_.push_back(t);
    }
    queue_.insert(queue_.end(), due_.begin(), due_.end());
  }
  if (!due_.empty()) wake_.notify_one();
}

bool ClockFollower::Attach(uint32_t ordinal) {
  const std::string where = "emo run (" + schedule_.policy + ")";
  DeviceIdentity id;
  if (driver_ == nullptr || !driver_->Identify(static_cast<int>(ordinal), &id) || id.pci_bus_id.empty()) {
    refused_ = "the CUDA driver does not say which GPU CUDA device " + std::to_string(ordinal) + " is";
  } else if (const ScheduleGpu* plan = PickScheduleGpu(schedule_, rank_, static_cast<int>(ordinal)); plan == nullptr) {
    // Said only if this process launches work: a job's launcher (torchrun) creates a context and
    // runs nothing.
    refused_ = "the policy has no plan for this process (rank " + std::to_string(rank_) + ", CUDA device " +
               std::to_string(ordinal) + ")";
    no_plan_.store(true, std::memory_order_release);
    return false;
  } else if (plan->gpu_name != id.name) {
    refused_ = "the policy was made for " + plan->gpu_name + " and this process runs on " + id.name + " (" +
               id.pci_bus_id + "); make a policy from a trace of this GPU";
  } else {
    std::string error;
    slot_ = actuator_->Open(id.pci_bus_id, &gpu_, &error);
    if (slot_ < 0) {
      refused_ = error;
    } else if (std::string why; emulator_ && !emulator_->Configure(*plan, &why)) {
      refused_ = why;
    } else {
      if (marks_) {
        marks_usable_ = marks_->Configure(*plan, &why);
        if (!marks_usable_) std::fprintf(stderr, "%s: %s; each switch is made at its launch call\n", where.c_str(), why.c_str());
      }
      plan_ = plan;
      trigger_.emplace(*plan, schedule_.guard_pct);
      ready_.store(true, std::memory_order_release);
      return true;
    }
  }
  std::fprintf(stderr, "%s: %s; the clocks are left at the default\n", where.c_str(), refused_.c_str());
  return false;
}

void ClockFollower::Journal(const std::string& pci_bus_id) {
  // Before the first lock: `emo run`'s watchdog resets every GPU named here, whatever kills the
  // program.
  if (journaled_) return;
  journaled_ = true;
  const char* path = std::getenv(kRunJournalEnv);
  if (path == nullptr || *path == '\0') return;
  const int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return;
  const std::string line = pci_bus_id + "\n";
  (void)!write(fd, line.data(), line.size());
  fsync(fd);
  close(fd);
}

void ClockFollower::Apply(const ClockTrigger::Switch& s) {
  if (!refused_.empty()) return;
  // The newest of coalesced requests can be the clock already set.
  if (s.mhz == applied_mhz_) return;
  std::string error;
  bool ok = false;
  if (s.mhz == 0) {
    ok = actuator_->Reset(slot_, s.why, &error);
  } else {
    Journal(gpu_.pci_bus_id);
    SwitchRequest r;
    r.mhz = s.mhz;
    r.pack = s.pack;
    r.iteration = s.iteration;
    r.why = s.why;
    ok = actuator_->Lock(slot_, r, &error);
  }
  if (ok) {
    const int64_t now = CuptiNow();
    if (s.mhz != 0 && applied_mhz_ == 0 && plan_spans_.size() < kMaxPlanSpans) plan_spans_.push_back({now, -1});
    if (s.mhz == 0) CloseSpan(now);
    ++applied_;
    applied_mhz_ = s.mhz;
    if (s.tag > 0) {
      std::lock_guard<std::mutex> lock(mutex_);
      switch_times_[s.tag - 1].applied_ns = now;
    }
    if (s.mhz == 0) last_reset_ns_ = now;
    return;
  }
  if (plan_stopped_ns_ < 0 && !plan_spans_.empty()) plan_stopped_ns_ = CuptiNow();
  ++failed_;
  last_error_ = error;
  refused_ = error;
  std::fprintf(stderr, "emo run (%s): %s; the plan is no longer followed\n", schedule_.policy.c_str(), error.c_str());
  // Whatever the failed call left, the default clock is the safe state.
  if (s.mhz != 0 && applied_mhz_ != 0) {
    std::string ignored;
    if (actuator_->Reset(slot_, "error", &ignored)) applied_mhz_ = 0;
    CloseSpan(CuptiNow());
  }
}

void ClockFollower::CloseSpan(int64_t now) {
  if (!plan_spans_.empty() && plan_spans_.back().second < 0) plan_spans_.back().second = now;
}

void ClockFollower::CheckEmo() {
  if (emo_pid_ <= 0 || !refused_.empty() || kill(emo_pid_, 0) == 0 || errno != ESRCH) return;
  refused_ = "emo run (pid " + std::to_string(emo_pid_) + ") is gone";
  if (plan_stopped_ns_ < 0 && !plan_spans_.empty()) plan_stopped_ns_ = CuptiNow();
  std::string error;
  if (applied_mhz_ != 0 && actuator_->Reset(slot_, "emo gone", &error)) applied_mhz_ = 0;
  CloseSpan(CuptiNow());
  std::fprintf(stderr, "emo run (%s): %s; the plan is no longer followed and the clock is back at the default\n",
               schedule_.policy.c_str(), refused_.c_str());
}

void ClockFollower::Run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    // Every 200 ms at least: is `emo run` still there?
    wake_.wait_for(lock, std::chrono::milliseconds(200),
                   [&] { return stop_ || (device_ && !attached_) || !queue_.empty(); });
    if (slot_ >= 0 && emo_pid_ > 0) {
      lock.unlock();
      CheckEmo();
      lock.lock();
    }
    if (device_ && !attached_) {
      attached_ = true;
      const uint32_t ordinal = *device_;
      lock.unlock();
      Attach(ordinal);
      lock.lock();
      continue;
    }
    if (!queue_.empty()) {
      // A switch to make at once supersedes every one queued before it (a late thread must not
      // replay old clocks); those passed over are counted as coalesced. Switches that wait for the
      // GPU are made in order, each once the GPU has completed the op before its pack.
      auto at_once = [&](const ClockTrigger::Switch& s) { return !s.on_gpu || !marks_usable_; };
      size_t last = queue_.size();
      for (size_t i = 0; i < queue_.size(); ++i) {
        if (at_once(queue_[i])) last = i;
      }
      if (last < queue_.size()) {
        const ClockTrigger::Switch s = queue_[last];
        coalesced_ += last;
        queue_.erase(queue_.begin(), queue_.begin() + static_cast<ptrdiff_t>(last) + 1);
        lock.unlock();
        Apply(s);
        lock.lock();
        continue;
      }
      const ClockTrigger::Switch s = queue_.front();
      queue_.pop_front();
      interrupt_.store(stop_, std::memory_order_release);
      lock.unlock();
      const auto outcome = marks_->WaitFor(s.seq, [this] { return interrupt_.load(std::memory_order_acquire); });
      if (outcome == SwitchMarks::Outcome::kGaveUp) {
        ++coalesced_;
      } else {
        Apply(s);
      }
      lock.lock();
      continue;
    }
    if (stop_) return;
  }
}

std::string ClockFollower::Stop() {
  if (stopped_) return "";
  stopped_ = true;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
    interrupt_.store(true, std::memory_order_release);
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
  CloseSpan(CuptiNow());
  if (applied_mhz_ != 0 && slot_ >= 0) {
    std::string error;
    if (actuator_->Reset(slot_, "exit", &error)) {
      applied_mhz_ = 0;
    } else {
      std::fprintf(stderr, "emo run (%s): resetting the clock at exit failed: %s; emo run's watchdog resets it\n",
                   schedule_.policy.c_str(), error.c_str());
    }
  }
  std::string m;
  auto put = [&m](const char* key, const std::string& value) { m += std::string("run.") + key + "=" + MetaValue(value) + "\n"; };
  put("policy", schedule_.policy);
  put("actuator", schedule_.actuator);
  put("gpu", gpu_.pci_bus_id);
  put("followed", refused_.empty() && trigger_ ? "1" : "0");
  if (!schedule_.model.empty()) put("model", schedule_.model);
  if (plan_ != nullptr) {
    put("predicted_baseline_ns", std::to_string(plan_->baseline_ns));
    if (plan_->plan_ns > 0) put("predicted_ns", std::to_string(plan_->plan_ns));
  }
  if (!refused_.empty()) put("not_followed_because", refused_);
  if (trigger_) {
    const auto& c = trigger_->counters();
    put("switches", std::to_string(c.switches));
    put("switches_applied", std::to_string(applied_));
    put("switches_failed", std::to_string(failed_));
    put("switches_coalesced", std::to_string(coalesced_));
    put("switches_redundant", std::to_string(c.redundant));
    put("switches_late", std::to_string(c.late));
    put("fallbacks", std::to_string(c.fallbacks));
    put("iterations_followed", std::to_string(c.iterations_followed));
    put("guard_tripped", c.guard_tripped ? "1" : "0");
    put("guard_baseline_ns", std::to_string(c.guard_baseline_ns));
    put("guard_probes", std::to_string(c.probes));
    put("guard_checks", std::to_string(c.guard_checks));
    put("guard_limit_ns", std::to_string(c.guard_limit_ns));
    if (c.guard_tripped) put("guard_median_ns", std::to_string(c.guard_median_ns));
  }
  put("clock_at_exit", applied_mhz_ == 0 ? "default" : std::to_string(applied_mhz_));
  // The guard's trip comes after the re-timing that confirmed it: the plan ended at that reset.
  if (trigger_ && trigger_->counters().guard_tripped && plan_stopped_ns_ < 0) plan_stopped_ns_ = last_reset_ns_;
  if (!plan_spans_.empty()) put("plan_started_ns", std::to_string(plan_spans_.front().first));
  if (plan_stopped_ns_ >= 0) put("plan_stopped_ns", std::to_string(plan_stopped_ns_));
  // "pack:applied_ns:iteration_start_ns" per pack switch applied whose iteration was seen.
  std::string times;
  for (const SwitchTime& t : switch_times_) {
    if (t.applied_ns < 0 || t.iteration_start_ns < 0) continue;
    times += (times.empty() ? "" : ",") + std::to_string(t.pack) + ":" + std::to_string(t.applied_ns) + ":" +
             std::to_string(t.iteration_start_ns);
  }
  if (!times.empty()) put("switch_times_ns", times);
  if (plan_ != nullptr) {
    std::string first_calls;
    for (const auto& p : plan_->packs) first_calls += (first_calls.empty() ? "" : ",") + std::to_string(p.first_call);
    put("pack_first_calls", first_calls);
  }
  if (!plan_spans_.empty()) {
    std::string spans;
    for (const auto& [from, to] : plan_spans_) spans += (spans.empty() ? "" : ",") + std::to_string(from) + ":" + std::to_string(to);
    put("plan_spans_ns", spans);
  }
  if (may_follow_by_anchor_) {
    put("anchored_iterations", std::to_string(anchored_iterations_));
    put("anchors_lost", std::to_string(anchors_lost_));
  }
  if (emulator_) m += emulator_->Meta();
  if (marks_) {
    put("switch_on", marks_usable_ ? "gpu" : "launch");
    m += marks_->Meta();
  } else {
    put("switch_on", "launch");
  }
  return m;
}

void ClockFollower::AfterLaunch(uint64_t seq, void* stream, bool stream_known) {
  if (emulator_) emulator_->AfterLaunch(seq, stream, stream_known);
  if (marks_) marks_->AfterLaunch(seq, stream, stream_known);
}

}  // namespace emo::runtime
