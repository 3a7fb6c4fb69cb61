#include "emo/opt/pipeline.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "emo/base/file.h"
#include "emo/base/text.h"

namespace emo::opt {

namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> SplitCsv(std::string_view line) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    const size_t comma = line.find(',', start);
    out.push_back(Trim(line.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start)));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

bool ParseDouble(std::string_view s, double& v) {
  const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

// Python's float floor division (CPython float_divmod), which Perseus' `real_time //
// unit_time` uses: 0.054 // 0.001 is 53.0 there, and matching it keeps the quantised DAG the
// same as the one behind the published frontier.
double PythonFloorDiv(double a, double b) {
  double mod = std::fmod(a, b);
  double div = (a - mod) / b;
  if (mod != 0.0 && ((b < 0) != (mod < 0))) div -= 1.0;
  if (div == 0.0) return std::copysign(0.0, a / b);
  double floordiv = std::floor(div);
  if (div - floordiv > 0.5) floordiv += 1.0;
  return floordiv;
}

}  // namespace

Result<PipelineProfile> ParsePipelineProfile(std::string_view csv, std::string_view name) {
  size_t pos = 0;
  int line_no = 0;
  auto next_line = [&](std::string_view& line) {
    if (pos >= csv.size()) return false;
    size_t end = csv.find('\n', pos);
    if (end == std::string_view::npos) end = csv.size();
    line = csv.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    return true;
  };
  std::string_view line;
  if (!next_line(line)) return ParseError(fmt::format("{}: empty file", name));
  const auto header = SplitCsv(line);
  int col[5] = {-1, -1, -1, -1, -1};
  const char* names[5] = {"stage", "instruction", "frequency", "time", "energy"};
  for (size_t c = 0; c < header.size(); ++c) {
    for (int k = 0; k < 5; ++k) {
      if (header[c] == names[k]) col[k] = static_cast<int>(c);
    }
  }
  for (int k = 0; k < 5; ++k) {
    if (col[k] < 0) {
      return ParseError(fmt::format(
          "{}: line 1: no '{}' column (a stage profile has columns stage,instruction,frequency,time,energy)",
          name, names[k]));
    }
  }
  // (stage, is_forward) → clock → option; a repeated (stage, instruction, clock) is an error.
  std::map<std::pair<int32_t, bool>, std::map<int32_t, Option>> table;
  int32_t max_clock = 0;
  while (next_line(line)) {
    if (Trim(line).empty()) continue;
    const auto f = SplitCsv(line);
    if (f.size() < header.size()) {
      return ParseError(fmt::format("{}: line {}: {}, expected {}", name, line_no, Plural(f.size(), "field"), header.size()));
    }
    double stage, freq, time_s, energy;
    if (!ParseDouble(f[col[0]], stage) || !ParseDouble(f[col[2]], freq) ||
        !ParseDouble(f[col[3]], time_s) || !ParseDouble(f[col[4]], energy)) {
      return ParseError(fmt::format("{}: line {}: a number could not be read in '{}'", name, line_no, line));
    }
    const std::string_view inst = f[col[1]];
    if (inst != "forward" && inst != "backward") {
      return ParseError(fmt::format("{}: line {}: instruction '{}' is neither forward nor backward", name,
                                    line_no, inst));
    }
    if (stage < 0 || stage != std::floor(stage) || stage > 1e6 || freq <= 0 || time_s < 0 || energy < 0 ||
        !std::isfinite(time_s) || !std::isfinite(energy)) {
      return ParseError(fmt::format("{}: line {}: out-of-range value in '{}'", name, line_no, line));
    }
    const int32_t clock = static_cast<int32_t>(std::lround(freq));
    Option o;
    o.duration_ns = std::llround(time_s * 1e9);
    o.energy_j = energy;
    o.knob = clock;
    auto& by_clock = table[{static_cast<int32_t>(stage), inst == "forward"}];
    if (!by_clock.emplace(clock, o).second) {
      return ParseError(fmt::format("{}: line {}: stage {} {} at {} MHz appears twice", name, line_no,
                                    static_cast<int>(stage), inst, clock));
    }
    max_clock = std::max(max_clock, clock);
  }
  if (table.empty()) return ParseError(fmt::format("{}: no data rows", name));
  const int32_t stages = table.rbegin()->first.first + 1;
  PipelineProfile profile;
  profile.max_clock_mhz = max_clock;
  profile.forward.resize(stages);
  profile.backward.resize(stages);
  for (int32_t s = 0; s < stages; ++s) {
    for (bool fwd : {true, false}) {
      auto it = table.find({s, fwd});
      if (it == table.end()) {
        return ParseError(fmt::format("{}: stage {} has no {} rows (stages 0..{} are needed)", name, s,
                                      fwd ? "forward" : "backward", stages - 1));
      }
      auto& dst = fwd ? profile.forward[s] : profile.backward[s];
      for (auto r = it->second.rbegin(); r != it->second.rend(); ++r) dst.push_back(r->second);
    }
  }
  return profile;
}

