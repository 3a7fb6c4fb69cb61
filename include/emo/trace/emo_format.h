// EMO's own trace format (`emo trace`): what the CUPTI injection library (src/runtime) writes and
// the emo reader (src/trace/emo_trace_reader.cc) reads. Header-only and dependency-free (the
// C++ standard library's <cstdint>, <cstring>, <string_view> only) because the injection
// library includes it too and must run where none of EMO's other dependencies are installed.
//
// A file is the 16-byte FileHeader, then chunks, each a ChunkHeader and its payload. Chunks are
// written whole by one thread, so a program that is killed, or a disk that fills, leaves a file
// whose chunks up to the last complete one are readable; the reader says where it ends.
//
//   kMeta     payload: UTF-8 text, "key=value\n" lines (host, pid, rank, clock reference, GPUs,
//             versions, configuration). Several meta chunks may appear; later keys override.
//             Keys the writer sets: format=emo-trace, tool, host, pid, ppid, rank, local_rank,
//             world_size (-1 when the job does not say: RANK, LOCAL_RANK, WORLD_SIZE), command,
//             clock.cupti_ns, clock.realtime_ns, clock.monotonic_ns (read together),
//             cuda.driver_version, cupti.version, config.mode (trace|monitor), config.warmup,
//             config.iterations, config.buffer_pool_mib, iteration.source (nvtx|launch_period|
//             none), iteration.nvtx_regex, session.begin (cuda_init|block: a block a program
//             traced itself), end.reason (exit|signal|disk_full|block_end|exception|...) at shutdown.
//   kStrings  payload: entries {uint32 id, uint32 length, bytes}; ids are the writer's, unique
//             per file (kernel names, API names, NVTX range names).
//   kRecords  payload: records, each a RecordHeader {uint16 type, uint16 size} and `size`
//             bytes of one of the structs below (read with memcpy; a reader takes the
//             min(size, sizeof) prefix, so fields appended in a later version read as zero in
//             an older reader and absent ones as zero in a newer one).
//   kEnd      payload: empty; written on a clean shutdown. Its absence means the process ended
//             early (crash, kill, full disk) or the writer was not shut down.
//
// Payloads are stored raw (encoding 0) or zlib-deflated (encoding 1). Every time is int64
// nanoseconds on CUPTI's timestamp clock (cuptiGetTimestamp); the meta keys
// `clock.cupti_ns`, `clock.realtime_ns` and `clock.monotonic_ns`, read together at start,
// align it with wall time so several ranks' files can be put on one timeline.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

