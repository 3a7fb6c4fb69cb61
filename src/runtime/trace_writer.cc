#include "trace_writer.h"

#include <cupti.h>
#include <cxxabi.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "clock_reference.h"
#include "cupti_check.h"
#include "thread_name.h"

namespace emo::runtime {
namespace {

namespace fmt = trace::emo_format;

constexpr size_t kBufferBytes = size_t{8} << 20;     // CUPTI's samples use 8 MiB
constexpr size_t kChunkRawBytes = size_t{1} << 20;   // records per chunk before it is written
constexpr size_t kMaxQueuedItems = size_t{1} << 20;  // bounds the queue when the disk is slow
constexpr auto kWakeInterval = std::chrono::milliseconds(250);
// A chunk is written after this long even when not full, so a killed process loses little.
constexpr int64_t kChunkMaxAgeNs = 1'000'000'000;

int64_t SteadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

}  // namespace

// Interns strings for the writer thread and answers DecodeActivity's questions.
class TraceWriter::Names : public DecodeContext {
 public:
  explicit Names(TraceWriter* writer) : writer_(writer) {}

  uint32_t Intern(std::string_view text) {
    if (auto it = ids_.find(text); it != ids_.end()) return it->second;
    const uint32_t id = next_id_++;
    ids_.emplace(std::string(text), id);
    AppendStringEntry(id, text, &writer_->strings_);
    ++writer_->string_count_;
    return id;
  }

  uint32_t KernelName(const char* name) override {
    const std::string_view mangled(name);
    if (auto it = kernel_ids_.find(mangled); it != kernel_ids_.end()) return it->second;
    // Kineto traces carry demangled names; so do EMO's, for the same kernel classes.
    int status = 0;
    char* demangled = abi::__cxa_demangle(name, nullptr, nullptr, &status);
    const uint32_t id = Intern(status == 0 && demangled != nullptr ? std::string_view(demangled) : mangled);
    std::free(demangled);
    kernel_ids_.emplace(std::string(mangled), id);
    return id;
  }

  uint32_t ApiName(bool driver, uint32_t cbid) override {
    const uint64_t key = (uint64_t{driver} << 32) | cbid;
    if (auto it = api_ids_.find(key); it != api_ids_.end()) return it->second;
    const char* name = nullptr;
    const CUptiResult r =
        cuptiGetCallbackName(driver ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API, cbid, &name);
    const std::string fallback = std::string(driver ? "driver_cbid_" : "runtime_cbid_") + std::to_string(cbid);
    const uint32_t id =
        Intern(r == CUPTI_SUCCESS && name != nullptr ? ApiDisplayName(driver, name) : std::string_view(fallback));
    api_ids_.emplace(key, id);
    return id;
  }

  uint32_t DeviceOfContext(uint32_t context) override {
    if (auto it = devices_.find(context); it != devices_.end()) return it->second;
    const uint32_t device = writer_->device_of_context_ ? writer_->device_of_context_(context) : 0xffffffffu;
    if (device != 0xffffffffu) devices_.emplace(context, device);
    return device;
  }

 private:
  TraceWriter* writer_;
  uint32_t next_id_ = 0;
  std::unordered_map<std::string, uint32_t, StringHash, std::equal_to<>> ids_;
  std::unordered_map<std::string, uint32_t, StringHash, std::equal_to<>> kernel_ids_;
  std::unordered_map<uint64_t, uint32_t> api_ids_;
  std::unordered_map<uint32_t, uint32_t> devices_;
};

bool TraceWriter::Start(int fd, std::string path, size_t pool_bytes,
                        std::function<uint32_t(uint32_t)> device_of_context) {
  path_ = std::move(path);
  device_of_context_ = std::move(device_of_context);
  if (!file_.Start(fd)) {
    const int error = file_.error_number();
    file_.Close();
    errno = error;  // for the caller's message
    return false;
  }
  max_buffers_ = std::max<size_t>(1, pool_bytes / kBufferBytes);
  records_.reserve(kChunkRawBytes + 256);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    accepting_ = true;
  }
  thread_ = StartNamedThread("emo-writer", [this] { Run(); });
  return true;
}

uint8_t* TraceWriter::AcquireBuffer(size_t* size) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!free_buffers_.empty()) {
    uint8_t* b = free_buffers_.back();
    free_buffers_.pop_back();
    *size = kBufferBytes;
    return b;
  }
  if (buffers_allocated_ < max_buffers_) {
    // CUPTI wants 8-byte aligned buffers; 64 keeps them on their own cache lines.
    auto* b = static_cast<uint8_t*>(std::aligned_alloc(64, kBufferBytes));
    if (b != nullptr) {
      ++buffers_allocated_;
      *size = kBufferBytes;
      return b;
    }
  }
  buffers_refused_.fetch_add(1, std::memory_order_relaxed);
  *size = 0;
  return nullptr;
}

