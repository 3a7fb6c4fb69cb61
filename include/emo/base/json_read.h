// Reading JSON files that people write (device files, calibrations, measured energies) without
// exceptions: every access checks the value's type and fails with a Status that names the file
// and the field, e.g. "devices/x.json: clocks_mhz.values[3]: expected a number, got string".
// nlohmann's own accessors (get<T>, at, value) throw on a type mismatch; library code reading
// a file goes through JsonField instead, so no exception crosses the library API.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

#include "emo/base/status.h"

namespace emo {

// The JSON type of `v` as a word for messages: "object", "array", "string", "number",
// "boolean", "null" (or "discarded" for a failed parse).
std::string_view JsonTypeName(const nlohmann::json& v);

// Parses `text` without exceptions; a ParseError naming `file` when it is not valid JSON.
Result<nlohmann::json> ParseJsonText(std::string_view text, const std::string& file);

// One value inside a JSON document, with the file it came from and its field path ("" for the
// document itself, "classes.compute.comp_share", "clocks_mhz.values[3]"). It refers to the
// document, which must outlive it. Copying is cheap enough for a file read once.
class JsonField {
 public:
  // The whole document of `file`.
  JsonField(const nlohmann::json& document, std::string file);
  // A value known to sit at field path `path` of `file` (for readers that walked there).
  JsonField(const nlohmann::json& value, std::string file, std::string path)
      : value_(&value), file_(std::move(file)), path_(std::move(path)) {}

  const nlohmann::json& json() const { return *value_; }
  const std::string& file() const { return file_; }
  const std::string& path() const { return path_; }

  bool IsObject() const { return value_->is_object(); }
  bool IsArray() const { return value_->is_array(); }
  // True when this is an object with the member `key` (of any type).
  bool Has(std::string_view key) const;

  // The member `key`. Errors: this is not an object; the member is missing.
  Result<JsonField> Get(std::string_view key) const;
  // Element `i`. Errors: this is not an array; i is past its end.
  Result<JsonField> At(size_t i) const;
  // The number of elements of an array or members of an object; an error for anything else.
  Result<size_t> Size() const;

  // This value as a finite number ("1e999" and NaN-like strings are errors).
  Result<double> Number() const;
  Result<std::string> String() const;
  Result<bool> Bool() const;
  Status ExpectObject() const;
  Status ExpectArray() const;

  // A ParseError "<file>: <path>: <what>" (without the path for the document itself).
  Status Error(std::string_view what) const;
  // "<path>" or, for the document itself, "(document)": for messages of callers.
  std::string Where() const;

 private:
  Status TypeError(std::string_view expected) const;

  const nlohmann::json* value_;
  std::string file_;
  std::string path_;
};

}  // namespace emo
