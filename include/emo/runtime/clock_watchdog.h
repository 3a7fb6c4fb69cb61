// `emo run`'s clock watchdog: a process of its own that outlives whatever kills `emo run` or the
// program and then puts every GPU the program locked (the journal the injection library writes
// before its first lock) back to its default clocks.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "emo/base/status.h"
#include "emo/runtime/actuator.h"

namespace emo::runtime {

struct ClockWatchdog {
  pid_t pid = -1;
  int fd = -1;  // write end of the pipe the watchdog waits on; closing it (or dying) wakes it
};

// Starts the watchdog for `actuator` (its kind and options) and the journal file. It ignores
// SIGINT, SIGTERM and SIGHUP, waits until the pipe closes, resets each journalled GPU, writes one
// line per GPU on stderr ("emo run: watchdog: ...") and exits.
Result<ClockWatchdog> StartClockWatchdog(const std::string& actuator, const ActuatorOptions& options,
                                         const std::string& journal);

// Closes the pipe and waits for the watchdog's resets. Fails when the watchdog reported a GPU it
// could not reset (exit status 1), naming the journal.
Status FinishClockWatchdog(ClockWatchdog* w, const std::string& journal);

// The names of the GPUs NVML sees, by NVML index, read-only; empty with `error` set when NVML
// cannot be read. For `emo run`'s check of the policy's GPU model.
std::vector<std::string> ListGpus(const ActuatorOptions& options, std::string* error);

}  // namespace emo::runtime
