// The reader of EMO's own trace format (emo/trace/emo_format.h), written by `emo trace` (private
// to src/trace; users go through the registry in emo/trace/reader.h).
#pragma once

#include <string>
#include <string_view>

#include "emo/trace/reader.h"

namespace emo::trace {

// Reads an EMO trace into the normalized Trace:
//  - API records become runtime/driver CPU events (the `_vNNNN` suffix of CUPTI's callback names
//    dropped), kernels/memcpys/memsets GPU ops, NVTX ranges annotations;
//  - a stream wait or event sync names its cudaEventRecord exactly (cudaEventSyncId), so no
//    wait needs a fallback rule;
//  - the traced iterations become `ProfilerStep#N` annotations on the launching thread (unless
//    the program's own NVTX ranges already carry that name), so `--iteration` works as on Kineto
//    traces;
//  - what the tracer measured beside the trace (untraced step time, energy) goes to meta.run.
// A file cut short (killed program, full disk) is read up to its last whole chunk, with a
// trace_truncated diagnostic and meta.run->end_note saying where it ends. Read fails only when
// the header is not EMO's or the version is newer than this reader.
class EmoTraceReader final : public Reader {
 public:
  std::string_view Name() const override { return "emo"; }
  bool Sniff(std::string_view head) const override;
  Result<Trace> Read(const std::string& path, std::string data) const override;
};

}  // namespace emo::trace
