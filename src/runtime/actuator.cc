// The actuator backends (include/emo/runtime/actuator.h): NVML, zeusd and the two that change
// nothing (dry-run, emulate).
#include "emo/runtime/actuator.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include <nlohmann/json.hpp>

#include "nvml_library.h"

namespace emo::runtime {
namespace {

constexpr const char* kKinds[] = {"nvml", "zeusd", "dry-run", "emulate"};

// "0000:19:00.0", "00000000:19:00.0" and "19:00.0" name one GPU: compare them as numbers.
std::string CanonicalPci(const std::string& id) {
  unsigned domain = 0, bus = 0, device = 0, function = 0;
  const bool full = std::sscanf(id.c_str(), "%x:%x:%x.%x", &domain, &bus, &device, &function) == 4;
  if (!full) {
    domain = 0;
    if (std::sscanf(id.c_str(), "%x:%x.%x", &bus, &device, &function) != 3) return id;
  }
  char text[32];
  std::snprintf(text, sizeof(text), "%04x:%02x:%02x.%x", domain, bus, device, function);
  return text;
}

// Writes one line of the switch log in one write(2), so that the processes of a job can share
// a log opened for appending.
class SwitchLog {
 public:
  bool Open(const std::string& path, std::string* error) {
    if (path.empty()) return true;
    fd_ = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd_ < 0) {
      *error = "cannot open the switch log " + path + ": " + std::strerror(errno);
      return false;
    }
    return true;
  }
  ~SwitchLog() {
    if (fd_ >= 0) close(fd_);
  }
  void Write(const std::string& line) const {
    const std::string text = line + "\n";
    (void)!write(fd_ >= 0 ? fd_ : STDERR_FILENO, text.data(), text.size());
  }

 private:
  int fd_ = -1;
};

// Whether `slot` names one of the `opened` GPUs; otherwise says so in `error`.
bool ValidSlot(size_t opened, int slot, std::string* error) {
  if (slot >= 0 && static_cast<size_t>(slot) < opened) return true;
  *error = "no GPU opened as slot " + std::to_string(slot);
  return false;
}

std::string SwitchLine(const char* actuator, const ActuatorGpu& gpu, const char* action, const SwitchRequest* r,
                       unsigned mhz) {
  nlohmann::json j = {{"t_ns", MonotonicNs()}, {"pid", static_cast<int>(getpid())}, {"actuator", actuator},
                      {"gpu", gpu.pci_bus_id}, {"action", action}};
  if (r != nullptr) {
    j["mhz"] = mhz;
    j["requested_mhz"] = r->mhz;
    j["pack"] = r->pack;
    j["iteration"] = r->iteration;
    j["why"] = r->why;
  }
  return j.dump();
}

// Changes nothing; writes every switch to its log. The GPU's name and clock list come from NVML
// when it can be read (read functions only), so that the log shows the clock a lock would get.
class RecordingActuator final : public Actuator {
 public:
  RecordingActuator(const char* kind, const ActuatorOptions& options) : kind_(kind), options_(options) {}

  bool Start(std::string* error) {
    std::string ignored;
    nvml_ok_ = nvml_.Load(options_.nvml_library, /*control=*/false, &ignored);
    return log_.Open(options_.log_path, error);
  }
  const char* kind() const override { return kind_; }
  bool changes_clocks() const override { return false; }
  int Open(const std::string& pci_bus_id, ActuatorGpu* gpu, std::string* error) override {
    (void)error;
    std::lock_guard<std::mutex> lock(mutex_);
    *gpu = ActuatorGpu{};
    gpu->pci_bus_id = CanonicalPci(pci_bus_id);
    NvmlLibrary::Handle handle = nullptr;
    std::string ignored;
    if (nvml_ok_) nvml_.Find(pci_bus_id, &handle, &gpu->name, &gpu->index, &gpu->supported_mhz, &ignored);
    gpus_.push_back(*gpu);
    return static_cast<int>(gpus_.size()) - 1;
  }
  bool Lock(int slot, const SwitchRequest& r, std::string* error) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!Valid(slot, error)) return false;
    log_.Write(SwitchLine(kind_, gpus_[slot], "lock", &r, SnapClock(gpus_[slot].supported_mhz, r.mhz)));
    return true;
  }
  bool Reset(int slot, const char* why, std::string* error) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!Valid(slot, error)) return false;
    SwitchRequest r;
    r.why = why;
    log_.Write(SwitchLine(kind_, gpus_[slot], "reset", &r, 0));
    return true;
  }

 private:
  bool Valid(int slot, std::string* error) const { return ValidSlot(gpus_.size(), slot, error); }

  const char* kind_;
  ActuatorOptions options_;
  NvmlLibrary nvml_;
  bool nvml_ok_ = false;
  SwitchLog log_;
  std::mutex mutex_;
  std::vector<ActuatorGpu> gpus_;
};

