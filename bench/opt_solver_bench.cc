// Solver speed and quality on synthetic DAGs shaped like EMO's pack graphs: 8 GPUs, each a
// chain of packs, a CPU launch thread per GPU (fixed-duration CPU nodes, some longer than the
// pack they launch, which is where slack comes from), and a collective barrier across all
// GPUs every 16 packs. Each pack has 8 clock options from a t(f) = t_mem + t_comp·f_max/f,
// P(f) = P_idle + c·f·V(f)² model with ±1% noise (so some clocks are dominated).
//
//   build/opt/bench/opt_solver_bench                       # all
//   build/opt/bench/opt_solver_bench --benchmark_filter=Fast
// Counters: energy_j, bound_gap_pct (vs the solver's own relaxation bound: an upper bound on
// its optimality gap), cuts (min cuts); gap_vs_exact_pct where CBC also runs.
#include <benchmark/benchmark.h>

#include <cmath>
#include <random>

#include "emo/opt/problem.h"
#include "emo/opt/solver.h"

namespace emo::opt {
namespace {

constexpr int kGpus = 8;
constexpr double kIdleW = 100.0;

Problem SyntheticPackGraph(int total_nodes, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  Problem p;
  p.set_num_gpus(kGpus);
  p.set_idle_power_w(kIdleW);
  const int packs_per_gpu = std::max(1, total_nodes / (2 * kGpus));
  const double clocks[] = {1980, 1830, 1680, 1530, 1380, 1230, 1080, 930};
  std::vector<std::vector<NodeIndex>> pack(kGpus), cpu(kGpus);
  for (int g = 0; g < kGpus; ++g) {
    for (int i = 0; i < packs_per_gpu; ++i) {
      const double t_total = 20e3 + 480e3 * u(rng);  // 20–500 µs at the top clock
      const double mem_share = 0.1 + 0.8 * u(rng);
      const double c_dyn = 250.0 + 200.0 * u(rng);  // dynamic W at the top clock
      std::vector<Option> opts;
      for (double f : clocks) {
        const double t = t_total * (mem_share + (1 - mem_share) * 1980.0 / f);
        const double v = f > 1400 ? 0.7 + 0.3 * (f - 1400) / 580 : 0.7;
        const double watts = kIdleW + c_dyn * (f / 1980.0) * (v * v) * (mem_share * 0.5 + (1 - mem_share));
        const double noise = 1.0 + 0.01 * (2 * u(rng) - 1);
        opts.push_back({static_cast<TimeNs>(t), watts * t * 1e-9 * noise, static_cast<int32_t>(f)});
      }
      pack[g].push_back(p.AddNode(opts, g));
      const Option cpu_opt[] = {{static_cast<TimeNs>(t_total * (0.2 + 1.0 * u(rng))), 0.0, 0}};
      cpu[g].push_back(p.AddNode(cpu_opt, kNoGpu));
      p.AddEdge(cpu[g].back(), pack[g].back(), 5000);  // launch latency
      if (i > 0) {
        p.AddEdge(pack[g][i - 1], pack[g][i]);
        p.AddEdge(cpu[g][i - 1], cpu[g][i]);
      }
    }
  }
  for (int i = 15; i + 1 < packs_per_gpu; i += 16) {
    for (int g = 0; g < kGpus; ++g) {
      for (int h = 0; h < kGpus; ++h) p.AddEdge(pack[g][i], pack[h][i + 1]);
    }
  }
  return p;
}

void BM_FastSolve(benchmark::State& state) {
  Problem p = SyntheticPackGraph(static_cast<int>(state.range(0)), 7);
  if (!p.Validate().ok()) state.SkipWithError("invalid synthetic graph");
  const Evaluation base = Evaluate(p, MaxKnobPlan(p));
  SolveOptions so;
  so.deadline_ns = static_cast<TimeNs>(static_cast<double>(base.makespan_ns) * 1.02);
  auto solver = MakeSolver(SolverKind::kFast);
  Solution last;
  for (auto _ : state) {
    auto r = (*solver)->Solve(p, so);
    if (!r.ok()) state.SkipWithError(r.status().ToString().c_str());
    last = std::move(r).value();
  }
  state.counters["nodes"] = p.num_nodes();
  state.counters["saving_pct"] = 100.0 * (1.0 - last.energy_j / base.energy_j);
  state.counters["bound_gap_pct"] = last.gap_pct();
}
BENCHMARK(BM_FastSolve)->Arg(1000)->Arg(10000)->Arg(100000)->Unit(benchmark::kMillisecond)->Iterations(1);

void BM_FastFrontier(benchmark::State& state) {
  Problem p = SyntheticPackGraph(static_cast<int>(state.range(0)), 7);
  if (!p.Validate().ok()) state.SkipWithError("invalid synthetic graph");
  FrontierOptions fo;
  fo.max_points = 100;
  auto solver = MakeSolver(SolverKind::kFast);
  Frontier last;
  for (auto _ : state) {
    auto r = (*solver)->SolveFrontier(p, fo);
    if (!r.ok()) state.SkipWithError(r.status().ToString().c_str());
    last = std::move(r).value();
  }
  double worst = -1.0;  // -1: no point has a bound (water-filling)
  for (const auto& pt : last.points) {
    if (pt.has_bound) worst = std::max(worst, 100.0 * (pt.energy_j - pt.lower_bound_j) / pt.lower_bound_j);
  }
  state.counters["points"] = static_cast<double>(last.points.size());
  state.counters["cuts"] = static_cast<double>(last.iterations);
  state.counters["worst_bound_gap_pct"] = worst;
}
BENCHMARK(BM_FastFrontier)->Arg(1000)->Arg(10000)->Unit(benchmark::kMillisecond)->Iterations(1);

void BM_GapVsExact(benchmark::State& state) {
  if (!HaveExactSolver()) {
    state.SkipWithError("built without CBC");
    return;
  }
  Problem p = SyntheticPackGraph(static_cast<int>(state.range(0)), 11);
  if (!p.Validate().ok()) state.SkipWithError("invalid synthetic graph");
  const Evaluation base = Evaluate(p, MaxKnobPlan(p));
  SolveOptions so;
  so.deadline_ns = static_cast<TimeNs>(static_cast<double>(base.makespan_ns) * 1.02);
  so.time_limit_s = 60.0;
  Solution fast, exact;
  for (auto _ : state) {
    exact = std::move((*MakeSolver(SolverKind::kExact))->Solve(p, so)).value();
  }
  fast = std::move((*MakeSolver(SolverKind::kFast))->Solve(p, so)).value();
  state.counters["nodes"] = p.num_nodes();
  state.counters["exact_optimal"] = exact.outcome == Outcome::kOptimal ? 1 : 0;
  state.counters["gap_vs_exact_pct"] = 100.0 * (fast.energy_j - exact.energy_j) / exact.energy_j;
  state.counters["exact_bound_gap_pct"] = exact.gap_pct();
  state.counters["fast_ms"] = fast.solve_ms;
}
BENCHMARK(BM_GapVsExact)->Arg(200)->Arg(1000)->Unit(benchmark::kMillisecond)->Iterations(1);

// The large-graph mode (water-filling) against the exact descent and its lower bound, on
// graphs small enough for both.
void BM_WaterFillVsDescent(benchmark::State& state) {
  Problem p = SyntheticPackGraph(static_cast<int>(state.range(0)), 7);
  if (!p.Validate().ok()) state.SkipWithError("invalid synthetic graph");
  const Evaluation base = Evaluate(p, MaxKnobPlan(p));
  SolveOptions so;
  so.deadline_ns = static_cast<TimeNs>(static_cast<double>(base.makespan_ns) * 1.02);
  auto solver = std::move(MakeSolver(SolverKind::kFast)).value();
  Solution descent = std::move(solver->Solve(p, so)).value();
  so.descent_max_size = 0;
  Solution fill;
  for (auto _ : state) fill = std::move(solver->Solve(p, so)).value();
  state.counters["nodes"] = p.num_nodes();
  state.counters["fill_vs_descent_pct"] = 100.0 * (fill.energy_j - descent.energy_j) / descent.energy_j;
  state.counters["fill_vs_bound_pct"] = 100.0 * (fill.energy_j - descent.lower_bound_j) / descent.lower_bound_j;
  state.counters["descent_ms"] = descent.solve_ms;
}
BENCHMARK(BM_WaterFillVsDescent)->Arg(500)->Arg(1000)->Arg(2000)->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace
}  // namespace emo::opt

BENCHMARK_MAIN();
