// A stand-in libcuda.so.1 with the functions the injection library asks the driver
// (src/runtime/driver_api.cc, emulator.cc): CUDA device k is $FAKE_CUDA_NAME ("NVIDIA H200" when
// unset) at PCI bus id 0000:(0x19 + k):00.0. The emulator's module load and launches are checked
// and written to $FAKE_CUDA_LOG, a line each: "load <kernel name found in the image>",
// "function <name>", "launch <stream> <ns>"; with $FAKE_CUDA_LAUNCH_FAILS set, every launch fails.
// Loaded by the run tests before libemo_inject.so,
// which finds it with dlopen(RTLD_NOLOAD) as it finds the real driver in a CUDA program.
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cstring>
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

int cuCtxGetCurrent(void** context) {
  *context = &g_context;
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

int cuGetErrorName(int error, const char** name) {
  *name = error == 0 ? "CUDA_SUCCESS" : "CUDA_ERROR_FAKE";
  return 0;
}

}  // extern "C"
