#include "gpu_monitor.h"

#include <dlfcn.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <string>

#include "nvml_library.h"
#include "thread_name.h"

namespace emo::runtime {
namespace {

namespace fmt = trace::emo_format;

// NVML's return codes and types (nvml.h is not part of the CUDA toolkit; these values are
// fixed by its ABI).
constexpr int kNvmlSuccess = 0;
constexpr int kNvmlNotFound = 6;
constexpr int kNvmlTotalPowerSamples = 0;  // nvmlSamplingType_t
constexpr int kNvmlClockSm = 1;            // nvmlClockType_t
enum NvmlValueType { kDouble = 0, kUnsignedInt = 1, kUnsignedLong = 2, kUnsignedLongLong = 3, kSignedLongLong = 4 };
struct NvmlSample {
  unsigned long long time_us;  // CPU time, µs since the epoch
  union {
    double d;
    unsigned int ui;
    unsigned long ul;
    unsigned long long ull;
    long long sll;
  } value;
};
static_assert(sizeof(NvmlSample) == 16);

// The thread ticks every 50 ms: the SM clock, its reasons and (without the ring) the power,
// ~1 µs a read. The energy counter moves every ~100 ms on the H200 and a read costs ~3 ms
// (docs/runtime.md), so it is read on every other tick: about one read per step of the counter, at
// half the cost of reading it on every tick.
constexpr auto kTickPeriod = std::chrono::milliseconds(50);
constexpr auto kEnergyPeriod = std::chrono::milliseconds(100);
// NVML's power ring holds ~2.4 s of 20 ms samples; draining every second loses none.
constexpr auto kSamplePeriod = std::chrono::milliseconds(1000);

template <typename Fn>
bool Lookup(void* library, const char* name, Fn* out) {
  *out = reinterpret_cast<Fn>(dlsym(library, name));
  return *out != nullptr;
}

int64_t RealtimeUs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000 + ts.tv_nsec / 1000;
}

template <typename T>
DecodedRecord Encode(fmt::RecordType type, const T& record) {
  DecodedRecord r;
  r.type = type;
  r.size = sizeof(T);
  std::memcpy(r.body, &record, sizeof(T));
  return r;
}

}  // namespace

bool GpuMonitor::LoadNvml(std::string* why) {
  const std::string path = NvmlLibraryPath();
  nvml_.library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (nvml_.library == nullptr) {
    const char* e = dlerror();
    *why = path + " cannot be loaded: " + (e != nullptr ? e : "unknown error");
    return false;
  }
  // The versioned symbols: the unversioned ones are older ABIs kept for old binaries.
  void* l = nvml_.library;
  const bool ok = Lookup(l, "nvmlInit_v2", &nvml_.init) && Lookup(l, "nvmlShutdown", &nvml_.shutdown) &&
                  Lookup(l, "nvmlDeviceGetHandleByPciBusId_v2", &nvml_.handle_by_pci) &&
                  Lookup(l, "nvmlDeviceGetTotalEnergyConsumption", &nvml_.total_energy) &&
                  Lookup(l, "nvmlDeviceGetPowerUsage", &nvml_.power_usage) &&
                  Lookup(l, "nvmlDeviceGetSamples", &nvml_.samples);
  Lookup(l, "nvmlErrorString", &nvml_.error_string);
  Lookup(l, "nvmlDeviceGetUUID", &nvml_.uuid);
  Lookup(l, "nvmlDeviceGetIndex", &nvml_.index);
  Lookup(l, "nvmlDeviceGetClockInfo", &nvml_.clock_info);
  // The newer name first; older drivers have only the throttle-reasons one (the same function).
  if (!Lookup(l, "nvmlDeviceGetCurrentClocksEventReasons", &nvml_.clock_reasons)) {
    Lookup(l, "nvmlDeviceGetCurrentClocksThrottleReasons", &nvml_.clock_reasons);
  }
  if (!ok) {
    *why = path +
           " lacks a function EMO needs (nvmlInit_v2, nvmlDeviceGetHandleByPciBusId_v2, "
           "nvmlDeviceGetTotalEnergyConsumption, nvmlDeviceGetPowerUsage or nvmlDeviceGetSamples)";
    return false;
  }
  const int r = nvml_.init();
  if (r != kNvmlSuccess) {
    *why = std::string("nvmlInit_v2 failed: ") + NvmlError(r);
    nvml_.init = nullptr;
    return false;
  }
  return true;
}

const char* GpuMonitor::NvmlError(int code) const {
  if (nvml_.error_string != nullptr) {
    if (const char* s = nvml_.error_string(code); s != nullptr) return s;
  }
  return "NVML error";
}

