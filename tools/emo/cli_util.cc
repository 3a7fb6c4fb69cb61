#include "cli_util.h"

#include <fmt/format.h>

#include "emo/base/file.h"

namespace emo::cli {

int Fail(const char* command, const Status& status) {
  fmt::print(stderr, "emo {}: {}\n", command, status.ToString());
  return 1;
}

Status WriteJson(const std::string& path, const nlohmann::json& j) {
  if (path.empty()) return Status::Ok();
  return WriteFile(path, j.dump(2) + "\n");
}

void AddOverheadFlags(CLI::App* cmd, OverheadFlags& flags) {
  cmd->add_option("--correct-overhead", flags.mode,
                  "auto: undo the PyTorch profiler's own CPU overhead (default for PyTorch-profiler\n"
                  "traces; GPU durations are kept); off: use the traced timeline as it is")
      ->check(CLI::IsMember({"auto", "off"}));
  cmd->add_option("--step-time", flags.step_time_ms,
                  "Measured step time of the same loop without the profiler (ms): fits the CPU scale\n"
                  "of this trace to it (the accurate path)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--step-times", flags.step_times,
                  "File of measured unprofiled step times, one `TRACE MS` line per trace (TRACE: the path\n"
                  "as given or its file name): each listed trace's CPU scale is fitted to its time")
      ->check(CLI::ExistingFile);
  cmd->add_option("--overhead-calibration", flags.calibration,
                  "Calibration file written by `emo calibrate-overhead --json` (default: the shipped\n"
                  "H200 / PyTorch 2.11 calibration)")
      ->check(CLI::ExistingFile);
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

}  // namespace emo::cli
