// A stand-in libcupti.so.13 for testing libemo_inject.so on a machine without a GPU. It
// implements the CUPTI calls the library makes, with a clock the test sets, and test hooks
// (FakeCupti*) that play the parts of the CUDA driver and NVTX: a kernel launch runs the
// subscriber's runtime-API callbacks and, while the activities are on, appends an API record
// and a kernel record to the activity buffer, which a flush hands back. Loaded with RTLD_GLOBAL
// before libemo_inject.so, whose DT_NEEDED libcupti.so.13 then binds to it.
#include <cupti.h>
#include <generated_nvtx_meta.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>

namespace {

struct Fake {
  std::mutex mutex;
  CUpti_CallbackFunc callback = nullptr;
  void* userdata = nullptr;
  bool subscribed = false;
  std::set<std::pair<int, uint32_t>> callbacks;  // (domain, cbid) enabled
  std::atomic<bool> kinds[64] = {};
  CUpti_BuffersCallbackRequestFunc requested = nullptr;
  CUpti_BuffersCallbackCompleteFunc completed = nullptr;
  uint8_t* buffer = nullptr;
  size_t buffer_size = 0;
  size_t used = 0;
  size_t dropped = 0;
  uint32_t correlation = 0;
  std::deque<std::string> names;  // kernel names live as long as the process, as CUPTI's do
  std::map<uint64_t, const char*> name_of;
};

Fake& State() {
  static Fake* fake = new Fake();
  return *fake;
}

std::atomic<int64_t> g_time{1'000'000'000};

// CUPTI calls the library must not make (FakeCuptiStrayCalls): one from another thread while
// cuptiFinalize runs (pytorch/kineto#686: it races with them), any but a subscription between a
// finalize and the next subscription (it would attach CUPTI again, lazily), and one from another
// thread while that subscription attaches CUPTI (its lazy initialization is not thread-safe: a
// double free on an H100, BENCHMARKS.md Order 7). FAKE_CUPTI_FINALIZE_MS and
// FAKE_CUPTI_SUBSCRIBE_MS make the finalize and the subscription last that long, so a thread that
// ticks on its own (NVML's) meets them.
std::atomic<bool> g_finalizing{false};
std::atomic<bool> g_detached{false};
std::atomic<bool> g_subscribing{false};
std::atomic<int> g_calls_during_finalize{0};
std::atomic<int> g_calls_while_detached{0};
std::atomic<int> g_calls_during_subscribe{0};

void Called(bool subscribing = false) {
  if (g_finalizing.load()) g_calls_during_finalize.fetch_add(1);
  if (subscribing) return;  // the call that may attach CUPTI again
  if (g_detached.load()) g_calls_while_detached.fetch_add(1);
  if (g_subscribing.load()) g_calls_during_subscribe.fetch_add(1);
}

void SleepForEnvMs(const char* name) {
  if (const char* ms = std::getenv(name); ms != nullptr) std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(ms)));
}

size_t RecordSize(CUpti_ActivityKind kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      return sizeof(CUpti_ActivityKernel10);
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER:
      return sizeof(CUpti_ActivityAPI);
    default:
      return 0;
  }
}

// Appends one record, asking for a buffer when there is none; a full buffer is handed back.
// Called with the mutex held.
void Append(Fake& f, const void* record, size_t size) {
  if (f.buffer != nullptr && f.used + size > f.buffer_size) {
    f.completed(nullptr, 0, f.buffer, f.buffer_size, f.used);
    f.buffer = nullptr;
  }
  if (f.buffer == nullptr) {
    size_t max_records = 0;
    f.requested(&f.buffer, &f.buffer_size, &max_records);
    f.used = 0;
    if (f.buffer == nullptr) {
      ++f.dropped;
      return;
    }
  }
  std::memcpy(f.buffer + f.used, record, size);
  f.used += size;
}

bool Enabled(Fake& f, CUpti_CallbackDomain domain, uint32_t cbid) {
  return f.subscribed && f.callbacks.count({static_cast<int>(domain), cbid}) > 0;
}

void Nvtx(uint32_t cbid, const char* name, const void* params, const void* result) {
  Fake& f = State();
  CUpti_CallbackFunc callback = nullptr;
  void* userdata = nullptr;
  {
    std::lock_guard<std::mutex> lock(f.mutex);
    if (!Enabled(f, CUPTI_CB_DOMAIN_NVTX, cbid)) return;
    callback = f.callback;
    userdata = f.userdata;
  }
  CUpti_NvtxData data{name, params, result};
  callback(userdata, CUPTI_CB_DOMAIN_NVTX, cbid, &data);
}

}  // namespace

