#include "emo/runtime/anchor_finder.h"

#include <algorithm>

namespace emo::runtime {

AnchorFinder::AnchorFinder() : AnchorFinder(Options{}) {}
AnchorFinder::AnchorFinder(const Options& options) : options_(options) {}

void AnchorFinder::AddEvent(uint64_t signature, int64_t time_ns) {
  if (events_.size() == options_.max_events) {
    dropped_until_ns_ = events_.front().time_ns + 1;
    events_.pop_front();
  }
  events_.push_back({signature, time_ns});
}

void AnchorFinder::AddIteration(const LaunchIteration& it) {
  if (!have_loop_ || it.loop != loop_) {
    candidates_.clear();
    durations_.clear();
    have_loop_ = true;
    loop_ = it.loop;
    period_ = it.launches;
  }
  while (!events_.empty() && events_.front().time_ns < it.start_ns) events_.pop_front();
  if (it.start_ns < dropped_until_ns_) {
    // Calls of this iteration were dropped: its counts are unknown, so no run goes through it.
    candidates_.clear();
    return;
  }
  durations_.push_back(it.end_ns - it.start_ns);
  if (durations_.size() > options_.stable_iterations) durations_.pop_front();

  // Occurrences in [start, end) per signature; the calls stay for the next iteration to drop.
  std::vector<Candidate> seen;
  for (const Event& e : events_) {
    if (e.time_ns >= it.end_ns) break;
    auto c = std::find_if(seen.begin(), seen.end(), [&](const Candidate& x) { return x.signature == e.signature; });
    if (c == seen.end()) {
      seen.push_back({e.signature, 1, 0});
    } else {
      ++c->count;
    }
  }
  // A tracked call absent from this iteration breaks its run; a present one extends it when
  // its count repeats. Tracked calls keep their order (first appearance breaks ties in choice()).
  std::vector<Candidate> next;
  for (const Candidate& old : candidates_) {
    const auto s = std::find_if(seen.begin(), seen.end(), [&](const Candidate& x) { return x.signature == old.signature; });
    if (s == seen.end()) continue;
    next.push_back({old.signature, s->count, s->count == old.count ? old.run + 1 : 1});
    s->run = 1;  // taken
  }
  for (const Candidate& s : seen) {
    if (s.run == 0 && next.size() < options_.max_signatures) next.push_back({s.signature, s.count, 1});
  }
  candidates_ = std::move(next);
}

std::optional<AnchorChoice> AnchorFinder::choice() const {
  const Candidate* best = nullptr;
  for (const Candidate& c : candidates_) {
    if (c.run < options_.stable_iterations || c.count == 0 || c.count > options_.max_count) continue;
    if (best == nullptr || c.count < best->count) best = &c;
  }
  if (best == nullptr || durations_.empty()) return std::nullopt;
  std::vector<int64_t> d(durations_.begin(), durations_.end());
  std::nth_element(d.begin(), d.begin() + static_cast<ptrdiff_t>(d.size() / 2), d.end());
  AnchorChoice a;
  a.signature = best->signature;
  a.count = best->count;
  a.median_ns = d[d.size() / 2];
  a.loop = loop_;
  a.period = period_;
  return a;
}

void AnchorFinder::Reset() {
  events_.clear();
  dropped_until_ns_ = INT64_MIN;
  candidates_.clear();
  have_loop_ = false;
  durations_.clear();
}

AnchorFollower::AnchorFollower(const AnchorChoice& choice, int64_t now_ns)
    : AnchorFollower(choice, now_ns, Options{}) {}
AnchorFollower::AnchorFollower(const AnchorChoice& choice, int64_t now_ns, const Options& options)
    : choice_(choice), options_(options), last_ns_(now_ns) {}

AnchorFollower::Result AnchorFollower::OnEvent(uint64_t signature, int64_t time_ns, AnchorIteration* out) {
  if (signature != choice_.signature) return Result::kNone;
  last_ns_ = time_ns;
  if (start_ns_ == INT64_MIN) {  // the first occurrence starts the first iteration
    start_ns_ = time_ns;
    seen_ = 0;
    return Result::kNone;
  }
  if (++seen_ < choice_.count) return Result::kNone;
  const int64_t duration = time_ns - start_ns_;
  if (static_cast<double>(duration) < options_.short_ratio * static_cast<double>(choice_.median_ns)) {
    return Result::kLost;
  }
  out->start_ns = start_ns_;
  out->end_ns = time_ns;
  start_ns_ = time_ns;
  seen_ = 0;
  return Result::kIteration;
}

bool AnchorFollower::Silent(int64_t now_ns) const {
  const auto limit = std::max<int64_t>(options_.min_silence_ns,
                                       static_cast<int64_t>(options_.silence_ratio * static_cast<double>(choice_.median_ns)));
  return now_ns - last_ns_ > limit;
}

}  // namespace emo::runtime
