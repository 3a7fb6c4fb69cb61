// A matrix-multiply kernel's work per µs from its operator's work, and the share of the compute
// class's power its work_power curve gives it (kernel_work.h, device.h WorkShare); shares above 1
// reach the energy unclipped.
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "emo/model/iteration_energy.h"
#include "emo/model/kernel_work.h"
#include "emo/model/pack_model.h"
#include "trace_builder.h"

namespace emo::model {
namespace {

constexpr double kPeak16 = 1000e12, kPeakTf32 = 500e12, kPeakFp32 = 50e12;

DeviceModel WorkDevice() {
  DeviceModel d;
  d.clocks = {MegaHertz(1000.0), MegaHertz(2000.0)};
  d.default_clock = MegaHertz(2000.0);
  d.params.f_max = MegaHertz(2000.0);
  d.params.static_power = Watts(50.0);
  d.idle_power = Watts(100.0);
  d.cap_power = Watts(1e6);
  d.params.power_limit = Watts(1e6);
  // Compute filling the GPU: 50 + 0.2 x 2000 = 450 W, 350 W above idle.
  d.classes[static_cast<size_t>(KernelClass::kCompute)].activity = 0.2;
  d.classes[static_cast<size_t>(KernelClass::kMemory)].activity = 0.1;
  d.work_power.known = true;
  d.work_power.peak_16bit_flops = kPeak16;
  d.work_power.peak_tf32_flops = kPeakTf32;
  d.work_power.peak_fp32_flops = kPeakFp32;
  d.work_power.tensor = {70.0, 630.0, 1.0};    // 70 W at u = 0, 700 W at u = 1
  d.work_power.cuda_core = {35.0, 140.0, 0.5};
  return d;
}

constexpr const char* kGemm = "nvjet_sm90_tst_192x128_64x5_1x2_h_bz_coopB_NNT";
constexpr const char* kSgemm = "ampere_sgemm_128x64_nn";
constexpr const char* kTf32Conv =
    "sm80_xmma_wgrad_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize64x64x64";
constexpr const char* kAdd = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>";

TEST(KernelWorkTest, AnOperatorsWorkIsSpreadOverItsMatrixKernelsByTheirPeak) {
  testing::TraceBuilder b;
  b.Kernel(kGemm, 7, 0, 3, 1, /*external_id=*/10);  // 3 µs + 1 µs of one operator's GEMMs
  b.Kernel(kGemm, 7, 3, 4, 2, 10);
  b.Kernel(kAdd, 7, 4, 5, 3, 10);      // its epilogue: not a matrix multiply
  b.Kernel(kSgemm, 7, 5, 15, 4, 11);   // fp32 inputs on the CUDA cores
  b.Kernel(kTf32Conv, 7, 15, 17, 5, 12);  // fp32 inputs, tf32 kernel
  b.Kernel(kGemm, 7, 17, 18, 6, 13);   // an operator whose work is far beyond the peak
  b.Kernel(kGemm, 7, 18, 19, 7, 14);   // no work recorded
  b.Kernel(kGemm, 7, 19, 20, 8);       // no operator
  trace::Trace t = b.Build();
  t.op_work[10] = {1.0e9, trace::OpPrecision::k16Bit};
  t.op_work[11] = {1.0e8, trace::OpPrecision::kFp32};
  t.op_work[12] = {2.0e8, trace::OpPrecision::kFp32};
  t.op_work[13] = {1.0e12, trace::OpPrecision::kUnknown};
  const std::vector<KernelWork> w = KernelWorkFromTrace(t, ShareKindsOf(t), WorkDevice());
  ASSERT_EQ(w.size(), 8u);
  // 1 GFLOP over 4 µs at 1000 TFLOP/s: u = 0.25 for both of its GEMMs.
  EXPECT_NEAR(w[0].u, 0.25, 1e-12);
  EXPECT_NEAR(w[1].u, 0.25, 1e-12);
  EXPECT_FALSE(w[0].cuda_core);
  EXPECT_FALSE(w[2].Known());
  EXPECT_NEAR(w[3].u, 1.0e8 / (10e-6 * kPeakFp32), 1e-12);  // 0.2
  EXPECT_TRUE(w[3].cuda_core);
  EXPECT_NEAR(w[4].u, 2.0e8 / (2e-6 * kPeakTf32), 1e-12);  // 0.2 on the tf32 peak
  EXPECT_FALSE(w[4].cuda_core);
  EXPECT_DOUBLE_EQ(w[5].u, 1.0);
  EXPECT_FALSE(w[6].Known());
  EXPECT_FALSE(w[7].Known());

  // Coverage: 20 µs of kernels, 19 of them matrix multiplies (all but the add), 17 with known work
  // (the last two GEMMs have none).
  const WorkCoverage c = CoverageOf(t, ShareKindsOf(t), w, WorkDevice());
  EXPECT_NEAR(c.kernel_s, 20e-6, 1e-15);
  EXPECT_NEAR(c.matmul_s, 19e-6, 1e-15);
  EXPECT_NEAR(c.known_s, 17e-6, 1e-15);
  EXPECT_NEAR(c.KnownShare(), 17.0 / 19.0, 1e-12);
  // Per kind, what the kernels of known work draw by their work against their launch (no grid
  // in these records and no occupancy numbers in the device: a launch share of 1 each).
  const DeviceModel d = WorkDevice();
  const auto& gemm = c.kinds[static_cast<size_t>(ShareKindOf(KernelKind::kGemm, false))];
  EXPECT_NEAR(gemm.matmul_s, 7e-6, 1e-15);
  EXPECT_NEAR(gemm.known_s, 5e-6, 1e-15);
  EXPECT_NEAR(gemm.work_share_s, 4e-6 * d.WorkShare(0.25, false) + 1e-6 * d.WorkShare(1.0, false), 1e-15);
  EXPECT_NEAR(gemm.launch_share_s, 5e-6, 1e-15);
  const auto& sgemm = c.kinds[static_cast<size_t>(kCudaCoreGemmShareKind)];
  EXPECT_NEAR(sgemm.known_s, 10e-6, 1e-15);
  EXPECT_NEAR(sgemm.work_share_s, 10e-6 * d.WorkShare(0.2, true), 1e-15);
  const auto& conv = c.kinds[static_cast<size_t>(ShareKindOf(KernelKind::kConv, false))];
  EXPECT_NEAR(conv.known_s, 2e-6, 1e-15);
  EXPECT_NEAR(conv.work_share_s, 2e-6 * d.WorkShare(0.2, false), 1e-15);
  EXPECT_NEAR(conv.launch_share_s, 2e-6, 1e-15);
  EXPECT_DOUBLE_EQ(c.kinds[static_cast<size_t>(ShareKindOf(KernelKind::kElementwise, false))].matmul_s, 0.0);

  DeviceModel none = WorkDevice();
  none.work_power = {};
  const std::vector<KernelWork> unknown = KernelWorkFromTrace(t, ShareKindsOf(t), none);
  for (const KernelWork& k : unknown) EXPECT_FALSE(k.Known());
  EXPECT_DOUBLE_EQ(CoverageOf(t, ShareKindsOf(t), unknown, none).known_s, 0.0);
  EXPECT_DOUBLE_EQ(WorkCoverage{}.KnownShare(), 1.0);  // no matrix multiplies: nothing unseen
}

TEST(KernelWorkTest, WorkShareIsTheCurveOverTheComputeClassPower) {
  DeviceModel d = WorkDevice();
  EXPECT_DOUBLE_EQ(d.ComputeAboveIdle(), 350.0);
  EXPECT_DOUBLE_EQ(d.WorkShare(0.0, false), 70.0 / 350.0);
  EXPECT_DOUBLE_EQ(d.WorkShare(0.5, false), (70.0 + 315.0) / 350.0);
  EXPECT_DOUBLE_EQ(d.WorkShare(1.0, false), 2.0);  // hungrier than the class: above 1
  EXPECT_DOUBLE_EQ(d.WorkShare(2.0, false), 2.0);  // u is at most 1
  EXPECT_DOUBLE_EQ(d.WorkShare(0.25, true), (35.0 + 140.0 * 0.5) / 350.0);
  d.activity_scale = 0.5;  // a scale moves what the curve draws as it moves the class power
  EXPECT_DOUBLE_EQ(d.ComputeAboveIdle(), 175.0);
  EXPECT_DOUBLE_EQ(d.WorkShare(0.5, false) * d.ComputeAboveIdle(), 0.5 * 385.0);
  KernelWork known{0.5, false};
  const int gemm = static_cast<int>(KernelKind::kGemm);
  EXPECT_DOUBLE_EQ(OpShare(d, known, 1, 32, 1e-6, gemm), d.WorkShare(0.5, false));
  EXPECT_DOUBLE_EQ(OpShare(d, KernelWork{}, 1, 32, 1e-6, gemm), 1.0);  // KernelShare, nothing known
  d.work_power.known = false;
  EXPECT_DOUBLE_EQ(d.WorkShare(0.5, false), 0.0);
}

// A GEMM kernel a convolution operator launched is a convolution; every other op takes its name's
// kind, whatever launched it.
TEST(KernelWorkTest, AGemmKernelAConvolutionLaunchedIsAConvolution) {
  testing::TraceBuilder b;
  b.Op("aten::cudnn_convolution", 0, 1);  // External id 30
  b.Op("aten::mm", 2, 3);                 // External id 31
  b.Kernel(kGemm, 7, 0, 1, 1, 30);        // cuBLAS's GEMM for a convolution
  b.Kernel(kSgemm, 7, 1, 2, 2, 30);       // on the CUDA cores, likewise
  b.Kernel(kAdd, 7, 2, 3, 3, 30);         // not a GEMM: its own kind
  b.Kernel(kTf32Conv, 7, 3, 4, 4, 30);    // a convolution kernel already
  b.Kernel(kGemm, 7, 4, 5, 5, 31);        // a GEMM for a matrix multiply
  b.Kernel(kSgemm, 7, 5, 6, 6);           // no operator
  trace::Trace t = b.Build();
  t.cpu.external_id[0] = 30;
  t.cpu.external_id[1] = 31;
  const int conv = static_cast<int>(KernelKind::kConv), gemm = static_cast<int>(KernelKind::kGemm);
  const std::vector<int> kinds = ShareKindsOf(t);
  ASSERT_EQ(kinds.size(), 6u);
  EXPECT_EQ(kinds[0], conv);
  EXPECT_EQ(kinds[1], conv);
  EXPECT_EQ(kinds[2], ShareKindOfName(kAdd));
  EXPECT_NE(kinds[2], conv);
  EXPECT_EQ(kinds[3], conv);
  EXPECT_EQ(kinds[4], gemm);
  EXPECT_EQ(kinds[5], kCudaCoreGemmShareKind);
  // The convolution's GEMM kernels count as convolution time in the coverage.
  const WorkCoverage c = CoverageOf(t, kinds, KernelWorkFromTrace(t, kinds, WorkDevice()), WorkDevice());
  EXPECT_NEAR(c.kinds[static_cast<size_t>(conv)].matmul_s, 3e-6, 1e-15);
  EXPECT_NEAR(c.kinds[static_cast<size_t>(gemm)].matmul_s, 1e-6, 1e-15);
  EXPECT_NEAR(c.kinds[static_cast<size_t>(kCudaCoreGemmShareKind)].matmul_s, 1e-6, 1e-15);
}

// Which operators are convolutions goes by a word of the name, not by any "conv" inside it: an
// operator converting a weight layout that happens to run a GEMM keeps it a GEMM.
TEST(KernelWorkTest, OnlyAnOperatorNamedForAConvolutionMakesItsGemmAConvolution) {
  const char* ops[] = {"aten::_conv_depthwise2d", "quantized::conv2d_relu", "aten::mkldnn_convolution",
                       "aten::_convert_weight_to_int4pack", "aten::convert_element_type", "aten::mm"};
  const bool is_conv[] = {true, true, true, false, false, false};
  testing::TraceBuilder b;
  for (int i = 0; i < 6; ++i) {
    b.Op(ops[i], 2 * i, 2 * i + 1);
    b.Kernel(kGemm, 7, 2 * i, 2 * i + 1, i + 1, 40 + i);
  }
  trace::Trace t = b.Build();
  for (int i = 0; i < 6; ++i) t.cpu.external_id[static_cast<size_t>(i)] = 40 + i;
  const std::vector<int> kinds = ShareKindsOf(t);
  ASSERT_EQ(kinds.size(), 6u);
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(kinds[static_cast<size_t>(i)],
              static_cast<int>(is_conv[i] ? KernelKind::kConv : KernelKind::kGemm)) << ops[i];
  }
}

// A tensor-core GEMM of unknown work: u from the tile its name states, the SMs its grid covers
// and its length past the floor; never for a GEMM a convolution launched (a convolution by
// ShareKindsOf), never over the work its operator's shapes give, and counted apart from that work
// in the coverage.
TEST(KernelWorkTest, ATensorCoreGemmOfUnknownWorkTakesItsTilesWork) {
  DeviceModel d = WorkDevice();
  d.sm_count = 100;
  d.work_power.tile = {true, 0.7, 20.0, 2.0};
  // u_sat x min(1, intensity / knee) x covered x (d - floor) / d
  EXPECT_NEAR(d.TileWork(10.0, 50, 4e-6), 0.7 * 0.5 * 0.5 * 0.5, 1e-12);
  EXPECT_NEAR(d.TileWork(40.0, 500, 10e-6), 0.7 * 0.8, 1e-12);  // a full tile, every SM
  EXPECT_NEAR(d.TileWork(40.0, 0, 10e-6), 0.7 * 0.8, 1e-12);    // no grid recorded: every SM
  EXPECT_DOUBLE_EQ(d.TileWork(40.0, 500, 1.5e-6), 0.0);           // shorter than the floor
  EXPECT_TRUE(std::isnan(d.TileWork(0.0, 500, 10e-6)));           // no tile

  testing::TraceBuilder b;
  b.Op("aten::cudnn_convolution", 0, 1);
  b.Kernel(kGemm, 7, 0, 10, 1);           // no operator: 192x128 in 16 bits, 38.4 multiply-adds a byte
  b.Kernel(kGemm, 7, 10, 20, 2, 20);      // launched by the convolution (External id 20)
  b.Kernel(kGemm, 7, 20, 30, 3, 21);      // an operator whose shapes give its work
  b.Kernel("sm90_xmma_gemm_f32f32_tf32f32_f32_nt_n_tilesize64x128x32_warpgroupsize1x1x1", 7, 30, 40, 4);
  b.Kernel(kSgemm, 7, 40, 50, 5);         // CUDA cores: no tile estimate
  b.Kernel(kTf32Conv, 7, 50, 60, 6);      // a convolution kernel: no tile estimate
  b.Kernel(kAdd, 7, 60, 70, 7);
  trace::Trace t = b.Build();
  t.cpu.external_id[0] = 20;
  for (auto& l : t.gpu.launch) {
    l.grid[0] = 50;
    l.grid[1] = l.grid[2] = 1;
  }
  t.op_work[21] = {2.0e9, trace::OpPrecision::k16Bit};
  const std::vector<KernelWork> w = KernelWorkFromTrace(t, ShareKindsOf(t), d);
  ASSERT_EQ(w.size(), 7u);
  EXPECT_TRUE(w[0].from_tile);
  EXPECT_NEAR(w[0].u, 0.7 * 1.0 * 0.5 * 0.8, 1e-12);
  EXPECT_FALSE(w[1].Known());
  EXPECT_FALSE(w[2].from_tile);
  EXPECT_NEAR(w[2].u, 2.0e9 / (10e-6 * kPeak16), 1e-12);
  // TF32 loads 4 bytes an element: 64x128 gives 42.7 / 4 = 10.7 multiply-adds a byte.
  EXPECT_TRUE(w[3].from_tile);
  EXPECT_NEAR(w[3].u, 0.7 * (64.0 * 128 / 192 / 4) / 20.0 * 0.5 * 0.8, 1e-12);
  EXPECT_FALSE(w[4].Known());
  EXPECT_FALSE(w[5].Known());
  EXPECT_FALSE(w[6].Known());
  // The power follows the curve at the estimated u.
  const int gemm = static_cast<int>(KernelKind::kGemm);
  EXPECT_DOUBLE_EQ(OpShare(d, w[0], 50, 384, 10e-6, gemm), d.WorkShare(w[0].u, false));

  const WorkCoverage c = CoverageOf(t, ShareKindsOf(t), w, d);
  EXPECT_NEAR(c.matmul_s, 60e-6, 1e-15);
  EXPECT_NEAR(c.known_s, 10e-6, 1e-15);
  EXPECT_NEAR(c.tile_s, 20e-6, 1e-15);
  EXPECT_NEAR(c.EstimatedShare(), 0.5, 1e-12);
  EXPECT_NEAR(c.kinds[static_cast<size_t>(gemm)].tile_s, 20e-6, 1e-15);
  // Only the kernels of known work are the power-share evidence.
  EXPECT_NEAR(c.kinds[static_cast<size_t>(gemm)].known_s, 10e-6, 1e-15);

  d.work_power.tile.known = false;
  EXPECT_FALSE(KernelWorkFromTrace(t, ShareKindsOf(t), d)[0].Known());
}

// A kind's power share scales its kernels of unknown work only, and only that kind's.
TEST(KernelWorkTest, PowerShareScalesAKindsKernelsOfUnknownWork) {
  DeviceModel d = WorkDevice();
  d.sm_count = 100;
  const int conv = static_cast<int>(KernelKind::kConv), gemm = static_cast<int>(KernelKind::kGemm);
  EXPECT_DOUBLE_EQ(d.PowerShare(conv), 1.0);  // the file gives none
  d.kind_power_share[static_cast<size_t>(conv)] = 0.75;
  EXPECT_DOUBLE_EQ(d.PowerShare(conv), 0.75);
  EXPECT_DOUBLE_EQ(d.PowerShare(gemm), 1.0);
  EXPECT_DOUBLE_EQ(d.PowerShare(-1), 1.0);
  EXPECT_DOUBLE_EQ(d.PowerShare(kNumShareKinds), 1.0);
  // 50 blocks cover half the SMs: 0.5 from the launch, times the kind's 0.75.
  EXPECT_DOUBLE_EQ(OpShare(d, KernelWork{}, 50, 128, 1e-3, conv), 0.5 * 0.75);
  EXPECT_DOUBLE_EQ(OpShare(d, KernelWork{}, 50, 128, 1e-3, gemm), 0.5);
  // A convolution whose work is known draws its work's power, whatever its kind's share.
  const KernelWork known{0.5, false};
  EXPECT_DOUBLE_EQ(OpShare(d, known, 50, 128, 1e-3, conv), d.WorkShare(0.5, false));
  // CUDA-core GEMMs keep their own factor, and a power share of their kind multiplies it.
  d.cuda_core_gemm_share = 0.8;
  d.kind_power_share[static_cast<size_t>(kCudaCoreGemmShareKind)] = 0.5;
  EXPECT_DOUBLE_EQ(OpShare(d, KernelWork{}, 100, 128, 1e-3, kCudaCoreGemmShareKind), 0.8 * 0.5);
}

// A share above 1 reaches the iteration's energy and the pack's power unclipped.
TEST(KernelWorkTest, SharesAboveOneAreNotClipped) {
  const DeviceModel d = WorkDevice();
  const double share = d.WorkShare(1.0, false);  // 2: 700 W above idle
  const std::vector<ClassInterval> ops = {{0, 1'000'000, KernelClass::kCompute, share}};
  const ActivityProfile p = ProfileFromIntervals(ops, 1);
  EXPECT_DOUBLE_EQ(p.share[static_cast<size_t>(KernelClass::kCompute)], 2.0);
  const IterationEnergy e = PredictIterationEnergy(d, p, 2e-3, 1.0, d.default_clock);
  EXPECT_NEAR(e.energy_j, 100.0 * 2e-3 + 700.0 * 1e-3, 1e-9);

  const std::vector<OpSpan> spans = {{0, 1000, KernelClass::kCompute, share}};
  EXPECT_DOUBLE_EQ(ConcurrencyFactors(d, spans)[0], 1.0);
  ClassTimes times;
  times.Add(KernelClass::kCompute, 1e-3, share);
  const UnitModel unit = PackUnitModel(d, times, d.default_clock);
  const double power = UnitPower(d.params, unit, d.default_clock).value();
  EXPECT_NEAR(power, 100.0 + 700.0, 1e-9);
  // Beside a memory kernel of full share, the pair draws at most the hungrier op.
  const std::vector<OpSpan> pair = {{0, 1000, KernelClass::kCompute, share}, {0, 1000, KernelClass::kMemory, 1.0}};
  const std::vector<double> f = ConcurrencyFactors(d, pair);
  EXPECT_NEAR(f[0], 700.0 / (700.0 + 150.0), 1e-9);
}

}  // namespace
}  // namespace emo::model
