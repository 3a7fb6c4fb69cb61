// Field-by-field comparison of two JSON documents for the golden tests: numbers within a
// tolerance chosen by the field's path, strings, booleans and nulls exactly, arrays by length
// and element, objects by their keys. Every difference is reported with its JSON path.
#pragma once

#include <cmath>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace emo::testing {

struct Tolerance {
  double rel = 0.0;  // of the expected value's magnitude
  double abs = 0.0;
};

struct CompareRules {
  // The tolerance of the number at `path` ("/plan/energy_j", "/per_iteration/2/replayed_us").
  std::function<Tolerance(const std::string& path)> tolerance;
  // Fields left out of the comparison (and out of regenerated files): by key name anywhere...
  std::vector<std::string> ignored_keys;
  // ...or by exact path.
  std::vector<std::string> ignored_paths;

  bool Ignored(const std::string& path, std::string_view key) const {
    for (const auto& k : ignored_keys) {
      if (k == key) return true;
    }
    for (const auto& p : ignored_paths) {
      if (p == path) return true;
    }
    return false;
  }
};

inline std::string Brief(const nlohmann::json& v) {
  std::string s = v.dump();
  return s.size() > 120 ? s.substr(0, 117) + "..." : s;
}

// Appends one line per difference between `expected` and `actual` at `path` to `diffs`.
inline void CompareJson(const nlohmann::json& expected, const nlohmann::json& actual,
                        const CompareRules& rules, std::vector<std::string>* diffs,
                        const std::string& path = "") {
  const std::string where = path.empty() ? "/" : path;
  if (expected.is_number() && actual.is_number()) {
    const double e = expected.get<double>();
    const double a = actual.get<double>();
    const Tolerance t = rules.tolerance(path);
    if (!(std::abs(a - e) <= t.abs + t.rel * std::abs(e))) {
      diffs->push_back(fmt::format("{}: expected {}, actual {} (tolerance rel {:g}, abs {:g})",
                                   where, Brief(expected), Brief(actual), t.rel, t.abs));
    }
    return;
  }
  if (expected.type() != actual.type()) {
    diffs->push_back(fmt::format("{}: expected {} ({}), actual {} ({})", where, Brief(expected),
                                 expected.type_name(), Brief(actual), actual.type_name()));
    return;
  }
  if (expected.is_object()) {
    for (const auto& [key, value] : expected.items()) {
      const std::string child = path + "/" + key;
      if (rules.Ignored(child, key)) continue;
      if (!actual.contains(key)) {
        diffs->push_back(fmt::format("{}: expected {}, actual: missing", child, Brief(value)));
        continue;
      }
      CompareJson(value, actual.at(key), rules, diffs, child);
    }
    for (const auto& [key, value] : actual.items()) {
      const std::string child = path + "/" + key;
      if (!rules.Ignored(child, key) && !expected.contains(key)) {
        diffs->push_back(fmt::format("{}: not in the expected file, actual {}", child, Brief(value)));
      }
    }
    return;
  }
  if (expected.is_array()) {
    if (expected.size() != actual.size()) {
      diffs->push_back(fmt::format("{}: expected {} elements, actual {}", where, expected.size(),
                                   actual.size()));
    }
    const size_t n = std::min(expected.size(), actual.size());
    for (size_t i = 0; i < n; ++i) {
      CompareJson(expected[i], actual[i], rules, diffs, fmt::format("{}/{}", path, i));
    }
    return;
  }
  if (expected != actual) {  // strings, booleans, null
    diffs->push_back(fmt::format("{}: expected {}, actual {}", where, Brief(expected), Brief(actual)));
  }
}

// `doc` without the ignored fields (what a regenerated expected file holds).
inline nlohmann::json WithoutIgnored(const nlohmann::json& doc, const CompareRules& rules,
                                     const std::string& path = "") {
  if (doc.is_object()) {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& [key, value] : doc.items()) {
      const std::string child = path + "/" + key;
      if (!rules.Ignored(child, key)) out[key] = WithoutIgnored(value, rules, child);
    }
    return out;
  }
  if (doc.is_array()) {
    nlohmann::json out = nlohmann::json::array();
    for (size_t i = 0; i < doc.size(); ++i) {
      out.push_back(WithoutIgnored(doc[i], rules, fmt::format("{}/{}", path, i)));
    }
    return out;
  }
  return doc;
}

}  // namespace emo::testing
