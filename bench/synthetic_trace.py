#!/usr/bin/env python3
"""Writes a synthetic PyTorch-profiler (Kineto JSON) trace shaped like our H200 training traces,
of about a given number of events, for the scale benchmark (bench/scale_events.sh). Standard
library only; the trace is written as it is made, one iteration at a time, never held whole.

    python3 bench/synthetic_trace.py --events N OUT.json[.gz] [--layers 12] [--seed 1]
        [--sync-every 1] [--ranks R] [--with-stack]

What it writes (the categories and args of traces/h200/*.json.gz, CUDA 13 style):
  - K iterations of a GPT-like training step: a `ProfilerStep#N` user_annotation on the main
    thread; per transformer layer the forward's cpu_ops (aten::linear > aten::addmm, layer norm,
    attention, GELU, residual adds, bf16 casts, view-like ops that launch nothing) on the main
    thread, the backward's autograd::engine::evaluate_function ops on the autograd thread
    (handed over after the loss, handed back before the optimizer), a fused AdamW step;
  - every launch a cuda_runtime/cuda_driver call (cudaLaunchKernel, cuLaunchKernelEx,
    cudaMemsetAsync, cudaMemcpyAsync) with a correlation id, its kernel/gpu_memset/gpu_memcpy
    on a stream with the same correlation, and the ac2g flow pair between them;
  - a side stream per layer joined by cudaEventRecordWithFlags / cudaStreamWaitEvent with their
    `Stream Wait Event` cuda_sync records (wait_on_cuda_event_id set, the rest -1, as on CUDA 13);
  - every --sync-every iterations a loss.item(): a DtoH copy and a cudaStreamSynchronize with its
    `Stream Sync` record (the CPU waits for the GPU there);
  - with --ranks R >= 2: DDP buckets in the backward (record_param_comms, nccl:all_reduce and an
    ncclDevKernel_AllReduce on a comm stream with the collective's args) and R files
    OUT/rank_<r>.json[.gz], each with its distributedInfo; the R timelines are the same (one
    seed), so every collective matches and no rank straggles;
  - with --with-stack: a python_function event around each forward operator.
GPU times follow a simple schedule (a kernel starts after its launch plus latency, after its
stream's previous op and after the events it waits on); durations are per-kernel means (from the
H200 gpt_train trace, rounded) times a log-normal jitter drawn with the seed. The event count is
reached to within one iteration (the iteration count is chosen from it); the script prints the
count it wrote.
"""
import argparse
import gzip
import math
import os
import random
import sys

