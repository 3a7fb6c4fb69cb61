// ActivityFromTrace: with KernelWorkFromTrace (kernel_work.cc), the places the model stage reads a
// Trace (trace is to its left).
#include <algorithm>
#include <unordered_map>
#include <vector>

#include "emo/model/iteration_energy.h"
#include "emo/model/kernel_work.h"
#include "emo/trace/trace.h"

namespace emo::model {

Result<ActivityProfile> ActivityFromTrace(const trace::Trace& trace, const DeviceModel& device) {
  const trace::CpuEventTable& cpu = trace.cpu;
  const trace::GpuOpTable& gpu = trace.gpu;
  if (gpu.size() == 0) return InvalidArgument(trace.meta.source_path + ": no GPU operations");

  std::vector<std::pair<TimeNs, TimeNs>> steps;
  std::unordered_map<int64_t, TimeNs> launch_time;  // correlation -> launch call start
  for (size_t i = 0; i < cpu.size(); ++i) {
    if (cpu.kind[i] == trace::CpuKind::kAnnotation &&
        trace.Name(cpu.name[i]).starts_with("ProfilerStep#")) {
      steps.emplace_back(cpu.start[i], cpu.end[i]);
    } else if ((cpu.kind[i] == trace::CpuKind::kRuntime ||
                cpu.kind[i] == trace::CpuKind::kDriver) &&
               cpu.correlation[i] >= 0) {
      launch_time.emplace(cpu.correlation[i], cpu.start[i]);
    }
  }
  std::sort(steps.begin(), steps.end());
  auto in_step = [&](TimeNs t) {
    auto it = std::upper_bound(steps.begin(), steps.end(), std::make_pair(t, TimeNs{INT64_MAX}));
    if (it == steps.begin()) return false;
    --it;
    return t >= it->first && t <= it->second;
  };

  std::vector<ClassInterval> ops;
  ops.reserve(gpu.size());
  const std::vector<int> kinds = ShareKindsOf(trace);
  const std::vector<KernelWork> work = KernelWorkFromTrace(trace, kinds, device);
  for (size_t i = 0; i < gpu.size(); ++i) {
    if (!steps.empty()) {
      auto it = launch_time.find(gpu.correlation[i]);
      if (it == launch_time.end() || !in_step(it->second)) continue;
    }
    const trace::LaunchConfig& l = gpu.launch[i];
    ops.push_back(ClassInterval{gpu.start[i], gpu.end[i], ShareKindClass(kinds[i]),
                                OpShare(device, work[i], trace::Blocks(l), trace::Threads(l),
                                        NsToS(gpu.end[i] - gpu.start[i]), kinds[i])});
  }
  if (ops.empty()) {
    return InvalidArgument(trace.meta.source_path +
                           ": no GPU operation was launched inside a ProfilerStep annotation");
  }
  return ProfileFromIntervals(ops, steps.empty() ? 1 : static_cast<int>(steps.size()));
}

}  // namespace emo::model
