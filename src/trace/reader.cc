#include "emo/trace/reader.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <string>

#include "emo/base/file.h"
#include "emo_trace_reader.h"
#include "kineto_json_reader.h"
#include "kineto_json_stream.h"

namespace emo::trace {
namespace {

// How much of the (decompressed) file the readers see when sniffing. Kineto writes
// traceEvents within the first few KiB, but some tools put their own metadata object first
// (TraceLens traces: 26 KiB of it), so the window is generous; it costs a memmem.
constexpr size_t kSniffBytes = 64 * 1024;

// Files from this size on (as stored, gzip or not) are read piecewise when they are Kineto JSON:
// a 10 M-event trace is ~2.5 GB of text, which whole (plus simdjson's index, ~1 byte per byte)
// would be most of the memory an analysis needs. Smaller files are read whole, as before.
constexpr uintmax_t kPiecewiseFromBytes = uintmax_t{8} << 20;
constexpr size_t kPiecewiseBatchBytes = size_t{16} << 20;

// The first kSniffBytes of `path`, decompressed; empty when it cannot be read.
std::string HeadOf(const std::string& path) {
  std::string head;
  auto file = FileChunks::Open(path);
  if (!file.ok()) return head;
  while (head.size() < kSniffBytes) {
    auto got = (*file)->Read(&head, kSniffBytes - head.size());
    if (!got.ok() || *got == 0) break;
  }
  return head;
}

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// One phrase saying what `head` looks like, for the "no reader accepts it" error.
std::string Describe(std::string_view head) {
  if (head.size() >= 262 && head.substr(257, 5) == "ustar") {
    return "a tar archive (extract it and pass the trace files inside, one per rank)";
  }
  if (head.starts_with(std::string_view("SQLite format 3\0", 16))) {
    return "an SQLite database (an Nsight Systems export? no reader for it is registered yet)";
  }
  std::string_view s = head;
  if (s.starts_with("\xEF\xBB\xBF")) s.remove_prefix(3);
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  if (s.empty()) return "whitespace only";
  if (s.front() == '{') {
    return fmt::format(
        "a JSON object whose first {} KiB mention none of \"traceEvents\", \"schemaVersion\", "
        "\"deviceProperties\" (not a PyTorch-profiler/Kineto trace)",
        kSniffBytes / 1024);
  }
  if (s.front() == '[') {
    return "a JSON array (Kineto traces are an object with a \"traceEvents\" array; the bare "
           "Chrome-trace array form is not supported)";
  }
  const size_t n = std::min<size_t>(s.size(), 32);
  const bool printable = std::all_of(s.begin(), s.begin() + static_cast<ptrdiff_t>(n), [](char c) {
    return std::isprint(static_cast<unsigned char>(c)) || IsSpace(c);
  });
  if (printable) {
    std::string text(s.substr(0, n));
    std::replace_if(text.begin(), text.end(), IsSpace, ' ');
    return fmt::format("text starting with \"{}\"", text);
  }
  std::string bytes;
  for (size_t i = 0; i < std::min<size_t>(s.size(), 8); ++i) {
    bytes += fmt::format("{}{:02x}", i ? " " : "", static_cast<unsigned char>(s[i]));
  }
  return fmt::format("binary data (first bytes {})", bytes);
}

}  // namespace

const std::vector<std::unique_ptr<Reader>>& Readers() {
  static const std::vector<std::unique_ptr<Reader>>* const readers = [] {
    auto* v = new std::vector<std::unique_ptr<Reader>>();
    v->push_back(std::make_unique<EmoTraceReader>());
    v->push_back(std::make_unique<KinetoJsonReader>());
    return v;
  }();
  return *readers;
}

Result<Trace> ReadTrace(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::file_size(path, ec) >= kPiecewiseFromBytes && !ec) {
    const std::string head = HeadOf(path);
    for (const auto& reader : Readers()) {
      if (!reader->Sniff(head)) continue;
      if (reader->Name() == "kineto-json") {
        if (auto trace = ReadKinetoJsonPiecewise(path, kPiecewiseBatchBytes)) return std::move(*trace);
      }
      break;  // another format, or a file left to the whole reader (which words its errors)
    }
  }
  EMO_ASSIGN_OR_RETURN(std::string data, ReadFileMaybeGzip(path));
  return ReadTraceData(path, std::move(data));
}

Result<Trace> ReadTrace(TraceSource source) {
  if (!source.in_memory) return ReadTrace(source.name);
  EMO_ASSIGN_OR_RETURN(std::string data, MaybeGunzip(source.name, std::move(source.data)));
  return ReadTraceData(source.name, std::move(data));
}

Result<Trace> ReadTraceData(const std::string& path, std::string data) {
  if (data.empty()) return ParseError(fmt::format("{}: empty file (no bytes to read)", path));
  const std::string_view head(data.data(), std::min(data.size(), kSniffBytes));
  for (const auto& reader : Readers()) {
    if (reader->Sniff(head)) return reader->Read(path, std::move(data));
  }
  std::string names;
  for (const auto& reader : Readers()) {
    names += fmt::format("{}{}", names.empty() ? "" : ", ", reader->Name());
  }
  return ParseError(fmt::format("{}: not a trace EMO can read: it looks like {}; formats read: {}",
                                path, Describe(head), names));
}

}  // namespace emo::trace
