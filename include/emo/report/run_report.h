// What `emo trace` and `emo monitor` print and write about a run: per traced process, the
// iterations the tracer found, the untraced and traced step times, and each GPU's energy per
// iteration from its NVML counter with the uncertainty the counter's granularity leaves.
#pragma once

#include <string>

#include <nlohmann/json_fwd.hpp>

#include "emo/trace/trace.h"

namespace emo::report {

// The JSON object of one traced process's file (`path`), from trace.meta.run and its tables.
nlohmann::json RunToJson(const std::string& path, const trace::Trace& t);

// The text block of one traced process, as `emo trace` / `emo monitor` print it.
std::string RunText(const std::string& path, const trace::Trace& t);

}  // namespace emo::report
