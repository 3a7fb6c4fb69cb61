// The normalized, columnar Trace every reader produces (BRIEF stage 1). One Trace = one
// process-level trace file of one rank. All times are int64 ns on one timeline; ids are dense
// 32-bit indices into the tables below. Tables are sorted by start time (ties: longer first)
// once the reader finishes (see Trace::Finalize).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "emo/base/diagnostics.h"
#include "emo/base/ids.h"
#include "emo/base/units.h"
#include "emo/trace/op_work.h"

namespace emo::trace {

using StringId = Id<struct StringTag>;
using ThreadId = Id<struct ThreadTag>;
using StreamId = Id<struct StreamTag>;
using CpuEventId = Id<struct CpuEventTag>;
using GpuOpId = Id<struct GpuOpTag>;
using SyncId = Id<struct SyncTag>;
using CollectiveId = Id<struct CollectiveTag>;

// Interned strings (kernel and op names repeat thousands of times).
class StringPool {
 public:
  StringPool() = default;
  StringPool(const StringPool&) = delete;  // index_ holds views into strings_
  StringPool& operator=(const StringPool&) = delete;
  StringPool(StringPool&&) = default;
  StringPool& operator=(StringPool&&) = default;
  StringId Intern(std::string_view s);
  std::string_view Get(StringId id) const { return strings_[id.value()]; }
  size_t size() const { return strings_.size(); }