void TraceWriter::ReleaseBuffer(uint8_t* buffer) {
  std::lock_guard<std::mutex> lock(mutex_);
  free_buffers_.push_back(buffer);
}

void TraceWriter::Push(Item item) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!accepting_) {
      if (item.kind == Item::Kind::kBuffer) free_buffers_.push_back(item.buffer);
      return;
    }
    // Buffers always go in: they belong to the pool and must come back to it.
    if (item.kind != Item::Kind::kBuffer && queue_.size() >= kMaxQueuedItems) {
      queue_dropped_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    if (item.kind == Item::Kind::kBuffer) buffers_queued_.fetch_add(1, std::memory_order_release);
    queue_.push_back(std::move(item));
  }
  wake_.notify_one();
}

bool TraceWriter::WaitBuffersDecoded(int64_t patience_ns) const {
  const uint64_t queued = buffers_queued_.load(std::memory_order_acquire);
  const auto give_up_at = std::chrono::steady_clock::now() + std::chrono::nanoseconds(patience_ns);
  while (buffers_decoded_.load(std::memory_order_acquire) < queued) {
    if (std::chrono::steady_clock::now() > give_up_at) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  return true;
}

void TraceWriter::SubmitBuffer(uint8_t* buffer, size_t valid_bytes) {
  if (buffer == nullptr) return;
  Item item;
  item.kind = Item::Kind::kBuffer;
  item.buffer = buffer;
  item.valid = valid_bytes;
  Push(std::move(item));
}

void TraceWriter::AddRecord(const DecodedRecord& record, std::string name, int name_offset) {
  Item item;
  item.kind = Item::Kind::kRecord;
  item.record = record;
  item.text = std::move(name);
  item.name_offset = name_offset;
  Push(std::move(item));
}

void TraceWriter::AddMeta(std::string text) {
  Item item;
  item.kind = Item::Kind::kMeta;
  item.text = std::move(text);
  Push(std::move(item));
}

TraceWriter::~TraceWriter() {
  if (thread_.joinable()) thread_.join();
  for (uint8_t* b : free_buffers_) std::free(b);
}

void TraceWriter::Finish(std::string end_meta, bool clean) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (finishing_ || !accepting_) return;
    finishing_ = true;
    end_meta_ = std::move(end_meta);
    clean_ = clean;
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
}

TraceWriter::Stats TraceWriter::stats() const {
  Stats s;
  s.records = written_.load(std::memory_order_relaxed);
  s.incomplete = incomplete_.load(std::memory_order_relaxed);
  s.filtered = filtered_.load(std::memory_order_relaxed);
  s.unknown = unknown_.load(std::memory_order_relaxed);
  s.buffers_refused = buffers_refused_.load(std::memory_order_relaxed);
  s.queue_dropped = queue_dropped_.load(std::memory_order_relaxed);
  return s;
}

void TraceWriter::Run() {
  Names names(this);
  std::deque<Item> batch;
  while (true) {
    bool stop = false;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait_for(lock, kWakeInterval, [&] { return !queue_.empty() || finishing_; });
      batch.swap(queue_);
      stop = finishing_ && batch.empty();
      if (stop) accepting_ = false;
    }
    for (Item& item : batch) Handle(item, &names);
    batch.clear();
    // Refused buffer requests are counted by the requesting thread and reported here, once
    // per wake-up, so a starved CUPTI asking again and again makes one record, not thousands.
    const uint64_t refused = buffers_refused_.load(std::memory_order_relaxed);
    if (refused > refused_reported_) {
      fmt::DroppedRecord d{};
      d.time_ns = CuptiNow();
      d.dropped = refused - refused_reported_;
      d.context = 0xffffffffu;
      d.stream = 0xffffffffu;
      d.reason = 2;
      DecodedRecord r;
      r.type = fmt::RecordType::kDropped;
      r.size = sizeof(d);
      std::memcpy(r.body, &d, sizeof(d));
      Append(r);
      refused_reported_ = refused;
    }
    if (record_count_ > 0 && SteadyNs() - records_since_ns_ > kChunkMaxAgeNs) FlushRecords();
    if (stop) break;
  }
  FlushRecords();
  if (!end_meta_.empty()) {
    // The counts, now that the last records are written.
    const Stats s = stats();
    end_meta_ += "records.written=" + std::to_string(s.records) + "\n";
    end_meta_ += "records.incomplete=" + std::to_string(s.incomplete) + "\n";
    end_meta_ += "records.filtered=" + std::to_string(s.filtered) + "\n";
    end_meta_ += "records.unknown=" + std::to_string(s.unknown) + "\n";
    end_meta_ += "records.queue_dropped=" + std::to_string(s.queue_dropped) + "\n";
    end_meta_ += "buffers.refused=" + std::to_string(s.buffers_refused) + "\n";
    WriteChunk(fmt::ChunkKind::kMeta, 0, std::vector<unsigned char>(end_meta_.begin(), end_meta_.end()), false);
  }
  if (clean_) WriteChunk(fmt::ChunkKind::kEnd, 0, {}, false);
  file_.Close();
}