# Kernel names of the H200 gpt_train/ddp traces and rounded mean durations (ns) there.
K_LN = "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float, false>(int, float, float const*, float const*, float const*, float*, float*, float*)"
K_LN_GI = "void at::native::(anonymous namespace)::layer_norm_grad_input_kernel_vectorized<float, float, false>(float const*, float const*, float const*, float const*, float const*, float*, int)"
K_LN_GB = "void at::native::(anonymous namespace)::GammaBetaBackwardCUDAKernelTemplate<float, float, 32u, 32u, false, true>(long, long, float const*, float const*, float const*, float const*, float*, float*)"
K_GEMM_QKV = "nvjet_sm90_tst_192x128_64x5_1x2_h_bz_coopB_bias_TNT"
K_GEMM = "nvjet_sm90_tst_192x128_64x5_1x2_h_bz_coopB_NNT"
K_GEMM_FC = "nvjet_sm90_tst_192x192_64x4_1x2_h_bz_coopB_bias_TNN"
K_GEMM_W = "nvjet_sm90_tst_256x128_64x4_2x1_v_bz_coopA_TNT"
K_SDPA_F = "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x64_4x1x1_cga1x1x1_kernel0_0"
K_SDPA_B = "cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16_knob_5_64x128x64_4x1x1_cga1x1x1_kernel0_0"
K_ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)"
K_CAST = "void at::native::vectorized_elementwise_kernel<8, at::native::bfloat16_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#2}::operator()() const::{lambda()#8}::operator()() const::{lambda(float)#1}, std::array<char*, 2ul> >(int, at::native::bfloat16_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#2}::operator()() const::{lambda()#8}::operator()() const::{lambda(float)#1}, std::array<char*, 2ul>)"
K_COPY = "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}, std::array<char*, 2ul>, 4, TrivialOffsetCalculator<1, unsigned int>, TrivialOffsetCalculator<1, unsigned int>, at::native::memory::LoadWithCast<1>, at::native::memory::StoreWithCast<1> >(int, at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}, std::array<char*, 2ul>, TrivialOffsetCalculator<1, unsigned int>, TrivialOffsetCalculator<1, unsigned int>, at::native::memory::LoadWithCast<1>, at::native::memory::StoreWithCast<1>)"
K_GELU = "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul> >(int, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul>)"
K_GELU_B = "void at::native::vectorized_elementwise_kernel<4, at::native::GeluBackwardCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16, c10::BFloat16)#1}, std::array<char*, 3ul> >(int, at::native::GeluBackwardCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16, c10::BFloat16)#1}, std::array<char*, 3ul>)"
K_REDUCE = "void at::native::reduce_kernel<128, 4, at::native::ReduceOp<c10::BFloat16, at::native::func_wrapper_t<c10::BFloat16, at::native::sum_functor<c10::BFloat16, float, c10::BFloat16>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, c10::BFloat16, 4, 4> >(at::native::ReduceOp<c10::BFloat16, at::native::func_wrapper_t<c10::BFloat16, at::native::sum_functor<c10::BFloat16, float, c10::BFloat16>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, c10::BFloat16, 4, 4>)"
K_DROP = "void at::native::(anonymous namespace)::fused_dropout_kernel_vec<c10::BFloat16, float, unsigned int, 1, 4, bool>(at::cuda::detail::TensorInfo<c10::BFloat16 const, unsigned int>, at::cuda::detail::TensorInfo<c10::BFloat16, unsigned int>, at::cuda::detail::TensorInfo<bool, unsigned int>, unsigned int, float, at::PhiloxCudaState)"
K_SOFTMAX = "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, at::native::(anonymous namespace)::LogSoftMaxForwardEpilogue>(float*, float const*, int)"
K_SOFTMAX_B = "void at::native::(anonymous namespace)::cunn_SoftMaxBackward<4, float, float, float, at::native::(anonymous namespace)::LogSoftMaxBackwardEpilogue>(float*, float const*, float const*, long)"
K_NLL = "void at::native::(anonymous namespace)::nll_loss_forward_reduce_cuda_kernel_2d<float, float, long>(float*, float*, float const*, long const*, float const*, bool, long, long, long, long)"
K_NLL_B = "void at::native::(anonymous namespace)::nll_loss_backward_reduce_cuda_kernel_2d<float, long>(float*, float const*, long const*, float const*, float const*, bool, int, int, long, long)"
K_EMB = "void at::native::vectorized_gather_kernel<16, long>(char*, char*, long*, int, long, long, long, long, bool)"
K_ADAM = "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::FusedOptimizerTensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 4, (at::native::ADAM_MODE)1, false>, float const*, double, double, double, double, double, bool, float const*, float const*>(at::native::(anonymous namespace)::FusedOptimizerTensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 4, (at::native::ADAM_MODE)1, false>, float const*, double, double, double, double, double, bool, float const*, float const*)"
K_NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"

# Launch configuration per kernel: (grid, block, registers, shared memory).
CONFIG = {
    K_LN: (8192, 256, 30, 0), K_LN_GI: (8192, 128, 40, 0), K_LN_GB: (24, 1024, 64, 8192),
    K_GEMM_QKV: (132, 384, 168, 213000), K_GEMM: (132, 384, 168, 213000),
    K_GEMM_FC: (132, 384, 168, 229000), K_GEMM_W: (132, 384, 168, 213000),
    K_SDPA_F: (384, 384, 168, 180000), K_SDPA_B: (384, 384, 168, 200000),
    K_ADD: (12288, 128, 24, 0), K_CAST: (6144, 128, 26, 0), K_COPY: (24576, 128, 22, 0),
    K_GELU: (12288, 128, 26, 0), K_GELU_B: (12288, 128, 28, 0), K_REDUCE: (768, 512, 40, 16),
    K_DROP: (1056, 256, 30, 0), K_SOFTMAX: (8192, 1024, 38, 0), K_SOFTMAX_B: (8192, 1024, 38, 0),
    K_NLL: (1, 1024, 32, 0), K_NLL_B: (1, 1024, 32, 0), K_EMB: (8192, 192, 32, 0),
    K_ADAM: (320, 512, 60, 0), K_NCCL: (24, 544, 96, 103808),
}

US = 1000  # ns

# Per-iteration program items (built once, replayed K times with jitter):
#   ("op", thread, [cpu_op names outer..inner], launch api, gpu cat, gpu name, stream, gpu ns, extra)
#   ("cpu", thread, name, ns)           a cpu_op that launches nothing
#   ("record", thread, stream)          cudaEventRecordWithFlags on `stream` (a fresh event id)
#   ("wait", thread, stream)            cudaStreamWaitEvent: `stream` waits on the last record
#   ("handoff", from_thread, to_thread) the second thread continues after the first's last call
#   ("ann_begin"/"ann_end", thread, name) a user_annotation around what lies between
#   ("allreduce", thread, nelems)       a DDP bucket on the comm stream
#   ("item", thread)                    loss.item(): DtoH copy + cudaStreamSynchronize
MAIN, AUTOGRAD = 0, 1
S_MAIN, S_SIDE, S_COMM = 7, 20, 17


