#include "cli_util.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <locale>
#include <map>
#include <mutex>
#include <optional>
#include <regex>
#include <string_view>
#include <thread>

#include <fmt/format.h>

#include "emo/analysis/iterations.h"
#include "emo/base/file.h"
#include "emo/base/regex.h"
#include "emo/trace/reader.h"
#include "emo/model/device.h"
#include "progress.h"

namespace emo::cli {

namespace {

// The first sentence of a command's description, on one line: up to the first '.', ':' or ';'
// outside parentheses that ends a word.
std::string FirstSentence(const std::string& s) {
  std::string out;
  int depth = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    depth += c == '(' ? 1 : c == ')' ? -1 : 0;
    const bool ends_word = i + 1 == s.size() || s[i + 1] == ' ' || s[i + 1] == '\n';
    if (depth == 0 && ends_word && (c == '.' || c == ':' || c == ';')) break;
    out += c == '\n' ? ' ' : c;
  }
  return out;
}

// "  analyze              Build the dependency graph of ..." per command of `group`.
std::string CommandList(CLI::App& group) {
  std::string out;
  for (const CLI::App* sub : group.get_subcommands({})) {
    out += fmt::format("  {:<20} {}\n", sub->get_name(), FirstSentence(sub->get_description()));
  }
  return out;
}

// Parses all of `text` as a finite double; false on anything else ("", "1x", "nan", "inf").
bool ParseFinite(const std::string& text, double& out) {
  if (text.empty()) return false;
  char* end = nullptr;
  errno = 0;
  out = std::strtod(text.c_str(), &end);
  return end == text.c_str() + text.size() && errno == 0 && std::isfinite(out);
}

// A validator of finite numbers satisfying `ok`; `what` says which ("> 0", "in [0, 1]") both in
// --help and in the error.
CLI::Validator FiniteWhere(std::function<bool(double)> ok, const std::string& name, const std::string& what) {
  return CLI::Validator(
      [ok = std::move(ok), what](std::string& input) -> std::string {
        double v = 0;
        if (!ParseFinite(input, v)) return fmt::format("'{}' is not a finite number (expected {})", input, what);
        if (!ok(v)) return fmt::format("{} is out of bounds: expected {}", input, what);
        return {};
      },
      name);
}

// A required option's or a list's captured default ("0", "[]") says nothing: hide it.
void HideEmptyDefaults(CLI::App& app) {
  for (CLI::Option* opt : app.get_options()) {
    if (opt->get_required() || opt->get_default_str() == "[]") opt->default_str("");
  }
  for (CLI::App* sub : app.get_subcommands({})) HideEmptyDefaults(*sub);
}

}  // namespace

int RunCommandLine(CLI::App& app, int argc, char** argv, const int& exit_code) {
  HideEmptyDefaults(app);
  // Find the command before CLI11 parses: a group of commands (the app, `model`) takes no
  // option values, so its first argument that is not an option names one of its commands.
  CLI::App* group = &app;
  std::string path = app.get_name(), parent_path;
  int i = 1;
  for (; i < argc; ++i) {
    const std::string word = argv[i];
    if (word.starts_with("-") || group->get_subcommands({}).empty()) break;
    CLI::App* found = nullptr;
    for (CLI::App* sub : group->get_subcommands({})) {
      if (sub->get_name() == word) found = sub;
    }
    if (found == nullptr) {
      fmt::print(stderr, "{}: unknown command '{}'\nCommands:\n{}Run `{} <command> --help` for a command's flags.\n", path,
                 word, CommandList(*group), path);
      return kExitUsage;
    }
    group = found;
    parent_path = path;
    path += " " + word;
  }
  if (i == argc && !group->get_subcommands({}).empty()) {
    // `emo` or `emo model` alone: the usage with the list of commands.
    fmt::print("{}", group->help(parent_path));
    return 0;
  }
  app.failure_message([path](const CLI::App*, const CLI::Error& e) {
    return fmt::format("{}: {}\nRun `{} --help` for its flags and their defaults.\n", path, e.what(), path);
  });
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : kExitUsage;
  }
  return exit_code;
}

CLI::Validator Positive() {
  return FiniteWhere([](double v) { return v > 0; }, "POSITIVE", "a number > 0");
}

CLI::Validator NonNegative() {
  return FiniteWhere([](double v) { return v >= 0; }, "NONNEGATIVE", "a number >= 0");
}

