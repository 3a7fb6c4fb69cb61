// Clock actuators (`emo run --actuator`): one interface, four backends.
//
//   nvml     locks the SM clock with nvmlDeviceSetGpuLockedClocks (min = max), resets with
//            nvmlDeviceResetGpuLockedClocks; memory clock left as it is. Needs root (or
//            CAP_SYS_ADMIN); NVML is opened with dlopen, never linked.
//   zeusd    asks a running zeusd (ml-energy/zeus) over its Unix socket to do the same; needs
//            only access to the socket.
//   dry-run  changes nothing: writes each switch it would make, with its time, to a log.
//   emulate  changes nothing either (the plan's slowdown is emulated in the program; Lock only
//            records, like dry-run).
//
// Plain C++ and POSIX (no EMO library, no CUDA): the injection library inside the user's
// program links it, and so does `emo` for the clock watchdog. docs/actuators.md has the rest.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace emo::runtime {

// What an actuator learned about a GPU when it opened it.
struct ActuatorGpu {
  std::string pci_bus_id;              // as CUDA and NVML print it, "0000:19:00.0"
  std::string name;                    // "NVIDIA H200", empty when the backend cannot say
  int index = -1;                      // NVML's (and zeusd's) index of the GPU, -1 unknown
  std::vector<unsigned> supported_mhz; // SM clocks a lock may ask for at the current memory clock;
                                       // empty when unknown (the target is then sent as it is)
};

// One clock switch: which pack of which iteration asked for it, for the log.
struct SwitchRequest {
  unsigned mhz = 0;
  int pack = -1;             // index of the pack in the policy's GPU entry, -1 none
  int64_t iteration = -1;    // the program's iteration, -1 unknown
  const char* why = "";      // "pack", "fallback", "guard", "exit"
};

class Actuator {
 public:
  virtual ~Actuator() = default;

  // "nvml", "zeusd", "dry-run" or "emulate".
  virtual const char* kind() const = 0;
  // Whether Lock and Reset change a GPU's clocks.
  virtual bool changes_clocks() const = 0;
  // Opens the GPU with this PCI bus id. Returns the slot Lock and Reset take, or -1 with
  // `error` set ("NVML says no permission to ...").
  virtual int Open(const std::string& pci_bus_id, ActuatorGpu* gpu, std::string* error) = 0;
  // Locks the SM clock of an opened GPU at `request.mhz` (snapped to the nearest supported
  // clock when the list is known).
  virtual bool Lock(int slot, const SwitchRequest& request, std::string* error) = 0;
  // Back to the GPU's default clock behaviour.
  virtual bool Reset(int slot, const char* why, std::string* error) = 0;
};

struct ActuatorOptions {
  // nvml: the library to load; empty = $EMO_NVML_LIBRARY, else libnvidia-ml.so.1. A library
  // named explicitly that cannot be loaded is an error (never a fall-back to the system one).
  std::string nvml_library;
  // zeusd: its socket; empty = $EMO_ZEUSD_SOCKET, else /var/run/zeusd.sock.
  std::string zeusd_socket;
  // dry-run / emulate: where each switch is written (one line each); empty = stderr.
  std::string log_path;
};

// The actuator of this kind, or nullptr with `error` naming what is wrong (unknown kind, NVML
// not loadable, no zeusd at the socket).
std::unique_ptr<Actuator> MakeActuator(const std::string& kind, const ActuatorOptions& options, std::string* error);

// Whether `kind` is one MakeActuator knows.
bool IsActuatorKind(const std::string& kind);

// The supported clock nearest to `mhz` (ties go to the lower one); `mhz` itself when the list
// is empty.
unsigned SnapClock(const std::vector<unsigned>& supported_mhz, unsigned mhz);

// CLOCK_MONOTONIC in ns: the time base of switch logs (the injection library's CUPTI
// timestamps are converted to it through its clock reference).
int64_t MonotonicNs();

}  // namespace emo::runtime
