// The traces behind a job's command-line inputs: files, directories of them, tar archives of them.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "emo/base/file.h"
#include "emo/trace/reader.h"

namespace emo::trace {
namespace {

namespace fs = std::filesystem;

bool EndsWith(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool IsTraceName(const std::string& name) {
  return EndsWith(name, ".json") || EndsWith(name, ".json.gz") || EndsWith(name, ".emotrace");
}

bool IsTarName(const std::string& name) {
  return EndsWith(name, ".tar") || EndsWith(name, ".tar.gz") || EndsWith(name, ".tgz");
}

// A tar header's octal number field (NUL or space terminated); -1 when it is not one.
int64_t Octal(const char* field, size_t size) {
  int64_t v = 0;
  size_t i = 0;
  while (i < size && field[i] == ' ') ++i;
  bool any = false;
  for (; i < size && field[i] >= '0' && field[i] <= '7'; ++i) {
    v = v * 8 + (field[i] - '0');
    any = true;
  }
  if (any) return v;
  return i == size || field[i] == '\0' ? 0 : -1;
}

std::string Field(const char* field, size_t size) { return std::string(field, strnlen(field, size)); }

// The regular members of a (decompressed) ustar/GNU/pax tar archive whose names are traces.
Result<std::vector<TraceSource>> TarMembers(const std::string& archive, const std::string& tar) {
  constexpr size_t kBlock = 512;
  if (tar.size() < kBlock) {
    return ParseError(fmt::format("{}: not a tar archive ({} bytes, under one 512-byte header)", archive, tar.size()));
  }
  std::vector<TraceSource> out;
  std::string long_name;  // from a GNU 'L' entry, for the next member
  size_t pos = 0;
  while (pos + kBlock <= tar.size()) {
    const char* h = tar.data() + pos;
    if (std::all_of(h, h + kBlock, [](char c) { return c == '\0'; })) break;  // the end blocks
    const int64_t size = Octal(h + 124, 12);
    const int64_t checksum = Octal(h + 148, 8);
    int64_t sum = 0;
    for (size_t i = 0; i < kBlock; ++i) sum += (i >= 148 && i < 156) ? ' ' : static_cast<unsigned char>(h[i]);
    if (size < 0 || checksum != sum) {
      return ParseError(fmt::format("{}: not a tar archive EMO can read (bad header at byte {})", archive, pos));
    }
    const char type = h[156];
    const size_t data_at = pos + kBlock;
    if (data_at + static_cast<size_t>(size) > tar.size()) {
      return ParseError(fmt::format("{}: truncated (a member of {} bytes at byte {} runs past the end)", archive, size, pos));
    }
    std::string name = Field(h, 100);
    const std::string prefix = Field(h + 345, 155);
    if (!prefix.empty() && std::string_view(h + 257, 5) == "ustar") name = prefix + "/" + name;
    if (!long_name.empty()) {
      name = long_name;
      long_name.clear();
    }
    if (type == 'L') {
      long_name = Field(tar.data() + data_at, static_cast<size_t>(size));
    } else if ((type == '0' || type == '\0') && IsTraceName(name)) {
      TraceSource s;
      s.name = archive + ":" + name;
      s.data = tar.substr(data_at, static_cast<size_t>(size));
      s.in_memory = true;
      out.push_back(std::move(s));
    }
    pos = data_at + (static_cast<size_t>(size) + kBlock - 1) / kBlock * kBlock;
  }
  std::sort(out.begin(), out.end(), [](const TraceSource& a, const TraceSource& b) { return a.name < b.name; });
  return out;
}

}  // namespace

Result<std::vector<TraceSource>> ExpandTraceInputs(const std::vector<std::string>& inputs) {
  std::vector<TraceSource> out;
  for (const std::string& input : inputs) {
    std::error_code ec;
    if (fs::is_directory(input, ec)) {
      std::vector<std::string> files;
      for (const auto& entry : fs::directory_iterator(input, ec)) {
        if (entry.is_regular_file() && IsTraceName(entry.path().filename().string())) files.push_back(entry.path().string());
      }
      if (ec) return IoError(fmt::format("{}: cannot list the folder ({})", input, ec.message()));
      if (files.empty()) {
        return NotFound(fmt::format("{}: a folder with no trace in it (files ending in .json, .json.gz or .emotrace)", input));
      }
      std::sort(files.begin(), files.end());
      for (auto& f : files) out.push_back({std::move(f), "", false});
    } else if (IsTarName(input)) {
      EMO_ASSIGN_OR_RETURN(std::string tar, ReadFileMaybeGzip(input));
      EMO_ASSIGN_OR_RETURN(std::vector<TraceSource> members, TarMembers(input, tar));
      if (members.empty()) {
        return NotFound(fmt::format("{}: a tar archive with no trace in it (members ending in .json, .json.gz or .emotrace)",
                                    input));
      }
      for (auto& m : members) out.push_back(std::move(m));
    } else {
      out.push_back({input, "", false});
    }
  }
  return out;
}

}  // namespace emo::trace
