#include "emo/runtime/launch_period_finder.h"

#include <algorithm>

namespace emo::runtime {
namespace {

constexpr uint64_t kHashBase = 0x9E3779B97F4A7C15ull;  // odd: multiplication is invertible mod 2^64
constexpr uint32_t kTableLog2 = 18;                    // 2^18 k-gram slots (4 MiB): most survive one long period
constexpr size_t kMaxCandidates = 8;
// Rotations of the old template tried when deciding whether a new lock is the same loop.
constexpr int kMaxRotationTries = 64;
// Distinct gaps a lock on probation keeps (the newest) to look for the tops of an outer loop
// among; stray ones in between must not push the tops out.
constexpr size_t kProbationOutliers = 128;
// Tops at equal spacing that re-lock a loop on probation: five spacings, which stray gaps do not
// make by chance.
constexpr uint64_t kProbationSeries = 6;
// Waits before the same launch at equal spacing that end a step (six, as for probation), and
// the distinct calls followed at once.
constexpr size_t kWaitSeries = 6;
constexpr size_t kMaxWaitCalls = 16;
// Periods after a lone wait during which it may still turn out to end a step of that many
// repetitions (a model's layers).
constexpr uint64_t kWaitHorizon = 128;

// splitmix64's finalizer: spreads nearby pointers over all 64 bits before they enter the hash.
uint64_t Mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 31;
  return x;
}

// True when `b` is `a` rotated.
bool SameUpToRotation(const std::vector<uint64_t>& a, const std::vector<uint64_t>& b) {
  if (a.size() != b.size() || a.empty()) return false;
  const size_t n = a.size();
  int tries = 0;
  for (size_t r = 0; r < n && tries < kMaxRotationTries; ++r) {
    if (a[r] != b[0]) continue;
    ++tries;
    bool same = true;
    for (size_t j = 0; j < n && same; ++j) same = a[(r + j) % n] == b[j];
    if (same) return true;
  }
  return false;
}

}  // namespace

LaunchPeriodFinder::LaunchPeriodFinder() : LaunchPeriodFinder(Options{}) {}

LaunchPeriodFinder::LaunchPeriodFinder(const Options& options)
    : options_(options),
      history_(uint64_t{1} << options.history_log2),
      mask_(history_ - 1),
      sig_(history_),
      time_(history_),
      previous_distance_(history_),
      table_(size_t{1} << kTableLog2) {
  options_.kgram = std::max<uint32_t>(1, options_.kgram);
  options_.max_multiple = std::max<uint32_t>(1, options_.max_multiple);
  options_.max_mismatches = std::max<uint32_t>(1, options_.max_mismatches);
  // Three repetitions of the longest period must fit in the history, one launch spare for the
  // gap before the first.
  options_.max_period = std::clamp<uint32_t>(options_.max_period, 1, static_cast<uint32_t>((history_ - 1) / 3));
  for (uint32_t i = 0; i < options_.kgram; ++i) base_pow_k_ *= kHashBase;
}

void LaunchPeriodFinder::Add(uint64_t signature, int64_t time_ns, std::vector<LaunchIteration>* out) {
  const uint64_t pos = n_++;
  sig_[pos & mask_] = signature;
  time_[pos & mask_] = time_ns;
  const uint64_t distance = UpdateHash(pos);
  if (locked_) {
    Track(pos, out);
  } else {
    Search(pos, distance, out);
  }
}

void LaunchPeriodFinder::AddWait(uint64_t signature) {
  const uint64_t next = n_;
  newest_wait_ = next;
  auto run = std::find_if(waits_.begin(), waits_.end(), [&](const WaitRun& w) { return w.signature == signature; });
  if (run == waits_.end()) {
    if (waits_.size() < kMaxWaitCalls) {
      run = waits_.emplace(waits_.end());
    } else {
      run = std::min_element(waits_.begin(), waits_.end(),
                             [](const WaitRun& a, const WaitRun& b) { return a.last_seen < b.last_seen; });
      run->positions.clear();
    }
    run->signature = signature;
  }
  run->last_seen = next;
  if (!run->positions.empty() && run->positions.back() == next) return;  // the same wait again
  if (run->positions.size() == kWaitSeries) run->positions.erase(run->positions.begin());
  run->positions.push_back(next);
}

