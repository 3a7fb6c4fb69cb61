#include "emo/trace/op_work.h"

#include <algorithm>
#include <cctype>
#include <optional>

namespace emo::trace {
namespace {

using Dims = std::vector<int64_t>;

// The integers of a concrete value ("[2, 2]" -> {2, 2}, "1" -> {1}).
std::vector<int64_t> Integers(std::string_view s) {
  std::vector<int64_t> out;
  size_t i = 0;
  while (i < s.size()) {
    const bool neg = s[i] == '-' && i + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[i + 1]));
    if (!neg && !std::isdigit(static_cast<unsigned char>(s[i]))) {
      ++i;
      continue;
    }
    size_t j = neg ? i + 1 : i;
    int64_t v = 0;
    for (; j < s.size() && std::isdigit(static_cast<unsigned char>(s[j])); ++j) {
      if (v > (INT64_MAX - 9) / 10) return {};  // not a size
      v = v * 10 + (s[j] - '0');
    }
    out.push_back(neg ? -v : v);
    i = j;
  }
  return out;
}

// The booleans of a concrete value ("[True, True, False]").
std::vector<bool> Booleans(std::string_view s) {
  std::vector<bool> out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s.substr(i, 4) == "True") out.push_back(true);
    if (s.substr(i, 5) == "False") out.push_back(false);
  }
  return out;
}

bool Positive(const Dims& d, size_t rank) {
  return d.size() == rank && std::all_of(d.begin(), d.end(), [](int64_t x) { return x > 0; });
}

// 2·M·K·N of a ⟨M,K⟩ × ⟨K,N⟩ product, with an optional leading batch.
std::optional<double> MatmulFlops(const Dims& a, const Dims& b, size_t rank) {
  if (!Positive(a, rank) || !Positive(b, rank) || a[rank - 1] != b[rank - 2]) return std::nullopt;
  const double batch = rank == 3 ? static_cast<double>(a[0]) : 1.0;
  return 2.0 * batch * static_cast<double>(a[rank - 2]) * static_cast<double>(a[rank - 1]) *
         static_cast<double>(b[rank - 1]);
}

// A forward convolution's work: 2 · N · O · (output positions) · (C / groups) · (kernel size).
std::optional<double> ConvFlops(const Dims& input, const Dims& weight, std::string_view stride,
                                std::string_view padding, std::string_view dilation, int64_t groups) {
  if (input.size() < 3 || input.size() != weight.size() || groups < 1) return std::nullopt;
  if (!Positive(input, input.size()) || !Positive(weight, weight.size())) return std::nullopt;
  if (input[1] != weight[1] * groups) return std::nullopt;
  const size_t spatial = input.size() - 2;
  auto per_dim = [spatial](std::string_view s, int64_t fallback) {
    std::vector<int64_t> v = Integers(s);
    if (v.size() == 1) v.assign(spatial, v[0]);
    if (v.size() != spatial) v.assign(spatial, fallback);
    return v;
  };
  const std::vector<int64_t> st = per_dim(stride, 1), pad = per_dim(padding, 0), dil = per_dim(dilation, 1);
  double work = 2.0 * static_cast<double>(input[0]) * static_cast<double>(weight[0]) * static_cast<double>(weight[1]);
  for (size_t i = 0; i < spatial; ++i) {
    const int64_t k = weight[2 + i];
    if (st[i] < 1 || dil[i] < 1 || pad[i] < 0) return std::nullopt;
    const int64_t out = (input[2 + i] + 2 * pad[i] - dil[i] * (k - 1) - 1) / st[i] + 1;
    if (out < 1) return std::nullopt;
    work *= static_cast<double>(out) * static_cast<double>(k);
  }
  return work;
}

// A cuDNN RNN's forward work (LSTM, GRU, plain RNN; any layers, directions, projection): every
// token passes every weight matrix of every layer and direction once, 2 FLOPs per weight element,
// so 2 x tokens x the flat weight buffer's size (its biases count too: 0.1 % of an LSTM's of 1024
// units). input: [T, B, I] or [B, T, I], or [tokens, I] for a packed sequence.
std::optional<double> RnnFlops(const Dims& input, const Dims& weight_buf) {
  if (!Positive(weight_buf, 1)) return std::nullopt;
  double tokens = 0;
  if (Positive(input, 3)) {
    tokens = static_cast<double>(input[0]) * static_cast<double>(input[1]);
  } else if (Positive(input, 2)) {
    tokens = static_cast<double>(input[0]);
  } else {
    return std::nullopt;
  }
  return 2.0 * tokens * static_cast<double>(weight_buf[0]);
}

std::string_view At(const std::vector<std::string>& v, size_t i) { return i < v.size() ? v[i] : std::string_view(); }

const Dims& DimsAt(const std::vector<Dims>& v, size_t i) {
  static const Dims kNone;
  return i < v.size() ? v[i] : kNone;
}

int64_t FirstInteger(std::string_view s, int64_t fallback) {
  const std::vector<int64_t> v = Integers(s);
  return v.empty() ? fallback : v[0];
}

