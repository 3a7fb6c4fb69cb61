// Pack models and Pareto filtering of clock options.
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
  t.busy_s[static_cast<size_t>(KernelClass::kCompute)] = 0.010;
  t.busy_s[static_cast<size_t>(KernelClass::kMemory)] = 0.010;
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

}  // namespace
}  // namespace emo::model
