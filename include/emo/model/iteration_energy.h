// Energy of one training/inference iteration of one GPU at a clock, from how long each kernel
// class keeps the GPU busy, and the calibration of its activity coefficients against measured
// energy per iteration (BRIEF stage 5 (ii)).
//
// Over an iteration of (measured, unprofiled) length T, the GPU is busy with some set of kernel
// classes at every moment. With P_idle(f) the device's idle power and D_k(f) = P_k(f) - P_idle(f)
// the power a class-k kernel draws above idle when it runs alone (P_k from the device's class
// prior: P_static + c_k f_eff V(f_eff)^2),
//   E_demand = P_idle(f) * T + a * sum over segments s of dur_s * W_s(f),
//   W_s = min(sum_{k active in s} u_k D_k(f), max_{k active in s} max(1, u_k) D_k(f))
// where `a` (activity scale) calibrates the class powers to real workloads and u_k is the
// time-weighted share of class k's ops (kernel_work.h OpShare: the KernelShare of SMs covered and
// ramp, 1 when the device file has no occupancy numbers; or the WorkShare of a matrix-multiply
// kernel whose work is known, which may exceed 1). Concurrent classes share the SMs: their powers above idle add, up to
// the GPU full of the hungriest of them. The firmware's power limiter acts on a window
// of about a second, far longer than an iteration, so it caps the iteration's average power, not
// each kernel's: E = min(E_demand, P_cap * T), and an iteration whose demand exceeds P_cap is
// reported as capped (its clock is throttled; its measured T already contains the slowdown).
#pragma once

#include <array>
#include <span>
#include <string>
#include <vector>

#include "emo/base/status.h"
#include "emo/base/units.h"
#include "emo/model/device.h"
#include "emo/model/kernel_class.h"

namespace emo::trace {
struct Trace;
}

namespace emo::model {

// Number of subsets of kernel classes (bit i = KernelClass i).
inline constexpr int kNumClassMasks = 1 << kNumKernelClasses;

// Busy time of one GPU per iteration, by the set of kernel classes running at the same time.
struct ActivityProfile {
  int iterations = 0;                           // iterations the trace covered
  std::array<double, kNumClassMasks> busy_s{};  // per iteration; busy_s[0] is unused
  // Per class, the time-weighted mean share (kernel_work.h OpShare) of its ops: its power above idle is
  // the full-GPU class power times this.
  std::array<double, kNumKernelClasses> share = [] {
    std::array<double, kNumKernelClasses> a{};
    a.fill(1.0);
    return a;
  }();
  double Busy() const;                          // union of all GPU work per iteration (s)
  double ClassBusy(KernelClass c) const;        // time class c is active per iteration (s)
};

// One GPU operation as the profile builder sees it.
struct ClassInterval {
  TimeNs start = 0;
  TimeNs end = 0;
  KernelClass cls = KernelClass::kOther;
  double share = 1.0;  // the op's share (kernel_work.h OpShare: KernelShare, or WorkShare; may exceed 1)
};

// Sweeps the intervals (any order, overlaps allowed) and divides by `iterations`.
ActivityProfile ProfileFromIntervals(std::span<const ClassInterval> ops, int iterations);

// The activity profile of the GPU work of `trace`: GPU ops whose launch call lies inside a
// ProfilerStep#N annotation, classified by name, divided by the number of such steps. Ops are
// attributed by launch time because a run-ahead CPU launches step N+1's kernels while step N's
// still run. A trace without ProfilerStep annotations counts as one iteration of all its ops.
// Each op's share comes from `device` (kernel_work.h OpShare: its work per µs where the trace
// records its operator's shapes, else its launch configuration and duration).
Result<ActivityProfile> ActivityFromTrace(const trace::Trace& trace, const DeviceModel& device);

// The prediction for one iteration.
struct IterationEnergy {
  double energy_j = 0.0;
  double avg_power_w = 0.0;
  double demand_power_w = 0.0;  // average power before the cap
  bool capped = false;
  double busy_s = 0.0;          // union busy time used (after trimming)
  double idle_s = 0.0;          // step time minus busy time
  double comm_trimmed_s = 0.0;  // communication-only time dropped to fit the step (see below)
};

// Predicts one iteration's energy at clock f. `step_s` is the measured iteration time without the
// profiler (traces run slower, but kernel busy time is comparable). When the traced busy time
// exceeds step_s, communication-only time is trimmed first: NCCL kernels spin while waiting for
// peers, and the profiler lengthens those waits; any remaining excess scales all busy time down.
IterationEnergy PredictIterationEnergy(const DeviceModel& device, const ActivityProfile& profile,
                                       double step_s, double activity_scale, MegaHertz f);

// The clock the power limiter holds an iteration at: the locked clock f when the iteration's
// demand at f stays within the cap power, else the clock at which its demand (busy times held
// fixed) equals the cap power, found by bisection on [lowest table clock, f].
MegaHertz ThrottleClock(const DeviceModel& device, const ActivityProfile& profile, double step_s,
                        double activity_scale, MegaHertz f);

// A measured iteration energy with the activity behind it. Samples of one `group` (e.g. the two
// ranks of one DDP job) are held out together.
struct EnergySample {
  std::string name;
  std::string group;
  ActivityProfile profile;
  double step_s = 0.0;
  double energy_j = 0.0;
};

// The activity scale minimizing the relative squared error of the predicted energies at the
// device's default clock (golden-section search on [0.05, 5]; the cap makes it nonlinear).
// Fails when no sample can inform it (all capped or empty).
Result<double> CalibrateActivityScale(const DeviceModel& device,
                                      std::span<const EnergySample> samples);

// One held-out prediction.
struct HeldOutEnergy {
  std::string name;
  std::string group;
  double activity_scale = 0.0;  // fitted on the other groups only
  IterationEnergy predicted;
  double measured_j = 0.0;
  double error_pct = 0.0;  // 100 * (predicted - measured) / measured
};

// Energy and time per iteration measured without the profiler.
struct MeasuredIteration {
  std::string name;  // workload, e.g. "gpt_train", "ddp_gpt_rank0"
  double step_s = 0.0;
  double energy_j = 0.0;
};

// Reads EMO's measurement file (../shared/traces/h200/measured.json: "workloads" and
// "multi_gpu" entries with energy_per_iter_j and avg_power_w). The step time is
// energy_per_iter_j / avg_power_w, the mean iteration time over the measured window, which is the
// time the energy per iteration was spread over (the median iteration time is not: a pipeline
// rank's median can sit far from its mean).
Result<std::vector<MeasuredIteration>> ReadMeasuredIterations(const std::string& path);

// The group of a workload name: the name without a trailing "_rank<N>".
std::string WorkloadGroup(std::string_view name);

// Leave-one-group-out: for each group, calibrates on every other group and predicts it.
Result<std::vector<HeldOutEnergy>> LeaveOneGroupOut(const DeviceModel& device,
                                                    std::span<const EnergySample> samples);

}  // namespace emo::model
