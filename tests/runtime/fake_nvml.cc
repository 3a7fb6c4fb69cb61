// A stand-in libnvidia-ml.so.1 for the actuator tests: it plays the GPUs named in
// $FAKE_NVML_GPUS ("0000:19:00.0=NVIDIA H200,0000:2a:00.0=NVIDIA H200"; one H200 at 0000:19:00.0
// when unset), appends every call it gets to $FAKE_NVML_LOG ("<monotonic ns> <pid> <call>
// <args>"), and keeps each GPU's locked clock in $FAKE_NVML_STATE ("<pci> <MHz>" per line, 0 =
// default) so that a test sees what a process left behind after it died.
// $FAKE_NVML_NO_PERMISSION=1 makes lock and reset answer NVML_ERROR_NO_PERMISSION, as for a user
// that is not root. $FAKE_NVML_POWER_W=P makes each GPU's energy counter
// (nvmlDeviceGetTotalEnergyConsumption) read P watts times the seconds since its first read
// (not supported when unset), and nvmlDeviceGetPowerUsage read P watts. $FAKE_NVML_SM_MHZ is the SM
// clock nvmlDeviceGetClockInfo reads (1980 when unset), $FAKE_NVML_REASONS the clocks-event reasons
// bitmask (decimal; 0 when unset). nvmlDeviceGetSamples is not supported (the tracer falls back
// to nvmlDeviceGetPowerUsage). Supported SM clocks: 345 to 1980 MHz in 15 MHz steps (an H200's
// grid) at the one memory clock, 2619 MHz.
#include <fcntl.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace {

constexpr int kSuccess = 0;
constexpr int kInvalidArgument = 2;
constexpr int kNotSupported = 3;
constexpr int kNoPermission = 4;
constexpr int kNotFound = 6;
constexpr int kInsufficientSize = 7;
constexpr unsigned kMemoryMhz = 2619;

struct Gpu {
  std::string pci;
  std::string name;
};

std::string Canonical(const char* id) {
  unsigned d = 0, b = 0, dev = 0, f = 0;
  if (std::sscanf(id, "%x:%x:%x.%x", &d, &b, &dev, &f) != 4) return id;
  char text[32];
  std::snprintf(text, sizeof(text), "%04x:%02x:%02x.%x", d, b, dev, f);
  return text;
}

// Never destroyed: handles stay valid for callers in exit handlers, as NVML's do.
const std::vector<Gpu>& Gpus() {
  static const std::vector<Gpu>* gpus = [] {
    auto* out = new std::vector<Gpu>();
    const char* env = std::getenv("FAKE_NVML_GPUS");
    std::string list = env != nullptr && *env != '\0' ? env : "0000:19:00.0=NVIDIA H200";
    size_t start = 0;
    while (start <= list.size()) {
      const size_t end = list.find(',', start);
      const std::string item = list.substr(start, end == std::string::npos ? std::string::npos : end - start);
      const size_t eq = item.find('=');
      if (eq != std::string::npos) out->push_back({Canonical(item.substr(0, eq).c_str()), item.substr(eq + 1)});
      if (end == std::string::npos) break;
      start = end + 1;
    }
    return out;
  }();
  return *gpus;
}

void Log(const std::string& line) {
  const char* path = std::getenv("FAKE_NVML_LOG");
  if (path == nullptr) return;
  const int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return;
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  const std::string text = std::to_string(static_cast<long long>(ts.tv_sec) * 1000000000LL + ts.tv_nsec) + " " +
                           std::to_string(getpid()) + " " + line + "\n";
  (void)!write(fd, text.data(), text.size());
  close(fd);
}

// Sets the state line of one GPU under an exclusive lock of the state file.
void SetState(const std::string& pci, unsigned mhz) {
  const char* path = std::getenv("FAKE_NVML_STATE");
  if (path == nullptr) return;
  const int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return;
  flock(fd, LOCK_EX);
  std::string text;
  char chunk[512];
  for (ssize_t n; (n = read(fd, chunk, sizeof(chunk))) > 0;) text.append(chunk, static_cast<size_t>(n));
  std::map<std::string, unsigned> state;
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = text.find('\n', start);
    char id[64];
    unsigned v = 0;
    if (std::sscanf(text.substr(start, end - start).c_str(), "%63s %u", id, &v) == 2) state[id] = v;
    if (end == std::string::npos) break;
    start = end + 1;
  }
  state[pci] = mhz;
  std::string out;
  for (const auto& [id, v] : state) out += id + " " + std::to_string(v) + "\n";
  (void)!ftruncate(fd, 0);
  (void)!pwrite(fd, out.data(), out.size(), 0);
  flock(fd, LOCK_UN);
  close(fd);
}

const Gpu* Of(void* handle) {
  const auto& gpus = Gpus();
  const auto* g = static_cast<const Gpu*>(handle);
  for (const auto& x : gpus) {
    if (&x == g) return g;
  }
  return nullptr;
}

bool NoPermission() {
  const char* env = std::getenv("FAKE_NVML_NO_PERMISSION");
  return env != nullptr && std::strcmp(env, "1") == 0;
}

}  // namespace