extern "C" {

CUptiResult CUPTIAPI cuptiGetVersion(uint32_t* version) {
  Called();
  *version = CUPTI_API_VERSION;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetResultString(CUptiResult result, const char** str) {
  *str = result == CUPTI_SUCCESS ? "CUPTI_SUCCESS" : "CUPTI_ERROR_FAKE";
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetTimestamp(uint64_t* timestamp) {
  Called();
  *timestamp = static_cast<uint64_t>(g_time.load());
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiSubscribe_v2(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback, void* userdata,
                                       CUpti_SubscriberParams* /*params*/) {
  Called(/*subscribing=*/true);
  g_subscribing.store(true);
  SleepForEnvMs("FAKE_CUPTI_SUBSCRIBE_MS");
  g_detached.store(false);
  g_subscribing.store(false);
  Fake& f = State();
  std::lock_guard<std::mutex> lock(f.mutex);
  if (f.subscribed) return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  f.subscribed = true;
  f.callback = callback;
  f.userdata = userdata;
  *subscriber = reinterpret_cast<CUpti_SubscriberHandle>(&f);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiUnsubscribe(CUpti_SubscriberHandle /*subscriber*/) {
  Called();
  Fake& f = State();
  std::lock_guard<std::mutex> lock(f.mutex);
  f.subscribed = false;
  return CUPTI_SUCCESS;
}

// Detaches: every activity kind off, callbacks and buffer functions forgotten, the records not
// yet flushed dropped (as CUPTI 13.0 does: bench/gpu/cupti_attach_probe.cu), the finalize counted
// (FakeCuptiFinalized); the next call attaches again, as CUPTI's lazy initialization does.
int g_finalized = 0;
CUptiResult CUPTIAPI cuptiFinalize() {
  Called();
  g_finalizing.store(true);
  SleepForEnvMs("FAKE_CUPTI_FINALIZE_MS");
  Fake& f = State();
  std::lock_guard<std::mutex> lock(f.mutex);
  g_detached.store(true);
  g_finalizing.store(false);
  for (auto& kind : f.kinds) kind = false;
  f.subscribed = false;
  f.callbacks.clear();
  f.requested = nullptr;
  f.completed = nullptr;
  f.buffer = nullptr;
  f.used = 0;
  ++g_finalized;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle /*subscriber*/,
                                         CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  Called();
  Fake& f = State();
  std::lock_guard<std::mutex> lock(f.mutex);
  if (enable) {
    f.callbacks.insert({static_cast<int>(domain), cbid});
  } else {
    f.callbacks.erase({static_cast<int>(domain), cbid});
  }
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetCallbackName(CUpti_CallbackDomain domain, uint32_t cbid, const char** name) {
  Called();
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API && cbid == CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000) {
    *name = "cudaLaunchKernel_v7000";
    return CUPTI_SUCCESS;
  }
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API && cbid == CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020) {
    *name = "cudaStreamSynchronize_v3020";
    return CUPTI_SUCCESS;
  }
  return CUPTI_ERROR_INVALID_PARAMETER;
}

CUptiResult CUPTIAPI cuptiGetContextId(CUcontext context, uint32_t* id) {
  Called();
  *id = static_cast<uint32_t>(reinterpret_cast<uintptr_t>(context) - 0x1000 + 1);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetDeviceId(CUcontext context, uint32_t* device) {
  Called();
  *device = static_cast<uint32_t>(reinterpret_cast<uintptr_t>(context) - 0x1000);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc requested,
                                                    CUpti_BuffersCallbackCompleteFunc completed) {
  Called();
  Fake& f = State();
  std::lock_guard<std::mutex> lock(f.mutex);
  f.requested = requested;
  f.completed = completed;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityEnable(CUpti_ActivityKind kind) {
  Called();
  State().kinds[kind & 63] = true;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityDisable(CUpti_ActivityKind kind) {
  Called();
  State().kinds[kind & 63] = false;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityEnableRuntimeApi(CUpti_CallbackId /*cbid*/, uint8_t /*enable*/) {
  Called();
  return CUPTI_SUCCESS;
}
CUptiResult CUPTIAPI cuptiActivityEnableDriverApi(CUpti_CallbackId /*cbid*/, uint8_t /*enable*/) {
  Called();
  return CUPTI_SUCCESS;
}
CUptiResult CUPTIAPI cuptiActivityEnableCudaEventDeviceTimestamps(uint8_t /*enable*/) {
  Called();
  return CUPTI_SUCCESS;
}
CUptiResult CUPTIAPI cuptiActivityEnableAllSyncRecords(uint8_t /*enable*/) {
  Called();
  return CUPTI_SUCCESS;
}

// A buffer is handed back when it is full (Append) or by a forced flush; an unforced one hands
// back complete buffers only, and the one being filled is not.
CUptiResult CUPTIAPI cuptiActivityFlushAll(uint32_t flag) {
  Called();
  Fake& f = State();
  std::lock_guard<std::mutex> lock(f.mutex);
  if ((flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) != 0 && f.buffer != nullptr && f.completed != nullptr) {
    f.completed(nullptr, 0, f.buffer, f.buffer_size, f.used);
    f.buffer = nullptr;
    f.used = 0;
  }
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityGetNumDroppedRecords(CUcontext /*context*/, uint32_t /*stream*/, size_t* dropped) {
  Called();
  Fake& f = State();
  // Called from the completion callback, with the mutex held by the flush or append.
  *dropped = f.dropped;
  f.dropped = 0;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityGetNextRecord(uint8_t* buffer, size_t valid, CUpti_Activity** record) {
  Called();
  uint8_t* next = buffer;
  if (*record != nullptr) {
    next = reinterpret_cast<uint8_t*>(*record) + RecordSize((*record)->kind);
  }
  if (next >= buffer + valid) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  *record = reinterpret_cast<CUpti_Activity*>(next);
  return CUPTI_SUCCESS;
}

// --- Test hooks ---

__attribute__((visibility("default"))) void FakeCuptiSetTime(int64_t ns) { g_time.store(ns); }

// How many times cuptiFinalize was called.
__attribute__((visibility("default"))) int FakeCuptiFinalized() {
  std::lock_guard<std::mutex> lock(State().mutex);
  return g_finalized;
}

// The CUPTI calls made while cuptiFinalize ran (`during` 1), between a finalize and the next
// subscription (0), or by another thread while a subscription attached CUPTI (2).
__attribute__((visibility("default"))) int FakeCuptiStrayCalls(int during) {
  switch (during) {
    case 0:
      return g_calls_while_detached.load();
    case 1:
      return g_calls_during_finalize.load();
    default:
      return g_calls_during_subscribe.load();
  }
}

// A context on CUDA device `device` is created.
__attribute__((visibility("default"))) void FakeCuptiCreateContext(uint32_t device) {
  Fake& f = State();
  CUpti_CallbackFunc callback = nullptr;
  void* userdata = nullptr;
  {
    std::lock_guard<std::mutex> lock(f.mutex);
    if (!Enabled(f, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_CREATED)) return;
    callback = f.callback;
    userdata = f.userdata;
  }
  CUpti_ResourceData data{};
  data.context = reinterpret_cast<CUcontext>(uintptr_t{0x1000} + device);
  callback(userdata, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_CREATED, &data);
}

// cudaLaunchKernel of host function `function` at the current fake time.
__attribute__((visibility("default"))) void FakeCuptiLaunch(uint64_t function) {
  Fake& f = State();
  CUpti_CallbackFunc callback = nullptr;
  void* userdata = nullptr;
  uint32_t correlation = 0;
  const char* name = nullptr;
  {
    std::lock_guard<std::mutex> lock(f.mutex);
    correlation = ++f.correlation;
    auto it = f.name_of.find(function);
    if (it == f.name_of.end()) {
      f.names.push_back("_Z6kernelILi" + std::to_string(function) + "EEvv");
      it = f.name_of.emplace(function, f.names.back().c_str()).first;
    }
    name = it->second;
    if (Enabled(f, CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000)) {
      callback = f.callback;
      userdata = f.userdata;
    }
  }
  cudaLaunchKernel_v7000_params params{};
  params.func = reinterpret_cast<const void*>(function);
  // Each kernel on a stream of its own, named after it (the emulator's spins follow the stream).
  params.stream = reinterpret_cast<cudaStream_t>(uintptr_t{0x7000} + (function & 0xff));
  CUpti_CallbackData data{};
  data.functionName = "cudaLaunchKernel";
  data.functionParams = &params;
  data.symbolName = name;
  data.correlationId = correlation;
  // The records are appended before the entry callback: the activity state when the launch is
  // made decides whether it is recorded, as in the driver, and the tracer's control thread (which
  // the entry callback may wake to end a window) cannot turn a kind off between the two.
  const auto now = static_cast<uint64_t>(g_time.load());
  {
    std::lock_guard<std::mutex> lock(f.mutex);
    if (f.kinds[CUPTI_ACTIVITY_KIND_RUNTIME] && f.requested != nullptr) {
      CUpti_ActivityAPI api{};
      api.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
      api.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
      api.start = now;
      api.end = now + 500;
      api.processId = 1;
      api.threadId = 2;
      api.correlationId = correlation;
      Append(f, &api, sizeof(api));
    }
    if (f.kinds[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL] && f.requested != nullptr) {
      CUpti_ActivityKernel10 k{};
      k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
      k.start = now + 1000;
      k.end = now + 2000;
      k.deviceId = 0;
      k.contextId = 1;
      k.streamId = 7;
      k.correlationId = correlation;
      k.name = name;
      Append(f, &k, sizeof(k));
    }
  }
  if (callback != nullptr) {
    data.callbackSite = CUPTI_API_ENTER;
    callback(userdata, CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, &data);
    data.callbackSite = CUPTI_API_EXIT;
    callback(userdata, CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, &data);
  }
}

// cudaGraphLaunch of `exec` (no records: only the tracer's callbacks see it), enter and exit
// callbacks where enabled.
__attribute__((visibility("default"))) void FakeCuptiGraphLaunch(uint64_t exec) {
  Fake& f = State();
  constexpr CUpti_CallbackId kCbid = CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000;
  CUpti_CallbackFunc callback = nullptr;
  {
    std::lock_guard<std::mutex> lock(f.mutex);
    ++f.correlation;
    if (Enabled(f, CUPTI_CB_DOMAIN_RUNTIME_API, kCbid)) callback = f.callback;
  }
  if (callback == nullptr) return;
  cudaGraphLaunch_v10000_params params{};
  params.graphExec = reinterpret_cast<cudaGraphExec_t>(exec);
  CUpti_CallbackData data{};
  data.functionName = "cudaGraphLaunch";
  data.functionParams = &params;
  for (const CUpti_ApiCallbackSite site : {CUPTI_API_ENTER, CUPTI_API_EXIT}) {
    data.callbackSite = site;
    callback(f.userdata, CUPTI_CB_DOMAIN_RUNTIME_API, kCbid, &data);
  }
}

// cudaStreamSynchronize at the current fake time, which calls cuStreamSynchronize inside (as
// the runtime does): enter and exit callbacks of both, where enabled.
__attribute__((visibility("default"))) void FakeCuptiStreamSync() {
  Fake& f = State();
  auto callback_for = [&f](CUpti_CallbackDomain domain, uint32_t cbid) {
    std::lock_guard<std::mutex> lock(f.mutex);
    return Enabled(f, domain, cbid) ? f.callback : nullptr;
  };
  cudaStreamSynchronize_v3020_params runtime_params{};
  cuStreamSynchronize_params driver_params{};
  CUpti_CallbackData data{};
  data.functionName = "cudaStreamSynchronize";
  data.functionParams = &runtime_params;
  auto run = [&](CUpti_CallbackDomain domain, uint32_t cbid, CUpti_ApiCallbackSite site) {
    if (CUpti_CallbackFunc callback = callback_for(domain, cbid)) {
      data.callbackSite = site;
      callback(f.userdata, domain, cbid, &data);
    }
  };
  run(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020, CUPTI_API_ENTER);
  data.functionName = "cuStreamSynchronize";
  data.functionParams = &driver_params;
  run(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize, CUPTI_API_ENTER);
  run(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize, CUPTI_API_EXIT);
  data.functionName = "cudaStreamSynchronize";
  data.functionParams = &runtime_params;
  run(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020, CUPTI_API_EXIT);
}

// Waits until the kernel-launch callback is enabled (`on` = 1) or not (0); 1 when it is, 0
// after `timeout_ms`.
__attribute__((visibility("default"))) int FakeCuptiWaitLaunchCallback(int on, int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (true) {
    {
      Fake& f = State();
      std::lock_guard<std::mutex> lock(f.mutex);
      if (Enabled(f, CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000) == (on != 0)) return 1;
    }
    if (std::chrono::steady_clock::now() > deadline) return 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

__attribute__((visibility("default"))) void FakeCuptiNvtxPushA(const char* message) {
  nvtxRangePushA_params params{message};
  Nvtx(CUPTI_CBID_NVTX_nvtxRangePushA, "nvtxRangePushA", &params, nullptr);
}

__attribute__((visibility("default"))) void FakeCuptiNvtxPop() {
  nvtxRangePop_params params{};
  Nvtx(CUPTI_CBID_NVTX_nvtxRangePop, "nvtxRangePop", &params, nullptr);
}

// Waits until the tracer's activity records are on (`on` = 1) or off (0): kernel records and API
// records both, since the tracer switches the GPU kinds first and the API kinds after them either
// way (Tracer::SetActivities), and a program thread let go between the two would make API records
// a test does not expect. 1 when they are, 0 after `timeout_ms` (a safety net: the state changes
// as soon as the tracer's thread looks).
__attribute__((visibility("default"))) int FakeCuptiWaitActivity(int on, int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  const auto& kinds = State().kinds;
  while (kinds[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL].load() != (on != 0) ||
         kinds[CUPTI_ACTIVITY_KIND_RUNTIME].load() != (on != 0)) {
    if (std::chrono::steady_clock::now() > deadline) return 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return 1;
}

}  // extern "C"
