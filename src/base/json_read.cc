#include "emo/base/json_read.h"

#include <cmath>
#include <utility>

#include <fmt/format.h>

namespace emo {

using nlohmann::json;

std::string_view JsonTypeName(const json& v) {
  switch (v.type()) {
    case json::value_t::object: return "object";
    case json::value_t::array: return "array";
    case json::value_t::string: return "string";
    case json::value_t::boolean: return "boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
    case json::value_t::number_float: return "number";
    case json::value_t::null: return "null";
    case json::value_t::binary: return "binary";
    case json::value_t::discarded: return "discarded";
  }
  return "unknown";
}

Result<json> ParseJsonText(std::string_view text, const std::string& file) {
  json j = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return ParseError(fmt::format("{}: not valid JSON", file));
  return j;
}

JsonField::JsonField(const nlohmann::json& document, std::string file)
    : value_(&document), file_(std::move(file)) {}

bool JsonField::Has(std::string_view key) const {
  return value_->is_object() && value_->contains(std::string(key));
}

Result<JsonField> JsonField::Get(std::string_view key) const {
  if (!value_->is_object()) return TypeError("an object");
  auto it = value_->find(std::string(key));
  const std::string path = path_.empty() ? std::string(key) : fmt::format("{}.{}", path_, key);
  if (it == value_->end()) {
    return ParseError(fmt::format("{}: {}: missing", file_, path));
  }
  return JsonField(*it, file_, path);
}

Result<JsonField> JsonField::At(size_t i) const {
  if (!value_->is_array()) return TypeError("an array");
  if (i >= value_->size()) {
    return Error(fmt::format("index {} past the end ({} elements)", i, value_->size()));
  }
  return JsonField((*value_)[i], file_, fmt::format("{}[{}]", path_, i));
}

Result<size_t> JsonField::Size() const {
  if (!value_->is_array() && !value_->is_object()) return TypeError("an array or an object");
  return value_->size();
}

Result<double> JsonField::Number() const {
  if (!value_->is_number()) return TypeError("a number");
  const double v = value_->get<double>();  // cannot throw: the type was checked
  if (!std::isfinite(v)) return Error("expected a finite number");
  return v;
}

Result<std::string> JsonField::String() const {
  if (!value_->is_string()) return TypeError("a string");
  return value_->get<std::string>();
}

Result<bool> JsonField::Bool() const {
  if (!value_->is_boolean()) return TypeError("true or false");
  return value_->get<bool>();
}

Status JsonField::ExpectObject() const {
  return value_->is_object() ? Status::Ok() : TypeError("an object");
}

Status JsonField::ExpectArray() const {
  return value_->is_array() ? Status::Ok() : TypeError("an array");
}

Status JsonField::Error(std::string_view what) const {
  if (path_.empty()) return ParseError(fmt::format("{}: {}", file_, what));
  return ParseError(fmt::format("{}: {}: {}", file_, path_, what));
}

std::string JsonField::Where() const { return path_.empty() ? "(document)" : path_; }

Status JsonField::TypeError(std::string_view expected) const {
  return Error(fmt::format("expected {}, got {}", expected, JsonTypeName(*value_)));
}

}  // namespace emo
