// The `emo` subcommands: one Setup function per file (cmd_<name>.cc), one table in main.cc.
// A Setup function adds its subcommand to `app`; its callback runs one library entry point
// and stores the process exit code in `exit_code` (0 ok, 1 failure, 2 usage error).
#pragma once

#include <CLI/CLI.hpp>

namespace emo::cli {

using SetupFn = void (*)(CLI::App& app, int& exit_code);

struct CommandSpec {
  const char* name;
  SetupFn setup;
};

void SetupAnalyze(CLI::App& app, int& exit_code);
void SetupWhatif(CLI::App& app, int& exit_code);
void SetupCalibrateOverhead(CLI::App& app, int& exit_code);
void SetupDevices(CLI::App& app, int& exit_code);
void SetupModel(CLI::App& app, int& exit_code);
void SetupPipeline(CLI::App& app, int& exit_code);
void SetupOptimize(CLI::App& app, int& exit_code);
void SetupTrace(CLI::App& app, int& exit_code);
void SetupMonitor(CLI::App& app, int& exit_code);
void SetupRun(CLI::App& app, int& exit_code);
void SetupReport(CLI::App& app, int& exit_code);

}  // namespace emo::cli
