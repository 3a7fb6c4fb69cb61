// Small helpers shared by subcommands: error printing and JSON output.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "emo/base/status.h"

namespace emo::cli {

// Prints "emo <command>: <status>" to stderr and returns exit code 1.
int Fail(const char* command, const Status& status);

// Writes `j` (indented) to `path` ("-" = stdout); "" writes nothing.
Status WriteJson(const std::string& path, const nlohmann::json& j);

}  // namespace emo::cli
