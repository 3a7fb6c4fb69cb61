// Packing and the trace planner on our H200 traces: packs cover the steady iteration, the plan
// meets the latency target by replay of the kernel graph, is never worse than the best single
// static clock nor the pass-level plan, and the pack-graph solver is within 0.5 % of CBC.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <limits>
#include <set>
#include <span>

#include "emo/analysis/analyze.h"
#include "emo/analysis/iterations.h"
#include "emo/analysis/replay.h"
#include "emo/model/device.h"
#include "emo/opt/trace_plan.h"
#include "emo/policy/launch_anchors.h"
#include "emo/policy/policy.h"
#include "emo/trace/launch_calls.h"
#include "test_util.h"

namespace emo::opt {
namespace {

std::vector<std::string> H200Traces() {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::recursive_directory_iterator(SharedPath("traces/h200"))) {
    if (e.path().string().ends_with(".json.gz")) out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The steady iteration's time with the trace's graph replayed on durations `d`.
TimeNs SteadyTime(const analysis::TraceAnalysis& a, std::span<const TimeNs> d) {
  const auto bounds = analysis::BoundsOf(*a.graph, a.iterations, analysis::Replay(*a.graph, d), a.steady);
  return bounds.end - bounds.start;
}

TEST(TracePlanTest, EveryH200TraceMeetsTheTargetAndBeatsStaticBest) {
  EMO_REQUIRE_SHARED();
  auto device = model::FindDevice("h200", EMO_SOURCE_DIR "/devices");
  ASSERT_TRUE(device.ok()) << device.status().ToString();
  const auto traces = H200Traces();
  ASSERT_EQ(traces.size(), 18u);  // 6 workloads + 12 profiler-overhead runs
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
    // A pack's power comes from its time-weighted class mix and applies to its whole
    // stretched time, so below the default clock one clock costs a little differently when
    // the iteration is cut into phases instead of packs (≤ 0.03 % here); the plan itself is
    // compared with both exactly.
    EXPECT_LE(plan->pass_level.energy_j, plan->static_best.energy_j * (1 + 1e-3));
    EXPECT_LE(plan->pass_level.time_ns, plan->deadline_ns);
    EXPECT_GT(plan->per_kernel_blind.time_ns, 0);
    EXPECT_GE(plan->per_kernel_blind.time_ns, plan->baseline.time_ns);  // only slows ops down
    EXPECT_LE(plan->plan.energy_j, plan->pass_level.energy_j + 1e-9);
    // The pack graph: solved with a bound, its plan scored, the fast solver within 0.5 % of
    // CBC on the same graph and deadline.
    const auto& pg = plan->pack_graph;
    EXPECT_EQ(pg.solver, "fast");
    EXPECT_TRUE(pg.outcome == Outcome::kOptimal || pg.outcome == Outcome::kFeasible) << OutcomeName(pg.outcome);
    EXPECT_GE(pg.gap_pct, 0.0);
    EXPECT_GT(pg.plan.time_ns, 0);
    EXPECT_GT(pg.plan.energy_j, 0.0);
    EXPECT_LE(pg.plan.energy_j, pg.baseline.energy_j + 1e-9);
    EXPECT_LE(pg.solved_replayed.time_ns, plan->deadline_ns);
    if (HaveExactSolver()) {
      EXPECT_EQ(pg.exact_outcome, "optimal");
      EXPECT_GE(pg.exact_gap_pct, -1e-6);
      EXPECT_LE(pg.exact_gap_pct, 0.5);
    }
    // The frontier: time ascending, energy strictly falling.
    ASSERT_FALSE(plan->frontier.empty());
    for (size_t i = 1; i < plan->frontier.size(); ++i) {
      EXPECT_GT(plan->frontier[i].time_ns, plan->frontier[i - 1].time_ns);
      EXPECT_LT(plan->frontier[i].energy_j, plan->frontier[i - 1].energy_j);
    }
    // Anchors: distinct launch positions.
    std::set<size_t> anchors;
    for (const auto& pp : plan->packs) anchors.insert(pp.pack.first_launch);
    EXPECT_EQ(anchors.size(), plan->packs.size());
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
    // No predicted power above the board's limit: the iteration runs at the limiter's clock.
    for (const PlanPoint* pt : {&plan->baseline, &plan->plan, &plan->static_best, &plan->pass_level}) {
      EXPECT_LE(pt->energy_j / NsToS(pt->time_ns), device->params.power_limit.value());
    }
    const double power = plan->baseline.energy_j / NsToS(plan->baseline.time_ns);
    EXPECT_LE(power, device->cap_power.value() * (1 + 1e-9)) << "default demand " << plan->default_demand_w << " W";
    EXPECT_EQ(plan->power_capped(*device), plan->default_demand_w > device->cap_power.value());
    const std::vector<PlannedTrace> planned{{&*a, &*device, *plan, {}, false}};
    auto policy = policy::PolicyJson(planned);
    EXPECT_EQ(policy["emo_policy_version"], policy::kPolicyVersion);
    EXPECT_EQ(policy["gpus"].size(), 1u);
    EXPECT_EQ(policy["gpus"][0]["steady_iteration"], a->iterations.iterations[a->steady].name);
    std::cout << std::filesystem::path(path).filename().string() << ": saving "
              << 100.0 * (1.0 - plan->plan.energy_j / plan->baseline.energy_j) << " % (static best "
              << 100.0 * (1.0 - plan->static_best.energy_j / plan->baseline.energy_j) << " %), "
              << plan->packs.size() << " packs\n";
  }
}

}  // namespace
}  // namespace emo::opt

