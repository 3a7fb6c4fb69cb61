// Parsing one traceEvents element into the Trace tables (the TraceBuilder half that runs
// once per event; kineto_json_reader.cc has the document, metadata and finishing half).
#include <algorithm>
#include <cstring>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "kineto_json_builder.h"
#include "kineto_json_token.h"

namespace emo::trace::kineto {
namespace {

struct CatName {
  std::string_view name;
  Cat cat;
};

// Current Kineto names, then the 2021 tb_plugin-era names mapped onto them.
constexpr std::array<CatName, 21> kCategories = {{
    {"cpu_op", Cat::kCpuOp},
    {"cuda_runtime", Cat::kRuntime},
    {"kernel", Cat::kKernel},
    {"ac2g", Cat::kLaunchFlow},
    {"python_function", Cat::kPythonFunction},
    {"cuda_driver", Cat::kDriver},
    {"gpu_memset", Cat::kMemset},
    {"gpu_memcpy", Cat::kMemcpy},
    {"cuda_sync", Cat::kCudaSync},
    {"user_annotation", Cat::kUserAnnotation},
    {"gpu_user_annotation", Cat::kGpuUserAnnotation},
    {"cuda_event", Cat::kCudaEvent},
    {"async_cpu_to_gpu", Cat::kLaunchFlow},
    {"async_gpu", Cat::kLaunchFlow},
    {"async", Cat::kLaunchFlow},
    {"Operator", Cat::kCpuOp},
    {"Runtime", Cat::kRuntime},
    {"Driver", Cat::kDriver},
    {"Kernel", Cat::kKernel},
    {"Memcpy", Cat::kMemcpy},
    {"Memset", Cat::kMemset},
}};

Cat Classify(std::string_view cat) {
  // The common names first, compared with constant-length memcmp (inlined); then the table.
  auto is = [cat](const auto& literal) {
    constexpr size_t n = sizeof(literal) - 1;
    return cat.size() == n && std::memcmp(cat.data(), literal, n) == 0;
  };
  if (is("cpu_op")) return Cat::kCpuOp;
  if (is("ac2g")) return Cat::kLaunchFlow;
  if (is("cuda_runtime")) return Cat::kRuntime;
  if (is("kernel")) return Cat::kKernel;
  if (is("python_function")) return Cat::kPythonFunction;
  for (const CatName& c : kCategories) {
    if (c.name == cat) return c.cat;
  }
  return Cat::kOther;
}

// Categories whose args EMO never reads: their args are skipped unparsed (python_function
// events alone can be most of a with_stack trace).
bool ArgsUnused(Cat c) {
  return c == Cat::kPythonFunction || c == Cat::kOther || c == Cat::kLaunchFlow;
}

int32_t ClampToInt32(int64_t v) {
  return static_cast<int32_t>(std::clamp<int64_t>(v, std::numeric_limits<int32_t>::min(),
                                                  std::numeric_limits<int32_t>::max()));
}

// Drops the whitespace raw tokens carry up to the next structural character.
std::string_view TrimRight(std::string_view s) {
  while (!s.empty() &&
         (s.back() == ' ' || s.back() == '\t' || s.back() == '\n' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

int64_t OrMinusOne(int64_t v) { return v == kAbsent ? -1 : v; }

SyncKind SyncKindOf(std::string_view name) {
  if (name == "Stream Wait Event") return SyncKind::kStreamWaitEvent;
  if (name == "Event Sync") return SyncKind::kEventSync;
  if (name == "Stream Sync") return SyncKind::kStreamSync;
  if (name == "Context Sync") return SyncKind::kContextSync;
  return SyncKind::kUnknown;
}

}  // namespace

simdjson::error_code TraceBuilder::ParseTraceEvents(od::value& v) {
  od::array events;
  if (auto e = v.get_array().get(events)) return e;
  for (auto element : events) {
    od::value item;
    if (auto e = std::move(element).get(item)) return e;
    ++trace_.meta.raw_events;
    std::string_view tok = item.raw_json_token();
    if (tok.empty() || tok[0] != '{') {
      Count(Diag::kJsonEventSkipped);
      continue;
    }
    od::object obj;
    if (auto e = item.get_object().get(obj)) return e;
    if (auto e = ParseEvent(obj)) return e;
  }
  return simdjson::SUCCESS;
}

// ---------------------------------------------------------------------------------------
// One event.

simdjson::error_code TraceBuilder::ParseEvent(od::object& obj) {
  ev_ = Event();
  args_.Reset();
  for (auto f : obj) {
    od::field field;
    if (auto e = std::move(f).get(field)) return e;
    const char* key = field.key().raw();
    od::value& v = field.value();
    std::string_view s;
    bool decided = false;  // set when a key that can complete the event was read
    switch (key[0]) {
      case 'p':
        if (KeyIs(key, "ph")) {
          // A phase is one character; anything else is an unknown phase.
          if (StringTokenContent(v.raw_json_token(), &s)) ev_.ph = s.size() == 1 ? s[0] : '?';
          decided = true;
        } else if (KeyIs(key, "pid")) {
          ev_.pid = v.raw_json_token();
        }
        break;
      case 'c':
        if (KeyIs(key, "cat")) {
          ev_.cat = StringTokenContent(v.raw_json_token(), &s) ? Classify(s) : Cat::kOther;
          decided = true;
        }
        break;
      case 'n':
        if (KeyIs(key, "name")) {
          ev_.has_name = StringTokenContent(v.raw_json_token(), &ev_.name);
        }
        break;
      case 't':
        if (KeyIs(key, "ts")) {
          ev_.ts = v.raw_json_token();
        } else if (KeyIs(key, "tid")) {
          ev_.tid = v.raw_json_token();
        }
        break;
      case 'd':
        if (KeyIs(key, "dur")) ev_.dur = v.raw_json_token();
        break;
      case 'i':
        if (KeyIs(key, "id")) {
          ev_.id = v.raw_json_token();
          decided = true;
        }
        break;
      case 'a':
        // cat normally precedes args; when it does not, args are read anyway.
        if (KeyIs(key, "args") && !(ev_.ph != 'M' && ArgsUnused(ev_.cat))) {
          if (auto e = ParseArgs(v)) return e;
        }
        break;
      default:
        break;
    }
    if (decided && HasAllItNeeds()) break;  // the rest of the object is skipped unread
  }
  Dispatch();
  return simdjson::SUCCESS;
}

// True once the keys read so far decide everything Dispatch() will do with this event:
// an event that is only counted needs its ph and cat, a flow also its id. (python_function
// events can be most of a with_stack trace; their name/ts/args are then never touched.)
bool TraceBuilder::HasAllItNeeds() const {
  if (ev_.cat == Cat::kNone) return false;
  switch (ev_.ph) {
    case 0:
    case 'M':
      return false;
    case 'X':
      return ArgsUnused(ev_.cat);
    case 's':
    case 'f':
    case 't':
      return ev_.cat != Cat::kLaunchFlow || !ev_.id.empty();
    default:
      return true;
  }
}

simdjson::error_code TraceBuilder::ReadTriple(od::value& v, std::array<int32_t, 3>* out) {
  size_t i = 0;
  return ForEachArrayItem(v, [&](od::value& item) {
    int64_t x = 0;
    if (i < out->size() && ParseIntToken(item.raw_json_token(), &x)) (*out)[i] = ClampToInt32(x);
    ++i;
    return simdjson::SUCCESS;
  });
}

// "Input Dims": one array of sizes per input ([] for a scalar or absent input); an input that is
// a list of tensors (nested arrays) gets no sizes.
simdjson::error_code TraceBuilder::ReadDims(od::value& v, std::vector<std::vector<int64_t>>* out) {
  return ForEachArrayItem(v, [out](od::value& input) {
    std::vector<int64_t>& dims = out->emplace_back();
    bool flat = true;
    auto e = ForEachArrayItem(input, [&](od::value& size) {
      int64_t x = 0;
      if (flat && ParseIntToken(size.raw_json_token(), &x)) {
        dims.push_back(x);
      } else {
        flat = false;  // a nested array, skipped by the iteration
      }
      return simdjson::SUCCESS;
    });
    if (!flat) dims.clear();
    return e;
  });
}

// An array of strings ("Concrete Inputs", "Input type"); "" for an element that is not one.
simdjson::error_code TraceBuilder::ReadStrings(od::value& v, std::vector<std::string>* out) {
  return ForEachArrayItem(v, [out](od::value& item) {
    std::string_view text;
    out->emplace_back(StringTokenContent(item.raw_json_token(), &text) ? text : std::string_view());
    return simdjson::SUCCESS;
  });
}

simdjson::error_code TraceBuilder::ParseArgs(od::value& v) {
  if (v.raw_json_token().substr(0, 1) != "{") return simdjson::SUCCESS;
  od::object obj;
  if (auto e = v.get_object().get(obj)) return e;
  // CPU rows need one or three keys, which Kineto writes first; stopping once they are
  // seen skips the record_shapes payload (Input Dims, ...) with a cheap depth-count skip,
  // except for the operators whose work the payload gives (work_op below).
  const bool op_row = ev_.cat == Cat::kCpuOp || ev_.cat == Cat::kUserAnnotation;
  const bool api_row = ev_.cat == Cat::kRuntime || ev_.cat == Cat::kDriver;
  // A matrix product's, convolution's or attention's shapes give its work (op_work.h); its name
  // precedes args in Kineto's files (when it does not, the work is not read).
  args_.work_op = ev_.cat == Cat::kCpuOp && ev_.has_name && HasOperatorWork(ev_.name);
  for (auto f : obj) {
    od::field field;
    if (auto e = std::move(f).get(field)) return e;
    const char* key = field.key().raw();
    od::value& val = field.value();
    auto read_int = [&val](int64_t* dst) {
      if (!ParseIntToken(val.raw_json_token(), dst)) *dst = kAbsent;
    };
    auto read_str = [&val](std::string_view* dst) {
      if (!StringTokenContent(val.raw_json_token(), dst)) *dst = {};
    };
    // Dispatch on the first byte, then compare whole keys (no unescaping).
    switch (key[0]) {
      case 'd':
        if (KeyIs(key, "device"))
          read_int(&args_.device);
        else if (KeyIs(key, "dtype"))
          read_str(&args_.dtype);
        break;
      case 's':
        if (KeyIs(key, "stream"))
          read_int(&args_.stream);
        else if (KeyIs(key, "shared memory"))
          read_int(&args_.shared_memory);
        break;
      case 'c':
        if (KeyIs(key, "correlation"))
          read_int(&args_.correlation);
        else if (KeyIs(key, "cbid"))
          read_int(&args_.cbid);
        else if (KeyIs(key, "cuda_sync_kind"))
          read_str(&args_.sync_kind);
        break;
      case 'E':
        if (KeyIs(key, "External id")) read_int(&args_.external_id);
        break;
      case 'e':
        if (KeyIs(key, "external id"))
          read_int(&args_.external_id);  // 2021 traces
        else if (KeyIs(key, "event_id"))
          read_int(&args_.event_id);  // cuda_event records
        break;
      case 'r':
        if (KeyIs(key, "registers per thread")) read_int(&args_.registers);
        break;
      case 'b':
        if (KeyIs(key, "bytes")) {
          read_int(&args_.bytes);
        } else if (KeyIs(key, "block")) {
          if (auto e = ReadTriple(val, &args_.block)) return e;
        }
        break;
      case 'g':
        if (KeyIs(key, "graph id")) {
          read_int(&args_.graph_id);
        } else if (KeyIs(key, "grid")) {
          if (auto e = ReadTriple(val, &args_.grid)) return e;
        }
        break;
      case 'w':
        if (KeyIs(key, "wait_on_stream"))
          read_int(&args_.wait_on_stream);
        else if (KeyIs(key, "wait_on_cuda_event_record_corr_id"))
          read_int(&args_.wait_record_corr);
        else if (KeyIs(key, "wait_on_cuda_event_id"))
          read_int(&args_.wait_event_id);
        break;
      case 'i':
        if (KeyIs(key, "inDevice")) read_int(&args_.in_device);  // P2P memcpy
        break;
      case 'C':
        if (KeyIs(key, "Collective name")) {
          read_str(&args_.collective_name);
          args_.has_collective = true;
        } else if (args_.work_op && KeyIs(key, "Concrete Inputs")) {
          if (auto e = ReadStrings(val, &args_.concrete_inputs)) return e;
        }
        break;
      case 'I':
        if (KeyIs(key, "In msg nelems")) {
          read_int(&args_.in_nelems);
        } else if (args_.work_op && KeyIs(key, "Input Dims")) {
          if (auto e = ReadDims(val, &args_.input_dims)) return e;
        } else if (args_.work_op && KeyIs(key, "Input type")) {
          if (auto e = ReadStrings(val, &args_.input_types)) return e;
        }
        break;
      case 'O':
        if (KeyIs(key, "Out msg nelems")) read_int(&args_.out_nelems);
        break;
      case 'G':
        if (KeyIs(key, "Group size")) read_int(&args_.group_size);
        break;
      case 'P':
        if (KeyIs(key, "Process Group Name")) {
          std::string_view tok = TrimRight(val.raw_json_token());
          if (!StringTokenContent(tok, &args_.pg_name)) args_.pg_name = tok;  // a bare number
        } else if (KeyIs(key, "Process Group Ranks")) {
          std::string_view tok = val.raw_json_token();
          if (tok.substr(0, 1) == "[") {  // written as a JSON array: keep its text
            od::array arr;
            if (auto e = val.get_array().get(arr)) return e;
            if (auto e = arr.raw_json().get(args_.pg_ranks)) return e;
            args_.pg_ranks = TrimRight(args_.pg_ranks);
          } else {
            read_str(&args_.pg_ranks);
          }
        }
        break;
      case 'S':
        if (KeyIs(key, "Seq"))
          read_int(&args_.seq);
        else if (KeyIs(key, "Src Rank"))
          read_int(&args_.src_rank);
        break;
      case 'D':
        if (KeyIs(key, "Dst Rank")) read_int(&args_.dst_rank);
        break;
      case 'n':
        if (KeyIs(key, "name")) read_str(&args_.name);  // metadata events
        break;
      default:
        break;
    }
    if (op_row && args_.external_id != kAbsent && !args_.work_op) break;
    if (api_row && args_.external_id != kAbsent && args_.correlation != kAbsent &&
        args_.cbid != kAbsent) {
      break;
    }
  }
  return simdjson::SUCCESS;
}

// ---------------------------------------------------------------------------------------
// Storing one event.

void TraceBuilder::Dispatch() {
  switch (ev_.ph) {
    case 'X':
      AddComplete();
      return;
    case 'M':
      if (ev_.has_name && ev_.name == "thread_name") AddThreadName();
      return;  // metadata: process_name, process_labels, sort indices: not needed
    case 's':
    case 'f':
    case 't':
      if (ev_.cat == Cat::kLaunchFlow) {
        AddFlow();
      } else {
        Count(Diag::kUnknownCategory);  // fwdbwd, critical_path, ...
      }
      return;
    case 0:
      Count(Diag::kJsonEventSkipped);
      return;
    default:  // instant, counter, async and other phases EMO does not use
      Count(ev_.cat == Cat::kPythonFunction ? Diag::kPythonFunctionIgnored
                                            : Diag::kUnknownCategory);
      return;
  }
}

void TraceBuilder::AddComplete() {
  switch (ev_.cat) {
    case Cat::kPythonFunction:
      Count(Diag::kPythonFunctionIgnored);
      return;
    case Cat::kNone:
    case Cat::kOther:
    case Cat::kLaunchFlow:
      Count(Diag::kUnknownCategory);
      return;
    default:
      break;
  }
  const bool gpu_op = ev_.cat == Cat::kKernel || ev_.cat == Cat::kMemcpy || ev_.cat == Cat::kMemset;
  if (!ev_.has_name || ev_.ts.empty() || ev_.dur.empty()) {
    Count(Diag::kEventMissingField);
    if (gpu_op) DropGpuOp(!ev_.has_name ? "no name" : ev_.ts.empty() ? "no ts" : "no dur");
    return;
  }
  int64_t ts = 0, dur = 0;
  if (!ParseMicrosAsNs(ev_.ts, &ts) || !ParseMicrosAsNs(ev_.dur, &dur)) {
    Count(Diag::kBadTimestamp);
    if (gpu_op) DropGpuOp(fmt::format("ts {} dur {}", ev_.ts, ev_.dur));
    return;
  }
  if (dur < 0) {
    Count(Diag::kNegativeDuration);
    dur = 0;
  }
  const TimeNs end = SaturatingAdd(ts, dur);
  switch (ev_.cat) {
    case Cat::kCpuOp:
      AddCpu(CpuKind::kOp, ts, end);
      break;
    case Cat::kUserAnnotation:
      AddCpu(CpuKind::kAnnotation, ts, end);
      break;
    case Cat::kRuntime:
      AddCpu(CpuKind::kRuntime, ts, end);
      break;
    case Cat::kDriver:
      AddCpu(CpuKind::kDriver, ts, end);
      break;
    case Cat::kKernel:
      AddGpuOp(GpuKind::kKernel, ts, end);
      break;
    case Cat::kMemcpy:
      AddGpuOp(GpuKind::kMemcpy, ts, end);
      break;
    case Cat::kMemset:
      AddGpuOp(GpuKind::kMemset, ts, end);
      break;
    case Cat::kGpuUserAnnotation:
      AddGpuAnnotation(ts, end);
      break;
    case Cat::kCudaSync:
      AddSync(ts, end);
      break;
    case Cat::kCudaEvent:
      AddCudaEvent(ts, end);
      break;
    default:
      break;
  }
}

void TraceBuilder::DropGpuOp(std::string_view why) {
  Count(Diag::kGpuOpDropped);
  auto& first = trace_.meta.first_dropped_gpu_op;
  if (first.empty()) {
    std::string name = ev_.has_name ? Unescaped(ev_.name) : std::string("(no name)");
    if (name.size() > 80) name = name.substr(0, 77) + "...";
    first = fmt::format("traceEvents[{}] '{}': {}", trace_.meta.raw_events - 1, name, why);
  }
}

void TraceBuilder::AddCpu(CpuKind kind, TimeNs start, TimeNs end) {
  if (ev_.pid != last_pid_ || ev_.tid != last_tid_ || !last_thread_.valid()) {
    int64_t pid = 0, tid = 0;
    if (!ResolveProcessOrThread(ev_.pid, &pid) || !ResolveProcessOrThread(ev_.tid, &tid)) {
      Count(Diag::kEventMissingField);
      return;
    }
    last_thread_ = trace_.InternThread(pid, tid);
    last_pid_ = ev_.pid;
    last_tid_ = ev_.tid;
  }
  CpuEventTable& t = trace_.cpu;
  t.thread.push_back(last_thread_);
  t.kind.push_back(kind);
  t.name.push_back(InternEscaped(ev_.name));
  t.start.push_back(start);
  t.end.push_back(end);
  t.correlation.push_back(OrMinusOne(args_.correlation));
  t.external_id.push_back(OrMinusOne(args_.external_id));
  const bool api = kind == CpuKind::kRuntime || kind == CpuKind::kDriver;
  t.cbid.push_back(api && args_.cbid != kAbsent ? ClampToInt32(args_.cbid) : -1);
  if (kind == CpuKind::kRuntime && ev_.name.starts_with("hip")) trace_.meta.rocm = true;
  if (args_.work_op && args_.external_id != kAbsent && !args_.input_dims.empty()) {
    const OpWork w = OperatorWork(ev_.name, args_.input_dims, args_.concrete_inputs, args_.input_types);
    if (w.flops > 0) trace_.op_work[args_.external_id] = w;
  }
  max_start_ = std::max(max_start_, start);
}

void TraceBuilder::AddGpuOp(GpuKind kind, TimeNs start, TimeNs end) {
  // P2P copies (CUPTI MEMCPY2) name their executing device inDevice, not device.
  const int64_t device = args_.device != kAbsent ? args_.device : args_.in_device;
  if (device == kAbsent || args_.stream == kAbsent || device < 0 ||
      device > std::numeric_limits<int32_t>::max()) {
    Count(Diag::kGpuOpMissingStream);
    return;
  }
  if (device != last_device_ || args_.stream != last_stream_) {
    last_stream_id_ = trace_.InternStream(static_cast<int32_t>(device), args_.stream);
    last_device_ = device;
    last_stream_ = args_.stream;
  }
  if (args_.correlation == kAbsent) Count(Diag::kGpuOpMissingCorrelation);
  GpuOpTable& t = trace_.gpu;
  t.kind.push_back(kind);
  t.name.push_back(InternEscaped(ev_.name));
  t.stream.push_back(last_stream_id_);
  t.start.push_back(start);
  t.end.push_back(end);
  t.correlation.push_back(OrMinusOne(args_.correlation));
  t.external_id.push_back(OrMinusOne(args_.external_id));
  LaunchConfig launch;
  if (kind == GpuKind::kKernel) {
    std::copy(args_.grid.begin(), args_.grid.end(), launch.grid);
    std::copy(args_.block.begin(), args_.block.end(), launch.block);
    if (args_.registers != kAbsent) launch.registers_per_thread = ClampToInt32(args_.registers);
    if (args_.shared_memory != kAbsent) launch.shared_memory = ClampToInt32(args_.shared_memory);
  }
  t.launch.push_back(launch);
  t.bytes.push_back(kind != GpuKind::kKernel && args_.bytes != kAbsent ? args_.bytes : 0);
  // CUPTI's graphId is 0 for work not launched from a CUDA graph.
  t.graph_id.push_back(args_.graph_id > 0 ? args_.graph_id : -1);
  CollectiveId collective;
  if (kind == GpuKind::kKernel && args_.has_collective) {
    collective = CollectiveId(static_cast<uint32_t>(trace_.collectives.size()));
    CollectiveInfo c;
    c.name = Unescaped(args_.collective_name);
    c.process_group = Unescaped(args_.pg_name);
    c.pg_ranks = Unescaped(args_.pg_ranks);
    c.group_size = OrMinusOne(args_.group_size);
    c.seq = OrMinusOne(args_.seq);
    c.in_nelems = OrMinusOne(args_.in_nelems);
    c.out_nelems = OrMinusOne(args_.out_nelems);
    c.dtype = Unescaped(args_.dtype);
    c.src_rank = OrMinusOne(args_.src_rank);
    c.dst_rank = OrMinusOne(args_.dst_rank);
    trace_.collectives.push_back(std::move(c));
    Count(Diag::kCollectiveKernels);
  }
  t.collective.push_back(collective);
  max_start_ = std::max(max_start_, start);
}

void TraceBuilder::AddGpuAnnotation(TimeNs start, TimeNs end) {
  // gpu_user_annotation args carry only "External id": this is the one GPU-side row whose
  // track must come from pid (device) / tid (stream).
  int64_t device = args_.device, stream = args_.stream;
  if ((device == kAbsent && !ParseIntToken(ev_.pid, &device)) ||
      (stream == kAbsent && !ParseIntToken(ev_.tid, &stream)) || device < 0 ||
      device > std::numeric_limits<int32_t>::max()) {
    Count(Diag::kGpuOpMissingStream);
    return;
  }
  GpuAnnotation a;
  a.name = InternEscaped(ev_.name);
  a.stream = trace_.InternStream(static_cast<int32_t>(device), stream);
  a.start = start;
  a.end = end;
  trace_.gpu_annotations.push_back(a);
  max_start_ = std::max(max_start_, start);
}

void TraceBuilder::AddSync(TimeNs start, TimeNs end) {
  if (args_.device == kAbsent || args_.device < 0 ||
      args_.device > std::numeric_limits<int32_t>::max()) {
    Count(Diag::kGpuOpMissingStream);
    return;
  }
  SyncKind kind = SyncKindOf(ev_.name);
  if (kind == SyncKind::kUnknown) kind = SyncKindOf(args_.sync_kind);
  SyncTable& t = trace_.syncs;
  t.kind.push_back(kind);
  t.device.push_back(static_cast<int32_t>(args_.device));
  t.stream.push_back(OrMinusOne(args_.stream));
  t.start.push_back(start);
  t.end.push_back(end);
  t.correlation.push_back(OrMinusOne(args_.correlation));
  t.wait_on_stream.push_back(OrMinusOne(args_.wait_on_stream));
  t.wait_on_record_corr.push_back(OrMinusOne(args_.wait_record_corr));
  t.event_id.push_back(OrMinusOne(args_.wait_event_id));
  const bool is_wait = kind == SyncKind::kStreamWaitEvent || kind == SyncKind::kEventSync;
  if (is_wait && OrMinusOne(args_.wait_on_stream) == -1) Count(Diag::kSyncUnresolved);
  trace_.meta.has_cuda_sync = true;
  max_start_ = std::max(max_start_, start);
}

void TraceBuilder::AddCudaEvent(TimeNs start, TimeNs end) {
  if (args_.event_id == kAbsent || args_.correlation == kAbsent || args_.device == kAbsent ||
      args_.device < 0 || args_.device > std::numeric_limits<int32_t>::max()) {
    Count(Diag::kCudaEventIgnored);
    return;
  }
  CudaEventTable& t = trace_.cuda_events;
  t.event_id.push_back(args_.event_id);
  t.device.push_back(static_cast<int32_t>(args_.device));
  t.stream.push_back(OrMinusOne(args_.stream));
  t.correlation.push_back(args_.correlation);
  t.start.push_back(start);
  t.end.push_back(end);
}

void TraceBuilder::AddFlow() {
  int64_t id = 0;
  if (!ParseIntToken(ev_.id, &id)) {
    Count(Diag::kFlowMismatch);
    return;
  }
  flows_.push_back({id, ev_.ph});
}

void TraceBuilder::AddThreadName() {
  int64_t pid = 0, tid = 0;
  std::string_view name = args_.name;
  if (name.empty() || !ResolveProcessOrThread(ev_.pid, &pid) ||
      !ResolveProcessOrThread(ev_.tid, &tid)) {
    return;
  }
  // A thread can be named twice ("thread 448 (pt_autograd_0)", later "(python3)"): the
  // first name is the one the thread had when the profiler first saw it; keep it.
  thread_names_.try_emplace({pid, tid}, Unescaped(name));
}

// pid/tid are ints, numeric strings, or labels ("Spans", "stream 7"); a label maps to a
// stable negative id (below Kineto's own -1) so it never collides with an OS id.
bool TraceBuilder::ResolveProcessOrThread(std::string_view token, int64_t* id) {
  if (token.empty()) return false;
  if (ParseIntToken(token, id)) return true;
  std::string_view label;
  if (!StringTokenContent(token, &label)) return false;
  auto it = string_ids_.find(label);
  if (it == string_ids_.end()) {
    const int64_t next = -2 - static_cast<int64_t>(string_ids_.size());
    it = string_ids_.emplace(std::string(label), next).first;
  }
  *id = it->second;
  return true;
}

StringId TraceBuilder::InternEscaped(std::string_view content) {
  if (!HasEscapes(content)) return InternCached(content);
  UnescapeJson(content, &scratch_);
  return InternCached(scratch_);
}

// A direct-mapped cache in front of StringPool::Intern. Kernel names run to hundreds of
// bytes and StringPool hashes all of them; this hashes 24 bytes and the length, and checks
// a hit with one memcmp. A collision only costs a miss.
StringId TraceBuilder::InternCached(std::string_view s) {
  const size_t n = s.size();
  uint64_t h = n * 0x9E3779B97F4A7C15ull;
  if (n >= 8) {
    uint64_t first = 0, middle = 0, last = 0;
    std::memcpy(&first, s.data(), 8);
    std::memcpy(&middle, s.data() + n / 2 - 4, 8);
    std::memcpy(&last, s.data() + n - 8, 8);
    h ^= first * 0xC2B2AE3D27D4EB4Full ^ middle * 0x27D4EB2F165667C5ull ^
         last * 0x165667B19E3779F9ull;
  } else {
    uint64_t all = 0;
    if (n > 0) std::memcpy(&all, s.data(), n);
    h ^= all * 0xC2B2AE3D27D4EB4Full;
  }
  h ^= h >> 31;
  InternSlot& slot = intern_cache_[h & (intern_cache_.size() - 1)];
  if (slot.hash == h && slot.id.valid() && slot.text == s) return slot.id;
  const StringId id = trace_.strings.Intern(s);
  if (trace_.strings.size() > intern_cache_.size() && intern_cache_.size() < kInternCacheMax) {
    intern_cache_.assign(std::min(intern_cache_.size() * 8, kInternCacheMax), InternSlot{});
  }
  intern_cache_[h & (intern_cache_.size() - 1)] = {h, trace_.strings.Get(id), id};
  return id;
}

std::string TraceBuilder::Unescaped(std::string_view content) {
  if (!HasEscapes(content)) return std::string(content);
  std::string out;
  UnescapeJson(content, &out);
  return out;
}

}  // namespace emo::trace::kineto
