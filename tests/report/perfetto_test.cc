// The Perfetto output: one timeline per rank (the analysis timeline, corrected for profiler
// overhead here), with CPU operators, iterations, critical-path flows and slack on it, and one
// process per rank and device when several traces are written together.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "emo/analysis/analyze.h"
#include "emo/analysis/iterations.h"
#include "emo/report/perfetto.h"
#include "trace_builder.h"

namespace emo::report {
namespace {

using analysis::TraceAnalysis;
using graph::NodeKind;
using nlohmann::json;
using testing::TraceBuilder;

// A CPU-bound loop of four 100 us iterations on one thread: in each, aten::linear around
// aten::mm launches a 10 us GEMM, then aten::relu launches a 2 us kernel.
trace::Trace LoopTrace() {
  TraceBuilder b;
  int64_t corr = 1;
  for (int k = 0; k < 4; ++k) {
    const double t0 = 100.0 * k;
    b.Annotation(("ProfilerStep#" + std::to_string(k)).c_str(), t0, t0 + 95);
    b.Op("aten::linear", t0 + 2, t0 + 40);
    b.Op("aten::mm", t0 + 5, t0 + 38);
    b.Api("cudaLaunchKernel", t0 + 30, t0 + 36, corr);
    b.Kernel("gemm", 7, t0 + 37, t0 + 47, corr++);
    b.Op("aten::relu", t0 + 45, t0 + 80);
    b.Api("cudaLaunchKernel", t0 + 70, t0 + 76, corr);
    b.Kernel("relu", 7, t0 + 77, t0 + 79, corr++);
  }
  return b.Build();
}

// The loop analysed with the CPU scale fitted to an unprofiled step of 60 us (corrected), or
// on its traced timeline.
TraceAnalysis Analyze(trace::Trace t, bool corrected) {
  analysis::AnalyzeOptions options;
  if (corrected) {
    options.overhead.step_time_ns = 60'000;
  } else {
    options.overhead.mode = analysis::OverheadOptions::Mode::kOff;
  }
  auto a = analysis::AnalyzeTrace(std::move(t), options);
  EXPECT_TRUE(a.ok()) << a.status().ToString();
  return std::move(a).value();
}

// A ts or dur of the written file in ns (written as microseconds with three decimals).
TimeNs Ns(const json& us) { return std::llround(us.get<double>() * 1000.0); }

struct Written {
  json file;
  TimeNs origin = 0;
  std::vector<json> slices, flows, counters;
  std::map<int64_t, std::string> process_names;
  std::map<uint32_t, json> node_slice;  // graph node -> its slice (one rank)
  bool HasCat(const json& e, const std::string& cat) const {
    return e.contains("cat") && e["cat"].get<std::string>().find(cat) != std::string::npos;
  }
};

Written Parse(const std::string& text) {
  Written w;
  w.file = json::parse(text);
  w.origin = w.file["otherData"]["origin_ns"].get<TimeNs>();
  for (const auto& e : w.file["traceEvents"]) {
    const std::string ph = e["ph"];
    if (ph == "X") w.slices.push_back(e);
    if (ph == "s" || ph == "f") w.flows.push_back(e);
    if (ph == "C") w.counters.push_back(e);
    if (ph == "M" && e["name"] == "process_name") w.process_names[e["pid"]] = e["args"]["name"];
    if (ph == "X" && e.contains("args") && e["args"].contains("node") && !w.HasCat(e, "critical_path")) {
      w.node_slice[e["args"]["node"].get<uint32_t>()] = e;
    }
  }
  return w;
}

Written WriteOne(const TraceAnalysis& a) { return Parse(PerfettoJson(std::span(&a, 1))); }

TEST(PerfettoTest, EveryNodeIsAtItsTimelineTimesNotItsMeasuredOnes) {
  const TraceAnalysis a = Analyze(LoopTrace(), true);
  ASSERT_TRUE(a.corrected());
  const Written w = WriteOne(a);
  const auto& n = a.graph->nodes();
  ASSERT_EQ(w.node_slice.size(), n.size());
  size_t steady_nodes = 0, moved = 0;
  for (uint32_t v = 0; v < n.size(); ++v) {
    const json& e = w.node_slice.at(v);
    EXPECT_EQ(Ns(e["ts"]) + w.origin, a.timeline.start[v]) << v;
    EXPECT_EQ(Ns(e["dur"]), a.timeline.end[v] - a.timeline.start[v]) << v;
    if (a.iterations.node_iteration[v] != static_cast<int32_t>(a.steady)) continue;
    ++steady_nodes;
    if (a.timeline.start[v] != n.start[v] || a.timeline.end[v] - a.timeline.start[v] != n.end[v] - n.start[v]) {
      ++moved;
      EXPECT_TRUE(Ns(e["ts"]) + w.origin != n.start[v] || Ns(e["dur"]) != n.end[v] - n.start[v]) << v;
    }
  }
  EXPECT_GT(steady_nodes, 0u);
  EXPECT_GT(moved, steady_nodes / 2);  // the corrected timeline differs from the measured one
}

TEST(PerfettoTest, CpuOperatorsAreOnTheTimelineAroundTheCallsTheyMade) {
  const TraceAnalysis a = Analyze(LoopTrace(), true);
  const Written w = WriteOne(a);
  std::map<std::string, std::vector<json>> ops;
  for (const auto& e : w.slices) {
    if (w.HasCat(e, "cpu_op") || w.HasCat(e, "user_annotation")) ops[e["name"]].push_back(e);
  }
  for (const char* name : {"aten::linear", "aten::mm", "aten::relu"}) ASSERT_EQ(ops[name].size(), 4u) << name;
  ASSERT_EQ(ops["ProfilerStep#2"].size(), 1u);

  // Each operator's slice holds, on the timeline, the launch call it made (iteration k's calls
  // are the thread's API calls 2k and 2k+1).
  std::vector<uint32_t> calls;
  const auto& n = a.graph->nodes();
  for (uint32_t v = 0; v < n.size(); ++v) {
    if (n.kind[v] == NodeKind::kApiCall) calls.push_back(v);
  }
  ASSERT_EQ(calls.size(), 8u);
  auto holds = [&](const json& op, uint32_t call) {
    const TimeNs s = Ns(op["ts"]) + w.origin, e = s + Ns(op["dur"]);
    return s <= a.timeline.start[call] && a.timeline.end[call] <= e;
  };
  for (size_t k = 0; k < 4; ++k) {
    EXPECT_TRUE(holds(ops["aten::mm"][k], calls[2 * k])) << k;
    EXPECT_TRUE(holds(ops["aten::linear"][k], calls[2 * k])) << k;
    EXPECT_TRUE(holds(ops["aten::relu"][k], calls[2 * k + 1])) << k;
  }
  // The steady iteration's aten::mm where the timeline puts it, and shorter than traced (its CPU
  // time was scaled down): mapped through the thread's nodes, fraction kept inside each node.
  const auto& mm = ops["aten::mm"][a.steady];
  const auto thread_nodes = analysis::CpuNodesByThread(*a.graph);
  const auto& nodes = thread_nodes[0];
  const TimeNs traced_start = TraceBuilder::Ns(100.0 * static_cast<double>(a.steady) + 5);
  const TimeNs traced_end = traced_start + TraceBuilder::Ns(33);
  const TimeNs start = analysis::MapOnThread(*a.graph, nodes, a.timeline, traced_start, analysis::InNode::kScale);
  const TimeNs end = analysis::MapOnThread(*a.graph, nodes, a.timeline, traced_end, analysis::InNode::kScale);
  EXPECT_EQ(Ns(mm["ts"]) + w.origin, start);
  EXPECT_EQ(Ns(mm["dur"]), end - start);
  EXPECT_NE(Ns(mm["ts"]) + w.origin, traced_start);
  EXPECT_LT(Ns(mm["dur"]), traced_end - traced_start);
}

TEST(PerfettoTest, IterationSlicesHaveTheTimelinesIterationTimes) {
  const TraceAnalysis a = Analyze(LoopTrace(), true);
  const Written w = WriteOne(a);
  std::vector<json> its;
  for (const auto& e : w.slices) {
    if (w.HasCat(e, "iteration")) its.push_back(e);
  }
  ASSERT_EQ(its.size(), 4u);
  const std::vector<TimeNs> ends = analysis::IterationEnds(*a.graph, a.iterations, a.timeline);
  for (size_t i = 0; i < its.size(); ++i) {
    EXPECT_EQ(its[i]["name"], "ProfilerStep#" + std::to_string(i));
    EXPECT_EQ(Ns(its[i]["dur"]), a.timeline_times[i]) << i;
    EXPECT_EQ(Ns(its[i]["ts"]) + Ns(its[i]["dur"]) + w.origin, ends[i]) << i;
    EXPECT_EQ(its[i]["args"].contains("steady"), i == a.steady) << i;
  }
  // The timeline's iteration is the corrected one, not the measured 100 us.
  EXPECT_NE(Ns(its[a.steady]["dur"]), a.measured_ns());
  EXPECT_NEAR(its[a.steady]["args"]["critical_path_cpu_pct"].get<double>(),
              100.0 * a.steady_path.Share(analysis::PathCategory::kCpu), 0.05);
}

TEST(PerfettoTest, FlowsJoinConsecutiveCriticalPathNodes) {
  const TraceAnalysis a = Analyze(LoopTrace(), true);
  const Written w = WriteOne(a);
  const auto& path = a.window_path.nodes;
  ASSERT_GE(path.size(), 3u);
  ASSERT_EQ(w.flows.size(), 2 * (path.size() - 1));
  std::map<uint64_t, std::vector<json>> by_id;
  for (const auto& f : w.flows) by_id[f["id"].get<uint64_t>()].push_back(f);
  ASSERT_EQ(by_id.size(), path.size() - 1);
  // A flow end binds to the slice on its track that encloses its ts: that of the path node.
  auto binds_to = [&](const json& f, uint32_t v) {
    const json& e = w.node_slice.at(v);
    const TimeNs t = Ns(f["ts"]), s = Ns(e["ts"]);
    return f["pid"] == e["pid"] && f["tid"] == e["tid"] && s <= t && t <= s + Ns(e["dur"]);
  };
  size_t i = 1;
  for (const auto& [id, ends] : by_id) {
    ASSERT_EQ(ends.size(), 2u);
    EXPECT_EQ(ends[0]["ph"], "s");
    EXPECT_EQ(ends[1]["ph"], "f");
    EXPECT_TRUE(binds_to(ends[0], path[i - 1].value())) << i;
    EXPECT_TRUE(binds_to(ends[1], path[i].value())) << i;
    ++i;
  }
  for (auto v : path) {
    const json& e = w.node_slice.at(v.value());
    EXPECT_EQ(e["args"]["critical"], 1);
    EXPECT_TRUE(w.HasCat(e, ",critical")) << e["cat"];
  }
  // The path has a track of its own, and each GPU a slack counter.
  const auto on_path_track = [&](const json& e) { return w.HasCat(e, "critical_path"); };
  EXPECT_EQ(std::count_if(w.slices.begin(), w.slices.end(), on_path_track), static_cast<std::ptrdiff_t>(path.size()));
  EXPECT_FALSE(w.counters.empty());
}

TEST(PerfettoTest, MetadataNamesTheTimeline) {
  const TraceAnalysis corrected = Analyze(LoopTrace(), true);
  const Written w = WriteOne(corrected);
  const json& other = w.file["otherData"];
  EXPECT_EQ(other["timeline"], "corrected");
  EXPECT_EQ(other["ranks"][0]["timeline"], "corrected");
  EXPECT_DOUBLE_EQ(other["ranks"][0]["cpu_scale"].get<double>(), corrected.overhead.cpu_scale);
  EXPECT_EQ(other["ranks"][0]["confidence"], corrected.overhead.confidence);
  ASSERT_FALSE(w.process_names.empty());
  for (const auto& [pid, name] : w.process_names) {
    EXPECT_NE(name.find("corrected timeline"), std::string::npos) << name;
  }

  const Written traced = WriteOne(Analyze(LoopTrace(), false));
  EXPECT_EQ(traced.file["otherData"]["timeline"], "traced");
  for (const auto& [pid, name] : traced.process_names) {
    EXPECT_NE(name.find("traced timeline"), std::string::npos) << name;
  }
}

TEST(PerfettoTest, SeveralTracesGiveOneProcessPerRankAndDeviceEachOnItsTimeline) {
  trace::Trace t0 = LoopTrace(), t1 = LoopTrace();
  t0.meta.rank = 0;
  t1.meta.rank = 1;
  t1.meta.source_path = "rank1.json";
  std::vector<TraceAnalysis> ranks;
  ranks.push_back(Analyze(std::move(t0), true));
  ranks.push_back(Analyze(std::move(t1), false));
  const Written w = Parse(PerfettoJson(ranks));
  ASSERT_EQ(w.process_names.size(), 4u);  // CPU and GPU 0 of each rank
  std::set<std::string> prefixes;
  for (const auto& [pid, name] : w.process_names) prefixes.insert(name.substr(0, name.find(',')));
  EXPECT_EQ(prefixes, (std::set<std::string>{"rank 0 CPU", "rank 0 GPU 0", "rank 1 CPU", "rank 1 GPU 0"}));
  for (const auto& [pid, name] : w.process_names) {
    if (name.starts_with("rank 1")) {
      EXPECT_NE(name.find("rank1.json, traced timeline"), std::string::npos) << name;
    }
  }
  EXPECT_EQ(w.file["otherData"]["timeline"], "per rank");

  // Rank 1's nodes are on rank 1's processes at its own (traced) times.
  std::set<int64_t> rank1_pids;
  for (const auto& [pid, name] : w.process_names) {
    if (name.starts_with("rank 1")) rank1_pids.insert(pid);
  }
  const auto& a1 = ranks[1];
  size_t seen = 0;
  for (const auto& e : w.slices) {
    if (!rank1_pids.count(e["pid"].get<int64_t>()) || !e.contains("args") || !e["args"].contains("node") ||
        w.HasCat(e, "critical_path")) {
      continue;
    }
    const uint32_t v = e["args"]["node"];
    EXPECT_EQ(Ns(e["ts"]) + w.origin, a1.timeline.start[v]);
    EXPECT_EQ(a1.timeline.start[v], a1.graph->nodes().start[v]);  // traced: the measured times
    ++seen;
  }
  EXPECT_EQ(seen, a1.graph->num_nodes());
}

// Every track nests (a Chrome-JSON track must), on the hand-built loop and on the example trace.
void ExpectTracksNest(const Written& w) {
  std::map<std::pair<int64_t, int64_t>, std::vector<std::pair<TimeNs, TimeNs>>> tracks;
  for (const auto& e : w.slices) {
    const TimeNs s = Ns(e["ts"]);
    tracks[{e["pid"], e["tid"]}].push_back({s, s + Ns(e["dur"])});
  }
  for (auto& [track, slices] : tracks) {
    std::sort(slices.begin(), slices.end(),
              [](auto x, auto y) { return x.first != y.first ? x.first < y.first : x.second > y.second; });
    std::vector<TimeNs> open;
    for (auto [s, e] : slices) {
      while (!open.empty() && open.back() <= s) open.pop_back();
      if (!open.empty()) {
        ASSERT_LE(e, open.back()) << "track " << track.first << "/" << track.second << " at " << s;
      }
      open.push_back(e);
    }
  }
}

TEST(PerfettoTest, TracksNest) { ExpectTracksNest(WriteOne(Analyze(LoopTrace(), true))); }

TEST(PerfettoExampleTest, GptTrainingOnItsCorrectedTimeline) {
  auto r = analysis::AnalyzeTrace(std::string(EMO_SOURCE_DIR) + "/examples/gpt_train_h200.json.gz", {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const TraceAnalysis& a = *r;
  ASSERT_TRUE(a.corrected());
  const Written w = WriteOne(a);
  ExpectTracksNest(w);
  const auto& n = a.graph->nodes();
  ASSERT_EQ(w.node_slice.size(), n.size());
  for (uint32_t v = 0; v < n.size(); ++v) {
    const json& e = w.node_slice.at(v);
    ASSERT_EQ(Ns(e["ts"]) + w.origin, a.timeline.start[v]) << v;
    ASSERT_EQ(Ns(e["dur"]), a.timeline.end[v] - a.timeline.start[v]) << v;
  }
  size_t recorded = 0, written = 0;
  for (auto k : a.trace->cpu.kind) recorded += k == trace::CpuKind::kOp || k == trace::CpuKind::kAnnotation;
  for (const auto& e : w.slices) written += w.HasCat(e, "cpu_op") || w.HasCat(e, "user_annotation");
  EXPECT_EQ(written, recorded);
  EXPECT_EQ(w.flows.size(), 2 * (a.window_path.nodes.size() - 1));
  for (const auto& e : w.slices) {
    if (w.HasCat(e, "iteration,steady")) {
      EXPECT_EQ(Ns(e["dur"]), a.timeline_ns());
    }
  }
}

}  // namespace
}  // namespace emo::report
