#include "emo/runtime/trace_window.h"

namespace emo::runtime {

TraceWindow::TraceWindow(int64_t warmup, int64_t iterations, bool pretrace, int max_windows)
    : warmup_(warmup < 0 ? 0 : warmup),
      iterations_(iterations < 1 ? 1 : iterations),
      max_windows_(max_windows),
      state_(pretrace ? State::kPretrace : State::kArmed),
      enabled_(pretrace) {}

TraceWindow::Action TraceWindow::Set(bool on) {
  if (on == enabled_) return Action::kNone;
  enabled_ = on;
  return on ? Action::kEnable : Action::kDisable;
}

TraceWindow::Action TraceWindow::OnIterationStart(uint64_t index, uint64_t loop, uint64_t loop_index, uint64_t period) {
  const bool new_loop = !have_loop_ || loop != loop_;
  if (new_loop && have_loop_) {
    const bool can_take = static_cast<int>(windows_.size()) < max_windows_;
    if (state_ == State::kOpen) {
      // The window's loop ended before its iterations were all seen: what it holds up to this
      // iteration was traced; take a new window on the new loop if allowed.
      Window& w = windows_.back();
      if (w.end > index) w.end = w.first <= index ? index : w.first;
      state_ = can_take ? State::kArmed : State::kDone;
    } else if (state_ == State::kDone && can_take && period > window_period_) {
      state_ = State::kArmed;
    }
  }
  have_loop_ = true;
  loop_ = loop;
  const auto n = static_cast<int64_t>(loop_index);
  const auto j = static_cast<int64_t>(index);
  switch (state_) {
    case State::kPretrace: {
      if (n >= warmup_) {
        // Pretrace recorded the loop's iterations from `warmup` on already.
        const auto first = static_cast<uint64_t>(j - (n - warmup_));
        windows_.push_back({first, first + static_cast<uint64_t>(iterations_), loop, false});
        window_period_ = period;
        if (index >= windows_.back().end) {
          windows_.back().complete = true;
          state_ = State::kDone;
          return Set(false);
        }
        state_ = State::kOpen;
        return Action::kNone;
      }
      if (n + 1 == warmup_) {
        windows_.push_back({index + 1, index + 1 + static_cast<uint64_t>(iterations_), loop, false});
        window_period_ = period;
        state_ = State::kOpen;
        return Action::kNone;
      }
      state_ = State::kArmed;
      return Set(false);
    }
    case State::kArmed: {
      if (n + 1 < warmup_) return Set(false);
      // This iteration started before activities go on: the lead-in, not traced.
      windows_.push_back({index + 1, index + 1 + static_cast<uint64_t>(iterations_), loop, false});
      window_period_ = period;
      state_ = State::kOpen;
      return Set(true);
    }
    case State::kOpen: {
      if (index >= windows_.back().end) {
        windows_.back().complete = true;
        state_ = State::kDone;
        return Set(false);
      }
      return Set(true);
    }
    case State::kDone:
      return Set(false);
  }
  return Action::kNone;
}

bool TraceWindow::Traced(uint64_t index) const {
  for (const Window& w : windows_) {
    if (index >= w.first && index < w.end) return true;
  }
  return false;
}

std::string NvtxIterationKey(std::string_view name) {
  std::string key;
  key.reserve(name.size());
  bool in_digits = false;
  for (const char c : name) {
    const bool digit = c >= '0' && c <= '9';
    if (digit && !in_digits) key += 'N';
    if (!digit) key += c;
    in_digits = digit;
  }
  return key;
}

}  // namespace emo::runtime
