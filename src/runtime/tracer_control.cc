// The tracer's control thread: launches and NVTX iteration ranges in, iterations and the
// activity window out.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstring>

#include "cupti_check.h"
#include "tracer.h"

namespace emo::runtime {
namespace {

namespace fmt = trace::emo_format;

// How often the control thread looks at the launch ring. A window opens one lead-in iteration
// early, so this delay never costs a traced launch.
constexpr auto kPollInterval = std::chrono::milliseconds(1);
// The same once nothing is left for it to time closely (SettledPoll): the ring then carries a
// few calls per iteration, held with their own timestamps, and no window waits on the thread.
constexpr auto kSettledPollInterval = std::chrono::milliseconds(10);
// While activities are on (and shortly after), completed CUPTI buffers are fetched this often
// so a long pretrace streams to disk rather than filling the pool.
constexpr int64_t kFlushPeriodNs = 1'000'000'000;
// The loop id given to NVTX iterations, apart from the finder's.
constexpr uint64_t kNvtxLoop = ~uint64_t{0} - 1;
// The shortest median iteration a launch-period loop may have to be traced, over its latest
// kLoopDurationsKept iterations.
constexpr int64_t kMinWindowIterationNs = 100'000;
constexpr size_t kLoopDurationsKept = 33;
// Launches taken from the ring per poll, to keep the thread responsive.
constexpr size_t kMaxLaunchesPerPoll = size_t{1} << 16;
// Anchor calls remembered by signature, to name the one chosen.
constexpr size_t kMaxAnchorCallsNamed = 256;

}  // namespace

void Tracer::ControlLoop() {
  auto poll = kPollInterval;
  while (true) {
    {
      std::unique_lock<std::mutex> lock(control_mutex_);
      control_wake_.wait_for(lock, poll, [&] { return control_stop_; });
      if (control_stop_) break;
    }
    // Held while this thread makes CUPTI calls: a program thread detaching CUPTI waits for it.
    std::lock_guard<std::mutex> detach_lock(detach_mutex_);
    if (quiet_ && PollQuietPhases()) continue;  // a quiet phase: CUPTI stays detached
    if (detached_.load(std::memory_order_acquire) && reattach_error_.empty()) Reattach();
    if (detached_.load(std::memory_order_acquire)) continue;  // no subscriber: nothing to follow
    DrainControl();
    // A block's window is traced and its activities are off for good: CUPTI is to leave.
    if (begin_ == Begin::kBlock && traced_since_attach_.load(std::memory_order_relaxed) && !activities_on_ &&
        !api_on_ && detach_requested_.load(std::memory_order_relaxed) == kDetachNone) {
      RequestDetach(kDetachAtWait);
    }
    const int64_t now = CuptiNow();
    if (follower_ && follower_->Silent(now)) StopFollowingAnchor("the anchor call stopped coming");
    if ((activities_on_ || api_on_ || now < flush_until_ns_) && now >= next_flush_ns_) {
      EMO_CUPTI_OK(cuptiActivityFlushAll(0));
      next_flush_ns_ = now + kFlushPeriodNs;
    }
    if (forced_flush_at_ns_ != 0 && now >= forced_flush_at_ns_) {
      EMO_CUPTI_OK(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
      forced_flush_at_ns_ = 0;
      // The window's records are in: a block that made no wait since detaches at any call.
      if (detach_requested_.load(std::memory_order_relaxed) == kDetachAtWait) RequestDetach(kDetachAtAnyExit);
    }
    if (!writer_failed_ && writer_.failed()) {
      // The file cannot grow: records would only fill the pool.
      writer_failed_ = true;
      SetActivities(false, /*api_too=*/true);
    }
    poll = SettledPoll(now) ? kSettledPollInterval : kPollInterval;
  }
  std::lock_guard<std::mutex> detach_lock(detach_mutex_);
  if (!detached_.load(std::memory_order_acquire)) DrainControl();
}

// EMO_TRACE_QUIET_MS: no CUPTI call is made while detached (any would attach CUPTI again), so
// the settled test, which reads CUPTI's clock, is asked only while attached.
bool Tracer::PollQuietPhases() {
  if (!MayDetach()) {  // no phases in a program CUPTI cannot leave
    gpus_.SetPaused(false);
    return false;
  }
  const bool detached = detached_.load(std::memory_order_acquire);
  const bool settled = !detached && SettledPoll(CuptiNow());
  const int64_t detached_at = detached_at_monotonic_ns_.load(std::memory_order_relaxed);
  switch (quiet_->Poll(MonotonicNow(), settled, detached, detached_at)) {
    case QuietPhases::Action::kDetach:
      RequestDetach(kDetachAtWait);
      break;
    case QuietPhases::Action::kDetachAtAnyExit:
      RequestDetach(kDetachAtAnyExit);
      break;
    case QuietPhases::Action::kReattach:
      gpus_.SetPaused(false);
      return false;  // the caller attaches again
    case QuietPhases::Action::kNone:
      break;
  }
  const bool quiet = quiet_->phase() == QuietPhases::Phase::kQuiet;
  gpus_.SetPaused(quiet);
  return quiet;
}

// Settled: the loop is timed without its launches (anchor call or NVTX ranges), the window, if
// any, traced and its records flushed. When this thread gives the anchor up, the launch
// callbacks come back on and the next poll is a millisecond again (the fresh launch-period
// finder starts after the hole either way). `emo run`'s follower and a block session, which
// must see their calls promptly, never settle.
bool Tracer::SettledPoll(int64_t now) const {
  return !launch_callbacks_on_ && !activities_on_ && !api_on_ && now >= flush_until_ns_ && forced_flush_at_ns_ == 0 &&
         !clock_follower_ && begin_ != Begin::kBlock;
}

void Tracer::DrainControl() {
  std::vector<LaunchEvent> launches;
  LaunchEvent e;
  while (launches.size() < kMaxLaunchesPerPoll && launches_.TryPop(&e)) launches.push_back(e);
  std::vector<NvtxBoundary> boundaries;
  {
    std::lock_guard<std::mutex> lock(nvtx_mutex_);
    boundaries.swap(nvtx_boundaries_);
  }
  // In time order, so an NVTX iteration counts the launches made inside it.
  uint64_t kernel_launches = 0;
  size_t i = 0;
  size_t j = 0;
  std::vector<LaunchIteration> found;
  while (i < launches.size() || j < boundaries.size()) {
    if (j < boundaries.size() && (i == launches.size() || boundaries[j].time_ns <= launches[i].time_ns)) {
      OnNvtxBoundary(boundaries[j++]);
      continue;
    }
    const LaunchEvent& launch = launches[i++];
    // The finder sees the launches, and the host's waits between them, until NVTX ranges or
    // an anchor call time the iterations (`emo run` places its switches by launch all the same).
    const bool to_finder = (!nvtx_source_ || clock_follower_) && !follower_;
    if (launch.anchor != 0) {
      if (to_finder && IsWaitCall(launch.anchor)) finder_->AddWait(launch.signature);
      OnAnchorEvent(launch);
      continue;
    }
    ++kernel_launches;
    if (nvtx_source_) ++nvtx_launches_;
    if (!to_finder) continue;  // with an anchor: made before the launch callbacks went off
    found.clear();
    finder_->Add(launch.signature, launch.time_ns, &found);
    if (clock_follower_) clock_follower_->OnLaunch(finder_->launches() - 1, launch.seq, launch.time_ns, found, finder_->locked());
    if (found.empty() || nvtx_source_) continue;
    // Loop ids go on from those of finders replaced after an anchor was given up.
    for (LaunchIteration& it : found) it.loop += loop_offset_;
    OnLaunchIterations(found);
  }
  launches_seen_.fetch_add(kernel_launches, std::memory_order_relaxed);
  SettleLaunchCallbacks();
}

bool Tracer::MayStopLaunchCallbacks() const {
  if (config_.anchor == 0 || !launch_callbacks_on_) return false;
  // CUPTI 13.0 corrupts the heap when callbacks are switched one by one (cuptiEnableCallback) in a
  // process it has been detached from and attached to again: with CUPTI alone, a PyTorch loop
  // detached and attached every 250 ms aborted in 3 of 3 runs with the launch callbacks switched
  // off and on in each attached stretch, in 0 of 7 without (bench/gpu/cupti_cycle_inject.cc,
  // CYCLE_TOGGLE). After a detach they stay on.
  if (CuptiDetachedBefore()) return false;
  // `emo run` follows NVTX-timed loops by their launches, and others only once its plan is in force.
  if (clock_follower_ && (nvtx_source_ || !clock_follower_->SettledForAnchor())) return false;
  if (!window_) return true;  // monitor mode
  // Trace mode: once the window is traced and the activities are off for good.
  return !activities_on_ && !api_on_ && !window_->windows().empty() && window_->windows().back().complete;
}

void Tracer::SettleLaunchCallbacks() {
  if (!MayStopLaunchCallbacks()) return;
  if (nvtx_source_) {
    // NVTX ranges time the iterations; launches are no longer counted in them.
    SetLaunchCallbacks(false);
    writer_.AddMeta("iteration.launches_counted=0\n");
    return;
  }
  if (follower_) return;
  const std::optional<AnchorChoice> choice = anchors_.choice();
  if (!choice) return;
  follower_.emplace(*choice, CuptiNow());
  SetLaunchCallbacks(false);
  ++anchor_follows_;
  std::string name = "call " + std::to_string(choice->signature);
  if (const auto it = anchor_calls_.find(choice->signature); it != anchor_calls_.end()) {
    const auto domain = static_cast<CUpti_CallbackDomain>(it->second.first >> 24);
    const char* api = nullptr;
    if (EMO_CUPTI_OK(cuptiGetCallbackName(domain, it->second.first & 0xffffffu, &api)) && api != nullptr) {
      name = fmt::BareApiName(api);
    }
    if (it->second.second > 0) name += " " + std::to_string(it->second.second) + " B";
  }
  writer_.AddMeta("iteration.anchor=" + name + "\niteration.anchor_count=" + std::to_string(choice->count) +
                  "\niteration.anchor_loop_median_ns=" + std::to_string(choice->median_ns) + "\n");
}

void Tracer::OnAnchorEvent(const LaunchEvent& e) {
  if (!follower_) {
    if (config_.anchor == 0 || nvtx_source_) return;
    if (anchor_calls_.size() < kMaxAnchorCallsNamed) anchor_calls_.emplace(e.signature, std::make_pair(e.anchor, e.bytes));
    anchors_.AddEvent(e.signature, e.time_ns);
    return;
  }
  AnchorIteration it;
  switch (follower_->OnEvent(e.signature, e.time_ns, &it)) {
    case AnchorFollower::Result::kIteration:
      WriteIteration(next_index_++, it.start_ns, it.end_ns, static_cast<uint32_t>(fmt::IterationSource::kAnchor),
                     follower_->choice().period, "");
      if (clock_follower_) clock_follower_->OnAnchoredIteration(it.start_ns, it.end_ns);
      break;
    case AnchorFollower::Result::kLost:
      StopFollowingAnchor("an iteration between anchor calls was under half the loop's");
      break;
    case AnchorFollower::Result::kNone:
      break;
  }
}

void Tracer::FindIterationsAfresh() {
  follower_.reset();
  anchors_.Reset();
  loop_offset_ += finder_->loops();
  lost_offset_ += finder_->lost();
  finder_.emplace();
}

void Tracer::StopFollowingAnchor(const char* why) {
  ++anchor_given_up_;
  anchor_last_reason_ = why;
  // The launch sequence has a hole where the callbacks were off: a new finder starts clean.
  FindIterationsAfresh();
  if (clock_follower_) clock_follower_->OnAnchorLost();
  SetLaunchCallbacks(true);
}

void Tracer::OnLaunchIterations(const std::vector<LaunchIteration>& iterations) {
  if (!reported_launch_source_) {
    writer_.AddMeta("iteration.source=launch_period\n");
    reported_launch_source_ = true;
  }
  const uint64_t first = next_index_;
  next_index_ += iterations.size();
  // The launch that completed the last of them starts the next iteration (index next_index_).
  const LaunchIteration& last = iterations.back();
  // A loop whose iterations last under kMinWindowIterationNs (median of its recent ones) is a
  // run inside the step or the set-up (one kernel launched 32 times in a row, a weight
  // initialisation kernel per parameter: both seen on the H200), not the step: it gets no
  // window, so the step loop found later gets the first one (a second window costs a re-enable
  // of the API kinds, see SetActivities).
  if (last.loop != loop_durations_of_) {
    loop_durations_of_ = last.loop;
    loop_durations_.clear();
  }
  for (const LaunchIteration& it : iterations) {
    if (loop_durations_.size() == kLoopDurationsKept) loop_durations_.erase(loop_durations_.begin());
    loop_durations_.push_back(it.end_ns - it.start_ns);
  }
  std::vector<int64_t> sorted = loop_durations_;
  std::nth_element(sorted.begin(), sorted.begin() + static_cast<ptrdiff_t>(sorted.size() / 2), sorted.end());
  // Nor does a loop that a host wait seen in it may yet prove to be part of the step (the
  // layers of a forward pass, synced once per pass): its window, or an anchor chosen on it,
  // would be for part of the step. Pretrace stays on meanwhile. A window already open goes on
  // to its end, so that its activities go off.
  const bool settled = finder_->settled();
  const bool window_open = window_ && window_->open();
  if ((settled || window_open) && sorted[sorted.size() / 2] >= kMinWindowIterationNs) {
    StartIteration(next_index_, last.loop, last.loop_index + 1, last.launches);
  }
  for (size_t k = 0; k < iterations.size(); ++k) {
    const LaunchIteration& it = iterations[k];
    WriteIteration(first + k, it.start_ns, it.end_ns, static_cast<uint32_t>(fmt::IterationSource::kLaunchPeriod),
                   it.launches, "");
    if (config_.anchor != 0 && settled) anchors_.AddIteration(it);
  }
}

void Tracer::OnNvtxBoundary(const NvtxBoundary& b) {
  if (!nvtx_source_) {
    // NVTX iterations, when the program has them, win over the launch period for the rest of
    // the run; the window logic sees a new loop.
    nvtx_source_ = true;
    nvtx_key_ = b.key;
    follower_.reset();  // NVTX iterations take over; the launch callbacks may stay off
    writer_.AddMeta("iteration.source=nvtx\niteration.nvtx_key=" + b.key + "\n");
  }
  if (b.key != nvtx_key_) return;
  const bool had = nvtx_started_;
  const uint64_t completed = nvtx_current_index_;
  const int64_t start = nvtx_start_ns_;
  const uint32_t launches = nvtx_launches_;
  const std::string name = nvtx_name_;
  nvtx_current_index_ = next_index_++;
  StartIteration(nvtx_current_index_, kNvtxLoop, nvtx_iterations_++, ~uint64_t{0});
  if (had) {
    WriteIteration(completed, start, b.time_ns, static_cast<uint32_t>(fmt::IterationSource::kNvtx), launches, name);
  }
  nvtx_started_ = true;
  nvtx_start_ns_ = b.time_ns;
  nvtx_name_ = b.name;
  nvtx_launches_ = 0;
}

void Tracer::StartIteration(uint64_t index, uint64_t loop, uint64_t loop_index, uint64_t period) {
  if (!window_ || writer_failed_) return;
  // Once the quiet phases have begun, a loop found again after the attach takes no new window:
  // the run's window is traced, and what follows the quiet phase is the detach's aftermath.
  if (quiet_ && quiet_->phase() != QuietPhases::Phase::kWaiting) return;
  switch (window_->OnIterationStart(index, loop, loop_index, period)) {
    case TraceWindow::Action::kEnable:
      SetActivities(true);
      break;
    case TraceWindow::Action::kDisable:
      // Activities stay on from the start until a window has been traced, and go off only
      // then: enabling CUPTI activity kinds again while the program runs CUDA calls is what
      // went wrong on the H200 (CUDA 13.0): with the API kinds, every later record kept one
      // stale correlation id; with the GPU kinds, one run in about ten of the streams program
      // aborted in the allocator ("double free or corruption") at that moment. Warm-up
      // iterations are recorded too; the reader keeps the window.
      if (!window_->windows().empty() && window_->windows().back().complete) {
        SetActivities(false, /*api_too=*/true);
      }
      break;
    case TraceWindow::Action::kNone:
      break;
  }
  ReportWindow();
}

void Tracer::ReportWindow() {
  const auto& windows = window_->windows();
  if (windows.empty()) return;
  const TraceWindow::Window& w = windows.back();
  std::string m;
  m += "window.count=" + std::to_string(windows.size()) + "\n";
  m += "window.first_iteration=" + std::to_string(w.first) + "\n";
  m += "window.last_iteration=" + std::to_string(w.end > w.first ? w.end - 1 : w.first) + "\n";
  m += "window.loop=" + std::to_string(w.loop == kNvtxLoop ? 0 : w.loop) + "\n";
  m += std::string("window.complete=") + (w.complete ? "1" : "0") + "\n";
  // Written when a window is planned and again when it ends (complete, or cut short).
  if (m == reported_window_meta_) return;
  reported_window_meta_ = m;
  writer_.AddMeta(std::move(m));
}

void Tracer::WriteIteration(uint64_t index, int64_t start, int64_t end, uint32_t source, uint32_t launches,
                            const std::string& name) {
  if (!launch_callbacks_on_ && end > launch_off_since_ns_) ++iterations_launch_off_;
  fmt::IterationRecord r{};
  r.index = index;
  r.start_ns = start;
  r.end_ns = end;
  r.source = source;
  r.traced = window_ && window_->Traced(index) ? 1 : 0;
  r.launches = launches;
  r.name = fmt::kNoName;
  DecodedRecord d;
  d.type = fmt::RecordType::kIteration;
  d.size = sizeof(r);
  std::memcpy(d.body, &r, sizeof(r));
  if (name.empty()) {
    writer_.AddRecord(d);
  } else {
    writer_.AddRecord(d, name, static_cast<int>(offsetof(fmt::IterationRecord, name)));
  }
}

}  // namespace emo::runtime
