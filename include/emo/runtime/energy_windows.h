// Time and energy windows per GPU, for a program's own code to measure itself (the Python
// package's emo.Monitor; ZeusMonitor's begin_window / end_window): each window reads every
// watched GPU's NVML energy counter at its begin and at its end. NVML is opened with dlopen,
// read functions only: nothing here can change a GPU.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "emo/base/status.h"

namespace emo::runtime {

class NvmlLibrary;

// The energy counter moves about every 100 ms (measured on the H200: docs/runtime.md): either end
// of a window may be off by up to one update.
inline constexpr double kEnergyCounterPeriodS = 0.1;

struct GpuWindow {
  int index = 0;       // NVML index
  std::string name;    // "NVIDIA H200"
  double energy_j = 0;
  // Two counter periods of the window's mean power: energy_j x 2 x kEnergyCounterPeriodS / time_s.
  double uncertainty_j = 0;
};

struct WindowMeasurement {
  std::string name;
  double time_s = 0;  // steady clock, begin to end
  std::vector<GpuWindow> gpus;
  double total_energy_j = 0;
  // Under 2 s the two counter periods are over 10 % of the window (kEnergyCounterPeriodS).
  bool measurable = false;
};

class EnergyWindows {
 public:
  EnergyWindows();
  ~EnergyWindows();
  EnergyWindows(const EnergyWindows&) = delete;
  EnergyWindows& operator=(const EnergyWindows&) = delete;

  // Opens NVML (`nvml_path`: "" = $EMO_NVML_LIBRARY, else libnvidia-ml.so.1) and the GPUs with
  // these NVML indices (empty: every GPU); each must have an energy counter.
  Status Open(const std::vector<int>& indices, const std::string& nvml_path = "");
  // The watched GPUs, in the order given (each window reports them in this order).
  std::vector<int> indices() const;

  // Starts the window `name` (windows may nest and overlap; a name is open once at a time).
  Status Begin(const std::string& name);
  // Ends it and returns its time and energies.
  Result<WindowMeasurement> End(const std::string& name);

 private:
  struct Gpu {
    int index = 0;
    std::string name;
    struct NvmlActuatorDevice* handle = nullptr;  // NvmlLibrary::Handle
  };
  struct Window {
    std::chrono::steady_clock::time_point start;
    std::vector<unsigned long long> mj;  // per GPU, at the start
  };
  Status ReadAll(std::vector<unsigned long long>* mj) const;

  mutable std::mutex mutex_;
  std::unique_ptr<NvmlLibrary> nvml_;
  std::vector<Gpu> gpus_;
  std::map<std::string, Window> open_;
};

}  // namespace emo::runtime
