// The packers on hand-built op sequences (no trace, no ../shared): each packing's cuts, the
// minimum length, critical ops kept apart from slack ones, equal-clock merging, and the pack
// graph's acyclicity on random feasible timelines.
#include "emo/packing/packer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

namespace emo::packing {
namespace {

constexpr TimeNs kMs = 1'000'000;

// One device's ops, back to back: each `{duration ms, slack ms, thread, clock class, waits on
// another stream, waits on another device}`.
struct Spec {
  double ms;
  double slack_ms;
  int64_t thread = 1;
  uint8_t clock_class = 0;
  bool waits_on_stream = false;
  bool waits_on_device = false;
};

DeviceOps Device(const std::vector<Spec>& specs, int32_t device = 0) {
  DeviceOps d;
  d.device = device;
  TimeNs t = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    PackOp op;
    op.node = graph::NodeId(static_cast<uint32_t>(device * 1000 + i));
    op.start = t;
    op.duration = static_cast<TimeNs>(specs[i].ms * kMs);
    op.slack = static_cast<TimeNs>(specs[i].slack_ms * kMs);
    op.launch = i;
    op.thread = specs[i].thread;
    op.clock_class = specs[i].clock_class;
    op.waits_on_stream = specs[i].waits_on_stream;
    op.waits_on_device = specs[i].waits_on_device;
    d.ops.push_back(op);
    t += op.duration;
  }
  d.end = t;
  return d;
}

PackOptions Min(double ms) {
  PackOptions o;
  o.min_pack_ns = static_cast<TimeNs>(ms * kMs);
  return o;
}

std::vector<size_t> Sizes(const std::vector<Pack>& packs) {
  std::vector<size_t> s;
  for (const auto& p : packs) s.push_back(p.ops.size());
  return s;
}

// Every pack ends where the next starts, the last at the iteration end; every op is in one.
void ExpectTiling(const std::vector<Pack>& packs, const DeviceOps& d) {
  ASSERT_FALSE(packs.empty());
  size_t ops = 0;
  for (size_t i = 0; i < packs.size(); ++i) {
    EXPECT_LT(packs[i].start, packs[i].end) << i;
    if (i + 1 < packs.size()) {
      EXPECT_EQ(packs[i].end, packs[i + 1].start) << i;
    }
    ops += packs[i].ops.size();
  }
  EXPECT_EQ(packs.front().start, d.ops.front().start);
  EXPECT_EQ(packs.back().end, d.end);
  EXPECT_EQ(ops, d.ops.size());
}

TEST(PackerTest, TimeWindowCutsAtSlackChangesOnceLongEnough) {
  // 4 ms critical, 4 ms with slack, 12 ms critical; minimum 5 ms.
  const DeviceOps d = Device({{2, 0}, {2, 0}, {2, 5}, {2, 5}, {6, 0}, {6, 0}});
  const auto packs = MakePacks(PackingKind::kTimeWindow, {{d}}, Min(5));
  ExpectTiling(packs, d);
  // At 4 ms the first slack op is too early to cut; at 6 ms the pack has 2 of its 6 busy ms
  // with slack (no slack by majority) and the next op has slack: a cut. The second pack is 2 ms
  // long when the critical op comes, and 8 ms (under twice the minimum) at the last one.
  EXPECT_EQ(Sizes(packs), (std::vector<size_t>{3, 3}));
  EXPECT_FALSE(packs[0].has_slack);
  EXPECT_TRUE(packs[0].critical);
}

TEST(PackerTest, PhasesFollowTheLaunchingThread) {
  // Forward on thread 1 (12 ms), backward on thread 2 (12 ms), optimizer on thread 1 (3 ms).
  const DeviceOps d = Device({{6, 0, 1}, {6, 0, 1}, {6, 0, 2}, {6, 0, 2}, {3, 1, 1}});
  const auto phases = MakePacks(PackingKind::kPhases, {{d}}, Min(5));
  ExpectTiling(phases, d);
  // The 3 ms optimizer phase is shorter than the minimum and joins the backward.
  EXPECT_EQ(Sizes(phases), (std::vector<size_t>{2, 3}));
  EXPECT_EQ(phases[1].first_launch, 2u);
}

TEST(PackerTest, PerOpIsOnePackPerOp) {
  const DeviceOps d = Device({{1, 0}, {2, 3}, {1, 0}});
  const auto packs = MakePacks(PackingKind::kPerOp, {{d}}, Min(5));
  ExpectTiling(packs, d);
  EXPECT_EQ(Sizes(packs), (std::vector<size_t>{1, 1, 1}));
  EXPECT_EQ(packs[1].first_launch, 1u);
  EXPECT_TRUE(packs[1].has_slack);
  EXPECT_FALSE(packs[1].critical);
}

TEST(PackerTest, DependencyCutsAtCriticalityClockClassAndSyncs) {
  const DeviceOps d = Device({
      {6, 0, 1, 0},          // critical compute
      {6, 0, 1, 1},          // critical memory: a clock-class change
      {6, 9, 1, 1},          // memory with slack: a criticality change
      {6, 9, 1, 1, true},    // waits on another stream: a cut
      {6, 9, 1, 1},
  });
  const auto packs = MakePacks(PackingKind::kDependency, {{d}}, Min(5));
  ExpectTiling(packs, d);
  EXPECT_EQ(Sizes(packs), (std::vector<size_t>{1, 1, 1, 2}));
  EXPECT_TRUE(packs[0].critical);
  EXPECT_TRUE(packs[1].critical);
  EXPECT_FALSE(packs[2].critical);
  EXPECT_FALSE(packs[3].critical);
}

TEST(PackerTest, DependencyMergesShortRunsIntoTheirOwnKind) {
  // A 1 ms slack run between two slack runs and a critical one: it joins a slack neighbour,
  // never the critical pack; a 1 ms critical blip inside slack time must join something and
  // makes its pack critical.
  const DeviceOps d = Device({
      {6, 0},     // critical
      {6, 9, 1, 1},  // slack, memory
      {1, 9, 1, 0},  // slack, compute: short
      {6, 9, 1, 1},  // slack, memory
      {1, 0, 1, 1},  // critical blip: short
      {6, 9, 1, 1},  // slack
  });
  const auto packs = MakePacks(PackingKind::kDependency, {{d}}, Min(5));
  ExpectTiling(packs, d);
  for (const auto& p : packs) EXPECT_GE(p.end - p.start, 5 * kMs);
  ASSERT_GE(packs.size(), 2u);
  EXPECT_EQ(packs[0].ops.size(), 1u);  // the critical op stays alone
  EXPECT_TRUE(packs[0].critical);
  // The short slack run joined slack ops only.
  EXPECT_FALSE(packs[1].critical);
  EXPECT_GE(packs[1].ops.size(), 2u);
  // The blip's pack is marked critical (a plan keeps it at the default clock).
  bool blip_pack_critical = false;
  for (const auto& p : packs) {
    for (auto v : p.ops) {
      if (v.value() == 4) blip_pack_critical = p.critical;
    }
  }
  EXPECT_TRUE(blip_pack_critical);
}

TEST(PackerTest, EveryPackingRespectsTheMinimumOnLongRandomSequences) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> ms(0.01, 3.0);
  std::bernoulli_distribution coin(0.3);
  std::vector<Spec> specs;
  for (int i = 0; i < 2000; ++i) {
    specs.push_back({ms(rng), coin(rng) ? 0.0 : 2.0, coin(rng) ? 2 : 1, static_cast<uint8_t>(coin(rng) ? 1 : 0),
                     coin(rng), coin(rng) && coin(rng)});
  }
  const DeviceOps d = Device(specs);
  for (PackingKind kind : {PackingKind::kTimeWindow, PackingKind::kPhases, PackingKind::kDependency}) {
    const auto packs = MakePacks(kind, {{d}}, Min(5));
    ExpectTiling(packs, d);
    size_t short_between_syncs = 0;
    for (size_t i = 0; i < packs.size(); ++i) {
      if (packs[i].end - packs[i].start >= 5 * kMs) continue;
      // Only a dependency pack both of whose cuts are waits on another device may stay short;
      // waits on another stream are cuts that merging may remove.
      const bool sync_here = specs[packs[i].ops.front().value()].waits_on_device;
      const bool sync_next = i + 1 == packs.size() || specs[packs[i + 1].ops.front().value()].waits_on_device;
      EXPECT_TRUE(kind == PackingKind::kDependency && sync_here && sync_next) << PackingName(kind) << " pack " << i;
      ++short_between_syncs;
    }
    if (kind == PackingKind::kDependency) {
      // Waits on another device are 9 % of the ops here: most packs are long.
      EXPECT_LT(short_between_syncs * 4, packs.size());
      for (size_t i = 0; i < specs.size(); ++i) {
        if (!specs[i].waits_on_device) continue;
        const bool starts_a_pack = std::any_of(packs.begin(), packs.end(), [&](const Pack& p) {
          return p.ops.front().value() == i;
        });
        EXPECT_TRUE(starts_a_pack) << "the wait on another device at op " << i << " was merged away";
      }
    }
  }
}

