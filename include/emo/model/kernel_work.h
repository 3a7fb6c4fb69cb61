// Each matrix-multiply kernel's work per µs, where the trace knows its operator's work: the input
// of the device file's work_power curves (device.h WorkShare; docs/model.md §6a).
//
// An operator whose shapes the trace recorded (Trace::op_work, by External id) gives its FLOPs to
// the matrix-multiply kernels it launched (GEMM, convolution, attention and CUDA-core GEMM kinds),
// spread over them by duration, so each of its kernels reaches
//   u = FLOPs / (the kernels' summed duration x the kernel's peak), at most 1,
// with the peak of its data type: tf32 where the kernel's name says so, fp32 (the CUDA cores) for
// float inputs otherwise, 16-bit (bf16/fp16) for the rest.
#pragma once

#include <array>
#include <cmath>
#include <limits>
#include <vector>

#include "emo/model/device.h"

namespace emo::trace {
struct Trace;
}

namespace emo::model {

struct KernelWork {
  double u = std::numeric_limits<double>::quiet_NaN();  // NaN: not known
  bool cuda_core = false;                                // on the fp32 peak and curve
  // Where u comes from: the operator's shapes (false), or, for a tensor-core GEMM whose operator's
  // work the trace does not give, its tile and launch (true: DeviceModel::TileWork).
  bool from_tile = false;
  bool Known() const { return !std::isnan(u); }
};

// The share kind (ShareKindOf) of each GPU operation of `trace`, in its gpu table's order: its
// kernel name's (ShareKindOfName), except that a GEMM kernel (share kind gemm or cuda_core_gemm)
// a convolution operator launched (a framework op, by External id, with a word of its name
// beginning "conv" but not "convert": aten::cudnn_convolution, aten::convolution_backward,
// aten::_conv_depthwise2d, ...) is a convolution. cuDNN runs 1x1 and
// other convolutions on cuBLAS's GEMM kernels; their depth, input channels x filter size, is often
// short of what the GEMM's tile needs to stay busy, and their time follows the clock as a
// convolution's (MobileNet's pointwise convolutions, BENCHMARKS.md Order 8). An EMO trace has no
// operators: names alone decide there.
std::vector<int> ShareKindsOf(const trace::Trace& trace);

// One entry per GPU operation of `trace` (its gpu table's order; `kinds`: ShareKindsOf(trace)):
// u from the operator's work where the trace has it; else, for a tensor-core GEMM (share kind
// gemm) whose name states its tile, u from the tile where the device file has work_power.tile;
// unknown otherwise (every op when the file has no work_power).
std::vector<KernelWork> KernelWorkFromTrace(const trace::Trace& trace, const std::vector<int>& kinds,
                                            const DeviceModel& device);

// How much of a trace's matrix-multiply kernel time the work curves see: a trace without
// record_shapes (or a device file without work_power) leaves every such kernel at its class's
// average power, which is what the plan report warns of.
struct WorkCoverage {
  double kernel_s = 0;  // summed duration of the trace's kernels
  double matmul_s = 0;  // of which matrix-multiply kernels' (kinds GEMM, conv, attention, CUDA-core GEMM)
  double known_s = 0;   // of which their work per µs is known from their operators' shapes
  double tile_s = 0;    // of which it is estimated from their tiles (KernelWork::from_tile)
  double KnownShare() const { return matmul_s > 0 ? known_s / matmul_s : 1.0; }
  // Known from shapes or estimated from tiles.
  double EstimatedShare() const { return matmul_s > 0 ? (known_s + tile_s) / matmul_s : 1.0; }
  // The same per matrix-multiply share kind (ShareKindOf), with what its kernels of known work
  // draw by their work against what their launch alone would give them: the evidence for the
  // kind's power share (DeviceModel::kind_power_share; bench/research/unknown_work_share.py).
  struct Kind {
    double matmul_s = 0;
    double known_s = 0;
    double tile_s = 0;
    double work_share_s = 0;    // Σ duration x WorkShare, over the kernels of known work
    double launch_share_s = 0;  // Σ duration x KernelShare (no power share), over the same
  };
  std::array<Kind, kNumShareKinds> kinds{};
};
// `kinds`: ShareKindsOf(trace).
WorkCoverage CoverageOf(const trace::Trace& trace, const std::vector<int>& kinds, const std::vector<KernelWork>& work,
                        const DeviceModel& device);

// The share (KernelShare's units) of one GPU op of share kind `share_kind` (ShareKindOf):
// WorkShare where its work is known, else the KernelShare of its launch configuration and
// duration times the kind's PowerShare.
double OpShare(const DeviceModel& device, const KernelWork& work, int64_t blocks, int64_t threads_per_block,
               double duration_s, int share_kind);

}  // namespace emo::model
