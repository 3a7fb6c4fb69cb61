// A stand-in libcuda.so.1 with the functions the injection library asks the driver
// (src/runtime/driver_api.cc, emulator.cc), and the contexts alive when a block session attaches: CUDA device k is $FAKE_CUDA_NAME ("NVIDIA H200" when
// unset) at PCI bus id 0000:(0x19 + k):00.0. The emulator's module load and launches are checked
// and written to $FAKE_CUDA_LOG, a line each: "load <kernel name found in the image>",
// "function <name>", "launch <stream> <ns>"; with $FAKE_CUDA_LAUNCH_FAILS set, every launch fails.
// Events for the switch marks (switch_marks.cc) are described at cuEventCreate.
// Loaded by the run tests before libemo_inject.so,
// which finds it with dlopen(RTLD_NOLOAD) as it finds the real driver in a CUDA program.
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <mutex>

namespace {

std::mutex g_log_mutex;

void Log(const char* format, ...) __attribute__((format(printf, 1, 2)));
void Log(const char* format, ...) {
  const char* path = std::getenv("FAKE_CUDA_LOG");
  if (path == nullptr) return;
  std::lock_guard<std::mutex> lock(g_log_mutex);
  FILE* f = std::fopen(path, "a");
  if (f == nullptr) return;
  va_list args;
  va_start(args, format);
  std::vfprintf(f, format, args);
  va_end(args);
  std::fclose(f);
}

int g_context = 0;
int g_module = 0;
int g_function = 0;

// Events (the switch marks): handles into a fixed table. A recorded event completes
// $FAKE_CUDA_EVENT_MS ms of real time after its record (0 when unset); the log gets
// "record <event> <stream>" and, the first time a query finds a record complete, "complete <stream> <CLOCK_MONOTONIC ns>".
struct FakeEvent {
  bool used = false;
  void* stream = nullptr;
  std::chrono::steady_clock::time_point recorded;
  bool recorded_once = false;
  bool told = false;
};
FakeEvent g_events[1024];
size_t g_event_count = 0;

}  // namespace

