// The clock model and its fits on synthetic data with known parameters.
#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "emo/model/clock_model.h"
#include "emo/model/fit.h"
#include "emo/model/stage_profile.h"
#include "emo/model/validate.h"

namespace emo::model {
namespace {

std::vector<MegaHertz> Table(double lo, double hi, double step) {
  std::vector<MegaHertz> out;
  for (double f = lo; f <= hi + 1e-9; f += step) out.push_back(MegaHertz(f));
  return out;
}

// A profile sampled exactly from the model (optionally with deterministic +-noise).
StageProfile Synthesize(const GpuParams& gpu, const std::vector<UnitModel>& units,
                        const std::vector<MegaHertz>& clocks, double noise = 0.0) {
  StageProfile p;
  p.source = "synthetic";
  p.clocks = clocks;
  for (size_t u = 0; u < units.size(); ++u) {
    ProfileUnit pu;
    pu.name = "u" + std::to_string(u);
    for (size_t i = 0; i < clocks.size(); ++i) {
      const int step = static_cast<int>((i * 7 + u * 3) % 5) - 2;  // -2..2
      const double wobble = noise * step / 2.0;                    // in [-noise, noise]
      const double t = UnitTime(gpu, units[u], clocks[i]) * (1.0 + wobble);
      const double e = UnitEnergy(gpu, units[u], clocks[i]).value() * (1.0 - 0.5 * wobble);
      pu.samples.push_back(ClockSample{clocks[i], t, e});
    }
    p.units.push_back(std::move(pu));
  }
  return p;
}

GpuParams KnownGpu() {
  GpuParams gpu;
  gpu.f_max = MegaHertz(1740);
  gpu.static_power = Watts(60);
  gpu.voltage = VoltageCurve{MegaHertz(1125), 4.5e-4};
  gpu.power_limit = Watts(300);
  return gpu;
}

std::vector<UnitModel> KnownUnits(const GpuParams& gpu) {
  std::vector<UnitModel> units;
  const double t[][2] = {{0.010, 0.090}, {0.050, 0.150}, {0.030, 0.040}, {0.002, 0.200}};
  const double activity[] = {0.10, 0.14, 0.08, 0.12};
  for (int i = 0; i < 4; ++i) {
    UnitModel m;
    m.t_mem_s = t[i][0];
    m.t_comp_s = t[i][1];
    m.activity = activity[i];
    m.f_cap = CapClockForPowerLimit(gpu, m.activity, gpu.f_max);
    units.push_back(m);
  }
  return units;
}

TEST(ClockModelTest, VoltageCurveIsFlatBelowTheRidgeAndLinearAbove) {
  VoltageCurve v{MegaHertz(1000), 1e-3};
  EXPECT_DOUBLE_EQ(v.At(MegaHertz(500)), 1.0);
  EXPECT_DOUBLE_EQ(v.At(MegaHertz(1000)), 1.0);
  EXPECT_DOUBLE_EQ(v.At(MegaHertz(1200)), 1.2);
  EXPECT_DOUBLE_EQ(v.DynamicFactor(MegaHertz(1200)), 1200 * 1.2 * 1.2);
}

TEST(ClockModelTest, TimePowerAndEnergyFollowTheEffectiveClock) {
  GpuParams gpu = KnownGpu();
  UnitModel m{0.01, 0.09, 0.1, MegaHertz(1500)};
  // Below the cap: t = t_mem + t_comp * f_max / f.
  EXPECT_DOUBLE_EQ(UnitTime(gpu, m, MegaHertz(870)), 0.01 + 0.09 * 2.0);
  // Above the cap nothing changes any more.
  EXPECT_DOUBLE_EQ(UnitTime(gpu, m, MegaHertz(1740)), UnitTime(gpu, m, MegaHertz(1500)));
  EXPECT_DOUBLE_EQ(UnitPower(gpu, m, MegaHertz(1740)).value(),
                   UnitPower(gpu, m, MegaHertz(1500)).value());
  const double p = 60 + 0.1 * gpu.voltage.DynamicFactor(MegaHertz(1200));
  EXPECT_DOUBLE_EQ(UnitPower(gpu, m, MegaHertz(1200)).value(), p);
  EXPECT_DOUBLE_EQ(UnitEnergy(gpu, m, MegaHertz(1200)).value(),
                   p * UnitTime(gpu, m, MegaHertz(1200)));
}

TEST(ClockModelTest, CapClockIsWherePowerMeetsTheLimit) {
  GpuParams gpu = KnownGpu();
  const MegaHertz cap = CapClockForPowerLimit(gpu, 0.14, gpu.f_max);
  ASSERT_TRUE(std::isfinite(cap.value()));
  EXPECT_NEAR(60 + 0.14 * gpu.voltage.DynamicFactor(cap), 300.0, 1e-6);
  // A unit that never reaches the limit is never capped.
  EXPECT_TRUE(std::isinf(CapClockForPowerLimit(gpu, 0.05, gpu.f_max).value()));
}

TEST(FitTimeTest, RecoversMemoryAndComputeTimeWithoutCap) {
  GpuParams gpu = KnownGpu();
  UnitModel truth{0.02, 0.08, 0.1, MegaHertz(std::numeric_limits<double>::infinity())};
  std::vector<ClockSample> samples;
  for (MegaHertz f : Table(855, 1740, 15)) samples.push_back({f, UnitTime(gpu, truth, f), 1.0});
  Result<TimeFit> fit = FitTime(samples, gpu.f_max);
  ASSERT_TRUE(fit.ok()) << fit.status().ToString();
  EXPECT_NEAR(fit->t_mem_s, 0.02, 1e-9);
  EXPECT_NEAR(fit->t_comp_s, 0.08, 1e-9);
  EXPECT_TRUE(std::isinf(fit->f_cap.value()));
}

TEST(FitTimeTest, RecoversTheCapClock) {
  GpuParams gpu = KnownGpu();
  UnitModel truth{0.05, 0.15, 0.1, MegaHertz(1432)};
  std::vector<ClockSample> samples;
  for (MegaHertz f : Table(855, 1740, 15)) samples.push_back({f, UnitTime(gpu, truth, f), 1.0});
  Result<TimeFit> fit = FitTime(samples, gpu.f_max);
  ASSERT_TRUE(fit.ok());
  EXPECT_NEAR(fit->f_cap.value(), 1432, 1.0);
  EXPECT_NEAR(fit->t_mem_s, 0.05, 1e-3);
  EXPECT_NEAR(fit->t_comp_s, 0.15, 1e-3);
}

TEST(FitTimeTest, NeedsTwoClocks) {
  std::vector<ClockSample> one = {{MegaHertz(1000), 1.0, 1.0}, {MegaHertz(1000), 1.1, 1.0}};
  EXPECT_FALSE(FitTime(one, MegaHertz(1400)).ok());
}

TEST(FitPowerTest, RecoversStaticPowerVoltageCurveAndActivities) {
  GpuParams gpu = KnownGpu();
  std::vector<UnitModel> units = KnownUnits(gpu);
  std::vector<PowerObservation> obs;
  for (size_t u = 0; u < units.size(); ++u) {
    for (MegaHertz f : Table(855, 1740, 15)) {
      const MegaHertz fe = EffectiveClock(units[u], f);
      obs.push_back({u, fe, UnitPower(gpu, units[u], f).value()});
    }
  }
  PowerFitOptions options;
  options.ridge_step_mhz = 5.0;
  Result<PowerFit> fit = FitPower(obs, units.size(), options);
  ASSERT_TRUE(fit.ok()) << fit.status().ToString();
  EXPECT_NEAR(fit->voltage.ridge.value(), 1125, 5.0);
  EXPECT_NEAR(fit->voltage.slope_per_mhz, 4.5e-4, 2e-5);
  EXPECT_NEAR(fit->static_power.value(), 60, 2.0);
  for (size_t u = 0; u < units.size(); ++u) {
    EXPECT_NEAR(fit->activity[u], units[u].activity, 0.02 * units[u].activity);
  }
  EXPECT_LT(fit->rms_rel, 1e-3);
}

TEST(FitProfileTest, RecoversEveryParameterFromAllClocks) {
  GpuParams gpu = KnownGpu();
  std::vector<UnitModel> units = KnownUnits(gpu);
  StageProfile p = Synthesize(gpu, units, Table(855, 1740, 15));
  Result<ProfileFit> fit = FitProfile(p);
  ASSERT_TRUE(fit.ok()) << fit.status().ToString();
  EXPECT_NEAR(fit->gpu.voltage.ridge.value(), 1125, 10.0);
  EXPECT_NEAR(fit->gpu.static_power.value(), 60, 3.0);
  for (size_t u = 0; u < units.size(); ++u) {
    SCOPED_TRACE("unit " + std::to_string(u));
    EXPECT_NEAR(fit->units[u].t_mem_s, units[u].t_mem_s,
                2e-3 * (units[u].t_mem_s + units[u].t_comp_s));
    EXPECT_NEAR(fit->units[u].t_comp_s, units[u].t_comp_s,
                2e-3 * (units[u].t_mem_s + units[u].t_comp_s));
    EXPECT_NEAR(fit->units[u].activity, units[u].activity, 0.03 * units[u].activity);
    if (std::isfinite(units[u].f_cap.value())) {
      EXPECT_NEAR(fit->units[u].f_cap.value(), units[u].f_cap.value(), 2.0);
    } else {
      EXPECT_GE(fit->units[u].f_cap.value(), gpu.f_max.value());
    }
  }
}

TEST(FitProfileTest, FixedDeviceCurveIsUsedAsGiven) {
  GpuParams gpu = KnownGpu();
  std::vector<UnitModel> units = KnownUnits(gpu);
  StageProfile p = Synthesize(gpu, units, Table(855, 1740, 15));
  FitOptions options;
  options.device = DeviceCurve{gpu.static_power, gpu.voltage};
  std::vector<MegaHertz> three = {MegaHertz(855), MegaHertz(1305), MegaHertz(1740)};
  Result<ProfileFit> fit = FitProfile(p, three, options);
  ASSERT_TRUE(fit.ok());
  EXPECT_TRUE(fit->device_fixed);
  EXPECT_DOUBLE_EQ(fit->gpu.static_power.value(), 60);
  EXPECT_DOUBLE_EQ(fit->gpu.voltage.ridge.value(), 1125);
  for (size_t u = 0; u < units.size(); ++u) {
    EXPECT_NEAR(fit->units[u].activity, units[u].activity, 1e-3 * units[u].activity);
  }
}

TEST(ValidateTest, SpreadClocksIsAFixedRule) {
  std::vector<MegaHertz> table = Table(855, 1740, 15);  // 60 clocks
  Result<std::vector<MegaHertz>> k3 = SpreadClocks(table, 3);
  ASSERT_TRUE(k3.ok());
  ASSERT_EQ(k3->size(), 3u);
  EXPECT_EQ((*k3)[0].value(), 855);
  EXPECT_EQ((*k3)[1].value(), 1305);  // index round(29.5) = 30
  EXPECT_EQ((*k3)[2].value(), 1740);
  Result<std::vector<MegaHertz>> k2 = SpreadClocks(table, 2);
  ASSERT_TRUE(k2.ok());
  EXPECT_EQ((*k2)[0].value(), 855);
  EXPECT_EQ((*k2)[1].value(), 1740);
  EXPECT_FALSE(SpreadClocks(table, 1).ok());
  EXPECT_FALSE(SpreadClocks(table, 61).ok());
}

TEST(ValidateTest, ExactDataIsPredictedExactlyFromFourClocks) {
  GpuParams gpu = KnownGpu();
  gpu.power_limit = Watts(std::numeric_limits<double>::infinity());  // no caps: 4 clocks suffice
  std::vector<UnitModel> units = KnownUnits(gpu);
  StageProfile p = Synthesize(gpu, units, Table(855, 1740, 15));
  Result<ValidationReport> r = ValidateProfile(p, 4);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->units, 4u);
  EXPECT_EQ(r->points, 4u * 56u);
  EXPECT_LT(r->time_mape_pct, 0.01);
  EXPECT_LT(r->energy_mape_pct, 0.3);
}

TEST(ValidateTest, NoiseShowsUpAsError) {
  GpuParams gpu = KnownGpu();
  std::vector<UnitModel> units = KnownUnits(gpu);
  StageProfile p = Synthesize(gpu, units, Table(855, 1740, 15), 0.02);
  Result<ValidationReport> r = ValidateProfile(p, 3);
  ASSERT_TRUE(r.ok());
  EXPECT_GT(r->time_mape_pct, 0.2);  // +-2% wobble cannot be predicted away
  EXPECT_GE(r->max_error_pct, r->time_max_error_pct);
  EXPECT_GE(r->max_error_pct, r->energy_max_error_pct);
}

TEST(StageProfileTest, ParsesUnitsAndClocks) {
  const char* csv =
      "stage,instruction,frequency,time,energy\n"
      "0,forward,1410,0.05,24\n"
      "0,forward,855,0.08,20\n"
      "0,backward,1410,0.10,46\n"
      "1,forward,1410,0.05,24.5\n";
  Result<StageProfile> p = ParseStageProfile(csv, "x.csv");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_EQ(p->units.size(), 3u);
  EXPECT_EQ(p->units[0].name, "0/forward");
  ASSERT_EQ(p->units[0].samples.size(), 2u);
  EXPECT_EQ(p->units[0].samples[0].clock.value(), 855);  // sorted by clock
  EXPECT_DOUBLE_EQ(p->units[0].samples[1].power_w(), 24 / 0.05);
  ASSERT_EQ(p->clocks.size(), 2u);
}

TEST(StageProfileTest, ErrorsNameTheFileAndLine) {
  Result<StageProfile> bad_header = ParseStageProfile("a,b,c\n1,2,3\n", "h.csv");
  ASSERT_FALSE(bad_header.ok());
  EXPECT_NE(bad_header.status().message().find("h.csv"), std::string::npos);
  Result<StageProfile> bad_number =
      ParseStageProfile("stage,instruction,frequency,time,energy\n0,f,1410,abc,1\n", "n.csv");
  ASSERT_FALSE(bad_number.ok());
  EXPECT_NE(bad_number.status().message().find("n.csv: line 2"), std::string::npos);
  Result<StageProfile> repeated = ParseStageProfile(
      "stage,instruction,frequency,time,energy\n0,f,1410,1,1\n0,f,1410,1,1\n", "r.csv");
  ASSERT_FALSE(repeated.ok());
  EXPECT_NE(repeated.status().message().find("repeated"), std::string::npos);
  EXPECT_FALSE(
      ParseStageProfile("stage,instruction,frequency,time,energy\n0,f,1410,-1,1\n", "z").ok());
}

}  // namespace
}  // namespace emo::model

