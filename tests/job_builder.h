// One rank of a hand-built two-rank job, for the job's analysis and planning tests.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "emo/analysis/analyze.h"
#include "trace_builder.h"

namespace emo::testing {

// `iterations` iterations of `period_us`; each launches a compute kernel of `compute_us` and an
// all-reduce behind it on the same stream, and waits for both (cudaStreamSynchronize). Both
// ranks' all-reduces end together, `transfer_us` after the slower rank's compute (`slowest_us`):
// the faster rank's all-reduce spins until then. Analysed without the overhead correction.
inline analysis::TraceAnalysis JobRank(int64_t rank, double compute_us, double slowest_us, double period_us = 1000,
                                       int iterations = 4, double transfer_us = 50, const char* kernel = "gemm") {
  TraceBuilder b;
  int64_t corr = 1;
  for (int k = 0; k < iterations; ++k) {
    const double t0 = period_us * k;
    b.Annotation(("ProfilerStep#" + std::to_string(k)).c_str(), t0, t0 + period_us);
    b.Api("cudaLaunchKernel", t0 + 10, t0 + 15, corr);
    b.Kernel(kernel, 7, t0 + 20, t0 + 20 + compute_us, corr++);
    b.Api("cudaLaunchKernel", t0 + 16, t0 + 19, corr);
    b.Kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)", 7, t0 + 20 + compute_us,
             t0 + 20 + slowest_us + transfer_us, corr++);
    b.Api("cudaStreamSynchronize", t0 + 21, t0 + 20 + slowest_us + transfer_us + 2);
  }
  trace::Trace t = b.Build();
  t.meta.source_path = "rank" + std::to_string(rank);
  t.meta.rank = rank;
  t.meta.world_size = 2;
  analysis::AnalyzeOptions options;
  options.overhead.mode = analysis::OverheadOptions::Mode::kOff;
  auto a = analysis::AnalyzeTrace(std::move(t), options);
  EXPECT_TRUE(a.ok()) << a.status().ToString();
  return std::move(a).value();
}

}  // namespace emo::testing
