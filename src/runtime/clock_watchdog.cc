#include "emo/runtime/clock_watchdog.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>

#include <fmt/format.h>

#include "nvml_library.h"

namespace emo::runtime {
namespace {

// The watchdog process: returns its exit status.
int Watch(int fd, const std::string& actuator, const ActuatorOptions& options, const std::string& journal) {
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE}) signal(sig, SIG_IGN);
  char byte;
  while (read(fd, &byte, 1) != 0) {
    if (errno != EINTR && errno != 0) break;
    errno = 0;
  }
  close(fd);
  std::ifstream in(journal);
  std::set<std::string> gpus;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) gpus.insert(line);
  }
  if (gpus.empty()) return 0;
  std::string error;
  const auto a = MakeActuator(actuator, options, &error);
  if (a == nullptr) {
    std::fprintf(stderr, "emo run: watchdog: cannot reset the clocks of %zu GPU(s) listed in %s: %s\n", gpus.size(),
                 journal.c_str(), error.c_str());
    return 1;
  }
  int status = 0;
  for (const auto& pci : gpus) {
    ActuatorGpu gpu;
    const int slot = a->Open(pci, &gpu, &error);
    if (slot < 0 || !a->Reset(slot, "watchdog", &error)) {
      std::fprintf(stderr, "emo run: watchdog: the clocks of %s could not be reset: %s\n", pci.c_str(), error.c_str());
      status = 1;
      continue;
    }
    std::fprintf(stderr, "emo run: watchdog: %s back to its default clocks (%s)\n", pci.c_str(), a->kind());
  }
  return status;
}

}  // namespace

Result<ClockWatchdog> StartClockWatchdog(const std::string& actuator, const ActuatorOptions& options,
                                         const std::string& journal) {
  if (!IsActuatorKind(actuator)) return InvalidArgument(fmt::format("unknown actuator '{}'", actuator));
  int fds[2];
  if (pipe(fds) != 0) return IoError(fmt::format("cannot start the clock watchdog: pipe: {}", std::strerror(errno)));
  // The program must not hold the write end (it would keep the watchdog waiting after emo died).
  fcntl(fds[1], F_SETFD, FD_CLOEXEC);
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return IoError(fmt::format("cannot start the clock watchdog: fork: {}", std::strerror(errno)));
  }
  if (pid == 0) {
    close(fds[1]);
    // Its own session: a Ctrl-C or a hang-up for the terminal's process group passes it by.
    setsid();
    _exit(Watch(fds[0], actuator, options, journal));
  }
  close(fds[0]);
  return ClockWatchdog{pid, fds[1]};
}

Status FinishClockWatchdog(ClockWatchdog* w, const std::string& journal) {
  if (w->fd >= 0) close(w->fd);
  w->fd = -1;
  if (w->pid <= 0) return Status::Ok();
  int status = 0;
  pid_t got;
  do {
    got = waitpid(w->pid, &status, 0);
  } while (got < 0 && errno == EINTR);
  w->pid = -1;
  if (got < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return IoError(fmt::format("the clock watchdog could not reset every GPU listed in {} (its lines above say "
                               "which); reset them by hand: nvidia-smi -rgc",
                               journal));
  }
  return Status::Ok();
}

std::vector<std::string> ListGpus(const ActuatorOptions& options, std::string* error) {
  NvmlLibrary nvml;
  if (!nvml.Load(options.nvml_library, /*control=*/false, error)) return {};
  return nvml.Names(error);
}

}  // namespace emo::runtime
