#include "emo_trace_reader.h"

#include <fmt/format.h>
#include <libdeflate.h>

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "emo/trace/emo_format.h"
#include "emo_trace_records.h"

namespace emo::trace {
namespace {

namespace ef = emo_format;

struct DecompressorFree {
  void operator()(libdeflate_decompressor* d) const { libdeflate_free_decompressor(d); }
};

// Walks the chunks of `data` after the file header, decoding each payload; stops at the first
// chunk that is cut short or damaged and says where in `records->end_note`.
void WalkChunks(const std::string& path, std::string_view data, EmoRecords* records) {
  std::unique_ptr<libdeflate_decompressor, DecompressorFree> inflater(libdeflate_alloc_decompressor());
  size_t at = sizeof(ef::FileHeader);
  size_t chunks = 0;
  std::string payload;
  auto stop = [&](std::string_view why) {
    records->end_note = fmt::format("{}: the trace ends at byte {} of {} after {} whole chunks: {}", path, at,
                                    data.size(), chunks, why);
  };
  while (at < data.size()) {
    ef::ChunkHeader h;
    if (data.size() - at < sizeof(h)) return stop("a chunk header cut short (the program was killed or the disk full?)");
    std::memcpy(&h, data.data() + at, sizeof(h));
    if (std::memcmp(h.magic, ef::kChunkMagic, sizeof(h.magic)) != 0) return stop("no chunk starts there (damaged file)");
    if (data.size() - at - sizeof(h) < h.stored_bytes) {
      return stop("a chunk's payload cut short (the program was killed or the disk full?)");
    }
    const auto* stored = reinterpret_cast<const unsigned char*>(data.data() + at + sizeof(h));
    if (libdeflate_crc32(0, stored, h.stored_bytes) != h.crc32) return stop("a chunk whose checksum does not match");
    if (h.encoding == static_cast<uint32_t>(ef::Encoding::kRaw)) {
      payload.assign(reinterpret_cast<const char*>(stored), h.stored_bytes);
    } else if (h.encoding == static_cast<uint32_t>(ef::Encoding::kZlib) && inflater != nullptr) {
      // Deflate cannot expand more than ~1032x: a larger stated size is damage, not data.
      if (static_cast<uint64_t>(h.raw_bytes) > 1100ull * h.stored_bytes + 4096) {
        return stop("a compressed chunk whose stated size is impossible (damaged file)");
      }
      payload.resize(h.raw_bytes);
      size_t got = 0;
      if (libdeflate_zlib_decompress(inflater.get(), stored, h.stored_bytes, payload.data(), payload.size(), &got) !=
              LIBDEFLATE_SUCCESS ||
          got != h.raw_bytes) {
        return stop("a compressed chunk that does not inflate to its stated size");
      }
    } else {
      return stop(fmt::format("a chunk in an unknown encoding {}", h.encoding));
    }
    records->Add(static_cast<ef::ChunkKind>(h.kind), payload);
    at += sizeof(h) + h.stored_bytes;
    ++chunks;
    if (h.kind == static_cast<uint32_t>(ef::ChunkKind::kEnd)) {
      records->complete = true;
      if (at < data.size()) records->end_note = fmt::format("{}: {} bytes after the end chunk ignored", path, data.size() - at);
      return;
    }
  }
  if (!records->complete) stop("no end chunk (the program exited without the tracer's shutdown: killed or crashed?)");
}

// Kineto's memcpy names, so blocking-call rules that look at "Pageable" work the same.
std::string MemcpyName(const ef::MemcpyRecord& m) {
  auto kind = [](uint8_t k) -> std::string_view {
    switch (k) {
      case 1: return "HtoD";
      case 2: return "DtoH";
      case 3: return "HtoA";
      case 4: return "AtoH";
      case 5: return "AtoA";
      case 6: return "AtoD";
      case 7: return "DtoA";
      case 8: return "DtoD";
      case 9: return "HtoH";
      case 10: return "PtoP";
      default: return "Unknown";
    }
  };
  auto memory = [](uint8_t k) -> std::string_view {
    switch (k) {
      case 1: return "Pageable";
      case 2: return "Pinned";
      case 3: return "Device";
      case 4: return "Array";
      case 5: return "Managed";
      case 6: return "Device Static";
      case 7: return "Managed Static";
      default: return "Unknown";
    }
  };
  return fmt::format("Memcpy {} ({} -> {})", kind(m.copy_kind), memory(m.src_kind), memory(m.dst_kind));
}

SyncKind KindOf(uint32_t type) {
  switch (static_cast<ef::SyncType>(type)) {
    case ef::SyncType::kEventSynchronize: return SyncKind::kEventSync;
    case ef::SyncType::kStreamWaitEvent: return SyncKind::kStreamWaitEvent;
    case ef::SyncType::kStreamSynchronize: return SyncKind::kStreamSync;
    case ef::SyncType::kContextSynchronize: return SyncKind::kContextSync;
    default: return SyncKind::kUnknown;
  }
}

constexpr uint32_t kMaxDevices = 4096;

int64_t OrNone(uint64_t v) { return v == ef::kNone ? -1 : static_cast<int64_t>(v); }
int64_t OrNone32(uint32_t v) { return v == 0xffffffffu ? -1 : static_cast<int64_t>(v); }

class Builder {
 public:
  Builder(const std::string& path, EmoRecords r) : r_(std::move(r)) {
    t_.meta.source_path = path;
    t_.meta.format = "emo";
  }

