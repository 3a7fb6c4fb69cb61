#include "kineto_json_stream.h"

#include <simdjson.h>

#include <algorithm>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "emo/base/file.h"
#include "kineto_json_builder.h"

namespace emo::trace {
namespace {

namespace od = simdjson::ondemand;

// The top-level text around traceEvents is metadata (a few KiB); more than this is a layout the
// piecewise reader leaves to the whole-document one.
constexpr size_t kMaxOutsideBytes = size_t{64} << 20;
constexpr std::string_view kBatchHead = "{\"traceEvents\":[";

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// Splits the decompressed text, as it arrives, into the top-level text before the traceEvents
// array (`prefix`), batches of its elements, and the text after it (`suffix`), parsing each piece
// as soon as it is whole. Only strings and bracket depth are tracked: JSON validity is left to
// simdjson, piece by piece. The pieces join into the original text except for the "]}" and
// "{\"traceEvents\":[" written around each batch, so every piece valid means the whole document
// is valid (the grammar composes), as long as no batch cut at a comma is empty (`a,,b`), which
// is checked.
class Splitter {
 public:
  Splitter(const std::string& path, size_t batch_bytes) : builder_(path), batch_bytes_(batch_bytes) {
    batch_.assign(kBatchHead);
  }

  // Consumes one piece of the text; false when the file cannot be read piecewise.
  bool Feed(std::string_view d) {
    size_t seg = 0;  // start of the bytes not yet appended to the current piece
    size_t i = 0;
    if (escape_pending_) {  // a backslash ended the previous piece: this byte is escaped
      escape_pending_ = false;
      if (capture_ && !d.empty()) key_.push_back(d[0]);
      i = 1;
    }
    const size_t n = d.size();
    for (; i < n; ++i) {
      if (in_string_) {
        size_t j = i;
        while (j < n && d[j] != '"' && d[j] != '\\') ++j;
        if (capture_) key_.append(d.substr(i, j - i));
        i = j;
        if (i == n) break;
        if (d[i] == '\\') {
          if (capture_) key_.push_back('\\');
          if (i + 1 == n) {
            escape_pending_ = true;
          } else {
            ++i;
            if (capture_) key_.push_back(d[i]);
          }
          continue;
        }
        in_string_ = false;
        capture_ = false;
        continue;
      }
      const char c = d[i];
      if (expect_events_ && !IsSpace(c)) {
        // The value of the top-level "traceEvents": an array is read piecewise, anything else
        // is left to the whole-document reader.
        if (c != '[') return false;
        expect_events_ = false;
        prefix_.append(d.substr(seg, i - seg));
        seg = i + 1;
        phase_ = Phase::kEvents;
        depth_ = 2;
        continue;
      }
      switch (c) {
        case '"':
          in_string_ = true;
          capture_ = phase_ == Phase::kPrefix && depth_ == 1;
          if (capture_) key_.clear();
          break;
        case '{':
        case '[':
          if (phase_ == Phase::kPrefix && depth_ == 0 && c == '[') return false;
          ++depth_;
          break;
        case '}':
        case ']':
          --depth_;
          if (phase_ == Phase::kEvents && depth_ == 1) {
            if (c != ']') return false;  // the array closed by a '}': invalid, the whole reader says where
            batch_.append(d.substr(seg, i - seg));
            seg = i + 1;
            if (!FlushBatch()) return false;
            phase_ = Phase::kSuffix;
          } else if (phase_ == Phase::kPrefix && depth_ <= 0) {
            return false;  // the top-level object closed without a traceEvents array
          }
          break;
        case ',':
          if (phase_ == Phase::kEvents && depth_ == 2 && batch_.size() + (i - seg) >= batch_bytes_) {
            batch_.append(d.substr(seg, i - seg));
            seg = i + 1;
            if (!FlushBatch()) return false;
            cut_at_comma_ = true;
          }
          break;
        case ':':
          if (phase_ == Phase::kPrefix && depth_ == 1 && key_ == "traceEvents") {
            if (seen_events_) return false;
            seen_events_ = true;
            expect_events_ = true;
          }
          break;
        default:
          break;
      }
    }
    Current().append(d.substr(seg));
    return prefix_.size() <= kMaxOutsideBytes && suffix_.size() <= kMaxOutsideBytes;
  }

