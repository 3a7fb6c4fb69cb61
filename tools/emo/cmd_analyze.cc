// emo analyze: replay, slack and critical path of one or more traces.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <iterator>
#include <memory>
#include <optional>

#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "commands.h"
#include "emo/analysis/analyze.h"
#include "emo/analysis/job.h"
#include "emo/analysis/joint_replay.h"
#include "emo/base/text.h"
#include "emo/report/perfetto.h"
#include "emo/trace/reader.h"
#include "mpi_exchange.h"

namespace emo::cli {
namespace {

struct AnalyzeArgs {
  std::vector<std::string> traces;
  std::string iteration;
  OverheadFlags overhead;
  std::string json;
  std::string perfetto;
  double slack_threshold_us = 20.0;
  bool hta_path = false;
  bool mpi = false;
};

// The HTA-weighted critical path (analysis::FindHtaCriticalPath) of one analysis, as JSON.
nlohmann::json HtaPathJson(const analysis::TraceAnalysis& a) {
  const auto cp = analysis::FindHtaCriticalPath(*a.graph, a.window);
  size_t gpu_ops = 0, api_calls = 0;
  for (auto v : cp.nodes) {
    const auto k = a.graph->nodes().kind[v.value()];
    gpu_ops += k == graph::NodeKind::kGpuOp;
    api_calls += k == graph::NodeKind::kApiCall;
  }
  auto us = [&](analysis::PathCategory c) { return NsToUs(cp.time[static_cast<size_t>(c)]); };
  return {{"note", "HTA's edge weights on the traced timeline (CPU gaps between operators weigh 0): not wall time"},
          {"gpu_ops", gpu_ops},
          {"api_calls", api_calls},
          {"nodes", cp.nodes.size()},
          {"weight_us", {{"gpu", us(analysis::PathCategory::kGpuCompute)},
                         {"comm", us(analysis::PathCategory::kCommunication)},
                         {"cpu", us(analysis::PathCategory::kCpu)},
                         {"launch", us(analysis::PathCategory::kLaunch)},
                         {"total", NsToUs(cp.total())}}}};
}

// The text summary of one analysis.
std::string Summary(const analysis::TraceAnalysis& a) {
  std::string out;
  auto to = std::back_inserter(out);
  const auto& m = a.trace->meta;
  fmt::format_to(to, "{}\n", m.source_path);
  fmt::format_to(to, "  iterations        {} ({}; steady = {})\n", a.iterations.iterations.size(),
                 a.iterations.from_marker ? "marker" : "no marker: whole trace",
                 a.iterations.iterations[a.steady].name);
  fmt::format_to(to, "  iteration time    measured {:.1f} us, replayed {:.1f} us, error {:.3f} %\n",
                 NsToUs(a.measured_ns()), NsToUs(a.replayed_ns()), a.replay_error_pct());
  if (a.corrected()) {
    const auto& o = a.overhead;
    fmt::format_to(
        to,
        "  corrected         {:.1f} us without the profiler's overhead (range {:.1f}-{:.1f} us; CPU time x {:.3f}; "
        "confidence {})\n",
        NsToUs(a.timeline_ns()), NsToUs(a.corrected_lo_ns), NsToUs(a.corrected_hi_ns), o.cpu_scale, o.confidence);
    fmt::format_to(to, "  correction        {}: {}\n", analysis::OverheadSourceName(o.source), o.note);
  }
  const auto& cp = a.steady_path;
  auto pct = [&](analysis::PathCategory c) { return 100.0 * cp.Share(c); };
  fmt::format_to(to,
                 "  critical path     ({} timeline) {:.1f} us of the {:.1f} us iteration: GPU {:.1f} %, comm {:.1f} %, "
                 "CPU {:.1f} %, "
                 "launch/idle {:.1f} %\n",
                 a.corrected() ? "corrected" : "traced", NsToUs(cp.total()), NsToUs(a.timeline_ns()),
                 pct(analysis::PathCategory::kGpuCompute), pct(analysis::PathCategory::kCommunication),
                 pct(analysis::PathCategory::kCpu), pct(analysis::PathCategory::kLaunch));
  for (const auto& gap : analysis::CriticalPathGaps(a)) {
    fmt::format_to(to, "  not on the path   {:.1f} us at the iteration's {}: {}\n", NsToUs(gap.ns), gap.where,
                   gap.reason);
  }
  const TimeNs span =
      std::max<TimeNs>(1, a.horizon - analysis::FirstIterationStart(*a.graph, a.iterations, a.timeline));
  for (const auto& g : a.gpus) {
    fmt::format_to(to, "  GPU {}             busy {:.1f} % of {:.1f} ms ({}); {:.1f} % of busy time in {}\n", g.device,
                   100.0 * static_cast<double>(g.busy_ns) / static_cast<double>(span), NsToMs(span),
                   Plural(a.iterations.iterations.size(), "iteration"),
                   g.busy_ns > 0 ? 100.0 * static_cast<double>(g.slack_ns) / static_cast<double>(g.busy_ns) : 0.0,
                   Plural(g.windows.size(), "slack window"));
  }
  fmt::format_to(to, "  graph             {}, {}\n", Plural(a.graph->num_nodes(), "node"),
                 Plural(a.graph->num_edges(), "edge"));
  for (const auto& row : a.AllDiagnostics().Rows()) {
    if (row.severity == Severity::kInfo) continue;
    fmt::format_to(to, "  {:<8} {:<28} {:>7}  {}\n", SeverityName(row.severity), row.name, row.count, row.description);
  }
  return out;
}

// Ranks in increasing order as runs: "2-127" for 2, 3, ..., 127; "0, 4, 6-7".
std::string RankRanges(const std::vector<int64_t>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    out += fmt::format("{}{}", out.empty() ? "" : ", ", ranks[i]);
    if (j > i) out += fmt::format("{}{}", j == i + 1 ? ", " : "-", ranks[j]);
    i = j + 1;
  }
  return out;
}

void PrintJob(const analysis::JobAnalysis& job, const nlohmann::json& joint) {
  fmt::print("job               {} of {} ranks given{}; {} collectives matched across ranks\n", job.ranks.size(),
             job.world_size,
             job.missing_ranks.empty() ? "" : fmt::format(" (missing: {})", RankRanges(job.missing_ranks)),
             job.collectives.size());
  for (const auto& w : job.ranks) {
    fmt::print("  rank {:<4} waited {:>10.1f} us for peers in {} collectives; last to arrive in {}, keeping the others "
               "waiting {:.1f} us{}{}\n",
               w.rank, NsToUs(w.waited_ns), w.collectives, w.last_to_arrive, NsToUs(w.kept_waiting_ns),
               w.unmatched > 0 ? fmt::format("; {} of its collective kernels unmatched", w.unmatched) : "",
               w.clock_offset_ns != 0 ? fmt::format("; clock offset {:+.1f} us", NsToUs(w.clock_offset_ns)) : "");
  }
  if (job.critical_rank >= 0) {
    fmt::print("  critical rank {}: the others waited on it longest (over every matched collective of the traces)\n",
               job.critical_rank);
  }
  const auto& j = joint["job"];
  fmt::print("  joint replay      steady iteration (slowest rank): measured {:.1f} us, replayed jointly {:.1f} us "
             "({:.2f} % off; worst rank {:.2f} %), {} collective kernels waiting for their last member, {} passes{}\n",
             j["measured_us"].get<double>(), j["replayed_joint_us"].get<double>(), j["joint_error_pct"].get<double>(),
             j["worst_rank_joint_error_pct"].get<double>(), joint["members_bound"].get<size_t>(),
             joint["passes"].get<size_t>(), joint["converged"].get<bool>() ? "" : " (NOT converged)");
  fmt::print("  on the analysis timeline: {:.1f} us rank by rank, {:.1f} us jointly\n", j["timeline_alone_us"].get<double>(),
             j["timeline_joint_us"].get<double>());
  for (const auto& r : joint["ranks"]) {
    const auto& c = r["wait_contention"];
    if (c["kernels"].get<size_t>() == 0) continue;
    fmt::print("  rank {:<4} {} kernels of its steady iteration ran beside a collective waiting for its peers: {:.1f} us, "
               "{:.1f} us at their uncontended medians ({} compared; the timeline's joint replay keeps the share of that its "
               "waits keep)\n",
               r["rank"].get<int64_t>(), c["kernels"].get<size_t>(), c["traced_us"].get<double>(),
               c["uncontended_us"].get<double>(), c["compared"].get<size_t>());
  }
  const auto& path = joint["critical_path"];
  if (path.contains("time_by_rank_us")) {
    std::string on;
    for (const auto& [rank, us] : path["time_by_rank_us"].items()) {
      on += fmt::format("{}rank {} {:.1f} us", on.empty() ? "" : ", ", rank, us.get<double>());
    }
    fmt::print("  critical path across ranks (from the end of rank {}'s steady iteration, {} rank change{}): {}{}\n",
               path["sink_rank"].get<int64_t>(), path["rank_changes"].get<size_t>(),
               path["rank_changes"].get<size_t>() == 1 ? "" : "s", on,
               path["stop"] == "complete"
                   ? ""
                   : fmt::format("; its first {:.1f} us uncovered (the walk back reached a node with {})",
                                 path["uncovered_us"].get<double>(),
                                 path["stop"] == "root" ? "no recorded predecessor" : "no binding constraint"));
  }
  for (const auto& n : job.notes) fmt::print("  note: {}\n", n);
}

// One trace's share of the report: its JSON part and its text (what the processes of --mpi
// gather, in input order).
struct TraceReport {
  analysis::TraceJsonPart part;
  std::string summary, hta;
};

TraceReport ReportOf(const analysis::TraceAnalysis& a, bool hta_path) {
  TraceReport r{analysis::TraceJsonPartOf(a), Summary(a), ""};
  if (hta_path) {
    nlohmann::json hta = HtaPathJson(a);
    r.hta = fmt::format(
        "{}\n  HTA-weighted path  {}, {}; weights: GPU {:.1f} us, comm {:.1f} us, CPU {:.1f} us, launch "
        "{:.1f} us\n",
        a.trace->meta.source_path, Plural(hta["gpu_ops"].get<size_t>(), "GPU op"),
        Plural(hta["api_calls"].get<size_t>(), "API call"), hta["weight_us"]["gpu"].get<double>(),
        hta["weight_us"]["comm"].get<double>(), hta["weight_us"]["cpu"].get<double>(),
        hta["weight_us"]["launch"].get<double>());
    r.part.json["hta_critical_path"] = std::move(hta);
  }
  return r;
}

nlohmann::json ReportToJson(const TraceReport& r) {
  std::vector<uint64_t> diagnostics;
  for (size_t d = 0; d < static_cast<size_t>(Diag::kCount); ++d)
    diagnostics.push_back(r.part.diagnostics.Count(Diag(d)));
  return {{"json", r.part.json},
          {"iterations", r.part.iterations},
          {"measured", r.part.measured_ns},
          {"replayed", r.part.replayed_ns},
          {"nodes", r.part.nodes},
          {"edges", r.part.edges},
          {"diagnostics", diagnostics},
          {"summary", r.summary},
          {"hta", r.hta}};
}

TraceReport ReportFromJson(nlohmann::json j) {
  TraceReport r;
  r.part.json = std::move(j["json"]);
  r.part.iterations = j["iterations"];
  r.part.measured_ns = j["measured"];
  r.part.replayed_ns = j["replayed"];
  r.part.nodes = j["nodes"];
  r.part.edges = j["edges"];
  const auto counts = j["diagnostics"].get<std::vector<uint64_t>>();
  for (size_t d = 0; d < counts.size() && d < static_cast<size_t>(Diag::kCount); ++d)
    r.part.diagnostics.Add(Diag(d), counts[d]);
  r.summary = j["summary"];
  r.hta = j["hta"];
  return r;
}

// Several ranks of one job: their collectives matched across ranks (nullopt: not a job).
Result<std::optional<analysis::JobAnalysis>> JobOf(const std::vector<analysis::RankInput>& inputs) {
  if (inputs.size() < 2) return std::optional<analysis::JobAnalysis>();
  const bool ranked = std::all_of(inputs.begin(), inputs.end(), [](const auto& r) { return r.rank >= 0; });
  const bool same_file = std::any_of(inputs.begin() + 1, inputs.end(), [&](const auto& r) {
    return std::count_if(inputs.begin(), inputs.end(), [&](const auto& o) { return o.path == r.path; }) > 1;
  });
  if (!ranked && !same_file) return std::optional<analysis::JobAnalysis>();
  EMO_ASSIGN_OR_RETURN(analysis::JobAnalysis job, analysis::AnalyzeJob(inputs));
  return std::optional<analysis::JobAnalysis>(std::move(job));
}

// Reads this process's share of the traces (all of them without an exchange). A failure in any
// process is every process's: the first in input order, with the process that met it.
Result<std::vector<analysis::TraceAnalysis>> ReadShare(const AnalyzeArgs& args, const analysis::AnalyzeOptions& options,
                                                       analysis::JobExchange* x) {
  if (x == nullptr) return AnalyzeInputs("analyze", args.traces, options);
  Result<std::vector<analysis::TraceAnalysis>> mine = [&]() -> Result<std::vector<analysis::TraceAnalysis>> {
    EMO_ASSIGN_OR_RETURN(std::vector<trace::TraceSource> sources, trace::ExpandTraceInputs(args.traces));
    std::vector<trace::TraceSource> share;
    for (size_t i : x->Mine(sources.size())) share.push_back(std::move(sources[i]));
    analysis::AnalyzeOptions job_options = options;  // the ranks of one job, even when this process reads one
    job_options.overhead.fit_collective_waits = false;
    return AnalyzeSources("analyze", std::move(share), job_options);
  }();
  const std::vector<std::string> errors = x->AllGather(
      mine.ok() ? "" : nlohmann::json{static_cast<int>(mine.status().code()), mine.status().message()}.dump());
  for (size_t q = 0; q < errors.size(); ++q) {
    if (errors[q].empty()) continue;
    const auto e = nlohmann::json::parse(errors[q]);
    return Status(static_cast<StatusCode>(e[0].get<int>()),
                  fmt::format("{} (in MPI process {})", e[1].get<std::string>(), q));
  }
  return mine;
}

int RunAnalyze(const AnalyzeArgs& args) {
  analysis::AnalyzeOptions options;
  options.iteration_regex = args.iteration;
  auto overhead = ToOverheadOptions(args.overhead);
  if (!overhead.ok()) return Fail("analyze", overhead.status());
  options.overhead = std::move(overhead).value();
  options.slack_threshold_ns = static_cast<TimeNs>(args.slack_threshold_us * 1e3);
  std::unique_ptr<analysis::JobExchange> mpi;
  if (args.mpi) {
    if (!args.perfetto.empty()) {
      return FailUsage("analyze", InvalidArgument("--perfetto needs every trace in one process: not with --mpi"));
    }
    std::string why;
    mpi = StartMpi(&why);
    if (mpi == nullptr) return FailUsage("analyze", InvalidArgument(why));
  }
  analysis::JobExchange* x = mpi.get();
  // With --mpi, only the first process reports; all of them take part to the end.
  const bool reports = x == nullptr || x->process() == 0;
  auto read = ReadShare(args, options, x);
  if (!read.ok()) return reports ? Fail("analyze", read.status()) : 1;
  std::vector<analysis::TraceAnalysis> all = std::move(read).value();
  std::vector<analysis::RankInput> mine;
  for (const auto& a : all) mine.push_back(analysis::RankInputOf(a));
  const std::vector<analysis::RankInput> inputs = analysis::GatherInOrder(
      x, std::move(mine), analysis::RankInputToJson, [](nlohmann::json j) { return analysis::RankInputFromJson(j); });
  auto job = JobOf(inputs);
  if (!job.ok()) return reports ? FailUsage("analyze", job.status()) : 2;
  nlohmann::json joint;
  if (*job) joint = analysis::JointReplayJson(**job, analysis::RanksOf(all), x);
  std::vector<TraceReport> local;
  for (const auto& a : all) local.push_back(ReportOf(a, args.hta_path));
  std::vector<TraceReport> traces = analysis::GatherInOrder(x, std::move(local), ReportToJson, ReportFromJson);
  if (!reports) return 0;
  const bool json_to_stdout = args.json == "-";
  if (!json_to_stdout) {
    for (const auto& t : traces) fmt::print("{}", t.summary);
    if (*job) PrintJob(**job, joint);
    for (const auto& t : traces) fmt::print("{}", t.hta);
  }
  std::vector<analysis::TraceJsonPart> parts;
  for (auto& t : traces) parts.push_back(std::move(t.part));
  nlohmann::json out = analysis::CombineTraceJsons(std::move(parts));
  if (inputs.size() >= 2) out["job"] = *job ? analysis::JobToJson(**job) : nlohmann::json(nullptr);
  if (*job) out["job"]["joint_replay"] = std::move(joint);
  // Both outputs are attempted, the JSON first: one failing never costs the other.
  int rc = 0;
  Status st = WriteJson(args.json, out);
  if (!st.ok()) rc = Fail("analyze", st);
  if (!args.perfetto.empty()) {
    report::PerfettoOptions perfetto;
    perfetto.near_critical_slack_ns = options.slack_threshold_ns;
    st = report::WritePerfetto(all, args.perfetto, perfetto);
    if (!st.ok()) {
      rc = Fail("analyze", st);
    } else if (!json_to_stdout) {
      fmt::print("wrote {} (open in https://ui.perfetto.dev)\n", args.perfetto);
    }
  }
  return rc;
}

}  // namespace

