// `emo run --switch-on gpu`: a pack's clock switch made when the GPU gets there, not when the
// program's CPU does. The policy names, per pack, the launch call whose op ended a switch lead
// before the pack in the trace (gpu_switch_call); once the plan is in force, the application
// thread records a CUDA event on that call's stream right after it (the op's completion), and the
// switching thread, given the switch at that call, waits until the event has completed before
// making it. On a loop whose CPU runs ahead of the GPU, a switch made at the launch call would
// come as early as the run-ahead (tens of ms); marked, it comes when the op before the pack ends.
//
// Threads: Configure and WaitFor on the switching thread, Publish on the control thread,
// AfterLaunch on the application's threads inside CUPTI's launch-exit callbacks.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "driver_api.h"
#include "emo/runtime/clock_trigger.h"
#include "plan_calls.h"

namespace emo::runtime {

class SwitchMarks {
 public:
  // Whether any pack of the schedule's GPUs switches on the GPU (then the launch exits are watched).
  static bool Wanted(const ClockSchedule& s);
  // The marked calls of `gpu`; false with `error` when libcuda has no event functions.
  bool Configure(const ScheduleGpu& gpu, std::string* error);
  // Control thread: as Emulator::Publish.
  void Publish(bool active, uint64_t from_seq) { calls_.Publish(active, from_seq); }
  // Application thread, once launch `seq` returned: an event behind it on `stream` when its call is
  // marked.
  void AfterLaunch(uint64_t seq, void* stream, bool stream_known);

  enum class Outcome {
    kCompleted,  // the event behind the launch has completed on the GPU
    kNoMark,     // the launch was made without an event behind it (before the plan was in force)
    kGaveUp,     // `give_up` said so while waiting
    kError,      // the driver refused the query (the program tore its context down)
  };
  // Switching thread: waits until launch `seq` has completed on the GPU, polling every 20 us.
  Outcome WaitFor(uint64_t seq, const std::function<bool()>& give_up);

  // "run.switch_marks_*" meta lines.
  std::string Meta() const;

 private:
  using CtxGetCurrentFn = int (*)(void**);
  using CtxSetCurrentFn = int (*)(void*);
  using EventCreateFn = int (*)(void**, unsigned);
  using EventDestroyFn = int (*)(void*);
  using EventRecordFn = int (*)(void*, void*);
  using EventQueryFn = int (*)(void*);

  struct Mark {
    uint64_t seq = UINT64_MAX;
    void* event = nullptr;
    void* context = nullptr;
  };
  static constexpr size_t kEvents = 64;  // per context, reused in turn; marks are a few per iteration

  // The next event of the calling thread's current context (its pool created on first use);
  // nullptr on error. A context whose pool could not be made whole is not tried again (the events
  // made are destroyed): its marks fail at once and their switches are made at their calls.
  std::pair<void*, void*> NextEvent();

  CaptureCheck capture_;
  std::vector<bool> marked_;  // per launch call of the iteration
  PlanCalls calls_;
  CtxGetCurrentFn ctx_get_current_ = nullptr;
  CtxSetCurrentFn ctx_set_current_ = nullptr;
  EventCreateFn event_create_ = nullptr;
  EventDestroyFn event_destroy_ = nullptr;  // optional: only to give back a pool made in part
  EventRecordFn event_record_ = nullptr;
  EventQueryFn event_query_ = nullptr;

  mutable std::mutex mutex_;  // guards pools_, marks_, error_
  struct Pool {
    void* context = nullptr;
    std::vector<void*> events;  // empty: creating them failed
    size_t next = 0;
  };
  std::vector<Pool> pools_;
  std::array<Mark, kEvents> marks_{};  // by seq % kEvents
  std::string error_;
  void* waiting_context_ = nullptr;  // switching thread's current context

  std::atomic<uint64_t> exited_{0};  // launches that returned, + 1 for the latest seq seen
  std::atomic<uint64_t> recorded_{0}, record_failed_{0}, unknown_stream_{0}, capturing_{0};
  std::atomic<uint64_t> completed_{0}, no_mark_{0}, gave_up_{0}, query_failed_{0};
  std::atomic<uint64_t> waited_ns_{0};
};

}  // namespace emo::runtime
