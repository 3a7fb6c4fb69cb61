// The emo command line as a function: what `emo ARGS...` does, callable in-process (main.cc,
// and the Python package's native module, python/module.cc).
#pragma once

#include <string>
#include <vector>

namespace emo::cli {

// Runs `emo args...` (args[0] is the command, e.g. "analyze"; no program name) and returns its
// exit code: 0 ok, 1 failure, 2 usage error. Prints as the `emo` binary does.
int RunEmo(const std::vector<std::string>& args);

}  // namespace emo::cli
