// Trace readers behind one registry that sniffs the first bytes (STYLE §3).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "emo/base/status.h"
#include "emo/trace/trace.h"

namespace emo::trace {

// One trace format. Sniff() looks at the first (decompressed) bytes; Read() parses a whole file.
class Reader {
 public:
  virtual ~Reader() = default;
  virtual std::string_view Name() const = 0;
  virtual bool Sniff(std::string_view head) const = 0;
  // `data` is the whole (decompressed) file; `path` names it in errors and in meta.
  virtual Result<Trace> Read(const std::string& path, std::string data) const = 0;
};

// The readers EMO knows, in sniffing order.
const std::vector<std::unique_ptr<Reader>>& Readers();

// Reads `path` (.json, .json.gz, ...) with the first reader whose Sniff accepts it. A file that
// no reader accepts is a clear ParseError naming the file.
Result<Trace> ReadTrace(const std::string& path);
// The same for a trace already in memory (gzip or not); `name` stands for its path.
Result<Trace> ReadTraceData(const std::string& name, std::string data);

// A trace to read: a file, or a member of a tar archive (held in memory).
struct TraceSource {
  std::string name;  // the path, or "ARCHIVE:MEMBER"
  std::string data;  // the member's bytes; empty for a file
  bool in_memory = false;
};
// The traces behind command-line inputs of a job: a file is itself; a directory, its files whose
// names end in .json, .json.gz or .emotrace (sorted by name); a tar archive (.tar, .tar.gz,
// .tgz), its regular members with those names. An archive or a directory holding none of them
// is an error naming it.
Result<std::vector<TraceSource>> ExpandTraceInputs(const std::vector<std::string>& inputs);
Result<Trace> ReadTrace(TraceSource source);

}  // namespace emo::trace