  Trace Build() {
    FindWindow();
    Meta();
    Api();
    GpuOps();
    Syncs();
    Ranges();
    Iterations();
    t_.meta.run = MeasureRun(r_);
    if (!r_.complete) t_.diagnostics.Add(Diag::kTraceTruncated);
    if (t_.meta.run->dropped_records > 0) t_.diagnostics.Add(Diag::kRecordsDropped, static_cast<uint64_t>(t_.meta.run->dropped_records));
    if (r_.skipped > 0) t_.diagnostics.Add(Diag::kEmoRecordSkipped, r_.skipped);
    t_.Finalize();
    return std::move(t_);
  }

 private:
  std::string_view Str(uint32_t id) const {
    auto it = r_.strings.find(id);
    return it == r_.strings.end() ? std::string_view("(unnamed)") : std::string_view(it->second);
  }

  // The tracer records from the start until it finds the loop, and may take several windows
  // (docs/runtime.md): the trace is the last window's iterations, with the lead-in iteration
  // before them (activities go on there, so the first traced iteration's launches are whole).
  void FindWindow() {
    const int64_t first = MetaInt(r_.meta, "window.first_iteration", -1);
    const int64_t last = MetaInt(r_.meta, "window.last_iteration", -1);
    for (const auto& it : r_.iterations) {
      const auto i = static_cast<int64_t>(it.index);
      const bool in = first >= 0 && last >= first ? (i >= first && i <= last) : it.traced != 0;
      if (!in || it.traced == 0) continue;
      window_.push_back(it);
    }
    std::sort(window_.begin(), window_.end(), [](const auto& a, const auto& b) { return a.index < b.index; });
    if (window_.empty()) return;
    from_ = window_.front().start_ns;
    to_ = window_.back().end_ns;
    for (const auto& it : r_.iterations) {
      if (it.index + 1 == window_.front().index) from_ = std::min(from_, it.start_ns);
    }
  }

  bool InWindow(int64_t start, int64_t end) const { return window_.empty() || (end >= from_ && start <= to_); }
  bool Kept(uint64_t correlation) const { return window_.empty() || kept_.count(correlation) != 0; }

  void Meta() {
    t_.meta.rank = MetaInt(r_.meta, "rank", -1);
    t_.meta.world_size = MetaInt(r_.meta, "world_size", -1);
    t_.meta.cuda_driver_version = MetaInt(r_.meta, "cuda.driver_version", -1);
    t_.meta.cupti_version = MetaInt(r_.meta, "cupti.version", -1);
    for (const auto& g : r_.gpus) {
      if (g.device >= kMaxDevices) continue;  // damage: no process sees that many GPUs
      if (t_.meta.device_names.size() <= g.device) t_.meta.device_names.resize(g.device + 1);
      t_.meta.device_names[g.device] = std::string(Str(g.name));
    }
    t_.meta.has_cuda_sync = !r_.syncs.empty();
    t_.meta.raw_events = static_cast<int64_t>(r_.total_records);
  }