void GpuMonitor::Start(const ClockReference& clock, const DriverApi* driver, RecordSink sink) {
  clock_ = clock;
  driver_ = driver;
  sink_ = std::move(sink);
  std::string why;
  nvml_ok_ = LoadNvml(&why);
  if (!nvml_ok_) {
    std::fprintf(stderr, "emo trace: NVML not available (%s); the trace will have no energy or power records\n",
                 why.c_str());
  }
  std::lock_guard<std::mutex> lock(mutex_);
  nvml_status_ = nvml_ok_ ? "loaded" : why;
  started_ = true;
  thread_ = StartNamedThread("emo-gpu", [this] { Run(); });
}

std::string GpuMonitor::nvml_status() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return nvml_status_;
}

void GpuMonitor::AddDevice(uint32_t ordinal) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (std::find(seen_.begin(), seen_.end(), ordinal) != seen_.end()) return;
    seen_.push_back(ordinal);
    pending_.push_back(ordinal);
  }
  wake_.notify_one();
}

void GpuMonitor::Stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!started_ || stop_) return;
    stop_ = true;
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
  if (nvml_ok_ && nvml_.shutdown != nullptr) nvml_.shutdown();
}

void GpuMonitor::Run() {
  auto next_samples = std::chrono::steady_clock::now() + kSamplePeriod;
  auto last_energy = std::chrono::steady_clock::time_point{};
  while (true) {
    std::vector<uint32_t> pending;
    bool stopping = false;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait_for(lock, kTickPeriod, [&] { return stop_ || !pending_.empty(); });
      stopping = stop_;
      pending.swap(pending_);
    }
    // A device added just before the stop is still named: a short program's trace names its GPU.
    for (const uint32_t ordinal : pending) Resolve(ordinal);
    if (stopping) break;
    if (paused_.load(std::memory_order_relaxed)) continue;
    // Half a tick of slack: a tick woken a little early still reads the counter.
    const auto now = std::chrono::steady_clock::now();
    const bool energy = now - last_energy >= kEnergyPeriod - kTickPeriod / 2;
    if (energy) last_energy = now;
    for (Device& d : devices_) {
      if (energy) ReadEnergy(&d);
      ReadClock(&d);
      if (!d.ring) ReadPower(&d);
    }
    if (std::chrono::steady_clock::now() >= next_samples) {
      for (Device& d : devices_) DrainSamples(&d);
      next_samples += kSamplePeriod;
    }
  }
  // The last samples, up to the end of the run.
  for (Device& d : devices_) {
    ReadEnergy(&d);
    DrainSamples(&d);
  }
}

void GpuMonitor::Resolve(uint32_t ordinal) {
  DeviceIdentity id;
  const bool known = driver_ != nullptr && driver_->Identify(static_cast<int>(ordinal), &id);
  fmt::GpuRecord g{};
  g.device = ordinal;
  g.name = fmt::kNoName;
  g.nvml_index = 0xffffffffu;
  Device d;
  d.ordinal = ordinal;
  d.last_sample_us = static_cast<unsigned long long>(RealtimeUs());
  if (nvml_ok_ && known && !id.pci_bus_id.empty()) {
    const int r = nvml_.handle_by_pci(id.pci_bus_id.c_str(), &d.handle);
    if (r == kNvmlSuccess) {
      unsigned index = 0;
      if (nvml_.index != nullptr && nvml_.index(d.handle, &index) == kNvmlSuccess) g.nvml_index = index;
      char uuid[96] = {};
      if (nvml_.uuid != nullptr && nvml_.uuid(d.handle, uuid, sizeof(uuid)) == kNvmlSuccess) id.uuid = uuid;
      d.energy = d.ring = d.power = true;
      d.clock = nvml_.clock_info != nullptr;
      d.reasons = nvml_.clock_reasons != nullptr;
      // Whether the power ring works is known now, not a second later: a short program without
      // it still gets GetPowerUsage's samples.
      DrainSamples(&d);
    } else {
      std::fprintf(stderr, "emo trace: NVML does not know CUDA device %u (PCI %s): %s; no energy for it\n", ordinal,
                   id.pci_bus_id.c_str(), NvmlError(r));
      d.handle = nullptr;
    }
  }
  std::snprintf(g.pci_bus_id, sizeof(g.pci_bus_id), "%s", id.pci_bus_id.c_str());
  std::snprintf(g.uuid, sizeof(g.uuid), "%s", id.uuid.c_str());
  sink_(Encode(fmt::RecordType::kGpu, g),
        id.name.empty() ? std::string("CUDA device ") + std::to_string(ordinal) : id.name,
        static_cast<int>(offsetof(fmt::GpuRecord, name)));
  if (d.handle == nullptr) return;
  // The counter's first read now, not at the next energy tick (up to kEnergyPeriod later): a
  // program's first iterations can follow its GPU's first use within milliseconds.
  ReadEnergy(&d);
  devices_.push_back(d);
}

