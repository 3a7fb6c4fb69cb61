// The injection library's threads carry names, so that a user sees them in `top -H`, `ps -L`,
// gdb and /proc/<pid>/task/<tid>/comm, and a bench can add up the CPU time the tracer takes
// beside the program (bench/gpu/loop_common.py).
#pragma once

#include <pthread.h>

#include <thread>
#include <utility>

namespace emo::runtime {

// Starts a thread that names itself `name` (a string literal: Linux keeps at most 15
// characters, and every name here is shorter), then runs `body`. A thread left unnamed works the
// same, so a failure to name it is ignored.
template <typename Body>
std::thread StartNamedThread(const char* name, Body body) {
  return std::thread([name, body = std::move(body)]() mutable {
    (void)pthread_setname_np(pthread_self(), name);
    body();
  });
}

}  // namespace emo::runtime