// Random ops on two devices and random edges, each from an op to one that starts after it ends
// (a feasible timeline); an op with an edge from the other device waits on it.
struct TwoDevices {
  PackingInput in;
  std::vector<std::pair<graph::NodeId, graph::NodeId>> edges;
};

TwoDevices RandomTwoDevices(uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> ms(0.1, 2.0);
  std::bernoulli_distribution coin(0.5);
  TwoDevices t;
  for (int32_t device = 0; device < 2; ++device) {
    std::vector<Spec> specs;
    for (int i = 0; i < 300; ++i) specs.push_back({ms(rng), coin(rng) ? 0.0 : 1.0, 1, static_cast<uint8_t>(i % 3 == 0)});
    t.in.devices.push_back(Device(specs, device));
  }
  std::vector<PackOp*> all;
  for (auto& d : t.in.devices) {
    for (auto& op : d.ops) all.push_back(&op);
  }
  std::uniform_int_distribution<size_t> pick(0, all.size() - 1);
  while (t.edges.size() < 400) {
    PackOp* u = all[pick(rng)];
    PackOp* v = all[pick(rng)];
    if (v->start < u->start + u->duration) continue;
    t.edges.push_back({u->node, v->node});
    if (u->node.value() / 1000 != v->node.value() / 1000) v->waits_on_device = true;
  }
  return t;
}

