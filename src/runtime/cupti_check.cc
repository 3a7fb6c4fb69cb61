#include "cupti_check.h"

#include <atomic>
#include <cstdio>

namespace emo::runtime {
namespace {

constexpr int kMaxReports = 32;
std::atomic<int> g_reports{0};

}  // namespace

const char* CuptiResultString(CUptiResult result) {
  const char* text = nullptr;
  if (cuptiGetResultString(result, &text) == CUPTI_SUCCESS && text != nullptr) return text;
  return "unknown CUPTI error";
}

void ReportCuptiError(const char* call, CUptiResult result) {
  const int n = g_reports.fetch_add(1, std::memory_order_relaxed);
  if (n < kMaxReports) {
    std::fprintf(stderr, "emo trace: %s failed: %s\n", call, CuptiResultString(result));
  } else if (n == kMaxReports) {
    std::fprintf(stderr, "emo trace: more CUPTI calls failed; not reporting them\n");
  }
}

}  // namespace emo::runtime