extern "C" {

int nvmlInit_v2() {
  Log("nvmlInit_v2");
  return kSuccess;
}

int nvmlShutdown() {
  Log("nvmlShutdown");
  return kSuccess;
}

const char* nvmlErrorString(int code) {
  switch (code) {
    case kSuccess: return "Success";
    case kInvalidArgument: return "Invalid Argument";
    case kNotSupported: return "Not Supported";
    case kNoPermission: return "Insufficient Permissions";
    case kNotFound: return "Not Found";
    default: return "Unknown Error";
  }
}

int nvmlDeviceGetHandleByPciBusId_v2(const char* id, void** handle) {
  Log(std::string("nvmlDeviceGetHandleByPciBusId_v2 ") + id);
  const std::string want = Canonical(id);
  for (const auto& g : Gpus()) {
    if (g.pci == want) {
      *handle = const_cast<Gpu*>(&g);
      return kSuccess;
    }
  }
  return kNotFound;
}

int nvmlDeviceGetCount_v2(unsigned* count) {
  *count = static_cast<unsigned>(Gpus().size());
  return kSuccess;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned index, void** handle) {
  if (index >= Gpus().size()) return kInvalidArgument;
  *handle = const_cast<Gpu*>(&Gpus()[index]);
  return kSuccess;
}

int nvmlDeviceGetName(void* handle, char* name, unsigned length) {
  const Gpu* g = Of(handle);
  if (g == nullptr || name == nullptr) return kInvalidArgument;
  std::snprintf(name, length, "%s", g->name.c_str());
  return kSuccess;
}

int nvmlDeviceGetTotalEnergyConsumption(void* handle, unsigned long long* mj) {
  static const timespec loaded = [] {
    timespec t{};
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t;
  }();
  const char* power = std::getenv("FAKE_NVML_POWER_W");
  if (power == nullptr || *power == '\0') return kNotSupported;
  if (Of(handle) == nullptr || mj == nullptr) return kInvalidArgument;
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  const double s = static_cast<double>(now.tv_sec - loaded.tv_sec) + 1e-9 * static_cast<double>(now.tv_nsec - loaded.tv_nsec);
  *mj = static_cast<unsigned long long>(std::atof(power) * s * 1000.0);
  return kSuccess;
}

int nvmlDeviceGetIndex(void* handle, unsigned* index) {
  const Gpu* g = Of(handle);
  if (g == nullptr) return kInvalidArgument;
  *index = static_cast<unsigned>(g - Gpus().data());
  return kSuccess;
}

int nvmlDeviceGetClockInfo(void* handle, int type, unsigned* mhz) {
  if (Of(handle) == nullptr) return kInvalidArgument;
  const char* sm = std::getenv("FAKE_NVML_SM_MHZ");
  *mhz = type == 2 ? kMemoryMhz : sm != nullptr && *sm != '\0' ? static_cast<unsigned>(std::atoi(sm)) : 1980;
  return kSuccess;
}

int nvmlDeviceGetCurrentClocksEventReasons(void* handle, unsigned long long* reasons) {
  if (Of(handle) == nullptr || reasons == nullptr) return kInvalidArgument;
  const char* env = std::getenv("FAKE_NVML_REASONS");
  *reasons = env != nullptr ? std::strtoull(env, nullptr, 10) : 0;
  return kSuccess;
}

int nvmlDeviceGetPowerUsage(void* handle, unsigned* mw) {
  const char* power = std::getenv("FAKE_NVML_POWER_W");
  if (power == nullptr || *power == '\0') return kNotSupported;
  if (Of(handle) == nullptr || mw == nullptr) return kInvalidArgument;
  *mw = static_cast<unsigned>(std::atof(power) * 1000.0);
  return kSuccess;
}

int nvmlDeviceGetSamples(void* handle, int type, unsigned long long since_us, int* value_type, unsigned* count,
                         void* samples) {
  (void)type, (void)since_us, (void)value_type, (void)count, (void)samples;
  return Of(handle) == nullptr ? kInvalidArgument : kNotSupported;
}

int nvmlDeviceGetUUID(void* handle, char* uuid, unsigned length) {
  const Gpu* g = Of(handle);
  if (g == nullptr || uuid == nullptr) return kInvalidArgument;
  std::snprintf(uuid, length, "GPU-fake-%s", g->pci.c_str());
  return kSuccess;
}

int nvmlDeviceGetSupportedMemoryClocks(void* handle, unsigned* count, unsigned* mhz) {
  if (Of(handle) == nullptr) return kInvalidArgument;
  if (mhz == nullptr || *count < 1) {
    *count = 1;
    return kInsufficientSize;
  }
  *count = 1;
  mhz[0] = kMemoryMhz;
  return kSuccess;
}

int nvmlDeviceGetSupportedGraphicsClocks(void* handle, unsigned memory_mhz, unsigned* count, unsigned* mhz) {
  if (Of(handle) == nullptr) return kInvalidArgument;
  if (memory_mhz != kMemoryMhz) return kNotFound;
  const unsigned n = (1980 - 345) / 15 + 1;
  if (mhz == nullptr || *count < n) {
    *count = n;
    return kInsufficientSize;
  }
  *count = n;
  for (unsigned i = 0; i < n; ++i) mhz[i] = 1980 - 15 * i;  // NVML lists them highest first
  return kSuccess;
}

int nvmlDeviceSetGpuLockedClocks(void* handle, unsigned min_mhz, unsigned max_mhz) {
  const Gpu* g = Of(handle);
  if (g == nullptr) return kInvalidArgument;
  Log("nvmlDeviceSetGpuLockedClocks " + g->pci + " " + std::to_string(min_mhz) + " " + std::to_string(max_mhz));
  if (NoPermission()) return kNoPermission;
  if (min_mhz > max_mhz || max_mhz > 1980) return kInvalidArgument;
  SetState(g->pci, max_mhz);
  return kSuccess;
}

int nvmlDeviceResetGpuLockedClocks(void* handle) {
  const Gpu* g = Of(handle);
  if (g == nullptr) return kInvalidArgument;
  Log("nvmlDeviceResetGpuLockedClocks " + g->pci);
  if (NoPermission()) return kNoPermission;
  SetState(g->pci, 0);
  return kSuccess;
}

}  // extern "C"
