// emo whatif: replay a trace with GPU op durations scaled by name; or the ranks of a job, jointly,
// with a rank made slower.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "commands.h"
#include "emo/analysis/analyze.h"
#include "emo/analysis/job.h"
#include "emo/analysis/joint_replay.h"
#include "emo/base/text.h"

namespace emo::cli {
namespace {

struct WhatifArgs {
  std::vector<std::string> traces;
  std::vector<std::string> scales;
  std::vector<std::string> slow_ranks;
  std::string iteration;
  OverheadFlags overhead;
  std::string json;
};

// --slow-rank: the traces are the ranks of one job, replayed jointly.
int RunJobWhatif(const WhatifArgs& args, const std::vector<analysis::ScaleRule>& rules,
                 const analysis::AnalyzeOptions& options) {
  std::vector<analysis::SlowRank> slow;
  for (const auto& s : args.slow_ranks) {
    auto r = analysis::ParseSlowRank(s);
    if (!r.ok()) return FailUsage("whatif", r.status());
    slow.push_back(*r);
  }
  auto read = AnalyzeInputs("whatif", args.traces, options);
  if (!read.ok()) return Fail("whatif", read.status());
  std::vector<analysis::TraceAnalysis> all = std::move(read).value();
  if (all.size() < 2) {
    return FailUsage("whatif", InvalidArgument("--slow-rank needs the traces of every rank of the job (two or more)"));
  }
  const std::vector<const analysis::TraceAnalysis*> ranks = analysis::RanksOf(all);
  auto job = analysis::AnalyzeJob(ranks);
  if (!job.ok()) return FailUsage("whatif", job.status());
  auto w = analysis::RunJobWhatIf(*job, ranks, rules, slow);
  if (!w.ok()) return Fail("whatif", w.status());
  auto change = [](TimeNs base, TimeNs changed) {
    return 100.0 * (static_cast<double>(changed) / static_cast<double>(std::max<TimeNs>(1, base)) - 1.0);
  };
  nlohmann::json rj = nlohmann::json::array();
  for (const auto& k : w->ranks) {
    rj.push_back({{"rank", k.rank},
                  {"baseline_us", NsToUs(k.baseline_ns)},
                  {"whatif_us", NsToUs(k.whatif_ns)},
                  {"change_pct", change(k.baseline_ns, k.whatif_ns)},
                  {"alone_whatif_us", NsToUs(k.alone_ns)}});
  }
  nlohmann::json sj = nlohmann::json::array();
  for (const auto& s : slow) sj.push_back({{"rank", s.rank}, {"factor", s.factor}});
  const double job_change = change(w->job_baseline_ns, w->job_whatif_ns);
  nlohmann::json out = {
      {"about", "the ranks replayed jointly on their analysis timelines (a collective's transfer starts when its last "
                "member arrives); steady iteration per rank, the job's is the slowest rank's; alone_whatif_us: the "
                "rank's own graph replayed alone with the same durations (collective kernels keep their measured "
                "waits)"},
      {"slow_ranks", sj},
      {"job", {{"baseline_us", NsToUs(w->job_baseline_ns)}, {"whatif_us", NsToUs(w->job_whatif_ns)}, {"change_pct", job_change}}},
      {"ranks", rj},
      {"converged", w->converged},
      {"collectives_matched", job->collectives.size()}};
  if (args.json != "-") {
    fmt::print("job of {} ranks, {} collectives matched; steady iteration of the slowest rank: {:.1f} us -> {:.1f} us "
               "({:+.2f} %){}\n",
               all.size(), job->collectives.size(), NsToUs(w->job_baseline_ns), NsToUs(w->job_whatif_ns), job_change,
               w->converged ? "" : " (the joint replay did NOT converge: the matching contradicts itself)");
    for (const auto& k : w->ranks) {
      fmt::print("  rank {:<4} {:>10.1f} us -> {:>10.1f} us ({:+.2f} %); replayed alone: {:.1f} us\n", k.rank,
                 NsToUs(k.baseline_ns), NsToUs(k.whatif_ns), change(k.baseline_ns, k.whatif_ns), NsToUs(k.alone_ns));
    }
  }
  Status st = WriteJson(args.json, out);
  if (!st.ok()) return Fail("whatif", st);
  return 0;
}

int RunWhatif(const WhatifArgs& args) {
  std::vector<analysis::ScaleRule> rules;
  for (const auto& s : args.scales) {
    auto r = analysis::ParseScaleRule(s);
    if (!r.ok()) return Fail("whatif", r.status());
    rules.push_back(*r);
  }
  analysis::AnalyzeOptions options;
  options.iteration_regex = args.iteration;
  auto overhead = ToOverheadOptions(args.overhead);
  if (!overhead.ok()) return Fail("whatif", overhead.status());
  options.overhead = std::move(overhead).value();
  if (!args.slow_ranks.empty()) return RunJobWhatif(args, rules, options);
  if (rules.empty()) {
    return FailUsage("whatif", InvalidArgument("give --scale REGEX=FACTOR, --slow-rank RANK=FACTOR, or both"));
  }
  auto read = AnalyzeInputs("whatif", args.traces, options);
  if (!read.ok()) return Fail("whatif", read.status());
  nlohmann::json out = nlohmann::json::array();
  for (const auto& item : *read) {
    const analysis::TraceAnalysis* a = &item;
    const std::string& path = a->trace->meta.source_path;
    auto w = analysis::RunWhatIf(*a, rules);
    if (!w.ok()) return Fail("whatif", w.status());
    const double change = w->change_pct;
    const auto conf = analysis::ConfidenceOf(*a);
    nlohmann::json j;
    j["trace"] = path;
    j["timeline"] = a->corrected() ? "corrected" : "traced";
    j["iteration_time_us"] = {{"baseline", NsToUs(w->baseline_ns)}, {"whatif", NsToUs(w->whatif_ns)}};
    j["change_pct"] = change;
    j["change_range_pct"] = {w->change_range_pct[0], w->change_range_pct[1]};
    j["confidence"] = conf.level;
    j["confidence_note"] = conf.note;
    nlohmann::json rj = nlohmann::json::array();
    for (size_t i = 0; i < rules.size(); ++i) {
      rj.push_back({{"regex", rules[i].regex}, {"factor", rules[i].factor}, {"matched_gpu_ops", w->matched[i]}});
    }
    j["rules"] = rj;
    if (args.json != "-") {
      fmt::print("{}\n  steady iteration {}: baseline {:.1f} us -> what-if {:.1f} us ({:+.2f} %)\n", path,
                 a->iterations.iterations[a->steady].name, NsToUs(w->baseline_ns), NsToUs(w->whatif_ns), change);
      if (conf.level == "low") {
        fmt::print("  timeline confidence low ({}): over its range the change is {:+.2f} to {:+.2f} %\n", conf.note,
                   w->change_range_pct[0], w->change_range_pct[1]);
      }
      for (size_t i = 0; i < rules.size(); ++i) {
        fmt::print("  {} x{}: {} matched\n", rules[i].regex, rules[i].factor, Plural(w->matched[i], "GPU op"));
        if (w->matched[i] == 0) fmt::print(stderr, "emo whatif: warning: '{}' matched no GPU op\n", rules[i].regex);
      }
    }
    out.push_back(std::move(j));
  }
  Status st = WriteJson(args.json, out.size() == 1 ? out[0] : nlohmann::json{{"traces", out}});
  if (!st.ok()) return Fail("whatif", st);
  return 0;
}

}  // namespace

void SetupWhatif(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<WhatifArgs>();
  CLI::App* cmd = app.add_subcommand(
      "whatif",
      "Replay a trace with changed GPU op durations and report the new iteration time; or, with\n"
      "--slow-rank, the ranks of one job replayed jointly with one rank made slower.\n"
      "Example: emo whatif trace.json.gz --scale 'gemm|nvjet=1.1' --scale 'elementwise=2'\n"
      "         emo whatif rank0.json.gz rank1.json.gz --slow-rank 1=1.2");
  cmd->add_option("traces", args->traces,
                  "Trace files; a folder or a tar archive (.tar, .tar.gz, .tgz) stands for the traces in it")
      ->required()
      ->check(CLI::ExistingPath);
  cmd->add_option("--scale", args->scales,
                  "REGEX=FACTOR: multiply the duration of GPU ops whose name matches REGEX\n"
                  "(ECMAScript, searched, not anchored); FACTOR >= 0; repeatable")
      ->type_name("REGEX=FACTOR")
      ->check(CLI::Validator(
          [](std::string& rule) {
            auto r = analysis::ParseScaleRule(rule);
            if (!r.ok()) {
              std::string why = r.status().message();  // "--scale 'x': ..."; CLI11 names the flag
              return why.starts_with("--scale ") ? why.substr(8) : why;
            }
            std::string regex = r->regex;
            return ValidRegex()(regex);
          },
          ""));
  cmd->add_option("--slow-rank", args->slow_ranks,
                  "RANK=FACTOR: the traces are the ranks of one job; every GPU op of RANK but its collective\n"
                  "kernels takes FACTOR times as long (a straggler), and the ranks are replayed jointly: a\n"
                  "collective's transfer starts when its last member arrives; repeatable")
      ->type_name("RANK=FACTOR");
  AddIterationFlag(cmd, args->iteration);
  AddOverheadFlags(cmd, args->overhead);
  cmd->add_option("--json", args->json, "Write the JSON result to FILE ('-' = stdout)");
  cmd->callback([args, &exit_code] { exit_code = RunWhatif(*args); });
}

}  // namespace emo::cli
