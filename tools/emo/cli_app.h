// The emo command line as a function: what `emo ARGS...` does, callable in-process (main.cc,
// and the Python package's native module, python/module.cc).
#pragma once

#include <string>
#include <vector>

#include "emo/base/status.h"

namespace emo::cli {

// Runs `emo args...` (args[0] is the command, e.g. "analyze"; no program name) and returns its
// exit code: 0 ok, 1 failure, 2 usage error. Prints as the `emo` binary does.
int RunEmo(const std::vector<std::string>& args);

// What `emo trace --json` lists under "traces" for one file EMO's tracer wrote (the untraced step
// time, energy per iteration, the traced window: report::RunToJson), as JSON text. Python's
// emo.trace gives it for the block it traced.
Result<std::string> TraceSummaryJson(const std::string& path);

// EMO's tracer library (libemo_inject.so) where `emo trace` finds it.
Result<std::string> TracerLibrary();

}  // namespace emo::cli
