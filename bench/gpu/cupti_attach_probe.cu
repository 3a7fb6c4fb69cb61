// What CUPTI costs a launch-bound loop when it is attached to a process whose CUDA context is
// already running (as `emo.trace` does for a block), phase by phase, and whether cuptiFinalize
// at the exit of a CUDA call delivers the records of work still running on the GPU.
//
// Each phase runs STEPS steps of LAUNCHES empty kernels and one stream sync, and prints the
// median and mean step time:
//   plain         no CUPTI
//   callbacks     subscribed, launch callbacks on (what a monitoring block costs)
//   activities    + the tracer's activity kinds enabled on the running context
//   disabled      activities disabled again and flushed
//   finalized     cuptiFinalize called at the exit of a launch: CUPTI detached
//   resubscribed  subscribed again, launch callbacks on
// Then activities go on again, a kernel of SPIN_MS is launched, and the next launch's exit
// callback calls cuptiFinalize: the probe prints how long that call took and whether the
// long kernel's record came through the buffer callback with its end time.
//
//   C=/usr/local/cuda; $C/bin/nvcc -O2 -arch=sm_90a -std=c++17 -I$C/include bench/gpu/cupti_attach_probe.cu \
//     -L$C/lib64 -lcupti -o probe && LD_LIBRARY_PATH=$C/lib64 ./probe [STEPS=200] [LAUNCHES=500] [SPIN_MS=300]
// (CUDA 13 puts CUPTI beside the toolkit's own headers and libraries; older ones under extras/CUPTI.)
#include <cuda_runtime.h>
#include <cupti.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "cuda_ok.h"

#define CUPTI_OK(call)                                                                  \
  do {                                                                                  \
    CUptiResult r_ = (call);                                                            \
    if (r_ != CUPTI_SUCCESS) {                                                          \
      const char* s_ = nullptr;                                                         \
      cuptiGetResultString(r_, &s_);                                                    \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, s_ ? s_ : "?"); \
      std::exit(1);                                                                     \
    }                                                                                   \
  } while (0)

namespace {

__global__ void Empty() {}

__global__ void Spin(unsigned long long ns) {
  unsigned long long start = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  unsigned long long now = start;
  while (now - start < ns) asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
}

constexpr CUpti_ActivityKind kKinds[] = {
    CUPTI_ACTIVITY_KIND_RUNTIME,           CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET,
    CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,   CUPTI_ACTIVITY_KIND_CUDA_EVENT,
};

CUpti_SubscriberHandle g_subscriber = nullptr;
std::atomic<bool> g_detach{false};
std::atomic<bool> g_detached{false};
std::atomic<long long> g_finalize_ns{0};
std::atomic<long long> g_kernels{0};
std::atomic<long long> g_long_kernels{0};  // kernel records of at least half SPIN_MS, complete
long long g_long_ns = 0;

void CUPTIAPI OnCallback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId, const void* data) {
  if (domain != CUPTI_CB_DOMAIN_RUNTIME_API || !g_detach.load()) return;
  const auto* d = static_cast<const CUpti_CallbackData*>(data);
  if (d->callbackSite != CUPTI_API_EXIT || g_detach.exchange(false) == false) return;
  const auto t0 = std::chrono::steady_clock::now();
  CUPTI_OK(cuptiFinalize());
  g_finalize_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
  g_detached = true;
}

void CUPTIAPI OnBufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *size = 8 << 20;
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, *size));
  *max_records = 0;
}

void CUPTIAPI OnBufferCompleted(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) continue;
    const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
    ++g_kernels;
    if (k->end > k->start && static_cast<long long>(k->end - k->start) >= g_long_ns / 2) ++g_long_kernels;
  }
  std::free(buffer);
}

void Subscribe() {
  CUPTI_OK(cuptiSubscribe(&g_subscriber, &OnCallback, nullptr));
  CUPTI_OK(cuptiEnableCallback(1, g_subscriber, CUPTI_CB_DOMAIN_RUNTIME_API,
                               CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000));
  CUPTI_OK(cuptiActivityRegisterCallbacks(&OnBufferRequested, &OnBufferCompleted));
}

void SetActivities(bool on) {
  for (const CUpti_ActivityKind kind : kKinds) {
    if (on) {
      CUPTI_OK(cuptiActivityEnable(kind));
    } else {
      CUPTI_OK(cuptiActivityDisable(kind));
    }
  }
  if (!on) CUPTI_OK(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
}

// Detaches CUPTI at the exit of the next launch, as NVIDIA advises for cuptiFinalize.
void Detach(cudaStream_t stream) {
  g_detach = true;
  Empty<<<1, 1, 0, stream>>>();
  CUDA_OK(cudaGetLastError());
  if (!g_detached.exchange(false)) {
    std::fprintf(stderr, "the launch's exit callback did not detach CUPTI\n");
    std::exit(1);
  }
}

void Phase(const char* name, cudaStream_t stream, int steps, int launches) {
  std::vector<double> ms;
  ms.reserve(steps);
  for (int s = 0; s < steps; ++s) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < launches; ++i) Empty<<<1, 32, 0, stream>>>();
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaStreamSynchronize(stream));
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  double mean = 0;
  for (const double v : ms) mean += v;
  mean /= ms.size();
  std::nth_element(ms.begin(), ms.begin() + ms.size() / 2, ms.end());
  std::printf("phase %-13s median %.4f ms  mean %.4f ms  (%d steps of %d launches)\n", name, ms[ms.size() / 2], mean,
              steps, launches);
}

}  // namespace

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::atoi(argv[1]) : 200;
  const int launches = argc > 2 ? std::atoi(argv[2]) : 500;
  const int spin_ms = argc > 3 ? std::atoi(argv[3]) : 300;
  g_long_ns = static_cast<long long>(spin_ms) * 1'000'000;
  cudaStream_t stream = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  Phase("warm-up", stream, steps / 4 + 1, launches);

  Phase("plain", stream, steps, launches);
  Subscribe();
  Phase("callbacks", stream, steps, launches);
  SetActivities(true);
  Phase("activities", stream, steps, launches);
  SetActivities(false);
  Phase("disabled", stream, steps, launches);
  Detach(stream);
  std::printf("cuptiFinalize with nothing running took %.3f ms\n", g_finalize_ns.load() / 1e6);
  Phase("finalized", stream, steps, launches);
  Subscribe();
  Phase("resubscribed", stream, steps, launches);

  // Records of work still running when CUPTI detaches.
  SetActivities(true);
  g_kernels = 0;
  g_long_kernels = 0;
  Spin<<<1, 1, 0, stream>>>(static_cast<unsigned long long>(g_long_ns));
  CUDA_OK(cudaGetLastError());
  const auto t0 = std::chrono::steady_clock::now();
  Detach(stream);
  const double detach_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  const long long long_at_detach = g_long_kernels.load();
  CUDA_OK(cudaStreamSynchronize(stream));
  std::printf(
      "detach with a %d ms kernel running: cuptiFinalize took %.3f ms (the launch %.3f ms); kernel records delivered "
      "%lld, the long kernel's %s\n",
      spin_ms, g_finalize_ns.load() / 1e6, detach_ms, g_kernels.load(),
      long_at_detach > 0 ? "complete" : "missing");
  CUDA_OK(cudaStreamDestroy(stream));
  return 0;
}