  // After the last piece: the text after the array, then the Trace.
  std::optional<Trace> Finish() {
    if (phase_ != Phase::kSuffix || in_string_) return std::nullopt;
    std::string tail = "{\"traceEvents\":[]";
    tail += suffix_;
    if (!ParseRootOf(tail)) return std::nullopt;
    return builder_.Finish();
  }

  // The text before the array, with an empty array and '}' after it: its keys come first.
  bool ParsePrefix() {
    std::string head = std::move(prefix_);
    head += "[]}";
    return ParseRootOf(head);
  }

 private:
  enum class Phase { kPrefix, kEvents, kSuffix };

  std::string& Current() {
    switch (phase_) {
      case Phase::kPrefix: return prefix_;
      case Phase::kEvents: return batch_;
      case Phase::kSuffix: return suffix_;
    }
    return suffix_;
  }

  bool FlushBatch() {
    if (!prefix_parsed_) {
      if (!ParsePrefix()) return false;
      prefix_parsed_ = true;
    }
    if (cut_at_comma_) {  // a batch after a comma must hold an element
      size_t k = kBatchHead.size();
      while (k < batch_.size() && IsSpace(batch_[k])) ++k;
      if (k == batch_.size()) return false;
    }
    batch_ += "]}";
    const bool ok = ParseRootOf(batch_);
    builder_.ForgetTokens();  // the cached tokens point into batch_, overwritten next
    batch_.assign(kBatchHead);
    return ok;
  }

  // Parses `text` (padded in place) as a top-level object through the builder; false on any
  // JSON error or content after the object.
  bool ParseRootOf(std::string& text) {
    const size_t size = text.size();
    text.append(simdjson::SIMDJSON_PADDING, ' ');
    simdjson::padded_string_view json(text.data(), size, text.size());
    od::document doc;
    if (parser_.iterate(json).get(doc)) return false;
    od::object root;
    if (doc.get_object().get(root)) return false;
    bool saw_events = false;
    if (builder_.ParseRoot(root, &saw_events)) return false;
    const char* rest = nullptr;
    if (doc.current_location().get(rest) == simdjson::SUCCESS) return false;
    text.resize(size);
    return true;
  }

  kineto::TraceBuilder builder_;
  od::parser parser_;
  size_t batch_bytes_;
  Phase phase_ = Phase::kPrefix;
  int64_t depth_ = 0;
  bool in_string_ = false;
  bool escape_pending_ = false;
  bool capture_ = false;  // copying a top-level string (a key, maybe) into key_
  bool expect_events_ = false;
  bool seen_events_ = false;
  bool prefix_parsed_ = false;
  bool cut_at_comma_ = false;
  std::string key_;
  std::string prefix_, batch_, suffix_;
};

}  // namespace

std::optional<Trace> ReadKinetoJsonPiecewise(const std::string& path, size_t batch_bytes, size_t read_bytes) {
  read_bytes = std::max<size_t>(read_bytes, 1);
  auto file = FileChunks::Open(path, read_bytes);
  if (!file.ok()) return std::nullopt;
  auto splitter = std::make_unique<Splitter>(path, batch_bytes);
  std::string piece;
  bool first = true;
  while (true) {
    piece.clear();
    auto got = (*file)->Read(&piece, read_bytes);
    if (!got.ok()) return std::nullopt;
    if (*got == 0) break;
    if (first && piece.starts_with("\xEF\xBB\xBF")) piece.replace(0, 3, "   ");  // a BOM is not JSON
    first = false;
    if (!splitter->Feed(piece)) return std::nullopt;
  }
  return splitter->Finish();
}

}  // namespace emo::trace
