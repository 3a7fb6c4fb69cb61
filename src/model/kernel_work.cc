// KernelWorkFromTrace: with ActivityFromTrace, the places the model stage reads a Trace.
#include "emo/model/kernel_work.h"

#include <algorithm>
#include <unordered_map>

#include "emo/trace/trace.h"

namespace emo::model {
namespace {

bool IsMatrixMultiplyKind(int share_kind) {
  return share_kind == kCudaCoreGemmShareKind || share_kind == static_cast<int>(KernelKind::kGemm) ||
         share_kind == static_cast<int>(KernelKind::kConv) || share_kind == static_cast<int>(KernelKind::kAttention);
}

// The name rules of a trace's kernels, each name classified once (names repeat by the thousand).
class NameRules {
 public:
  struct Rules {
    bool matmul = false;  // IsMatrixMultiply
    bool tf32 = false;    // IsTf32
    int share_kind = 0;   // ShareKindOfName
  };
  explicit NameRules(const trace::Trace& trace) : trace_(trace) {}
  const Rules& Of(uint32_t op) {
    auto [it, inserted] = by_name_.try_emplace(trace_.gpu.name[op].value());
    if (inserted) {
      const std::string_view name = trace_.Name(trace_.gpu.name[op]);
      const int kind = ShareKindOfName(name);
      it->second = {IsMatrixMultiplyKind(kind), IsTf32(name), kind};
    }
    return it->second;
  }

 private:
  const trace::Trace& trace_;
  std::unordered_map<uint32_t, Rules> by_name_;
};

}  // namespace

bool IsMatrixMultiply(std::string_view kernel_name) { return IsMatrixMultiplyKind(ShareKindOfName(kernel_name)); }

std::vector<KernelWork> KernelWorkFromTrace(const trace::Trace& trace, const DeviceModel& device) {
  const trace::GpuOpTable& gpu = trace.gpu;
  std::vector<KernelWork> out(gpu.size());
  const WorkPower& w = device.work_power;
  if (!w.known || trace.op_work.empty()) return out;
  // The matrix-multiply kernels of each operator with known work, and their summed duration.
  NameRules rules(trace);
  std::unordered_map<int64_t, double> time_s;  // by External id
  std::vector<uint32_t> ops;
  for (uint32_t i = 0; i < gpu.size(); ++i) {
    if (gpu.kind[i] != trace::GpuKind::kKernel || gpu.external_id[i] < 0 || gpu.end[i] <= gpu.start[i]) continue;
    const auto it = trace.op_work.find(gpu.external_id[i]);
    if (it == trace.op_work.end() || !(it->second.flops > 0.0)) continue;
    if (!rules.Of(i).matmul) continue;
    time_s[gpu.external_id[i]] += NsToS(gpu.end[i] - gpu.start[i]);
    ops.push_back(i);
  }
  for (uint32_t i : ops) {
    const trace::OpWork& work = trace.op_work.at(gpu.external_id[i]);
    double peak = w.peak_16bit_flops;
    bool cuda_core = false;
    if (rules.Of(i).tf32) {
      peak = w.peak_tf32_flops;
    } else if (work.precision == trace::OpPrecision::kFp32) {
      peak = w.peak_fp32_flops;
      cuda_core = true;
    }
    out[i].u = std::min(1.0, work.flops / (time_s.at(gpu.external_id[i]) * peak));
    out[i].cuda_core = cuda_core;
  }
  return out;
}

WorkCoverage CoverageOf(const trace::Trace& trace, const std::vector<KernelWork>& work, const DeviceModel& device) {
  const trace::GpuOpTable& gpu = trace.gpu;
  WorkCoverage c;
  NameRules rules(trace);
  for (uint32_t i = 0; i < gpu.size(); ++i) {
    if (gpu.kind[i] != trace::GpuKind::kKernel || gpu.end[i] <= gpu.start[i]) continue;
    const double d = NsToS(gpu.end[i] - gpu.start[i]);
    c.kernel_s += d;
    const auto& r = rules.Of(i);
    if (!r.matmul) continue;
    WorkCoverage::Kind& k = c.kinds[static_cast<size_t>(r.share_kind)];
    c.matmul_s += d;
    k.matmul_s += d;
    if (i >= work.size() || !work[i].Known()) continue;
    c.known_s += d;
    k.known_s += d;
    k.work_share_s += d * device.WorkShare(work[i].u, work[i].cuda_core);
    k.launch_share_s += d * device.KernelShare(trace::Blocks(gpu.launch[i]), trace::Threads(gpu.launch[i]), d,
                                               r.share_kind == kCudaCoreGemmShareKind);
  }
  return c;
}

double OpShare(const DeviceModel& device, const KernelWork& work, int64_t blocks, int64_t threads_per_block,
               double duration_s, int share_kind) {
  if (work.Known()) return device.WorkShare(work.u, work.cuda_core);
  return device.KernelShare(blocks, threads_per_block, duration_s, share_kind == kCudaCoreGemmShareKind) *
         device.PowerShare(share_kind);
}

}  // namespace emo::model
