// Pack models and Pareto filtering of clock options.
#include <limits>

#include <gtest/gtest.h>

#include "emo/model/pack_model.h"
#include "test_util.h"

namespace emo::model {
namespace {

TEST(ParetoTest, KeepsOnlyNonDominatedOptions) {
  // 1395 MHz is slower and costlier than 1410 MHz (as in the Perseus A100 table).
  std::vector<ClockOption> o = {{MegaHertz(1410), 1.00, 10.0}, {MegaHertz(1395), 1.01, 10.5},
                                {MegaHertz(1200), 1.10, 8.0},  {MegaHertz(1000), 1.30, 7.5},
                                {MegaHertz(900), 1.50, 7.6},   {MegaHertz(1300), 1.05, 8.0}};
  std::vector<size_t> f = ParetoFront(o);
  // 1395 (slower, costlier than 1410), 1200 (as costly as 1300 but slower) and 900 (slower and
  // costlier than 1000) are dominated.
  ASSERT_EQ(f, (std::vector<size_t>{0, 5, 3}));
  for (size_t i = 1; i < f.size(); ++i) {
    EXPECT_GT(o[f[i]].time_s, o[f[i - 1]].time_s);
    EXPECT_LT(o[f[i]].energy_j, o[f[i - 1]].energy_j);
  }
}

TEST(PackModelTest, SplitsTimeByClassPriors) {
  Result<DeviceModel> d = FindDevice("h200", testing::SourceDir() + "/devices");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  ClassTimes t;
  t.Add(KernelClass::kCompute, 0.010);
  t.Add(KernelClass::kMemory, 0.010);
  UnitModel u = PackUnitModel(*d, t, d->default_clock);
  const double sc = d->Prior(KernelClass::kCompute).comp_share;
  const double sm = d->Prior(KernelClass::kMemory).comp_share;
  EXPECT_NEAR(u.t_comp_s, 0.010 * (sc + sm), 1e-12);
  EXPECT_NEAR(u.t_mem_s, 0.010 * (2 - sc - sm), 1e-12);
  // At the default (= top) clock the pack takes exactly its measured time.
  EXPECT_NEAR(UnitTime(d->params, u, d->default_clock), 0.020, 1e-12);
  std::vector<ClockOption> options = ClockOptions(*d, u);
  ASSERT_EQ(options.size(), d->clocks.size());
  // Lower clocks are never faster.
  for (size_t i = 1; i < options.size(); ++i) {
    EXPECT_LE(options[i].time_s, options[i - 1].time_s + 1e-15);
  }
  std::vector<size_t> front = ParetoFront(options);
  EXPECT_GE(front.size(), 2u);
  EXPECT_LT(front.size(), options.size());  // clocks below the energy minimum are dominated
  EXPECT_EQ(options[front.front()].clock, d->default_clock);

  // Measured while throttled to 1500 MHz: locking above that changes nothing.
  UnitModel throttled = PackUnitModel(*d, t, MegaHertz(1500));
  EXPECT_EQ(throttled.f_cap.value(), 1500);
  EXPECT_NEAR(UnitTime(d->params, throttled, MegaHertz(1500)), 0.020, 1e-12);
  EXPECT_DOUBLE_EQ(UnitTime(d->params, throttled, MegaHertz(1980)),
                   UnitTime(d->params, throttled, MegaHertz(1500)));
}

// Time added with a kind's own clock-bound share splits by it; the rest of the class by its prior.
// A kernel's time ratio at a clock (what a plan stretches it by) follows its share kind.
TEST(PackModelTest, KindSharesSplitTheirOwnTime) {
  Result<DeviceModel> d = FindDevice("h200", testing::SourceDir() + "/devices");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  DeviceModel dev = *d;
  dev.kind_comp_share.fill(std::numeric_limits<double>::quiet_NaN());
  dev.kind_comp_share[static_cast<size_t>(KernelKind::kCopy)] = 0.0;
  ClassTimes t;
  t.Add(KernelClass::kMemory, 0.004, 1.0, dev.CompShare(ShareKindOf(KernelKind::kCopy, false)));
  t.Add(KernelClass::kMemory, 0.006);  // the class prior
  const double sm = dev.Prior(KernelClass::kMemory).comp_share;
  EXPECT_NEAR(t.ClockBound(KernelClass::kMemory, dev), 0.006 * sm, 1e-15);
  const UnitModel u = PackUnitModel(dev, t, dev.default_clock);
  EXPECT_NEAR(u.t_comp_s, 0.006 * sm, 1e-15);
  EXPECT_NEAR(u.t_mem_s, 0.004 + 0.006 * (1 - sm), 1e-15);
  const auto ratios = ShareKindTimeRatios(dev, dev.default_clock);
  ASSERT_EQ(ratios.size(), dev.clocks.size());
  const size_t copy = static_cast<size_t>(KernelKind::kCopy), norm = static_cast<size_t>(KernelKind::kNorm);
  for (size_t i = 0; i < ratios.size(); ++i) {
    const double f = dev.clocks[i].value(), fmax = dev.params.f_max.value();
    EXPECT_NEAR(ratios[i][copy], 1.0, 1e-12) << f;  // share 0: the clock changes nothing
    EXPECT_NEAR(ratios[i][norm], (1 - sm) + sm * fmax / f, 1e-12) << f;
  }
  // The pack's options equal the sum of its two parts' own.
  ClassTimes a, b;
  a.Add(KernelClass::kMemory, 0.004, 1.0, 0.0);
  b.Add(KernelClass::kMemory, 0.006);
  const auto whole = PackClockOptions(dev, t, dev.default_clock);
  const auto pa = PackClockOptions(dev, a, dev.default_clock), pb = PackClockOptions(dev, b, dev.default_clock);
  for (size_t i = 0; i < whole.size(); ++i) {
    EXPECT_NEAR(whole[i].time_s, pa[i].time_s + pb[i].time_s, 1e-12);
  }
}

// Cutting work into packs never changes its time or energy at one clock: the options of a
// mix are the sums of its parts' options, and equal the one-unit model at the measured clock.
TEST(PackModelTest, PackOptionsAreAdditive) {
  Result<DeviceModel> d = FindDevice("h200", testing::SourceDir() + "/devices");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  ClassTimes a, b, both;
  a.Add(KernelClass::kCompute, 0.012);
  a.Add(KernelClass::kMemory, 0.002, 0.5);
  b.Add(KernelClass::kMemory, 0.009);
  b.Add(KernelClass::kCompute, 0.001, 0.25);
  for (size_t c = 0; c < both.busy_s.size(); ++c) {
    both.busy_s[c] = a.busy_s[c] + b.busy_s[c];
    both.active_s[c] = a.active_s[c] + b.active_s[c];
  }
  const auto oa = PackClockOptions(*d, a, d->default_clock), ob = PackClockOptions(*d, b, d->default_clock);
  const auto o = PackClockOptions(*d, both, d->default_clock);
  ASSERT_EQ(o.size(), d->clocks.size());
  const auto mixed = ClockOptions(*d, PackUnitModel(*d, both, d->default_clock));
  for (size_t i = 0; i < o.size(); ++i) {
    EXPECT_NEAR(o[i].time_s, oa[i].time_s + ob[i].time_s, 1e-12);
    EXPECT_NEAR(o[i].energy_j, oa[i].energy_j + ob[i].energy_j, 1e-9);
    EXPECT_NEAR(o[i].time_s, mixed[i].time_s, 1e-12);  // time is additive in either model
    if (o[i].clock == d->default_clock) {
      EXPECT_NEAR(o[i].energy_j, mixed[i].energy_j, 1e-9 * mixed[i].energy_j);
    }
  }
  // Where the clock bites, the one-unit model's energy drifts from the sum of its parts.
  double drift = 0;
  for (size_t i = 0; i < o.size(); ++i) drift = std::max(drift, std::abs(mixed[i].energy_j / o[i].energy_j - 1));
  EXPECT_GT(drift, 1e-3);
}

// A class's power above idle scales with the share of the GPU its kernels keep busy: half the
// share, half the power above idle; the time does not change.
TEST(PackModelTest, KernelShareScalesThePowerAboveIdle) {
  Result<DeviceModel> d = FindDevice("h200", testing::SourceDir() + "/devices");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  ClassTimes full, half, none;
  full.Add(KernelClass::kCompute, 0.010);
  half.Add(KernelClass::kCompute, 0.010, 0.5);
  none.Add(KernelClass::kCompute, 0.010, 0.0);
  const auto f = PackClockOptions(*d, full, d->default_clock);
  const auto h = PackClockOptions(*d, half, d->default_clock);
  const auto n = PackClockOptions(*d, none, d->default_clock);
  for (size_t i = 0; i < f.size(); ++i) {
    EXPECT_DOUBLE_EQ(h[i].time_s, f[i].time_s);
    EXPECT_NEAR(h[i].energy_j - n[i].energy_j, 0.5 * (f[i].energy_j - n[i].energy_j), 1e-12);
  }
  // At the default clock, no share is the idle power over the busy time.
  const size_t top = f.size() - 1;
  EXPECT_NEAR(n[top].energy_j, d->IdlePower(d->default_clock).value() * 0.010, 1e-9);
}

// Overlapping ops share the SMs: where two full-GPU ops of one class run together, each counts
// half; a memory op under a compute op gives way by the hungriest class's power over the sum;
// ops alone, or small enough to add up within the GPU, keep their share.
TEST(PackModelTest, ConcurrencyFactorsBoundOverlaps) {
  Result<DeviceModel> d = FindDevice("h200", testing::SourceDir() + "/devices");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  using K = KernelClass;
  // a: compute [0, 100); b: compute [50, 150) -> overlap [50, 100) counts half for both.
  std::vector<OpSpan> two = {{0, 100, K::kCompute, 1.0}, {50, 150, K::kCompute, 1.0}};
  auto f = ConcurrencyFactors(*d, two);
  ASSERT_EQ(f.size(), 2u);
  EXPECT_DOUBLE_EQ(f[0], (50 + 50 * 0.5) / 100);
  EXPECT_DOUBLE_EQ(f[1], (50 * 0.5 + 50) / 100);
  // Two ops on a fifth of the GPU each add up: no scaling.
  std::vector<OpSpan> small = {{0, 100, K::kCompute, 0.2}, {0, 100, K::kCompute, 0.2}};
  for (double x : ConcurrencyFactors(*d, small)) EXPECT_DOUBLE_EQ(x, 1.0);
  // A memory op entirely under a compute op: both scaled by the compute power over the sum.
  std::vector<OpSpan> mixed = {{0, 100, K::kCompute, 1.0}, {20, 40, K::kMemory, 1.0}};
  f = ConcurrencyFactors(*d, mixed);
  const double idle = (d->idle_power.value() - d->params.static_power.value()) /
                      d->params.voltage.DynamicFactor(d->default_clock);
  const double ac = d->Prior(K::kCompute).activity - idle, am = d->Prior(K::kMemory).activity - idle;
  const double k = std::max(ac, am) / (ac + am);
  EXPECT_NEAR(f[1], k, 1e-12);
  EXPECT_NEAR(f[0], (80 + 20 * k) / 100, 1e-12);
  // The total above-idle power of the overlap is the hungriest class's.
  EXPECT_NEAR(20 * (f[1] * am) + 20 * k * ac, 20 * std::max(ac, am), 1e-9);
  // Back-to-back ops (one ends where the next starts) do not overlap.
  std::vector<OpSpan> chain = {{0, 100, K::kCompute, 1.0}, {100, 200, K::kCompute, 1.0}};
  for (double x : ConcurrencyFactors(*d, chain)) EXPECT_DOUBLE_EQ(x, 1.0);
}

}  // namespace
}  // namespace emo::model
