// Parse -> graph -> slack throughput on real traces (BRIEF target: >= 1 M trace events/s on
// one core). Counter "events/s" = raw traceEvents entries of the file per second of
// (read + gunzip + parse + graph + replay + slack). Run: build/release/bench/pipeline_bench
#include <benchmark/benchmark.h>

#include <filesystem>
#include <string>

#include "emo/analysis/analyze.h"
#include "emo/base/file.h"
#include "emo/trace/reader.h"

namespace {

std::string Shared(const char* rel) { return std::string(EMO_SHARED_DIR) + "/" + rel; }

// The file under ../shared, or "" after marking the benchmark skipped.
std::string SharedOrSkip(benchmark::State& state, const char* rel) {
  std::string path = Shared(rel);
  if (std::filesystem::exists(path)) return path;
  state.SkipWithError("../shared is missing");
  return {};
}

// Events per second of CPU time, from the events one iteration handles.
void SetRate(benchmark::State& state, const char* name, double per_iteration) {
  state.counters[name] = benchmark::Counter(per_iteration * static_cast<double>(state.iterations()),
                                            benchmark::Counter::kIsRate);
}

void BM_AnalyzeTrace(benchmark::State& state, const char* rel) {
  const std::string path = SharedOrSkip(state, rel);
  if (path.empty()) return;
  int64_t events = 0;
  for (auto _ : state) {
    auto a = emo::analysis::AnalyzeTrace(path, {});
    if (!a.ok()) {
      state.SkipWithError(a.status().ToString().c_str());
      return;
    }
    events = a->trace->meta.raw_events;
    benchmark::DoNotOptimize(a->slack.slack.data());
  }
  state.counters["events"] = static_cast<double>(events);
  SetRate(state, "events/s", static_cast<double>(events));
}

// Parsing only (the file already decompressed in memory is not measured separately: the
// whole read path is what a user waits for).
void BM_ReadTrace(benchmark::State& state, const char* rel) {
  const std::string path = SharedOrSkip(state, rel);
  if (path.empty()) return;
  int64_t events = 0;
  for (auto _ : state) {
    auto t = emo::trace::ReadTrace(path);
    if (!t.ok()) {
      state.SkipWithError(t.status().ToString().c_str());
      return;
    }
    events = t->meta.raw_events;
  }
  SetRate(state, "events/s", static_cast<double>(events));
}

// Decompression alone (zlib), the floor under every .json.gz number above.
void BM_Gunzip(benchmark::State& state, const char* rel) {
  const std::string path = SharedOrSkip(state, rel);
  if (path.empty()) return;
  size_t bytes = 0;
  for (auto _ : state) {
    auto data = emo::ReadFileMaybeGzip(path);
    bytes = data->size();
    benchmark::DoNotOptimize(data->data());
  }
  SetRate(state, "MB/s", static_cast<double>(bytes) * 1e-6);
}

BENCHMARK_CAPTURE(BM_Gunzip, pp_gpt_rank0, "traces/h200/pp_gpt_rank0.json.gz")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_AnalyzeTrace, pp_gpt_rank0, "traces/h200/pp_gpt_rank0.json.gz")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_AnalyzeTrace, legacy_rank3_of8, "traces/hta/legacy_async_cpu_to_gpu_rank3_of8_a100.json.gz")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_AnalyzeTrace, cudagraph_rank0_of16, "traces/hta/multistream_cudagraph_rank0_of16_a100.json.gz")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_AnalyzeTrace, gpt_train, "traces/h200/gpt_train.json.gz")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_ReadTrace, pp_gpt_rank0, "traces/h200/pp_gpt_rank0.json.gz")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_ReadTrace, legacy_rank3_of8, "traces/hta/legacy_async_cpu_to_gpu_rank3_of8_a100.json.gz")->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