 private:
  std::deque<std::string> strings_;  // a deque keeps element addresses stable on growth
  std::unordered_map<std::string_view, uint32_t> index_;  // views into strings_
};

// A CPU thread of the traced process.
struct ThreadInfo {
  int64_t pid = 0;
  int64_t tid = 0;
  std::string name;  // from thread_name metadata, may be empty
};

// A GPU stream (device, stream) as CUPTI numbers it.
struct StreamInfo {
  int32_t device = 0;
  int64_t stream = 0;
};

enum class CpuKind : uint8_t {
  kOp,          // cpu_op: a framework operator (aten::*, autograd nodes, record_param_comms)
  kAnnotation,  // user_annotation: ProfilerStep#N, record_function regions
  kRuntime,     // cuda_runtime: a CUDA runtime API call
  kDriver,      // cuda_driver: a CUDA driver API call (cuLaunchKernel for Triton, ...)
};

// CPU-side events, columnar. Runtime/driver calls carry the CUPTI correlation id.
struct CpuEventTable {
  std::vector<ThreadId> thread;
  std::vector<CpuKind> kind;
  std::vector<StringId> name;
  std::vector<TimeNs> start;
  std::vector<TimeNs> end;
  std::vector<int64_t> correlation;  // -1 when none
  std::vector<int64_t> external_id;  // -1 when none
  std::vector<int32_t> cbid;         // CUPTI callback id for runtime/driver, -1 otherwise
  size_t size() const { return start.size(); }
};

enum class GpuKind : uint8_t { kKernel, kMemcpy, kMemset };

// Launch configuration of a kernel (zeros for memcpy/memset).
struct LaunchConfig {
  int32_t grid[3] = {0, 0, 0};
  int32_t block[3] = {0, 0, 0};
  int32_t registers_per_thread = 0;
  int32_t shared_memory = 0;
};
// Thread blocks and threads per block of a launch (0 when unknown).
inline int64_t Blocks(const LaunchConfig& l) { return int64_t{l.grid[0]} * l.grid[1] * l.grid[2]; }
inline int64_t Threads(const LaunchConfig& l) { return int64_t{l.block[0]} * l.block[1] * l.block[2]; }

// GPU operations (kernels, memcpys, memsets), columnar.
struct GpuOpTable {
  std::vector<GpuKind> kind;
  std::vector<StringId> name;
  std::vector<StreamId> stream;
  std::vector<TimeNs> start;
  std::vector<TimeNs> end;
  std::vector<int64_t> correlation;  // -1 when none
  std::vector<int64_t> external_id;  // -1 when none
  std::vector<LaunchConfig> launch;
  std::vector<int64_t> bytes;            // memcpy/memset bytes, 0 otherwise
  std::vector<int64_t> graph_id;         // CUDA graph id, -1 when not in a graph
  std::vector<CollectiveId> collective;  // invalid when not a collective kernel
  size_t size() const { return start.size(); }
};

enum class SyncKind : uint8_t { kStreamWaitEvent, kEventSync, kStreamSync, kContextSync, kUnknown };
std::string_view SyncKindName(SyncKind k);

// cuda_sync records (the host API interval; not GPU execution time).
struct SyncTable {
  std::vector<SyncKind> kind;
  std::vector<int32_t> device;
  std::vector<int64_t> stream;                // -1 when n/a (context sync, event sync)
  std::vector<TimeNs> start;
  std::vector<TimeNs> end;
  std::vector<int64_t> correlation;           // correlation of the sync API call
  std::vector<int64_t> wait_on_stream;        // -1 when unresolved
  std::vector<int64_t> wait_on_record_corr;   // correlation of cudaEventRecord, -1 unresolved
  std::vector<int64_t> event_id;              // wait_on_cuda_event_id, -1 when none (the
                                              // event's id, also where the record is unresolved)
  size_t size() const { return start.size(); }
};

// cuda_event records (Kineto >= 2025-11, CUPTI_ACTIVITY_KIND_CUDA_EVENT): one per
// cudaEventRecord, naming the event it recorded and the stream it recorded it on. A wait or event
// sync naming the same event id (wait_on_cuda_event_id) consumes the latest record of that id
// (same device) with a smaller correlation.
struct CudaEventTable {
  std::vector<int64_t> event_id;
  std::vector<int32_t> device;
  std::vector<int64_t> stream;       // the recorded stream
  std::vector<int64_t> correlation;  // of the cudaEventRecord call
  std::vector<TimeNs> start;         // Kineto writes the device timestamp; 0 before CUDA 12.8
  std::vector<TimeNs> end;
  size_t size() const { return start.size(); }
};

// GPU-side annotation ranges (gpu_user_annotation: ProfilerStep#N projected onto a stream).
struct GpuAnnotation {
  StringId name;
  StreamId stream;
  TimeNs start = 0;
  TimeNs end = 0;
};

// Collective metadata of one NCCL kernel (BRIEF stage 2: a collective carries its cross-rank
// identity: process group + sequence number, or its order within the group when Seq is absent).
struct CollectiveInfo {
  std::string name;           // "allreduce", "send", "recv", "_allgather_base", ...
  std::string process_group;  // Process Group Name, "" when absent
  std::string pg_ranks;       // Process Group Ranks as written, e.g. "[0, 1]"
  int64_t group_size = -1;
  int64_t seq = -1;           // Seq when present
  int64_t in_nelems = -1;
  int64_t out_nelems = -1;
  std::string dtype;
  int64_t src_rank = -1;
  int64_t dst_rank = -1;
};

// A GPU's SM clock over a window, from NVML reads every ~50 ms (EMO traces only).
struct ClockStats {
  int64_t samples = 0;
  double median_mhz = -1;  // -1: no read in the window
  double min_mhz = -1;
  double max_mhz = -1;
  // Share of the reads whose clocks-event reasons say the power limit held the clock (software
  // power cap or hardware power brake); -1 when NVML gave no reasons.
  double power_capped_share = -1;

  bool Known() const { return samples > 0; }
};

// What `emo trace` / `emo monitor` measured around the traced window (EMO traces only): host
// time per iteration with and without tracing, and each GPU's energy from its NVML counter.
struct GpuEnergy {
  int32_t device = 0;            // CUDA ordinal in the traced process
  std::string name;              // "NVIDIA H200"
  int64_t iterations = 0;        // iterations in the energy window
  TimeNs window_start = 0, window_end = 0;  // the window the counter difference spans
  double energy_j = 0;           // over the window
  double energy_per_iteration_j = 0;
  // Half-width of the per-iteration energy's uncertainty: the counter updates about every
  // `counter_period_ns`, so each end of the window is known to within one update's energy.
  double uncertainty_per_iteration_j = 0;
  TimeNs counter_period_ns = 0;  // median time between counter changes
  double busy_power_w = 0;       // energy_j over the window
  double idle_power_w = -1;      // power samples before the first iteration, -1 when none
  int64_t counter_reads = 0;
  int64_t power_samples = 0;
  ClockStats clock;         // over the energy window
  ClockStats traced_clock;  // over the traced iterations (the clock the trace's durations ran at)

