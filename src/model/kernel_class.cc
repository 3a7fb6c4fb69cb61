#include "emo/model/kernel_class.h"

#include <algorithm>
#include <string>

namespace emo::model {
namespace {

struct Rule {
  std::string_view pattern;  // lower case
  KernelKind kind;
};

// Ordered: the first rule whose pattern occurs in the lower-cased name wins. Order matters where
// names carry several hints: cuDNN's SDPA kernel names say "fprop" and "wgmma" but are attention;
// xmma "implicit_gemm" with fprop/dgrad/wgrad is convolution; cuBLAS split-K reductions and
// GEMV kernels contain "gemm"/"gemv" but move data rather than multiply tiles; cuDNN's fusion
// helpers around SDPA are pointwise.
constexpr Rule kRules[] = {
    // Communication first: NCCL names also say Reduce/Sum/Broadcast.
    {"nccl", KernelKind::kCollective},
    {"all_reduce", KernelKind::kCollective},
    {"allreduce", KernelKind::kCollective},
    {"all_gather", KernelKind::kCollective},
    {"allgather", KernelKind::kCollective},
    {"reduce_scatter", KernelKind::kCollective},
    {"reducescatter", KernelKind::kCollective},
    {"alltoall", KernelKind::kCollective},
    {"all_to_all", KernelKind::kCollective},
    {"nvshmem", KernelKind::kCollective},
    {"memcpy ptop", KernelKind::kCollective},  // peer-to-peer copy between GPUs
    // Runtime copies and sets (Kineto names them "Memcpy DtoD (...)", "Memset (Device)").
    {"memcpy", KernelKind::kCopy},
    {"memset", KernelKind::kMemset},
    // Index arithmetic helpers that would otherwise match conv/gemm words.
    {"offsets", KernelKind::kOther},
    // Pointwise/reduction helpers around cuDNN attention, and KV-cache writes (their names say
    // "flash" after the attention backend they feed).
    {"cudnn::fusion::", KernelKind::kElementwise},
    {"reshape_and_cache", KernelKind::kCopy},
    // Attention before conv (SDPA names contain fprop/bprop) and gemm.
    {"flash", KernelKind::kAttention},
    {"fmha", KernelKind::kAttention},
    {"sdpa", KernelKind::kAttention},
    {"attention", KernelKind::kAttention},
    {"attn", KernelKind::kAttention},
    // Reductions that live inside GEMM libraries.
    {"splitkreduce", KernelKind::kReduction},
    {"reducesplitk", KernelKind::kReduction},
    {"gemv2", KernelKind::kReduction},
    {"gemvnsp", KernelKind::kReduction},
    {"gemvx", KernelKind::kReduction},
    {"dot_kernel", KernelKind::kReduction},
    {"reduce_1block", KernelKind::kReduction},
    {"epilogue::", KernelKind::kElementwise},  // cuBLASLt epilogue kernels
    {"quantize", KernelKind::kElementwise},
    {"rotary", KernelKind::kElementwise},  // rotary_embedding: pointwise, not a lookup
    // Depthwise and grouped-direct convolutions (cuDNN's c1_k1 path: one input and one output
    // channel per group; PyTorch's conv_depthwise kernels): a weighted window per channel, as in
    // pooling, on the CUDA cores and bound by memory, not a matrix multiply.
    {"c1_k1", KernelKind::kPooling},
    {"depthwise", KernelKind::kPooling},
    {"groupeddirect", KernelKind::kPooling},
    {"direct_group", KernelKind::kPooling},
    // Convolution before gemm (implicit-GEMM convolutions say "gemm").
    {"convolution", KernelKind::kConv},
    {"conv1d", KernelKind::kConv},
    {"conv2d", KernelKind::kConv},
    {"conv3d", KernelKind::kConv},
    {"3dconv", KernelKind::kConv},
    {"::conv", KernelKind::kConv},
    {"conv_", KernelKind::kConv},
    {"fprop", KernelKind::kConv},
    {"dgrad", KernelKind::kConv},
    {"wgrad", KernelKind::kConv},
    {"scudnn", KernelKind::kConv},
    {"winograd", KernelKind::kConv},
    {"fft2d", KernelKind::kConv},
    // GEMM.
    {"gemm", KernelKind::kGemm},
    {"nvjet", KernelKind::kGemm},
    {"xmma", KernelKind::kGemm},
    {"wgmma", KernelKind::kGemm},
    {"matmul", KernelKind::kGemm},
    {"bmm_", KernelKind::kGemm},
    {"cijk_", KernelKind::kGemm},  // rocBLAS / Tensile
    {"triton_tem", KernelKind::kGemm},
    {"triton_mm", KernelKind::kGemm},
    // Norms before reductions (their names say "reduce"/"moments").
    {"layer_norm", KernelKind::kNorm},
    {"layernorm", KernelKind::kNorm},
    {"rms_norm", KernelKind::kNorm},
    {"rmsnorm", KernelKind::kNorm},
    {"batch_norm", KernelKind::kNorm},
    {"batchnorm", KernelKind::kNorm},
    {"group_norm", KernelKind::kNorm},
    {"groupnorm", KernelKind::kNorm},
    {"instance_norm", KernelKind::kNorm},
    {"gammabeta", KernelKind::kNorm},
    {"rowwisemoments", KernelKind::kNorm},
    {"bn_fw", KernelKind::kNorm},
    {"bn_bw", KernelKind::kNorm},
    // Data movement whose names also carry reduction words.
    {"catarray", KernelKind::kCopy},
    {"padding", KernelKind::kCopy},
    {"permute", KernelKind::kCopy},
    {"nchwtonhwc", KernelKind::kCopy},
    {"nhwctonchw", KernelKind::kCopy},
    // Reductions.
    {"triton_red", KernelKind::kReduction},
    {"triton_per", KernelKind::kReduction},
    {"reduce", KernelKind::kReduction},
    {"softmax", KernelKind::kSoftmax},
    {"nll_loss", KernelKind::kReduction},
    {"cross_entropy", KernelKind::kReduction},
    {"pool", KernelKind::kPooling},
    {"argmax", KernelKind::kReduction},
    {"topk", KernelKind::kReduction},
    {"histogram", KernelKind::kReduction},
    // Pointwise activations with transcendental math (and their backward kernels), before the
    // copy and elementwise words their kernels' names also carry. ReLU is plain elementwise.
    {"gelu", KernelKind::kActivation},
    {"silu", KernelKind::kActivation},
    {"swish", KernelKind::kActivation},
    {"tanh", KernelKind::kActivation},
    {"sigmoid", KernelKind::kActivation},
    {"softplus", KernelKind::kActivation},
    {"mish", KernelKind::kActivation},
    // Copies and data movement.
    {"copy", KernelKind::kCopy},
    {"gather", KernelKind::kCopy},
    {"scatter", KernelKind::kCopy},
    {"index", KernelKind::kCopy},
    {"embedding", KernelKind::kCopy},
    {"transpose", KernelKind::kCopy},
    // Fills.
    {"fillfunctor", KernelKind::kMemset},
    {"fill_kernel", KernelKind::kMemset},
    // Elementwise.
    {"triton_poi", KernelKind::kElementwise},
    {"elementwise", KernelKind::kElementwise},
    {"multi_tensor_apply", KernelKind::kElementwise},
    {"dropout", KernelKind::kElementwise},
    {"quant", KernelKind::kElementwise},
    {"scal_kernel", KernelKind::kElementwise},
    {"scalepackedtensor", KernelKind::kElementwise},
    {"functor", KernelKind::kElementwise},
};

// The name without its parameter list: demangled signatures end in "(int, float const*, ...)"
// whose types (cudnn::reduced_divisor, flashinfer::..., _typeConvert) would mislead the rules.
// Template arguments are kept: they often name the operation (direct_copy_kernel_cuda, ...).
std::string_view StripParameters(std::string_view name) {
  int angle = 0;  // depth of template arguments
  int paren = 0;  // parentheses inside template arguments: "enable_if<((8)>(0))>"
  for (size_t i = 0; i < name.size(); ++i) {
    const char ch = name[i];
    if (angle > 0) {
      if (ch == '(') ++paren;
      if (ch == ')' && paren > 0) --paren;
      if (ch == '<' && paren == 0) ++angle;
      if (ch == '>' && paren == 0) --angle;
      continue;
    }
    if (ch == '<') {
      ++angle;
    } else if (ch == '(') {
      if (name.substr(i).starts_with("(anonymous namespace)")) {
        i += std::string_view("(anonymous namespace)").size() - 1;
        continue;
      }
      if (i > 0) return name.substr(0, i);
    }
  }
  return name;
}

std::string Lower(std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](char ch) {
    return (ch >= 'A' && ch <= 'Z') ? static_cast<char>(ch - 'A' + 'a') : ch;
  });
  return lower;
}

}  // namespace

