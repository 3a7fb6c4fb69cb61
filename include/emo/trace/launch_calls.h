// The kernel and graph launch calls of a trace as EMO's tracer counts them at run time
// (emo_format::IsCountedLaunchApi): a driver launch made inside a runtime launch of the same
// thread is that launch and is left out. What the policy's launch anchors count (docs/policy.md)
// and what `emo run` sets its switch times against.
#pragma once

#include <cstdint>
#include <vector>

#include "emo/trace/trace.h"

namespace emo::trace {

struct LaunchCall {
  TimeNs start = 0;
  TimeNs end = 0;
  uint32_t event = 0;  // index into Trace::cpu
};

// In start order.
std::vector<LaunchCall> CountedLaunchCalls(const Trace& t);

}  // namespace emo::trace
