// A Kineto JSON trace file read piecewise (private to src/trace; used by the registry for large
// files).
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "emo/base/file.h"
#include "emo/trace/trace.h"

namespace emo::trace {

// Reads the Kineto trace at `path` (.json or .json.gz) without ever holding its whole text or
// simdjson's index of it: the file is decompressed as it is read, and the traceEvents array is
// parsed `batch_bytes` of elements at a time, each batch as a document of its own, through the
// same TraceBuilder as KinetoJsonReader::Read; the keys before and after the array are parsed as
// documents too, in file order. Memory: the Trace's tables plus about 7 x `batch_bytes`.
// The result equals KinetoJsonReader::Read's on the same file. Where this cannot vouch for that
// (an I/O, gzip or JSON error anywhere; a top-level layout it does not follow, such as a
// traceEvents key written with escapes or metadata over 64 MiB), it returns nullopt and the
// caller reads the file whole, which also words any error.
// The file is read and decompressed `read_bytes` at a time.
std::optional<Trace> ReadKinetoJsonPiecewise(const std::string& path, size_t batch_bytes,
                                             size_t read_bytes = FileChunks::kDefaultPieceBytes);

}  // namespace emo::trace
