// The injection library's GPU thread: names each GPU the process uses (a GpuRecord) and, when
// NVML is there, reads its energy counter and its SM clock with the clocks-event reasons every
// ~50 ms (EnergyRecord, ClockRecord) and drains NVML's power sample ring every ~1 s
// (PowerRecord). NVML is opened with dlopen; only read functions are
// resolved, so nothing here can change a GPU's clocks or limits.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "clock_reference.h"
#include "driver_api.h"
#include "emo/runtime/activity_decode.h"

namespace emo::runtime {

class GpuMonitor {
 public:
  // Receives each record; `name`, when not empty, is interned into the uint32 at `name_offset`.
  using RecordSink = std::function<void(const DecodedRecord& record, std::string name, int name_offset)>;

  GpuMonitor() = default;
  GpuMonitor(const GpuMonitor&) = delete;
  GpuMonitor& operator=(const GpuMonitor&) = delete;

  // Loads NVML (one line on stderr when it cannot) and starts the thread.
  void Start(const ClockReference& clock, const DriverApi* driver, RecordSink sink);
  // A CUDA device the process uses (from a context creation). Any thread; repeats are ignored.
  void AddDevice(uint32_t ordinal);
  // Stops the thread and shuts NVML down. Later calls do nothing.
  void Stop();
  // While paused the thread reads nothing (EMO_TRACE_QUIET_MS's quiet phases). Any thread.
  void SetPaused(bool paused) { paused_.store(paused, std::memory_order_relaxed); }
  // "loaded", or why NVML is not used, for the trace's meta chunk.
  std::string nvml_status() const;

 private:
  using Handle = struct NvmlDevice*;
  struct Nvml {
    void* library = nullptr;
    int (*init)() = nullptr;
    int (*shutdown)() = nullptr;
    const char* (*error_string)(int) = nullptr;
    int (*handle_by_pci)(const char*, Handle*) = nullptr;
    int (*total_energy)(Handle, unsigned long long*) = nullptr;
    int (*power_usage)(Handle, unsigned*) = nullptr;
    int (*samples)(Handle, int, unsigned long long, int*, unsigned*, void*) = nullptr;
    int (*uuid)(Handle, char*, unsigned) = nullptr;
    int (*index)(Handle, unsigned*) = nullptr;
    int (*clock_info)(Handle, int, unsigned*) = nullptr;
    int (*clock_reasons)(Handle, unsigned long long*) = nullptr;
  };
  struct Device {
    uint32_t ordinal = 0;
    Handle handle = nullptr;
    bool energy = false;
    bool ring = false;  // nvmlDeviceGetSamples works; otherwise GetPowerUsage each tick
    bool power = false;
    bool clock = false;    // nvmlDeviceGetClockInfo works
    bool reasons = false;  // ... and the clocks-event reasons
    unsigned long long last_sample_us = 0;
  };

  bool LoadNvml(std::string* why);
  const char* NvmlError(int code) const;
  void Run();
  void Resolve(uint32_t ordinal);
  void ReadEnergy(Device* d);
  void ReadPower(Device* d);
  void ReadClock(Device* d);
  void DrainSamples(Device* d);

  ClockReference clock_;
  const DriverApi* driver_ = nullptr;
  RecordSink sink_;
  Nvml nvml_;
  bool nvml_ok_ = false;
  std::string nvml_status_ = "not started";

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  bool started_ = false;
  std::atomic<bool> paused_{false};
  std::vector<uint32_t> pending_;
  std::vector<uint32_t> seen_;

  std::thread thread_;
  std::vector<Device> devices_;  // thread only
  std::vector<unsigned char> sample_buffer_;
};

}  // namespace emo::runtime