uint64_t LaunchPeriodFinder::UpdateHash(uint64_t pos) {
  hash_ = hash_ * kHashBase + Mix(Sig(pos));
  if (pos >= options_.kgram) hash_ -= Mix(Sig(pos - options_.kgram)) * base_pow_k_;
  uint64_t distance = 0;
  if (pos + 1 >= options_.kgram) {
    Slot& slot = table_[(hash_ * 0xD6E8FEB86659FD93ull) >> (64 - kTableLog2)];
    if (slot.pos_plus_one != 0 && slot.hash == hash_) distance = pos - (slot.pos_plus_one - 1);
    slot.hash = hash_;
    slot.pos_plus_one = pos + 1;
  }
  previous_distance_[pos & mask_] = distance <= UINT32_MAX ? static_cast<uint32_t>(distance) : 0;
  return distance;
}

uint64_t LaunchPeriodFinder::BackwardRun(uint64_t pos, uint32_t period) const {
  // Enough to evaluate every multiple; longer runs add nothing but cost.
  const uint64_t cap = uint64_t{3} * options_.max_multiple * period + period;
  uint64_t run = 0;
  for (uint64_t j = pos; j >= period && Have(j - period) && Sig(j) == Sig(j - period); --j) {
    if (++run >= cap) break;
  }
  return run;
}

void LaunchPeriodFinder::Search(uint64_t pos, uint64_t distance, std::vector<LaunchIteration>* out) {
  for (size_t i = 0; i < candidates_.size();) {
    Candidate& c = candidates_[i];
    if (pos >= c.period && Have(pos - c.period) && Sig(pos) == Sig(pos - c.period)) {
      ++c.run;
      ++i;
    } else {
      candidates_[i] = candidates_.back();
      candidates_.pop_back();
    }
  }
  if (distance >= 1 && distance <= options_.max_period && pos >= distance && Have(pos - distance) &&
      Sig(pos) == Sig(pos - distance)) {
    const auto period = static_cast<uint32_t>(distance);
    const bool known =
        std::any_of(candidates_.begin(), candidates_.end(), [&](const Candidate& c) { return c.period == period; });
    if (!known) {
      candidates_.push_back(Candidate{period, BackwardRun(pos, period), 1});
      if (candidates_.size() > kMaxCandidates) {
        auto weakest = std::min_element(candidates_.begin(), candidates_.end(),
                                        [](const Candidate& a, const Candidate& b) { return a.run < b.run; });
        *weakest = candidates_.back();
        candidates_.pop_back();
      }
    }
  }
  // The smallest period that has repeated three times decides; a larger one waits for it.
  std::sort(candidates_.begin(), candidates_.end(),
            [](const Candidate& a, const Candidate& b) { return a.period < b.period; });
  for (Candidate& c : candidates_) {
    if (c.run < uint64_t{2} * c.period || Nested(pos, c)) continue;
    TryLock(pos, &c, out);
    return;
  }
}

bool LaunchPeriodFinder::Nested(uint64_t pos, const Candidate& c) const {
  // `e` is where the repetition began: the newest position that did not repeat at c.period.
  if (pos < c.run) return false;
  const uint64_t e = pos - c.run;
  if (e < c.period || !Have(e - c.period) || Sig(e) == Sig(e - c.period)) return false;  // history or cap
  // The first k-gram of the repetition (starting at e, so none of it precedes the repetition);
  // until it has been seen the question stays open.
  const uint64_t probe = e + options_.kgram - 1;
  if (probe > pos) return true;
  const uint64_t outer = previous_distance_[probe & mask_];
  // That k-gram ran before, further back than one period: the repetition sits inside a longer
  // one (layers inside a forward pass) unless it has outlasted three of the longer periods.
  return outer > c.period && c.run < 3 * outer;
}

