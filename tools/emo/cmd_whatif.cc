// emo whatif: replay a trace with GPU op durations scaled by name.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "commands.h"
#include "emo/analysis/analyze.h"
#include "emo/base/text.h"

namespace emo::cli {
namespace {

struct WhatifArgs {
  std::vector<std::string> traces;
  std::vector<std::string> scales;
  std::string iteration;
  OverheadFlags overhead;
  std::string json;
};

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
  nlohmann::json out = nlohmann::json::array();
  for (const auto& path : args.traces) {
    fmt::print(stderr, "emo whatif: reading {} ...\n", path);
    auto a = analysis::AnalyzeTrace(path, options);
    if (!a.ok()) return Fail("whatif", a.status());
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
      "Replay a trace with changed GPU op durations and report the new iteration time.\n"
      "Example: emo whatif trace.json.gz --scale 'gemm|nvjet=1.1' --scale 'elementwise=2'");
  cmd->add_option("traces", args->traces, "Trace files")->required()->check(CLI::ExistingFile);
  cmd->add_option("--scale", args->scales,
                  "REGEX=FACTOR: multiply the duration of GPU ops whose name matches REGEX\n"
                  "(ECMAScript, searched, not anchored); FACTOR >= 0; repeatable")
      ->required()
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
  AddIterationFlag(cmd, args->iteration);
  AddOverheadFlags(cmd, args->overhead);
  cmd->add_option("--json", args->json, "Write the JSON result to FILE ('-' = stdout)");
  cmd->callback([args, &exit_code] { exit_code = RunWhatif(*args); });
}

}  // namespace emo::cli
