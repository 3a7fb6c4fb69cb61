// KernelWorkFromTrace: with ActivityFromTrace, the places the model stage reads a Trace.
#include "emo/model/kernel_work.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "emo/trace/trace.h"

namespace emo::model {
namespace {

bool IsMatrixMultiplyKind(int share_kind) {
  return share_kind == kCudaCoreGemmShareKind || share_kind == static_cast<int>(KernelKind::kGemm) ||
         share_kind == static_cast<int>(KernelKind::kConv) || share_kind == static_cast<int>(KernelKind::kAttention);
}

// A framework operator that runs a convolution: a word of its name (after the namespace, split at
// '_') begins with "conv" and is not "convert..." (aten::cudnn_convolution,
// aten::convolution_backward, aten::_conv_depthwise2d, quantized::conv2d_relu; not
// aten::_convert_weight_to_int4pack).
bool IsConvolutionOp(std::string_view name) {
  if (const size_t ns = name.rfind("::"); ns != std::string_view::npos) name.remove_prefix(ns + 2);
  for (size_t begin = 0; begin < name.size();) {
    const size_t end = std::min(name.find('_', begin), name.size());
    const std::string_view word = name.substr(begin, end - begin);
    if (word.starts_with("conv") && !word.starts_with("convert")) return true;
    begin = end + 1;
  }
  return false;
}

// The name rules of a trace's kernels, each name read once (names repeat by the thousand).
class NameRules {
 public:
  struct Rules {
    bool tf32 = false;  // IsTf32
    // For a GEMM whose name states its tile: the tile's multiply-adds per byte of its inputs
    // loaded, M·N/(M+N) over 4 bytes an element in TF32, 2 otherwise (0: none).
    double tile_intensity = 0.0;
  };
  explicit NameRules(const trace::Trace& trace) : trace_(trace) {}
  const Rules& Of(uint32_t op) {
    auto [it, inserted] = by_name_.try_emplace(trace_.gpu.name[op].value());
    if (inserted) {
      const std::string_view name = trace_.Name(trace_.gpu.name[op]);
      const bool tf32 = IsTf32(name);
      it->second = {tf32, GemmTileOf(name).Intensity() / (tf32 ? 4.0 : 2.0)};
    }
    return it->second;
  }

