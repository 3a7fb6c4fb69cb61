// The state of one Kineto JSON parse, shared by kineto_json_reader.cc (document, metadata,
// finishing) and kineto_json_events.cc (one traceEvents element). Private to src/trace.
#pragma once

#include <simdjson.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "emo/trace/trace.h"

namespace emo::trace::kineto {

namespace od = simdjson::ondemand;

// An absent integer key (every legal value, -1 included, stays distinguishable).
constexpr int64_t kAbsent = std::numeric_limits<int64_t>::min();

// What an event's `cat` means to EMO.
enum class Cat : uint8_t {
  kNone,  // no cat key (metadata events)
  kCpuOp,
  kUserAnnotation,
  kRuntime,
  kDriver,
  kKernel,
  kMemcpy,
  kMemset,
  kGpuUserAnnotation,
  kCudaSync,
  kCudaEvent,
  kPythonFunction,
  kLaunchFlow,  // ac2g and its older names
  kOther,
};

// True when the object key starting at `raw` (just after its opening quote, as
// raw_json_string::raw() gives it) is exactly `literal`. It compares N-1 bytes and the
// closing quote with one memcmp of known length; it may read past a shorter key, which is
// safe: keys lie inside the document, which ends with SIMDJSON_PADDING (64) spare bytes,
// longer than any literal here. Escaped keys ("p\u0068") never match, as in simdjson.
template <size_t N>
inline bool KeyIs(const char* raw, const char (&literal)[N]) {
  static_assert(N <= simdjson::SIMDJSON_PADDING, "literal longer than the input padding");
  return std::memcmp(raw, literal, N - 1) == 0 && raw[N - 1] == '"';
}

// Calls f(od::value&) -> simdjson::error_code on each element of `v` when it is an array (nothing
// when it is not), stopping at the first error. An element f leaves unread is skipped.
template <typename F>
inline simdjson::error_code ForEachArrayItem(od::value& v, F&& f) {
  if (v.raw_json_token().substr(0, 1) != "[") return simdjson::SUCCESS;
  od::array arr;
  if (auto e = v.get_array().get(arr)) return e;
  for (auto element : arr) {
    od::value item;
    if (auto e = std::move(element).get(item)) return e;
    if (auto e = f(item)) return e;
  }
  return simdjson::SUCCESS;
}

// a + b, clamped to the int64 range instead of overflowing.
inline int64_t SaturatingAdd(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) {
    return b > 0 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
  }
  return r;
}

// The args keys EMO reads (research §1.7), gathered before dispatch because JSON key order
// is free. Strings are views of still-escaped JSON text inside the input buffer.
struct Args {
  int64_t device, in_device, stream, correlation, external_id, cbid;
  int64_t registers, shared_memory, bytes, graph_id;
  int64_t wait_on_stream, wait_record_corr, wait_event_id, event_id;
  int64_t in_nelems, out_nelems, group_size, seq, src_rank, dst_rank;
  std::array<int32_t, 3> grid, block;
  std::string_view collective_name, dtype, pg_name, pg_ranks, sync_kind, name;
  bool has_collective;
  // record_shapes payload, read only for operators whose work OperatorWork knows (op_work.h).
  bool work_op;
  std::vector<std::vector<int64_t>> input_dims;
  std::vector<std::string> concrete_inputs, input_types;

  void Reset() {
    device = in_device = stream = correlation = external_id = cbid = kAbsent;
    registers = shared_memory = bytes = graph_id = kAbsent;
    wait_on_stream = wait_record_corr = wait_event_id = event_id = kAbsent;
    in_nelems = out_nelems = group_size = seq = src_rank = dst_rank = kAbsent;
    grid = block = {0, 0, 0};
    collective_name = dtype = pg_name = pg_ranks = sync_kind = name = {};
    has_collective = false;
    work_op = false;
    input_dims.clear();
    concrete_inputs.clear();
    input_types.clear();
  }
};

// The top-level keys of one traceEvents element.
struct Event {
  char ph = 0;  // 0: absent
  Cat cat = Cat::kNone;
  bool has_name = false;
  std::string_view name;                   // escaped content
  std::string_view ts, dur, pid, tid, id;  // raw tokens, empty when absent
};

