// The table of emo's commands and the driver that runs one (cli_app.h).
#include "cli_app.h"

#include "cli_util.h"
#include "commands.h"
#include "emo/report/run_report.h"
#include "emo/runtime/launch.h"
#include "emo/trace/reader.h"
#include "progress.h"

namespace emo::cli {
namespace {

constexpr CommandSpec kCommands[] = {
    {"analyze", SetupAnalyze},
    {"whatif", SetupWhatif},
    {"calibrate-overhead", SetupCalibrateOverhead},
    {"devices", SetupDevices},
    {"model", SetupModel},
    {"optimize", SetupOptimize},
    {"report", SetupReport},
    {"pipeline", SetupPipeline},
    {"trace", SetupTrace},
    {"monitor", SetupMonitor},
    {"run", SetupRun},
};

}  // namespace

int RunEmo(const std::vector<std::string>& args) {
  CLI::App app{
      "EMO: finds the slack in a GPU workload's trace and plans per-pack SM clocks that cut\n"
      "energy within a latency target. Run `emo <command> --help` for each command."};
  app.name("emo");
  app.require_subcommand(1);
  app.set_version_flag("--version", "emo 0.1.0");
  // Every option shows its default in --help (subcommands copy these option defaults); flags
  // whose default is a sentinel clear it and say the default in their text.
  app.option_defaults()->always_capture_default();
  // --quiet anywhere on the line (commands pass options they do not know to here).
  SetQuiet(false);
  app.add_flag_callback("-q,--quiet", [] { SetQuiet(true); },
                        "No progress on stderr (it is shown only when stderr is a terminal)");
  app.fallthrough();
  int exit_code = 0;
  for (const auto& command : kCommands) command.setup(app, exit_code);
  std::vector<std::string> words{"emo"};
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  return RunCommandLine(app, static_cast<int>(words.size()), argv.data(), exit_code);
}

Result<std::string> TraceSummaryJson(const std::string& path) {
  auto t = trace::ReadTrace(path);
  if (!t.ok()) return t.status();
  return report::RunToJson(path, *t).dump();
}

Result<std::string> TracerLibrary() { return runtime::FindInjectionLibrary(); }

}  // namespace emo::cli