TEST(PackerTest, DependencyPackGraphIsAcyclicOnFeasibleTimelines) {
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    const TwoDevices t = RandomTwoDevices(seed);
    for (PackingKind kind : {PackingKind::kPerOp, PackingKind::kDependency}) {
      const auto packs = MakePacks(kind, t.in, Min(3));
      const auto pack_edges = PackGraphEdges(packs, t.edges);
      EXPECT_FALSE(pack_edges.empty());
      EXPECT_TRUE(IsAcyclic(packs.size(), pack_edges)) << PackingName(kind) << " seed " << seed;
    }
  }
}

TEST(PackerTest, TimeWindowsOverlappingAcrossDevicesCanWaitOnEachOther) {
  // Why kDependency cuts at syncs: without those cuts, two devices' windows over the same time
  // span can each hold an op the other waits on. Seen on these random timelines.
  size_t cyclic = 0;
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    const TwoDevices t = RandomTwoDevices(seed);
    const auto packs = MakePacks(PackingKind::kTimeWindow, t.in, Min(3));
    cyclic += IsAcyclic(packs.size(), PackGraphEdges(packs, t.edges)) ? 0 : 1;
  }
  EXPECT_GT(cyclic, 0u);
  // And the check itself.
  EXPECT_FALSE(IsAcyclic(3, {{0, 1}, {1, 2}, {2, 0}}));
  EXPECT_TRUE(IsAcyclic(3, {{0, 1}, {1, 2}, {0, 2}}));
}

TEST(PackerTest, AdjacentPacksWithTheSameClockMerge) {
  const DeviceOps d = Device({{6, 0}, {6, 9}, {6, 9}, {6, 0}});
  const auto packs = MakePacks(PackingKind::kPerOp, {{d}}, Min(5));
  std::vector<int64_t> merged_clocks;
  const auto merged = MergeEqualClocks(packs, {1980, 1500, 1500, 1980}, &merged_clocks);
  EXPECT_EQ(Sizes(merged), (std::vector<size_t>{1, 2, 1}));
  EXPECT_EQ(merged_clocks, (std::vector<int64_t>{1980, 1500, 1980}));
  EXPECT_EQ(merged[1].start, packs[1].start);
  EXPECT_EQ(merged[1].end, packs[2].end);
  EXPECT_TRUE(merged[1].has_slack);
  EXPECT_EQ(merged[1].busy_ns, 12 * kMs);
}

}  // namespace
}  // namespace emo::packing
