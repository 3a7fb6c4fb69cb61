#include "kineto_json_reader.h"

#include <fmt/format.h>
#include <simdjson.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "kineto_json_builder.h"
#include "kineto_json_token.h"

namespace emo::trace {
namespace kineto {

// ---------------------------------------------------------------------------------------
// Top level.

simdjson::error_code TraceBuilder::ParseRoot(od::object& root, bool* saw_events) {
  for (auto f : root) {
    od::field field;
    if (auto e = std::move(f).get(field)) return e;
    od::raw_json_string key = field.key();
    od::value& v = field.value();
    int64_t x = 0;
    if (KeyIs(key.raw(), "traceEvents")) {
      std::string_view tok = v.raw_json_token();
      if (tok.empty() || tok[0] != '[') continue;  // reported as "no traceEvents array"
      *saw_events = true;
      if (auto e = ParseTraceEvents(v)) return e;
    } else if (KeyIs(key.raw(), "baseTimeNanoseconds")) {
      if (ParseIntToken(v.raw_json_token(), &x)) base_time_ns_ = x;
    } else if (KeyIs(key.raw(), "deviceProperties")) {
      if (auto e = ParseDeviceProperties(v)) return e;
    } else if (KeyIs(key.raw(), "distributedInfo")) {
      if (auto e = ParseDistributedInfo(v)) return e;
    } else if (KeyIs(key.raw(), "cuda_runtime_version")) {
      if (ParseIntToken(v.raw_json_token(), &x)) trace_.meta.cuda_runtime_version = x;
    } else if (KeyIs(key.raw(), "cuda_driver_version")) {
      if (ParseIntToken(v.raw_json_token(), &x)) trace_.meta.cuda_driver_version = x;
    } else if (KeyIs(key.raw(), "cupti_version")) {
      if (ParseIntToken(v.raw_json_token(), &x)) trace_.meta.cupti_version = x;
    } else if (KeyIs(key.raw(), "record_shapes")) {
      std::string_view tok = v.raw_json_token();
      trace_.meta.record_shapes = tok.starts_with("true") || (ParseIntToken(tok, &x) && x != 0);
    } else if (KeyIs(key.raw(), "with_stack")) {
      std::string_view tok = v.raw_json_token();
      trace_.meta.with_stack = tok.starts_with("true") || (ParseIntToken(tok, &x) && x != 0);
    } else if (KeyIs(key.raw(), "roctracer_version") || KeyIs(key.raw(), "hip_runtime_version")) {
      trace_.meta.rocm = true;
    }
  }
  return simdjson::SUCCESS;
}

simdjson::error_code TraceBuilder::ParseDeviceProperties(od::value& v) {
  return ForEachArrayItem(v, [this](od::value& item) {
    if (item.raw_json_token().substr(0, 1) != "{") return simdjson::SUCCESS;
    od::object obj;
    if (auto e = item.get_object().get(obj)) return e;
    int64_t id = kAbsent;
    std::string_view name;
    bool has_name = false;
    for (auto f : obj) {
      od::field field;
      if (auto e = std::move(f).get(field)) return e;
      if (KeyIs(field.key().raw(), "id")) {
        if (!ParseIntToken(field.value().raw_json_token(), &id)) id = kAbsent;
      } else if (KeyIs(field.key().raw(), "name")) {
        has_name = StringTokenContent(field.value().raw_json_token(), &name);
      }
    }
    // Ids index a small table; a wild id (fuzzed input) is ignored rather than allocated.
    if (id < 0 || id >= 4096 || !has_name) return simdjson::SUCCESS;
    auto& names = trace_.meta.device_names;
    if (names.size() <= static_cast<size_t>(id)) names.resize(static_cast<size_t>(id) + 1);
    names[static_cast<size_t>(id)] = Unescaped(name);
    return simdjson::SUCCESS;
  });
}

simdjson::error_code TraceBuilder::ParseDistributedInfo(od::value& v) {
  if (v.raw_json_token().substr(0, 1) != "{") return simdjson::SUCCESS;
  od::object obj;
  if (auto e = v.get_object().get(obj)) return e;
  for (auto f : obj) {
    od::field field;
    if (auto e = std::move(f).get(field)) return e;
    od::raw_json_string key = field.key();
    std::string_view tok = field.value().raw_json_token();
    int64_t x = 0;
    std::string_view s;
    if (KeyIs(key.raw(), "rank")) {
      if (ParseIntToken(tok, &x)) trace_.meta.rank = x;
    } else if (KeyIs(key.raw(), "world_size")) {
      if (ParseIntToken(tok, &x)) trace_.meta.world_size = x;
    } else if (KeyIs(key.raw(), "backend")) {
      if (StringTokenContent(tok, &s)) trace_.meta.backend = Unescaped(s);
    }
  }
  return simdjson::SUCCESS;
}

// ---------------------------------------------------------------------------------------
// After the last event.

// Relative timestamps (Kineto >= May 2024) are µs since baseTimeNanoseconds; absolute ones
// (older Kineto) are far above any base, so the base is added only when every start lies
// below it. The key may follow traceEvents, hence this runs at the end.
void TraceBuilder::ApplyBaseTime() {
  if (base_time_ns_ <= 0 || max_start_ >= base_time_ns_) return;
  const int64_t base = base_time_ns_;
  auto shift = [base](std::vector<TimeNs>& v) {
    for (TimeNs& t : v) t = SaturatingAdd(t, base);
  };
  shift(trace_.cpu.start);
  shift(trace_.cpu.end);
  shift(trace_.gpu.start);
  shift(trace_.gpu.end);
  shift(trace_.syncs.start);
  shift(trace_.syncs.end);
  for (GpuAnnotation& a : trace_.gpu_annotations) {
    a.start = SaturatingAdd(a.start, base);
    a.end = SaturatingAdd(a.end, base);
  }
  trace_.meta.base_time_ns = base;
}

void TraceBuilder::ApplyThreadNames() {
  for (ThreadInfo& t : trace_.threads) {
    auto it = thread_names_.find({t.pid, t.tid});
    if (it != thread_names_.end()) t.name = it->second;
  }
}

// ac2g flows are a redundant copy of the correlation join (research §1.4): a start ('s')
// sits on the launching runtime/driver call, an end ('f') on the GPU op or sync it
// launched, or, orphaned, on a runtime call that launched nothing. A flow whose id names
// neither is a mismatch; flows are not stored.
void TraceBuilder::CheckFlows() {
  if (flows_.empty()) return;
  std::vector<int64_t> api, gpu;
  for (size_t i = 0; i < trace_.cpu.size(); ++i) {
    const CpuKind k = trace_.cpu.kind[i];
    if (k == CpuKind::kRuntime || k == CpuKind::kDriver) api.push_back(trace_.cpu.correlation[i]);
  }
  gpu = trace_.gpu.correlation;
  gpu.insert(gpu.end(), trace_.syncs.correlation.begin(), trace_.syncs.correlation.end());
  std::sort(api.begin(), api.end());
  std::sort(gpu.begin(), gpu.end());
  auto has = [](const std::vector<int64_t>& v, int64_t id) {
    return std::binary_search(v.begin(), v.end(), id);
  };
  for (const Flow& f : flows_) {
    const bool ok = f.ph == 's' ? has(api, f.id) : (has(gpu, f.id) || has(api, f.id));
    if (!ok) Count(Diag::kFlowMismatch);
  }
}

Trace TraceBuilder::Finish() {
  trace_.meta.format = "kineto-json";
  ApplyBaseTime();
  ApplyThreadNames();
  CheckFlows();
  trace_.Finalize();
  return std::move(trace_);
}

}  // namespace kineto

namespace {

namespace od = simdjson::ondemand;

// " near byte N": where simdjson stopped, for error messages (or a note that it ran out).
std::string LocationOf(od::document& doc, const char* begin, size_t size) {
  const char* at = nullptr;
  if (doc.current_location().get(at) != simdjson::SUCCESS || at < begin || at > begin + size) {
    return " (at the end of the input: truncated?)";
  }
  return fmt::format(" near byte {}", at - begin);
}

constexpr size_t kKeepParserBytes = size_t{256} << 20;

bool IsJsonSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

}  // namespace

bool KinetoJsonReader::Sniff(std::string_view head) const {
  if (head.starts_with("\xEF\xBB\xBF")) head.remove_prefix(3);
  while (!head.empty() && IsJsonSpace(head.front())) head.remove_prefix(1);
  if (head.empty() || head.front() != '{') return false;
  for (std::string_view key : {"\"traceEvents\"", "\"schemaVersion\"", "\"deviceProperties\""}) {
    if (head.find(key) != std::string_view::npos) return true;
  }
  return false;
}

Result<Trace> KinetoJsonReader::Read(const std::string& path, std::string data) const {
  // simdjson reads up to SIMDJSON_PADDING bytes past the end. Gunzipped data usually has
  // that much spare capacity, so this rarely copies.
  const size_t size = data.size();
  if (data.starts_with("\xEF\xBB\xBF")) data.replace(0, 3, "   ");  // a BOM is not JSON
  data.resize(size + simdjson::SIMDJSON_PADDING, ' ');
  simdjson::padded_string_view json(data.data(), size, data.size());

  // One parser per thread, reused: its buffers (~5 bytes per input byte) are then paged in
  // once rather than on every read (a cold read of a 27 MB trace spends ~20 ms in page
  // faults). A parser grown past kKeepParserBytes is freed after the read (after `doc`,
  // declared later, is gone) so that one huge trace does not pin gigabytes.
  thread_local od::parser parser;
  struct FreeIfHuge {
    od::parser& p;
    ~FreeIfHuge() {
      if (p.capacity() > kKeepParserBytes) p = od::parser();
    }
  } free_if_huge{parser};

  od::document doc;
  if (auto e = parser.iterate(json).get(doc)) {
    return ParseError(fmt::format("{}: not valid JSON: {}", path, simdjson::error_message(e)));
  }
  od::object root;
  if (auto e = doc.get_object().get(root)) {
    if (e != simdjson::INCORRECT_TYPE) {
      return ParseError(fmt::format("{}: not valid JSON: {}", path, simdjson::error_message(e)));
    }
    return ParseError(fmt::format(
        "{}: does not hold a JSON object (a Kineto trace is an object with \"traceEvents\")",
        path));
  }
  kineto::TraceBuilder builder(path);
  bool saw_events = false;
  if (auto e = builder.ParseRoot(root, &saw_events)) {
    return ParseError(fmt::format("{}: invalid JSON{}: {}", path,
                                  LocationOf(doc, data.data(), size), simdjson::error_message(e)));
  }
  // current_location() is OUT_OF_BOUNDS exactly when every token was consumed.
  const char* rest = nullptr;
  if (doc.current_location().get(rest) == simdjson::SUCCESS) {
    return ParseError(
        fmt::format("{}: invalid JSON near byte {}: unexpected content after the "
                    "top-level object",
                    path, rest - data.data()));
  }
  if (!saw_events) {
    return ParseError(fmt::format(
        "{}: a JSON object without a \"traceEvents\" array: not a Kineto/PyTorch-profiler trace",
        path));
  }
  return builder.Finish();
}

}  // namespace emo::trace
