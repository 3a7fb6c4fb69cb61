// One tracing session inside the traced process: the CUPTI subscriber and its callbacks, the
// control thread that turns launches and NVTX ranges into iterations and opens and closes the
// activity window, the writer and the GPU monitor. docs/runtime.md describes the whole.
//
// Threads: application threads only run the CUPTI callbacks (a launch or anchor callback takes
// a timestamp and pushes into a lock-free ring); the control thread owns the period finder, the
// anchor finder and the window, and turns the launch callbacks off and on; the writer thread
// owns the file; the GPU thread owns NVML. The session object is
// never destroyed: a callback may still run on another thread while the process exits.
#pragma once

#include <cupti.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "clock_follower.h"
#include "clock_reference.h"
#include "driver_api.h"
#include "emo/runtime/anchor_finder.h"
#include "emo/runtime/inject_config.h"
#include "emo/runtime/launch_period_finder.h"
#include "emo/runtime/quiet_phases.h"
#include "emo/runtime/trace_window.h"
#include "gpu_monitor.h"
#include "launch_ring.h"
#include "trace_writer.h"

namespace emo::runtime {

// Where a launch callback stands among nested calls (tracer.cc).
enum class CallSite { kOutermostEntry, kOutermostExit, kInner };

// True for an anchor call (LaunchEvent::anchor) that returns only once the GPU work before it is
// done: a device, stream or event synchronize, a synchronous copy.
bool IsWaitCall(uint32_t anchor);

class Tracer {
 public:
  Tracer() = default;
  Tracer(const Tracer&) = delete;
  Tracer& operator=(const Tracer&) = delete;

  // How a session begins: when the CUDA driver loads the library during cuInit (`emo trace`,
  // `emo run`), or in a process whose CUDA is already running, for a block of its code
  // (emo_trace_begin in inject.cc, Python's `with emo.trace(...)`). A block session learns the
  // contexts that exist from the driver, as their creation callbacks are past, and never
  // follows a clock policy.
  enum class Begin { kAtCudaInit, kBlock };

  // Starts tracing this process. On failure nothing is left running or subscribed and
  // `error` says what failed, in a phrase for "emo trace: <error>; ...".
  bool Start(const InjectConfig& config, std::string* error, Begin begin = Begin::kAtCudaInit);
  // Stops tracing and completes the file (`reason` becomes end.reason). Runs once, and only in
  // the process that started (a forked child inherits the atexit handler, not the threads).
  // After a block session's shutdown no callback reaches it, and another session may start.
  void Shutdown(const char* reason);
  // The file being written (the output pattern expanded).
  const std::string& path() const { return path_; }

  // The session the CUPTI callbacks reach, nullptr before Start succeeds.
  static Tracer* Current() { return current_.load(std::memory_order_acquire); }

 private:
  struct NvtxBoundary {
    int64_t time_ns = 0;
    std::string name;
    std::string key;
  };
  struct OpenRange {
    int64_t start_ns = 0;
    uint32_t tid = 0;
    std::string name;
  };

  static void CUPTIAPI OnCallback(void* userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data);
  static void CUPTIAPI OnBufferRequested(uint8_t** buffer, size_t* size, size_t* max_records);
  static void CUPTIAPI OnBufferCompleted(CUcontext context, uint32_t stream, uint8_t* buffer, size_t size,
                                         size_t valid);

