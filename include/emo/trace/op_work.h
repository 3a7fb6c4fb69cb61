// The arithmetic work of a framework operator, from the shapes a PyTorch-profiler trace records
// with record_shapes (cpu_op args "Input Dims", "Concrete Inputs", "Input type").
//
// Research behind it: a kernel's power follows the work it does per µs, on one curve for the
// tensor cores and one for the CUDA cores (bench/research/flop_rate_power.py, BENCHMARKS.md
// Order 8 "A kernel's work per µs"). The Kineto reader keeps each such operator's work
// (Trace::op_work); the model's work curves use it (model/kernel_work.h, docs/model.md §6a).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace emo::trace {

// The inputs' element type as far as the work's peak rate goes.
enum class OpPrecision : uint8_t {
  kUnknown,
  k16Bit,  // bf16 / fp16 inputs: tensor cores
  kFp32,   // float inputs: the CUDA cores, or the tensor cores in tf32 where the kernel says so
};

struct OpWork {
  double flops = 0.0;  // multiply-adds count 2; 0 when the operator's work is not known
  OpPrecision precision = OpPrecision::kUnknown;
};

// Whether OperatorWork knows the operator: the aten:: operators it lists (the reader reads the
// shapes of these only).
bool HasOperatorWork(std::string_view name);

// The work of one operator call. `dims`: one entry per input, the tensor's sizes (empty for a
// scalar or an absent input); `concrete`: the inputs' concrete values as the trace writes them
// ("[2, 2]", "1", "False", "" for a tensor); `types`: the inputs' type names ("float",
// "c10::BFloat16", ...). Known operators: aten::mm, addmm, _addmm_activation, bmm, baddbmm,
// cudnn_convolution, convolution, _convolution (not transposed), convolution_backward (the input
// and weight gradients its output mask asks for), and attention forward and backward (an aten::
// operator whose name holds "attention": 4·B·H·Sq·Sk·D forward, 2.5 times that backward; a causal
// mask is not seen, so a causal attention's work is counted twice), and cuDNN RNNs
// (aten::_cudnn_rnn: 2 x tokens x the flat weight buffer's size; _cudnn_rnn_backward: twice that
// with the weight gradient, once without). Anything else, and shapes that
// do not fit the operator, give flops 0. An operator and the ones it calls each get their own
// work (aten::convolution, _convolution, cudnn_convolution): a kernel carries the External id of
// the innermost.
OpWork OperatorWork(std::string_view name, const std::vector<std::vector<int64_t>>& dims,
                    const std::vector<std::string>& concrete, const std::vector<std::string>& types);

}  // namespace emo::trace
