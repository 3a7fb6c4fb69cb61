// Checking CUPTI calls in the injection library: a failed call prints one line
// "emo trace: <call> failed: <CUPTI's message>" to stderr and the caller decides what to do.
// Never aborts: the library runs inside someone else's program.
#pragma once

#include <cupti.h>

namespace emo::runtime {

// Prints the failure of `call` (at most a few dozen lines per process, so a call failing in a
// loop cannot flood the program's output).
void ReportCuptiError(const char* call, CUptiResult result);

// CUPTI's name for `result` ("CUPTI_ERROR_UNKNOWN"), or "CUPTI error <n>".
const char* CuptiResultString(CUptiResult result);

inline bool CuptiOk(CUptiResult result, const char* call) {
  if (result == CUPTI_SUCCESS) return true;
  ReportCuptiError(call, result);
  return false;
}

}  // namespace emo::runtime

// Evaluates a CUPTI call; true on success, otherwise reports it (see above) and yields false.
#define EMO_CUPTI_OK(call) ::emo::runtime::CuptiOk((call), #call)
