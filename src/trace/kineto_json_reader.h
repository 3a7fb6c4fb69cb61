// The PyTorch-profiler (Kineto) Chrome-trace JSON reader (private to src/trace; users go
// through the registry in emo/trace/reader.h).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "emo/trace/reader.h"

namespace emo::trace {

// Reads a Kineto trace (`.json`, or `.json.gz` already gunzipped by the registry) into the
// normalized Trace, following research/trace-formats-and-replay.md §1:
//  - all three timestamp styles: integer µs; µs with 3 decimals (19 significant digits,
//    parsed as text, exact to the ns); µs relative to a top-level baseTimeNanoseconds, which
//    may come after traceEvents and is added at the end so every time is absolute ns;
//  - GPU ops are placed by args.device/args.stream, never by pid/tid;
//  - current categories and the 2021 ones (Operator, Runtime, Kernel, Memcpy, Memset);
//    cuda_event records (event id, recorded stream, record correlation) go to
//    trace.cuda_events; python_function and unused categories are counted in trace.diagnostics;
//  - a malformed event is counted in trace.diagnostics and skipped, never fatal.
// Read fails (ParseError naming the file) only when the data is not JSON (with the byte
// offset simdjson reports) or is a JSON value without a traceEvents array.
class KinetoJsonReader final : public Reader {
 public:
  std::string_view Name() const override { return "kineto-json"; }
  // After an optional BOM and whitespace, '{' and one of "traceEvents", "schemaVersion" or
  // "deviceProperties" (as quoted keys) somewhere in `head`.
  bool Sniff(std::string_view head) const override;
  Result<Trace> Read(const std::string& path, std::string data) const override;
};

}  // namespace emo::trace
