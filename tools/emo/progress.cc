// The progress line (progress.h).
#include "progress.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>

#include <fmt/format.h>

namespace emo::cli {
namespace {
std::atomic<bool> g_quiet{false};
}  // namespace

void SetQuiet(bool quiet) { g_quiet = quiet; }

bool ProgressShown() { return !g_quiet && isatty(fileno(stderr)) == 1; }

struct Progress::State {
  std::mutex mutex;
  std::condition_variable wake;
  std::string text;
  bool done = false;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  std::thread painter;

  // Rewrites the line: carriage return, the text and the elapsed seconds, clear to its end.
  void Draw() {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    fmt::print(stderr, "\r{} ... {:.1f} s\x1b[K", text, s);
    std::fflush(stderr);
  }
};

Progress::Progress() {
  if (!ProgressShown()) return;
  state_ = std::make_unique<State>();
  state_->painter = std::thread([s = state_.get()] {
    std::unique_lock<std::mutex> lock(s->mutex);
    while (!s->wake.wait_for(lock, std::chrono::milliseconds(250), [s] { return s->done; })) {
      if (!s->text.empty()) s->Draw();
    }
  });
}

Progress::~Progress() {
  if (state_ == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->done = true;
    if (!state_->text.empty()) {
      fmt::print(stderr, "\r\x1b[K");
      std::fflush(stderr);
    }
  }
  state_->wake.notify_all();
  state_->painter.join();
}

void Progress::Say(std::string text) {
  if (state_ == nullptr) return;
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->text = std::move(text);
  state_->Draw();
}

}  // namespace emo::cli
