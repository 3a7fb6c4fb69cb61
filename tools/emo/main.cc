// emo: energy-minimal clocks for GPU AI workloads. Thin CLI: each subcommand parses its flags
// and calls one library entry point (see cmd_*.cc; the command table is in cli_app.cc).
#include <string>
#include <vector>

#include "cli_app.h"

int main(int argc, char** argv) { return emo::cli::RunEmo(std::vector<std::string>(argv + 1, argv + argc)); }