std::string_view KernelClassName(KernelClass c) {
  switch (c) {
    case KernelClass::kCompute:
      return "compute";
    case KernelClass::kMemory:
      return "memory";
    case KernelClass::kCommunication:
      return "communication";
    case KernelClass::kOther:
      return "other";
  }
  return "other";
}

std::string_view KernelKindName(KernelKind k) {
  switch (k) {
    case KernelKind::kGemm:
      return "gemm";
    case KernelKind::kConv:
      return "conv";
    case KernelKind::kAttention:
      return "attention";
    case KernelKind::kElementwise:
      return "elementwise";
    case KernelKind::kReduction:
      return "reduction";
    case KernelKind::kSoftmax:
      return "softmax";
    case KernelKind::kNorm:
      return "norm";
    case KernelKind::kCopy:
      return "copy";
    case KernelKind::kMemset:
      return "memset";
    case KernelKind::kActivation:
      return "activation";
    case KernelKind::kPooling:
      return "pooling";
    case KernelKind::kCollective:
      return "collective";
    case KernelKind::kOther:
      return "other";
  }
  return "other";
}

bool ParseKernelClass(std::string_view name, KernelClass& out) {
  for (int i = 0; i < kNumKernelClasses; ++i) {
    const auto c = static_cast<KernelClass>(i);
    if (KernelClassName(c) == name) {
      out = c;
      return true;
    }
  }
  return false;
}

