// What the detach gate adds to each clock read of the tracer's callbacks (CuptiNow,
// src/runtime/clock_reference.cc: a count in and out around cuptiGetTimestamp, two sequentially
// consistent read-modify-writes on one counter every thread shares) against cuptiGetTimestamp
// alone, on one thread and on several at once (the counter's cache line then moves between
// cores). CUPTI's clock answers without a GPU, so this runs on the build machine.
//
//   build/ci/bench/cupti_clock_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <cupti.h>

#include "runtime/clock_reference.h"

namespace emo::runtime {
namespace {

void BM_CuptiGetTimestamp(benchmark::State& state) {
  uint64_t t = 0;
  for (auto _ : state) {
    if (cuptiGetTimestamp(&t) != CUPTI_SUCCESS) {
      state.SkipWithError("cuptiGetTimestamp failed");
      break;
    }
    benchmark::DoNotOptimize(t);
  }
}

void BM_CuptiNow(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(CuptiNow());
}

BENCHMARK(BM_CuptiGetTimestamp)->ThreadRange(1, 8)->UseRealTime();
BENCHMARK(BM_CuptiNow)->ThreadRange(1, 8)->UseRealTime();

}  // namespace
}  // namespace emo::runtime

BENCHMARK_MAIN();