void GpuMonitor::ReadEnergy(Device* d) {
  if (!d->energy) return;
  unsigned long long mj = 0;
  const int64_t before = CuptiNow();
  const int r = nvml_.total_energy(d->handle, &mj);
  const int64_t after = CuptiNow();
  if (r != kNvmlSuccess) {
    std::fprintf(stderr,
                 "emo trace: nvmlDeviceGetTotalEnergyConsumption failed for CUDA device %u: %s; "
                 "no more energy records for it\n",
                 d->ordinal, NvmlError(r));
    d->energy = false;
    return;
  }
  fmt::EnergyRecord e{};
  e.time_ns = before + (after - before) / 2;
  e.energy_mj = mj;
  e.gpu = d->ordinal;
  e.read_us = static_cast<uint32_t>(std::max<int64_t>(0, after - before) / 1000);
  sink_(Encode(fmt::RecordType::kEnergy, e), {}, -1);
}

void GpuMonitor::ReadPower(Device* d) {
  if (!d->power) return;
  unsigned mw = 0;
  const int r = nvml_.power_usage(d->handle, &mw);
  if (r != kNvmlSuccess) {
    d->power = false;
    return;
  }
  fmt::PowerRecord p{};
  p.time_ns = CuptiNow();
  p.gpu = d->ordinal;
  p.power_mw = mw;
  sink_(Encode(fmt::RecordType::kPower, p), {}, -1);
}

void GpuMonitor::ReadClock(Device* d) {
  if (!d->clock) return;
  unsigned mhz = 0;
  const int64_t t = CuptiNow();
  const int r = nvml_.clock_info(d->handle, kNvmlClockSm, &mhz);
  if (r != kNvmlSuccess) {
    std::fprintf(stderr, "emo trace: nvmlDeviceGetClockInfo(SM) failed for CUDA device %u: %s; no SM clock records for it\n",
                 d->ordinal, NvmlError(r));
    d->clock = false;
    return;
  }
  fmt::ClockRecord c{};
  c.time_ns = t;
  c.reasons = fmt::kNone;
  unsigned long long reasons = 0;
  if (d->reasons && nvml_.clock_reasons(d->handle, &reasons) == kNvmlSuccess) {
    c.reasons = reasons;
  } else {
    d->reasons = false;
  }
  c.gpu = d->ordinal;
  c.sm_mhz = mhz;
  sink_(Encode(fmt::RecordType::kClock, c), {}, -1);
}

void GpuMonitor::DrainSamples(Device* d) {
  if (!d->ring) return;
  int type = 0;
  unsigned count = 0;
  int r = nvml_.samples(d->handle, kNvmlTotalPowerSamples, d->last_sample_us, &type, &count, nullptr);
  if (r == kNvmlNotFound) return;  // no sample since the last one
  if (r != kNvmlSuccess) {
    // Without the ring, GetPowerUsage each energy tick stands in (a 1 s average on Ampere+).
    std::fprintf(stderr,
                 "emo trace: nvmlDeviceGetSamples(power) failed for CUDA device %u: %s; "
                 "sampling nvmlDeviceGetPowerUsage instead\n",
                 d->ordinal, NvmlError(r));
    d->ring = false;
    return;
  }
  if (count == 0) return;
  sample_buffer_.resize(size_t{count} * sizeof(NvmlSample));
  r = nvml_.samples(d->handle, kNvmlTotalPowerSamples, d->last_sample_us, &type, &count, sample_buffer_.data());
  if (r != kNvmlSuccess) return;
  for (unsigned i = 0; i < count; ++i) {
    NvmlSample s;
    std::memcpy(&s, sample_buffer_.data() + size_t{i} * sizeof(NvmlSample), sizeof(s));
    if (s.time_us <= d->last_sample_us) continue;
    double mw = 0;
    switch (type) {
      case kDouble:
        mw = s.value.d;
        break;
      case kUnsignedInt:
        mw = s.value.ui;
        break;
      case kUnsignedLong:
        mw = static_cast<double>(s.value.ul);
        break;
      case kUnsignedLongLong:
        mw = static_cast<double>(s.value.ull);
        break;
      case kSignedLongLong:
        mw = static_cast<double>(s.value.sll);
        break;
      default:
        continue;
    }
    fmt::PowerRecord p{};
    p.time_ns = clock_.FromRealtime(static_cast<int64_t>(s.time_us) * 1000);
    p.gpu = d->ordinal;
    p.power_mw = static_cast<uint32_t>(std::clamp(mw, 0.0, 4.0e9));
    sink_(Encode(fmt::RecordType::kPower, p), {}, -1);
    d->last_sample_us = std::max(d->last_sample_us, s.time_us);
  }
}

}  // namespace emo::runtime