CLI::Validator InRange(double lo, double hi) {
  const std::string range = fmt::format("[{:g}, {:g}]", lo, hi);
  return FiniteWhere([lo, hi](double v) { return v >= lo && v <= hi; }, "in " + range, "a number in " + range);
}

CLI::Validator InRangeOr(double lo, double hi, const std::string& word) {
  const std::string range = fmt::format("[{:g}, {:g}]", lo, hi);
  const CLI::Validator number =
      FiniteWhere([lo, hi](double v) { return v >= lo && v <= hi; }, "", "a number in " + range + " or " + word);
  return CLI::Validator([number, word](std::string& input) { return input == word ? std::string() : number(input); },
                        "in " + range + " or " + word);
}

CLI::Validator Fraction() {
  return FiniteWhere([](double v) { return v >= 0 && v <= 1; }, "in [0, 1]", "a fraction in [0, 1] (0.02 = 2 %)");
}

CLI::Validator AtLeast(int64_t lo) {
  const std::string what = fmt::format("an integer >= {}", lo);
  return CLI::Validator(
      [lo, what](std::string& input) -> std::string {
        char* end = nullptr;
        errno = 0;
        const long long v = std::strtoll(input.c_str(), &end, 10);
        if (input.empty() || end != input.c_str() + input.size() || errno != 0) {
          return fmt::format("'{}' is not an integer (expected {})", input, what);
        }
        if (v < lo) return fmt::format("{} is out of bounds: expected {}", input, what);
        return {};
      },
      lo == 1 ? std::string("POSITIVE") : fmt::format("at least {}", lo));
}

void AddUsageCheck(CLI::App* cmd, std::function<void()> check) {
  // CLI11 keeps one parse-complete callback per command: it runs this command's list.
  static auto* checks = new std::map<CLI::App*, std::vector<std::function<void()>>>();
  auto& list = (*checks)[cmd];
  if (list.empty()) {
    cmd->parse_complete_callback([cmd] {
      for (const auto& c : checks->at(cmd)) c();
    });
  }
  list.push_back(std::move(check));
}

void RefuseTwoOnStdout(CLI::App* cmd, std::vector<std::string> outputs) {
  AddUsageCheck(cmd, [cmd, outputs = std::move(outputs)] {
    std::vector<std::string> to_stdout;
    for (const auto& name : outputs) {
      const CLI::Option* opt = cmd->get_option(name);
      if (opt->count() > 0 && opt->as<std::string>() == "-") to_stdout.push_back(name + " -");
    }
    if (to_stdout.size() > 1) {
      throw CLI::ValidationError(fmt::format("{} and {} would both write to stdout: send one to a file", to_stdout[0],
                                             to_stdout[1]));
    }
  });
}

int Fail(const char* command, const Status& status) {
  if (ProgressShown()) fmt::print(stderr, "\r\x1b[K");  // off the progress line, if one is drawn
  fmt::print(stderr, "emo {}: {}\n", command, status.ToString());
  return 1;
}

int FailUsage(const char* command, const Status& status) {
  Fail(command, status);
  return 2;
}

Result<std::vector<analysis::TraceAnalysis>> AnalyzeInputs(const char* command, const std::vector<std::string>& inputs,
                                                           const analysis::AnalyzeOptions& options) {
  EMO_ASSIGN_OR_RETURN(std::vector<trace::TraceSource> sources, trace::ExpandTraceInputs(inputs));
  return AnalyzeSources(command, std::move(sources), options);
}

Result<std::vector<analysis::TraceAnalysis>> AnalyzeSources(const char* command, std::vector<trace::TraceSource> sources,
                                                            analysis::AnalyzeOptions options) {
  // Several traces may be the ranks of one job, whose collectives the joint replay times.
  if (sources.size() > 1) options.overhead.fit_collective_waits = false;
  std::vector<std::optional<Result<analysis::TraceAnalysis>>> done(sources.size());
  std::atomic<size_t> next{0};
  std::atomic<size_t> finished{0};
  Progress progress;
  progress.Say(sources.size() == 1 ? fmt::format("emo {}: reading {}", command, sources[0].name)
                                   : fmt::format("emo {}: reading {} traces", command, sources.size()));
  auto work = [&] {
    for (size_t i = next++; i < sources.size(); i = next++) {
      const std::string name = sources[i].name;
      done[i].emplace(analysis::AnalyzeTrace(std::move(sources[i]), options));
      if (sources.size() > 1) {
        progress.Say(fmt::format("emo {}: read {} of {} traces (last: {})", command, ++finished, sources.size(), name));
      }
    }
  };
  const size_t threads = std::min<size_t>({sources.size(), 8, std::max(1u, std::thread::hardware_concurrency())});
  // libstdc++ fills std::ctype<char>'s narrow() cache lazily, one character at a time, and every
  // std::regex compile goes through it: filled here, before the threads, it is only read (GCC
  // bug 77704; ThreadSanitizer reports the lazy writes).
  const auto& ctype = std::use_facet<std::ctype<char>>(std::locale());
  for (int c = 0; c < 256; ++c) (void)ctype.narrow(static_cast<char>(c), '\0');
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  std::vector<analysis::TraceAnalysis> out;
  for (auto& d : done) {
    if (!d->ok()) return d->status();
    out.push_back(std::move(*d).value());
  }
  return out;
}