Result<PipelineProfile> ReadPipelineProfile(const std::string& path) {
  EMO_ASSIGN_OR_RETURN(std::string text, ReadFileMaybeGzip(path));
  return ParsePipelineProfile(text, path);
}

std::vector<PipelineInstruction> StageOrder(const PipelineSpec& spec, int32_t stage) {
  const int32_t s_count = spec.stages, m_count = spec.microbatches;
  std::vector<PipelineInstruction> out;
  out.reserve(2 * static_cast<size_t>(m_count));
  if (spec.schedule == PipelineSchedule::kGPipe) {
    for (int32_t m = 0; m < m_count; ++m) out.push_back({stage, m, true});
    for (int32_t m = m_count - 1; m >= 0; --m) out.push_back({stage, m, false});
    return out;
  }
  const int32_t warmup = std::min(s_count - stage - 1, m_count);
  int32_t f = 0, b = 0;
  for (; f < warmup; ++f) out.push_back({stage, f, true});
  while (f < m_count) {
    out.push_back({stage, f++, true});
    out.push_back({stage, b++, false});
  }
  while (b < m_count) out.push_back({stage, b++, false});
  return out;
}

Result<PipelineProblem> BuildPipelineProblem(const PipelineProfile& profile, const PipelineSpec& spec) {
  if (spec.stages <= 0 || spec.microbatches <= 0) {
    return InvalidArgument("--stages and --microbatches must be positive");
  }
  if (spec.stages != profile.num_stages()) {
    return InvalidArgument(fmt::format("the profile has {} but --stages is {}",
                                       Plural(static_cast<uint64_t>(profile.num_stages()), "stage"), spec.stages));
  }
  if (spec.idle_power_w < 0) return InvalidArgument("the idle power must be >= 0 W");
  if (spec.time_unit_ns < 0) return InvalidArgument("the time unit must be >= 0");
  auto options_of = [&](int32_t stage, bool fwd) {
    std::vector<Option> opts = fwd ? profile.forward[stage] : profile.backward[stage];
    if (spec.time_unit_ns > 0) {
      const double unit_s = NsToS(spec.time_unit_ns);
      for (Option& o : opts) {
        const double q = PythonFloorDiv(NsToS(o.duration_ns), unit_s);
        o.duration_ns = static_cast<TimeNs>(q) * spec.time_unit_ns;
      }
    }
    return opts;
  };
  PipelineProblem out;
  Problem& p = out.problem;
  p.set_num_gpus(spec.stages);
  p.set_idle_power_w(spec.idle_power_w);
  const size_t m_count = static_cast<size_t>(spec.microbatches);
  // node_of[stage][fwd?0:1][microbatch]
  std::vector<std::vector<NodeIndex>> fwd_node(spec.stages, std::vector<NodeIndex>(m_count));
  std::vector<std::vector<NodeIndex>> bwd_node(spec.stages, std::vector<NodeIndex>(m_count));
  for (int32_t s = 0; s < spec.stages; ++s) {
    const std::vector<Option> f_opts = options_of(s, true), b_opts = options_of(s, false);
    NodeIndex prev = 0;
    bool first = true;
    for (const PipelineInstruction& ins : StageOrder(spec, s)) {
      const NodeIndex v = p.AddNode(ins.forward ? f_opts : b_opts, s);
      out.instructions.push_back(ins);
      (ins.forward ? fwd_node : bwd_node)[s][static_cast<size_t>(ins.microbatch)] = v;
      if (!first) p.AddEdge(prev, v);
      prev = v;
      first = false;
    }
  }
  for (int32_t s = 0; s + 1 < spec.stages; ++s) {
    for (size_t m = 0; m < m_count; ++m) {
      p.AddEdge(fwd_node[s][m], fwd_node[s + 1][m]);
      p.AddEdge(bwd_node[s + 1][m], bwd_node[s][m]);
    }
  }
  EMO_RETURN_IF_ERROR(p.Validate());
  return out;
}

