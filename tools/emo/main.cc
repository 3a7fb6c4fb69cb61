// emo: energy-minimal clocks for GPU AI workloads. Thin CLI: each subcommand parses its flags
// and calls one library entry point (see cmd_*.cc).
#include "cli_util.h"
#include "commands.h"

namespace {

constexpr emo::cli::CommandSpec kCommands[] = {
    {"analyze", emo::cli::SetupAnalyze},
    {"whatif", emo::cli::SetupWhatif},
    {"calibrate-overhead", emo::cli::SetupCalibrateOverhead},
    {"devices", emo::cli::SetupDevices},
    {"model", emo::cli::SetupModel},
    {"optimize", emo::cli::SetupOptimize},
    {"pipeline", emo::cli::SetupPipeline},
    {"trace", emo::cli::SetupTrace},
    {"monitor", emo::cli::SetupMonitor},
    {"run", emo::cli::SetupRun},
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "EMO: finds the slack in a GPU workload's trace and plans per-pack SM clocks that cut\n"
      "energy within a latency target. Run `emo <command> --help` for each command."};
  app.name("emo");
  app.require_subcommand(1);
  app.set_version_flag("--version", "emo 0.1.0");
  // Every option shows its default in --help (subcommands copy these option defaults); flags
  // whose default is a sentinel clear it and say the default in their text.
  app.option_defaults()->always_capture_default();
  int exit_code = 0;
  for (const auto& command : kCommands) command.setup(app, exit_code);
  return emo::cli::RunCommandLine(app, argc, argv, exit_code);
}
