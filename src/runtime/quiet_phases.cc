#include "emo/runtime/quiet_phases.h"

#include <algorithm>

namespace emo::runtime {

QuietPhases::Action QuietPhases::Poll(int64_t now_ns, bool settled, bool detached, int64_t detached_at_ns) {
  switch (phase_) {
    case Phase::kWaiting:
      if (settled && !detached) Begin(Phase::kEngaged, now_ns);
      return Action::kNone;
    case Phase::kEngaged:
      if (detached) {  // detached by something else (a block's end): quiet from then on
        Begin(Phase::kQuiet, detached_at_ns);
        return Action::kNone;
      }
      if (now_ns - since_ns_ < phase_ns_) return Action::kNone;
      Begin(Phase::kDetaching, now_ns);
      return Action::kDetach;
    case Phase::kDetaching:
      // The detach waits for the program's next call that waits for the GPU; a loop that makes
      // none for a whole phase is detached at any call's exit.
      if (detached) {
        Begin(Phase::kQuiet, detached_at_ns);
        return Action::kNone;
      }
      if (asked_any_exit_ || now_ns - since_ns_ < phase_ns_) return Action::kNone;
      asked_any_exit_ = true;
      return Action::kDetachAtAnyExit;
    case Phase::kQuiet:
      if (!detached) {  // attached again by something else
        Begin(Phase::kAfter, now_ns);
        return Action::kNone;
      }
      if (now_ns - since_ns_ < phase_ns_) return Action::kNone;
      Begin(Phase::kAfter, now_ns);
      return Action::kReattach;
    case Phase::kAfter:
      return Action::kNone;
  }
  return Action::kNone;
}

void QuietPhases::Begin(Phase phase, int64_t time_ns) {
  phase_ = phase;
  since_ns_ = time_ns;
  asked_any_exit_ = false;
  marks_.push_back({phase, time_ns});
}

uint64_t QuietPhases::quiet_phases() const {
  return static_cast<uint64_t>(
      std::count_if(marks_.begin(), marks_.end(), [](const Mark& m) { return m.phase == Phase::kQuiet; }));
}

const char* QuietPhaseName(QuietPhases::Phase phase) {
  switch (phase) {
    case QuietPhases::Phase::kWaiting:
      return "waiting";
    case QuietPhases::Phase::kEngaged:
      return "engaged";
    case QuietPhases::Phase::kDetaching:
      return "detaching";
    case QuietPhases::Phase::kQuiet:
      return "quiet";
    case QuietPhases::Phase::kAfter:
      return "after";
  }
  return "waiting";
}

std::string QuietMarksText(const std::vector<QuietPhases::Mark>& marks) {
  std::string text;
  for (const QuietPhases::Mark& m : marks) {
    text += QuietPhaseName(m.phase);
    text += ' ';
    text += std::to_string(m.time_ns);
    text += '\n';
  }
  return text;
}

}  // namespace emo::runtime