  bool OpenOutput(std::string* path, int* fd, std::string* error) const;
  // Subscribes this session's callbacks to CUPTI (Start, and again after a detach).
  bool Subscribe(std::string* error);
  // Trace mode: the buffer functions and record settings, which a detach forgets.
  bool RegisterActivityBuffers();
  // A block session whose activities are off for good after a window detaches CUPTI from the
  // process (cuptiFinalize), as activities enabled on running contexts leave a cost on the
  // program's CUDA calls. The control thread asks (RequestDetach: at the exit of a call that
  // waits for the GPU, or later at any call's exit); a program thread leaving such a call
  // detaches (DetachAtApiExit, as NVIDIA advises); the control thread then subscribes again and
  // follows the iterations afresh (Reattach).
  enum : int { kDetachNone = 0, kDetachAtWait = 1, kDetachAtAnyExit = 2 };
  void RequestDetach(int when);
  void DetachAtApiExit();
  void Reattach();
  // False, once said on stderr and in the meta, when a detach would break the program
  // (graph_traced_); the caller holds detach_mutex_.
  bool MayDetach();
  // EMO_TRACE_QUIET_MS (benchmarks): what the quiet phases ask now. True while CUPTI is to stay
  // detached; the GPU thread is paused for as long.
  bool PollQuietPhases();
  // A block session: registers the contexts that exist now, as their creation callbacks would.
  void AddLiveContexts();
  void AddContext(CUcontext context);
  bool EnableCallbacks(std::string* error);
  std::string StartMeta(const std::string& path) const;
  void OnLaunch(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const CUpti_CallbackData* data);
  void AfterLaunch(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const CUpti_CallbackData* data, CallSite site);
  void OnAnchor(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const CUpti_CallbackData* data);
  void SetLaunchCallbacks(bool on);
  void CountLaunchOffStretch(bool on);
  bool SettledPoll(int64_t now) const;
  void OnResource(CUpti_CallbackId cbid, const CUpti_ResourceData* data);
  void OnNvtx(CUpti_CallbackId cbid, const void* data);
  void NvtxPush(std::string name);
  void NvtxPop();
  void NvtxStart(uint64_t id, std::string name);
  void NvtxEnd(uint64_t id);
  std::string NvtxMessage(const void* attributes);
  bool IterationName(const std::string& name);
  uint32_t DeviceOfContext(uint32_t context);

  void ControlLoop();
  void DrainControl();
  void OnLaunchIterations(const std::vector<LaunchIteration>& iterations);
  void OnAnchorEvent(const LaunchEvent& e);
  // Whether iterations may now be followed without launch callbacks (the window, if any, is
  // traced and its activities are off).
  bool MayStopLaunchCallbacks() const;
  // Turns the launch callbacks off once iterations can be followed without them: by NVTX
  // ranges, or by an anchor call when one is stable.
  void SettleLaunchCallbacks();
  void StopFollowingAnchor(const char* why);
  // After a hole in the calls seen (the launch callbacks off, CUPTI detached): no anchor is
  // followed, and a new period finder starts, its loop ids going on from the old one's.
  void FindIterationsAfresh();
  void OnNvtxBoundary(const NvtxBoundary& b);
  void StartIteration(uint64_t index, uint64_t loop, uint64_t loop_index, uint64_t period);
  void WriteIteration(uint64_t index, int64_t start, int64_t end, uint32_t source, uint32_t launches,
                      const std::string& name);
  // GPU-side activity kinds on or off; the API kinds go on with them, and off only with
  // `api_too` (kApiActivityKinds in tracer.cc says why).
  void SetActivities(bool on, bool api_too = false);
  void SetActivityKinds(const CUpti_ActivityKind* kinds, size_t n, bool on);
  void ReportWindow();

  static std::atomic<Tracer*> current_;
  // Sessions started in this process; a thread's call-nesting and NVTX state belong to one
  // session and start afresh in the next (a block session can end inside a call).
  static std::atomic<uint32_t> sessions_;
  uint32_t session_ = 0;
  // Per attachment of CUPTI (session << 16, bumped at each Reattach): a thread's call nesting
  // and NVTX stack from before a detach are stale, as their exit callbacks never came.
  std::atomic<uint32_t> attach_generation_{0};
  Begin begin_ = Begin::kAtCudaInit;

  InjectConfig config_;
  ClockReference clock_;
  DriverApi driver_;
  CUpti_SubscriberHandle subscriber_ = nullptr;
  int pid_ = 0;
  std::string path_;
  std::unique_ptr<std::regex> iteration_regex_;

  TraceWriter writer_;
  GpuMonitor gpus_;
  // `emo run`: follows a clock policy (EMO_RUN_SCHEDULE); null when not asked or not loadable.
  std::unique_ptr<ClockFollower> clock_follower_;
  LaunchRing launches_{16};
  // `emo run` with emulate or switches on the GPU: the follower that sees each launch return (set
  // before the callbacks start), and the application's launches counted as they are made.
  ClockFollower* after_launch_ = nullptr;
  std::atomic<uint64_t> launch_seq_{0};
  std::atomic<uint64_t> launches_seen_{0};

  std::mutex contexts_mutex_;
  std::unordered_map<uint32_t, uint32_t> context_devices_;

