#include "switch_marks.h"

#include "driver_api.h"
#include "emo/runtime/actuator.h"
#include "trace_writer.h"

#include <time.h>

namespace emo::runtime {
namespace {

constexpr int kCudaSuccess = 0;
constexpr int kCudaErrorNotReady = 600;
constexpr unsigned kEventDisableTiming = 0x2;  // CU_EVENT_DISABLE_TIMING: the lightest event

void Pause() {
  const timespec t{0, 20'000};
  nanosleep(&t, nullptr);
}

}  // namespace

bool SwitchMarks::Wanted(const ClockSchedule& s) {
  for (const auto& g : s.gpus) {
    for (const auto& p : g.packs) {
      if (p.on_gpu) return true;
    }
  }
  return false;
}

bool SwitchMarks::Configure(const ScheduleGpu& gpu, std::string* error) {
  ctx_get_current_ = DriverFunction<CtxGetCurrentFn>("cuCtxGetCurrent");
  ctx_set_current_ = DriverFunction<CtxSetCurrentFn>("cuCtxSetCurrent");
  event_create_ = DriverFunction<EventCreateFn>("cuEventCreate");
  event_destroy_ = DriverFunction<EventDestroyFn>("cuEventDestroy_v2");
  event_record_ = DriverFunction<EventRecordFn>("cuEventRecord");
  event_query_ = DriverFunction<EventQueryFn>("cuEventQuery");
  if (ctx_get_current_ == nullptr || ctx_set_current_ == nullptr || event_create_ == nullptr ||
      event_record_ == nullptr || event_query_ == nullptr || !capture_.Load()) {
    *error = "switching on the GPU: the CUDA driver in this process has no cuCtxGetCurrent/cuCtxSetCurrent/"
             "cuEventCreate/cuEventRecord/cuEventQuery/cuStreamIsCapturing (emo run --switch-on launch does without)";
    return false;
  }
  const auto n = static_cast<int64_t>(gpu.calls_per_iteration);
  marked_.assign(static_cast<size_t>(n), false);
  // A pack whose clock is the one before it (cyclically: a one-pack plan) never switches after the
  // first time, which is made at once: no event behind its call.
  const size_t packs = gpu.packs.size();
  for (size_t i = 0; i < packs; ++i) {
    const auto& p = gpu.packs[i];
    if (!p.on_gpu || n <= 0 || p.mhz == gpu.packs[(i + packs - 1) % packs].mhz) continue;
    marked_[static_cast<size_t>((p.switch_call % n + n) % n)] = true;
  }
  calls_.SetCallsPerIteration(gpu.calls_per_iteration);
  return true;
}

std::pair<void*, void*> SwitchMarks::NextEvent() {
  void* context = nullptr;
  if (ctx_get_current_(&context) != kCudaSuccess || context == nullptr) return {nullptr, nullptr};
  std::lock_guard<std::mutex> lock(mutex_);
  Pool* pool = nullptr;
  for (Pool& p : pools_) {
    if (p.context == context) pool = &p;
  }
  if (pool == nullptr) {
    Pool fresh;
    fresh.context = context;
    for (size_t i = 0; i < kEvents; ++i) {
      void* event = nullptr;
      if (const int rc = event_create_(&event, kEventDisableTiming); rc != kCudaSuccess) {
        error_ = "cuEventCreate returned " + std::to_string(rc) + " after " + std::to_string(i) + " events";
        if (event_destroy_ != nullptr) {
          for (void* made : fresh.events) event_destroy_(made);
        }
        fresh.events.clear();
        break;
      }
      fresh.events.push_back(event);
    }
    pools_.push_back(std::move(fresh));
    pool = &pools_.back();
  }
  if (pool->events.empty()) return {nullptr, nullptr};
  void* event = pool->events[pool->next++ % kEvents];
  return {event, context};
}

void SwitchMarks::AfterLaunch(uint64_t seq, void* stream, bool stream_known) {
  const int64_t call = calls_.CallOf(seq);
  if (call >= 0 && marked_[static_cast<size_t>(call)]) {
    if (!stream_known) {
      unknown_stream_.fetch_add(1, std::memory_order_relaxed);
    } else if (capture_.Capturing(stream)) {
      capturing_.fetch_add(1, std::memory_order_relaxed);
    } else if (const auto [event, context] = NextEvent(); event == nullptr) {
      record_failed_.fetch_add(1, std::memory_order_relaxed);
    } else if (const int rc = event_record_(event, stream); rc != kCudaSuccess) {
      record_failed_.fetch_add(1, std::memory_order_relaxed);
      std::lock_guard<std::mutex> lock(mutex_);
      error_ = "cuEventRecord returned " + std::to_string(rc);
    } else {
      recorded_.fetch_add(1, std::memory_order_relaxed);
      std::lock_guard<std::mutex> lock(mutex_);
      marks_[seq % kEvents] = {seq, event, context};
    }
  }
  // After the mark: a waiter that sees the launch returned and no mark knows none will come.
  uint64_t seen = exited_.load(std::memory_order_relaxed);
  while (seen < seq + 1 && !exited_.compare_exchange_weak(seen, seq + 1, std::memory_order_release)) {
  }
}

SwitchMarks::Outcome SwitchMarks::WaitFor(uint64_t seq, const std::function<bool()>& give_up) {
  const int64_t start = MonotonicNs();
  Mark mark;
  while (true) {
    const bool returned = exited_.load(std::memory_order_acquire) > seq;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      mark = marks_[seq % kEvents];
    }
    if (mark.seq == seq) break;
    if (returned) {
      no_mark_.fetch_add(1, std::memory_order_relaxed);
      return Outcome::kNoMark;
    }
    if (give_up()) {
      gave_up_.fetch_add(1, std::memory_order_relaxed);
      return Outcome::kGaveUp;
    }
    Pause();
  }
  if (mark.context != waiting_context_) {
    if (const int rc = ctx_set_current_(mark.context); rc != kCudaSuccess) {
      query_failed_.fetch_add(1, std::memory_order_relaxed);
      std::lock_guard<std::mutex> lock(mutex_);
      error_ = "cuCtxSetCurrent returned " + std::to_string(rc);
      return Outcome::kError;
    }
    waiting_context_ = mark.context;
  }
  while (true) {
    const int rc = event_query_(mark.event);
    if (rc == kCudaSuccess) {
      completed_.fetch_add(1, std::memory_order_relaxed);
      waited_ns_.fetch_add(static_cast<uint64_t>(MonotonicNs() - start), std::memory_order_relaxed);
      return Outcome::kCompleted;
    }
    if (rc != kCudaErrorNotReady) {
      query_failed_.fetch_add(1, std::memory_order_relaxed);
      std::lock_guard<std::mutex> lock(mutex_);
      error_ = "cuEventQuery returned " + std::to_string(rc);
      return Outcome::kError;
    }
    if (give_up()) {
      gave_up_.fetch_add(1, std::memory_order_relaxed);
      return Outcome::kGaveUp;
    }
    Pause();
  }
}

std::string SwitchMarks::Meta() const {
  std::string m;
  auto put = [&m](const char* key, const std::string& value) {
    m += std::string("run.switch_marks_") + key + "=" + value + "\n";
  };
  put("recorded", std::to_string(recorded_.load()));
  put("record_failed", std::to_string(record_failed_.load()));
  put("unknown_stream", std::to_string(unknown_stream_.load()));
  put("capturing", std::to_string(capturing_.load()));
  put("completed", std::to_string(completed_.load()));
  put("no_mark", std::to_string(no_mark_.load()));
  put("gave_up", std::to_string(gave_up_.load()));
  put("query_failed", std::to_string(query_failed_.load()));
  put("waited_ns", std::to_string(waited_ns_.load()));
  std::lock_guard<std::mutex> lock(mutex_);
  if (!error_.empty()) put("error", MetaValue(error_));
  return m;
}

}  // namespace emo::runtime
