// The injection library's threads carry names, so that a user sees them in `top -H`, `ps -L`,
// gdb and /proc/<pid>/task/<tid>/comm, and a bench can add up the CPU time the tracer takes
// beside the program (bench/gpu/loop_common.py).
#pragma once

#include <pthread.h>

namespace emo::runtime {

// Names the calling thread (Linux keeps at most 15 characters; every name here is shorter). A
// thread left unnamed works the same, so a failure is ignored.
inline void NameThisThread(const char* name) { (void)pthread_setname_np(pthread_self(), name); }

}  // namespace emo::runtime
