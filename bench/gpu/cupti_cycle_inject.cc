// Does CUPTI itself survive detaching and attaching every few hundred ms? A CUPTI injection
// library with nothing of EMO's in it, in the manner of CUPTI's cupti_finalize sample: a thread
// asks for a detach, the next driver or runtime API exit calls cuptiActivityFlushAll(1) and
// cuptiFinalize, and CYCLE_MS later the thread subscribes again (runtime and driver domains on).
// Detaches and attaches are counted and printed at exit, so a program that aborts under it
// shows CUPTI's own detach at fault, one that runs clean shows the fault in EMO's tracer.
//
// CYCLE_ACTIVITY=1: CYCLE_ACTIVITY_AT_MS after the start (default 0) CONCURRENT_KERNEL, RUNTIME
// and DRIVER records are on for CYCLE_ACTIVITY_MS (default 1000; buffers counted and freed),
// then off and flushed, and only then do the cycles begin, as `emo trace` traces its window
// before the quiet phases start. CYCLE_KINDS=emo: also MEMCPY, MEMCPY2, MEMSET, SYNCHRONIZATION,
// CUDA_EVENT and EXTERNAL_CORRELATION, the kinds `emo trace` enables (src/runtime/tracer.cc).
// CYCLE_TOGGLE=1: half a cycle after each attach the launch callbacks (cudaLaunchKernel,
// cuLaunchKernel and their variants) are turned off one by one (cuptiEnableCallback), and on
// again just before the detach is asked, as `emo trace`'s quiet phases do once the loop is
// followed by its sync and again to detach at any call.
//
//   C=/usr/local/cuda
//   g++ -O2 -std=c++17 -shared -fPIC -I$C/include bench/gpu/cupti_cycle_inject.cc -L$C/lib64 -lcupti -lpthread -o libcycle.so
//   CUDA_INJECTION64_PATH=$PWD/libcycle.so CYCLE_MS=250 [CYCLE_ACTIVITY=1] PROGRAM...
#include <cupti.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

#define CYCLE_OK(call) Check((call), #call, __LINE__)

bool Check(CUptiResult r, const char* what, int line) {
  if (r == CUPTI_SUCCESS) return true;
  const char* s = nullptr;
  cuptiGetResultString(r, &s);
  std::fprintf(stderr, "cupti_cycle:%d: %s: %s\n", line, what, s != nullptr ? s : "?");
  return false;
}

struct State {
  std::atomic<bool> detach_wanted{false};
  std::atomic<bool> stop{false};
  std::mutex mutex;
  std::condition_variable detached;
  bool detached_flag = false;
  std::atomic<long> detaches{0}, attaches{0}, records{0}, buffers{0};
  CUpti_SubscriberHandle subscriber = nullptr;
  int cycle_ms = 250;
  bool activity = false;
  int activity_at_ms = 0;
  int activity_ms = 1000;
  bool emo_kinds = false;
  bool toggle = false;
  std::thread thread;
};
State* g = nullptr;

constexpr size_t kBufferBytes = size_t{1} << 20;

void CUPTIAPI BufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = kBufferBytes;
  *max_records = 0;
}

void CUPTIAPI BufferCompleted(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) g->records.fetch_add(1);
  g->buffers.fetch_add(1);
  std::free(buffer);
}

