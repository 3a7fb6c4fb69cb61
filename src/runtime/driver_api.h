// The few CUDA driver functions the injection library needs (device name, PCI bus id, UUID,
// driver version), found with dlsym in the libcuda.so.1 the process has already loaded: the
// library never links libcuda, and never loads it when the program has not.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace emo::runtime {

// `name` in the libcuda.so.1 the process has already loaded (never loading it), as a function of
// type Fn; nullptr when the driver is not loaded or lacks it.
void* DriverSymbol(const char* name);
template <typename Fn>
Fn DriverFunction(const char* name) {
  return reinterpret_cast<Fn>(DriverSymbol(name));
}

// Whether work enqueued on a stream now would be captured into a CUDA graph instead of running
// (the program is capturing that stream, as torch.compile's CUDA graphs do while they record):
// the follower then adds nothing to it, or its spin or event would become part of the
// program's graph and replay with it.
class CaptureCheck {
 public:
  // False when the driver has no cuStreamIsCapturing.
  bool Load();
  // True also when the driver cannot tell (an error): then nothing is added either.
  bool Capturing(void* stream) const;

 private:
  using IsCapturingFn = int (*)(void*, int*);
  IsCapturingFn is_capturing_ = nullptr;
};

// A CUDA device as the driver names it.
struct DeviceIdentity {
  std::string name;        // "NVIDIA H200"
  std::string pci_bus_id;  // "0000:19:00.0"
  std::string uuid;        // "GPU-8e2a...", from the driver; NVML's is preferred when present
};

class DriverApi {
 public:
  // Looks the functions up; false when libcuda.so.1 is not loaded in this process.
  bool Load();
  // cuDriverGetVersion (13000 for 13.0), -1 when unknown.
  int DriverVersion() const;
  // Fills what the driver says about CUDA device `ordinal`; false when the driver would not say.
  bool Identify(int ordinal, DeviceIdentity* out) const;
  // Calls `visit` with every context that exists now: the calling thread's current one and each
  // device's primary context that is active (CUDA runtime programs use those). A tracer that
  // attaches after CUDA started learns them here, as it missed their creation callbacks. A
  // context may be visited twice (current and primary); a primary one is held while visited.
  void ForEachLiveContext(const std::function<void(void* context)>& visit) const;

 private:
  using GetVersionFn = int (*)(int*);
  using DeviceGetFn = int (*)(int*, int);
  using GetNameFn = int (*)(char*, int, int);
  using GetPciFn = int (*)(char*, int, int);
  using GetUuidFn = int (*)(void*, int);

  GetVersionFn get_version_ = nullptr;
  DeviceGetFn device_get_ = nullptr;
  GetNameFn get_name_ = nullptr;
  GetPciFn get_pci_ = nullptr;
  GetUuidFn get_uuid_ = nullptr;
  using CountFn = int (*)(int*);
  using CurrentFn = int (*)(void**);
  using PrimaryStateFn = int (*)(int, unsigned int*, int*);
  using PrimaryRetainFn = int (*)(void**, int);
  using PrimaryReleaseFn = int (*)(int);
  CountFn device_count_ = nullptr;
  CurrentFn ctx_current_ = nullptr;
  PrimaryStateFn primary_state_ = nullptr;
  PrimaryRetainFn primary_retain_ = nullptr;
  PrimaryReleaseFn primary_release_ = nullptr;
};

}  // namespace emo::runtime
