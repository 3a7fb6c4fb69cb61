// Small helpers shared by subcommands: the command-line driver, readable numeric bounds, error
// printing and JSON output.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "emo/analysis/analyze.h"
#include "emo/base/status.h"

namespace emo::cli {

// Exit codes of every command (commands.h): 0 ok, 1 failure, 2 usage error.
inline constexpr int kExitUsage = 2;

// Parses `argv` against `app` (its subcommands added, nested one level as in `emo model fit`)
// and runs the chosen command; returns the exit code. An unknown command says so and lists the
// commands; a command group given alone (`emo`, `emo model`) prints its usage with the list.
// `exit_code` is where the command callbacks store theirs.
int RunCommandLine(CLI::App& app, int argc, char** argv, const int& exit_code);

// Numeric flag bounds whose help text and errors print readable limits (CLI11's own ranges
// print "0 to 1.797693e+308"). Each refuses NaN and infinities, and text that is not a number.
CLI::Validator Positive();                      // > 0
CLI::Validator NonNegative();                   // >= 0
CLI::Validator InRange(double lo, double hi);   // lo <= x <= hi
CLI::Validator AtLeast(int64_t lo);             // an integer >= lo
CLI::Validator Fraction();                      // a fraction in [0, 1] (0.02 = 2 %)
CLI::Validator InRangeOr(double lo, double hi, const std::string& word);  // lo <= x <= hi, or `word`

// Adds a check that runs once `cmd`'s flags are parsed, before the command does any work: it
// throws CLI::ValidationError to refuse a combination of flags as a usage error (CLI11's
// excludes() sees only whether a flag is present, not its value). Checks run in the order added.
void AddUsageCheck(CLI::App* cmd, std::function<void()> check);

// Refuses more than one of `outputs` (flags naming an output file) set to "-" (stdout): the two
// would be interleaved on stdout.
void RefuseTwoOnStdout(CLI::App* cmd, std::vector<std::string> outputs);

// Prints "emo <command>: <status>" to stderr and returns exit code 1.
int Fail(const char* command, const Status& status);
// The same for a usage error (arguments that cannot be carried out): returns 2.
int FailUsage(const char* command, const Status& status);

// Reads and analyses every trace behind `inputs` (files, folders of them, tar archives of them:
// trace::ExpandTraceInputs), on up to 8 threads, in the order given; says "emo COMMAND: reading
// NAME ..." on stderr for each. The first failure (in that order) is returned.
Result<std::vector<analysis::TraceAnalysis>> AnalyzeInputs(const char* command, const std::vector<std::string>& inputs,
                                                           const analysis::AnalyzeOptions& options);
// The same for sources already expanded. With more than one source the collectives are not fitted
// to a measured step (AnalyzeOptions fit_collective_waits: they may be the ranks of one job).
Result<std::vector<analysis::TraceAnalysis>> AnalyzeSources(const char* command, std::vector<trace::TraceSource> sources,
                                                            analysis::AnalyzeOptions options);

// Writes `j` (indented) to `path` ("-" = stdout); "" writes nothing.
Status WriteJson(const std::string& path, const nlohmann::json& j);

// Profiler-overhead flags shared by analyze, whatif and optimize:
// --correct-overhead auto|off, --step-time MS, --step-times FILE, --overhead-calibration FILE.
// --step-time and --step-times exclude each other, and `--correct-overhead off` refuses the
// three flags it would ignore (an AddUsageCheck).
struct OverheadFlags {
  std::string mode = "auto";
  double step_time_ms = -1;
  std::string step_times;
  std::string calibration;
};
void AddOverheadFlags(CLI::App* cmd, OverheadFlags& flags);
// Reads the --step-times and --overhead-calibration files once for every trace. Errors: an
// unreadable or malformed file (named, with the line where there is one).
Result<analysis::OverheadOptions> ToOverheadOptions(const OverheadFlags& flags);

// --devices-dir DIR, the folder device models are looked up in (default shown in --help).
void AddDevicesDirFlag(CLI::App* cmd, std::string& dir);

// The --iteration flag of the commands that read traces (default: analysis'
// kDefaultIterationRegex, shown in --help); a regex that does not compile is a usage error.
void AddIterationFlag(CLI::App* cmd, std::string& regex);

// A validator of ECMAScript regexes (the syntax EMO searches names with).
CLI::Validator ValidRegex();
}  // namespace emo::cli
