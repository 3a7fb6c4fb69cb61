// A stand-in libcuda.so.1 with the five functions the injection library asks the driver
// (src/runtime/driver_api.cc): CUDA device k is $FAKE_CUDA_NAME ("NVIDIA H200" when unset) at
// PCI bus id 0000:(0x19 + k):00.0. Loaded by the run tests before libemo_inject.so, which finds
// it with dlopen(RTLD_NOLOAD) as it finds the real driver in a CUDA program.
#include <cstdio>
#include <cstdlib>
#include <cstring>

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

}  // extern "C"
