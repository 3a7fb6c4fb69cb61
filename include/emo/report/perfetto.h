// Perfetto-loadable output (Chrome trace JSON): the trace back with critical-path flags,
// per-op slack and a slack counter track per GPU.
#pragma once

#include <string>

#include "emo/analysis/analyze.h"
#include "emo/base/status.h"

namespace emo::report {

// Writes `a` as a Chrome-trace JSON that ui.perfetto.dev loads: CPU API calls on their
// threads, GPU ops on "GPU <device>" / "stream <id>" tracks with args {slack_us, critical},
// critical-path nodes in category "critical", and a counter "slack_us" per GPU.
Status WritePerfetto(const analysis::TraceAnalysis& a, const std::string& path);

}  // namespace emo::report
