// EMO's pipeline frontier against Perseus' published lowtime frontier on every case in
// ../shared (A100: GPT-3 and BLOOM × 12/24/48/96 microbatches; A40: both × 12), on Perseus'
// accounting (times floored to the frontier's step, blocking power over idle time) with
// energies from the measured table. For every published point (T, E), EMO's energy is that of
// its cheapest plan finishing within T.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "emo/opt/pipeline.h"
#include "test_util.h"

namespace emo::opt {
namespace {

struct Case {
  const char* gpu;
  const char* model;
  int microbatches;
  double blocking_w;
  TimeNs unit_ns;
  // The largest excess over the published energy allowed at any point, in percent. 0 means
  // "at or below the published frontier everywhere"; the one exception is measured and
  // explained in docs/opt.md and BENCHMARKS.md.
  double max_excess_pct;
};

constexpr Case kCases[] = {
    {"a100_sxm", "gpt3-175b", 12, 83.64, 1'000'000, 0.0},
    {"a100_sxm", "gpt3-175b", 24, 83.64, 1'000'000, 0.0},
    {"a100_sxm", "gpt3-175b", 48, 83.64, 1'000'000, 0.0},
    {"a100_sxm", "gpt3-175b", 96, 83.64, 1'000'000, 0.15},
    {"a100_sxm", "bloom", 12, 83.64, 1'000'000, 0.0},
    {"a100_sxm", "bloom", 24, 83.64, 1'000'000, 0.0},
    {"a100_sxm", "bloom", 48, 83.64, 1'000'000, 0.0},
    {"a100_sxm", "bloom", 96, 83.64, 1'000'000, 0.0},
    {"a40", "gpt3-175b", 12, 70.38, 100'000, 0.0},
    {"a40", "bloom", 12, 70.38, 100'000, 0.0},
};

std::vector<std::pair<double, double>> ReadPublished(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);  // header time,energy
  std::vector<std::pair<double, double>> out;
  while (std::getline(in, line)) {
    std::istringstream ss(line);
    double t, e;
    char comma;
    if (ss >> t >> comma >> e) out.emplace_back(t, e);
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(PerseusFrontierTest, EmoAtOrBelowPublishedFrontierAtEveryIterationTime) {
  EMO_REQUIRE_SHARED();
  for (const Case& c : kCases) {
    SCOPED_TRACE(std::string(c.gpu) + " " + c.model + " mb" + std::to_string(c.microbatches));
    const std::string base = "data/perseus_sosp24/";
    auto prof = ReadPipelineProfile(SharedPath(base + "stage_profile/" + c.model + "+" + c.gpu + "_bf16.csv"));
    ASSERT_TRUE(prof.ok()) << prof.status().ToString();
    const auto published = ReadPublished(SharedPath(base + "frontier_lowtime/" + c.gpu + "/" + c.model +
                                                    "_bf16_mb" + std::to_string(c.microbatches) + ".csv"));
    ASSERT_GT(published.size(), 100u);
    PipelineSpec spec{8, c.microbatches, PipelineSchedule::k1F1B, c.blocking_w, c.unit_ns};
    auto pp = BuildPipelineProblem(*prof, spec);
    ASSERT_TRUE(pp.ok());
    PipelinePlanOptions po;
    po.frontier_step_ns = c.unit_ns;
    auto plan = PlanPipeline(*pp, po);
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    const auto& pts = plan->frontier.points;
    double worst = -1e9, sum = 0.0;
    size_t k = 0;
    bool have = false;
    for (const auto& [t, e] : published) {
      const TimeNs t_ns = std::llround(t * 1e9);
      while (k < pts.size() && pts[k].makespan_ns <= t_ns) {
        ++k;
        have = true;
      }
      ASSERT_TRUE(have) << "no EMO plan within the published time " << t << " s";
      const double excess = 100.0 * (pts[k - 1].energy_j - e) / e;
      worst = std::max(worst, excess);
      sum += excess;
    }
    const double mean = sum / static_cast<double>(published.size());
    std::printf("%-9s %-10s mb%-3d max excess %+.3f%%  mean %+.3f%%  %zu EMO points  %.0f ms\n", c.gpu, c.model,
                c.microbatches, worst, mean, pts.size(), plan->solve_ms);
    EXPECT_LE(worst, c.max_excess_pct);
    EXPECT_LT(mean, -0.5) << "EMO should be clearly below the published frontier on average";
  }
}

}  // namespace
}  // namespace emo::opt
