// Device models: the per-GPU facts and parameters the clock model needs, read from
// devices/<name>.json. Every number in a device file is an object
//   {"value": x, "source": "where it comes from", "assumption": true|false, "reasoning": "..."}
// and the loader refuses a number without a source, or an assumption without its reasoning.
#pragma once

#include <array>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "emo/base/status.h"
#include "emo/base/units.h"
#include "emo/model/clock_model.h"
#include "emo/model/kernel_class.h"

namespace emo::model {

// Where one number of a device file comes from.
struct Provenance {
  std::string source;
  bool assumption = false;
  std::string reasoning;  // required when assumption
};

// Per kernel class priors: how a pack of that class scales with the clock and what it draws.
struct ClassPrior {
  double comp_share = 0.9;  // t_comp / (t_mem + t_comp) at f_max
  double activity = 0.0;    // c in W/MHz (P = P_static + c * f * V(f)^2)
};

// The kernels a device file may give a clock-bound share of their own (DeviceModel::CompShare):
// each kind (KernelKind); GEMMs on the CUDA cores (IsCudaCoreGemm) apart from their kind; and
// activations on 16-bit data apart from the others (half the bytes per element for the same
// math: on the H200 a bf16 SiLU or GELU is SM-bound where an fp32 tanh streams, docs/model.md 6a).
inline constexpr int kNumShareKinds = kNumKernelKinds + 2;
inline constexpr int kCudaCoreGemmShareKind = kNumKernelKinds;
inline constexpr int kHalfActivationShareKind = kNumKernelKinds + 1;
// The share kind of a kernel: kCudaCoreGemmShareKind for a CUDA-core GEMM,
// kHalfActivationShareKind for an activation on 16-bit data, else its KernelKind.
int ShareKindOf(KernelKind kind, bool cuda_core_gemm, bool half_precision = false);
// The same from a kernel's name (ClassifyKind, IsCudaCoreGemm, IsHalfPrecision).
int ShareKindOfName(std::string_view name);
// The class whose prior a share kind falls back to.
KernelClass ShareKindClass(int share_kind);
// The device file's key of a share kind under "kinds": its KernelKindName, "cuda_core_gemm",
// "activation_16bit".
std::string_view ShareKindName(int share_kind);

// Power above idle of a matrix-multiply kernel as a function of its work per µs (docs/model.md
// §6a): at u = FLOPs / (duration x its data type's dense peak), a0 + a1 u^gamma watts at the
// default clock, whatever its grid covers.
struct WorkCurve {
  double a0_w = 0.0;
  double a1_w = 0.0;
  double gamma = 1.0;
  double At(double u) const;  // u clamped to [0, 1]
};

// The device file's "work_power" section: dense peaks (FLOP/s) by the inputs' data type, and one
// curve for kernels on the tensor cores (16-bit, tf32) and one for those on the CUDA cores (fp32).
struct WorkPower {
  bool known = false;  // the file has the section
  double peak_16bit_flops = 0.0;
  double peak_tf32_flops = 0.0;
  double peak_fp32_flops = 0.0;
  WorkCurve tensor;
  WorkCurve cuda_core;
  // Optional ("tile" in the section; known=false without it): the work per µs of a tensor-core
  // GEMM whose operator's work the trace does not give, from the tile its name states
  // (kernel_class.h GemmTile) and its launch (DeviceModel::TileWork).
  struct Tile {
    bool known = false;
    double u_sat = 0.0;           // u of a GEMM whose tiles keep the tensor cores busy, every SM covered
    double knee_intensity = 0.0;  // the tile's multiply-adds per byte loaded from which they do
    double floor_us = 0.0;        // a kernel's fixed time with no tensor-core work (launch, prologue)
  } tile;
};

// One GPU model.
struct DeviceModel {
  std::string name;               // file stem: "h200", "a100-sxm"
  std::string gpu;                // marketing name
  std::string path;               // the file it was read from
  // ECMAScript regex (case-insensitive, searched) matching the GPU names traces give for this
  // GPU (deviceProperties[].name: "NVIDIA H200"); empty: traces cannot be checked against it.
  std::string trace_gpu_regex;
  std::vector<MegaHertz> clocks;  // ascending; clocks.back() == gpu_params.f_max
  MegaHertz default_clock{0.0};
  GpuParams params;                 // f_max, P_static, voltage curve, power limit
  Watts cap_power{0.0};             // average board power while the limiter holds (<= power limit)
  Watts idle_power{0.0};            // idle between kernels at the default clock, context resident
  Watts idle_power_min_clock{0.0};  // idle at the lowest clock (0 when unknown)
  // Time from a clock-lock call until the new clock holds (µs); 0 when the file has none.
  double switch_latency_us = 0.0;
  // Occupancy (see KernelShare): streaming multiprocessors (0: unknown, every kernel fills the
  // GPU), resident warps per SM at which a kernel's SMs draw their full power (0: any), the
  // time a kernel takes to reach full power (0: at once), and the time at its start that draws
  // nothing above idle (0: none; a form the energy fit can choose: BENCHMARKS.md, "A start-up
  // floor in place of the ramp").
  int sm_count = 0;
  double saturation_warps = 0.0;
  double kernel_ramp_us = 0.0;
  double kernel_floor_us = 0.0;
  // Power above idle of a CUDA-core GEMM (IsCudaCoreGemm) over that of a tensor-core one, both
  // filling the GPU: the compute class's power is the tensor cores'. 1 when the file has none.
  double cuda_core_gemm_share = 1.0;
  std::array<ClassPrior, kNumKernelClasses> classes{};
  // Clock-bound shares measured per kind ("kinds" in the file, each optional); NaN: the class
  // prior's comp_share holds for that kind.
  std::array<double, kNumShareKinds> kind_comp_share = [] {
    std::array<double, kNumShareKinds> a{};
    a.fill(std::numeric_limits<double>::quiet_NaN());
    return a;
  }();
  // Power of matrix-multiply kernels whose work the trace knows (WorkShare); known=false: none.
  WorkPower work_power;
  // Per share kind ("kinds.<kind>.power_share" in the file, each optional; NaN: 1): a factor on
  // KernelShare for a kernel of that kind whose work the trace does not give (OpShare): what such
  // kernels draw, on average, against what their launch configuration says, where their work was
  // known (docs/model.md 6a).
  std::array<double, kNumShareKinds> kind_power_share = [] {
    std::array<double, kNumShareKinds> a{};
    a.fill(std::numeric_limits<double>::quiet_NaN());
    return a;
  }();
  // Scale of the class powers above idle calibrated on measured iteration energies (see
  // iteration_energy.h); 1 when the file has none.
  double activity_scale = 1.0;
  std::map<std::string, Provenance> provenance;  // by field path, e.g. "voltage.ridge_mhz"
  int assumptions = 0;                           // how many numbers are marked as assumptions
  nlohmann::json raw;                            // the file as read

