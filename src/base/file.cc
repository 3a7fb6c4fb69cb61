#include "emo/base/file.h"

#include <libdeflate.h>
#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
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

struct FileChunks::Inflate {
  z_stream s{};
  bool initialised = false;
  ~Inflate() {
    if (initialised) inflateEnd(&s);
  }
};

Result<std::unique_ptr<FileChunks>> FileChunks::Open(const std::string& path, size_t piece_bytes) {
  std::unique_ptr<FileChunks> f(new FileChunks());
  f->path_ = path;
  f->piece_bytes_ = std::max<size_t>(piece_bytes, 1);
  f->file_ = std::fopen(path.c_str(), "rb");
  if (f->file_ == nullptr) return NotFound(fmt::format("{}: cannot open ({})", path, std::strerror(errno)));
  struct stat st {};
  if (fstat(fileno(f->file_), &st) == 0) f->file_bytes_ = static_cast<int64_t>(st.st_size);
  f->in_.resize(f->piece_bytes_);
  f->in_.resize(std::fread(f->in_.data(), 1, f->in_.size(), f->file_));
  if (std::ferror(f->file_)) return IoError(fmt::format("{}: read failed", path));
  f->at_eof_ = f->in_.empty();
  f->gzip_ = f->in_.size() >= 2 && static_cast<unsigned char>(f->in_[0]) == 0x1f &&
             static_cast<unsigned char>(f->in_[1]) == 0x8b;
  if (f->gzip_) f->z_ = std::make_unique<Inflate>();
  return f;
}

FileChunks::~FileChunks() {
  if (file_ != nullptr) std::fclose(file_);
}

Result<size_t> FileChunks::Read(std::string* out, size_t max_bytes) {
  auto refill = [this]() -> Status {
    if (in_pos_ < in_.size() || at_eof_) return Status::Ok();
    in_.resize(piece_bytes_);
    in_.resize(std::fread(in_.data(), 1, in_.size(), file_));
    in_pos_ = 0;
    if (std::ferror(file_)) return IoError(fmt::format("{}: read failed", path_));
    at_eof_ = in_.empty();
    return Status::Ok();
  };
  const size_t old = out->size();
  if (!gzip_) {
    if (in_pos_ < in_.size()) {  // the bytes read while opening
      const size_t n = std::min(max_bytes, in_.size() - in_pos_);
      out->append(in_, in_pos_, n);
      in_pos_ += n;
      return n;
    }
    out->resize(old + max_bytes);
    const size_t n = std::fread(out->data() + old, 1, max_bytes, file_);
    out->resize(old + n);
    if (std::ferror(file_)) return IoError(fmt::format("{}: read failed", path_));
    return n;
  }
  z_stream& s = z_->s;
  while (true) {
    EMO_RETURN_IF_ERROR(refill());
    if (!member_open_) {
      // Trailing zero padding after the last member is tolerated, as gzip does.
      while (in_pos_ < in_.size() && in_[in_pos_] == '\0') ++in_pos_;
      if (in_pos_ == in_.size()) {
        if (at_eof_) return size_t{0};
        continue;
      }
      const int rc = z_->initialised ? inflateReset(&s) : inflateInit2(&s, 16 + MAX_WBITS);
      if (rc != Z_OK) return Internal(fmt::format("{}: zlib could not start inflating", path_));
      z_->initialised = true;
      member_open_ = true;
    }
    if (in_pos_ == in_.size()) return ParseError(fmt::format("{}: truncated gzip data", path_));
    out->resize(old + max_bytes);
    s.next_in = reinterpret_cast<Bytef*>(in_.data() + in_pos_);
    s.avail_in = static_cast<uInt>(in_.size() - in_pos_);
    s.next_out = reinterpret_cast<Bytef*>(out->data() + old);
    s.avail_out = static_cast<uInt>(max_bytes);
    const int rc = inflate(&s, Z_NO_FLUSH);
    const size_t produced = max_bytes - s.avail_out;
    out->resize(old + produced);
    in_pos_ = in_.size() - s.avail_in;
    if (rc == Z_STREAM_END) {
      member_open_ = false;
    } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
      return ParseError(fmt::format("{}: corrupt gzip data", path_));
    }
    if (produced > 0) return produced;
  }
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