void CUPTIAPI OnCallback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId, const void* data) {
  if (domain != CUPTI_CB_DOMAIN_RUNTIME_API && domain != CUPTI_CB_DOMAIN_DRIVER_API) return;
  if (static_cast<const CUpti_CallbackData*>(data)->callbackSite != CUPTI_API_EXIT) return;
  if (!g->detach_wanted.exchange(false)) return;
  CYCLE_OK(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
  CYCLE_OK(cuptiFinalize());
  g->detaches.fetch_add(1);
  std::lock_guard<std::mutex> lock(g->mutex);
  g->detached_flag = true;
  g->detached.notify_all();
}

bool Attach() {
  if (!CYCLE_OK(cuptiSubscribe(&g->subscriber, reinterpret_cast<CUpti_CallbackFunc>(OnCallback), nullptr))) return false;
  CYCLE_OK(cuptiEnableDomain(1, g->subscriber, CUPTI_CB_DOMAIN_RUNTIME_API));
  CYCLE_OK(cuptiEnableDomain(1, g->subscriber, CUPTI_CB_DOMAIN_DRIVER_API));
  g->attaches.fetch_add(1);
  return true;
}

std::vector<CUpti_ActivityKind> Kinds() {
  std::vector<CUpti_ActivityKind> kinds{CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_RUNTIME,
                                        CUPTI_ACTIVITY_KIND_DRIVER};
  if (g->emo_kinds) {
    kinds.insert(kinds.end(), {CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMCPY2, CUPTI_ACTIVITY_KIND_MEMSET,
                               CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, CUPTI_ACTIVITY_KIND_CUDA_EVENT,
                               CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION});
  }
  return kinds;
}

void SetLaunchCallbacks(bool on) {
  static constexpr CUpti_CallbackId kRuntime[] = {
      CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060, CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000};
  static constexpr CUpti_CallbackId kDriver[] = {CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx};
  for (const CUpti_CallbackId cbid : kRuntime) CYCLE_OK(cuptiEnableCallback(on, g->subscriber, CUPTI_CB_DOMAIN_RUNTIME_API, cbid));
  for (const CUpti_CallbackId cbid : kDriver) CYCLE_OK(cuptiEnableCallback(on, g->subscriber, CUPTI_CB_DOMAIN_DRIVER_API, cbid));
}

void Cycle() {
  if (g->activity) {
    std::this_thread::sleep_for(std::chrono::milliseconds(g->activity_at_ms));
    CYCLE_OK(cuptiActivityRegisterCallbacks(BufferRequested, BufferCompleted));
    for (const CUpti_ActivityKind kind : Kinds()) CYCLE_OK(cuptiActivityEnable(kind));
    std::this_thread::sleep_for(std::chrono::milliseconds(g->activity_ms));
    for (const CUpti_ActivityKind kind : Kinds()) CYCLE_OK(cuptiActivityDisable(kind));
    CYCLE_OK(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
  }
  while (!g->stop.load()) {
    if (g->toggle) {
      std::this_thread::sleep_for(std::chrono::milliseconds(g->cycle_ms / 2));
      SetLaunchCallbacks(false);
      std::this_thread::sleep_for(std::chrono::milliseconds(g->cycle_ms - g->cycle_ms / 2));
      SetLaunchCallbacks(true);
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(g->cycle_ms));
    }
    if (g->stop.load()) break;
    g->detach_wanted.store(true);
    {
      std::unique_lock<std::mutex> lock(g->mutex);
      // A program that makes no more API calls never detaches: give up after a second.
      if (!g->detached.wait_for(lock, std::chrono::seconds(1), [] { return g->detached_flag || g->stop.load(); })) {
        g->detach_wanted.store(false);
        continue;
      }
      if (!g->detached_flag) break;
      g->detached_flag = false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(g->cycle_ms));
    if (g->stop.load() || !Attach()) break;
  }
}

void AtExit() {
  g->stop.store(true);
  {
    std::lock_guard<std::mutex> lock(g->mutex);
    g->detached.notify_all();
  }
  if (g->thread.joinable()) g->thread.join();
  std::fprintf(stderr, "cupti_cycle: %ld attaches, %ld detaches, %ld activity records in %ld buffers\n",
               g->attaches.load(), g->detaches.load(), g->records.load(), g->buffers.load());
}

}  // namespace

extern "C" int InitializeInjection() {
  if (g != nullptr) return 1;
  g = new State;
  if (const char* ms = std::getenv("CYCLE_MS")) g->cycle_ms = std::atoi(ms) > 0 ? std::atoi(ms) : 250;
  if (const char* a = std::getenv("CYCLE_ACTIVITY")) g->activity = std::atoi(a) != 0;
  if (const char* at = std::getenv("CYCLE_ACTIVITY_AT_MS")) g->activity_at_ms = std::max(0, std::atoi(at));
  if (const char* t = std::getenv("CYCLE_TOGGLE")) g->toggle = std::atoi(t) != 0;
  if (const char* k = std::getenv("CYCLE_KINDS")) g->emo_kinds = std::string(k) == "emo";
  if (const char* ms = std::getenv("CYCLE_ACTIVITY_MS")) g->activity_ms = std::max(1, std::atoi(ms));
  if (!Attach()) return 0;
  std::atexit(AtExit);
  g->thread = std::thread(Cycle);
  return 1;
}