void TraceWriter::Handle(Item& item, Names* names) {
  switch (item.kind) {
    case Item::Kind::kBuffer:
      DecodeBuffer(item.buffer, item.valid, names);
      ReleaseBuffer(item.buffer);
      buffers_decoded_.fetch_add(1, std::memory_order_release);
      return;
    case Item::Kind::kRecord:
      if (item.name_offset >= 0 && static_cast<size_t>(item.name_offset) + 4 <= item.record.size) {
        const uint32_t id = names->Intern(item.text);
        std::memcpy(item.record.body + item.name_offset, &id, 4);
      }
      Append(item.record);
      return;
    case Item::Kind::kMeta:
      FlushRecords();
      WriteChunk(fmt::ChunkKind::kMeta, 0, std::vector<unsigned char>(item.text.begin(), item.text.end()), false);
      return;
  }
}

void TraceWriter::DecodeBuffer(uint8_t* buffer, size_t valid, Names* names) {
  if (valid == 0) return;
  const CuptiUse use;  // never beside a detach (cuptiFinalize)
  CUpti_Activity* record = nullptr;
  DecodedRecord out;
  while (true) {
    const CUptiResult r = cuptiActivityGetNextRecord(buffer, valid, &record);
    if (r == CUPTI_ERROR_MAX_LIMIT_REACHED) return;
    if (r != CUPTI_SUCCESS) {
      ReportCuptiError("cuptiActivityGetNextRecord", r);
      return;
    }
    switch (DecodeActivity(record, names, &out)) {
      case DecodeResult::kRecord:
        Append(out);
        break;
      case DecodeResult::kIncomplete:
        incomplete_.fetch_add(1, std::memory_order_relaxed);
        break;
      case DecodeResult::kFiltered:
        filtered_.fetch_add(1, std::memory_order_relaxed);
        break;
      case DecodeResult::kUnknown:
        unknown_.fetch_add(1, std::memory_order_relaxed);
        break;
    }
  }
}

void TraceWriter::Append(const DecodedRecord& record) {
  if (record_count_ == 0) records_since_ns_ = SteadyNs();
  const size_t at = records_.size();
  records_.resize(at + sizeof(fmt::RecordHeader) + record.size);
  const fmt::RecordHeader header{static_cast<uint16_t>(record.type), record.size};
  std::memcpy(records_.data() + at, &header, sizeof(header));
  std::memcpy(records_.data() + at + sizeof(header), record.body, record.size);
  ++record_count_;
  if (records_.size() >= kChunkRawBytes) FlushRecords();
}

void TraceWriter::FlushRecords() {
  // Strings first, so a reader meets each id before the records that use it.
  if (string_count_ > 0) {
    WriteChunk(fmt::ChunkKind::kStrings, string_count_, strings_, true);
    strings_.clear();
    string_count_ = 0;
  }
  if (record_count_ == 0) return;
  WriteChunk(fmt::ChunkKind::kRecords, record_count_, records_, true);
  written_.fetch_add(record_count_, std::memory_order_relaxed);
  records_.clear();
  record_count_ = 0;
}

void TraceWriter::WriteChunk(fmt::ChunkKind kind, uint32_t count, const std::vector<unsigned char>& payload,
                             bool compress) {
  if (file_.failed()) return;
  if (file_.Write(kind, count, payload.data(), payload.size(), compress)) return;
  failed_.store(true, std::memory_order_release);
  std::fprintf(stderr,
               "emo trace: writing %s failed (%s)%s; tracing stops here and the file keeps the %llu bytes "
               "written before\n",
               path_.c_str(), std::strerror(file_.error_number()), file_.disk_full() ? ": the disk is full" : "",
               static_cast<unsigned long long>(file_.bytes_written()));
}

}  // namespace emo::runtime
