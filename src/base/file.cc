#include "emo/base/file.h"

#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

#include <fmt/format.h>

namespace emo {
namespace {

Result<std::string> Gunzip(const std::string& path, const std::string& compressed) {
  z_stream zs{};
  // 16 + MAX_WBITS: expect a gzip header; concatenated members are handled in the loop.
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) return Internal("zlib inflateInit2 failed");
  std::string out;
  out.resize(compressed.size() * 4 + 1024);
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(compressed.data()));
  zs.avail_in = static_cast<uInt>(compressed.size());
  size_t produced = 0;
  while (true) {
    if (produced == out.size()) out.resize(out.size() * 2);
    zs.next_out = reinterpret_cast<Bytef*>(out.data() + produced);
    zs.avail_out = static_cast<uInt>(out.size() - produced);
    int rc = inflate(&zs, Z_NO_FLUSH);
    produced = out.size() - zs.avail_out;
    if (rc == Z_STREAM_END) {
      if (zs.avail_in == 0) break;
      inflateReset(&zs);  // another gzip member follows
      continue;
    }
    if (rc == Z_BUF_ERROR && zs.avail_in == 0) {
      inflateEnd(&zs);
      return ParseError(fmt::format("{}: truncated gzip stream", path));
    }
    if (rc != Z_OK && rc != Z_BUF_ERROR) {
      std::string msg = zs.msg ? zs.msg : "unknown zlib error";
      inflateEnd(&zs);
      return ParseError(fmt::format("{}: corrupt gzip data ({})", path, msg));
    }
  }
  inflateEnd(&zs);
  out.resize(produced);
  return out;
}

}  // namespace

Result<std::string> ReadFileMaybeGzip(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound(fmt::format("{}: cannot open ({})", path, std::strerror(errno)));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return IoError(fmt::format("{}: read failed", path));
  std::string data = std::move(ss).str();
  if (data.size() >= 2 && static_cast<unsigned char>(data[0]) == 0x1f &&
      static_cast<unsigned char>(data[1]) == 0x8b) {
    return Gunzip(path, data);
  }
  return data;
}

Status WriteFile(const std::string& path, const std::string& data) {
  if (path == "-") {
    std::cout << data;
    std::cout.flush();
    return Status::Ok();
  }
  std::ofstream out(path, std::ios::binary);
  if (!out) return IoError(fmt::format("{}: cannot open for writing ({})", path, std::strerror(errno)));
  out << data;
  if (!out) return IoError(fmt::format("{}: write failed", path));
  return Status::Ok();
}

}  // namespace emo