class NvmlActuator final : public Actuator {
 public:
  bool Start(const ActuatorOptions& options, std::string* error) {
    return nvml_.Load(options.nvml_library, /*control=*/true, error);
  }
  const char* kind() const override { return "nvml"; }
  bool changes_clocks() const override { return true; }
  int Open(const std::string& pci_bus_id, ActuatorGpu* gpu, std::string* error) override {
    std::lock_guard<std::mutex> lock(mutex_);
    *gpu = ActuatorGpu{};
    gpu->pci_bus_id = CanonicalPci(pci_bus_id);
    NvmlLibrary::Handle handle = nullptr;
    if (!nvml_.Find(pci_bus_id, &handle, &gpu->name, &gpu->index, &gpu->supported_mhz, error)) return -1;
    gpus_.push_back({*gpu, handle});
    return static_cast<int>(gpus_.size()) - 1;
  }
  bool Lock(int slot, const SwitchRequest& r, std::string* error) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!Valid(slot, error)) return false;
    return nvml_.Lock(gpus_[slot].handle, SnapClock(gpus_[slot].gpu.supported_mhz, r.mhz), error);
  }
  bool Reset(int slot, const char* why, std::string* error) override {
    (void)why;
    std::lock_guard<std::mutex> lock(mutex_);
    if (!Valid(slot, error)) return false;
    return nvml_.Reset(gpus_[slot].handle, error);
  }

 private:
  struct Gpu {
    ActuatorGpu gpu;
    NvmlLibrary::Handle handle;
  };
  bool Valid(int slot, std::string* error) const { return ValidSlot(gpus_.size(), slot, error); }

  NvmlLibrary nvml_;
  std::mutex mutex_;
  std::vector<Gpu> gpus_;
};