  void Api() {
    std::unordered_map<uint64_t, int64_t> external;
    for (const auto& e : r_.external) external[e.correlation] = OrNone(e.external_id);
    std::unordered_map<uint32_t, size_t> launches;
    auto& c = t_.cpu;
    for (const auto& a : r_.api) {
      if (!window_.empty() && (a.start_ns < from_ || a.start_ns > to_)) continue;
      kept_.insert(a.correlation);
      const ThreadId th = t_.InternThread(a.pid, a.tid);
      c.thread.push_back(th);
      c.kind.push_back(a.driver != 0 ? CpuKind::kDriver : CpuKind::kRuntime);
      const std::string_view name = ef::BareApiName(Str(a.name));
      c.name.push_back(t_.strings.Intern(name));
      c.start.push_back(a.start_ns);
      c.end.push_back(std::max(a.end_ns, a.start_ns));
      c.correlation.push_back(static_cast<int64_t>(a.correlation));
      auto ex = external.find(a.correlation);
      c.external_id.push_back(ex == external.end() ? -1 : ex->second);
      c.cbid.push_back(static_cast<int32_t>(a.cbid));
      if (name.find("Launch") != std::string_view::npos) ++launches[th.value()];
    }
    // The thread that launched most work carries the iteration annotations.
    size_t best = 0;
    for (const auto& [th, n] : launches) {
      if (n > best || (n == best && th < main_thread_.value())) {
        best = n;
        main_thread_ = ThreadId(th);
      }
    }
    if (!main_thread_.valid() && !t_.threads.empty()) main_thread_ = ThreadId(0);
  }

  void PushGpu(GpuKind kind, std::string_view name, uint32_t device, uint32_t stream, int64_t start, int64_t end,
               uint64_t correlation, const LaunchConfig& launch, uint64_t bytes, uint64_t graph_id) {
    auto& g = t_.gpu;
    g.kind.push_back(kind);
    g.name.push_back(t_.strings.Intern(name));
    g.stream.push_back(t_.InternStream(static_cast<int32_t>(device), stream));
    g.start.push_back(start);
    g.end.push_back(std::max(end, start));
    g.correlation.push_back(static_cast<int64_t>(correlation));
    g.external_id.push_back(-1);
    g.launch.push_back(launch);
    g.bytes.push_back(static_cast<int64_t>(bytes));
    g.graph_id.push_back(OrNone(graph_id));
    g.collective.push_back(CollectiveId());
  }

  void GpuOps() {
    for (const auto& k : r_.kernels) {
      if (!Kept(k.correlation)) continue;
      LaunchConfig l;
      for (int i = 0; i < 3; ++i) {
        l.grid[i] = k.grid[i];
        l.block[i] = k.block[i];
      }
      l.registers_per_thread = k.registers_per_thread;
      // Summed in 64 bits; a sum no GPU has (negative or past int32: damage) reads as unknown (0).
      const int64_t shared = int64_t{k.static_shared_memory} + k.dynamic_shared_memory;
      l.shared_memory = shared >= 0 && shared <= INT32_MAX ? static_cast<int32_t>(shared) : 0;
      PushGpu(GpuKind::kKernel, Str(k.name), k.device, k.stream, k.start_ns, k.end_ns, k.correlation, l, 0,
              k.graph_id);
    }
    for (const auto& m : r_.memcpys) {
      if (!Kept(m.correlation)) continue;
      PushGpu(GpuKind::kMemcpy, MemcpyName(m), m.device, m.stream, m.start_ns, m.end_ns, m.correlation, {}, m.bytes,
              m.graph_id);
    }
    for (const auto& m : r_.memsets) {
      if (!Kept(m.correlation)) continue;
      PushGpu(GpuKind::kMemset, "Memset (Device)", m.device, m.stream, m.start_ns, m.end_ns, m.correlation, {},
              m.bytes, m.graph_id);
    }
  }

