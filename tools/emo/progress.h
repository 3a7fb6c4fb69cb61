// Progress of long work (reading traces, planning, solving, calibrating) on stderr. Shown only
// when stderr is a terminal and --quiet was not given: one status line, rewritten in place as the
// work moves on, with the seconds since it began (redrawn every quarter second, so a long read
// shows it is alive), and cleared when the work ends. Not a terminal (a log, a pipe, the Python
// package's capture): nothing at all.
#pragma once

#include <memory>
#include <string>

namespace emo::cli {

// --quiet (every command): no progress even on a terminal.
void SetQuiet(bool quiet);
// Whether progress is shown: stderr is a terminal and not --quiet.
bool ProgressShown();

// The status line of one piece of long work, while it lives. Thread-safe.
class Progress {
 public:
  Progress();
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;
  // Replaces the line's text ("emo analyze: reading 3 of 8 traces (r2.json.gz)").
  void Say(std::string text);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace emo::cli
