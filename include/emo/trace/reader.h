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

}  // namespace emo::trace
