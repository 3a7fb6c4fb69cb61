#include "emo/model/stage_profile.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <set>

#include <fmt/format.h>

#include "emo/base/file.h"
#include "emo/base/text.h"

namespace emo::model {
namespace {

std::vector<std::string_view> SplitCsv(std::string_view line) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    const size_t comma = line.find(',', start);
    std::string_view field =
        line.substr(start, comma == std::string_view::npos ? line.npos : comma - start);
    while (!field.empty() && (field.front() == ' ' || field.front() == '\t'))
      field.remove_prefix(1);
    while (!field.empty() &&
           (field.back() == ' ' || field.back() == '\t' || field.back() == '\r')) {
      field.remove_suffix(1);
    }
    out.push_back(field);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

bool ParseDouble(std::string_view s, double& out) {
  if (s.empty()) return false;
  const char* end = s.data() + s.size();
  auto [ptr, ec] = std::from_chars(s.data(), end, out);
  return ec == std::errc() && ptr == end;
}

}  // namespace

Result<StageProfile> ParseStageProfile(std::string_view csv, const std::string& source) {
  StageProfile profile;
  profile.source = source;
  std::map<std::string, size_t> unit_index;
  std::vector<std::set<double>> seen;
  std::set<double> all_clocks;
  int column[5] = {-1, -1, -1, -1, -1};  // stage, instruction, frequency, time, energy
  static constexpr std::string_view kColumns[5] = {"stage", "instruction", "frequency", "time",
                                                   "energy"};
  size_t line_no = 0;
  size_t pos = 0;
  bool header_done = false;
  while (pos < csv.size()) {
    size_t nl = csv.find('\n', pos);
    if (nl == std::string_view::npos) nl = csv.size();
    std::string_view line = csv.substr(pos, nl - pos);
    pos = nl + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    std::vector<std::string_view> fields = SplitCsv(line);
    if (!header_done) {
      for (size_t i = 0; i < fields.size(); ++i) {
        for (int c = 0; c < 5; ++c) {
          if (fields[i] == kColumns[c]) column[c] = static_cast<int>(i);
        }
      }
      for (int c = 0; c < 5; ++c) {
        if (column[c] < 0) {
          return ParseError(
              fmt::format("{}: line 1: not a stage profile: no column '{}' (expected "
                          "stage,instruction,frequency,time,energy)",
                          source, kColumns[c]));
        }
      }
      header_done = true;
      continue;
    }
    const int needed = *std::max_element(column, column + 5);
    if (static_cast<int>(fields.size()) <= needed) {
      return ParseError(fmt::format("{}: line {}: expected at least {}, found {}", source, line_no,
                                    Plural(static_cast<uint64_t>(needed + 1), "field"), fields.size()));
    }
    double f = 0, t = 0, e = 0;
    if (!ParseDouble(fields[column[2]], f) || !ParseDouble(fields[column[3]], t) ||
        !ParseDouble(fields[column[4]], e)) {
      return ParseError(
          fmt::format("{}: line {}: frequency, time and energy must be numbers", source, line_no));
    }
    if (!(f > 0) || !(t > 0) || !(e > 0)) {
      return ParseError(
          fmt::format("{}: line {}: frequency, time and energy must be positive (got {}, {}, {})",
                      source, line_no, f, t, e));
    }
    const std::string name = fmt::format("{}/{}", fields[column[0]], fields[column[1]]);
    auto [it, inserted] = unit_index.try_emplace(name, profile.units.size());
    if (inserted) {
      profile.units.push_back(ProfileUnit{name, {}});
      seen.emplace_back();
    }
    if (!seen[it->second].insert(f).second) {
      return ParseError(
          fmt::format("{}: line {}: clock {} MHz repeated for unit {}", source, line_no, f, name));
    }
    profile.units[it->second].samples.push_back(ClockSample{MegaHertz(f), t, e});
    all_clocks.insert(f);
  }
  if (!header_done || profile.units.empty()) {
    return ParseError(fmt::format("{}: no data rows", source));
  }
  for (ProfileUnit& unit : profile.units) {
    std::sort(unit.samples.begin(), unit.samples.end(),
              [](const ClockSample& a, const ClockSample& b) { return a.clock < b.clock; });
  }
  for (double f : all_clocks) profile.clocks.push_back(MegaHertz(f));
  return profile;
}

Result<StageProfile> ReadStageProfile(const std::string& path) {
  EMO_ASSIGN_OR_RETURN(std::string data, ReadFileMaybeGzip(path));
  return ParseStageProfile(data, path);
}

}  // namespace emo::model