def linear(th, k, ns):
    return ("op", th, ["aten::linear", "aten::addmm"], "cuLaunchKernelEx", "kernel", k, S_MAIN, ns, "memset")


def kop(th, names, k, ns, stream=S_MAIN, api="cudaLaunchKernel"):
    return ("op", th, names, api, "kernel", k, stream, ns, None)


def build_program(layers, ddp):
    p = [("ann_begin", MAIN, "ProfilerStep"),
         ("op", MAIN, ["aten::to", "aten::_to_copy", "aten::copy_"], "cudaMemcpyAsync", "gpu_memcpy",
          "Memcpy HtoD (Pinned -> Device)", S_MAIN, 9 * US, 262144),
         ("ann_begin", MAIN, "DistributedDataParallel.forward" if ddp else "GPT.forward"),
         kop(MAIN, ["aten::embedding", "aten::index_select"], K_EMB, 16 * US)]
    for _ in range(layers):
        p += [kop(MAIN, ["aten::layer_norm", "aten::native_layer_norm"], K_LN, 14 * US),
              kop(MAIN, ["aten::to", "aten::_to_copy", "aten::copy_"], K_CAST, 5 * US),
              linear(MAIN, K_GEMM_QKV, 42 * US),
              ("cpu", MAIN, "aten::split", 9 * US), ("cpu", MAIN, "aten::view", 3 * US),
              ("cpu", MAIN, "aten::transpose", 4 * US), ("cpu", MAIN, "aten::transpose", 4 * US),
              ("op", MAIN, ["aten::scaled_dot_product_attention", "aten::_scaled_dot_product_cudnn_attention"],
               "cuLaunchKernelEx", "kernel", K_SDPA_F, S_MAIN, 58 * US, None),
              # A memory-bound side branch on its own stream, joined back by events.
              ("record", MAIN, S_MAIN), ("wait", MAIN, S_SIDE),
              kop(MAIN, ["aten::dropout", "aten::native_dropout"], K_DROP, 11 * US, S_SIDE),
              kop(MAIN, ["aten::to", "aten::_to_copy", "aten::copy_"], K_COPY, 7 * US, S_SIDE),
              ("record", MAIN, S_SIDE),
              ("cpu", MAIN, "aten::view", 3 * US),
              linear(MAIN, K_GEMM, 19 * US),
              ("wait", MAIN, S_MAIN),
              kop(MAIN, ["aten::add"], K_ADD, 9 * US),
              ("cpu", MAIN, "aten::empty_strided", 6 * US), ("cpu", MAIN, "aten::t", 3 * US),
              kop(MAIN, ["aten::layer_norm", "aten::native_layer_norm"], K_LN, 14 * US),
              kop(MAIN, ["aten::to", "aten::_to_copy", "aten::copy_"], K_CAST, 5 * US),
              linear(MAIN, K_GEMM_FC, 66 * US),
              kop(MAIN, ["aten::gelu"], K_GELU, 17 * US),
              linear(MAIN, K_GEMM, 64 * US),
              kop(MAIN, ["aten::add"], K_ADD, 9 * US)]
    p += [kop(MAIN, ["aten::layer_norm", "aten::native_layer_norm"], K_LN, 14 * US),
          linear(MAIN, K_GEMM, 310 * US),
          kop(MAIN, ["aten::cross_entropy_loss", "aten::log_softmax", "aten::_log_softmax"], K_SOFTMAX, 120 * US),
          kop(MAIN, ["aten::nll_loss_nd", "aten::nll_loss", "aten::nll_loss_forward"], K_NLL, 6 * US),
          ("ann_end", MAIN, None),
          ("handoff", MAIN, AUTOGRAD),
          kop(AUTOGRAD, ["autograd::engine::evaluate_function: NllLossBackward0", "NllLossBackward0",
                         "aten::nll_loss_backward"], K_NLL_B, 8 * US),
          kop(AUTOGRAD, ["autograd::engine::evaluate_function: LogSoftmaxBackward0", "LogSoftmaxBackward0",
                         "aten::_log_softmax_backward_data"], K_SOFTMAX_B, 130 * US),
          kop(AUTOGRAD, ["autograd::engine::evaluate_function: AddmmBackward0", "AddmmBackward0", "aten::mm"],
              K_GEMM, 300 * US, api="cuLaunchKernelEx")]
    for layer in range(layers):
        def bw(fn, k, ns, api="cudaLaunchKernel", inner="aten::mm"):
            return kop(AUTOGRAD, ["autograd::engine::evaluate_function: " + fn, fn, inner], k, ns, api=api)
        p += [("cpu", AUTOGRAD, "aten::empty_strided", 6 * US), ("cpu", AUTOGRAD, "aten::t", 3 * US),
              bw("AddBackward0", K_ADD, 9 * US, inner="aten::add"),
              bw("AddmmBackward0", K_GEMM, 62 * US, "cuLaunchKernelEx"),
              bw("AddmmBackward0", K_GEMM_W, 66 * US, "cuLaunchKernelEx"),
              bw("AddmmBackward0", K_REDUCE, 12 * US, inner="aten::sum"),
              bw("GeluBackward0", K_GELU_B, 22 * US, inner="aten::gelu_backward"),
              bw("AddmmBackward0", K_GEMM, 64 * US, "cuLaunchKernelEx"),
              bw("AddmmBackward0", K_GEMM_W, 68 * US, "cuLaunchKernelEx"),
              bw("ToCopyBackward0", K_COPY, 7 * US, inner="aten::copy_"),
              bw("NativeLayerNormBackward0", K_LN_GI, 16 * US, inner="aten::native_layer_norm_backward"),
              bw("NativeLayerNormBackward0", K_LN_GB, 21 * US, inner="aten::native_layer_norm_backward"),
              bw("AddBackward0", K_ADD, 9 * US, inner="aten::add"),
              ("cpu", AUTOGRAD, "aten::view", 3 * US), ("cpu", AUTOGRAD, "aten::as_strided", 2 * US),
              bw("AddmmBackward0", K_GEMM, 19 * US, "cuLaunchKernelEx"),
              bw("AddmmBackward0", K_GEMM_W, 21 * US, "cuLaunchKernelEx"),
              bw("ScaledDotProductCudnnAttentionBackward0", K_SDPA_B, 142 * US, "cuLaunchKernelEx",
                 "aten::_scaled_dot_product_cudnn_attention_backward"),
              bw("AddmmBackward0", K_GEMM, 42 * US, "cuLaunchKernelEx"),
              bw("AddmmBackward0", K_GEMM_W, 45 * US, "cuLaunchKernelEx"),
              bw("ToCopyBackward0", K_COPY, 7 * US, inner="aten::copy_"),
              bw("NativeLayerNormBackward0", K_LN_GI, 16 * US, inner="aten::native_layer_norm_backward"),
              bw("NativeLayerNormBackward0", K_LN_GB, 21 * US, inner="aten::native_layer_norm_backward")]
        if ddp and layer % 2 == 1:
            p.append(("allreduce", AUTOGRAD, 7087872))
    p.append(kop(AUTOGRAD, ["autograd::engine::evaluate_function: EmbeddingBackward0", "EmbeddingBackward0",
                            "aten::embedding_dense_backward"], K_REDUCE, 40 * US))
    if ddp:  # the last bucket, then the compute stream waits for the comm stream
        p += [("allreduce", AUTOGRAD, 24576000), ("record", AUTOGRAD, S_COMM), ("wait", AUTOGRAD, S_MAIN)]
    p += [("handoff", AUTOGRAD, MAIN),
          ("ann_begin", MAIN, "Optimizer.step#AdamW.step")]
    for _ in range(4):
        p.append(kop(MAIN, ["aten::_fused_adamw_"], K_ADAM, 150 * US))
    p += [("ann_end", MAIN, None),
          ("ann_begin", MAIN, "Optimizer.zero_grad#AdamW.zero_grad"),
          ("cpu", MAIN, "aten::zero_", 40 * US), ("ann_end", MAIN, None)]
    return p


