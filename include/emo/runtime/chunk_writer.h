// Writes an EMO trace file (include/emo/trace/emo_format.h) chunk by chunk with write(2).
// No CUDA; zlib only. A chunk is written whole or not at all: when a write fails part way
// (full disk, quota, file size limit, I/O error) the file is cut back to the end of the last
// whole chunk, a last meta chunk saying why is attempted, and every later write is refused.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "emo/trace/emo_format.h"

namespace emo::runtime {

class ChunkWriter {
 public:
  ChunkWriter() = default;
  ChunkWriter(const ChunkWriter&) = delete;
  ChunkWriter& operator=(const ChunkWriter&) = delete;
  ~ChunkWriter();

  // Takes ownership of `fd` (open for writing, positioned at its start, empty) and writes the
  // file header. False when that write fails (see error_number()).
  bool Start(int fd);

  // Appends one chunk of `kind` holding `count` records or strings. With `compress` the
  // payload is deflated (zlib level 1) unless that does not make it smaller. False when the
  // chunk could not be written whole, or an earlier one failed.
  bool Write(trace::emo_format::ChunkKind kind, uint32_t count, const void* payload, size_t bytes, bool compress);

  // Closes the file (no kEnd chunk: the caller writes it when the run ended cleanly).
  void Close();

  bool failed() const { return errno_ != 0; }
  // errno of the failed write, 0 when none failed.
  int error_number() const { return errno_; }
  // True when the failure was a full disk, a quota or the file size limit.
  bool disk_full() const;
  // Bytes of whole chunks in the file.
  uint64_t bytes_written() const { return offset_; }

 private:
  bool WriteAll(const unsigned char* data, size_t size);
  void Fail(int error);

  int fd_ = -1;
  uint64_t offset_ = 0;
  int errno_ = 0;
  std::vector<unsigned char> scratch_;
};

// Appends one kStrings entry {uint32 id, uint32 length, bytes} to `out`.
void AppendStringEntry(uint32_t id, std::string_view text, std::vector<unsigned char>* out);

}  // namespace emo::runtime