namespace emo::opt {
namespace {

// A clock switch takes the switch latency at the old clock: plans without switches (the
// baseline, the best static clock) cost the same with or without it, and plans with it still
// meet the target and cost no more than the static best. A plan with a 1 ms latency may cost less
// than the one with free switches (on the example trace's corrected timeline, 11.93 against
// 12.08 J): after a switch up, the ops of the switch's first ms run at the lower old clock, cheaper
// where they have slack, and the greedy descent takes another path. So the latency is checked by
// what it changes, not by its sign.
TEST(TracePlanTest, SwitchLatencyCostsOnlyPlansThatSwitch) {
  auto device = model::FindDevice("h200", EMO_SOURCE_DIR "/devices");
  ASSERT_TRUE(device.ok()) << device.status().ToString();
  auto a = analysis::AnalyzeTrace(EMO_SOURCE_DIR "/examples/gpt_train_h200.json.gz", {});
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  TracePlanOptions free_switches;
  free_switches.packing.min_pack_ns = 2'000'000;
  TracePlanOptions slow_switches = free_switches;
  slow_switches.switch_latency_ns = 1'000'000;
  auto f = PlanTrace(*a, *device, free_switches);
  auto s = PlanTrace(*a, *device, slow_switches);
  ASSERT_TRUE(f.ok() && s.ok());
  EXPECT_EQ(f->baseline.time_ns, s->baseline.time_ns);
  EXPECT_DOUBLE_EQ(f->baseline.energy_j, s->baseline.energy_j);
  EXPECT_EQ(f->static_best.time_ns, s->static_best.time_ns);
  EXPECT_DOUBLE_EQ(f->static_best.energy_j, s->static_best.energy_j);
  EXPECT_DOUBLE_EQ(f->per_kernel_blind.energy_j, s->per_kernel_blind.energy_j);  // scored without it
  for (const auto* p : {&*f, &*s}) {
    EXPECT_LE(p->plan.time_ns, p->deadline_ns);
    EXPECT_LE(p->plan.energy_j, p->static_best.energy_j + 1e-9);
  }
  EXPECT_GT(f->switches, 0u);
  // The planner saw the latency: a different plan, or the same clocks at a cost.
  EXPECT_TRUE(s->switches != f->switches || s->plan.energy_j != f->plan.energy_j || s->plan.time_ns != f->plan.time_ns);
  EXPECT_EQ(s->switch_latency_ns, 1'000'000);
  // What the plan's packs carry (each op's extra time, which `emo run --actuator emulate` spins
  // and a job's peers are timed with) replays to the plan's own iteration time: the ops a switch
  // catches run at the previous pack's clock there too.
  for (const auto* p : {&*f, &*s}) {
    const std::vector<TimeNs> d = PlannedDurations(*p, a->durations);
    EXPECT_NEAR(static_cast<double>(SteadyTime(*a, d)), static_cast<double>(p->plan.time_ns), 1000.0)
        << (p == &*s ? "1 ms switches" : "free switches");
  }
}

// An EMO trace that read the SM clock over its traced iterations says the clock its durations
// ran at, and the power: held by the power limit, the plan computes energies there with the
// model's power at the cap; at the default clock, with the model's power at most the cap; a low
// clock the limit did not hold (locked, thermal), or no reads, leave the model's cap test.
TEST(TracePlanTest, TheClockATraceRecordedIsTheClockItsDurationsRanAt) {
  auto device = model::FindDevice("h200", EMO_SOURCE_DIR "/devices");
  ASSERT_TRUE(device.ok()) << device.status().ToString();
  auto a = analysis::AnalyzeTrace(std::string(EMO_SOURCE_DIR) + "/examples/streams_graph_h200.emotrace", {});
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(a->trace->meta.run.has_value());
  ASSERT_FALSE(a->trace->meta.run->gpus.empty());
  auto& clock = a->trace->meta.run->gpus[0].traced_clock;
  ASSERT_FALSE(clock.Known());  // recorded before the clock record existed
  auto plan_with = [&](double median_mhz, double capped_share, const model::DeviceModel& d) {
    clock.samples = median_mhz > 0 ? 20 : 0;
    clock.median_mhz = clock.min_mhz = clock.max_mhz = median_mhz;
    clock.power_capped_share = capped_share;
    auto p = PlanTrace(*a, d, {});
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    return std::move(p).value();
  };
  auto average_w = [](const PlanPoint& p) { return p.energy_j / (static_cast<double>(p.time_ns) * 1e-9); };
  const TracePlan by_model = plan_with(-1, -1, *device);
  EXPECT_EQ(by_model.throttle_clock_source, "model");
  ASSERT_FALSE(by_model.power_capped(*device));  // a light program: the model does not cap it
  const double cap = device->cap_power.value();
  ASSERT_LT(average_w(by_model.baseline), 0.9 * cap);

  const TracePlan held = plan_with(1507, 0.9, *device);  // snapped to the table's 1500 MHz
  EXPECT_EQ(held.throttle_clock_source, "trace");
  EXPECT_EQ(held.throttle_clock.value(), 1500.0);
  EXPECT_TRUE(held.power_capped(*device));
  EXPECT_EQ(held.baseline.time_ns, by_model.baseline.time_ns);
  EXPECT_GT(held.trace_power_scale, 1.0);
  EXPECT_NEAR(average_w(held.baseline), cap, 0.002 * cap);  // the limiter held it at the cap
  for (const auto& pack : held.packs) EXPECT_LE(pack.clock.value(), 1500.0);

  const TracePlan unknown_reasons = plan_with(1507, -1, *device);  // NVML gave no reasons: the clock stands
  EXPECT_EQ(unknown_reasons.throttle_clock_source, "trace");
  EXPECT_EQ(unknown_reasons.throttle_clock.value(), 1500.0);

  const TracePlan locked = plan_with(1507, 0.0, *device);
  EXPECT_EQ(locked.throttle_clock_source, "model");
  EXPECT_EQ(locked.throttle_clock, device->default_clock);
  EXPECT_EQ(locked.trace_power_scale, 1.0);

  // At the default clock under the cap, the model is left as it is.
  const TracePlan at_default = plan_with(1980, 0.0, *device);
  EXPECT_EQ(at_default.throttle_clock_source, "trace");
  EXPECT_EQ(at_default.throttle_clock, device->default_clock);
  EXPECT_EQ(at_default.trace_power_scale, 1.0);
  EXPECT_DOUBLE_EQ(at_default.baseline.energy_j, by_model.baseline.energy_j);

  // A device whose cap the model's power is over: the model alone calls the trace capped, the
  // recorded default clock says it drew at most the cap.
  model::DeviceModel low_cap = *device;
  low_cap.cap_power = Watts(0.6 * average_w(by_model.baseline));
  EXPECT_TRUE(plan_with(-1, -1, low_cap).power_capped(low_cap));
  const TracePlan clamped = plan_with(1980, 0.0, low_cap);
  EXPECT_FALSE(clamped.power_capped(low_cap));
  EXPECT_LT(clamped.trace_power_scale, 1.0);
  EXPECT_NEAR(average_w(clamped.baseline), low_cap.cap_power.value(), 0.002 * low_cap.cap_power.value());
}

// Two loops traced by `emo trace` on the H200 with their SM clock reads (data/h200_emo): bf16
// GEMMs the power limiter held near 1440 MHz and fp32 GEMMs at the default clock. The plan takes
// each one's recorded clock, and its baseline energy per iteration comes close to the energy NVML
// measured over the same run's untraced iterations (the model alone put both at 1665 MHz): the
// capped one within 3 % (the cap power decides it: -0.5 %), the fp32 one within 5 % (these traces
// carry no shapes, so the fp32 GEMMs draw the compute class's power times the CUDA-core share,
// fitted on 38 loops: -4.5 %; the probe-derived file before that fit: -0.4 %; the goal of
// BENCHMARKS.md Order 8 is 10 %).
TEST(TracePlanTest, OnTheH200TheRecordedClockIsTheOneThePlanUses) {
  auto device = model::FindDevice("h200", EMO_SOURCE_DIR "/devices");
  ASSERT_TRUE(device.ok()) << device.status().ToString();
  struct Case {
    const char* file;
    double lo_mhz, hi_mhz;
    bool capped;
    double energy_tolerance;
  };
  for (const Case& c : {Case{"gemm_bf16_8192.emotrace", 1395, 1515, true, 0.03},
                        Case{"gemm_fp32_4096.emotrace", 1980, 1980, false, 0.05}}) {
    SCOPED_TRACE(c.file);
    auto a = analysis::AnalyzeTrace(std::string(EMO_SOURCE_DIR) + "/data/h200_emo/" + c.file, {});
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    const auto& gpu = a->trace->meta.run->gpus.at(0);
    ASSERT_TRUE(gpu.Measurable());
    auto plan = PlanTrace(*a, *device, {});
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    EXPECT_EQ(plan->throttle_clock_source, "trace");
    EXPECT_GE(plan->throttle_clock.value(), c.lo_mhz);
    EXPECT_LE(plan->throttle_clock.value(), c.hi_mhz);
    EXPECT_EQ(plan->power_capped(*device), c.capped);
    EXPECT_NEAR(plan->baseline.energy_j / gpu.energy_per_iteration_j, 1.0, c.energy_tolerance);
  }
}

// Kineto traces of the H200 kernel sweep (data/h200_kernels) with the step time measured outside
// the trace: the bf16 4096^3 GEMM loop ran 17 % slower than its short trace (the limiter held it
// at a median 1537.5 MHz, 1455 at least, by NVML), so the step says the clock and the cap power
// (measured 2.398 J per step); the fp32 GEMM loop's step is its trace's (the default clock); a
// copy loop measured 30 % slower than its trace is slower than any clock explains (copies barely
// follow the SM clock): no clock is inferred.
TEST(TracePlanTest, AGpuBoundLoopsMeasuredStepSaysTheClockTheLimiterHeldItAt) {
  auto device = model::FindDevice("h200", EMO_SOURCE_DIR "/devices");
  ASSERT_TRUE(device.ok()) << device.status().ToString();
  auto plan_at = [&](const char* config, TimeNs step_ns) {
    analysis::AnalyzeOptions options;
    options.overhead.step_time_ns = step_ns;
    auto a = analysis::AnalyzeTrace(std::string(EMO_SOURCE_DIR) + "/data/h200_kernels/" + config + ".json.gz", options);
    EXPECT_TRUE(a.ok()) << a.status().ToString();
    auto p = PlanTrace(*a, *device, {});
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    return std::make_pair(a->overhead.gpu_scale, std::move(p).value());
  };
  const auto [bf16_scale, bf16] = plan_at("gemm_bf16_4096", 3'471'938);
  EXPECT_GT(bf16_scale, 1.1);
  EXPECT_EQ(bf16.throttle_clock_source, "step");
  EXPECT_TRUE(bf16.power_capped(*device));
  EXPECT_GE(bf16.throttle_clock.value(), 1455.0);
  EXPECT_LE(bf16.throttle_clock.value(), 1650.0);
  EXPECT_NEAR(bf16.baseline.energy_j / 2.398274, 1.0, 0.03);
  for (const auto& pack : bf16.packs) EXPECT_LE(pack.clock.value(), bf16.throttle_clock.value());

  const auto [fp32_scale, fp32] = plan_at("gemm_fp32_4096", 2'683'686);
  EXPECT_EQ(fp32_scale, 1.0);
  EXPECT_EQ(fp32.throttle_clock_source, "model");
  EXPECT_FALSE(fp32.power_capped(*device));

  const auto [copy_scale, copy] = plan_at("copy_2e26", 3'860'000);
  EXPECT_GT(copy_scale, 1.2);
  EXPECT_EQ(copy.throttle_clock_source, "model");
}

}  // namespace
}  // namespace emo::opt

