// Small helpers shared by subcommands: error printing and JSON output.
#pragma once

#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "emo/analysis/analyze.h"
#include "emo/base/status.h"

namespace emo::cli {

// Prints "emo <command>: <status>" to stderr and returns exit code 1.
int Fail(const char* command, const Status& status);

// Writes `j` (indented) to `path` ("-" = stdout); "" writes nothing.
Status WriteJson(const std::string& path, const nlohmann::json& j);

// Profiler-overhead flags shared by analyze, whatif and optimize:
// --correct-overhead auto|off, --step-time MS, --step-times FILE, --overhead-calibration FILE.
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

}  // namespace emo::cli