def us(ns):
    """ns as the µs string Kineto writes (three decimals)."""
    q, r = divmod(ns, 1000)
    return f"{q}.{r:03d}"


class Emitter:
    """Plays the program K times, writing events as it goes."""

    def __init__(self, out, args, rank, ranks):
        self.out = out
        self.rank, self.ranks = rank, ranks
        self.ddp = ranks > 1
        self.with_stack = args.with_stack
        self.gpu_scale = args.gpu_scale
        rng = random.Random(args.seed)
        # Jitter tables: GPU durations within a few per cent, CPU costs wider (log-normal).
        self.gj = [math.exp(rng.gauss(0, 0.05)) for _ in range(4096)]
        self.cj = [math.exp(rng.gauss(0, 0.25)) for _ in range(4096)]
        self.rng = rng
        self.pid = 600 + rank
        self.tids = [self.pid, self.pid + 28]
        self.cpu = [0, 0]  # per thread, ns
        self.stream_free = {S_MAIN: 0, S_SIDE: 0, S_COMM: 0}
        self.corr = 30000
        self.ext = 1
        self.flow = 1
        self.event_id = 2200
        self.events = 0
        self.buf = []
        self.ev_idx = 0

    # Jittered durations.
    def g(self, ns):
        return max(700, int(ns * self.gpu_scale * self.gj[self.rng.getrandbits(12)]))

    def c(self, ns):
        return max(300, int(ns * self.cj[self.rng.getrandbits(12)]))

    def emit(self, s):
        self.buf.append(s)
        self.events += 1

    def flush(self, first):
        if not self.buf:
            return
        text = ",\n".join(self.buf)
        self.out.write((text if first else ",\n" + text).encode())
        self.buf = []

    def cpu_op(self, th, name, t0, t1, ext, cat="cpu_op"):
        self.ev_idx += 1
        self.emit(f'{{"ph":"X","cat":"{cat}","name":"{name}","pid":{self.pid},"tid":{self.tids[th]},'
                  f'"ts":{us(t0)},"dur":{us(t1 - t0)},"args":{{"External id":{ext},"Record function id":0,'
                  f'"Input type":["c10::BFloat16","c10::BFloat16"],"Input Strides":[[768,1],[1,768]],'
                  f'"Input Dims":[[8192,768],[768,2304]],"Ev Idx":{self.ev_idx}}}}}')

    def api(self, th, name, t0, t1, corr, ext, cat="cuda_runtime", cbid=211, flow=True):
        self.emit(f'{{"ph":"X","cat":"{cat}","name":"{name}","pid":{self.pid},"tid":{self.tids[th]},'
                  f'"ts":{us(t0)},"dur":{us(t1 - t0)},"args":{{"External id":{ext},"cbid":{cbid},"correlation":{corr}}}}}')
        if flow:
            self.emit(f'{{"ph":"s","id":{corr},"pid":{self.pid},"tid":{self.tids[th]},"ts":{us(t0)},'
                      f'"cat":"ac2g","name":"ac2g"}}')

    def gpu(self, cat, name, stream, t0, t1, corr, ext, extra):
        if cat == "kernel":
            grid, block, regs, smem = CONFIG[name]
            coll = ""
            if name == K_NCCL:
                ranks = list(range(self.ranks))
                coll = (f',"Collective name":"allreduce","In msg nelems":{extra},"Out msg nelems":{extra},'
                        f'"Group size":{self.ranks},"dtype":"Float","In split size":"[]","Out split size":"[]",'
                        f'"Process Group Name":"0","Process Group Description":"default_pg",'
                        f'"Process Group Ranks":"{ranks}"')
            args = (f'"External id":{ext},"queued":0,"device":0,"context":1,"stream":{stream},"correlation":{corr},'
                    f'"registers per thread":{regs},"shared memory":{smem},"blocks per SM":{grid / 132:.6f},'
                    f'"warps per SM":{grid * block / 32 / 132:.6f},"grid":[{grid},1,1],"block":[{block},1,1],'
                    f'"est. achieved occupancy %":{min(100, grid * block // 2112)}{coll}')
        else:
            nbytes = extra if isinstance(extra, int) else 4
            args = (f'"External id":{ext},"device":0,"context":1,"stream":{stream},"correlation":{corr},'
                    f'"bytes":{nbytes},"memory bandwidth (GB/s)":{nbytes / max(1, t1 - t0):.6f}')
        self.emit(f'{{"ph":"X","cat":"{cat}","name":"{name}","pid":0,"tid":{stream},"ts":{us(t0)},'
                  f'"dur":{us(t1 - t0)},"args":{{{args}}}}}')
        self.emit(f'{{"ph":"f","id":{corr},"pid":0,"tid":{stream},"ts":{us(t0)},"cat":"ac2g","name":"ac2g","bp":"e"}}')

    def sync_record(self, kind, stream, t0, t1, corr, ext, event_id=None):
        wait = ""
        if event_id is not None:
            wait = (f'"wait_on_stream":-1,"wait_on_cuda_event_record_corr_id":-1,'
                    f'"wait_on_cuda_event_id":{event_id},')
        self.emit(f'{{"ph":"X","cat":"cuda_sync","name":"{kind}","pid":0,"tid":{stream},"ts":{us(t0)},'
                  f'"dur":{us(t1 - t0)},"args":{{"External id":{ext},"cuda_sync_kind":"{kind}",{wait}'
                  f'"stream":{stream},"correlation":{corr},"device":0,"context":1}}}}')
        self.emit(f'{{"ph":"f","id":{corr},"pid":0,"tid":{stream},"ts":{us(t0)},"cat":"ac2g","name":"ac2g","bp":"e"}}')

    def next_corr(self):
        self.corr += self.rng.choice((1, 2, 3, 5))
        return self.corr

    def launch(self, th, api, t, cat, name, stream, gpu_ns, extra):
        """One launch call at CPU time t on thread th, its GPU op and flows; returns the call's end."""
        corr = self.next_corr()
        ext = self.ext
        cost = {"cuLaunchKernelEx": 8 * US, "cudaMemcpyAsync": 12 * US}.get(api, 6 * US)
        t1 = t + self.c(cost)
        cat_api = "cuda_driver" if api.startswith("cu") and not api.startswith("cuda") else "cuda_runtime"
        self.api(th, api, t, t1, corr, ext, cat_api, 652 if cat_api == "cuda_driver" else 211)
        g0 = max(t + self.c(4 * US), self.stream_free[stream])
        g1 = g0 + self.g(gpu_ns)
        self.stream_free[stream] = g1
        self.gpu(cat, name, stream, g0, g1, corr, ext, extra)
        return t1

    def iteration(self, program, step, do_sync):
        cpu = self.cpu
        ann = []        # open annotations: (thread, name, start, ext)
        records = []    # (event id, time the recorded stream reaches the record)
        gpu_first = None
        for item in program:
            kind, th = item[0], item[1]
            t = cpu[th]
            if kind == "op":
                _, _, names, api, cat, name, stream, ns, extra = item
                self.ext += 1
                ext = self.ext
                starts = []
                for _n in names:
                    starts.append(t)
                    t += self.c(3 * US)
                if self.rng.getrandbits(1):  # the output's allocation: a leaf the CPU gauge reads
                    t1 = t + self.c(5 * US)
                    self.cpu_op(th, "aten::empty", t, t1, ext)
                    t = t1 + self.c(1 * US)
                if extra == "memset":  # cuBLAS workspace memset before the GEMM, as in the traces
                    t = self.launch(th, "cudaMemsetAsync", t, "gpu_memset", "Memset (Device)", stream, 1 * US, 4)
                    t += self.c(2 * US)
                    extra = None
                t = self.launch(th, api, t, cat, name, stream, ns, extra)
                if gpu_first is None:
                    gpu_first = self.stream_free[stream]
                for n, t0 in zip(reversed(names), reversed(starts)):
                    t += self.c(1 * US)
                    self.cpu_op(th, n, t0, t, ext)
                if self.with_stack and th == MAIN:
                    self.emit(f'{{"ph":"X","cat":"python_function","name":"torch/nn/modules/module.py(1773): _call_impl",'
                              f'"pid":{self.pid},"tid":{self.tids[th]},"ts":{us(starts[0] - 500)},'
                              f'"dur":{us(t - starts[0] + 1000)},"args":{{"Python parent id":1,"Python id":{self.ext},'
                              f'"Python thread":0}}}}')
                t += self.c(4 * US)
            elif kind == "cpu":
                self.ext += 1
                t1 = t + self.c(item[3])
                self.cpu_op(th, item[2], t, t1, self.ext)
                t = t1 + self.c(2 * US)
            elif kind == "record":
                stream = item[2]
                self.event_id += 1
                corr = self.next_corr()
                t1 = t + self.c(1 * US)
                self.api(th, "cudaEventRecordWithFlags", t, t1, corr, self.ext, cbid=370, flow=False)
                records.append((self.event_id, self.stream_free[stream]))
                t = t1 + self.c(2 * US)
            elif kind == "wait":
                stream = item[2]
                event_id, ready = records.pop(0)
                corr = self.next_corr()
                t1 = t + self.c(1 * US)
                self.api(th, "cudaStreamWaitEvent", t, t1, corr, self.ext, cbid=147)
                self.sync_record("Stream Wait Event", stream, t + 100, t1 - 100, corr, self.ext, event_id)
                self.stream_free[stream] = max(self.stream_free[stream], ready)
                t = t1 + self.c(2 * US)
            elif kind == "handoff":
                to = item[2]
                cpu[to] = max(cpu[to], t + self.c(30 * US))
                cpu[th] = t
                continue
            elif kind == "ann_begin":
                name = item[2]
                if name == "ProfilerStep":
                    name = f"ProfilerStep#{step}"
                self.ext += 1
                ann.append((th, name, t, self.ext))
                t += self.c(2 * US)
            elif kind == "ann_end":
                a_th, name, t0, ext = ann.pop()
                self.cpu_op(a_th, name, t0, t, ext, cat="user_annotation")
                t += self.c(2 * US)
            elif kind == "allreduce":
                nelems = item[2]
                # DDP: record on the compute stream, the comm stream waits, NCCL kernel there.
                self.event_id += 1
                corr = self.next_corr()
                t1 = t + self.c(1 * US)
                self.api(th, "cudaEventRecord", t, t1, corr, self.ext, cbid=135, flow=False)
                records.append((self.event_id, self.stream_free[S_MAIN]))
                t = t1 + self.c(2 * US)
                event_id, ready = records.pop(0)
                corr = self.next_corr()
                t1 = t + self.c(1 * US)
                self.api(th, "cudaStreamWaitEvent", t, t1, corr, self.ext, cbid=147)
                self.sync_record("Stream Wait Event", S_COMM, t + 100, t1 - 100, corr, self.ext, event_id)
                self.stream_free[S_COMM] = max(self.stream_free[S_COMM], ready)
                t = t1 + self.c(2 * US)
                self.ext += 1
                ext = self.ext
                t0 = t
                t += self.c(5 * US)
                t = self.launch(th, "cudaLaunchKernelExC", t, "kernel", K_NCCL, S_COMM,
                                 int(nelems * 4 / 40e9 * 1e9) + 20 * US, nelems)
                t += self.c(2 * US)
                self.cpu_op(th, "nccl:all_reduce", t0, t, ext, cat="user_annotation")
                self.cpu_op(th, "record_param_comms", t0, t, ext)
            cpu[th] = t
        if do_sync:
            t = cpu[MAIN]
            self.ext += 1
            ext = self.ext
            t0 = t
            t += self.c(4 * US)
            t = self.launch(MAIN, "cudaMemcpyAsync", t, "gpu_memcpy", "Memcpy DtoH (Device -> Pinned)", S_MAIN, 2 * US, 4)
            corr = self.next_corr()
            done = max(t + self.c(2 * US), max(self.stream_free.values()) + self.c(3 * US))
            self.api(MAIN, "cudaStreamSynchronize", t, done, corr, ext, cbid=131, flow=False)
            self.sync_record("Stream Sync", S_MAIN, max(t + 100, done - self.c(3 * US)), done - 50, corr, ext)
            t = done + self.c(2 * US)
            self.cpu_op(MAIN, "aten::_local_scalar_dense", t0 + 1 * US, t - 1 * US, ext)
            self.cpu_op(MAIN, "aten::item", t0, t, ext)
            cpu[MAIN] = t
        # The ProfilerStep annotation closes at the end of the step; GPU projection beside it.
        while ann:
            a_th, name, t0, ext = ann.pop()
            self.cpu_op(a_th, name, t0, cpu[MAIN], ext, cat="user_annotation")
            if name.startswith("ProfilerStep#") and gpu_first is not None:
                self.emit(f'{{"ph":"X","cat":"gpu_user_annotation","name":"{name}","pid":0,"tid":{S_MAIN},'
                          f'"ts":{us(gpu_first)},"dur":{us(max(1, self.stream_free[S_MAIN] - gpu_first))},'
                          f'"args":{{"External id":{ext}}}}}')
        cpu[MAIN] += self.c(20 * US)
        cpu[AUTOGRAD] = max(cpu[AUTOGRAD], cpu[MAIN])