struct Flow {
  int64_t id;
  char ph;
};

// Builds one Trace from one JSON document, in one forward pass. Per-event problems go to
// the trace's diagnostics; only errors of the JSON itself (simdjson error codes) stop it.
class TraceBuilder {
 public:
  explicit TraceBuilder(const std::string& path) { trace_.meta.source_path = path; }

  // Reads the top-level object: metadata keys and the traceEvents array, in any order.
  // *saw_events tells whether a traceEvents array was found. (kineto_json_reader.cc)
  simdjson::error_code ParseRoot(od::object& root, bool* saw_events);
  // Applies what can only be applied at the end (baseTimeNanoseconds, thread names, the
  // flow check), sorts the tables (Trace::Finalize) and hands the Trace over.
  Trace Finish();
  // Drops what refers into the current document's text (the thread cache), before the next
  // document of one trace is parsed into the same buffer (kineto_json_stream.cc).
  void ForgetTokens() {
    last_pid_ = {};
    last_tid_ = {};
    last_thread_ = ThreadId();
  }

 private:
  // One traceEvents element and its args (kineto_json_events.cc).
  simdjson::error_code ParseTraceEvents(od::value& v);
  simdjson::error_code ParseEvent(od::object& obj);
  simdjson::error_code ParseArgs(od::value& v);
  static simdjson::error_code ReadTriple(od::value& v, std::array<int32_t, 3>* out);
  static simdjson::error_code ReadDims(od::value& v, std::vector<std::vector<int64_t>>* out);
  static simdjson::error_code ReadStrings(od::value& v, std::vector<std::string>* out);

  bool HasAllItNeeds() const;
  void Dispatch();
  void AddComplete();
  // A kernel/memcpy/memset event that cannot be placed in time: counted, the first one named.
  void DropGpuOp(std::string_view why);
  void AddCpu(CpuKind kind, TimeNs start, TimeNs end);
  void AddGpuOp(GpuKind kind, TimeNs start, TimeNs end);
  void AddGpuAnnotation(TimeNs start, TimeNs end);
  void AddSync(TimeNs start, TimeNs end);
  void AddCudaEvent(TimeNs start, TimeNs end);
  void AddFlow();
  void AddThreadName();

  bool ResolveProcessOrThread(std::string_view token, int64_t* id);
  StringId InternEscaped(std::string_view content);
  StringId InternCached(std::string_view s);
  std::string Unescaped(std::string_view content);
  void Count(Diag d) { trace_.diagnostics.Add(d); }

  // Metadata and the end of the parse (kineto_json_reader.cc).
  simdjson::error_code ParseDeviceProperties(od::value& v);
  simdjson::error_code ParseDistributedInfo(od::value& v);
  void ApplyBaseTime();
  void ApplyThreadNames();
  void CheckFlows();

  Trace trace_;
  Event ev_;
  Args args_;
  int64_t base_time_ns_ = 0;
  int64_t max_start_ = std::numeric_limits<int64_t>::min();
  std::string scratch_;
  // Caches of the last thread and stream: events of one track come in runs.
  std::string_view last_pid_, last_tid_;
  ThreadId last_thread_;
  int64_t last_device_ = kAbsent, last_stream_ = kAbsent;
  StreamId last_stream_id_;
  // Non-numeric pid/tid strings ("Spans") get stable negative ids; -1 is Kineto's own.
  std::map<std::string, int64_t, std::less<>> string_ids_;
  std::map<std::pair<int64_t, int64_t>, std::string> thread_names_;
  std::vector<Flow> flows_;
  struct InternSlot {
    uint64_t hash = 0;
    std::string_view text;  // points into trace_.strings (stable: a deque of strings)
    StringId id;
  };
  // Grows with the distinct strings up to kInternCacheMax slots (a small trace then does not
  // clear a large table: the fuzz targets read thousands of them a second).
  static constexpr size_t kInternCacheMax = 4096;
  std::vector<InternSlot> intern_cache_ = std::vector<InternSlot>(64);
};

}  // namespace emo::trace::kineto
