// libFuzzer target: the Kineto (PyTorch profiler) JSON trace reader, gzip included.
#include "trace_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return emo::fuzz::FuzzTraceReader("kineto-json", data, size);
}