def header(rank, ranks):
    dev = ('{"id":0,"name":"NVIDIA H200","totalGlobalMem":150109880320,"computeMajor":9,"computeMinor":0,'
           '"maxThreadsPerBlock":1024,"maxThreadsPerMultiprocessor":2048,"regsPerBlock":65536,"warpSize":32,'
           '"sharedMemPerBlock":49152,"numSms":132,"regsPerMultiprocessor":65536,"sharedMemPerBlockOptin":232448,'
           '"sharedMemPerMultiprocessor":233472}')
    dist = ""
    if ranks > 1:
        dist = (f'"distributedInfo":{{"backend":"nccl","rank":{rank},"world_size":{ranks},"pg_count":1,'
                f'"pg_config":[{{"pg_name":"0","pg_desc":"default_pg","backend_config":"cuda:nccl",'
                f'"pg_size":{ranks},"ranks":{list(range(ranks))}}}],"nccl_version":"2.28.9"}},\n')
    return ('{"schemaVersion":1,\n"deviceProperties":[' + dev + '],\n"trace_id":"EMO_SYNTHETIC",\n'
            '"record_shapes":1,\n' + dist +
            '"cuda_driver_version":13000,\n"cuda_runtime_version":13000,\n"cupti_version":130001,\n'
            '"displayTimeUnit":"ms",\n"baseTimeNanoseconds":1790857026000000000,\n"traceEvents":[\n')