Result<PipelinePlan> PlanPipeline(const PipelineProblem& pipeline, const PipelinePlanOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  if (!(options.max_slowdown >= 0 && options.max_slowdown <= 1)) {
    return InvalidArgument("--max-slowdown must be a fraction in [0, 1] (0.02 = 2 %)");
  }
  if (!(options.time_limit_s > 0)) return InvalidArgument("the time limit must be > 0 s");
  const Problem& p = pipeline.problem;
  PipelinePlan plan;
  plan.baseline = Evaluate(p, MaxKnobPlan(p));
  EMO_ASSIGN_OR_RETURN(auto solver, MakeSolver(options.solver));
  plan.solver = std::string(solver->name());
  plan.target_ns = static_cast<TimeNs>(
      std::floor(static_cast<double>(plan.baseline.makespan_ns) * (1.0 + options.max_slowdown)));
  FrontierOptions fo;
  fo.step_ns = options.frontier_step_ns;
  fo.max_points = options.max_points;
  fo.keep_plans = true;
  fo.time_limit_s = options.time_limit_s;
  fo.progress = options.progress;
  fo.extra_deadlines.push_back(plan.target_ns);  // the target is a frontier deadline too
  EMO_ASSIGN_OR_RETURN(plan.frontier, solver->SolveFrontier(p, fo));
  if (plan.frontier.points.empty()) return Internal("the solver returned an empty frontier");
  plan.fastest = plan.frontier.points.front();
  plan.fastest_saving_pct = 100.0 * (1.0 - plan.fastest.energy_j / plan.baseline.energy_j);
  // The cheapest frontier plan within the target (the frontier is Pareto: the slowest one).
  plan.target.outcome = Outcome::kInfeasible;
  for (FrontierPoint& pt : plan.frontier.points) {
    if (pt.makespan_ns > plan.target_ns) break;
    plan.target.plan = pt.plan;
    plan.target.makespan_ns = pt.makespan_ns;
    plan.target.energy_j = pt.energy_j;
    plan.target.lower_bound_j = pt.lower_bound_j;  // a bound at the plan's own makespan
    plan.target.has_bound = pt.has_bound;
    plan.target.outcome = pt.has_bound && pt.energy_j - pt.lower_bound_j <= 1e-9 * std::abs(pt.energy_j)
                              ? Outcome::kOptimal
                              : Outcome::kFeasible;
  }
  if (!options.keep_plans) {
    for (FrontierPoint& pt : plan.frontier.points) pt.plan = Plan();
    plan.fastest.plan = Plan();
  }
  if (plan.target.has_plan()) {
    plan.target_saving_pct = 100.0 * (1.0 - plan.target.energy_j / plan.baseline.energy_j);
  }
  plan.solve_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return plan;
}

}  // namespace emo::opt