KernelClass ClassOf(KernelKind kind) {
  switch (kind) {
    case KernelKind::kGemm:
    case KernelKind::kConv:
    case KernelKind::kAttention:
      return KernelClass::kCompute;
    case KernelKind::kElementwise:
    case KernelKind::kReduction:
    case KernelKind::kSoftmax:
    case KernelKind::kNorm:
    case KernelKind::kCopy:
    case KernelKind::kMemset:
    case KernelKind::kActivation:
    case KernelKind::kPooling:
      return KernelClass::kMemory;
    case KernelKind::kCollective:
      return KernelClass::kCommunication;
    case KernelKind::kOther:
      return KernelClass::kOther;
  }
  return KernelClass::kOther;
}

KernelKind ClassifyKind(std::string_view name) {
  std::string lower = Lower(StripParameters(name));
  // "fbgemm_gpu::" names a library (embedding, permute, quantize kernels), not a GEMM.
  static constexpr std::string_view kFbgemm = "fbgemm_gpu::";
  for (size_t at = lower.find(kFbgemm); at != std::string::npos; at = lower.find(kFbgemm)) {
    lower.erase(at, kFbgemm.size());
  }
  for (const Rule& rule : kRules) {
    if (lower.find(rule.pattern) != std::string::npos) return rule.kind;
  }
  return KernelKind::kOther;
}

KernelClass Classify(std::string_view name) { return ClassOf(ClassifyKind(name)); }

bool IsCudaCoreGemm(std::string_view name) {
  // TF32 variants say "tf32f32"; the fp32-only ones "f32f32_f32f32_f32".
  for (std::string_view w : {"sgemm", "simt", "f32f32_f32f32_f32"}) {
    if (name.find(w) != std::string_view::npos) return Classify(name) == KernelClass::kCompute;
  }
  return false;
}

bool IsTf32(std::string_view name) {
  // CUTLASS names fp32 tensor-core kernels by their TF32 instruction, m16n8k8 on fp32 ("s1688").
  const std::string lower = Lower(name);
  return lower.find("tf32") != std::string::npos || lower.find("tensorop_s1688") != std::string::npos;
}

namespace {

// The number of decimal digits at the front of `s`, at most 4 (0: none).
size_t Digits(std::string_view s) {
  size_t i = 0;
  while (i < s.size() && i < 4 && s[i] >= '0' && s[i] <= '9') ++i;
  return i;
}

// Reads "<a>x<b>" at the front of `s` (a and b of 1-4 digits, not followed by another digit);
// false when `s` does not start so.
bool ReadPair(std::string_view s, int& a, int& b) {
  const size_t da = Digits(s);
  if (da == 0 || da >= s.size() || s[da] != 'x') return false;
  const std::string_view rest = s.substr(da + 1);
  const size_t db = Digits(rest);
  if (db == 0 || (db < rest.size() && rest[db] >= '0' && rest[db] <= '9')) return false;
  a = std::stoi(std::string(s.substr(0, da)));
  b = std::stoi(std::string(rest.substr(0, db)));
  return true;
}

bool TileSide(int v) { return v >= 8 && v <= 512 && v % 8 == 0; }

}  // namespace

GemmTile GemmTileOf(std::string_view name) {
  const std::string lower = Lower(name);
  const std::string_view s = lower;
  int m = 0, n = 0;
  if (const size_t at = s.find("tilesize"); at != std::string_view::npos &&
                                             ReadPair(s.substr(at + 8), m, n) && TileSide(m) && TileSide(n)) {
    return {m, n};
  }
  for (size_t i = 0; i < s.size(); ++i) {
    // A pair starts at a digit that follows no digit.
    if (s[i] < '0' || s[i] > '9' || (i > 0 && s[i - 1] >= '0' && s[i - 1] <= '9')) continue;
    if (ReadPair(s.substr(i), m, n) && TileSide(m) && TileSide(n)) return {m, n};
  }
  return {};
}

bool IsHalfPrecision(std::string_view name) {
  const std::string lower = Lower(name);
  for (std::string_view w : {"bfloat16", "half", "bf16", "fp16"}) {
    if (lower.find(w) != std::string::npos) return true;
  }
  return false;
}

}  // namespace emo::model
