// Reading whole files, transparently gunzipping `.gz` (detected by magic bytes, not name).
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "emo/base/status.h"

namespace emo {

// Reads `path` into memory; gzip streams (magic 1f 8b) are decompressed. Errors name the file.
Result<std::string> ReadFileMaybeGzip(const std::string& path);

// `data` decompressed when it is a gzip stream (magic 1f 8b), else as it is; `name` names it in
// errors.
Result<std::string> MaybeGunzip(const std::string& name, std::string data);

// Reads a file front to back in pieces, decompressing gzip streams (magic 1f 8b; concatenated
// members, trailing zero padding) with zlib, so that a reader need never hold the whole file.
class FileChunks {
 public:
  // Opens `path`; errors name the file. The file is read `piece_bytes` at a time (the fuzz
  // target of the piecewise Kineto reader reads in pieces down to one byte).
  static constexpr size_t kDefaultPieceBytes = size_t{4} << 20;
  static Result<std::unique_ptr<FileChunks>> Open(const std::string& path, size_t piece_bytes = kDefaultPieceBytes);
  ~FileChunks();
  FileChunks(const FileChunks&) = delete;
  FileChunks& operator=(const FileChunks&) = delete;
  // Appends up to `max_bytes` (decompressed) bytes to `out`; returns how many, 0 at the end.
  Result<size_t> Read(std::string* out, size_t max_bytes);
  int64_t file_bytes() const { return file_bytes_; }

 private:
  FileChunks() = default;
  std::string path_;
  std::FILE* file_ = nullptr;
  int64_t file_bytes_ = 0;
  bool gzip_ = false;
  bool member_open_ = false;    // inside a gzip member (zlib stream initialised)
  bool at_eof_ = false;         // the file is read to its end
  struct Inflate;
  std::unique_ptr<Inflate> z_;  // zlib state, gzip only
  std::string in_;              // compressed bytes read but not yet consumed
  size_t in_pos_ = 0;
  size_t piece_bytes_ = kDefaultPieceBytes;
};

// Writes `data` to `path`, or to stdout when path is "-".
Status WriteFile(const std::string& path, const std::string& data);

}  // namespace emo
