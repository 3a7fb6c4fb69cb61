// The `emo optimize --report` page: one self-contained HTML file (inline SVG and CSS; no script,
// nothing fetched) drawn from the plan's JSON, so that `emo report` redraws a saved one.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "emo/base/status.h"
#include "emo/opt/trace_plan.h"

namespace emo::report {

// What the page draws beyond PlanToJson's fields (it goes under "report" in that object): per
// GPU, the steady iteration's ops on the plan's timeline (start and duration relative to the
// iteration's first pack, the pack, whether on the critical path, slack, kernel class), the packs
// with their planned clocks, the pack graph's time-energy frontier, and the device model's GPU
// busy energy per kernel class at the default clock and at the plan's clocks (predicted).
nlohmann::json ReportData(const opt::PlannedTrace& p);

// The page for the plans of one `emo optimize` (PlanToJson objects, each with its "report"),
// and the job's object when they are the ranks of one job (null otherwise). Fails, naming the
// trace, when a plan has no "report" object.
Result<std::string> ReportHtml(const std::vector<nlohmann::json>& plans, const nlohmann::json& job);

// The same from what `emo optimize --report F --json J` wrote to J: one plan object, or
// {"traces": [...], "job": {...}}.
Result<std::string> ReportHtmlFromOptimizeJson(const nlohmann::json& out);

}  // namespace emo::report
