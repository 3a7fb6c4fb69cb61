// Kernel classes from real kernel names: a representative list taken from the traces in
// ../shared/traces (H200 training, DDP and pipeline runs; public A100/V100/B200/H100 traces).
#include <string>
#include <utility>

#include <gtest/gtest.h>

#include "emo/model/kernel_class.h"

namespace emo::model {
namespace {

struct Named {
  const char* name;
  KernelKind kind;
};

// Names are verbatim from the traces (parameter lists shortened where they do not matter).
constexpr Named kNames[] = {
    // GEMM
    {"nvjet_sm90_tst_192x128_64x5_1x2_h_bz_coopB_NNT", KernelKind::kGemm},
    {"nvjet_tst_64x16_64x16_2x4_2cta_h_bz_bias_TNT", KernelKind::kGemm},
    {"ampere_sgemm_128x64_nn", KernelKind::kGemm},
    {"volta_sgemm_64x64_nt", KernelKind::kGemm},
    {"sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64_warpgroupsize1x1x1_execute_"
     "segment_k_off_kernel__5x_cublas",
     KernelKind::kGemm},
    {"void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x6_tn_align8>"
     "(cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x6_tn_align8::Params)",
     KernelKind::kGemm},
    {"Cijk_Ailk_Bjlk_SB_Bias_AS_SAV_UserArgs_MT64x16x16_MI16x16x1_SN_LDSB0", KernelKind::kGemm},
    {"bmm_MxE4m3_MxE2m1MxE4m3_Fp32_t128x16x256u2_s3_et128x16_m128x16x32_cga1x1x1_16dp256b_rM_TN_"
     "transOut_schedP2x1x2x3_biasM_bN_tma_tmaOpt_clmp_swiGlu_dynBatch_sm100f",
     KernelKind::kGemm},
    {"void gemmSN_TN_kernel<float, 128, 16, 2, 4, 8, 9, false, "
     "cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float const>, "
     "cublasGemvTensorStridedBatched<float> >(cublasGemmSmallNParams<float const, float>)",
     KernelKind::kGemm},
    // Convolution
    {"sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x64_"
     "warpgroupsize1x1x1_g1_execute_segment_k_off_kernel__5x_cudnn",
     KernelKind::kConv},
    {"sm80_xmma_wgrad_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize64x64x64_"
     "stage4_warpsize2x2x1_g1_tensor16x8x8_execute_kernel_cudnn_train",
     KernelKind::kConv},
    {"cudnn_infer_volta_scudnn_128x64_relu_medium_nn_v1", KernelKind::kConv},
    {"void cudnn::winograd_nonfused::winogradForwardData4x4<float, float>"
     "(cudnn::winograd_nonfused::WinogradDataParams<float, float>)",
     KernelKind::kConv},
    {"_ZN19cutlass_cudnn_train6KernelINS_4conv6kernel23ImplicitGemmConvolutionINS1_"
     "11threadblock22ImplicitGemmMultistage",
     KernelKind::kConv},
    // Attention
    {"cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x64_4x1x1_"
     "cga1x1x1_kernel0_0",
     KernelKind::kAttention},
    {"cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16_knob_26_64x64x64_1x4x1_"
     "cga1x1x1_kernel0_0",
     KernelKind::kAttention},
    {"void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<64, 128, 128, "
     "4, false, false, cutlass::bfloat16_t> >(pytorch_flash::Flash_fwd_params)",
     KernelKind::kAttention},
    {"fmhaSm100aKernel_QkvE4m3OBfloat16H64PagedKvCausalP16VarSeqQ128Kv128PersistentContext",
     KernelKind::kAttention},
    // Activations with transcendental math: their own kind, though their names say elementwise.
    {"void at::native::vectorized_elementwise_kernel<8, at::native::GeluCUDAKernelImpl("
     "at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::"
     "{lambda()#2}::operator()() const::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul> >"
     "(int, at::native::GeluCUDAKernelImpl, std::array<char*, 2ul>)",
     KernelKind::kActivation},
    {"void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::"
     "silu_backward_kernel(at::TensorIteratorBase&)::{lambda()#1}::operator()() const::"
     "{lambda()#3}::operator()() const::{lambda(float, float)#1}, std::array<char*, 3ul> >"
     "(int, float, std::array<char*, 3ul>)",
     KernelKind::kActivation},
    {"triton_poi_fused_gelu_mul_7", KernelKind::kActivation},
    // ReLU (a clamp) is plain elementwise.
    {"void at::native::vectorized_elementwise_kernel<4, at::native::clamp_min_scalar_kernel_impl("
     "at::TensorIteratorBase&, c10::Scalar)::{lambda()#1}::operator()() const::{lambda()#7}::"
     "operator()() const::{lambda(float)#1}, std::array<char*, 2ul> >(int, float, std::array<char*, 2ul>)",
     KernelKind::kElementwise},
    // Pooling.
    {"void at::native::(anonymous namespace)::max_pool_forward_nchw<c10::BFloat16, int>(int, "
     "c10::BFloat16 const*, long, long, long, int, int, int, int, int, int, int, int, int, int, "
     "c10::BFloat16*, long*)",
     KernelKind::kPooling},
    {"void cudnn::pooling_fw_4d_kernel<float, float, cudnn::maxpooling_func<float, "
     "(cudnnNanPropagation_t)0>, 0, false>(cudnnTensorStruct, float const*, cudnnTensorStruct, "
     "float*, cudnnPoolingStruct, float, float, int, cudnn::reduced_divisor, cudnn::reduced_divisor)",
     KernelKind::kPooling},
    // Depthwise convolutions: a weighted window per channel, bound by memory (pooling's kind). The
    // first is cuDNN's, from a MobileNet-shaped loop (data/h100_heldout/conv4); regular
    // implicit-GEMM convolutions stay convolutions.
    {"conv2d_c1_k1_nhwc_specialized", KernelKind::kPooling},
    {"wgrad2d_c1_k1_nhwc_reduce", KernelKind::kPooling},
    {"void at::native::(anonymous namespace)::conv_depthwise2d_forward_kernel<1, c10::Half, int>("
     "at::GenericPackedTensorAccessor<c10::Half const, 4ul, at::DefaultPtrTraits, int>, int)",
     KernelKind::kPooling},
    {"sm80_xmma_fprop_implicit_gemm_indexed_wo_smem_f16f16_f16f32_f32_nhwckrsc_nhwc_tilesize128x32x16_"
     "stage1_warpsize4x1x1_g1_tensor16x8x16_alignc4_execute_kernel__5x_cudnn",
     KernelKind::kConv},
    // Elementwise
    {"void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous "
     "namespace)::FusedOptimizerTensorListMetadata<4>, at::native::(anonymous namespace)::"
     "FusedAdamMathFunctor<float, 4, (at::native::ADAM_MODE)1, false>, double*, double, double, "
     "double, double, double, bool, double*, double*>(long, T1, T2, T3...)",
     KernelKind::kElementwise},
    {"triton_poi_fused_add_cos_sin_0", KernelKind::kElementwise},
    {"void cudnn::fusion::compute_dot_do_o_specialized<true, 64>(void const*, void const*, "
     "void*, void*, unsigned int, unsigned int, unsigned int, unsigned int)",
     KernelKind::kElementwise},
    {"void vllm::rotary_embedding_kernel<c10::BFloat16, true>(long const*, c10::BFloat16*, "
     "c10::BFloat16*, c10::BFloat16 const*, int, long, long, long, int, int, int)",
     KernelKind::kElementwise},
    {"void tensorrt_llm::kernels::quantize_with_block_size<(tensorrt_llm::"
     "BlockScaleQuantizationType)2, __nv_bfloat16, 32, true>(int, int, int, int, __nv_bfloat16 "
     "const*, float const*, unsigned int*, unsigned int*, flashinfer::QuantizationSFLayout)",
     KernelKind::kElementwise},
    // Reductions
    {"void at::native::reduce_kernel<128, 4, at::native::ReduceOp<c10::BFloat16, at::native::"
     "func_wrapper_t<c10::BFloat16, at::native::sum_functor<c10::BFloat16, float, c10::BFloat16>"
     "::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, c10::BFloat16, "
     "4, 4> >(at::native::ReduceOp<c10::BFloat16>)",
     KernelKind::kReduction},
    {"void at::native::(anonymous namespace)::cunn_SoftMaxForward<8, c10::BFloat16, float, "
     "c10::BFloat16, at::native::(anonymous namespace)::LogSoftMaxForwardEpilogue>"
     "(c10::BFloat16*, c10::BFloat16 const*, int)",
     KernelKind::kSoftmax},
    {"void splitKreduce_kernel<float, float, float, float, true, false, false>"
     "(cublasSplitKParams<float>, float const*, float const*, float*, float const*, float const*, "
     "float const*, float const*, float*, void*, long, float*, int*)",
     KernelKind::kReduction},
    {"std::enable_if<!(false), void>::type internal::gemvx::kernel<int, int, float, float, "
     "float, float, false, true, true, false, 7, cublasGemvParams<cublasGemvTensorStridedBatched"
     "<float const>, cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched"
     "<float>, float> >(cublasGemvParams<float>)",
     KernelKind::kReduction},
    // Norms
    {"void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float, false>"
     "(int, float, float const*, float const*, float const*, float*, float*, float*)",
     KernelKind::kNorm},
    {"void at::native::(anonymous namespace)::GammaBetaBackwardCUDAKernelTemplate<float, float, "
     "32u, 32u, 256u, false, true, false>(long, long, float const*, float const*, float const*, "
     "float const*, float*, float*)",
     KernelKind::kNorm},
    {"void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, int, 512, true, 1, true>"
     "(cudnnTensorStruct, float const*, cudnnTensorStruct, float*, float const*, float const*)",
     KernelKind::kNorm},
    {"std::enable_if<(((8)>(0)))&&vllm::_typeConvert<c10::BFloat16>::exists, void>::type "
     "vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*, long, c10::BFloat16*, "
     "c10::BFloat16 const*, float, int, int)",
     KernelKind::kNorm},
    // Copies and data movement
    {"Memcpy DtoD (Device -> Device)", KernelKind::kCopy},
    {"Memcpy HtoD (Pinned -> Device)", KernelKind::kCopy},
    {"void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda("
     "at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#10}::operator()() "
     "const::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul>, 4, TrivialOffsetCalculator<1, "
     "unsigned int>, TrivialOffsetCalculator<1, unsigned int>, at::native::memory::"
     "LoadWithCast<1>, at::native::memory::StoreWithCast<1> >(int, T1, T2, T3, T4, T5, T6)",
     KernelKind::kCopy},
    {"void at::native::(anonymous namespace)::CatArrayBatchedCopy_vectorized<at::native::"
     "(anonymous namespace)::OpaqueType<2u>, unsigned int, 3, 128, 1, 16, 8>(char*, "
     "at::native::(anonymous namespace)::CatArrInputTensorMetadata)",
     KernelKind::kCopy},
    {"void nhwcAddPaddingKernel<__nv_bfloat16, __nv_bfloat16, float, true, "
     "(cudnnKernelDataType_t)0>(int, int, int, int, int, int, int, int, __nv_bfloat16 const*, "
     "__nv_bfloat16*, int, int, int, int, float, float, cudnn::reduced_divisor, "
     "cudnn::reduced_divisor, cudnn::reduced_divisor)",
     KernelKind::kCopy},
    {"void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16, unsigned char, "
     "(vllm::Fp8KVCacheDataType)1>(__nv_bfloat16 const*, __nv_bfloat16 const*, unsigned char*)",
     KernelKind::kCopy},
    {"void fbgemm_gpu::permute_2D_data_kernel<false, int, int, decltype(nullptr)>(int, int, int, "
     "int const*, decltype(nullptr) const*, int const*, int const*, int const*, int*, "
     "decltype(nullptr)*)",
     KernelKind::kCopy},
    // Memset and fills
    {"Memset (Device)", KernelKind::kMemset},
    {"void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
     "std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)",
     KernelKind::kMemset},
    // Communication
    {"ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
     KernelKind::kCollective},
    {"ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)", KernelKind::kCollective},
    {"ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)",
     KernelKind::kCollective},
    {"void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>(c10::BFloat16*, "
     "unsigned long, unsigned int**, unsigned long, unsigned long)",
     KernelKind::kCollective},
    // Other
    {"at::cuda::(anonymous namespace)::spin_kernel(long)", KernelKind::kOther},
    {"triton__0d1d2d3d", KernelKind::kOther},
    {"cask_cudnn_train::computeWgradBOffsetsKernel(cask_cudnn_train::ComputeWgradBOffsetsParams)",
     KernelKind::kOther},
    {"void at_cuda_detail::cub::detail::radix_sort::DeviceRadixSortOnesweepKernel<at_cuda_detail"
     "::cub::detail::radix::policy_hub<long, long>::Policy900, false, long, long, unsigned long, "
     "int, int, at_cuda_detail::cub::detail::identity_decomposer_t>(int*, int*, unsigned long*)",
     KernelKind::kOther},
    {"Kernel", KernelKind::kOther},
    // Softmax is its own kind (its time follows the clock where other reductions' does not).
    {"void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, "
     "at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(float*, float const*, int)",
     KernelKind::kSoftmax},
    {"void at::native::(anonymous namespace)::cunn_SoftMaxBackward<4, float, float, float, "
     "at::native::(anonymous namespace)::LogSoftMaxBackwardEpilogue>(float*, float const*, float const*, long)",
     KernelKind::kSoftmax},
};

TEST(KernelClassTest, RealNamesGetTheirKind) {
  for (const Named& n : kNames) {
    EXPECT_EQ(KernelKindName(ClassifyKind(n.name)), KernelKindName(n.kind)) << n.name;
  }
}

TEST(KernelClassTest, KindsMapToClasses) {
  EXPECT_EQ(ClassOf(KernelKind::kGemm), KernelClass::kCompute);
  EXPECT_EQ(ClassOf(KernelKind::kConv), KernelClass::kCompute);
  EXPECT_EQ(ClassOf(KernelKind::kAttention), KernelClass::kCompute);
  for (KernelKind k : {KernelKind::kElementwise, KernelKind::kReduction, KernelKind::kSoftmax,
                       KernelKind::kNorm, KernelKind::kCopy, KernelKind::kMemset, KernelKind::kActivation,
                       KernelKind::kPooling}) {
    EXPECT_EQ(ClassOf(k), KernelClass::kMemory) << KernelKindName(k);
  }
  EXPECT_EQ(ClassOf(KernelKind::kCollective), KernelClass::kCommunication);
  EXPECT_EQ(ClassOf(KernelKind::kOther), KernelClass::kOther);
  EXPECT_EQ(Classify("ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)"),
            KernelClass::kCommunication);
}

TEST(KernelClassTest, ParameterTypesDoNotDecide) {
  // The parameter list mentions cudnn::reduced_divisor and flashinfer, neither of which says what
  // the kernel does.
  EXPECT_EQ(ClassifyKind("void foo_copy_kernel<int>(cudnn::reduced_divisor, flashinfer::X)"),
            KernelKind::kCopy);
  EXPECT_EQ(ClassifyKind("void mystery<int>(float* attention_out)"), KernelKind::kOther);
}

TEST(KernelClassTest, ClassNamesRoundTrip) {
  for (int i = 0; i < kNumKernelClasses; ++i) {
    KernelClass c{};
    ASSERT_TRUE(ParseKernelClass(KernelClassName(static_cast<KernelClass>(i)), c));
    EXPECT_EQ(static_cast<int>(c), i);
  }
  KernelClass c{};
  EXPECT_FALSE(ParseKernelClass("gpu", c));
}

}  // namespace
// GEMMs on the CUDA cores (fp32 without TF32) by name; tensor-core and TF32 ones are not, nor
// non-compute kernels whose names happen to contain the words.
TEST(KernelClassTest, CudaCoreGemmsByName) {
  for (const char* n : {"sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma",
                        "void cutlass::Kernel2<cutlass_80_simt_sgemm_128x64_8x5_nn_align1>(Params)",
                        "ampere_sgemm_128x64_nn"}) {
    EXPECT_TRUE(IsCudaCoreGemm(n)) << n;
  }
  for (const char* n : {"sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize64x64x32_warpgroupsize1x1x1",
                        "nvjet_sm90_tst_128x64_64x8_1x2_h_bz_NNT",
                        "void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_64x64_32x6_nn_align4>(Params)",
                        "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>",
                        "Memcpy DtoD (Device -> Device)"}) {
    EXPECT_FALSE(IsCudaCoreGemm(n)) << n;
  }
}

// TF32 by name: cuBLAS/cuDNN's tf32 in any case, and CUTLASS's fp32 tensor-core instruction
// (s1688, cuDNN's RNN and convolution kernels); not fp32 on the CUDA cores, nor 16-bit.
TEST(KernelClassTest, Tf32ByName) {
  for (const char* n : {"sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize64x64x32_warpgroupsize1x1x1",
                        "void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_64x64_32x6_nn_align4>(Params)",
                        "void cutlass__5x_cudnn::Kernel<cutlass_tensorop_s1688dgrad_optimized_tf32_64x64_16x10_nhwc_align4>",
                        "cutlass_tensorop_s1688fprop_optimized_64x64_16x10_nhwc_align4"}) {
    EXPECT_TRUE(IsTf32(n)) << n;
  }
  for (const char* n : {"sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma",
                        "void cutlass::Kernel2<cutlass_80_simt_sgemm_128x64_8x5_nn_align1>(Params)",
                        "void cutlass::Kernel2<cutlass_80_tensorop_h1688gemm_64x64_32x6_nn_align8>(Params)",
                        "nvjet_sm90_tst_128x64_64x8_1x2_h_bz_NNT"}) {
    EXPECT_FALSE(IsTf32(n)) << n;
  }
}

// A GEMM kernel's tile as its library names it; cluster shapes, template arguments and names
// without a tile give none.
TEST(KernelClassTest, GemmTilesFromNames) {
  auto tile = [](std::string_view name) {
    const GemmTile t = GemmTileOf(name);
    return std::pair{t.m, t.n};
  };
  EXPECT_EQ(tile("nvjet_sm90_tst_64x8_64x16_1x2_h_bz_NNT"), std::pair(64, 8));
  EXPECT_EQ(tile("nvjet_sm90_hsh_128x256_64x4_2x1_v_ssched_bz_coopA_TNN"), std::pair(128, 256));
  EXPECT_EQ(tile("sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x256x32_warpgroupsize2x1x1"),
            std::pair(128, 256));
  EXPECT_EQ(tile("sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64_stage4_warpsize2x2x1"),
            std::pair(64, 64));
  EXPECT_EQ(tile("void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_64x64_32x6_nn_align4>(Params)"),
            std::pair(64, 64));
  EXPECT_EQ(tile("cutlass3x_sm90_tensorop_gemm_bf16_bf16_f32_bf16_bf16_128x256x64_1x2x1_0_tnn_align8"),
            std::pair(128, 256));
  EXPECT_EQ(tile("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_32x5_nn"), std::pair(128, 128));
  EXPECT_EQ(tile("nvjet_sm90_tst_320x128_64x3_1x2_h_bz_coopB_NNT"), std::pair(320, 128));
  EXPECT_FALSE(GemmTileOf("triton_tem_fused_mm_0").Known());
  EXPECT_FALSE(GemmTileOf("void at::native::vectorized_elementwise_kernel<4, at::native::AUnaryFunctor>").Known());
  EXPECT_FALSE(GemmTileOf("kernel_1x2_cluster_5x5").Known());         // sides below 8 or not multiples
  EXPECT_FALSE(GemmTileOf("gemm_1024x8192_ldg").Known());             // a side above 512
  EXPECT_FALSE(GemmTileOf("gemm_12345x64").Known());                  // five digits: not a tile side
  EXPECT_NEAR(GemmTileOf("nvjet_sm90_tst_256x128_64x4").Intensity(), 256.0 * 128 / 384, 1e-12);
  EXPECT_DOUBLE_EQ(GemmTile{}.Intensity(), 0.0);
}

}  // namespace emo::model