bool LaunchPeriodFinder::TryLock(uint64_t pos, Candidate* c, std::vector<LaunchIteration>* out) {
  const uint32_t p = c->period;
  const uint64_t verified_start = pos + 1 - (c->run + p);
  while (true) {
    const uint64_t length = uint64_t{c->multiple} * p;
    const bool can_try =
        c->multiple <= options_.max_multiple && length <= options_.max_period && 3 * length + 1 <= history_;
    if (!can_try) break;
    // Three whole repetitions of the multiple, and the launch before them for the first gap.
    if (c->run + p < 3 * length || pos < 3 * length) return false;
    const GapOutcome g = Gaps(pos, static_cast<uint32_t>(length));
    if (c->multiple == 1) {
      c->fallback_top = g.top;
      c->have_fallback = true;
    }
    if (g.clear) {
      // With one launch per repetition there is no other gap to be distinct from.
      Lock(pos, static_cast<uint32_t>(length), g.top, verified_start, length == 1, out);
      return true;
    }
    if (!g.hint) break;
    ++c->multiple;
  }
  if (!c->have_fallback) {
    if (pos < 3 * uint64_t{p}) return false;
    c->fallback_top = Gaps(pos, p).top;
  }
  // The fallback top was found on an earlier launch; any position congruent to it is a top.
  const uint64_t newest = pos + 1 - p;
  const uint64_t top = newest + (c->fallback_top + p - newest % p) % p;
  // No gap decided: on probation unless one phase's gaps stand out all the same in the newest
  // three repetitions (not the first ones seen: a program's first steps pay its start-up).
  Lock(pos, p, top, verified_start, !StandoutPhase(pos, p), out);
  return true;
}

LaunchPeriodFinder::GapOutcome LaunchPeriodFinder::Gaps(uint64_t pos, uint32_t length) {
  const uint64_t w0 = pos + 1 - 3 * uint64_t{length};
  gap_sum_.assign(length, 0);
  int64_t first[3];
  int64_t second[3];
  uint32_t arg[3];
  for (int r = 0; r < 3; ++r) {
    first[r] = -1;
    second[r] = -1;
    arg[r] = 0;
    for (uint32_t phase = 0; phase < length; ++phase) {
      // Launches from several threads reach the finder in claim order, which can invert two
      // nearby timestamps; a negative gap is no gap.
      const int64_t g = std::max<int64_t>(0, Gap(w0 + uint64_t{length} * static_cast<uint64_t>(r) + phase));
      gap_sum_[phase] += g;
      if (g > first[r]) {
        second[r] = first[r];
        first[r] = g;
        arg[r] = phase;
      } else if (g > second[r]) {
        second[r] = g;
      }
    }
  }
  GapOutcome outcome;
  const int64_t lo = std::min({first[0], first[1], first[2]});
  const int64_t hi = std::max({first[0], first[1], first[2]});
  const bool spread_ok =
      lo > 0 ? static_cast<double>(hi) <= options_.gap_spread_ratio * static_cast<double>(lo) : hi == 0;
  bool distinct = arg[0] == arg[1] && arg[1] == arg[2];
  for (int r = 0; r < 3 && distinct; ++r) {
    distinct = first[r] > 0 && static_cast<double>(first[r]) >=
                                   options_.distinct_gap_ratio * static_cast<double>(std::max<int64_t>(0, second[r]));
  }
  outcome.clear = distinct && spread_ok;
  outcome.hint = !spread_ok;
  uint32_t phase = arg[2];
  if (!outcome.clear) {
    phase = static_cast<uint32_t>(std::max_element(gap_sum_.begin(), gap_sum_.end()) - gap_sum_.begin());
  }
  outcome.top = w0 + 2 * uint64_t{length} + phase;
  return outcome;
}

// Both below read the three repetitions of `length` ending at `pos` (pos + 1 >= 3·length: a
// lock is only tried then).
int64_t LaunchPeriodFinder::MedianRepetitionGap(uint64_t pos, uint32_t length) const {
  const uint64_t w0 = pos + 1 - 3 * uint64_t{length};
  int64_t largest[3] = {0, 0, 0};
  for (uint64_t r = 0; r < 3; ++r) {
    for (uint64_t phase = 0; phase < length; ++phase) largest[r] = std::max(largest[r], Gap(w0 + r * length + phase));
  }
  std::sort(std::begin(largest), std::end(largest));
  return largest[1];
}

bool LaunchPeriodFinder::StandoutPhase(uint64_t pos, uint32_t length) {
  if (length < 2) return false;
  const uint64_t w0 = pos + 1 - 3 * uint64_t{length};
  phase_median_.resize(length);
  for (uint32_t phase = 0; phase < length; ++phase) {
    int64_t g[3];
    for (uint64_t r = 0; r < 3; ++r) g[r] = std::max<int64_t>(0, Gap(w0 + r * length + phase));
    phase_median_[phase] = std::max(std::min(g[0], g[1]), std::min(std::max(g[0], g[1]), g[2]));
  }
  const int64_t top = *std::max_element(phase_median_.begin(), phase_median_.end());
  auto middle = phase_median_.begin() + length / 2;
  std::nth_element(phase_median_.begin(), middle, phase_median_.end());
  return top > 0 && static_cast<double>(top) >= options_.distinct_gap_ratio * static_cast<double>(*middle);
}

