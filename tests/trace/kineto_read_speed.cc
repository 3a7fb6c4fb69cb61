// Measures the Kineto JSON reader: `kineto_read_speed TRACE [REPEATS]` prints the gunzip
// time, the best and median parse time over REPEATS runs (parsing alone: the decompressed
// bytes are in memory before the clock starts), traceEvents entries per second, and the
// time of one whole ReadTrace (read + gunzip + sniff + parse). Registered as a `bench` test.
// The first parse of a process pays for paging in the parser's buffers; later ones reuse them
// (one parser per thread), so "best" is the warm number and the first run the cold one.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "emo/base/file.h"
#include "emo/trace/reader.h"

namespace {

double MsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// CPU time of this thread: on a loaded machine it is steadier than wall time.
double ThreadCpuMs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s TRACE [REPEATS]\n", argv[0]);
    return 2;
  }
  const std::string path = argv[1];
  const int repeats = argc > 2 ? std::max(1, std::atoi(argv[2])) : 10;
  auto t0 = std::chrono::steady_clock::now();
  auto data = emo::ReadFileMaybeGzip(path);
  const double gunzip_ms = MsSince(t0);
  if (!data.ok()) {
    std::fprintf(stderr, "%s\n", data.status().ToString().c_str());
    return 1;
  }
  const emo::trace::Reader* kineto = nullptr;
  for (const auto& r : emo::trace::Readers()) {
    if (r->Name() == "kineto-json") kineto = r.get();
  }
  if (kineto == nullptr) return 1;

  std::vector<double> parse_ms, parse_cpu_ms;
  double first_ms = 0;
  int64_t events = 0;
  size_t rows = 0;
  for (int i = 0; i < repeats; ++i) {
    std::string copy;
    copy.reserve(data->size() + 64);  // as gunzip leaves it: spare capacity for the padding
    copy.append(*data);
    t0 = std::chrono::steady_clock::now();
    const double c0 = ThreadCpuMs();
    auto trace = kineto->Read(path, std::move(copy));
    parse_cpu_ms.push_back(ThreadCpuMs() - c0);
    parse_ms.push_back(MsSince(t0));
    if (i == 0) first_ms = parse_ms.back();
    if (!trace.ok()) {
      std::fprintf(stderr, "%s\n", trace.status().ToString().c_str());
      return 1;
    }
    events = trace->meta.raw_events;
    rows = trace->cpu.size() + trace->gpu.size() + trace->syncs.size();
  }
  std::sort(parse_ms.begin(), parse_ms.end());
  std::sort(parse_cpu_ms.begin(), parse_cpu_ms.end());
  const double best = parse_ms.front();
  const double median = parse_ms[parse_ms.size() / 2];
  const double cpu_median = parse_cpu_ms[parse_cpu_ms.size() / 2];

  t0 = std::chrono::steady_clock::now();
  auto whole = emo::trace::ReadTrace(path);
  const double whole_ms = MsSince(t0);
  if (!whole.ok()) return 1;

  std::printf("%s: %.1f MB JSON, %lld traceEvents, %zu rows stored\n", path.c_str(),
              static_cast<double>(data->size()) / 1e6, static_cast<long long>(events), rows);
  std::printf(
      "gunzip+read %.1f ms; parse first (cold) %.2f ms, best %.2f ms, median %.2f ms over "
      "%d runs\n",
      gunzip_ms, first_ms, best, median, repeats);
  std::printf("parse speed: %.2f M events/s (best), %.2f M events/s (median), %.0f MB/s (best)\n",
              static_cast<double>(events) / best / 1e3, static_cast<double>(events) / median / 1e3,
              static_cast<double>(data->size()) / best / 1e3);
  std::printf("parse CPU time (thread): median %.2f ms = %.2f M events/s\n", cpu_median,
              static_cast<double>(events) / cpu_median / 1e3);
  std::printf("whole ReadTrace (read + gunzip + parse): %.1f ms = %.2f M events/s\n", whole_ms,
              static_cast<double>(events) / whole_ms / 1e3);
  return 0;
}
