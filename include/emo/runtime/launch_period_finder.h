// Online detection of a program's iterations from the sequence of its kernel launches, for
// programs without NVTX iteration ranges. Pure (no CUDA): it sees one (signature, host time)
// pair per launch, where the signature identifies the launched function or graph.
//
// The iteration is the smallest period P of the signature sequence that holds for at least
// three consecutive repetitions. Candidate periods come from a rolling hash of the last k
// signatures: the distance to the previous occurrence of the same k-gram (a direct-mapped
// table) is proposed and then verified signature by signature, so each launch costs O(1)
// amortized. Two refinements on the textbook "smallest period":
//  - nested loops: a period whose repeating stretch begins with a k-gram the program has
//    already run at a longer distance (the 24 layers inside a forward pass, a chunked optimizer
//    kernel) is a loop inside a larger repetition and is not locked until its stretch outlasts
//    three of the longer distances. The first time through the outer loop there is no such
//    evidence, so its inner loops can be reported then (TraceWindow lets a longer loop found
//    later supersede them);
//  - the loop top: the iteration starts at the launch preceded by the largest host gap in
//    the period (the data loader, a host sync). When that largest gap does not recur in every
//    repetition of P but does in every repetition of a multiple m·P (gradient accumulation
//    with identical micro-batches), the iteration is m·P; without a distinct gap the phase is
//    where the summed gaps peak;
//  - probation: a lock taken where the gaps were all alike may be the inside of a longer
//    iteration whose first three repetitions fell within one step (16 identical GEMMs and a
//    host sync per step lock the period 1 after three GEMMs). "Alike": a period of one launch
//    (where "distinct" is vacuous), or one none of whose phases has a median gap over the
//    newest three repetitions at least distinct_gap_ratio times the median phase's (the newest:
//    a program's first launches pay its start-up). While on probation, gaps
//    that large against those the lock was taken on are candidates; one that recurs every m·P
//    launches, six times, with gaps of one size (gap_spread_ratio), re-locks at m·P with its top
//    there. A launch-bound loop has stray gaps as large as its tops at times, so regularity,
//    not size against the other gaps, tells the tops. The longer loop gets a new id; m = 1
//    moves the top of the same loop. A lock with a standout phase is not on
//    probation, however much that gap varies (a data loader's wait) and even when one stray gap
//    outdid it, so its rarer, longer gaps (an epoch's end, a periodic logging step) are no step
//    of their own. A distinct gap inside a repeated block (each layer's own) still decides a
//    lock on the block: such loops need NVTX ranges to be seen as steps, unless the host waits;
//  - the host's wait: a step that repeats one block (the layers of a model's forward pass) and
//    ends in a host wait for the GPU (a device, stream or event synchronize, a blocking copy)
//    has the wait every m·P launches, m >= 2, and in no repetition between. The caller reports
//    such waits (AddWait); one call that came before the same launch every m·P launches, six
//    times in a row within the lock, re-locks the loop at m·P with its top after the wait,
//    unless a wait already comes in every iteration (the loss read back each step: then a
//    one-off sync or a log every ten steps is no step of its own).
//    Host times between launches say nothing of the GPU's pace where the host runs ahead and
//    catches up at a wait, so the iteration spans from wait to wait. A loop that logs its loss
//    every ten steps and syncs only then is traced ten steps at a time, for the same reason.
// Once locked, launches are compared with the locked period's template: a substituted launch
// is tolerated, a run of mismatches (the loop changed, a launch was inserted) drops the lock
// and the search starts again; an iteration ending in mismatches is held back until a launch
// matches again, and dropped with the lock. Iterations found when a lock is taken are reported
// retroactively from the history, so the first ones are not lost to the verification.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace emo::runtime {

// One iteration of a detected loop.
struct LaunchIteration {
  uint64_t first_launch = 0;  // position of its first launch in the whole sequence
  int64_t start_ns = 0;       // host time of its first launch
  int64_t end_ns = 0;         // host time of the next iteration's first launch
  uint32_t launches = 0;      // launches in it (the period)
  uint64_t loop = 0;          // 1-based id of the loop; a new id when the finder locks a different period
  uint64_t loop_index = 0;    // 0-based index of the iteration within its loop
};

// Finds iterations in a launch sequence, online. Not thread-safe: one thread feeds it.
class LaunchPeriodFinder {
 public:
  struct Options {
    // Longest iteration, in launches: a large model's eager training step can launch tens of
    // thousands of kernels. The history (2^19 launches; 14 MiB with the k-gram table) holds
    // three of them.
    uint32_t max_period = 131072;
    uint32_t history_log2 = 19;       // launches kept; also bounds the retroactive iterations
    uint32_t kgram = 8;               // signatures hashed together to propose a period
    uint32_t max_multiple = 4;        // largest m tried for the m·P iteration
    double distinct_gap_ratio = 2.0;  // loop-top gap over the period's second-largest gap
    double gap_spread_ratio = 4.0;    // largest/smallest loop-top gap over the repetitions
    uint32_t max_mismatches = 3;      // consecutive mismatches that drop a lock
  };

  LaunchPeriodFinder();
  explicit LaunchPeriodFinder(const Options& options);

  // Adds the next launch; appends the iterations this launch completes (in time order) to
  // `out`. A launch that starts an iteration completes the previous one.
  void Add(uint64_t signature, int64_t time_ns, std::vector<LaunchIteration>* out);

  // Notes that the host waited for the GPU (`signature`: which call, and the bytes of a copy)
  // before the next launch to be added.
  void AddWait(uint64_t signature);

