// Kernel classes from kernel names: the coarse split the power/time model keeps priors for.
//
//   compute:        GEMM (cuBLAS, cuBLASLt nvjet, CUTLASS, Tensile), convolution (cuDNN, xmma
//                   implicit GEMM, Winograd, FFT), attention (flash, fmha, cuDNN SDPA)
//   memory:         elementwise, reductions (losses, pooling, GEMV, split-K reductions),
//                   softmax (its own kind: its time follows the clock, docs/model.md 6a), norms,
//                   activations with transcendental math (GELU, SiLU, tanh, sigmoid) and pooling
//                   (kinds of their own: they compute more per byte than other pointwise ops), copies (memcpy, cat, gather/scatter, index, transpose),
//                   memset and fills
//   communication:  NCCL and other collective / peer-to-peer kernels
//   other:          everything else (index arithmetic, sorting, unnamed Triton kernels, ...)
//
// The rules are ordered substring tests on the lower-cased name (the first match wins), written
// against the kernel names of the traces in ../shared/traces (tests/model/kernel_class_test.cc
// holds a representative list). Launch configuration is not used: on those traces the names
// alone decide every kernel that carries real time (see docs/model.md).
#pragma once

#include <cstdint>
#include <string_view>

namespace emo::model {

enum class KernelClass : uint8_t { kCompute = 0, kMemory = 1, kCommunication = 2, kOther = 3 };
inline constexpr int kNumKernelClasses = 4;

// The finer kind a name was recognized as; ClassOf maps it to its class.
enum class KernelKind : uint8_t {
  kGemm,
  kConv,
  kAttention,
  kElementwise,
  kReduction,
  kSoftmax,
  kNorm,
  kCopy,
  kMemset,
  kActivation,
  kPooling,
  kCollective,
  kOther,
};
inline constexpr int kNumKernelKinds = 13;
static_assert(static_cast<int>(KernelKind::kOther) + 1 == kNumKernelKinds);

std::string_view KernelClassName(KernelClass c);  // "compute", "memory", "communication", "other"
std::string_view KernelKindName(KernelKind k);    // "gemm", "conv", ..., "other"

// Parses a class name as printed by KernelClassName; false when unknown.
bool ParseKernelClass(std::string_view name, KernelClass& out);

KernelClass ClassOf(KernelKind kind);

// The kind of a GPU operation from its name (kernel, "Memcpy ..." or "Memset ..." as Kineto
// names them).
KernelKind ClassifyKind(std::string_view name);

// The class of a GPU operation from its name: ClassOf(ClassifyKind(name)).
KernelClass Classify(std::string_view name);

// A compute kernel that multiplies on the CUDA cores, not the tensor cores (fp32 without TF32:
// cuBLAS/CUTLASS SIMT sgemm, xmma f32f32_f32f32_f32, cuDNN's implicit sgemm convolutions).
bool IsCudaCoreGemm(std::string_view name);

// A kernel whose name says it works on 16-bit floats (bfloat16, half, bf16, fp16 in any case):
// PyTorch's template arguments say it; Triton's generated names do not (false).
bool IsHalfPrecision(std::string_view name);

// A kernel whose name says it multiplies in TF32 ("tf32" in any case: cuBLAS/cuDNN xmma
// `tf32f32`, CUTLASS `tf32gemm`; or CUTLASS's fp32 tensor-core instruction, `tensorop_s1688`, as
// cuDNN's RNN and convolution kernels name it): its work runs against the tf32 peak
// (kernel_work.h).
bool IsTf32(std::string_view name);

// The output tile one thread block of a tensor-core GEMM computes (M x N), as its library names
// it: cuBLAS/cuDNN xmma `tilesize128x256x32`, cuBLAS `nvjet_sm90_tst_256x128_64x4_...`, CUTLASS
// `..._128x256_32x3_...` / `cutlass3x_..._128x256x64_1x2x1_...`, cuBLAS `ampere_..._128x128_ldg8_...`:
// `tilesize` where the name has it, else the first MxN in it whose sides are multiples of 8 from
// 8 to 512 (cluster shapes such as 1x2 are not). {0, 0} when the name gives none (Triton, cuDNN's
// runtime-fused kernels). Its arithmetic intensity, M·N/(M+N) multiply-adds per element loaded,
// bounds how busy the block keeps its SM's tensor cores (kernel_work.h).
struct GemmTile {
  int m = 0;
  int n = 0;
  bool Known() const { return m > 0 && n > 0; }
  double Intensity() const { return Known() ? double(m) * n / (m + n) : 0.0; }
};
GemmTile GemmTileOf(std::string_view name);

}  // namespace emo::model
