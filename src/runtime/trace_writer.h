// The injection library's writer thread: it owns the output file, the pool of CUPTI activity
// buffers, the string table and the chunk being filled. Other threads only hand it work
// (a completed CUPTI buffer, one record, meta text) through a queue; everything slow (decoding,
// interning, deflate, write(2)) happens on this thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "emo/runtime/activity_decode.h"
#include "emo/runtime/chunk_writer.h"

namespace emo::runtime {

// A meta value on one line: newlines (and NULs) become spaces, so that it cannot break the
// meta chunk's "key=value" lines.
inline std::string MetaValue(std::string s) {
  for (char& c : s) {
    if (c == '\n' || c == '\r' || c == '\0') c = ' ';
  }
  return s;
}

class TraceWriter {
 public:
  // Counters the final meta chunk reports.
  struct Stats {
    uint64_t records = 0;          // records written
    uint64_t incomplete = 0;       // CUPTI records without timestamps, dropped
    uint64_t filtered = 0;         // noisy API calls and unfinished queries, dropped on purpose
    uint64_t unknown = 0;          // activity kinds not converted
    uint64_t buffers_refused = 0;  // CUPTI buffer requests refused: the pool was in use
    uint64_t queue_dropped = 0;    // records dropped because the writer fell behind
  };

  TraceWriter() = default;
  // Frees the pool's buffers. Only after Finish, with every buffer handed back (a block session's
  // writer, after its flush; the process-long session's writer is never destroyed).
  ~TraceWriter();
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  // Starts the thread writing to `fd` (owned from here on). `pool_bytes` bounds the CUPTI
  // buffers; `device_of_context` maps a CUPTI context id to its device (0xffffffff unknown).
  // False when the file header cannot be written (errno says why; `fd` is closed).
  bool Start(int fd, std::string path, size_t pool_bytes, std::function<uint32_t(uint32_t)> device_of_context);

  // A buffer for CUPTI, or nullptr when the pool is exhausted (the refusal becomes a
  // DroppedRecord with reason 2). Any thread.
  uint8_t* AcquireBuffer(size_t* size);
  // Hands a completed CUPTI buffer to the thread, which decodes it and recycles it. Any thread.
  void SubmitBuffer(uint8_t* buffer, size_t valid_bytes);
  // Queues one record; when `name` is given, the thread interns it and stores its id as a
  // uint32 at byte `name_offset` of the record. Any thread.
  void AddRecord(const DecodedRecord& record, std::string name = {}, int name_offset = -1);
  // Queues "key=value\n" lines for a meta chunk. Any thread.
  void AddMeta(std::string text);
  // Waits up to `patience_ns` until every buffer handed over so far has been decoded (the
  // decoding calls CUPTI, so a detach waits for it: tracer.cc, DetachAtApiExit). False if it
  // has not by then. Any thread.
  bool WaitBuffersDecoded(int64_t patience_ns) const;

  // Writes what is queued, then `end_meta` followed by the record counts (Stats), then (when
  // `clean`) the kEnd chunk, and closes the file. Blocks until the thread is done. Later calls
  // do nothing.
  void Finish(std::string end_meta, bool clean);

  // True once a write failed (full disk, I/O error); nothing more is written.
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  Stats stats() const;

 private:
  struct Item {
    enum class Kind { kBuffer, kRecord, kMeta };
    Kind kind = Kind::kRecord;
    uint8_t* buffer = nullptr;
    size_t valid = 0;
    DecodedRecord record;
    std::string text;
    int name_offset = -1;
  };

  class Names;  // the DecodeContext the thread decodes with

  void Run();
  void Handle(Item& item, Names* names);
  void DecodeBuffer(uint8_t* buffer, size_t valid, Names* names);
  void Append(const DecodedRecord& record);
  void FlushRecords();
  void WriteChunk(trace::emo_format::ChunkKind kind, uint32_t count, const std::vector<unsigned char>& payload,
                  bool compress);
  void ReleaseBuffer(uint8_t* buffer);
  void Push(Item item);

  // Shared with other threads.
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Item> queue_;
  bool accepting_ = false;
  bool finishing_ = false;
  std::vector<uint8_t*> free_buffers_;
  size_t buffers_allocated_ = 0;
  size_t max_buffers_ = 0;
  std::atomic<bool> failed_{false};
  std::atomic<uint64_t> buffers_refused_{0};
  std::atomic<uint64_t> queue_dropped_{0};
  std::atomic<uint64_t> buffers_queued_{0};   // CUPTI buffers queued for the thread
  std::atomic<uint64_t> buffers_decoded_{0};  // ... and decoded by it

  // Writer thread only.
  std::thread thread_;
  std::string path_;
  ChunkWriter file_;
  std::function<uint32_t(uint32_t)> device_of_context_;
  std::vector<unsigned char> records_;
  uint32_t record_count_ = 0;
  int64_t records_since_ns_ = 0;
  std::vector<unsigned char> strings_;
  uint32_t string_count_ = 0;
  uint64_t refused_reported_ = 0;
  std::string end_meta_;
  bool clean_ = false;
  std::atomic<uint64_t> written_{0};
  std::atomic<uint64_t> incomplete_{0};
  std::atomic<uint64_t> filtered_{0};
  std::atomic<uint64_t> unknown_{0};
};

}  // namespace emo::runtime