  // True while a period is locked.
  bool locked() const { return locked_; }
  // True while a period is locked and no host wait may yet prove the step longer: a wait comes
  // in every iteration (the step spans wait to wait already); or each wait seen in the lock
  // came at uneven or overdue spacings; or none came in it, for 128 periods (the first may end
  // a step of that many repetitions) when the program has waited before, at once when it never
  // has. A wait that came once (for 128 periods after it) or at equal spacings of m·P, m >= 2,
  // fewer than six times, keeps the lock unsettled.
  // A trace window taken on a lock that is not settled may be taken on a part of the step. So
  // may one taken in a program's first step before its first wait: nothing tells it yet.
  bool settled() const;
  // Launches per iteration of the locked loop; 0 when not locked.
  uint32_t period() const { return locked_ ? length_ : 0; }
  // Distinct loops locked so far (0: no period was ever found).
  uint64_t loops() const { return loop_; }
  // Times a lock was dropped.
  uint64_t lost() const { return lost_; }
  // Launches seen.
  uint64_t launches() const { return n_; }

 private:
  struct Candidate {
    uint32_t period;
    uint64_t run;               // consecutive positions ending at the newest with s[j] == s[j - period]
    uint32_t multiple;          // next m to try for the loop top
    uint64_t fallback_top = 0;  // absolute position of the loop top when no gap decides
    bool have_fallback = false;
  };
  struct GapOutcome {
    bool clear = false;  // one distinct, consistent loop-top gap
    bool hint = false;   // the largest gap differs a lot between repetitions: try a multiple
    uint64_t top = 0;    // absolute position of a loop top
  };

  bool Have(uint64_t pos) const { return pos < n_ && pos + history_ >= n_; }
  uint64_t Sig(uint64_t pos) const { return sig_[pos & mask_]; }
  int64_t Time(uint64_t pos) const { return time_[pos & mask_]; }
  int64_t Gap(uint64_t pos) const { return pos == 0 || !Have(pos - 1) ? 0 : Time(pos) - Time(pos - 1); }

  uint64_t UpdateHash(uint64_t pos);
  void Search(uint64_t pos, uint64_t previous_distance, std::vector<LaunchIteration>* out);
  uint64_t BackwardRun(uint64_t pos, uint32_t period) const;
  bool Nested(uint64_t pos, const Candidate& c) const;
  bool TryLock(uint64_t pos, Candidate* c, std::vector<LaunchIteration>* out);
  GapOutcome Gaps(uint64_t pos, uint32_t length);
  bool StandoutPhase(uint64_t pos, uint32_t length);
  void Lock(uint64_t pos, uint32_t length, uint64_t top, uint64_t verified_start, bool probation,
            std::vector<LaunchIteration>* out);
  int64_t MedianRepetitionGap(uint64_t pos, uint32_t length) const;
  void Track(uint64_t pos, std::vector<LaunchIteration>* out);
  void Probation(uint64_t pos, std::vector<LaunchIteration>* out);
  bool StepEndsInWait(uint64_t pos, std::vector<LaunchIteration>* out);
  bool WaitsEveryIteration() const;
  struct WaitRun;
  // The spacing of a call's waits within the lock (`seen` of them) when they are evenly spaced
  // at m·P, m >= 2: the step they may end. 0 otherwise, or with fewer than two.
  uint64_t OuterSpacing(const WaitRun& w, std::size_t* seen) const;
  LaunchIteration Make(uint64_t first, uint64_t next_first);
  void Publish(std::vector<LaunchIteration>* out);

  Options options_;
  uint64_t history_;
  uint64_t mask_;
  std::vector<uint64_t> sig_;
  std::vector<int64_t> time_;
  std::vector<uint32_t> previous_distance_;  // per position: distance to the k-gram's previous occurrence
  uint64_t n_ = 0;

  // k-gram hash: the newest k signatures, and the newest position of each hash value.
  struct Slot {
    uint64_t hash = 0;
    uint64_t pos_plus_one = 0;
  };
  std::vector<Slot> table_;
  uint64_t hash_ = 0;
  uint64_t base_pow_k_ = 1;

  std::vector<Candidate> candidates_;
  std::vector<int64_t> gap_sum_;
  std::vector<int64_t> phase_median_;

  bool locked_ = false;
  uint32_t length_ = 0;
  std::vector<uint64_t> template_;
  std::vector<uint64_t> previous_template_;
  uint64_t iteration_start_ = 0;  // position of the current iteration's first launch
  uint32_t position_ = 0;         // launches of the current iteration seen
  uint32_t consecutive_mismatches_ = 0;
  uint32_t iteration_mismatches_ = 0;
  std::vector<LaunchIteration> pending_;  // ended, waiting for a matching launch
  uint64_t emitted_until_ = 0;            // first launch of the iteration after the last one emitted
  uint64_t loop_ = 0;
  uint64_t loop_index_ = 0;
  uint64_t lost_ = 0;

  // Probation of an undecided lock (see the top of this file).
  bool probation_ = false;
  int64_t base_gap_ = 0;            // median over the lock's three repetitions of their largest gap
  struct Outlier {
    uint64_t position;  // the launch after the gap
    int64_t gap;
  };
  std::vector<Outlier> outliers_;  // gaps distinct from base_gap_, oldest first

  // Host waits, per call: the launches they came before (see the top of this file).
  struct WaitRun {
    uint64_t signature = 0;
    std::vector<uint64_t> positions;  // the newest, oldest first
    uint64_t last_seen = 0;           // position of the newest, for replacing the stalest run
  };
  std::vector<WaitRun> waits_;
  uint64_t newest_wait_ = UINT64_MAX;  // position of the launch after the newest wait
  uint64_t verified_start_ = 0;        // first launch of the stretch the lock was verified on
};

}  // namespace emo::runtime
