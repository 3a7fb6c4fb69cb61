// NVML opened with dlopen for the actuators and the energy windows: the read functions that name
// a GPU, list its clocks and read its energy counter, and (only when asked for control) the two
// that lock and reset its SM clock. Symbols
// are resolved versioned where NVML versions them (research/gpu-dvfs-and-nvml.md section 1.2).
#pragma once

#include <string>
#include <vector>

namespace emo::runtime {

// The NVML library to open: `path` when given, else $EMO_NVML_LIBRARY when set (the tests'
// stand-in), else libnvidia-ml.so.1. The tracer's GPU thread (gpu_monitor.cc) opens the same one.
std::string NvmlLibraryPath(const std::string& path = "");

class NvmlLibrary {
 public:
  using Handle = struct NvmlActuatorDevice*;

  NvmlLibrary() = default;
  NvmlLibrary(const NvmlLibrary&) = delete;
  NvmlLibrary& operator=(const NvmlLibrary&) = delete;
  ~NvmlLibrary();

  // Loads `path` ("" = $EMO_NVML_LIBRARY, else libnvidia-ml.so.1) and initializes NVML. With
  // `control`, the lock and reset functions must resolve too.
  bool Load(const std::string& path, bool control, std::string* error);

  // The device with this PCI bus id, its name, NVML index and supported SM clocks at the current
  // memory clock.
  bool Find(const std::string& pci_bus_id, Handle* handle, std::string* name, int* index,
            std::vector<unsigned>* supported_mhz, std::string* error) const;
  // The name of every GPU NVML sees, by NVML index; empty with `error` set when it cannot say.
  std::vector<std::string> Names(std::string* error) const;
  // The device with NVML index `index` and its name.
  bool ByIndex(unsigned index, Handle* handle, std::string* name, std::string* error) const;
  // Its energy counter: millijoules since the driver loaded (nvmlDeviceGetTotalEnergyConsumption,
  // Volta and later).
  bool EnergyMj(Handle handle, unsigned long long* mj, std::string* error) const;
  bool Lock(Handle handle, unsigned mhz, std::string* error) const;
  bool Reset(Handle handle, std::string* error) const;

  const std::string& path() const { return path_; }

 private:
  std::string Describe(const char* call, int code) const;

  void* library_ = nullptr;
  bool initialized_ = false;
  std::string path_;
  int (*init_)() = nullptr;
  int (*shutdown_)() = nullptr;
  const char* (*error_string_)(int) = nullptr;
  int (*handle_by_pci_)(const char*, Handle*) = nullptr;
  int (*count_)(unsigned*) = nullptr;
  int (*handle_by_index_)(unsigned, Handle*) = nullptr;
  int (*name_)(Handle, char*, unsigned) = nullptr;
  int (*index_)(Handle, unsigned*) = nullptr;
  int (*clock_info_)(Handle, int, unsigned*) = nullptr;
  int (*memory_clocks_)(Handle, unsigned*, unsigned*) = nullptr;
  int (*graphics_clocks_)(Handle, unsigned, unsigned*, unsigned*) = nullptr;
  int (*total_energy_)(Handle, unsigned long long*) = nullptr;
  int (*set_locked_)(Handle, unsigned, unsigned) = nullptr;
  int (*reset_locked_)(Handle) = nullptr;
};

}  // namespace emo::runtime