  std::mutex nvtx_mutex_;
  std::vector<NvtxBoundary> nvtx_boundaries_;
  std::unordered_map<uint64_t, OpenRange> nvtx_open_;          // start/end ranges by id
  std::unordered_map<const void*, std::string> nvtx_strings_;  // registered strings by handle

  // Control thread.
  std::thread control_;
  std::mutex control_mutex_;
  std::condition_variable control_wake_;
  bool control_stop_ = false;
  std::optional<LaunchPeriodFinder> finder_;
  uint64_t loop_offset_ = 0;   // loops of the finders replaced after an anchor was given up
  uint64_t lost_offset_ = 0;   // their lost locks
  AnchorFinder anchors_;
  std::optional<AnchorFollower> follower_;
  bool launch_callbacks_on_ = true;
  std::unordered_map<uint64_t, std::pair<uint32_t, uint32_t>> anchor_calls_;  // signature: (call, bytes)
  uint64_t anchor_follows_ = 0;
  // Every callback CUPTI made into the tracer other than a kernel launch's (each one runs on the
  // thread that made the call; launches are counted as launches_seen_), and those made while the
  // launch callbacks were off (a loop followed by its anchor call or
  // NVTX ranges), with the iterations that ended meanwhile: what the tracer asks of the
  // program's threads once it follows a loop without its launches (meta callbacks.*).
  std::atomic<uint64_t> callbacks_{0};
  uint64_t callbacks_at_launch_off_ = 0;
  int64_t launch_off_since_ns_ = 0;
  uint64_t callbacks_launch_off_ = 0;
  uint64_t iterations_launch_off_ = 0;
  uint64_t anchor_given_up_ = 0;
  std::string anchor_last_reason_;
  // Bumped when the launch callbacks come back on: a thread that was inside a runtime launch
  // when they went off never saw its exit callback, and resets its nesting depth.
  std::atomic<uint32_t> launch_generation_{0};
  std::optional<TraceWindow> window_;
  uint64_t next_index_ = 0;
  bool nvtx_source_ = false;
  std::string nvtx_key_;
  bool nvtx_started_ = false;
  int64_t nvtx_start_ns_ = 0;
  std::string nvtx_name_;
  uint64_t nvtx_iterations_ = 0;
  uint32_t nvtx_launches_ = 0;
  uint64_t nvtx_current_index_ = 0;
  bool reported_launch_source_ = false;
  std::string reported_window_meta_;
  bool activities_on_ = false;
  bool api_on_ = false;
  // Durations of the latest iterations of the launch-period loop `loop_durations_of_`.
  uint64_t loop_durations_of_ = 0;
  std::vector<int64_t> loop_durations_;
  uint64_t refused_kinds_ = 0;  // bit per CUpti_ActivityKind that cuptiActivityEnable refused
  bool writer_failed_ = false;
  int64_t flush_until_ns_ = 0;
  int64_t next_flush_ns_ = 0;
  int64_t forced_flush_at_ns_ = 0;

  std::atomic<bool> ever_traced_{false};  // activities were on at some point
  std::atomic<bool> traced_since_attach_{false};  // ... since CUPTI was last attached
  // A CUDA graph was launched while activities were on since CUPTI was last attached: CUPTI's
  // detach (cuptiFinalize) then breaks the program's later launches of it (an unspecified launch
  // failure; bench/gpu/detach_diag.sh, with CUPTI alone), so CUPTI stays attached for good.
  std::atomic<bool> graph_traced_{false};
  bool detach_skip_reported_ = false;  // under detach_mutex_
  // Detaching (block sessions): asked by the control thread, done by a program thread under
  // detach_mutex_ (which Shutdown takes before it touches CUPTI), seen by the control thread.
  std::mutex detach_mutex_;
  std::atomic<int> detach_requested_{kDetachNone};
  std::atomic<bool> detached_{false};
  uint64_t detaches_ = 0;
  bool activity_buffers_registered_ = false;  // control thread; false again after a detach
  std::string reattach_error_;
  // When a program thread last detached CUPTI (CLOCK_MONOTONIC), for the quiet phases' marks.
  std::atomic<int64_t> detached_at_monotonic_ns_{0};
  std::optional<QuietPhases> quiet_;  // control thread; set when EMO_TRACE_QUIET_MS is
  std::atomic<bool> shut_down_{false};
};

}  // namespace emo::runtime
