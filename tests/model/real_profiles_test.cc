// The clock model on the public Perseus stage profiles (../shared/data/perseus_sosp24), fitted
// from K clocks and scored on the others. Targets: K=3 time and energy MAPE <= 1.5% on the A100
// files, <= 3% on the A40 files.
#include <iostream>
#include <string>

#include <gtest/gtest.h>

#include "emo/model/device.h"
#include "emo/model/fit.h"
#include "emo/model/stage_profile.h"
#include "emo/model/validate.h"
#include "test_util.h"

namespace emo::model {
namespace {

std::string Profile(const std::string& name) {
  return ::SharedPath("data/perseus_sosp24/stage_profile/" + name + "_bf16.csv");
}

StageProfile Read(const std::string& name) {
  Result<StageProfile> p = ReadStageProfile(Profile(name));
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return p.ok() ? *p : StageProfile{};
}

struct Case {
  const char* profile;
  const char* other;  // the other workload on the same GPU
  double target_pct;
};

constexpr Case kCases[] = {
    {"gpt3-175b+a100_sxm", "bloom+a100_sxm", 1.5},
    {"bloom+a100_sxm", "gpt3-175b+a100_sxm", 1.5},
    {"gpt3-175b+a40", "bloom+a40", 3.0},
    {"bloom+a40", "gpt3-175b+a40", 3.0},
};

TEST(RealProfilesTest, ParsesAllFourProfiles) {
  EMO_REQUIRE_SHARED();
  for (const Case& c : kCases) {
    StageProfile p = Read(c.profile);
    EXPECT_EQ(p.units.size(), 16u) << c.profile;  // 8 stages x forward/backward
    const bool a100 = std::string(c.profile).find("a100") != std::string::npos;
    EXPECT_EQ(p.clocks.size(), a100 ? 38u : 60u) << c.profile;
  }
}

// Fit from 3 clocks with the device curve (P_static, voltage) calibrated on every clock of the
// other workload on the same GPU: the protocol of a per-device calibration sweep plus 3 clocks
// per pack. The held-out file never touches its own held-out clocks.
TEST(RealProfilesTest, ThreeClocksWithDeviceCurveFromTheOtherWorkloadMeetTheTargets) {
  EMO_REQUIRE_SHARED();
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.profile);
    Result<ProfileFit> device = FitProfile(Read(c.other));
    ASSERT_TRUE(device.ok()) << device.status().ToString();
    FitOptions options;
    options.device = DeviceCurve{device->gpu.static_power, device->gpu.voltage};
    Result<ValidationReport> r = ValidateProfile(Read(c.profile), 3, options);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_LE(r->time_mape_pct, c.target_pct);
    EXPECT_LE(r->energy_mape_pct, c.target_pct);
    RecordProperty(std::string(c.profile) + "_time_mape", std::to_string(r->time_mape_pct));
    RecordProperty(std::string(c.profile) + "_energy_mape", std::to_string(r->energy_mape_pct));
  }
}

// Fit from the file's own 3 clocks plus the two numbers its device file holds (idle power as
// P_static, the power limit to class the profile): `emo model validate --clocks 3 --device X`.
// The A100 files come out clock-ceiling (median top-clock power 94-95 % of 500 W), the A40
// files power-limited (98 % of 300 W). Margins on the A100 are thin (1.41 / 1.46 %), and the
// form was chosen on these four files (bench/research/model_fit_order3.md).
TEST(RealProfilesTest, ThreeClocksWithPinnedDeviceNumbersMeetTheTargets) {
  EMO_REQUIRE_SHARED();
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.profile);
    const bool a100 = std::string(c.profile).find("a100") != std::string::npos;
    auto device = FindDevice(a100 ? "a100-sxm" : "a40", EMO_SOURCE_DIR "/devices");
    ASSERT_TRUE(device.ok()) << device.status().ToString();
    FitOptions options;
    options.pinned = FitOptions::Pinned{device->idle_power, device->params.power_limit};
    Result<ValidationReport> r = ValidateProfile(Read(c.profile), 3, options);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->fit.power_limited, !a100);
    EXPECT_DOUBLE_EQ(r->fit.gpu.static_power.value(), device->idle_power.value());
    EXPECT_LE(r->time_mape_pct, c.target_pct);
    EXPECT_LE(r->energy_mape_pct, c.target_pct);
    std::cout << c.profile << ": time " << r->time_mape_pct << " %, energy " << r->energy_mape_pct << " %\n";
  }
}

// Fit from 3 clocks with the device curve fitted jointly over the file's own units. With three
// clocks the static power and the voltage ridge are only weakly identified (docs/model.md), so
// the energy target is not met on every file; these bounds guard the measured figures
// (A100: 1.6% / 2.6%, A40: 1.6% / 3.6% energy MAPE) against regressions.
TEST(RealProfilesTest, ThreeClocksSelfContained) {
  EMO_REQUIRE_SHARED();
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.profile);
    Result<ValidationReport> r = ValidateProfile(Read(c.profile), 3);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->fit_clocks.size(), 3u);
    EXPECT_LE(r->time_mape_pct, c.target_pct);
    EXPECT_LE(r->energy_mape_pct, 4.0);
  }
}

TEST(RealProfilesTest, EveryClockFitsTheA100StagesClosely) {
  EMO_REQUIRE_SHARED();
  std::vector<StageProfile> both = {Read("gpt3-175b+a100_sxm"), Read("bloom+a100_sxm")};
  std::vector<std::string> labels = {"gpt3", "bloom"};
  StageProfile merged = MergeProfiles(both, labels);
  ASSERT_EQ(merged.units.size(), 32u);
  Result<ProfileFit> fit = FitProfile(merged);
  ASSERT_TRUE(fit.ok());
  FitSummary s = SummarizeFit(merged, *fit);
  EXPECT_LT(s.time_mape_pct, 1.0);
  EXPECT_LT(s.energy_mape_pct, 1.5);
  // The shape the research notes found on these profiles: a voltage ridge near 1.1 GHz and a
  // 1/f share of 0.8-0.95 at 1410 MHz.
  EXPECT_NEAR(fit->gpu.voltage.ridge.value(), 1100, 60);
  EXPECT_GT(s.comp_share_min, 0.75);
  EXPECT_LT(s.comp_share_max, 0.96);
}

}  // namespace
}  // namespace emo::model
