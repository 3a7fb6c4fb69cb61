// Packing and the interim trace planner on our H200 traces: packs cover the steady iteration,
// the plan meets the latency target by replay of the kernel graph, and is never worse than
// the best single static clock.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "emo/analysis/analyze.h"
#include "emo/model/device.h"
#include "emo/opt/trace_plan.h"
#include "emo/policy/policy.h"
#include "test_util.h"

namespace emo::opt {
namespace {

std::vector<std::string> H200Traces() {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(SharedPath("traces/h200"))) {
    if (e.path().string().ends_with(".json.gz")) out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(TracePlanTest, EveryH200TraceMeetsTheTargetAndBeatsStaticBest) {
  EMO_REQUIRE_SHARED();
  auto device = model::FindDevice("h200", EMO_SOURCE_DIR "/devices");
  ASSERT_TRUE(device.ok()) << device.status().ToString();
  const auto traces = H200Traces();
  ASSERT_EQ(traces.size(), 6u);
  for (const auto& path : traces) {
    SCOPED_TRACE(path);
    auto a = analysis::AnalyzeTrace(path, {});
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    TracePlanOptions options;
    auto plan = PlanTrace(*a, *device, options);
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    // Latency target, by replay of the kernel graph.
    EXPECT_LE(plan->plan.time_ns, static_cast<TimeNs>(1.02 * static_cast<double>(plan->baseline.time_ns)) + 1);
    EXPECT_LE(plan->plan.energy_j, plan->static_best.energy_j + 1e-9);
    EXPECT_LE(plan->static_best.energy_j, plan->baseline.energy_j + 1e-9);
    // Baselines: pass-level searched like the plan (from the static best, so never worse);
    // the dependency-blind one is scored, whatever its time.
    ASSERT_GE(plan->pass_level_phases, 1u);
    EXPECT_LE(plan->pass_level.energy_j, plan->static_best.energy_j + 1e-9);
    EXPECT_LE(plan->pass_level.time_ns, plan->deadline_ns);
    EXPECT_GT(plan->per_kernel_blind.time_ns, 0);
    EXPECT_GE(plan->per_kernel_blind.time_ns, plan->baseline.time_ns);  // only slows ops down
    // The baseline replays the analysis timeline unchanged.
    EXPECT_EQ(plan->baseline.time_ns, a->timeline_ns());
    // Packs: every GPU op of the steady iteration in exactly one pack, packs in time order,
    // none shorter than the minimum unless the iteration itself is.
    std::set<uint32_t> in_packs;
    size_t ops = 0;
    for (size_t p = 0; p < plan->packs.size(); ++p) {
      const auto& pk = plan->packs[p].pack;
      for (auto v : pk.ops) in_packs.insert(v.value());
      ops += pk.ops.size();
      if (p > 0) {
        EXPECT_LE(plan->packs[p - 1].pack.start, pk.start);
      }
      if (plan->packs.size() > 1) {
        EXPECT_GE(pk.end - pk.start, options.packing.min_pack_ns / 2);
      }
    }
    EXPECT_EQ(ops, in_packs.size());
    size_t steady_ops = 0;
    const auto& n = a->graph->nodes();
    for (uint32_t v = 0; v < n.size(); ++v) {
      steady_ops += n.kind[v] == graph::NodeKind::kGpuOp &&
                    a->iterations.node_iteration[v] == static_cast<int32_t>(a->steady);
    }
    EXPECT_EQ(ops, steady_ops);
    auto policy = policy::PolicyJson(*a, *plan);
    EXPECT_EQ(policy["emo_policy_version"], policy::kPolicyVersion);
    EXPECT_EQ(policy["gpus"].size(), 1u);
    std::cout << std::filesystem::path(path).filename().string() << ": saving "
              << 100.0 * (1.0 - plan->plan.energy_j / plan->baseline.energy_j) << " % (static best "
              << 100.0 * (1.0 - plan->static_best.energy_j / plan->baseline.energy_j) << " %), "
              << plan->packs.size() << " packs\n";
  }
}

}  // namespace
}  // namespace emo::opt