  // Waits and event syncs name their record by cudaEventSyncId: resolved exactly here.
  void Syncs() {
    std::unordered_map<uint64_t, const ef::CudaEventRecord*> by_sync_id;
    for (const auto& e : r_.events) {
      if (!Kept(e.correlation)) continue;
      if (e.event_sync_id != ef::kNone) by_sync_id[e.event_sync_id] = &e;
      auto& ce = t_.cuda_events;
      ce.event_id.push_back(e.event);
      ce.device.push_back(static_cast<int32_t>(e.device));
      ce.stream.push_back(e.stream);
      ce.correlation.push_back(static_cast<int64_t>(e.correlation));
      ce.start.push_back(e.device_ns);
      ce.end.push_back(e.device_ns);
    }
    auto& s = t_.syncs;
    for (const auto& x : r_.syncs) {
      if (!Kept(x.correlation)) continue;
      // A wait in the lead-in iteration may name a record made before it, which the trace does
      // not keep: the lead-in is not analysed, so the wait goes rather than show as unresolved.
      const auto rec = x.event_sync_id == ef::kNone ? by_sync_id.end() : by_sync_id.find(x.event_sync_id);
      const bool resolved = rec != by_sync_id.end();  // by_sync_id holds kept records only
      if (!resolved && !window_.empty() && x.start_ns < window_.front().start_ns) continue;
      s.kind.push_back(KindOf(x.type));
      s.device.push_back(static_cast<int32_t>(x.device));
      s.stream.push_back(OrNone32(x.stream));
      s.start.push_back(x.start_ns);
      s.end.push_back(std::max(x.end_ns, x.start_ns));
      s.correlation.push_back(static_cast<int64_t>(x.correlation));
      s.event_id.push_back(OrNone32(x.cuda_event));
      s.wait_on_stream.push_back(resolved ? static_cast<int64_t>(rec->second->stream) : -1);
      s.wait_on_record_corr.push_back(resolved ? static_cast<int64_t>(rec->second->correlation) : -1);
    }
  }

  void PushAnnotation(ThreadId th, std::string_view name, int64_t start, int64_t end) {
    auto& c = t_.cpu;
    c.thread.push_back(th);
    c.kind.push_back(CpuKind::kAnnotation);
    c.name.push_back(t_.strings.Intern(name));
    c.start.push_back(start);
    c.end.push_back(std::max(start, end));
    c.correlation.push_back(-1);
    c.external_id.push_back(-1);
    c.cbid.push_back(-1);
  }

  void Ranges() {
    for (const auto& r : r_.ranges) {
      if (!InWindow(r.start_ns, r.end_ns)) continue;
      const std::string_view name = Str(r.name);
      if (name.starts_with("ProfilerStep#")) program_marks_steps_ = true;
      PushAnnotation(t_.InternThread(r.pid, r.tid), name, r.start_ns, r.end_ns);
    }
  }

  void Iterations() {
    if (program_marks_steps_ || !main_thread_.valid()) return;
    for (const auto& it : window_) {
      PushAnnotation(main_thread_, fmt::format("ProfilerStep#{}", it.index), it.start_ns, it.end_ns);
    }
  }

  EmoRecords r_;
  Trace t_;
  std::vector<emo_format::IterationRecord> window_;  // the last window's traced iterations
  int64_t from_ = 0, to_ = 0;                        // its host time span, lead-in included
  std::unordered_set<uint64_t> kept_;                // correlations of the API calls kept
  ThreadId main_thread_;
  bool program_marks_steps_ = false;
};

}  // namespace

bool EmoTraceReader::Sniff(std::string_view head) const {
  return head.size() >= sizeof(ef::kFileMagic) &&
         std::memcmp(head.data(), ef::kFileMagic, sizeof(ef::kFileMagic)) == 0;
}

Result<Trace> EmoTraceReader::Read(const std::string& path, std::string data) const {
  ef::FileHeader h;
  if (data.size() < sizeof(h)) return ParseError(fmt::format("{}: an EMO trace cut inside its 16-byte header", path));
  std::memcpy(&h, data.data(), sizeof(h));
  if (h.version > ef::kVersion) {
    return ParseError(fmt::format("{}: EMO trace format version {}, newer than this emo reads ({}); update emo", path,
                                  h.version, ef::kVersion));
  }
  EmoRecords records;
  WalkChunks(path, data, &records);
  data.clear();
  data.shrink_to_fit();
  return Builder(path, std::move(records)).Build();
}

}  // namespace emo::trace
