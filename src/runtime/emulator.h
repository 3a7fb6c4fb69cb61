// `emo run --actuator emulate`: a plan's slowdown made real on a GPU whose clocks must not
// change. Instead of switching clocks it adds, after the launch calls the policy names, a spin
// kernel on the launching call's stream that holds the stream for the time the model says the
// pack's ops there would take longer at the planned clock (policy: gpus[].emulate.spins). The
// program's measured step then tests the graph, the slack and the plan's slowdown end to end:
// extra time on a stream with slack is absorbed, on the critical path it is not.
//
// Threads: Configure runs once on the follower's thread, Publish on the control thread,
// AfterLaunch on the application's threads inside CUPTI's launch-exit callbacks.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "driver_api.h"
#include "emo/runtime/clock_trigger.h"
#include "plan_calls.h"

namespace emo::runtime {

class Emulator {
 public:
  // The spins of `gpu`; false with `error` when libcuda has no module or launch entry point.
  bool Configure(const ScheduleGpu& gpu, std::string* error);
  // Control thread: the plan is in force from application launch `from_seq` on (an iteration's
  // first launch), or (`active` false) not at all.
  void Publish(bool active, uint64_t from_seq);
  // Application thread, once launch `seq` returned: the spin due after it, on `stream` (a
  // CUstream; `stream_known` false when the call's stream could not be read).
  void AfterLaunch(uint64_t seq, void* stream, bool stream_known);

  // "run.emulate_*" meta lines (after the program's last launch).
  std::string Meta() const;

 private:
  using CtxGetCurrentFn = int (*)(void**);
  using ModuleLoadDataFn = int (*)(void**, const void*);
  using ModuleGetFunctionFn = int (*)(void**, void*, const char*);
  using LaunchKernelFn = int (*)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void*,
                                 void**, void**);
  using GetErrorNameFn = int (*)(int, const char**);

  // The spin kernel of the calling thread's current context, loaded on first use; nullptr on error.
  void* SpinFunction(std::string* error);
  void Fail(const std::string& what);

  CaptureCheck capture_;
  std::vector<int64_t> ns_by_call_;  // per launch call of the iteration
  PlanCalls calls_;
  std::atomic<bool> failed_{false};

  CtxGetCurrentFn ctx_get_current_ = nullptr;
  ModuleLoadDataFn module_load_data_ = nullptr;
  ModuleGetFunctionFn module_get_function_ = nullptr;
  LaunchKernelFn launch_kernel_ = nullptr;
  GetErrorNameFn get_error_name_ = nullptr;

  mutable std::mutex mutex_;  // guards functions_ and error_
  std::vector<std::pair<void*, void*>> functions_;  // context -> spin kernel
  std::string error_;

  std::atomic<uint64_t> spins_{0}, spin_ns_{0}, unknown_stream_{0}, activations_{0}, capturing_{0};
  std::atomic<uint64_t> launch_ns_{0};  // host time spent launching spins
};

// The spin kernel's PTX (JIT-compiled by the driver for the GPU at hand): one thread reads
// %globaltimer and loops until `ns` nanoseconds have passed.
extern const char kSpinKernelPtx[];
inline constexpr const char* kSpinKernelName = "emo_emulate_spin";

}  // namespace emo::runtime