namespace emo::trace::emo_format {

inline constexpr char kFileMagic[8] = {'E', 'M', 'O', 'T', 'R', 'A', 'C', 'E'};
inline constexpr uint32_t kVersion = 1;
inline constexpr char kChunkMagic[4] = {'E', 'M', 'O', 'C'};

struct FileHeader {
  char magic[8];
  uint32_t version;
  uint32_t header_bytes;  // sizeof(FileHeader); chunks start there
};
static_assert(sizeof(FileHeader) == 16);

enum class ChunkKind : uint32_t { kMeta = 1, kStrings = 2, kRecords = 3, kEnd = 4 };
enum class Encoding : uint32_t { kRaw = 0, kZlib = 1 };

struct ChunkHeader {
  char magic[4];
  uint32_t kind;          // ChunkKind
  uint32_t encoding;      // Encoding
  uint32_t records;       // records (kRecords) or entries (kStrings) in the payload
  uint32_t stored_bytes;  // payload bytes that follow this header
  uint32_t raw_bytes;     // payload bytes once decoded
  uint32_t crc32;         // zlib crc32 of the stored payload
  uint32_t reserved;
};
static_assert(sizeof(ChunkHeader) == 32);

struct RecordHeader {
  uint16_t type;  // RecordType
  uint16_t size;  // bytes of the record that follow
};

enum class RecordType : uint16_t {
  kApi = 1,           // a CUDA runtime or driver API call
  kKernel = 2,        // CONCURRENT_KERNEL
  kMemcpy = 3,
  kMemset = 4,
  kSync = 5,          // SYNCHRONIZATION
  kCudaEvent = 6,     // CUDA_EVENT: one cudaEventRecord
  kExternalCorr = 7,  // EXTERNAL_CORRELATION
  kRange = 8,         // an NVTX push/pop or start/end range
  kIteration = 9,     // one iteration as the tracer found it (NVTX or launch period)
  kEnergy = 10,       // one read of a GPU's NVML energy counter
  kPower = 11,        // one NVML power sample
  kDropped = 12,      // records CUPTI dropped (a data-loss diagnostic)
  kGpu = 13,          // a GPU the process used
  kClock = 14,        // one read of a GPU's SM clock and why NVML says it is held
};

inline constexpr uint32_t kNoName = 0xffffffffu;
inline constexpr uint64_t kNone = ~0ull;

struct ApiRecord {
  int64_t start_ns;
  int64_t end_ns;
  uint64_t correlation;
  uint32_t pid;
  uint32_t tid;
  uint32_t cbid;      // CUPTI callback id of the API function
  uint32_t name;      // string id of the function name
  uint32_t driver;    // 1: driver API (cu*), 0: runtime API (cuda*)
  int32_t return_value;
};

struct KernelRecord {
  int64_t start_ns;
  int64_t end_ns;
  uint64_t correlation;
  uint64_t graph_id;       // kNone when not launched from a CUDA graph
  uint64_t graph_node_id;  // kNone when not in a graph
  uint32_t device;
  uint32_t context;
  uint32_t stream;
  uint32_t name;  // string id of the (mangled or demangled) kernel name
  int32_t grid[3];
  int32_t block[3];
  int32_t registers_per_thread;
  int32_t static_shared_memory;
  int32_t dynamic_shared_memory;
  int32_t reserved;
};

struct MemcpyRecord {
  int64_t start_ns;
  int64_t end_ns;
  uint64_t correlation;
  uint64_t bytes;
  uint64_t graph_id;  // kNone when not in a graph
  uint32_t device;
  uint32_t context;
  uint32_t stream;
  uint8_t copy_kind;  // CUpti_ActivityMemcpyKind (1 HtoD, 2 DtoH, 8 DtoD, 10 PtoP, ...)
  uint8_t src_kind;   // CUpti_ActivityMemoryKind
  uint8_t dst_kind;
  uint8_t peer;       // 1 for a peer-to-peer copy (MEMCPY2)
};

struct MemsetRecord {
  int64_t start_ns;
  int64_t end_ns;
  uint64_t correlation;
  uint64_t bytes;
  uint64_t graph_id;
  uint32_t device;
  uint32_t context;
  uint32_t stream;
  uint32_t value;
};

// CUpti_ActivitySynchronizationType.
enum class SyncType : uint32_t { kUnknown = 0, kEventSynchronize = 1, kStreamWaitEvent = 2, kStreamSynchronize = 3,
                                 kContextSynchronize = 4 };

struct SyncRecord {
  int64_t start_ns;
  int64_t end_ns;
  uint64_t correlation;  // of the API call that synchronized
  uint64_t event_sync_id;  // cudaEventSyncId (CUDA >= 12.8), kNone when n/a
  uint32_t type;           // SyncType
  uint32_t context;
  uint32_t stream;         // 0xffffffff when n/a
  uint32_t cuda_event;     // CUPTI's event id, 0xffffffff when n/a
  uint32_t device;
  int32_t reserved;
};

struct CudaEventRecord {
  uint64_t correlation;    // of the cudaEventRecord call
  uint64_t event_sync_id;  // matches SyncRecord::event_sync_id of the waits on this record
  int64_t device_ns;       // when the GPU reached the record, 0 when not collected
  uint32_t event;          // CUPTI's event id
  uint32_t context;
  uint32_t stream;
  uint32_t device;
};

struct ExternalCorrRecord {
  uint64_t correlation;
  uint64_t external_id;
  uint32_t external_kind;  // CUpti_ExternalCorrelationKind
  uint32_t reserved;
};

struct RangeRecord {
  int64_t start_ns;
  int64_t end_ns;
  uint32_t pid;
  uint32_t tid;
  uint32_t name;   // string id
  uint32_t depth;  // nesting depth on its thread, 0 for top-level push/pop ranges
};

// kAnchor: an iteration of a launch-period loop timed between occurrences of one host sync or
// copy that the loop makes a fixed number of times per iteration, after the tracer turned its
// launch callbacks off (its `launches` is the loop's period, not a count).
enum class IterationSource : uint32_t { kNvtx = 1, kLaunchPeriod = 2, kAnchor = 3 };

// One iteration: host time from its first launch (or NVTX range start) to the next one's.
// `traced` is 1 inside the --warmup/--iterations window, where activity records exist.
struct IterationRecord {
  uint64_t index;  // 0-based over the whole run
  int64_t start_ns;
  int64_t end_ns;
  uint32_t source;  // IterationSource
  uint32_t traced;
  uint32_t launches;  // kernel launches the tracer saw in it (kAnchor: the loop's period; NVTX
                      // iterations with meta iteration.launches_counted=0: 0)
  uint32_t name;      // string id (the NVTX range name), kNoName for launch-period iterations
};

struct EnergyRecord {
  int64_t time_ns;         // host time of the read (midpoint of the call)
  uint64_t energy_mj;      // nvmlDeviceGetTotalEnergyConsumption, mJ since driver load
  uint32_t gpu;            // CUDA device ordinal in this process
  uint32_t read_us;        // how long the NVML call took
};

struct PowerRecord {
  int64_t time_ns;  // the sample's time, converted to the CUPTI clock
  uint32_t gpu;
  uint32_t power_mw;
};

// NVML's clocks-event reasons (nvmlDeviceGetCurrentClocksEventReasons, formerly
// ...ThrottleReasons): the bits that say the power limit holds the SM clock down.
inline constexpr uint64_t kClockReasonSwPowerCap = 0x4;
inline constexpr uint64_t kClockReasonHwPowerBrake = 0x80;

struct ClockRecord {
  int64_t time_ns;   // host time of the read
  uint64_t reasons;  // clocks-event reasons bitmask, kNone when NVML gives none
  uint32_t gpu;      // CUDA device ordinal in this process
  uint32_t sm_mhz;   // nvmlDeviceGetClockInfo(NVML_CLOCK_SM)
};

struct DroppedRecord {
  int64_t time_ns;
  uint64_t dropped;  // records lost
  uint32_t context;
  uint32_t stream;
  uint32_t reason;  // 1: CUPTI dropped (buffer full), 2: the tracer's buffer pool was exhausted
  uint32_t reserved;
};

struct GpuRecord {
  uint32_t device;  // CUDA ordinal in this process
  uint32_t name;    // string id of the device name ("NVIDIA H200")
  uint32_t nvml_index;  // 0xffffffff when NVML did not resolve it
  uint32_t reserved;
  char pci_bus_id[32];
  char uuid[48];
};

// The launch calls EMO's tracer counts to follow a program's iterations (the callbacks of
// src/runtime/tracer.cc's launch list), by bare name, with or without `_ptsz`: kernel and graph
// launches of the runtime and the driver. A driver launch made inside a runtime launch is the
// same launch and counts once. Clock policies anchor their packs in these counts.
inline bool IsCountedLaunchApi(std::string_view bare) {
  if (bare.size() > 5 && bare.substr(bare.size() - 5) == "_ptsz") bare.remove_suffix(5);
  for (std::string_view n : {"cudaLaunchKernel", "cudaLaunchKernelExC", "cudaLaunchCooperativeKernel", "__cudaLaunchKernel",
                             "cudaGraphLaunch", "cuLaunchKernel", "cuLaunchKernelEx", "cuLaunchCooperativeKernel",
                             "cuGraphLaunch"}) {
    if (bare == n) return true;
  }
  return false;
}

// "cudaLaunchKernel_v7000" -> "cudaLaunchKernel": CUPTI's callback names end in the version the
// function appeared in (`_v` and 4 or more digits); Kineto traces and EMO's rules use the bare
// name. Shorter suffixes are part of the name ("cuMemcpyHtoD_v2").
inline std::string_view BareApiName(std::string_view name) {
  const size_t v = name.rfind("_v");
  if (v == std::string_view::npos || name.size() - (v + 2) < 4) return name;
  for (size_t i = v + 2; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return name;
  }
  return name.substr(0, v);
}

// Appends one record (header + struct) at `out`; returns the bytes written. `out` needs
// sizeof(RecordHeader) + sizeof(T) bytes.
template <typename T>
inline size_t PutRecord(unsigned char* out, RecordType type, const T& record) {
  const RecordHeader h{static_cast<uint16_t>(type), static_cast<uint16_t>(sizeof(T))};
  std::memcpy(out, &h, sizeof(h));
  std::memcpy(out + sizeof(h), &record, sizeof(T));
  return sizeof(h) + sizeof(T);
}

// Reads the record body at `in` (of `size` bytes) into `record`: the common prefix is copied,
// the rest is zero.
template <typename T>
inline void GetRecord(const unsigned char* in, size_t size, T* record) {
  std::memset(record, 0, sizeof(T));
  std::memcpy(record, in, size < sizeof(T) ? size : sizeof(T));
}

}  // namespace emo::trace::emo_format
