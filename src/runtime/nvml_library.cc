#include "nvml_library.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>

namespace emo::runtime {
namespace {

// NVML's ABI values (nvml.h is not part of the CUDA toolkit).
constexpr int kSuccess = 0;
constexpr int kNoPermission = 4;
constexpr int kNotFound = 6;
constexpr int kInsufficientSize = 7;
constexpr int kClockMem = 2;  // nvmlClockType_t NVML_CLOCK_MEM

template <typename Fn>
bool Lookup(void* library, const char* name, Fn* out) {
  *out = reinterpret_cast<Fn>(dlsym(library, name));
  return *out != nullptr;
}

// A list NVML fills after saying how long it is (count in, count out).
template <typename Query>
int ReadList(Query query, std::vector<unsigned>* out) {
  unsigned count = 0;
  int rc = query(&count, nullptr);
  if (rc != kSuccess && rc != kInsufficientSize) return rc;
  out->assign(count, 0);
  rc = query(&count, out->data());
  out->resize(rc == kSuccess ? count : 0);
  return rc;
}

}  // namespace

NvmlLibrary::~NvmlLibrary() {
  if (initialized_ && shutdown_ != nullptr) shutdown_();
  // The library stays loaded: NVML's own threads may outlive shutdown on some drivers.
}

std::string NvmlLibrary::Describe(const char* call, int code) const {
  std::string what = error_string_ != nullptr ? error_string_(code) : "error";
  std::string text = std::string(call) + " failed: " + what + " (NVML " + std::to_string(code) + ")";
  if (code == kNoPermission) {
    text += "; locking clocks needs root or CAP_SYS_ADMIN (or use --actuator zeusd with a running zeusd)";
  }
  return text;
}

std::string NvmlLibraryPath(const std::string& path) {
  if (!path.empty()) return path;
  if (const char* env = std::getenv("EMO_NVML_LIBRARY"); env != nullptr && *env != '\0') return env;
  return "libnvidia-ml.so.1";
}

bool NvmlLibrary::Load(const std::string& path, bool control, std::string* error) {
  path_ = NvmlLibraryPath(path);
  library_ = dlopen(path_.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library_ == nullptr) {
    const char* e = dlerror();
    *error = "NVML (" + path_ + ") cannot be loaded: " + (e != nullptr ? e : "unknown error");
    return false;
  }
  void* l = library_;
  bool ok = Lookup(l, "nvmlInit_v2", &init_) && Lookup(l, "nvmlShutdown", &shutdown_) &&
            Lookup(l, "nvmlDeviceGetHandleByPciBusId_v2", &handle_by_pci_) &&
            Lookup(l, "nvmlDeviceGetName", &name_);
  Lookup(l, "nvmlErrorString", &error_string_);
  Lookup(l, "nvmlDeviceGetIndex", &index_);
  Lookup(l, "nvmlDeviceGetCount_v2", &count_);
  Lookup(l, "nvmlDeviceGetHandleByIndex_v2", &handle_by_index_);
  Lookup(l, "nvmlDeviceGetClockInfo", &clock_info_);
  Lookup(l, "nvmlDeviceGetSupportedMemoryClocks", &memory_clocks_);
  Lookup(l, "nvmlDeviceGetSupportedGraphicsClocks", &graphics_clocks_);
  Lookup(l, "nvmlDeviceGetTotalEnergyConsumption", &total_energy_);
  if (control) {
    ok = ok && Lookup(l, "nvmlDeviceSetGpuLockedClocks", &set_locked_) &&
         Lookup(l, "nvmlDeviceResetGpuLockedClocks", &reset_locked_);
  }
  if (!ok) {
    *error = "NVML (" + path_ + ") lacks a function EMO needs (nvmlInit_v2, nvmlDeviceGetHandleByPciBusId_v2" +
             std::string(control ? ", nvmlDeviceSetGpuLockedClocks, nvmlDeviceResetGpuLockedClocks" : "") +
             "); the driver is older than Volta's";
    return false;
  }
  if (const int rc = init_(); rc != kSuccess) {
    *error = Describe("nvmlInit_v2", rc);
    return false;
  }
  initialized_ = true;
  return true;
}

bool NvmlLibrary::Find(const std::string& pci_bus_id, Handle* handle, std::string* name, int* index,
                       std::vector<unsigned>* supported_mhz, std::string* error) const {
  if (const int rc = handle_by_pci_(pci_bus_id.c_str(), handle); rc != kSuccess) {
    *error = Describe(("nvmlDeviceGetHandleByPciBusId_v2(" + pci_bus_id + ")").c_str(), rc);
    return false;
  }
  char text[96] = {};
  name->clear();
  if (name_(*handle, text, sizeof(text)) == kSuccess) *name = text;
  unsigned i = 0;
  *index = index_ != nullptr && index_(*handle, &i) == kSuccess ? static_cast<int>(i) : -1;
  supported_mhz->clear();
  if (graphics_clocks_ == nullptr) return true;
  // The SM clocks valid at the memory clock in use now (locked clocks leave it as it is).
  std::vector<unsigned> memory;
  unsigned mem = 0;
  if (clock_info_ != nullptr && clock_info_(*handle, kClockMem, &mem) == kSuccess && mem > 0) memory.push_back(mem);
  if (memory_clocks_ != nullptr) {
    std::vector<unsigned> all;
    if (ReadList([&](unsigned* n, unsigned* v) { return memory_clocks_(*handle, n, v); }, &all) == kSuccess) {
      std::sort(all.rbegin(), all.rend());
      memory.insert(memory.end(), all.begin(), all.end());
    }
  }
  for (unsigned m : memory) {
    const int rc = ReadList([&](unsigned* n, unsigned* v) { return graphics_clocks_(*handle, m, n, v); }, supported_mhz);
    if (rc == kSuccess && !supported_mhz->empty()) break;
    if (rc != kNotFound && rc != kSuccess) break;  // not supported: leave the list empty
  }
  std::sort(supported_mhz->begin(), supported_mhz->end());
  return true;
}

std::vector<std::string> NvmlLibrary::Names(std::string* error) const {
  std::vector<std::string> names;
  unsigned count = 0;
  if (count_ == nullptr || handle_by_index_ == nullptr) {
    *error = "NVML (" + path_ + ") lacks nvmlDeviceGetCount_v2 or nvmlDeviceGetHandleByIndex_v2";
    return names;
  }
  if (const int rc = count_(&count); rc != kSuccess) {
    *error = Describe("nvmlDeviceGetCount_v2", rc);
    return names;
  }
  for (unsigned i = 0; i < count; ++i) {
    Handle h = nullptr;
    std::string name, why;
    names.push_back(ByIndex(i, &h, &name, &why) ? name : "");
  }
  return names;
}

bool NvmlLibrary::ByIndex(unsigned index, Handle* handle, std::string* name, std::string* error) const {
  if (handle_by_index_ == nullptr) {
    *error = "NVML (" + path_ + ") lacks nvmlDeviceGetHandleByIndex_v2";
    return false;
  }
  if (const int rc = handle_by_index_(index, handle); rc != kSuccess) {
    *error = Describe(("nvmlDeviceGetHandleByIndex_v2(" + std::to_string(index) + ")").c_str(), rc);
    return false;
  }
  char text[96] = {};
  name->clear();
  if (name_(*handle, text, sizeof(text)) == kSuccess) *name = text;
  return true;
}

bool NvmlLibrary::EnergyMj(Handle handle, unsigned long long* mj, std::string* error) const {
  if (total_energy_ == nullptr) {
    *error = "NVML (" + path_ + ") lacks nvmlDeviceGetTotalEnergyConsumption";
    return false;
  }
  if (const int rc = total_energy_(handle, mj); rc != kSuccess) {
    *error = Describe("nvmlDeviceGetTotalEnergyConsumption", rc);
    return false;
  }
  return true;
}

bool NvmlLibrary::Lock(Handle handle, unsigned mhz, std::string* error) const {
  if (set_locked_ == nullptr) {
    *error = "NVML was opened without its control functions";
    return false;
  }
  if (const int rc = set_locked_(handle, mhz, mhz); rc != kSuccess) {
    *error = Describe(("nvmlDeviceSetGpuLockedClocks(" + std::to_string(mhz) + " MHz)").c_str(), rc);
    return false;
  }
  return true;
}

bool NvmlLibrary::Reset(Handle handle, std::string* error) const {
  if (reset_locked_ == nullptr) {
    *error = "NVML was opened without its control functions";
    return false;
  }
  if (const int rc = reset_locked_(handle); rc != kSuccess) {
    *error = Describe("nvmlDeviceResetGpuLockedClocks", rc);
    return false;
  }
  return true;
}

}  // namespace emo::runtime
