// What `emo run --actuator emulate` reports about the plan's measured slowdown.
#include "emo/report/run_report.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace emo::report {
namespace {

constexpr TimeNs kMs = 1'000'000;

trace::Trace EmulatedRun(int64_t paired_retimings) {
  trace::Trace t;
  t.meta.format = "emo";
  trace::RunMeasurement r;
  r.mode = "monitor";
  r.iterations = 40;
  r.policy_run = {{"actuator", "emulate"},
                  {"predicted_ns", "10200000"},
                  {"predicted_baseline_ns", "10000000"},
                  {"iterations_followed", "26"},
                  {"model", "h200"}};
  trace::RunMeasurement::PlanSplit p;
  p.before_step = {10 * kMs, 8};
  p.under_step = {11 * kMs, 30};
  p.in_force_step = {10'500'000, 26};
  p.interleaved_default_step = {15 * kMs, 25};
  p.paired_in_force_over_default = {1.05, paired_retimings};
  r.plan = p;
  t.meta.run = r;
  return t;
}

// Beside the two medians (here a 30 % "speed-up" a drifting pace made), the paired reading, and
// what it is; none without re-timings to pair.
TEST(RunReportTest, AnEmulatedPlanReportsThePairedSlowdownBesideTheMedians) {
  const nlohmann::json j = RunToJson("run.emotrace", EmulatedRun(2));
  const auto& e = j.at("policy_effect").at("emulated");
  EXPECT_NEAR(e.at("predicted_slowdown_pct").get<double>(), 2.0, 1e-9);
  EXPECT_NEAR(e.at("measured_slowdown_pct").get<double>(), -30.0, 1e-9);
  EXPECT_NEAR(e.at("paired_slowdown_pct").get<double>(), 5.0, 1e-9);
  EXPECT_EQ(e.at("paired_retimings").get<int64_t>(), 2);
  EXPECT_NE(e.at("paired_note").get<std::string>().find("at most 8 of the plan's iterations"), std::string::npos);
  const std::string text = RunText("run.emotrace", EmulatedRun(2));
  EXPECT_NE(text.find("emulated, paired  measured +5.0 % (2 re-timings"), std::string::npos) << text;
  EXPECT_NE(text.find("+3.0 points"), std::string::npos) << text;

  const nlohmann::json none = RunToJson("run.emotrace", EmulatedRun(0));
  EXPECT_TRUE(none.at("policy_effect").at("emulated").at("paired_slowdown_pct").is_null());
  EXPECT_EQ(RunText("run.emotrace", EmulatedRun(0)).find("emulated, paired"), std::string::npos);
}

// A plan made from a 10 ms iteration, followed in a run whose default-clock iterations take 15 ms
// (x1.5, the edge: still the plan's regime) or 2 ms (a regime the trace did not show: warned).
TEST(RunReportTest, ARunInAnotherRegimeThanThePlansIterationIsWarnedOf) {
  trace::Trace t = EmulatedRun(2);
  nlohmann::json j = RunToJson("run.emotrace", t);
  const auto& same = j.at("policy_effect").at("plan_iteration");
  EXPECT_NEAR(same.at("planned_ms").get<double>(), 10.0, 1e-9);
  EXPECT_NEAR(same.at("default_clock_ms").get<double>(), 15.0, 1e-9);  // the guard's re-timings
  EXPECT_TRUE(same.at("matches").get<bool>());
  EXPECT_EQ(RunText("run.emotrace", t).find("WARNING"), std::string::npos);

  t.meta.run->plan->interleaved_default_step = {2 * kMs, 25};
  j = RunToJson("run.emotrace", t);
  EXPECT_FALSE(j.at("policy_effect").at("plan_iteration").at("matches").get<bool>());
  const std::string text = RunText("run.emotrace", t);
  EXPECT_NE(text.find("the plan was made for a 10.000 ms iteration at the default clock; this run's take 2.000 ms"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("x0.20"), std::string::npos) << text;

  // Too few re-timings: the iterations before the plan are the run's default clock.
  t.meta.run->plan->interleaved_default_step = {2 * kMs, 3};
  t.meta.run->plan->before_step = {40 * kMs, 8};
  j = RunToJson("run.emotrace", t);
  EXPECT_NEAR(j.at("policy_effect").at("plan_iteration").at("default_clock_ms").get<double>(), 40.0, 1e-9);
  EXPECT_FALSE(j.at("policy_effect").at("plan_iteration").at("matches").get<bool>());

  // Fewer than five iterations on the default clock say too little to compare.
  t.meta.run->plan->before_step = {40 * kMs, 4};
  EXPECT_FALSE(RunToJson("run.emotrace", t).at("policy_effect").contains("plan_iteration"));
  t.meta.run->plan->before_step = {40 * kMs, 8};

  // A run without the plan's baseline (a policy that carries none) says nothing of it.
  t.meta.run->policy_run.erase("predicted_baseline_ns");
  EXPECT_FALSE(RunToJson("run.emotrace", t).at("policy_effect").contains("plan_iteration"));
}

}  // namespace
}  // namespace emo::report
