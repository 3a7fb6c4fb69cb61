// libFuzzer target: the reader of EMO's own trace format (.emotrace), gzip included.
#include "trace_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return emo::fuzz::FuzzTraceReader("emo", data, size);
}
