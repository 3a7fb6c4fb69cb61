// The EMO trace reader on files built record by record (emo_trace_test_writer.h): what becomes
// of each record, the untraced step time and energy, exact event waits, and files cut short.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <string>

#include <nlohmann/json.hpp>

#include "emo/analysis/analyze.h"
#include "emo/report/run_report.h"
#include "emo/trace/reader.h"
#include "emo_trace_test_writer.h"

namespace emo::testing {
namespace {

namespace ef = emo::trace::emo_format;

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kIteration = 100 * kMs;  // host time per iteration
constexpr int64_t kT0 = 1'000 * kMs;       // the first iteration starts here
constexpr uint32_t kTraced[] = {5, 6};
constexpr uint64_t kIterations = 14;

bool Traced(uint64_t i) { return i == kTraced[0] || i == kTraced[1]; }

// Fourteen 100 ms iterations of a two-stream loop (a kernel on stream 7, an event recorded after it,
// stream 9 waiting on the event, a kernel on stream 9); iterations 5 and 6 traced. The energy
// counter steps by 10 J every 100 ms (100 W) and is read every 50 ms; 50 W before the loop.
// `anchor_shift` > 0: from iteration 9 on the tracer followed an anchor call, whose
// iterations start that much later in the loop (a stretch of time between iterations 8 and 9
// belongs to none).
// `clocks`: NVML SM clock reads to add (ClockRecord).
// `first_energy_read`: when the monitor first read the counter (the counter's steps stay where
// they are; earlier reads are left out).
std::string TwoStreamLoop(bool compress = false, bool end = true, bool pretrace = false, int64_t anchor_shift = 0,
                          const std::map<std::string, std::string>& end_meta = {},
                          const std::vector<ef::ClockRecord>& clocks = {},
                          int64_t first_energy_read = kT0 - 100 * kMs) {
  EmoTraceWriter w;
  w.Meta({{"format", "emo-trace"}, {"host", "h200-box"}, {"pid", "4242"}, {"rank", "3"}, {"world_size", "8"},
          {"config.mode", "trace"}, {"iteration.source", "launch_period"}, {"clock.cupti_ns", "1000"},
          {"clock.realtime_ns", "5000"}, {"cupti.version", "130000"}});
  ef::GpuRecord gpu{};
  gpu.device = 0;
  gpu.name = w.Str("NVIDIA H200");
  w.Add(ef::RecordType::kGpu, gpu);
  for (int64_t t = kT0 - 400 * kMs; t < kT0; t += 20 * kMs) w.Add(ef::RecordType::kPower, ef::PowerRecord{t, 0, 50'000});
  for (int64_t t = first_energy_read; t <= kT0 + 15 * kIteration; t += 50 * kMs) {
    const int64_t steps = (t - (kT0 - 100 * kMs)) / (100 * kMs);
    w.Add(ef::RecordType::kEnergy, ef::EnergyRecord{t, static_cast<uint64_t>(1'000'000 + steps * 10'000), 0, 3000});
  }
  for (const auto& c : clocks) w.Add(ef::RecordType::kClock, c);
  w.Flush(compress);
  const uint32_t launch = w.Str("cudaLaunchKernel_v7000"), record = w.Str("cudaEventRecord_v3020"),
                 wait = w.Str("cudaStreamWaitEvent_v3020"), gemm = w.Str("gemm_kernel"), add = w.Str("add_kernel");
  for (uint64_t i = 0; i < kIterations; ++i) {
    const bool anchored = anchor_shift > 0 && i >= 9;
    const int64_t s = kT0 + static_cast<int64_t>(i) * kIteration + (anchored ? anchor_shift : 0);
    const auto source = anchored ? ef::IterationSource::kAnchor : ef::IterationSource::kLaunchPeriod;
    w.Add(ef::RecordType::kIteration,
          ef::IterationRecord{i, s, s + kIteration, static_cast<uint32_t>(source), Traced(i) ? 1u : 0u, 2, ef::kNoName});
    // The tracer records from the start until it finds the loop, and one lead-in iteration
    // before the window: here iteration 1 (pretrace) and 4 (lead-in).
    if (!Traced(i) && !(pretrace && (i == 1 || i == 4))) continue;
    const uint64_t c = 1000 + i * 10;
    const int64_t us = 1000;
    w.Add(ef::RecordType::kApi, ef::ApiRecord{s, s + 5 * us, c + 1, 10, 11, 211, launch, 0, 0});
    w.Add(ef::RecordType::kApi, ef::ApiRecord{s + 6 * us, s + 7 * us, c + 2, 10, 11, 25, record, 0, 0});
    w.Add(ef::RecordType::kApi, ef::ApiRecord{s + 8 * us, s + 9 * us, c + 3, 10, 11, 31, wait, 0, 0});
    w.Add(ef::RecordType::kApi, ef::ApiRecord{s + 10 * us, s + 15 * us, c + 4, 10, 11, 211, launch, 0, 0});
    ef::KernelRecord k{};
    k.start_ns = s + 20 * us;
    k.end_ns = s + 300 * us;
    k.correlation = c + 1;
    k.graph_id = k.graph_node_id = ef::kNone;
    k.stream = 7;
    k.name = gemm;
    k.grid[0] = 132;
    k.block[0] = 256;
    w.Add(ef::RecordType::kKernel, k);
    w.Add(ef::RecordType::kCudaEvent, ef::CudaEventRecord{c + 2, 77 + i, 0, 5, 1, 7, 0});
    w.Add(ef::RecordType::kSync, ef::SyncRecord{s + 8 * us, s + 9 * us, c + 3, 77 + i,
                                                 static_cast<uint32_t>(ef::SyncType::kStreamWaitEvent), 1, 9, 5, 0, 0});
    k.start_ns = s + 300 * us;
    k.end_ns = s + 500 * us;
    k.correlation = c + 4;
    k.stream = 9;
    k.name = add;
    w.Add(ef::RecordType::kKernel, k);
    w.Flush(compress);
  }
  w.Flush(compress);
  if (!end_meta.empty()) w.Meta(end_meta);
  if (end) w.End();
  return w.bytes();
}

std::string WriteTemp(const std::string& name, const std::string& bytes) {
  const auto path = (std::filesystem::temp_directory_path() / ("emo_test_" + std::to_string(getpid()) + "_" + name)).string();
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

TEST(EmoTraceReaderTest, RecordsBecomeTheNormalizedTrace) {
  for (bool compress : {false, true}) {
    SCOPED_TRACE(compress ? "zlib chunks" : "raw chunks");
    const auto path = WriteTemp("two_stream.emotrace", TwoStreamLoop(compress));
    auto t = trace::ReadTrace(path);
    ASSERT_TRUE(t.ok()) << t.status().message();
    EXPECT_EQ(t->meta.format, "emo");
    EXPECT_EQ(t->meta.rank, 3);
    EXPECT_EQ(t->meta.world_size, 8);
    ASSERT_EQ(t->meta.device_names.size(), 1u);
    EXPECT_EQ(t->meta.device_names[0], "NVIDIA H200");
    EXPECT_EQ(t->gpu.size(), 4u);
    EXPECT_EQ(t->Name(t->gpu.name[0]), "gemm_kernel");
    EXPECT_EQ(t->gpu.launch[0].grid[0], 132);
    size_t launches = 0, steps = 0;
    for (size_t i = 0; i < t->cpu.size(); ++i) {
      const auto name = t->Name(t->cpu.name[i]);
      launches += name == "cudaLaunchKernel" ? 1 : 0;  // CUPTI's "_v7000" dropped
      steps += name.starts_with("ProfilerStep#") ? 1 : 0;
    }
    EXPECT_EQ(launches, 4u);
    EXPECT_EQ(steps, 2u);
    ASSERT_EQ(t->syncs.size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
      EXPECT_EQ(t->syncs.kind[i], trace::SyncKind::kStreamWaitEvent);
      EXPECT_EQ(t->syncs.stream[i], 9);
      EXPECT_EQ(t->syncs.wait_on_stream[i], 7);  // resolved through cudaEventSyncId
      EXPECT_EQ(t->syncs.wait_on_record_corr[i], t->syncs.correlation[i] - 1);
    }
    EXPECT_EQ(t->diagnostics.Count(Diag::kTraceTruncated), 0u);
    std::filesystem::remove(path);
  }
}

TEST(EmoTraceReaderTest, OnlyTheWindowAndItsLeadInAreKept) {
  const auto path = WriteTemp("pretrace.emotrace", TwoStreamLoop(false, true, /*pretrace=*/true));
  auto t = trace::ReadTrace(path);
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->gpu.size(), 6u);  // iterations 4, 5, 6; not 1
  for (size_t i = 0; i < t->gpu.size(); ++i) EXPECT_GE(t->gpu.start[i], kT0 + 4 * kIteration);
  EXPECT_EQ(t->syncs.size(), 3u);
  size_t steps = 0;
  for (size_t i = 0; i < t->cpu.size(); ++i) steps += t->Name(t->cpu.name[i]).starts_with("ProfilerStep#") ? 1 : 0;
  EXPECT_EQ(steps, 2u);
  std::filesystem::remove(path);
}

TEST(EmoTraceReaderTest, UntracedStepTimeAndEnergyComeFromOutsideTheWindow) {
  const auto path = WriteTemp("measure.emotrace", TwoStreamLoop());
  auto t = trace::ReadTrace(path);
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_TRUE(t->meta.run.has_value());
  const auto& run = *t->meta.run;
  EXPECT_TRUE(run.complete);
  EXPECT_EQ(run.iteration_source, "launch_period");
  EXPECT_EQ(run.iterations, 14);
  EXPECT_EQ(run.traced_iterations, 2);
  // The tracer records until its window is done: only 8..13 ran untraced (7 pays for the
  // window's flush).
  EXPECT_EQ(run.untraced_iterations, 6);
  EXPECT_EQ(run.untraced_step_ns, kIteration);
  EXPECT_EQ(run.clock_realtime_offset_ns, 4000);
  ASSERT_EQ(run.gpus.size(), 1u);
  const auto& g = run.gpus[0];
  EXPECT_EQ(g.name, "NVIDIA H200");
  EXPECT_EQ(g.iterations, 6);  // 8..13
  EXPECT_EQ(g.window_start, kT0 + 8 * kIteration);
  EXPECT_NEAR(g.energy_per_iteration_j, 10.0, 1e-9);
  EXPECT_NEAR(g.busy_power_w, 100.0, 1e-9);
  EXPECT_EQ(g.counter_period_ns, 100 * kMs);
  EXPECT_NEAR(g.uncertainty_per_iteration_j, 2 * 100.0 * 0.1 / 6, 1e-9);
  EXPECT_NEAR(g.idle_power_w, 50.0, 1e-9);
  std::filesystem::remove(path);
}

// NVML's SM clock reads give each GPU the clock its traced iterations ran at and the clock of
// the energy window, with the share of reads the power limit held; another GPU's reads, reads
// outside both windows and zero clocks count for neither.
TEST(EmoTraceReaderTest, TheSmClockIsSummedOverTheTracedIterationsAndTheEnergyWindow) {
  std::vector<ef::ClockRecord> clocks;
  for (int64_t t = kT0 - 100 * kMs; t <= kT0 + 15 * kIteration; t += 50 * kMs) {
    const bool traced = t >= kT0 + kTraced[0] * kIteration && t <= kT0 + (kTraced[1] + 1) * kIteration;
    // Traced: 1500 MHz, the software power cap holding it on every other read, one read
    // without reasons. Elsewhere 1980 MHz, no reason, and 1830 MHz on three reads.
    const int64_t k = (t - kT0) / (50 * kMs);
    const uint64_t reasons = !traced ? 0 : k == 12 ? ef::kNone : k % 2 == 0 ? ef::kClockReasonSwPowerCap | 0x1 : 0x1;
    const uint32_t mhz = traced ? 1500 : (k == 20 || k == 21 || k == 22) ? 1830 : 1980;
    clocks.push_back({t, reasons, 0, mhz});
    clocks.push_back({t + 1, ef::kClockReasonHwPowerBrake, 1, 900});  // GPU 1: not this trace's
  }
  clocks.push_back({kT0 + 10 * kIteration + 1, 0, 0, 0});  // a failed read
  const auto path = WriteTemp("clocks.emotrace", TwoStreamLoop(false, true, false, 0, {}, clocks));
  auto t = trace::ReadTrace(path);
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_EQ(t->meta.run->gpus.size(), 1u);  // GPU 1's reads alone do not make it one of the trace's
  const auto& g = t->meta.run->gpus[0];
  // Traced: iterations 5 and 6, reads at 500, 550, ..., 700 ms: five, one without reasons.
  EXPECT_EQ(g.traced_clock.samples, 5);
  EXPECT_EQ(g.traced_clock.median_mhz, 1500);
  EXPECT_EQ(g.traced_clock.min_mhz, 1500);
  EXPECT_NEAR(g.traced_clock.power_capped_share, 2.0 / 4.0, 1e-12);  // reads 10 and 14 of 10, 11, 13, 14
  // The energy window: iterations 8..13, reads at 800, 850, ..., 1400 ms: thirteen.
  EXPECT_EQ(g.clock.samples, 13);
  EXPECT_EQ(g.clock.median_mhz, 1980);
  EXPECT_EQ(g.clock.min_mhz, 1830);
  EXPECT_EQ(g.clock.max_mhz, 1980);
  EXPECT_EQ(g.clock.power_capped_share, 0.0);
  // The run report says both.
  const auto text = report::RunText(path, *t);
  EXPECT_NE(text.find("GPU 0 SM clock   1500 MHz traced (median of 5 reads, 1500-1500), the power limit holding it 50 %"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("1980 MHz untraced (median of 13 reads, 1830-1980)"), std::string::npos) << text;
  std::filesystem::remove(path);

  // Without clock reads (traces written before the clock record) both are unknown.
  const auto old_path = WriteTemp("no_clocks.emotrace", TwoStreamLoop());
  auto old_trace = trace::ReadTrace(old_path);
  ASSERT_TRUE(old_trace.ok()) << old_trace.status().message();
  EXPECT_FALSE(old_trace->meta.run->gpus[0].clock.Known());
  EXPECT_FALSE(old_trace->meta.run->gpus[0].traced_clock.Known());
  std::filesystem::remove(old_path);
}

// A record time no writer produces (before the clock's epoch, or past 2^62 ns, where the
// difference of two times would overflow) is skipped and counted; the rest of the file reads as
// before. Here on clock reads, whose windows are widened around the traced iterations.
TEST(EmoTraceReaderTest, RecordTimesOutsideTheClocksRangeAreSkipped) {
  std::vector<ef::ClockRecord> clocks;
  for (int64_t t = kT0 - 100 * kMs; t <= kT0 + 15 * kIteration; t += 50 * kMs) clocks.push_back({t, 0, 0, 1980});
  for (int64_t bad : {int64_t{-1}, std::numeric_limits<int64_t>::min(), (int64_t{1} << 62) + 1,
                      std::numeric_limits<int64_t>::max()}) {
    clocks.push_back({bad, 0, 0, 100});
  }
  const auto path = WriteTemp("clock_range.emotrace", TwoStreamLoop(false, true, false, 0, {}, clocks));
  auto t = trace::ReadTrace(path);
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->diagnostics.Count(Diag::kEmoRecordSkipped), 4u);
  EXPECT_EQ(t->gpu.size(), 4u);
  ASSERT_EQ(t->meta.run->gpus.size(), 1u);
  const auto& g = t->meta.run->gpus[0];
  EXPECT_EQ(g.traced_clock.min_mhz, 1980);
  EXPECT_EQ(g.clock.min_mhz, 1980);
  EXPECT_EQ(g.clock.samples, 13);
  std::filesystem::remove(path);
}

// Anchored iterations (the tracer's launch callbacks off) count like launch-period ones, and
// the energy window does not span the hand-over, which no iteration covers.
TEST(EmoTraceReaderTest, TheEnergyWindowDoesNotSpanTheHandOverToAnchoredIterations) {
  const auto path = WriteTemp("anchor.emotrace", TwoStreamLoop(false, true, false, 30 * kMs));
  auto t = trace::ReadTrace(path);
  ASSERT_TRUE(t.ok()) << t.status().message();
  const auto& run = *t->meta.run;
  EXPECT_EQ(run.iterations, 14);
  EXPECT_EQ(run.untraced_iterations, 6);
  EXPECT_EQ(run.untraced_step_ns, kIteration);
  const auto& g = run.gpus[0];
  EXPECT_EQ(g.iterations, 5);  // 9..13; iteration 8 stands apart
  EXPECT_EQ(g.window_start, kT0 + 9 * kIteration + 30 * kMs);
  EXPECT_EQ(g.window_end, kT0 + 14 * kIteration + 30 * kMs);
  // The counter steps every 100 ms; the window's ends fall between reads, so the energy is
  // within one step (10 J) over five iterations of the true 10 J per iteration.
  EXPECT_NEAR(g.energy_per_iteration_j, 10.0, 10.0 / 5 + 1e-9);
  std::filesystem::remove(path);
}

// The monitor's first read of a GPU can come after the untraced iterations began (it meets the
// GPU when the program first uses it): the energy window is the longest run the reads bracket,
// not no energy at all.
TEST(EmoTraceReaderTest, TheEnergyWindowStartsAtTheFirstIterationTheCounterReadsCover) {
  const auto path =
      WriteTemp("late_read.emotrace", TwoStreamLoop(false, true, false, 0, {}, {}, kT0 + 8 * kIteration + 20 * kMs));
  auto t = trace::ReadTrace(path);
  ASSERT_TRUE(t.ok()) << t.status().message();
  const auto& run = *t->meta.run;
  EXPECT_EQ(run.untraced_iterations, 6);  // the step time still counts 8..13
  ASSERT_EQ(run.gpus.size(), 1u);
  const auto& g = run.gpus[0];
  ASSERT_TRUE(g.HasEnergy());
  EXPECT_EQ(g.iterations, 5);  // 9..13: iteration 8 began 20 ms before the first read
  EXPECT_EQ(g.window_start, kT0 + 9 * kIteration);
  EXPECT_EQ(g.window_end, kT0 + 14 * kIteration);
  // The window's start falls between two reads: within one counter step (10 J) over five iterations.
  EXPECT_NEAR(g.energy_per_iteration_j, 10.0, 10.0 / 5 + 1e-9);
  std::filesystem::remove(path);

  // Reads that bracket none of the iterations (from 20 ms into the last one) leave the window
  // named but without energy.
  const auto none_path =
      WriteTemp("no_cover.emotrace", TwoStreamLoop(false, true, false, 0, {}, {}, kT0 + 13 * kIteration + 20 * kMs));
  auto none = trace::ReadTrace(none_path);
  ASSERT_TRUE(none.ok()) << none.status().message();
  EXPECT_GT(none->meta.run->gpus[0].counter_reads, 0);
  EXPECT_FALSE(none->meta.run->gpus[0].HasEnergy());
  EXPECT_EQ(none->meta.run->gpus[0].iterations, 6);
  std::filesystem::remove(none_path);
}

// A monitored run whose step falls 20-fold after its first 40 iterations (the decode loop's first
// pass over its cache lengths) is not steady, and the run report says so; one whose step only
// wobbles is.
TEST(EmoTraceReaderTest, AStepThatChangesDuringTheRunIsFlagged) {
  auto run_of = [](const std::function<int64_t(uint64_t)>& step_ns) {
    EmoTraceWriter w;
    w.Meta({{"format", "emo-trace"}, {"config.mode", "monitor"}, {"iteration.source", "launch_period"}});
    int64_t t = kT0;
    for (uint64_t i = 0; i < 90; ++i) {
      const int64_t ns = step_ns(i);
      w.Add(ef::RecordType::kIteration,
            ef::IterationRecord{i, t, t + ns, static_cast<uint32_t>(ef::IterationSource::kLaunchPeriod), 0, 2, ef::kNoName});
      t += ns;
    }
    w.Flush(false);
    w.End();
    return w.bytes();
  };
  const auto two = WriteTemp("two_regimes.emotrace", run_of([](uint64_t i) { return i < 40 ? 40 * kMs : 2 * kMs; }));
  auto t = trace::ReadTrace(two);
  ASSERT_TRUE(t.ok()) << t.status().message();
  const auto& r = *t->meta.run;
  EXPECT_EQ(r.untraced_iterations, 88);  // past the two start-up iterations
  EXPECT_EQ(r.untraced_first_third_ns, 40 * kMs);
  EXPECT_EQ(r.untraced_last_third_ns, 2 * kMs);
  EXPECT_TRUE(r.Drifted());
  EXPECT_NE(report::RunText(two, *t).find("the step changed during the run: 40.000 ms over the first third of the "
                                          "untraced iterations, 2.000 ms over the last third (x0.05)"),
            std::string::npos)
      << report::RunText(two, *t);
  EXPECT_FALSE(report::RunToJson(two, *t)["step_time_ms"]["steady"].get<bool>());
  std::filesystem::remove(two);

  const auto wobbly = WriteTemp("wobbly.emotrace", run_of([](uint64_t i) { return (i % 3 == 0 ? 13 : 10) * kMs; }));
  auto u = trace::ReadTrace(wobbly);
  ASSERT_TRUE(u.ok()) << u.status().message();
  EXPECT_FALSE(u->meta.run->Drifted());
  EXPECT_EQ(report::RunText(wobbly, *u).find("the step changed"), std::string::npos);
  EXPECT_TRUE(report::RunToJson(wobbly, *u)["step_time_ms"]["steady"].get<bool>());
  std::filesystem::remove(wobbly);
}

// `emo run`: the iterations before the plan's first switch and those while it held, each with
// its step time and energy per iteration (here the plan starts at iteration 10).
TEST(EmoTraceReaderTest, AnEmoRunSaysWhatTheProgramDidBeforeAndUnderThePlan) {
  const auto path = WriteTemp("run.emotrace", TwoStreamLoop(false, true, false, 0,
                                                             {{"run.followed", "1"},
                                                              {"run.actuator", "dry-run"},
                                                              {"run.plan_started_ns", std::to_string(kT0 + 10 * kIteration)}}));
  auto t = trace::ReadTrace(path);
  ASSERT_TRUE(t.ok()) << t.status().message();
  const auto& run = *t->meta.run;
  EXPECT_EQ(run.policy_run.at("followed"), "1");
  EXPECT_EQ(run.policy_run.at("actuator"), "dry-run");
  ASSERT_TRUE(run.plan.has_value());
  const auto& p = *run.plan;
  EXPECT_EQ(p.before_step, std::make_pair(kIteration, int64_t{2}));  // 8 and 9
  EXPECT_EQ(p.under_step, std::make_pair(kIteration, int64_t{4}));   // 10..13
  ASSERT_EQ(p.before_gpus.size(), 1u);
  EXPECT_EQ(p.before_gpus[0].iterations, 2);
  EXPECT_EQ(p.under_gpus[0].iterations, 4);
  EXPECT_EQ(p.under_gpus[0].window_start, kT0 + 10 * kIteration);
  EXPECT_NEAR(p.under_gpus[0].energy_per_iteration_j, 10.0, 1e-9);
  EXPECT_EQ(p.stopped_ns, -1);
  std::filesystem::remove(path);
  // Without an `emo run`, no split.
  const auto plain = WriteTemp("plain.emotrace", TwoStreamLoop());
  auto u = trace::ReadTrace(plain);
  ASSERT_TRUE(u.ok());
  EXPECT_FALSE(u->meta.run->plan.has_value());
  EXPECT_TRUE(u->meta.run->policy_run.empty());
  std::filesystem::remove(plain);
}

// `emo run` with spans of the plan in force (the guard re-times the default clock between
// them): iterations wholly inside a span are the plan's, those touching none after the plan
// started are the default clock's; one straddling a span's edge is neither.
TEST(EmoTraceReaderTest, PlanSpansSplitThePlansIterationsFromTheDefaultClocksBetweenThem) {
  auto read = [](const std::string& spans) {
    const auto path = WriteTemp("spans.emotrace", TwoStreamLoop(false, true, false, 0,
                                                                 {{"run.followed", "1"},
                                                                  {"run.actuator", "emulate"},
                                                                  {"run.plan_started_ns", std::to_string(kT0 + 10 * kIteration)},
                                                                  {"run.plan_spans_ns", spans}}));
    auto t = trace::ReadTrace(path);
    std::filesystem::remove(path);
    EXPECT_TRUE(t.ok()) << t.status().message();
    return *t->meta.run->plan;
  };
  const auto at = [](double iterations) { return std::to_string(kT0 + static_cast<int64_t>(iterations * kIteration)); };
  // In force over 10-11, default over 12, in force from 13 to the end.
  auto p = read(at(10) + ":" + at(12) + "," + at(13) + ":-1");
  EXPECT_EQ(p.in_force_step, std::make_pair(kIteration, int64_t{3}));            // 10, 11, 13
  EXPECT_EQ(p.interleaved_default_step, std::make_pair(kIteration, int64_t{1}));  // 12
  // The second span starts inside iteration 12: it is neither.
  p = read(at(10) + ":" + at(12) + "," + at(12.5) + ":-1");
  EXPECT_EQ(p.in_force_step.second, 3);
  EXPECT_EQ(p.interleaved_default_step.second, 0);
  // Before the plan started (8, 9) counts for neither.
  p = read(at(10) + ":" + at(11));
  EXPECT_EQ(p.in_force_step.second, 1);                 // 10
  EXPECT_EQ(p.interleaved_default_step.second, 3);      // 11, 12, 13
}

// The paired reading: each re-timing of the default clock against the plan's iterations next to
// it. A loop whose pace steps from 10 to 15 ms a step between the two re-timings fools the two
// medians (the plan's mostly from the fast stretch, the default's half from the slow one) but not
// the pairs, which see the plan's 5 % on both sides.
TEST(EmoTraceReaderTest, EachReTimingIsPairedWithThePlansIterationsNextToIt) {
  EmoTraceWriter w;
  w.Meta({{"format", "emo-trace"}, {"host", "h200-box"}, {"pid", "4242"}, {"config.mode", "monitor"},
          {"iteration.source", "launch_period"}, {"clock.cupti_ns", "1000"}, {"clock.realtime_ns", "5000"}});
  ef::GpuRecord gpu{};
  gpu.device = 0;
  gpu.name = w.Str("NVIDIA H200");
  w.Add(ef::RecordType::kGpu, gpu);
  // In force over 10-19, 22-31 and 34 to the end; the default clock over 20-21 and 32-33.
  auto default_clock = [](uint64_t i) { return i == 20 || i == 21 || i == 32 || i == 33; };
  int64_t t = kT0;
  std::vector<int64_t> starts;
  for (uint64_t i = 0; i < 40; ++i) {
    const double pace_ms = i < 26 ? 10.0 : 15.0;
    const double plan = i >= 10 && !default_clock(i) ? 1.05 : 1.0;
    const auto d = static_cast<int64_t>(pace_ms * plan * static_cast<double>(kMs));
    starts.push_back(t);
    w.Add(ef::RecordType::kIteration,
          ef::IterationRecord{i, t, t + d, static_cast<uint32_t>(ef::IterationSource::kLaunchPeriod), 0u, 2, ef::kNoName});
    t += d;
  }
  starts.push_back(t);
  w.Flush(false);
  const auto at = [&starts](size_t i) { return std::to_string(starts[i]); };
  w.Meta({{"run.followed", "1"},
          {"run.actuator", "emulate"},
          {"run.plan_started_ns", at(10)},
          {"run.plan_spans_ns", at(10) + ":" + at(20) + "," + at(22) + ":" + at(32) + "," + at(34) + ":-1"}});
  w.End();
  const auto path = WriteTemp("paired.emotrace", w.bytes());
  auto tr = trace::ReadTrace(path);
  std::filesystem::remove(path);
  ASSERT_TRUE(tr.ok()) << tr.status().message();
  ASSERT_TRUE(tr->meta.run->plan.has_value());
  const auto& p = *tr->meta.run->plan;
  EXPECT_EQ(p.in_force_step.second, 26);
  EXPECT_EQ(p.interleaved_default_step.second, 4);
  // The medians: 10.5 ms under the plan against 15 ms at the default clock, a 30 % "speed-up".
  EXPECT_EQ(p.in_force_step.first, static_cast<int64_t>(10.5 * kMs));
  EXPECT_EQ(p.interleaved_default_step.first, 15 * kMs);
  // The pairs: 1.05 at both re-timings.
  EXPECT_EQ(p.paired_in_force_over_default.second, 2);
  EXPECT_NEAR(p.paired_in_force_over_default.first, 1.05, 1e-6);
}

// `emo run --trace`: the switches the run timed and where its packs start, read as numbers; an
// entry that is not "pack:applied:iteration_start", or whose times lie outside the records'
// range, is skipped.
TEST(EmoTraceReaderTest, SwitchTimesAndPackFirstCallsAreRead) {
  const auto path = WriteTemp("switch_times.emotrace",
                              TwoStreamLoop(false, true, false, 0,
                                            {{"run.followed", "1"},
                                             {"run.switch_times_ns",
                                              "1:500:400,0:900:-1,7:1,3:-5:100,4:100:9223372036854775807,2:1000:950"},
                                             {"run.pack_first_calls", "0,3,7"}}));
  auto t = trace::ReadTrace(path);
  std::filesystem::remove(path);
  ASSERT_TRUE(t.ok()) << t.status().message();
  const auto& run = *t->meta.run;
  ASSERT_EQ(run.switch_times.size(), 3u);
  EXPECT_EQ(run.switch_times[0].pack, 1);
  EXPECT_EQ(run.switch_times[0].applied_ns, 500);
  EXPECT_EQ(run.switch_times[0].iteration_start_ns, 400);
  EXPECT_EQ(run.switch_times[1].iteration_start_ns, -1);
  EXPECT_EQ(run.switch_times[2].pack, 2);
  EXPECT_EQ(run.pack_first_calls, (std::vector<int64_t>{0, 3, 7}));
}

// Every wait names its record exactly, so the graph needs no fallback rule; the replay is exact.
TEST(EmoTraceReaderTest, WaitsAreExactEdgesInTheGraph) {
  const auto path = WriteTemp("graph.emotrace", TwoStreamLoop());
  auto a = analysis::AnalyzeTrace(path, {});
  ASSERT_TRUE(a.ok()) << a.status().message();
  const auto d = a->AllDiagnostics();
  EXPECT_EQ(d.Count(Diag::kWaitEdgeExact), 2u);
  EXPECT_EQ(d.Count(Diag::kWaitEdgeRecordPair) + d.Count(Diag::kWaitEdgeLastLaunch) + d.Count(Diag::kWaitEdgeNone) +
                d.Count(Diag::kWaitEdgeEventId),
            0u);
  EXPECT_LT(std::abs(a->replay_error_pct()), 1e-9);
  EXPECT_EQ(a->iterations.iterations.size(), 2u);
  // The untraced step time the tracer measured is the analysis' measured step time.
  EXPECT_EQ(a->overhead.source, analysis::OverheadSource::kStepTime);
  EXPECT_NE(a->overhead.note.find("emo trace"), std::string::npos) << a->overhead.note;
  EXPECT_DOUBLE_EQ(analysis::AnalysisToJson(*a)["iteration_time_us"]["untraced"].get<double>(), 100'000.0);
  std::filesystem::remove(path);
}

// A program killed mid-run leaves a file cut anywhere: every cut reads, up to its last whole
// chunk, and says where it ends.
TEST(EmoTraceReaderTest, AFileCutAnywhereReadsUpToItsLastWholeChunk) {
  const std::string whole = TwoStreamLoop();
  size_t last_kernels = 0;
  for (size_t cut = sizeof(ef::FileHeader); cut < whole.size(); cut += 7) {
    const auto path = WriteTemp("cut.emotrace", whole.substr(0, cut));
    auto t = trace::ReadTrace(path);
    ASSERT_TRUE(t.ok()) << cut << ": " << t.status().message();
    EXPECT_EQ(t->diagnostics.Count(Diag::kTraceTruncated), 1u) << cut;
    ASSERT_TRUE(t->meta.run.has_value());
    EXPECT_FALSE(t->meta.run->complete);
    EXPECT_NE(t->meta.run->end_note.find("ends at byte"), std::string::npos) << t->meta.run->end_note;
    EXPECT_GE(t->gpu.size(), last_kernels) << "a longer prefix never reads fewer records";
    last_kernels = t->gpu.size();
  }
  EXPECT_EQ(last_kernels, 4u);

  // A damaged byte in a payload stops the reading at that chunk (its checksum fails).
  std::string damaged = whole;
  damaged[whole.size() / 2] ^= 0x5a;
  const auto path = WriteTemp("damaged.emotrace", damaged);
  auto t = trace::ReadTrace(path);
  ASSERT_TRUE(t.ok());
  EXPECT_LT(t->gpu.size(), 4u);
  EXPECT_EQ(t->diagnostics.Count(Diag::kTraceTruncated), 1u);
  std::filesystem::remove(path);
}

// Seeded damage inside chunks whose checksums are then made to match again, so the garbage
// reaches the record decoder: the reader never crashes, never reads past a payload, and says
// what it skipped. (ASan in CI catches an overread.)
TEST(EmoTraceReaderTest, DamagedRecordsNeverCrashTheReader) {
  const std::string whole = TwoStreamLoop();
  std::mt19937 rng(20261201);
  for (int round = 0; round < 300; ++round) {
    std::string bytes = whole;
    // Walk the chunks; damage one at random and fix its checksum.
    std::vector<size_t> chunk_at;
    for (size_t at = sizeof(ef::FileHeader); at + sizeof(ef::ChunkHeader) <= bytes.size();) {
      ef::ChunkHeader h;
      std::memcpy(&h, bytes.data() + at, sizeof(h));
      chunk_at.push_back(at);
      at += sizeof(h) + h.stored_bytes;
    }
    const size_t at = chunk_at[rng() % chunk_at.size()];
    ef::ChunkHeader h;
    std::memcpy(&h, bytes.data() + at, sizeof(h));
    if (h.stored_bytes == 0) continue;
    for (int flips = 1 + static_cast<int>(rng() % 8); flips > 0; --flips) {
      bytes[at + sizeof(h) + rng() % h.stored_bytes] = static_cast<char>(rng());
    }
    h.crc32 = static_cast<uint32_t>(crc32(0, reinterpret_cast<const Bytef*>(bytes.data() + at + sizeof(h)), h.stored_bytes));
    std::memcpy(bytes.data() + at, &h, sizeof(h));
    const auto path = WriteTemp("fuzz.emotrace", bytes);
    auto t = trace::ReadTrace(path);
    ASSERT_TRUE(t.ok()) << round << ": " << t.status().message();
    EXPECT_LE(t->gpu.size(), 4u + 1u) << round;
    std::filesystem::remove(path);
  }
}

TEST(EmoTraceReaderTest, ANewerVersionIsRefusedByName) {
  std::string bytes = TwoStreamLoop();
  const uint32_t newer = ef::kVersion + 1;
  std::memcpy(bytes.data() + 8, &newer, 4);
  const auto path = WriteTemp("newer.emotrace", bytes);
  auto t = trace::ReadTrace(path);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find(path), std::string::npos);
  EXPECT_NE(t.status().message().find("newer"), std::string::npos);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace emo::testing