void LaunchPeriodFinder::Lock(uint64_t pos, uint32_t length, uint64_t top, uint64_t verified_start, bool probation,
                              std::vector<LaunchIteration>* out) {
  std::vector<uint64_t> new_template(length);
  for (uint32_t j = 0; j < length; ++j) new_template[j] = Sig(top - length + j);
  // A lock dropped by a glitch and taken again on the same launches continues its loop, so a
  // window open on it stays open.
  const bool same_loop = loop_ > 0 && SameUpToRotation(previous_template_, new_template);
  if (!same_loop) {
    ++loop_;
    loop_index_ = 0;
  }
  template_ = std::move(new_template);
  length_ = length;
  locked_ = true;
  uint64_t first = top;
  while (first >= length && first - length >= verified_start && first - length >= emitted_until_) first -= length;
  for (uint64_t t = first; t < top; t += length) pending_.push_back(Make(t, t + length));
  Publish(out);
  iteration_start_ = top;
  position_ = static_cast<uint32_t>(pos - top + 1);
  consecutive_mismatches_ = 0;
  iteration_mismatches_ = 0;
  emitted_until_ = std::max(emitted_until_, top);
  candidates_.clear();
  // The launches after the top already seen must match the template too.
  for (uint64_t j = top; j <= pos; ++j) {
    if (Sig(j) != template_[j - top]) ++iteration_mismatches_;
  }
  verified_start_ = std::min(verified_start, top);
  probation_ = probation;
  base_gap_ = probation ? MedianRepetitionGap(pos, length) : 0;
  outliers_.clear();
}

void LaunchPeriodFinder::Track(uint64_t pos, std::vector<LaunchIteration>* out) {
  if (position_ == length_) {
    // An iteration whose last launches did not match waits for the next match: if the lock
    // is lost instead, it was no iteration of this loop.
    pending_.push_back(Make(iteration_start_, pos));
    if (consecutive_mismatches_ == 0) Publish(out);
    iteration_start_ = pos;
    position_ = 0;
    iteration_mismatches_ = 0;
  }
  const bool match = Sig(pos) == template_[position_];
  ++position_;
  if (match) {
    consecutive_mismatches_ = 0;
    Publish(out);
    if (newest_wait_ == pos && StepEndsInWait(pos, out)) return;
    if (probation_) Probation(pos, out);
    return;
  }
  ++consecutive_mismatches_;
  ++iteration_mismatches_;
  const uint32_t allowed = std::max(options_.max_mismatches, length_ / 8);
  if (consecutive_mismatches_ >= options_.max_mismatches || iteration_mismatches_ > allowed) {
    locked_ = false;
    ++lost_;
    loop_index_ -= pending_.size();
    pending_.clear();
    previous_template_ = std::move(template_);
    template_.clear();
    candidates_.clear();
    consecutive_mismatches_ = 0;
  }
}

void LaunchPeriodFinder::Probation(uint64_t pos, std::vector<LaunchIteration>* out) {
  const int64_t gap = Gap(pos);
  if (gap <= 0 || static_cast<double>(gap) < options_.distinct_gap_ratio * static_cast<double>(base_gap_)) return;
  // Candidates for an outer top: gaps distinct from the lock's own. A CPU-bound loop has
  // stray ones too (a slow launch, the interpreter), as large as its tops at times, so the tops
  // are told by their regularity alone: the same launch, every S launches, six times.
  if (outliers_.size() == kProbationOutliers) outliers_.erase(outliers_.begin());
  outliers_.push_back(Outlier{pos, gap});
  auto at = [&](uint64_t position) {
    const auto it = std::lower_bound(outliers_.begin(), outliers_.end(), position,
                                     [](const Outlier& o, uint64_t p) { return o.position < p; });
    return it != outliers_.end() && it->position == position ? it->gap : int64_t{0};
  };
  const uint64_t phase = pos - iteration_start_;
  // The smallest spacing, in whole periods, with a candidate at each of the five positions
  // before this one, the six gaps of one size (gap_spread_ratio).
  for (size_t i = outliers_.size() - 1; i-- > 0;) {
    const uint64_t spacing = pos - outliers_[i].position;
    if (spacing > options_.max_period || kProbationSeries * spacing > pos) break;
    if (spacing % length_ != 0) continue;
    int64_t lo = gap;
    int64_t hi = gap;
    uint64_t k = 1;
    for (; k < kProbationSeries; ++k) {
      const int64_t g = at(pos - k * spacing);
      if (g == 0) break;
      lo = std::min(lo, g);
      hi = std::max(hi, g);
    }
    if (k < kProbationSeries || static_cast<double>(hi) > options_.gap_spread_ratio * static_cast<double>(lo)) continue;
    if (spacing == length_ && phase == 0) {
      probation_ = false;  // every iteration starts after the distinct gap: the lock is right
      return;
    }
    // The iteration in progress ends here, unfinished (it is no iteration of either loop); the
    // first of the outer loop starts with this launch. A moved top keeps the loop's id (the
    // template rotated); a longer loop gets a new one.
    previous_template_ = template_;
    Lock(pos, static_cast<uint32_t>(spacing), pos, pos, false, out);
    return;
  }
}

