// Following a found loop without a callback on every kernel launch. Pure (no CUDA).
//
// The launch-period finder needs the whole launch sequence, and CUPTI's launch callback costs
// host time on every launch: 0.5-1.5 us per launch measured on the H200
// (bench/gpu/launch_cost.py), a few to 10 % of a CPU-bound PyTorch step (BENCHMARKS.md,
// "Overhead: the programs' own median step time"). Most loops also make a few
// host-synchronizing calls per iteration (a loss read back with .item(), a batch copied in, a
// stream synchronize): these "anchor" calls are orders of magnitude rarer than launches.
//
// AnchorFinder watches the anchor calls beside the iterations the launch-period finder reports
// and chooses one call signature that occurs the same number of times c (1 <= c <= max_count)
// in each of the loop's last `stable_iterations` iterations. AnchorFollower then ends an
// iteration at every c-th occurrence of it, so the tracer can turn its launch callbacks off.
// The follower gives the loop up (the tracer turns the launch callbacks back on and finds the
// loop again) when an anchored iteration is much shorter than the loop's (the call now comes
// more often: another phase of the program) or when the call stops coming.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

#include "emo/runtime/launch_period_finder.h"

namespace emo::runtime {

// The anchor chosen for a loop.
struct AnchorChoice {
  uint64_t signature = 0;  // the call (its API and, for copies, its size and direction)
  uint32_t count = 0;      // occurrences per iteration
  int64_t median_ns = 0;   // the loop's median iteration over the stable stretch
  uint64_t loop = 0;       // the launch-period loop it was found in
  uint32_t period = 0;     // that loop's launches per iteration
};

class AnchorFinder {
 public:
  struct Options {
    uint32_t stable_iterations = 16;  // consecutive iterations with the same count
    uint32_t max_count = 4;           // most occurrences per iteration an anchor may have
    size_t max_events = size_t{1} << 14;
    size_t max_signatures = 64;  // distinct calls followed at once; later ones are ignored
  };

  AnchorFinder();
  explicit AnchorFinder(const Options& options);

  // An anchor call, in time order (as the control thread receives them).
  void AddEvent(uint64_t signature, int64_t time_ns);
  // An iteration of the launch-period loop, in time order, once the calls up to its end were
  // added. Iterations of a different loop start the count again.
  void AddIteration(const LaunchIteration& iteration);
  // The anchor, once one is stable; the lowest count wins, then the call seen first.
  std::optional<AnchorChoice> choice() const;
  // Forgets everything (after the tracer gave an anchor up).
  void Reset();

 private:
  struct Event {
    uint64_t signature;
    int64_t time_ns;
  };
  struct Candidate {
    uint64_t signature = 0;
    uint32_t count = 0;  // occurrences in the latest iteration
    uint32_t run = 0;    // consecutive iterations with that count
  };

  Options options_;
  std::deque<Event> events_;
  int64_t dropped_until_ns_ = INT64_MIN;  // events before this time were dropped (full)
  std::vector<Candidate> candidates_;
  bool have_loop_ = false;
  uint64_t loop_ = 0;
  uint32_t period_ = 0;
  std::deque<int64_t> durations_;  // the loop's latest iterations
};

// One iteration between anchors.
struct AnchorIteration {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
};

class AnchorFollower {
 public:
  enum class Result { kNone, kIteration, kLost };

  struct Options {
    double short_ratio = 0.5;         // an iteration under this share of the median: lost
    double silence_ratio = 20.0;      // no anchor for this many medians: lost
    int64_t min_silence_ns = 1'000'000'000;
  };

  // Follows `choice` from `now_ns` (the silence clock starts there).
  AnchorFollower(const AnchorChoice& choice, int64_t now_ns);
  AnchorFollower(const AnchorChoice& choice, int64_t now_ns, const Options& options);

  // An anchor call; kIteration fills `out` when it ends one, kLost when the loop no longer
  // holds (then the follower is done). Calls with other signatures are ignored.
  Result OnEvent(uint64_t signature, int64_t time_ns, AnchorIteration* out);
  // True when the anchor has been silent too long at `now_ns`.
  bool Silent(int64_t now_ns) const;
  const AnchorChoice& choice() const { return choice_; }

 private:
  AnchorChoice choice_;
  Options options_;
  uint32_t seen_ = 0;             // occurrences since the current iteration began
  int64_t start_ns_ = INT64_MIN;  // the current iteration's start, once the first call came
  int64_t last_ns_;               // the latest occurrence (or the start of following)
};

}  // namespace emo::runtime
