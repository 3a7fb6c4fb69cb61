// Device files: every number has a source; the fitted A100/A40 numbers are what the fit code
// produces; the H200 file agrees with the measurements it cites.
#include <cmath>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "emo/base/file.h"
#include "emo/model/device.h"
#include "emo/model/fit.h"
#include "emo/model/stage_profile.h"
#include "test_util.h"

namespace emo::model {
namespace {

using nlohmann::json;

std::string DevicesDir() { return testing::SourceDir() + "/devices"; }

DeviceModel Load(const std::string& name) {
  Result<DeviceModel> d = FindDevice(name, DevicesDir());
  EXPECT_TRUE(d.ok()) << d.status().ToString();
  return d.ok() ? *d : DeviceModel{};
}

TEST(DeviceTest, AllShippedDevicesLoad) {
  Result<std::vector<DeviceModel>> all = LoadDevices(DevicesDir());
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  std::vector<std::string> names;
  for (const DeviceModel& d : *all) {
    names.push_back(d.name);
    EXPECT_FALSE(d.clocks.empty());
    EXPECT_EQ(d.params.f_max, d.clocks.back());
    EXPECT_GT(d.idle_power.value(), 0.0) << d.name;
    EXPECT_GT(d.params.static_power.value(), 0.0) << d.name;
    EXPECT_LE(d.cap_power, d.params.power_limit) << d.name;
    EXPECT_LT(d.idle_power, d.cap_power) << d.name;
    EXPECT_GE(d.provenance.size(), 16u) << d.name;  // every required number recorded its source
  }
  EXPECT_EQ(names, (std::vector<std::string>{"a100-sxm", "a40", "h100-sxm", "h200"}));
}

TEST(DeviceTest, ANumberWithoutSourceIsRefused) {
  Result<std::string> text = ReadFileMaybeGzip(DevicesDir() + "/h200.json");
  ASSERT_TRUE(text.ok());
  json j = json::parse(*text);
  ASSERT_TRUE(ParseDevice(j, "h200.json").ok());
  json no_source = j;
  no_source["idle_power_w"].erase("source");
  Result<DeviceModel> bad = ParseDevice(no_source, "x.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("idle_power_w"), std::string::npos);
  json no_reason = j;
  no_reason["voltage"]["ridge_mhz"].erase("reasoning");
  EXPECT_FALSE(ParseDevice(no_reason, "x.json").ok());
  json bare = j;
  bare["power_limit_w"] = 700;
  EXPECT_FALSE(ParseDevice(bare, "x.json").ok());
  EXPECT_FALSE(ParseDevice(json{{"schema", "other"}}, "x.json").ok());
}

TEST(DeviceTest, UnknownDeviceListsTheKnownOnes) {
  Result<DeviceModel> d = FindDevice("b200", DevicesDir());
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("h200"), std::string::npos);
}

// The A100/A40 device-wide numbers must be exactly what `emo model fit` writes (their source
// names the command), not typed by hand.
TEST(DeviceTest, FittedNumbersAreReproducedByTheFit) {
  EMO_REQUIRE_SHARED();
  struct Dev {
    const char* name;
    const char* gpt;
    const char* bloom;
  };
  for (const Dev& dev : {Dev{"a100-sxm", "gpt3-175b+a100_sxm", "bloom+a100_sxm"},
                         Dev{"a40", "gpt3-175b+a40", "bloom+a40"}}) {
    SCOPED_TRACE(dev.name);
    std::vector<StageProfile> profiles;
    for (const char* p : {dev.gpt, dev.bloom}) {
      Result<StageProfile> sp = ReadStageProfile(
          ::SharedPath(std::string("data/perseus_sosp24/stage_profile/") + p + "_bf16.csv"));
      ASSERT_TRUE(sp.ok());
      profiles.push_back(*sp);
    }
    std::vector<std::string> labels = {dev.gpt, dev.bloom};
    StageProfile merged = MergeProfiles(profiles, labels);
    Result<ProfileFit> fit = FitProfile(merged);
    ASSERT_TRUE(fit.ok());
    const FitSummary s = SummarizeFit(merged, *fit);
    DeviceModel d = Load(dev.name);
    EXPECT_NEAR(d.params.static_power.value(), fit->gpu.static_power.value(), 1e-6);
    EXPECT_NEAR(d.params.voltage.ridge.value(), fit->gpu.voltage.ridge.value(), 1e-6);
    EXPECT_NEAR(d.params.voltage.slope_per_mhz, fit->gpu.voltage.slope_per_mhz, 1e-12);
    EXPECT_NEAR(d.cap_power.value(), s.cap_power_w, 1e-6);
    EXPECT_NEAR(d.Prior(KernelClass::kCompute).activity, s.activity_median, 1e-9);
    EXPECT_NEAR(d.Prior(KernelClass::kCompute).comp_share, s.comp_share_median, 1e-9);
    EXPECT_NE(d.provenance.at("static_power_w").source.find("emo model fit"), std::string::npos);
  }
}

TEST(DeviceTest, H200AgreesWithTheMeasurementsItCites) {
  EMO_REQUIRE_SHARED();
  DeviceModel d = Load("h200");
  Result<std::string> text = ReadFileMaybeGzip(::SharedPath("traces/h200/measured.json"));
  ASSERT_TRUE(text.ok());
  const json measured = json::parse(*text);
  std::vector<double> table = measured["supported_sm_mhz"]["3201"].get<std::vector<double>>();
  std::sort(table.begin(), table.end());
  ASSERT_EQ(d.clocks.size(), table.size());
  EXPECT_EQ(d.clocks.size(), 110u);
  for (size_t i = 0; i < table.size(); ++i) EXPECT_EQ(d.clocks[i].value(), table[i]);
  EXPECT_EQ(d.clocks.front().value(), 345);
  EXPECT_EQ(d.default_clock.value(), 1980);
  EXPECT_EQ(d.params.power_limit.value(), measured["power_limit_mw"].get<double>() / 1000);
  EXPECT_NEAR(d.idle_power_min_clock.value(), measured["idle"]["power_mw"].get<double>() / 1000,
              0.01);

  text = ReadFileMaybeGzip(::SharedPath("data/h200_nvml_probe/probe1.json"));
  ASSERT_TRUE(text.ok());
  const json probe = json::parse(*text);
  EXPECT_NEAR(d.idle_power.value(),
              probe["phases"]["idle0"]["avg_power_W_from_energy"].get<double>(), 0.01);
  EXPECT_NEAR(d.cap_power.value(), probe["phases"]["gemm"]["avg_power_W_from_energy"].get<double>(),
              0.01);
  // The model's GEMM class reaches the 700 W limit where the probe saw the GEMM's clock settle
  // (median 1485 MHz under the SW power cap).
  const double gemm_median = probe["per_phase"]["gemm"]["sm_clock_median"].get<double>();
  const MegaHertz cap =
      CapClockForPowerLimit(d.params, d.Prior(KernelClass::kCompute).activity, d.params.f_max);
  EXPECT_NEAR(cap.value(), gemm_median, 15.0);
  // The copy ran uncapped at 1980 MHz at the probe's copy power.
  const double copy_power =
      d.params.static_power.value() +
      d.Prior(KernelClass::kMemory).activity * d.params.voltage.DynamicFactor(MegaHertz(1980));
  EXPECT_NEAR(copy_power, probe["phases"]["copy"]["avg_power_W_from_energy"].get<double>(), 0.5);
  // Idle power between the two measured idle points.
  EXPECT_NEAR(d.IdlePower(MegaHertz(1980)).value(), d.idle_power.value(), 1e-9);
  EXPECT_NEAR(d.IdlePower(MegaHertz(345)).value(), d.idle_power_min_clock.value(), 1e-9);
  // What could not be measured is marked.
  EXPECT_TRUE(d.provenance.at("voltage.ridge_mhz").assumption);
  EXPECT_TRUE(d.provenance.at("classes.memory.comp_share").assumption);
  EXPECT_FALSE(d.provenance.at("power_limit_w").assumption);
}

}  // namespace
}  // namespace emo::model
