#include "driver_api.h"

#include <dlfcn.h>

#include <cstdio>

namespace emo::runtime {

void* DriverSymbol(const char* name) {
  // RTLD_NOLOAD: only a libcuda the program already uses (the one that loaded this library).
  void* library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (library == nullptr) return nullptr;
  void* symbol = dlsym(library, name);
  dlclose(library);  // drops the reference RTLD_NOLOAD took; the program's own keeps it loaded
  return symbol;
}

bool CaptureCheck::Load() {
  is_capturing_ = DriverFunction<IsCapturingFn>("cuStreamIsCapturing");
  return is_capturing_ != nullptr;
}

bool CaptureCheck::Capturing(void* stream) const {
  int status = 0;  // CU_STREAM_CAPTURE_STATUS_NONE
  return is_capturing_ == nullptr || is_capturing_(stream, &status) != 0 || status != 0;
}

bool DriverApi::Load() {
  get_version_ = DriverFunction<GetVersionFn>("cuDriverGetVersion");
  device_get_ = DriverFunction<DeviceGetFn>("cuDeviceGet");
  get_name_ = DriverFunction<GetNameFn>("cuDeviceGetName");
  get_pci_ = DriverFunction<GetPciFn>("cuDeviceGetPCIBusId");
  // cuda.h maps cuDeviceGetUuid to the _v2 entry point since CUDA 11.4.
  get_uuid_ = DriverFunction<GetUuidFn>("cuDeviceGetUuid_v2");
  device_count_ = DriverFunction<CountFn>("cuDeviceGetCount");
  ctx_current_ = DriverFunction<CurrentFn>("cuCtxGetCurrent");
  primary_state_ = DriverFunction<PrimaryStateFn>("cuDevicePrimaryCtxGetState");
  primary_retain_ = DriverFunction<PrimaryRetainFn>("cuDevicePrimaryCtxRetain");
  // cuda.h maps cuDevicePrimaryCtxRelease to the _v2 entry point since CUDA 11.
  primary_release_ = DriverFunction<PrimaryReleaseFn>("cuDevicePrimaryCtxRelease_v2");
  return device_get_ != nullptr;
}

int DriverApi::DriverVersion() const {
  int version = -1;
  if (get_version_ == nullptr || get_version_(&version) != 0) return -1;
  return version;
}

bool DriverApi::Identify(int ordinal, DeviceIdentity* out) const {
  int device = 0;
  if (device_get_ == nullptr || device_get_(&device, ordinal) != 0) return false;
  char text[256] = {};
  if (get_name_ != nullptr && get_name_(text, sizeof(text) - 1, device) == 0) out->name = text;
  char pci[64] = {};
  if (get_pci_ != nullptr && get_pci_(pci, sizeof(pci) - 1, device) == 0) out->pci_bus_id = pci;
  unsigned char uuid[16] = {};
  if (get_uuid_ != nullptr && get_uuid_(uuid, device) == 0) {
    // nvidia-smi's form: GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx.
    char formatted[64];
    std::snprintf(formatted, sizeof(formatted),
                  "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", uuid[0], uuid[1], uuid[2],
                  uuid[3], uuid[4], uuid[5], uuid[6], uuid[7], uuid[8], uuid[9], uuid[10], uuid[11], uuid[12], uuid[13],
                  uuid[14], uuid[15]);
    out->uuid = formatted;
  }
  return true;
}

void DriverApi::ForEachLiveContext(const std::function<void(void* context)>& visit) const {
  void* current = nullptr;
  if (ctx_current_ != nullptr && ctx_current_(&current) == 0 && current != nullptr) visit(current);
  int count = 0;
  if (device_count_ == nullptr || device_get_ == nullptr || primary_state_ == nullptr || primary_retain_ == nullptr ||
      primary_release_ == nullptr || device_count_(&count) != 0) {
    return;
  }
  for (int ordinal = 0; ordinal < count; ++ordinal) {
    int device = 0;
    unsigned int flags = 0;
    int active = 0;
    if (device_get_(&device, ordinal) != 0 || primary_state_(device, &flags, &active) != 0 || active == 0) continue;
    // Retaining an active primary context only counts a reference; it is released at once.
    void* primary = nullptr;
    if (primary_retain_(&primary, device) != 0) continue;
    if (primary != nullptr && primary != current) visit(primary);
    primary_release_(device);
  }
}

}  // namespace emo::runtime