Status WriteJson(const std::string& path, const nlohmann::json& j) {
  if (path.empty()) return Status::Ok();
  return WriteFile(path, j.dump(2) + "\n");
}

void AddOverheadFlags(CLI::App* cmd, OverheadFlags& flags) {
  cmd->add_option("--correct-overhead", flags.mode,
                  "auto: undo the PyTorch profiler's own CPU overhead (on for PyTorch-profiler traces; GPU\n"
                  "durations are kept); off: use the traced timeline as it is")
      ->check(CLI::IsMember({"auto", "off"}));
  CLI::Option* step_time =
      cmd->add_option("--step-time", flags.step_time_ms,
                      "Measured step time of the same loop without the profiler (ms): fits the CPU scale of\n"
                      "each trace to it (the accurate path; default: none, the calibration estimates it)")
          ->check(Positive())
          ->default_str("");
  CLI::Option* step_times =
      cmd->add_option("--step-times", flags.step_times,
                      "File of measured unprofiled step times, one `TRACE MS` line per trace (TRACE: the path\n"
                      "as given or its file name): each listed trace's CPU scale is fitted to its time\n"
                      "(default: none)")
          ->check(CLI::ExistingFile);
  step_time->excludes(step_times);
  cmd->add_option("--overhead-calibration", flags.calibration,
                  "Calibration file written by `emo calibrate-overhead --out` (or --json) (default: the shipped\n"
                  "H200 / PyTorch 2.11 calibration)")
      ->check(CLI::ExistingFile);
  AddUsageCheck(cmd, [cmd, &flags] {
    if (flags.mode != "off") return;
    for (const char* ignored : {"--step-time", "--step-times", "--overhead-calibration"}) {
      if (cmd->count(ignored) > 0) {
        throw CLI::ValidationError(fmt::format(
            "--correct-overhead off keeps the traced timeline, so {} would be ignored: give one of the two", ignored));
      }
    }
  });
}

Result<analysis::OverheadOptions> ToOverheadOptions(const OverheadFlags& flags) {
  analysis::OverheadOptions o;
  if (!flags.step_times.empty()) {
    EMO_ASSIGN_OR_RETURN(o.step_times_ns, analysis::LoadStepTimes(flags.step_times));
  }
  o.mode = flags.mode == "off" ? analysis::OverheadOptions::Mode::kOff : analysis::OverheadOptions::Mode::kAuto;
  o.step_time_ns = flags.step_time_ms > 0 ? static_cast<TimeNs>(flags.step_time_ms * 1e6) : -1;
  if (!flags.calibration.empty()) {
    EMO_ASSIGN_OR_RETURN(o.calibration, analysis::LoadOverheadCalibration(flags.calibration));
  }
  return o;
}

void AddDevicesDirFlag(CLI::App* cmd, std::string& dir) {
  cmd->add_option("--devices-dir", dir,
                  "Folder of device model files (default: $EMO_DEVICES_DIR, else the source tree's devices/)")
      ->default_str(model::DefaultDevicesDir());
}

void AddIterationFlag(CLI::App* cmd, std::string& regex) {
  cmd->add_option("--iteration", regex,
                  "ECMAScript regex searched in CPU annotation names; each top-level match is one iteration")
      ->default_str(analysis::kDefaultIterationRegex)
      ->check(ValidRegex());
}

CLI::Validator ValidRegex() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        std::string why;
        if (!CompileRegex(text, std::regex::ECMAScript, &why)) {
          return fmt::format("'{}' is not a valid ECMAScript regex ({})", text, why);
        }
        return {};
      },
      "");
}

}  // namespace emo::cli