def metadata(em):
    pid = em.pid
    out = [f'{{"name":"process_name","ph":"M","ts":0.000,"pid":{pid},"tid":0,"args":{{"name":"python3"}}}}',
           f'{{"name":"process_labels","ph":"M","ts":0.000,"pid":{pid},"tid":0,"args":{{"labels":"CPU"}}}}',
           f'{{"name":"process_name","ph":"M","ts":0.000,"pid":0,"tid":0,"args":{{"name":"python3"}}}}',
           f'{{"name":"process_labels","ph":"M","ts":0.000,"pid":0,"tid":0,"args":{{"labels":"GPU 0"}}}}']
    for i, tid in enumerate(em.tids):
        out.append(f'{{"name":"thread_name","ph":"M","ts":0.000,"pid":{pid},"tid":{tid},'
                   f'"args":{{"name":"{"python3" if i == 0 else "pt_autograd_0"}"}}}}')
    for s in (S_MAIN, S_SIDE, S_COMM):
        out.append(f'{{"name":"thread_name","ph":"M","ts":0.000,"pid":0,"tid":{s},"args":{{"name":"stream {s}"}}}}')
    return out


def write_rank(path, args, iterations, rank, ranks):
    opener = (lambda p: gzip.open(p, "wb", compresslevel=1)) if path.endswith(".gz") else (lambda p: open(p, "wb"))
    program = build_program(args.layers, ranks > 1)
    with opener(path) as out:
        em = Emitter(out, args, rank, ranks)
        out.write(header(rank, ranks).encode())
        start = 1_000_000_000_000  # 1000 s after the base time, as Kineto's relative times
        em.cpu = [start, start]
        for s in em.stream_free:
            em.stream_free[s] = start
        for m in metadata(em):
            em.emit(m)
        em.flush(True)
        for k in range(iterations):
            em.iteration(program, k + 1, args.sync_every > 0 and (k + 1) % args.sync_every == 0)
            em.flush(False)
        # End of the profiled window: cudaDeviceSynchronize and its Context Sync record.
        t = em.cpu[MAIN]
        corr = em.next_corr()
        done = max(t + 2 * US, max(em.stream_free.values()) + 3 * US)
        em.api(MAIN, "cudaDeviceSynchronize", t, done, corr, em.ext, cbid=165, flow=False)
        em.sync_record("Context Sync", 1, done - 3 * US, done - 1 * US, corr, em.ext)
        em.emit(f'{{"ph":"X","cat":"Trace","ts":{us(start - 100 * US)},"dur":{us(done - start + 200 * US)},'
                f'"pid":"Spans","tid":"PyTorch Profiler","name":"PyTorch Profiler (0)","args":{{"Op count":0}}}}')
        em.flush(False)
        out.write(b'\n],\n"traceName":"synthetic_trace.py"}\n')
    return em.events


