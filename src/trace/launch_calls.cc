#include "emo/trace/launch_calls.h"

#include <algorithm>
#include <unordered_map>

#include "emo/trace/emo_format.h"

namespace emo::trace {

std::vector<LaunchCall> CountedLaunchCalls(const Trace& t) {
  struct Raw {
    TimeNs start, end;
    uint32_t thread, event;
    bool runtime;
  };
  std::vector<Raw> raw;
  const auto& cpu = t.cpu;
  for (size_t i = 0; i < cpu.kind.size(); ++i) {
    const auto kind = cpu.kind[i];
    if (kind != CpuKind::kRuntime && kind != CpuKind::kDriver) continue;
    if (!emo_format::IsCountedLaunchApi(emo_format::BareApiName(t.Name(cpu.name[i])))) continue;
    raw.push_back({cpu.start[i], cpu.end[i], cpu.thread[i].value(), static_cast<uint32_t>(i), kind == CpuKind::kRuntime});
  }
  std::sort(raw.begin(), raw.end(), [](const Raw& x, const Raw& y) {
    return x.start != y.start ? x.start < y.start : x.runtime > y.runtime;  // the outer call first
  });
  std::unordered_map<uint32_t, TimeNs> runtime_end;  // by thread: end of its latest runtime launch
  std::vector<LaunchCall> calls;
  calls.reserve(raw.size());
  for (const Raw& r : raw) {
    if (r.runtime) {
      runtime_end[r.thread] = r.end;
    } else if (const auto it = runtime_end.find(r.thread); it != runtime_end.end() && r.start < it->second) {
      continue;
    }
    calls.push_back({r.start, r.end, r.event});
  }
  return calls;
}

}  // namespace emo::trace