extern "C" {

int cuDriverGetVersion(int* version) {
  *version = 13000;
  return 0;
}

int cuDeviceGet(int* device, int ordinal) {
  if (ordinal < 0 || ordinal > 7) return 101;  // CUDA_ERROR_INVALID_DEVICE
  *device = ordinal;
  return 0;
}

int cuDeviceGetName(char* name, int length, int device) {
  (void)device;
  const char* env = std::getenv("FAKE_CUDA_NAME");
  std::snprintf(name, static_cast<size_t>(length), "%s", env != nullptr ? env : "NVIDIA H200");
  return 0;
}

int cuDeviceGetPCIBusId(char* id, int length, int device) {
  std::snprintf(id, static_cast<size_t>(length), "0000:%02x:00.0", 0x19 + device);
  return 0;
}

int cuDeviceGetUuid_v2(void* uuid, int device) {
  std::memset(uuid, 0, 16);
  static_cast<unsigned char*>(uuid)[15] = static_cast<unsigned char>(device);
  return 0;
}

// With $FAKE_CUDA_PRIMARY set to an ordinal, that device's primary context is active and current,
// with the handle the stand-in CUPTI maps to it (0x1000 + ordinal, tests/runtime/fake_cupti.cc);
// otherwise no primary context is active and the current context is the emulator's.
int PrimaryDevice() {
  const char* env = std::getenv("FAKE_CUDA_PRIMARY");
  return env != nullptr ? std::atoi(env) : -1;
}
void* PrimaryContext(int device) { return reinterpret_cast<void*>(uintptr_t{0x1000} + static_cast<uintptr_t>(device)); }

int cuCtxGetCurrent(void** context) {
  *context = PrimaryDevice() >= 0 ? PrimaryContext(PrimaryDevice()) : &g_context;
  return 0;
}

int cuDeviceGetCount(int* count) {
  *count = 8;
  return 0;
}

int cuDevicePrimaryCtxGetState(int device, unsigned* flags, int* active) {
  *flags = 0;
  *active = device == PrimaryDevice() ? 1 : 0;
  return 0;
}

int cuDevicePrimaryCtxRetain(void** context, int device) {
  Log("retain %d\n", device);
  *context = PrimaryContext(device);
  return 0;
}

int cuDevicePrimaryCtxRelease_v2(int device) {
  Log("release %d\n", device);
  return 0;
}

// The image must be PTX text holding the spin kernel's entry point.
int cuModuleLoadData(void** module, const void* image) {
  const char* text = static_cast<const char*>(image);
  if (std::strncmp(text, ".version", 8) != 0 || std::strstr(text, ".entry emo_emulate_spin") == nullptr) return 200;
  Log("load emo_emulate_spin\n");
  *module = &g_module;
  return 0;
}

int cuModuleGetFunction(void** function, void* module, const char* name) {
  if (module != &g_module) return 400;  // CUDA_ERROR_INVALID_HANDLE
  Log("function %s\n", name);
  *function = &g_function;
  return 0;
}

int cuLaunchKernel(void* function, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                   unsigned shared, void* stream, void** params, void** extra) {
  if (function != &g_function || params == nullptr || extra != nullptr) return 1;  // CUDA_ERROR_INVALID_VALUE
  if (std::getenv("FAKE_CUDA_LAUNCH_FAILS") != nullptr) return 2;                    // CUDA_ERROR_OUT_OF_MEMORY
  Log("launch %p %llu grid %u block %u shared %u\n", stream,
      static_cast<unsigned long long>(*static_cast<uint64_t*>(params[0])), gx * gy * gz, bx * by * bz, shared);
  return 0;
}

// The program captures every stream into a graph while $FAKE_CUDA_CAPTURING is set.
int cuStreamIsCapturing(void* stream, int* status) {
  (void)stream;
  *status = std::getenv("FAKE_CUDA_CAPTURING") != nullptr ? 1 : 0;  // ACTIVE : NONE
  return 0;
}

int cuCtxSetCurrent(void* context) { return context == &g_context ? 0 : 201; }  // CUDA_ERROR_INVALID_CONTEXT

// With $FAKE_CUDA_EVENTS set, only that many events can be created; a refusal is logged as
// "create refused", an event destroyed as "destroy <event>".
int cuEventCreate(void** event, unsigned flags) {
  {
    std::lock_guard<std::mutex> lock(g_log_mutex);
    const char* most = std::getenv("FAKE_CUDA_EVENTS");
    const size_t limit = most != nullptr ? static_cast<size_t>(std::atoi(most)) : 1024;
    if (flags != 0x2) return 1;  // CUDA_ERROR_INVALID_VALUE: the marks ask for CU_EVENT_DISABLE_TIMING
    if (g_event_count < limit && g_event_count < 1024) {
      g_events[g_event_count].used = true;
      *event = &g_events[g_event_count++];
      return 0;
    }
  }
  Log("create refused\n");
  return 2;  // CUDA_ERROR_OUT_OF_MEMORY
}

int cuEventDestroy_v2(void* event) {
  auto* e = static_cast<FakeEvent*>(event);
  {
    std::lock_guard<std::mutex> lock(g_log_mutex);
    if (e < g_events || e >= g_events + g_event_count || !e->used) return 400;
    e->used = false;
  }
  Log("destroy %p\n", event);
  return 0;
}

int cuEventRecord(void* event, void* stream) {
  auto* e = static_cast<FakeEvent*>(event);
  {
    std::lock_guard<std::mutex> lock(g_log_mutex);
    if (e < g_events || e >= g_events + g_event_count || !e->used) return 400;
    e->stream = stream;
    e->recorded = std::chrono::steady_clock::now();
    e->recorded_once = true;
    e->told = false;
  }
  Log("record %p %p\n", event, stream);
  return 0;
}

int cuEventQuery(void* event) {
  auto* e = static_cast<FakeEvent*>(event);
  void* stream = nullptr;
  {
    std::lock_guard<std::mutex> lock(g_log_mutex);
    if (e < g_events || e >= g_events + g_event_count) return 400;
    if (!e->recorded_once) return 0;
    const char* ms = std::getenv("FAKE_CUDA_EVENT_MS");
    const auto due = e->recorded + std::chrono::milliseconds(ms != nullptr ? std::atoi(ms) : 0);
    if (std::chrono::steady_clock::now() < due) return 600;  // CUDA_ERROR_NOT_READY
    if (e->told) return 0;
    e->told = true;
    stream = e->stream;
  }
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  Log("complete %p %lld\n", stream, static_cast<long long>(now.tv_sec) * 1000000000LL + now.tv_nsec);
  return 0;
}

int cuGetErrorName(int error, const char** name) {
  *name = error == 0 ? "CUDA_SUCCESS" : "CUDA_ERROR_FAKE";
  return 0;
}

}  // extern "C"