namespace emo::model {
namespace {

// Above the cap a clock-ceiling unit keeps its time but not its power (the voltage follows the
// locked clock); a power-limited unit's power stops at its cap power.
TEST(ClockModelTest, PowerFormsAboveTheCap) {
  GpuParams gpu = KnownGpu();
  UnitModel m;
  m.t_mem_s = 0.01;
  m.t_comp_s = 0.05;
  m.activity = 0.1;
  m.f_cap = MegaHertz(1500);
  m.power_form = PowerForm::kClockCeiling;
  EXPECT_DOUBLE_EQ(UnitTime(gpu, m, MegaHertz(1740)), UnitTime(gpu, m, MegaHertz(1500)));
  const double v = gpu.voltage.At(MegaHertz(1740));
  EXPECT_DOUBLE_EQ(UnitPower(gpu, m, MegaHertz(1740)).value(), 60 + 0.1 * 1500 * v * v);
  EXPECT_GT(UnitPower(gpu, m, MegaHertz(1740)).value(), UnitPower(gpu, m, MegaHertz(1500)).value());
  m.power_form = PowerForm::kPowerLimited;
  m.power_cap_w = 200;
  EXPECT_DOUBLE_EQ(UnitPower(gpu, m, MegaHertz(1740)).value(), 200);
  EXPECT_DOUBLE_EQ(UnitPower(gpu, m, MegaHertz(900)).value(), 60 + 0.1 * gpu.voltage.DynamicFactor(MegaHertz(900)));
}

// The pinned-device fit recovers a clock-ceiling profile's voltage curve and activities with
// P_static given, and classes it by the power limit.
TEST(FitProfileTest, PinnedDeviceRecoversAClockCeilingProfile) {
  GpuParams gpu = KnownGpu();
  std::vector<UnitModel> units = KnownUnits(gpu);
  for (auto& u : units) {
    u.f_cap = MegaHertz(std::isfinite(u.f_cap.value()) ? u.f_cap.value() : 1e9);
    u.power_form = PowerForm::kClockCeiling;
  }
  units[1].f_cap = MegaHertz(1500);
  StageProfile p = Synthesize(gpu, units, Table(855, 1740, 15));
  FitOptions options;
  options.pinned = FitOptions::Pinned{Watts(60), Watts(1000)};
  Result<ProfileFit> fit = FitProfile(p, {}, options);
  ASSERT_TRUE(fit.ok()) << fit.status().ToString();
  EXPECT_FALSE(fit->power_limited);
  EXPECT_DOUBLE_EQ(fit->gpu.static_power.value(), 60);
  EXPECT_NEAR(fit->gpu.voltage.ridge.value(), 1125, 10.0);
  EXPECT_NEAR(fit->units[1].f_cap.value(), 1500, 2.0);
  for (size_t u = 0; u < units.size(); ++u) {
    SCOPED_TRACE("unit " + std::to_string(u));
    EXPECT_EQ(fit->units[u].power_form, PowerForm::kClockCeiling);
    EXPECT_NEAR(fit->units[u].activity, units[u].activity, 0.02 * units[u].activity);
  }
}

// A profile whose top-clock power sits at the limit is classed power-limited; each unit is held
// at its measured top-clock power, and the curve comes from the clocks below the top.
TEST(FitProfileTest, PinnedDeviceClassesAPowerLimitedProfile) {
  GpuParams gpu = KnownGpu();
  std::vector<UnitModel> units = KnownUnits(gpu);
  // Every unit draws the same power at the top clock, where the limiter holds it just below
  // its uncapped power; below the top the curve is uncapped.
  for (auto& u : units) {
    u.f_cap = MegaHertz(1e9);
    u.power_form = PowerForm::kPowerLimited;
    u.activity = 0.11;
    u.power_cap_w = 0.995 * (60 + u.activity * gpu.voltage.DynamicFactor(gpu.f_max));
  }
  StageProfile p = Synthesize(gpu, units, Table(855, 1740, 15));
  FitOptions options;
  options.pinned = FitOptions::Pinned{Watts(60), Watts(units[0].power_cap_w / 0.98)};
  Result<ProfileFit> fit = FitProfile(p, {}, options);
  ASSERT_TRUE(fit.ok()) << fit.status().ToString();
  EXPECT_TRUE(fit->power_limited);
  EXPECT_NEAR(fit->top_power_fraction, 0.98, 1e-6);
  for (size_t u = 0; u < units.size(); ++u) {
    SCOPED_TRACE("unit " + std::to_string(u));
    EXPECT_EQ(fit->units[u].power_form, PowerForm::kPowerLimited);
    EXPECT_NEAR(fit->units[u].power_cap_w, units[u].power_cap_w, 1e-6);
    EXPECT_NEAR(UnitPower(fit->gpu, fit->units[u], MegaHertz(1200)).value(),
                UnitPower(gpu, units[u], MegaHertz(1200)).value(), 0.01 * 300);
  }
}

}  // namespace
}  // namespace emo::model