std::optional<double> Flops(std::string_view name, const std::vector<Dims>& d, const std::vector<std::string>& c) {
  if (name == "aten::mm") return MatmulFlops(DimsAt(d, 0), DimsAt(d, 1), 2);
  if (name == "aten::addmm" || name == "aten::_addmm_activation") return MatmulFlops(DimsAt(d, 1), DimsAt(d, 2), 2);
  if (name == "aten::bmm") return MatmulFlops(DimsAt(d, 0), DimsAt(d, 1), 3);
  if (name == "aten::baddbmm") return MatmulFlops(DimsAt(d, 1), DimsAt(d, 2), 3);
  if (name == "aten::cudnn_convolution") {  // (input, weight, padding, stride, dilation, groups, ...)
    return ConvFlops(DimsAt(d, 0), DimsAt(d, 1), At(c, 3), At(c, 2), At(c, 4), FirstInteger(At(c, 5), 1));
  }
  if (name == "aten::convolution" || name == "aten::_convolution") {
    // (input, weight, bias, stride, padding, dilation, transposed, output_padding, groups, ...)
    if (At(c, 6).find("True") != std::string_view::npos) return std::nullopt;
    return ConvFlops(DimsAt(d, 0), DimsAt(d, 1), At(c, 3), At(c, 4), At(c, 5), FirstInteger(At(c, 8), 1));
  }
  if (name == "aten::convolution_backward") {
    // (grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed,
    //  output_padding, groups, output_mask): one forward's work per gradient asked for.
    if (At(c, 7).find("True") != std::string_view::npos) return std::nullopt;
    const std::optional<double> f =
        ConvFlops(DimsAt(d, 1), DimsAt(d, 2), At(c, 4), At(c, 5), At(c, 6), FirstInteger(At(c, 9), 1));
    if (!f) return std::nullopt;
    const std::vector<bool> mask = Booleans(At(c, 10));
    const int grads = mask.size() >= 2 ? static_cast<int>(mask[0]) + static_cast<int>(mask[1]) : 2;
    return *f * grads;
  }
  // (input, weight list, weight_stride0, weight_buf, hx, cx, ...): the list itself has no sizes.
  if (name == "aten::_cudnn_rnn") return RnnFlops(DimsAt(d, 0), DimsAt(d, 3));
  if (name == "aten::_cudnn_rnn_backward") {
    // (... the forward's arguments ..., reserve, output_mask [input, hx, cx, weight]): the data
    // gradient runs back through every step whatever the mask (the recurrence needs it), as much
    // work as the forward; the weight gradient as much again.
    const std::optional<double> f = RnnFlops(DimsAt(d, 0), DimsAt(d, 3));
    if (!f) return std::nullopt;
    const std::vector<bool> mask = Booleans(At(c, 21));
    return *f * (mask.size() == 4 && !mask[3] ? 1.0 : 2.0);
  }
  if (name.find("attention") != std::string_view::npos) {
    std::vector<const Dims*> four;
    for (const Dims& x : d) {
      if (Positive(x, 4)) four.push_back(&x);
    }
    const bool backward = name.find("backward") != std::string_view::npos;
    const size_t q = backward ? 1 : 0;  // a backward's first tensor is the output's gradient
    if (four.size() < q + 2) return std::nullopt;
    const Dims& qd = *four[q];
    const Dims& kd = *four[q + 1];
    if (qd[0] != kd[0] || qd[3] != kd[3]) return std::nullopt;
    const double fwd = 4.0 * static_cast<double>(qd[0]) * static_cast<double>(qd[1]) * static_cast<double>(qd[2]) *
                       static_cast<double>(kd[2]) * static_cast<double>(qd[3]);
    return backward ? 2.5 * fwd : fwd;
  }
  return std::nullopt;
}

OpPrecision PrecisionOf(const std::vector<std::string>& types) {
  bool fp32 = false;
  for (const std::string& t : types) {
    if (t.find("BFloat16") != std::string::npos || t.find("Half") != std::string::npos) return OpPrecision::k16Bit;
    if (t == "float") fp32 = true;
  }
  return fp32 ? OpPrecision::kFp32 : OpPrecision::kUnknown;
}

}  // namespace

bool HasOperatorWork(std::string_view name) {
  // Called for every cpu_op the reader reads: the prefix and first letter decide most at once.
  constexpr std::string_view kAten = "aten::";
  if (name.size() <= kAten.size() || !name.starts_with(kAten)) return false;
  const std::string_view op = name.substr(kAten.size());
  constexpr auto npos = std::string_view::npos;
  switch (op[0]) {
    case 'm':
      return op == "mm";
    case 'a':
      return op == "addmm";
    case 'b':
      return op == "bmm" || op == "baddbmm";
    case 'c':
      return op == "cudnn_convolution" || op == "convolution" || op == "convolution_backward";
    case '_':
      return op == "_addmm_activation" || op == "_convolution" || op == "_cudnn_rnn" || op == "_cudnn_rnn_backward" ||
             op.find("attention") != npos;
    case 's':
      return op.find("attention") != npos;
    default:
      return false;
  }
}

OpWork OperatorWork(std::string_view name, const std::vector<std::vector<int64_t>>& dims,
                    const std::vector<std::string>& concrete, const std::vector<std::string>& types) {
  OpWork w;
  const std::optional<double> f = Flops(name, dims, concrete);
  if (!f || !(*f > 0)) return w;
  w.flops = *f;
  w.precision = PrecisionOf(types);
  return w;
}

}  // namespace emo::trace