  // The counter reads cover the energy window.
  bool HasEnergy() const { return iterations > 0 && energy_j >= 0; }
  // ... and the uncertainty is at most a quarter of the energy per iteration: the window is long
  // enough against the counter's update period to be worth a number.
  bool Measurable() const { return HasEnergy() && uncertainty_per_iteration_j <= 0.25 * energy_per_iteration_j; }
};

// Two step times of one program more than kRegimeFactor apart, either way, are two regimes of it
// (a warm-up, another phase or input, a busier host) rather than its drift: a CPU-bound loop's
// step moves up to ~1.3x between processes (the H200's training loop), and `emo run` keeps launch
// callbacks on. Used for a run's first against last third (RunMeasurement::Drifted) and for a
// run's default-clock step against the plan's baseline (`emo run`'s report).
inline constexpr double kRegimeFactor = 1.5;
inline bool InAnotherRegime(double a, double b) {
  return a > 0 && b > 0 && (a > kRegimeFactor * b || b > kRegimeFactor * a);
}

struct RunMeasurement {
  std::string mode;               // "trace" | "monitor"
  std::string iteration_source;   // "nvtx" | "launch_period" | "none"
  // The call that timed the launch-period iterations once the tracer turned its launch callbacks
  // off (meta iteration.anchor, e.g. "cudaMemcpyAsync 4 B"); empty when it never did.
  std::string iteration_anchor;
  int64_t iterations = 0;         // all iterations the tracer found
  int64_t traced_iterations = 0;  // inside the tracing window
  int64_t untraced_iterations = 0;  // outside it, after the first (start-up) ones
  TimeNs untraced_step_ns = -1;   // median host time per untraced iteration (-1: none)
  TimeNs traced_step_ns = -1;     // median host time per traced iteration (-1: none)
  TimeNs untraced_step_p10_ns = -1, untraced_step_p90_ns = -1;
  // The median untraced step over the first and over the last third of the untraced iterations, in
  // run order (-1: fewer than kDriftMinIterations): a program whose step moves between them by
  // more than kRegimeFactor (Drifted) ran in two regimes, and the median above mixes them.
  TimeNs untraced_first_third_ns = -1, untraced_last_third_ns = -1;
  static constexpr int64_t kDriftMinIterations = 30;
  bool Drifted() const {
    return InAnotherRegime(static_cast<double>(untraced_first_third_ns), static_cast<double>(untraced_last_third_ns));
  }
  std::vector<TimeNs> iteration_ns;   // every iteration's host time, in order
  std::vector<bool> iteration_traced;
  std::vector<GpuEnergy> gpus;
  std::string host;
  int64_t pid = -1;
  int64_t clock_realtime_offset_ns = 0;  // realtime = trace time + this
  bool complete = false;          // the file ends with the writer's end chunk
  std::string end_note;           // where and why the file ends when incomplete
  // Why the tracer stopped (meta end.reason: exit, signal, block_end, exception, ...); empty when
  // the file has no end chunk.
  std::string end_reason;
  // How the session began (meta session.begin): "cuda_init" (`emo trace`/`monitor`/`run`), or
  // "block" (a program traced a block of itself, Python's emo.trace).
  std::string session;
  // A block session detaches CUPTI once its window's records are in (meta cupti.detaches): the
  // calls made while it was detached are a hole in the block's iterations.
  int64_t cupti_detaches = 0;
  // Callbacks CUPTI made into the tracer, each on the thread that made the CUDA call (meta
  // callbacks.*): all but the kernel launches' (those are meta launches.seen), and those made while
  // the launch callbacks were off (the loop followed by its anchor call or NVTX ranges) with the
  // iterations timed meanwhile; -1 where the file predates them.
  int64_t callbacks_non_launch = -1;
  int64_t callbacks_launch_off = -1;
  int64_t callbacks_launch_off_iterations = -1;
  int64_t dropped_records = 0;    // activity records lost (CUPTI or the buffer pool)
  // `emo run`: how the clock policy was followed in this process (meta run.<key>, key without
  // the prefix: policy, actuator, gpu, followed, switches, switches_applied, ...); empty otherwise.
  std::map<std::string, std::string> policy_run;
  // `emo run`: each pack switch it timed (meta run.switch_times_ns): the pack, when its lock took
  // effect and when the pack's iteration began (its first launch), on the trace's clock; and the
  // launch call of the iteration each pack starts at (run.pack_first_calls).
  struct SwitchTime {
    int64_t pack = -1;
    TimeNs applied_ns = 0;
    TimeNs iteration_start_ns = 0;
  };
  std::vector<SwitchTime> switch_times;
  std::vector<int64_t> pack_first_calls;
  // `emo run`: the usable iterations before the plan's first switch and while it held (until
  // the guard stopped it, or the end), each with its median step and energy per iteration. The
  // guard's re-timings of the default clock fall inside `under`.
  struct PlanSplit {
    std::pair<TimeNs, int64_t> before_step;  // median host time (-1: none), iterations
    std::pair<TimeNs, int64_t> under_step;
    std::vector<GpuEnergy> before_gpus, under_gpus;
    TimeNs started_ns = 0, stopped_ns = -1;  // on the trace's clock; -1: held to the end
    // Where the run says when the plan's clocks were in force (meta run.plan_spans_ns): the
    // iterations wholly inside those spans, and those at the default clock between them (the
    // guard's re-timings), each median host time and count; {-1, 0} without spans.
    std::pair<TimeNs, int64_t> in_force_step{-1, 0};
    std::pair<TimeNs, int64_t> interleaved_default_step{-1, 0};
    // Each run of those default-clock iterations (one re-timing) against the plan's iterations
    // next to it (at most kPairedNeighbours on each side): the median over runs of the plan's
    // step over the default's, and the number of runs; {0, 0} without any. A pace that drifts
    // over tens of iterations cancels in each pair, where it does not in the two medians above.
    static constexpr size_t kPairedNeighbours = 8;
    std::pair<double, int64_t> paired_in_force_over_default{0.0, 0};
  };
  std::optional<PlanSplit> plan;
};

// Whole-file facts.
struct TraceMeta {
  std::string source_path;
  std::string format;          // "kineto-json", "nsys-sqlite", "emo"
  int64_t rank = -1;           // distributedInfo.rank, -1 when single-process
  int64_t world_size = -1;
  std::string backend;         // distributedInfo.backend
  std::vector<std::string> device_names;  // deviceProperties[].name by id
  int64_t cuda_runtime_version = -1;
  int64_t cuda_driver_version = -1;
  int64_t cupti_version = -1;
  bool record_shapes = false;
  bool with_stack = false;
  bool has_cuda_sync = false;  // any cuda_sync event present
  bool rocm = false;           // a ROCm/HIP trace (flagged unsupported by analyses)
  int64_t base_time_ns = 0;    // baseTimeNanoseconds (already added to every time)
  int64_t raw_events = 0;      // traceEvents entries read
  std::optional<RunMeasurement> run;  // EMO traces: what the tracer measured beside the trace
  std::string first_dropped_gpu_op;  // the first GPU op event dropped (bad or missing times), "" when none
};

// The normalized trace of one rank.
struct Trace {
  TraceMeta meta;
  StringPool strings;
  std::vector<ThreadInfo> threads;
  std::vector<StreamInfo> streams;
  CpuEventTable cpu;
  GpuOpTable gpu;
  SyncTable syncs;
  CudaEventTable cuda_events;
  std::vector<GpuAnnotation> gpu_annotations;
  std::vector<CollectiveInfo> collectives;
  // The arithmetic work of the CPU operators whose shapes the trace recorded (record_shapes;
  // OperatorWork in op_work.h), by External id: the kernels an operator launched carry its id.
  std::unordered_map<int64_t, OpWork> op_work;
  Diagnostics diagnostics;

  ThreadId InternThread(int64_t pid, int64_t tid);
  StreamId InternStream(int32_t device, int64_t stream);

  // Sorts every table by (start, -duration), remapping nothing else (ids are assigned after
  // sorting, so readers call this exactly once, at the end).
  void Finalize();

  std::string_view Name(StringId id) const { return strings.Get(id); }

 private:
  std::map<std::pair<int64_t, int64_t>, uint32_t> thread_index_;
  std::map<std::pair<int32_t, int64_t>, uint32_t> stream_index_;
};

// The GPU names (deviceProperties) of the devices the trace's GPU ops ran on, one per device in
// device order; "" for a device the trace does not name.
std::vector<std::string> GpuNamesUsed(const Trace& t);

// Enter and exit times of the recorded CPU ranges (operators and annotations) of every thread,
// sorted, indexed by ThreadId: where the profiler was at work on a thread.
std::vector<std::vector<TimeNs>> RecordedCpuPoints(const Trace& t);

}  // namespace emo::trace
