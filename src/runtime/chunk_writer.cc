#include "emo/runtime/chunk_writer.h"

#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>

namespace emo::runtime {
namespace {

namespace fmt = trace::emo_format;

constexpr std::string_view kDiskFullMeta = "end.reason=disk_full\n";
constexpr std::string_view kIoErrorMeta = "end.reason=io_error\n";

}  // namespace

ChunkWriter::~ChunkWriter() { Close(); }

bool ChunkWriter::Start(int fd) {
  fd_ = fd;
  offset_ = 0;
  errno_ = 0;
  fmt::FileHeader header{};
  std::memcpy(header.magic, fmt::kFileMagic, sizeof(header.magic));
  header.version = fmt::kVersion;
  header.header_bytes = sizeof(fmt::FileHeader);
  if (!WriteAll(reinterpret_cast<const unsigned char*>(&header), sizeof(header))) {
    Fail(errno);
    return false;
  }
  offset_ = sizeof(header);
  return true;
}

bool ChunkWriter::Write(fmt::ChunkKind kind, uint32_t count, const void* payload, size_t bytes, bool compress) {
  if (fd_ < 0 || failed()) return false;
  const auto* raw = static_cast<const unsigned char*>(payload);
  fmt::ChunkHeader header{};
  std::memcpy(header.magic, fmt::kChunkMagic, sizeof(header.magic));
  header.kind = static_cast<uint32_t>(kind);
  header.records = count;
  header.raw_bytes = static_cast<uint32_t>(bytes);
  scratch_.resize(sizeof(header) + (compress ? compressBound(static_cast<uLong>(bytes)) : bytes));
  unsigned char* body = scratch_.data() + sizeof(header);
  size_t stored = bytes;
  header.encoding = static_cast<uint32_t>(fmt::Encoding::kRaw);
  if (compress && bytes > 0) {
    uLongf out_bytes = static_cast<uLongf>(scratch_.size() - sizeof(header));
    if (compress2(body, &out_bytes, raw, static_cast<uLong>(bytes), 1) == Z_OK && out_bytes < bytes) {
      stored = out_bytes;
      header.encoding = static_cast<uint32_t>(fmt::Encoding::kZlib);
    }
  }
  if (header.encoding == static_cast<uint32_t>(fmt::Encoding::kRaw) && bytes > 0) std::memcpy(body, raw, bytes);
  header.stored_bytes = static_cast<uint32_t>(stored);
  header.crc32 = static_cast<uint32_t>(crc32(0L, body, static_cast<uInt>(stored)));
  std::memcpy(scratch_.data(), &header, sizeof(header));
  if (!WriteAll(scratch_.data(), sizeof(header) + stored)) {
    Fail(errno);
    return false;
  }
  offset_ += sizeof(header) + stored;
  return true;
}

bool ChunkWriter::WriteAll(const unsigned char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd_, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    if (n == 0) {
      errno = EIO;
      return false;
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

void ChunkWriter::Fail(int error) {
  errno_ = error != 0 ? error : EIO;
  if (fd_ < 0) return;
  // Cut the partial chunk so the file ends with a whole one; then try to say why the file
  // ends here. Cutting frees the partial chunk's blocks, so a small meta chunk often fits.
  if (ftruncate(fd_, static_cast<off_t>(offset_)) != 0 || lseek(fd_, static_cast<off_t>(offset_), SEEK_SET) < 0) return;
  const std::string_view meta = disk_full() ? kDiskFullMeta : kIoErrorMeta;
  fmt::ChunkHeader header{};
  std::memcpy(header.magic, fmt::kChunkMagic, sizeof(header.magic));
  header.kind = static_cast<uint32_t>(fmt::ChunkKind::kMeta);
  header.encoding = static_cast<uint32_t>(fmt::Encoding::kRaw);
  header.stored_bytes = header.raw_bytes = static_cast<uint32_t>(meta.size());
  header.crc32 =
      static_cast<uint32_t>(crc32(0L, reinterpret_cast<const Bytef*>(meta.data()), static_cast<uInt>(meta.size())));
  unsigned char chunk[sizeof(header) + 32];
  std::memcpy(chunk, &header, sizeof(header));
  std::memcpy(chunk + sizeof(header), meta.data(), meta.size());
  if (WriteAll(chunk, sizeof(header) + meta.size())) {
    offset_ += sizeof(header) + meta.size();
    return;
  }
  // The meta chunk did not fit either: cut it too, the file ends with its last whole chunk.
  const int cut = ftruncate(fd_, static_cast<off_t>(offset_));
  (void)cut;
}

bool ChunkWriter::disk_full() const { return errno_ == ENOSPC || errno_ == EDQUOT || errno_ == EFBIG; }

void ChunkWriter::Close() {
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
}

void AppendStringEntry(uint32_t id, std::string_view text, std::vector<unsigned char>* out) {
  const auto length = static_cast<uint32_t>(text.size());
  const size_t at = out->size();
  out->resize(at + 8 + text.size());
  std::memcpy(out->data() + at, &id, 4);
  std::memcpy(out->data() + at + 4, &length, 4);
  if (!text.empty()) std::memcpy(out->data() + at + 8, text.data(), text.size());
}

}  // namespace emo::runtime
