// The results of `emo optimize` as JSON, text and CSV: every plan with the baselines beside it,
// the model and device it rests on, how sure its timeline is (confidence, and the saving over
// the overhead correction's range), and the power limit.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "emo/opt/job_plan.h"
#include "emo/opt/trace_plan.h"

namespace emo::report {

// The `emo optimize` JSON object of one trace (the command-line contract's fields and more).
nlohmann::json PlanToJson(const opt::PlannedTrace& p);

// The table `emo optimize` prints for one trace, with its caveats.
std::string PlanText(const opt::PlannedTrace& p);

// The pack-graph frontiers of every plan, one row per point:
// `trace,rank,pack_graph_time_us,energy_j`.
std::string FrontierCsv(const std::vector<opt::PlannedTrace>& plans);

// `emo optimize`'s "job" object and its text line, for the ranks of one job (opt::PlanJob).
nlohmann::json JobPlanToJson(const opt::JobPlan& p, size_t collectives_matched);
std::string JobPlanText(const opt::JobPlan& p, size_t ranks, size_t collectives_matched);

}  // namespace emo::report