// A client of zeusd's HTTP API over its Unix socket (docs/zeusd/api.md of ml-energy/zeus): GPUs
// by zeusd's index, found through /discover's pci_address; writes with block=true, so a switch
// has happened (or failed) when Lock returns.
class ZeusdActuator final : public Actuator {
 public:
  bool Start(const ActuatorOptions& options, std::string* error) {
    socket_ = options.zeusd_socket;
    if (socket_.empty()) {
      const char* env = std::getenv("EMO_ZEUSD_SOCKET");
      socket_ = env != nullptr && *env != '\0' ? env : "/var/run/zeusd.sock";
    }
    std::string body;
    if (!Request("GET", "/discover", &body, error)) return false;
    const auto j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("gpus") || !j["gpus"].is_array()) {
      *error = "zeusd at " + socket_ + " answered /discover without a \"gpus\" list";
      return false;
    }
    for (const auto& g : j["gpus"]) {
      if (!g.is_object() || !g.contains("id") || !g["id"].is_number_integer()) continue;
      ActuatorGpu gpu;
      gpu.index = g["id"].get<int>();
      if (g.contains("pci_address") && g["pci_address"].is_string()) gpu.pci_bus_id = CanonicalPci(g["pci_address"].get<std::string>());
      if (g.contains("name") && g["name"].is_string()) gpu.name = g["name"].get<std::string>();
      known_.push_back(gpu);
    }
    if (j.contains("enabled_api_groups") && j["enabled_api_groups"].is_array()) {
      bool control = false;
      for (const auto& group : j["enabled_api_groups"]) control = control || group == "gpu-control";
      if (!control) {
        *error = "zeusd at " + socket_ + " does not enable the gpu-control API group (start it with --enable gpu-control)";
        return false;
      }
    }
    return true;
  }
  const char* kind() const override { return "zeusd"; }
  bool changes_clocks() const override { return true; }
  int Open(const std::string& pci_bus_id, ActuatorGpu* gpu, std::string* error) override {
    std::lock_guard<std::mutex> lock(mutex_);
    const std::string want = CanonicalPci(pci_bus_id);
    for (const auto& k : known_) {
      if (k.pci_bus_id != want) continue;
      *gpu = k;
      opened_.push_back(k);
      return static_cast<int>(opened_.size()) - 1;
    }
    *error = "zeusd at " + socket_ + " does not list the GPU " + want + " in /discover";
    return -1;
  }
  bool Lock(int slot, const SwitchRequest& r, std::string* error) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!Valid(slot, error)) return false;
    const std::string mhz = std::to_string(r.mhz);
    std::string body;
    return Request("POST",
                   "/gpu/set_gpu_locked_clocks?gpu_ids=" + std::to_string(opened_[slot].index) +
                       "&min_clock_mhz=" + mhz + "&max_clock_mhz=" + mhz + "&block=true",
                   &body, error);
  }
  bool Reset(int slot, const char* why, std::string* error) override {
    (void)why;
    std::lock_guard<std::mutex> lock(mutex_);
    if (!Valid(slot, error)) return false;
    std::string body;
    return Request("POST", "/gpu/reset_gpu_locked_clocks?gpu_ids=" + std::to_string(opened_[slot].index) + "&block=true",
                   &body, error);
  }

 private:
  bool Valid(int slot, std::string* error) const { return ValidSlot(opened_.size(), slot, error); }

  // One HTTP/1.1 request on a new connection (Connection: close); true on a 2xx answer.
  bool Request(const std::string& method, const std::string& target, std::string* body, std::string* error) const {
    const std::string where = "zeusd at " + socket_ + ": " + method + " " + target;
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (socket_.size() >= sizeof(addr.sun_path)) {
      *error = "the zeusd socket path " + socket_ + " is too long";
      return false;
    }
    std::memcpy(addr.sun_path, socket_.c_str(), socket_.size() + 1);
    const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
      *error = where + ": cannot connect: " + std::strerror(errno) + " (is zeusd running, and may this user open the socket?)";
      if (fd >= 0) close(fd);
      return false;
    }
    timeval timeout{10, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    const std::string request = method + " " + target + " HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
    size_t sent = 0;
    while (sent < request.size()) {
      const ssize_t n = send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        *error = where + ": send failed: " + std::strerror(errno);
        close(fd);
        return false;
      }
      sent += static_cast<size_t>(n);
    }
    std::string answer;
    char chunk[4096];
    for (;;) {
      const ssize_t n = recv(fd, chunk, sizeof(chunk), 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      answer.append(chunk, static_cast<size_t>(n));
    }
    close(fd);
    int status = 0;
    if (std::sscanf(answer.c_str(), "HTTP/%*s %d", &status) != 1) {
      *error = where + ": no HTTP answer";
      return false;
    }
    const size_t split = answer.find("\r\n\r\n");
    *body = split == std::string::npos ? "" : answer.substr(split + 4);
    if (status < 200 || status > 299) {
      *error = where + ": HTTP " + std::to_string(status) + (body->empty() ? "" : ": " + *body);
      if (status == 403) *error += " (zeusd's NVML has no permission, or the token lacks gpu-control)";
      return false;
    }
    return true;
  }

  std::string socket_;
  std::vector<ActuatorGpu> known_;
  mutable std::mutex mutex_;
  std::vector<ActuatorGpu> opened_;
};

}  // namespace

int64_t MonotonicNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

unsigned SnapClock(const std::vector<unsigned>& supported_mhz, unsigned mhz) {
  unsigned best = mhz;
  unsigned best_distance = ~0u;
  for (unsigned s : supported_mhz) {
    const unsigned d = s > mhz ? s - mhz : mhz - s;
    if (d < best_distance || (d == best_distance && s < best)) {
      best = s;
      best_distance = d;
    }
  }
  return best;
}

bool IsActuatorKind(const std::string& kind) {
  for (const char* k : kKinds) {
    if (kind == k) return true;
  }
  return false;
}

std::unique_ptr<Actuator> MakeActuator(const std::string& kind, const ActuatorOptions& options, std::string* error) {
  if (kind == "nvml") {
    auto a = std::make_unique<NvmlActuator>();
    return a->Start(options, error) ? std::move(a) : nullptr;
  }
  if (kind == "zeusd") {
    auto a = std::make_unique<ZeusdActuator>();
    return a->Start(options, error) ? std::move(a) : nullptr;
  }
  if (kind == "dry-run" || kind == "emulate") {
    auto a = std::make_unique<RecordingActuator>(kind == "dry-run" ? "dry-run" : "emulate", options);
    return a->Start(error) ? std::move(a) : nullptr;
  }
  *error = "unknown actuator '" + kind + "' (nvml, zeusd, dry-run or emulate)";
  return nullptr;
}

}  // namespace emo::runtime