void SetupAnalyze(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<AnalyzeArgs>();
  CLI::App* cmd = app.add_subcommand(
      "analyze",
      "Build the dependency graph of a trace, replay it, and report iteration time, replay error,\n"
      "the critical path and per-GPU slack. TRACE: PyTorch-profiler (Kineto) JSON, .json or .json.gz;\n"
      "one file per rank.");
  cmd->add_option("traces", args->traces,
                  "Trace files; a folder or a tar archive (.tar, .tar.gz, .tgz) stands for the traces in it")
      ->required()
      ->check(CLI::ExistingPath);
  AddIterationFlag(cmd, args->iteration);
  AddOverheadFlags(cmd, args->overhead);
  cmd->add_option("--json", args->json, "Write the JSON result to FILE ('-' = stdout)");
  cmd->add_option("--perfetto", args->perfetto,
                  "Write a Perfetto-loadable trace (one process per rank and device) on the analysis timeline:\n"
                  "CPU operators, API calls, iterations, GPU ops with slack, critical-path flows, slack counters");
  cmd->add_option("--slack-threshold-us", args->slack_threshold_us,
                  "A GPU slack window needs every running op to have more slack than this (us)")
      ->check(NonNegative());
  RefuseTwoOnStdout(cmd, {"--json", "--perfetto"});
  cmd->add_flag("--hta-critical-path", args->hta_path,
                "Also report the critical path under Holistic Trace Analysis' edge weights (CPU gaps between\n"
                "operators weigh 0, blocking calls 0), to compare with HTA; EMO's own path is wall time");
  cmd->add_flag("--mpi", args->mpi,
                "Run as one of the processes of `mpirun -np N emo analyze --mpi TRACES...`: each reads and\n"
                "analyses its share of the traces (trace i goes to process i mod N) and the joint replay\n"
                "exchanges only the collectives' arrival times; the first process prints and writes the result,\n"
                "the same as one process's. For jobs whose traces lie on several machines (give each the same\n"
                "paths); not with --perfetto");
  cmd->callback([args, &exit_code] { exit_code = RunAnalyze(*args); });
}

}  // namespace emo::cli
