// A minimal reader of EMO trace files for the runtime tests: every whole, intact chunk up to
// the first that is cut or damaged, and the records inside. (The real reader is in src/trace.)
#pragma once

#include <zlib.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "emo/trace/emo_format.h"

namespace emo::runtime {

namespace fmt = trace::emo_format;

struct Chunk {
  uint32_t kind = 0;
  uint32_t count = 0;
  std::vector<unsigned char> payload;  // decoded
};

// Every whole, intact chunk of `file`, in order, up to the first that is cut or damaged.
inline std::vector<Chunk> WalkChunks(const std::vector<unsigned char>& file) {
  std::vector<Chunk> chunks;
  if (file.size() < sizeof(fmt::FileHeader)) return chunks;
  fmt::FileHeader header;
  std::memcpy(&header, file.data(), sizeof(header));
  if (std::memcmp(header.magic, fmt::kFileMagic, sizeof(header.magic)) != 0 || header.version != fmt::kVersion) {
    return chunks;
  }
  size_t at = header.header_bytes;
  while (at + sizeof(fmt::ChunkHeader) <= file.size()) {
    fmt::ChunkHeader h;
    std::memcpy(&h, file.data() + at, sizeof(h));
    if (std::memcmp(h.magic, fmt::kChunkMagic, sizeof(h.magic)) != 0) break;
    const size_t body = at + sizeof(h);
    if (body + h.stored_bytes > file.size()) break;
    if (crc32(0L, file.data() + body, h.stored_bytes) != h.crc32) break;
    Chunk c;
    c.kind = h.kind;
    c.count = h.records;
    c.payload.resize(h.raw_bytes);
    if (h.encoding == static_cast<uint32_t>(fmt::Encoding::kZlib)) {
      uLongf n = h.raw_bytes;
      if (uncompress(c.payload.data(), &n, file.data() + body, h.stored_bytes) != Z_OK || n != h.raw_bytes) break;
    } else {
      if (h.stored_bytes != h.raw_bytes) break;
      if (h.raw_bytes > 0) std::memcpy(c.payload.data(), file.data() + body, h.raw_bytes);
    }
    chunks.push_back(std::move(c));
    at = body + h.stored_bytes;
  }
  return chunks;
}

// The bytes of the file at `path`.
inline std::vector<unsigned char> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<unsigned char>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// The key=value lines of every meta chunk, later ones overriding earlier ones.
inline std::map<std::string, std::string> Meta(const std::vector<Chunk>& chunks) {
  std::map<std::string, std::string> meta;
  for (const Chunk& c : chunks) {
    if (c.kind != static_cast<uint32_t>(fmt::ChunkKind::kMeta)) continue;
    const std::string text(c.payload.begin(), c.payload.end());
    size_t at = 0;
    while (at < text.size()) {
      size_t end = text.find('\n', at);
      if (end == std::string::npos) end = text.size();
      const std::string line = text.substr(at, end - at);
      const size_t eq = line.find('=');
      if (eq != std::string::npos) meta[line.substr(0, eq)] = line.substr(eq + 1);
      at = end + 1;
    }
  }
  return meta;
}

// Every string entry of the kStrings chunks, by id.
inline std::map<uint32_t, std::string> Strings(const std::vector<Chunk>& chunks) {
  std::map<uint32_t, std::string> strings;
  for (const Chunk& c : chunks) {
    if (c.kind != static_cast<uint32_t>(fmt::ChunkKind::kStrings)) continue;
    size_t at = 0;
    for (uint32_t i = 0; i < c.count && at + 8 <= c.payload.size(); ++i) {
      uint32_t id = 0;
      uint32_t length = 0;
      std::memcpy(&id, c.payload.data() + at, 4);
      std::memcpy(&length, c.payload.data() + at + 4, 4);
      strings[id] = std::string(c.payload.begin() + static_cast<std::ptrdiff_t>(at + 8),
                                c.payload.begin() + static_cast<std::ptrdiff_t>(at + 8 + length));
      at += 8 + length;
    }
  }
  return strings;
}

// The records of type `type`, in file order.
template <typename T>
std::vector<T> Records(const std::vector<Chunk>& chunks, fmt::RecordType type) {
  std::vector<T> out;
  for (const Chunk& c : chunks) {
    if (c.kind != static_cast<uint32_t>(fmt::ChunkKind::kRecords)) continue;
    size_t at = 0;
    while (at + sizeof(fmt::RecordHeader) <= c.payload.size()) {
      fmt::RecordHeader h;
      std::memcpy(&h, c.payload.data() + at, sizeof(h));
      at += sizeof(h);
      if (h.type == static_cast<uint16_t>(type)) {
        T r;
        fmt::GetRecord(c.payload.data() + at, h.size, &r);
        out.push_back(r);
      }
      at += h.size;
    }
  }
  return out;
}

}  // namespace emo::runtime
