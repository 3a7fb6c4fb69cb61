#include "emo/base/file.h"

#include <libdeflate.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <iostream>
#include <sstream>

#include <fmt/format.h>

namespace emo {
namespace {

// The most a deflate stream expands: a 258-byte match per 2 bits of input at best.
constexpr size_t kMaxDeflateRatio = 1032;

// gzip with libdeflate (2-3x faster than zlib's inflate on trace JSON); concatenated gzip
// members are decompressed one after the other. The output is sized from the last member's
// ISIZE trailer (size mod 2^32), grown on demand.
Result<std::string> Gunzip(const std::string& path, const std::string& compressed) {
  struct Free {
    void operator()(libdeflate_decompressor* d) const { libdeflate_free_decompressor(d); }
  };
  std::unique_ptr<libdeflate_decompressor, Free> d(libdeflate_alloc_decompressor());
  if (!d) return Internal("libdeflate_alloc_decompressor failed");
  size_t guess = compressed.size() * 4 + 1024;
  if (compressed.size() >= 18) {
    const auto* p = reinterpret_cast<const unsigned char*>(compressed.data() + compressed.size() - 4);
    const size_t isize = size_t{p[0]} | size_t{p[1]} << 8 | size_t{p[2]} << 16 | size_t{p[3]} << 24;
    // Spare room past the end: a parser that reads a padding past the data (simdjson needs
    // 64 bytes) then grows the string in place instead of copying the whole trace. The trailer
    // of a cut or damaged file is any 4 bytes (up to 4 GiB): deflate expands at most 1032:1, so
    // no more is allocated (and zeroed) up front than the input can decompress to.
    guess = std::max(guess, std::min(isize, compressed.size() * kMaxDeflateRatio) + 4096);
  }
  std::string out(guess, '\0');
  size_t in_pos = 0, out_pos = 0;
  while (in_pos < compressed.size()) {
    size_t in_used = 0, out_used = 0;
    const auto rc = libdeflate_gzip_decompress_ex(d.get(), compressed.data() + in_pos,
                                                  compressed.size() - in_pos, out.data() + out_pos,
                                                  out.size() - out_pos, &in_used, &out_used);
    if (rc == LIBDEFLATE_INSUFFICIENT_SPACE) {
      out.resize(out.size() * 2);
      continue;
    }
    if (rc != LIBDEFLATE_SUCCESS) {
      return ParseError(fmt::format("{}: {} gzip data in the member that starts at byte {} of the file's {} (a copy "
                                    "cut short, or a file still being written?)",
                                    path, rc == LIBDEFLATE_SHORT_OUTPUT ? "truncated" : "corrupt or truncated",
                                    in_pos, compressed.size()));
    }
    in_pos += in_used;
    out_pos += out_used;
    // Trailing zero padding after the last member is tolerated, as gzip does.
    while (in_pos < compressed.size() && compressed[in_pos] == '\0') ++in_pos;
  }
  out.resize(out_pos);
  return out;
}

}  // namespace

Result<std::string> ReadFileMaybeGzip(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound(fmt::format("{}: cannot open ({})", path, std::strerror(errno)));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return IoError(fmt::format("{}: read failed", path));
  return MaybeGunzip(path, std::move(ss).str());
}

Result<std::string> MaybeGunzip(const std::string& name, std::string data) {
  if (data.size() >= 2 && static_cast<unsigned char>(data[0]) == 0x1f &&
      static_cast<unsigned char>(data[1]) == 0x8b) {
    return Gunzip(name, data);
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