bool LaunchPeriodFinder::WaitsEveryIteration() const {
  for (const WaitRun& w : waits_) {
    const std::vector<uint64_t>& at = w.positions;
    if (at.size() >= 2 && at[at.size() - 2] >= verified_start_ && at.back() - at[at.size() - 2] == length_ &&
        n_ - at.back() <= 2 * uint64_t{length_}) {
      return true;
    }
  }
  return false;
}

uint64_t LaunchPeriodFinder::OuterSpacing(const WaitRun& w, size_t* seen) const {
  const auto first = std::lower_bound(w.positions.begin(), w.positions.end(), verified_start_);
  *seen = static_cast<size_t>(w.positions.end() - first);
  if (*seen < 2) return 0;
  const uint64_t spacing = w.positions.back() - *(w.positions.end() - 2);
  // A wait in every iteration (spacing P) is part of the step already.
  if (spacing <= length_ || spacing % length_ != 0 || spacing > options_.max_period) return 0;
  for (auto it = first + 1; it != w.positions.end(); ++it) {
    if (*it - *(it - 1) != spacing) return 0;
  }
  return spacing;
}

bool LaunchPeriodFinder::settled() const {
  if (!locked_) return false;
  // The iteration spans from wait to wait already: other waits (a one-off sync, a log every
  // ten steps) make no longer step.
  if (WaitsEveryIteration()) return true;
  const uint64_t horizon = std::min<uint64_t>(options_.max_period, kWaitHorizon * length_);
  bool waited = false;
  for (const WaitRun& w : waits_) {
    size_t seen = 0;
    const uint64_t spacing = OuterSpacing(w, &seen);
    if (seen == 0) continue;
    waited = true;
    const uint64_t since = n_ - w.positions.back();
    if (seen == 1 ? since <= horizon : spacing != 0 && since <= spacing + length_) return false;
  }
  // No wait in the lock yet from a program that has waited before: the first may still come,
  // at the end of a step of up to kWaitHorizon periods. One that never waited is taken at its
  // word.
  return waited || waits_.empty() || n_ - verified_start_ > horizon;
}

bool LaunchPeriodFinder::StepEndsInWait(uint64_t pos, std::vector<LaunchIteration>* out) {
  if (WaitsEveryIteration()) return false;
  for (const WaitRun& w : waits_) {
    size_t seen = 0;
    const uint64_t spacing = OuterSpacing(w, &seen);
    if (seen < kWaitSeries || w.positions.back() != pos || spacing == 0) continue;
    // As when probation re-locks: the iteration in progress ends here, unfinished, and the
    // first of the longer loop starts with this launch.
    previous_template_ = template_;
    Lock(pos, static_cast<uint32_t>(spacing), pos, pos, false, out);
    return true;
  }
  return false;
}

LaunchIteration LaunchPeriodFinder::Make(uint64_t first, uint64_t next_first) {
  LaunchIteration it;
  it.first_launch = first;
  it.start_ns = Time(first);
  it.end_ns = Time(next_first);
  it.launches = static_cast<uint32_t>(next_first - first);
  it.loop = loop_;
  it.loop_index = loop_index_++;
  return it;
}

void LaunchPeriodFinder::Publish(std::vector<LaunchIteration>* out) {
  for (const LaunchIteration& it : pending_) {
    out->push_back(it);
    emitted_until_ = it.first_launch + it.launches;
  }
  pending_.clear();
}

}  // namespace emo::runtime