  const ClassPrior& Prior(KernelClass c) const { return classes[static_cast<size_t>(c)]; }
  // t_comp / (t_mem + t_comp) at f_max of a kernel of this share kind (ShareKindOf): the file's
  // figure for the kind where it has one, else its class prior's.
  double CompShare(int share_kind) const;
  // The factor kind_power_share gives a kernel of this share kind whose work is unknown (1 when
  // the file gives none).
  double PowerShare(int share_kind) const;
  // Idle power at clock f: linear in f*V(f)^2 between the two measured idle points when both are
  // known, else idle_power at every clock.
  Watts IdlePower(MegaHertz f) const;
  // The table clock nearest to f.
  MegaHertz NearestClock(MegaHertz f) const;
  // The share of its class's full-GPU power above idle that a kernel draws, from its launch
  // configuration and duration: (SMs it covers / sm_count) x min(1, resident warps per covered
  // SM / saturation_warps) x d / (d + kernel_ramp) x max(0, d - kernel_floor) / d, times
  // cuda_core_gemm_share for a CUDA-core GEMM. Each factor is 1 when its numbers are unknown (0),
  // as for copies and memsets (blocks 0).
  double KernelShare(int64_t blocks, int64_t threads_per_block, double duration_s,
                     bool cuda_core_gemm = false) const;
  // The compute class's power above idle (W) at the default clock, filling the GPU, at the file's
  // activity scale: what a share of 1 draws there.
  double ComputeAboveIdle() const;
  // The share, in KernelShare's units, of a matrix-multiply kernel at work per µs u (WorkPower):
  // its curve's power over ComputeAboveIdle() at activity scale 1, so that activity_scale scales
  // the curve's power as it does the classes'. It may exceed 1 (a kernel hungrier than the class
  // average). 0 when the file has no work_power or the compute class draws nothing above idle.
  double WorkShare(double u, bool cuda_core) const;
  // The work per µs a tensor-core GEMM kernel of unknown work reaches by its tile and launch:
  //   u = u_sat x min(1, intensity / knee) x (SMs covered / sm_count) x max(0, d - floor) / d
  // NaN when the file has no work_power.tile or the tile is unknown.
  double TileWork(double tile_intensity, int64_t blocks, double duration_s) const;
};

// Whether a trace was recorded on the GPU a device model describes.
struct DeviceCheck {
  enum class Outcome { kMatch, kUnchecked, kMismatch };
  Outcome outcome = Outcome::kUnchecked;
  std::string trace_gpu;  // the trace's GPU names, joined ("" when it names none)
  std::string message;    // one sentence for reports, naming both
};
// Checks the GPU names a trace recorded (one per device it used; empty when it recorded none)
// against the model's trace_gpu_regex.
DeviceCheck CheckTraceGpu(const DeviceModel& device, const std::vector<std::string>& trace_gpus);
std::string_view DeviceCheckName(DeviceCheck::Outcome o);
// Whether per-clock measurements (a stage profile's clocks) come from the GPU a model
// describes: every clock must be in its clock table and the highest must be its default clock.
DeviceCheck CheckProfileClocks(const DeviceModel& device, const std::vector<MegaHertz>& clocks);

// Parses a device file's JSON. `path` names it in errors.
Result<DeviceModel> ParseDevice(const nlohmann::json& j, const std::string& path);
// Reads and parses one device file.
Result<DeviceModel> LoadDevice(const std::string& path);
// The folder of device files: $EMO_DEVICES_DIR when set, else the source tree's devices/.
std::string DefaultDevicesDir();
// Every *.json in `dir`, sorted by name. Fails on the first file that does not parse.
Result<std::vector<DeviceModel>> LoadDevices(const std::string& dir);
// A device by name ("h200") from `dir`, or by path when `name_or_path` names a file.
Result<DeviceModel> FindDevice(const std::string& name_or_path, const std::string& dir);

}  // namespace emo::model