namespace emo::opt {
namespace {

// `emo run --actuator emulate`'s spins (policy gpus[].emulate): on a real trace with several
// streams, events and host syncs, every op of the steady iteration slowed by 3 us. The spins
// add up to the plan's extra time; a stream's extra is never carried past an op that another
// stream or the CPU waits for (it would no longer delay the waiter); a spin shorter than the
// carry minimum only comes after such an op or after the stream's last op of the pack.
TEST(LaunchAnchorsTest, SpinsAddThePlansExtraTimeAndNeverCarryItPastAWait) {
  auto a = analysis::AnalyzeTrace(std::string(EMO_SOURCE_DIR) + "/examples/streams_graph_h200.emotrace", {});
  ASSERT_TRUE(a.ok()) << a.status().message();
  packing::PackOptions options;
  options.min_pack_ns = 1'000'000'000;  // one pack: the whole iteration
  const auto packs = packing::PackSteadyIteration(*a, options);
  ASSERT_EQ(packs.size(), 1u);
  PlannedPack planned{packs[0], MegaHertz(1650.0), 0, 0, std::vector<TimeNs>(packs[0].ops.size(), 3'000)};
  const auto anchors = policy::AnchorPacks(*a, {&planned}, 1'500'000);
  ASSERT_GT(anchors.calls_per_iteration, 0u);
  EXPECT_EQ(anchors.extra_ns, static_cast<int64_t>(3'000 * packs[0].ops.size()));
  int64_t spun = 0;
  for (size_t i = 0; i < anchors.spins.size(); ++i) {
    const auto& s = anchors.spins[i];
    EXPECT_GE(s.call, 0);
    EXPECT_LT(s.call, static_cast<int64_t>(anchors.calls_per_iteration));
    if (i > 0) {
      EXPECT_GT(s.call, anchors.spins[i - 1].call);  // one per call, in call order
    }
    spun += s.ns;
  }
  EXPECT_EQ(spun + anchors.extra_without_call_ns, anchors.extra_ns);
  // The ops another stream or the CPU waits for.
  const auto& g = *a->graph;
  size_t waited = 0;
  for (const graph::NodeId op : packs[0].ops) {
    bool is_waited = false;
    for (const uint32_t e : g.OutEdges(op)) {
      const auto kind = g.edges()[e].kind;
      is_waited = is_waited || kind == graph::EdgeKind::kEventWait || kind == graph::EdgeKind::kHostSync;
    }
    waited += is_waited;
  }
  EXPECT_GT(waited, 0u) << "the example has cross-stream waits and host syncs";
  // Short spins are few: at most one per waited-on op and one per stream.
  size_t short_spins = 0;
  for (const auto& s : anchors.spins) short_spins += s.ns < policy::kSpinMinNs;
  EXPECT_LE(short_spins, waited + a->trace->streams.size());
  // Without the flush before waits, the 3 us extras would be carried to 100 us: strictly fewer
  // spins than ops, and more than one (the waits cut the carry).
  EXPECT_GT(anchors.spins.size(), 1u);
  EXPECT_LT(anchors.spins.size(), packs[0].ops.size());
  // Only the waited-on ops slowed: each one's extra comes right after it.
  for (size_t k = 0; k < packs[0].ops.size(); ++k) {
    bool is_waited = false;
    for (const uint32_t e : g.OutEdges(packs[0].ops[k])) {
      const auto kind = g.edges()[e].kind;
      is_waited = is_waited || kind == graph::EdgeKind::kEventWait || kind == graph::EdgeKind::kHostSync;
    }
    planned.op_extra_ns[k] = is_waited ? 3'000 : 0;
  }
  const auto at_waits = policy::AnchorPacks(*a, {&planned}, 1'500'000);
  ASSERT_EQ(at_waits.spins.size(), waited);
  for (const auto& s : at_waits.spins) EXPECT_EQ(s.ns, 3'000) << "call " << s.call;
  // No extra, no spins.
  planned.op_extra_ns.assign(packs[0].ops.size(), 0);
  const auto none = policy::AnchorPacks(*a, {&planned}, 1'500'000);
  EXPECT_TRUE(none.spins.empty());
  EXPECT_EQ(none.extra_ns, 0);
}

// Switches anchored on the GPU (policy packs[].gpu_switch_call): on a real trace with several
// streams, each pack's anchor is the call whose op is the device's last to end at least the lead
// before the pack's first op starts, found here by brute force over every op and its launch.
TEST(LaunchAnchorsTest, EachGpuSwitchWaitsForTheLastOpEndingALeadBeforeItsPack) {
  auto a = analysis::AnalyzeTrace(std::string(EMO_SOURCE_DIR) + "/examples/streams_graph_h200.emotrace", {});
  ASSERT_TRUE(a.ok()) << a.status().message();
  packing::PackOptions options;
  options.min_pack_ns = 200'000;
  const auto packs = packing::PackSteadyIteration(*a, options);
  ASSERT_GE(packs.size(), 2u);
  std::vector<PlannedPack> planned;
  for (const auto& p : packs) planned.push_back({p, MegaHertz(1650.0), 0, 0, std::vector<TimeNs>(p.ops.size(), 0)});
  std::vector<const PlannedPack*> pointers;
  for (const auto& p : planned) pointers.push_back(&p);
  constexpr TimeNs kLead = 100'000;
  const auto anchors = policy::AnchorPacks(*a, pointers, kLead);
  ASSERT_EQ(anchors.gpu_switch_call.size(), packs.size());
  const auto calls = trace::CountedLaunchCalls(*a->trace);
  const auto& g = *a->graph;
  const auto& nodes = g.nodes();
  const auto& it = a->iterations.iterations[a->steady];
  const auto first = static_cast<int64_t>(
      std::lower_bound(calls.begin(), calls.end(), it.start,
                       [](const trace::LaunchCall& c, TimeNs v) { return c.start < v; }) -
      calls.begin());
  // Every op of the device with the index of its counted launch call.
  std::vector<std::pair<TimeNs, int64_t>> ends;
  for (size_t v = 0; v < nodes.size(); ++v) {
    if (nodes.kind[v] != graph::NodeKind::kGpuOp) continue;
    for (const uint32_t e : g.InEdges(graph::NodeId(static_cast<uint32_t>(v)))) {
      const auto src = g.edges()[e].src.value();
      if (g.edges()[e].kind != graph::EdgeKind::kLaunch) continue;
      for (size_t c = 0; c < calls.size(); ++c) {
        if (nodes.kind[src] == graph::NodeKind::kApiCall && calls[c].event == nodes.ref[src]) {
          ends.push_back({nodes.end[v], static_cast<int64_t>(c)});
        }
      }
    }
  }
  size_t anchored = 0;
  for (size_t i = 0; i < packs.size(); ++i) {
    TimeNs start = std::numeric_limits<TimeNs>::max();
    for (const graph::NodeId op : packs[i].ops) start = std::min(start, nodes.start[op.value()]);
    TimeNs best = std::numeric_limits<TimeNs>::min();
    for (const auto& [end, call] : ends) {
      if (end <= start - kLead) best = std::max(best, end);
    }
    if (anchors.gpu_switch_call[i] == policy::kNoCall) {
      EXPECT_TRUE(best == std::numeric_limits<TimeNs>::min() || start - best > it.end - it.start) << "pack " << i;
      continue;
    }
    ++anchored;
    EXPECT_EQ(anchors.gpu_switch_lead_ns[i], start - best) << "pack " << i;
    EXPECT_GE(anchors.gpu_switch_lead_ns[i], kLead);
    bool found = false;
    for (const auto& [end, call] : ends) found = found || (end == best && call - first == anchors.gpu_switch_call[i]);
    EXPECT_TRUE(found) << "pack " << i << ": call " << anchors.gpu_switch_call[i] << " launched no op ending at "
                       << best;
  }
  EXPECT_GT(anchored, 0u);
}

}  // namespace
}  // namespace emo::opt

namespace emo::opt {
namespace {

// The plan's sensitivity: its clocks replayed with every op's modelled extra time scaled. A
// CPU-bound loop planned at its lowest clock (data/h200_emo/train_loop) hides the plan's extra
// GPU time in slack that runs out just beyond it: 25 % more extra time breaks the 2 % target by
// far more than 25 % of the planned slowdown, and the plan and its policy say so. A GPU-bound
// plan (streams_graph) grows with its extra time, and is not flagged.
TEST(TracePlanTest, APlanWhoseSlackRunsOutJustBeyondItIsFlaggedFragile) {
  auto device = model::FindDevice("h200", EMO_SOURCE_DIR "/devices");
  ASSERT_TRUE(device.ok()) << device.status().ToString();
  for (const auto& [file, fragile] : {std::pair<const char*, bool>{"data/h200_emo/train_loop.emotrace", true},
                                      {"examples/streams_graph_h200.emotrace", false}}) {
    SCOPED_TRACE(file);
    auto a = analysis::AnalyzeTrace(std::string(EMO_SOURCE_DIR) + "/" + file, {});
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    auto plan = PlanTrace(*a, *device, {});
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    ASSERT_EQ(plan->sensitivity.size(), std::size(kSensitivityFactors));
    double before = SlowdownPct(plan->baseline, plan->plan);
    for (const auto& s : plan->sensitivity) {
      const double at = SlowdownPct(plan->baseline, s.plan);
      EXPECT_GE(at, before - 1e-9) << "x" << s.extra_factor;
      before = at;
      // Each is the replay of the plan's own extra times scaled (one pack: no switch in it).
      ASSERT_EQ(plan->packs.size(), 1u);
      std::vector<TimeNs> d(a->durations.begin(), a->durations.end());
      const PlannedPack& p = plan->packs.front();
      for (size_t k = 0; k < p.pack.ops.size(); ++k) {
        d[p.pack.ops[k].value()] += std::llround(s.extra_factor * static_cast<double>(p.op_extra_ns[k]));
      }
      EXPECT_NEAR(static_cast<double>(SteadyTime(*a, d)), static_cast<double>(s.plan.time_ns), 2000.0)
          << "x" << s.extra_factor;
    }
    const auto* f = FragileTime(*plan);
    EXPECT_EQ(f != nullptr, fragile);
    const std::vector<PlannedTrace> planned{{&*a, &*device, *plan, {}, false}};
    const auto policy = policy::PolicyJson(planned);
    EXPECT_EQ(policy["gpus"][0]["predicted"]["fragile_time"].is_string(), fragile);
    EXPECT_EQ(policy["warnings"].dump().find("fragile plan") != std::string::npos, fragile);
    if (!fragile) continue;
    // On the train loop the planned slowdown is under 1 %, and 25 % more extra time is over 4 %.
    EXPECT_LT(SlowdownPct(plan->baseline, plan->plan), 1.0);
    EXPECT_GT(SlowdownPct(plan->baseline, f->plan), 4.0);
  }
}

// --time-margin: the plan is made so that the target holds with every op's extra time 25 %
// larger, and reports the model's own times. On the CPU-bound loop the fragile 390 MHz plan
// gives way to a higher clock whose 1.25-times replay meets the target; the baseline and the
// target are those of the plan without a margin, and what it reports replays from its own extra
// times (nominal, as `emo run --actuator emulate` adds them).
TEST(TracePlanTest, AMarginPlansForLargerExtraTimesAndReportsTheModelsOwn) {
  auto device = model::FindDevice("h200", EMO_SOURCE_DIR "/devices");
  ASSERT_TRUE(device.ok()) << device.status().ToString();
  auto a = analysis::AnalyzeTrace(std::string(EMO_SOURCE_DIR) + "/data/h200_emo/train_loop.emotrace", {});
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  auto plain = PlanTrace(*a, *device, {});
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  TracePlanOptions o;
  o.time_margin = 0.25;
  auto robust = PlanTrace(*a, *device, o);
  ASSERT_TRUE(robust.ok()) << robust.status().ToString();
  EXPECT_EQ(robust->time_margin, 0.25);
  EXPECT_EQ(robust->baseline.time_ns, plain->baseline.time_ns);
  EXPECT_EQ(robust->deadline_ns, plain->deadline_ns);
  ASSERT_NE(FragileTime(*plain), nullptr);
  EXPECT_EQ(FragileTime(*robust), nullptr);
  // At 1.25 times its extra time the plan meets the target; the plain one does not.
  ASSERT_EQ(robust->sensitivity[1].extra_factor, 1.25);
  EXPECT_LE(robust->sensitivity[1].plan.time_ns, robust->deadline_ns);
  EXPECT_GT(plain->sensitivity[1].plan.time_ns, plain->deadline_ns);
  // Higher clocks, so less extra time and a smaller saving.
  ASSERT_EQ(robust->packs.size(), 1u);
  EXPECT_GT(robust->packs.front().clock.value(), plain->packs.front().clock.value());
  EXPECT_GT(robust->static_best_clock.value(), plain->static_best_clock.value());
  EXPECT_GT(robust->plan.energy_j, plain->plan.energy_j);
  // Reported with the model's own times: the replay of its own extra times, and inside the
  // target with room to spare.
  const std::vector<TimeNs> d = PlannedDurations(*robust, a->durations);
  EXPECT_NEAR(static_cast<double>(SteadyTime(*a, d)), static_cast<double>(robust->plan.time_ns), 1000.0);
  EXPECT_LT(robust->plan.time_ns, robust->sensitivity[1].plan.time_ns);
  EXPECT_LE(robust->static_best.time_ns, robust->deadline_ns);
}

}  // namespace
}  // namespace emo::opt
