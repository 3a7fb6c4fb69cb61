// Builds EMO trace files in memory for tests: the chunks `emo trace`'s writer produces, written
// here independently of it (so a reader test does not share the writer's mistakes).
#pragma once

#include <zlib.h>

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "emo/trace/emo_format.h"

namespace emo::testing {

class EmoTraceWriter {
 public:
  EmoTraceWriter() {
    emo::trace::emo_format::FileHeader h{};
    std::memcpy(h.magic, emo::trace::emo_format::kFileMagic, sizeof(h.magic));
    h.version = emo::trace::emo_format::kVersion;
    h.header_bytes = sizeof(h);
    out_.append(reinterpret_cast<const char*>(&h), sizeof(h));
  }

  void Meta(const std::map<std::string, std::string>& kv) {
    std::string text;
    for (const auto& [k, v] : kv) text += k + "=" + v + "\n";
    Chunk(emo::trace::emo_format::ChunkKind::kMeta, text, 0);
  }

  // Interns `s`, returning its id (written with the next Flush).
  uint32_t Str(const std::string& s) {
    auto it = ids_.find(s);
    if (it != ids_.end()) return it->second;
    const auto id = static_cast<uint32_t>(ids_.size() + 100);  // ids need not start at 0
    ids_[s] = id;
    const uint32_t len = static_cast<uint32_t>(s.size());
    strings_.append(reinterpret_cast<const char*>(&id), 4);
    strings_.append(reinterpret_cast<const char*>(&len), 4);
    strings_ += s;
    ++string_count_;
    return id;
  }

  template <typename T>
  void Add(emo::trace::emo_format::RecordType type, const T& record) {
    unsigned char buf[sizeof(emo::trace::emo_format::RecordHeader) + sizeof(T)];
    const size_t n = emo::trace::emo_format::PutRecord(buf, type, record);
    records_.append(reinterpret_cast<const char*>(buf), n);
    ++record_count_;
  }

  // Writes the pending strings and records as chunks (zlib-compressed when `compress`).
  void Flush(bool compress = false) {
    if (string_count_ > 0) Chunk(emo::trace::emo_format::ChunkKind::kStrings, strings_, string_count_, compress);
    if (record_count_ > 0) Chunk(emo::trace::emo_format::ChunkKind::kRecords, records_, record_count_, compress);
    strings_.clear();
    records_.clear();
    string_count_ = record_count_ = 0;
  }

  void End() { Chunk(emo::trace::emo_format::ChunkKind::kEnd, "", 0); }

  const std::string& bytes() const { return out_; }

 private:
  void Chunk(emo::trace::emo_format::ChunkKind kind, const std::string& raw, uint32_t count, bool compress = false) {
    std::string stored = raw;
    if (compress) {
      uLongf n = compressBound(static_cast<uLong>(raw.size()));
      stored.resize(n);
      compress2(reinterpret_cast<Bytef*>(stored.data()), &n, reinterpret_cast<const Bytef*>(raw.data()),
                static_cast<uLong>(raw.size()), 1);
      stored.resize(n);
    }
    emo::trace::emo_format::ChunkHeader h{};
    std::memcpy(h.magic, emo::trace::emo_format::kChunkMagic, sizeof(h.magic));
    h.kind = static_cast<uint32_t>(kind);
    h.encoding = compress ? 1u : 0u;
    h.records = count;
    h.stored_bytes = static_cast<uint32_t>(stored.size());
    h.raw_bytes = static_cast<uint32_t>(raw.size());
    h.crc32 = static_cast<uint32_t>(
        crc32(0, reinterpret_cast<const Bytef*>(stored.data()), static_cast<uInt>(stored.size())));
    out_.append(reinterpret_cast<const char*>(&h), sizeof(h));
    out_ += stored;
  }

  std::string out_, strings_, records_;
  std::map<std::string, uint32_t> ids_;
  uint32_t string_count_ = 0, record_count_ = 0;
};

}  // namespace emo::testing
