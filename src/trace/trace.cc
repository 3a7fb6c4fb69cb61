#include "emo/trace/trace.h"

#include <algorithm>
#include <numeric>

namespace emo::trace {

StringId StringPool::Intern(std::string_view s) {
  auto it = index_.find(s);
  if (it != index_.end()) return StringId(it->second);
  auto id = static_cast<uint32_t>(strings_.size());
  strings_.emplace_back(s);
  index_.emplace(strings_.back(), id);
  return StringId(id);
}

std::string_view SyncKindName(SyncKind k) {
  switch (k) {
    case SyncKind::kStreamWaitEvent: return "Stream Wait Event";
    case SyncKind::kEventSync: return "Event Sync";
    case SyncKind::kStreamSync: return "Stream Sync";
    case SyncKind::kContextSync: return "Context Sync";
    case SyncKind::kUnknown: return "Unknown";
  }
  return "Unknown";
}

ThreadId Trace::InternThread(int64_t pid, int64_t tid) {
  auto [it, inserted] = thread_index_.try_emplace({pid, tid}, static_cast<uint32_t>(threads.size()));
  if (inserted) threads.push_back({pid, tid, {}});
  return ThreadId(it->second);
}

StreamId Trace::InternStream(int32_t device, int64_t stream) {
  auto [it, inserted] =
      stream_index_.try_emplace({device, stream}, static_cast<uint32_t>(streams.size()));
  if (inserted) streams.push_back({device, stream});
  return StreamId(it->second);
}

namespace {

// Order of rows by (start asc, end desc): parents before their nested children.
template <typename Table>
std::vector<uint32_t> SortedOrder(const Table& t) {
  std::vector<uint32_t> order(t.size());
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    if (t.start[a] != t.start[b]) return t.start[a] < t.start[b];
    return t.end[a] > t.end[b];
  });
  return order;
}

template <typename T>
void Permute(std::vector<T>& v, const std::vector<uint32_t>& order) {
  std::vector<T> out;
  out.reserve(v.size());
  for (uint32_t i : order) out.push_back(std::move(v[i]));
  v = std::move(out);
}

// `order` (SortedOrder) without the rows identical to an earlier one by `same`. Rows without a
// correlation id are always kept: two CPU operators of one thread may share a name and, at the
// profiler's microseconds, their times; a correlation id names one call or one op.
template <typename Table, typename Same>
std::vector<uint32_t> WithoutDuplicates(const Table& t, std::vector<uint32_t> order, Same same, uint64_t* dropped) {
  std::vector<uint32_t> kept;
  kept.reserve(order.size());
  size_t run = 0;  // first kept row of the current run of equal (start, end)
  for (uint32_t row : order) {
    if (!kept.empty() && (t.start[kept[run]] != t.start[row] || t.end[kept[run]] != t.end[row])) run = kept.size();
    bool duplicate = false;
    if (t.correlation[row] >= 0) {
      for (size_t k = run; k < kept.size() && !duplicate; ++k) duplicate = same(kept[k], row);
    }
    if (duplicate) {
      ++*dropped;
    } else {
      kept.push_back(row);
    }
  }
  return kept;
}

}  // namespace

void Trace::Finalize() {
  uint64_t duplicates = 0;
  {
    auto o = WithoutDuplicates(
        cpu, SortedOrder(cpu),
        [&](uint32_t a, uint32_t b) {
          return (cpu.kind[a] == CpuKind::kRuntime || cpu.kind[a] == CpuKind::kDriver) && cpu.kind[a] == cpu.kind[b] &&
                 cpu.correlation[a] == cpu.correlation[b] && cpu.thread[a] == cpu.thread[b] && cpu.name[a] == cpu.name[b];
        },
        &duplicates);
    Permute(cpu.thread, o); Permute(cpu.kind, o); Permute(cpu.name, o);
    Permute(cpu.start, o); Permute(cpu.end, o); Permute(cpu.correlation, o);
    Permute(cpu.external_id, o); Permute(cpu.cbid, o);
  }
  {
    auto o = WithoutDuplicates(
        gpu, SortedOrder(gpu),
        [&](uint32_t a, uint32_t b) {
          return gpu.kind[a] == gpu.kind[b] && gpu.correlation[a] == gpu.correlation[b] && gpu.stream[a] == gpu.stream[b] &&
                 gpu.name[a] == gpu.name[b];
        },
        &duplicates);
    Permute(gpu.kind, o); Permute(gpu.name, o); Permute(gpu.stream, o);
    Permute(gpu.start, o); Permute(gpu.end, o); Permute(gpu.correlation, o);
    Permute(gpu.external_id, o); Permute(gpu.launch, o); Permute(gpu.bytes, o);
    Permute(gpu.graph_id, o); Permute(gpu.collective, o);
  }
  {
    auto o = SortedOrder(syncs);
    Permute(syncs.kind, o); Permute(syncs.device, o); Permute(syncs.stream, o);
    Permute(syncs.start, o); Permute(syncs.end, o); Permute(syncs.correlation, o);
    Permute(syncs.wait_on_stream, o); Permute(syncs.wait_on_record_corr, o);
    Permute(syncs.event_id, o);
  }
  {
    auto o = SortedOrder(cuda_events);
    Permute(cuda_events.event_id, o); Permute(cuda_events.device, o);
    Permute(cuda_events.stream, o); Permute(cuda_events.correlation, o);
    Permute(cuda_events.start, o); Permute(cuda_events.end, o);
  }
  if (duplicates > 0) diagnostics.Add(Diag::kDuplicateEvent, duplicates);
  std::stable_sort(gpu_annotations.begin(), gpu_annotations.end(),
                   [](const GpuAnnotation& a, const GpuAnnotation& b) { return a.start < b.start; });
}

std::vector<std::string> GpuNamesUsed(const Trace& t) {
  std::vector<bool> used;
  for (uint32_t i = 0; i < t.gpu.size(); ++i) {
    const auto dev = static_cast<size_t>(std::max(0, t.streams[t.gpu.stream[i].value()].device));
    if (used.size() <= dev) used.resize(dev + 1, false);
    used[dev] = true;
  }
  std::vector<std::string> names;
  for (size_t dev = 0; dev < used.size(); ++dev) {
    if (used[dev]) names.push_back(dev < t.meta.device_names.size() ? t.meta.device_names[dev] : "");
  }
  return names;
}

std::vector<std::vector<TimeNs>> RecordedCpuPoints(const Trace& t) {
  std::vector<std::vector<TimeNs>> points(t.threads.size());
  for (uint32_t i = 0; i < t.cpu.size(); ++i) {
    if (t.cpu.kind[i] != CpuKind::kOp && t.cpu.kind[i] != CpuKind::kAnnotation) continue;
    auto& p = points[t.cpu.thread[i].value()];
    p.push_back(t.cpu.start[i]);
    p.push_back(t.cpu.end[i]);
  }
  for (auto& p : points) std::sort(p.begin(), p.end());
  return points;
}

}  // namespace emo::trace