def count_per_iteration(args, ranks):
    """Events one iteration writes (the program is the same every iteration), measured by a dry run."""
    class Null:
        def write(self, _):
            pass
    em = Emitter(Null(), args, 0, ranks)
    program = build_program(args.layers, ranks > 1)
    em.iteration(program, 1, args.sync_every == 1)
    one = em.events
    em.events = 0
    if args.sync_every > 1:  # iterations without the sync
        em.iteration(program, 2, False)
    return one if args.sync_every <= 1 else (one + (args.sync_every - 1) * em.events) / args.sync_every


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", help="OUT.json or OUT.json.gz; with --ranks, a folder (rank_<r>.json.gz)")
    ap.add_argument("--events", type=int, required=True, help="target traceEvents count per rank")
    ap.add_argument("--layers", type=int, default=12, help="transformer layers per step (default 12)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--gpu-scale", type=float, default=0.5,
                    help="GPU durations x this (default 0.5: the step is CPU-bound as traced, like gpt_train)")
    ap.add_argument("--sync-every", type=int, default=1, help="loss.item() every N steps; 0: never")
    ap.add_argument("--ranks", type=int, default=1, help="DDP ranks (>= 2: a folder of rank files)")
    ap.add_argument("--plain", action="store_true", help="with --ranks: .json rank files, not .json.gz")
    ap.add_argument("--with-stack", action="store_true", help="python_function events too")
    args = ap.parse_args()
    if args.events < 1 or args.layers < 1 or args.ranks < 1:
        sys.exit("synthetic_trace.py: --events, --layers and --ranks must be positive")
    per = count_per_iteration(args, args.ranks)
    fixed = 12
    iterations = max(3, round((args.events - fixed) / per))
    if args.ranks == 1:
        n = write_rank(args.out, args, iterations, 0, 1)
        print(f"synthetic_trace.py: {n} events, {iterations} iterations of {per:.0f} events, in {args.out}")
        return
    os.makedirs(args.out, exist_ok=True)
    ext = ".json" if args.plain else ".json.gz"
    for r in range(args.ranks):
        n = write_rank(os.path.join(args.out, f"rank_{r}{ext}"), args, iterations, r, args.ranks)
    print(f"synthetic_trace.py: {args.ranks} ranks of {n} events ({iterations} iterations) in {args.out}")


if __name__ == "__main__":
    main()