 private:
  const trace::Trace& trace_;
  std::unordered_map<uint32_t, Rules> by_name_;
};

// The matrix-multiply kernels of each operator whose work the trace knows: that work spread over
// them by duration, on the peak of their data type.
void FromShapes(const trace::Trace& trace, const std::vector<int>& kinds, const WorkPower& w, NameRules& rules,
                std::vector<KernelWork>& out) {
  if (trace.op_work.empty()) return;
  const trace::GpuOpTable& gpu = trace.gpu;
  std::unordered_map<int64_t, double> time_s;  // by External id: the operator's summed kernel time
  std::vector<uint32_t> ops;
  for (uint32_t i = 0; i < gpu.size(); ++i) {
    if (gpu.kind[i] != trace::GpuKind::kKernel || gpu.external_id[i] < 0 || gpu.end[i] <= gpu.start[i]) continue;
    const auto it = trace.op_work.find(gpu.external_id[i]);
    if (it == trace.op_work.end() || !(it->second.flops > 0.0)) continue;
    if (!IsMatrixMultiplyKind(kinds[i])) continue;
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
}

// Every tensor-core GEMM kernel (share kind gemm) whose work its operator's shapes left unknown
// (FromShapes) and whose name states its tile gets the work per µs its tile and launch imply
// (DeviceModel::TileWork). A GEMM kernel a convolution launched is of kind conv (ShareKindsOf).
void EstimateFromTiles(const trace::Trace& trace, const std::vector<int>& kinds, const DeviceModel& device,
                       NameRules& rules, std::vector<KernelWork>& out) {
  if (!device.work_power.tile.known) return;
  const trace::GpuOpTable& gpu = trace.gpu;
  for (uint32_t i = 0; i < gpu.size(); ++i) {
    if (out[i].Known() || kinds[i] != static_cast<int>(KernelKind::kGemm) || gpu.end[i] <= gpu.start[i]) continue;
    const double intensity = rules.Of(i).tile_intensity;
    if (intensity <= 0.0) continue;
    out[i].u = device.TileWork(intensity, trace::Blocks(gpu.launch[i]), NsToS(gpu.end[i] - gpu.start[i]));
    out[i].from_tile = out[i].Known();
  }
}

}  // namespace

std::vector<int> ShareKindsOf(const trace::Trace& trace) {
  const trace::GpuOpTable& gpu = trace.gpu;
  std::vector<int> out(gpu.size(), 0);
  std::unordered_set<int64_t> convolutions;  // External ids
  const trace::CpuEventTable& cpu = trace.cpu;
  std::unordered_map<uint32_t, bool> conv_name;  // operator names repeat by the thousand too
  for (size_t i = 0; i < cpu.size(); ++i) {
    if (cpu.kind[i] != trace::CpuKind::kOp || cpu.external_id[i] < 0) continue;
    auto [it, inserted] = conv_name.try_emplace(cpu.name[i].value(), false);
    if (inserted) it->second = IsConvolutionOp(trace.Name(cpu.name[i]));
    if (it->second) convolutions.insert(cpu.external_id[i]);
  }
  std::unordered_map<uint32_t, int> by_name;  // names repeat by the thousand: each read once
  for (uint32_t i = 0; i < gpu.size(); ++i) {
    auto [it, inserted] = by_name.try_emplace(gpu.name[i].value(), 0);
    if (inserted) it->second = ShareKindOfName(trace.Name(gpu.name[i]));
    const int kind = it->second;
    const bool gemm = kind == static_cast<int>(KernelKind::kGemm) || kind == kCudaCoreGemmShareKind;
    out[i] = gemm && gpu.external_id[i] >= 0 && convolutions.count(gpu.external_id[i])
                 ? static_cast<int>(KernelKind::kConv)
                 : kind;
  }
  return out;
}

std::vector<KernelWork> KernelWorkFromTrace(const trace::Trace& trace, const std::vector<int>& kinds,
                                            const DeviceModel& device) {
  std::vector<KernelWork> out(trace.gpu.size());
  if (!device.work_power.known) return out;
  NameRules rules(trace);
  FromShapes(trace, kinds, device.work_power, rules, out);
  EstimateFromTiles(trace, kinds, device, rules, out);
  return out;
}

WorkCoverage CoverageOf(const trace::Trace& trace, const std::vector<int>& kinds, const std::vector<KernelWork>& work,
                        const DeviceModel& device) {
  const trace::GpuOpTable& gpu = trace.gpu;
  WorkCoverage c;
  for (uint32_t i = 0; i < gpu.size(); ++i) {
    if (gpu.kind[i] != trace::GpuKind::kKernel || gpu.end[i] <= gpu.start[i]) continue;
    const double d = NsToS(gpu.end[i] - gpu.start[i]);
    c.kernel_s += d;
    const int kind = kinds[i];
    if (!IsMatrixMultiplyKind(kind)) continue;
    WorkCoverage::Kind& k = c.kinds[static_cast<size_t>(kind)];
    c.matmul_s += d;
    k.matmul_s += d;
    if (i >= work.size() || !work[i].Known()) continue;
    if (work[i].from_tile) {
      c.tile_s += d;
      k.tile_s += d;
      continue;
    }
    c.known_s += d;
    k.known_s += d;
    k.work_share_s += d * device.WorkShare(work[i].u, work[i].cuda_core);
    k.launch_share_s += d * device.KernelShare(trace::Blocks(gpu.launch[i]), trace::Threads(gpu.launch[i]), d,
                                               kind == kCudaCoreGemmShareKind);
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
