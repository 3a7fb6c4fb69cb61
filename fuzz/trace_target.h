// One trace reader fuzzed through the path `emo` reads traces by (ReadTraceData, after gzip).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "emo/trace/reader.h"
#include "fuzz_util.h"

namespace emo::fuzz {

// Whether `text` goes to the registered reader named `reader`: the first reader that sniffs it.
inline bool SniffedBy(std::string_view reader, const std::string& text) {
  const std::string_view head(text.data(), std::min<size_t>(text.size(), 64 * 1024));
  for (const auto& r : trace::Readers()) {
    if (r->Sniff(head)) return r->Name() == reader;
  }
  return false;
}

// Reads one input with the registered reader named `reader`; -1 (libFuzzer: keep it out of the
// corpus) for an input that reader would not be asked about, because another reader or none
// sniffs it.
inline int FuzzTraceReader(std::string_view reader, const uint8_t* data, size_t size) {
  const std::string name = "fuzz-input";
  auto text = Input(data, size, name);
  if (!text || !SniffedBy(reader, *text)) return -1;
  Result<trace::Trace> t = trace::ReadTraceData(name, std::move(*text));
  (void)t;
  return 0;
}

}  // namespace emo::fuzz
