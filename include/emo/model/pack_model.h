// Per-pack clock options for the optimizer: a pack's time/energy model built from its busy time
// per kernel class and a device model, evaluated at every clock of the device's table, with the
// dominated clocks filtered out.
#pragma once

#include <array>
#include <span>
#include <vector>

#include "emo/base/units.h"
#include "emo/model/clock_model.h"
#include "emo/model/device.h"
#include "emo/model/kernel_class.h"

namespace emo::model {

// A pack's GPU busy time per kernel class (s), as measured.
struct ClassTimes {
  std::array<double, kNumKernelClasses> busy_s{};
  // Busy time weighted by each op's KernelShare (device.h): a class's power above idle is its
  // full-GPU power times active_s / busy_s.
  std::array<double, kNumKernelClasses> active_s{};
  // The clock-bound part of busy_s (at the measured clock) of the time added with a comp_share of
  // its own; the rest of busy_s takes its class prior's comp_share.
  std::array<double, kNumKernelClasses> clock_bound_s{};
  std::array<double, kNumKernelClasses> own_share_s{};  // the time added with its own comp_share
  double Total() const;
  // Adds `s` seconds of class c drawing `share` of the class's full-GPU power above idle; of
  // which `comp_share` is clock-bound (DeviceModel::CompShare of its kind), or the class prior's
  // when negative.
  void Add(KernelClass c, double s, double share = 1.0, double comp_share = -1.0);
  // The clock-bound seconds of class c under `device`'s class prior for the rest.
  double ClockBound(KernelClass c, const DeviceModel& device) const;
};

// One GPU op for the concurrency bound.
struct OpSpan {
  TimeNs start = 0;
  TimeNs end = 0;
  KernelClass cls = KernelClass::kOther;
  double share = 1.0;  // its share: KernelShare, or WorkShare where its work is known (kernel_work.h OpShare)
};

// Ops of several streams that overlap share the SMs: wherever they run together, their powers
// above idle add up to at most the GPU full of the hungriest of their classes (the rule
// PredictIterationEnergy's sweep applies per class). Returns, per op of one GPU, the factor (<= 1)
// its share is scaled by for that: the time-weighted mean over its lifetime of (the hungriest
// class's power / the sum of the active ops' powers) where that sum exceeds it, else 1. Per op,
// so the energy of a set of ops does not depend on how they are cut into packs.
std::vector<double> ConcurrencyFactors(const DeviceModel& device, std::span<const OpSpan> ops);

// The UnitModel of a pack whose busy times were measured with the GPU running at
// `measured_clock` (the default clock, or the clock the limiter throttled the run to, see
// ThrottleClock in iteration_energy.h). Each class's time splits into a clock-bound part (its
// kernels' comp_share, ClassTimes::ClockBound) and a clock-free part; the activity is the
// time-weighted class activity, with the part above idle scaled by the device's activity_scale.
//
// f_cap: the limiter averages power over about a second, longer than a pack, so a pack is not
// capped on its own power; but a run that was throttled (measured_clock below the default clock)
// stays throttled whatever higher clock is locked, so f_cap = measured_clock then, else +inf.
UnitModel PackUnitModel(const DeviceModel& device, const ClassTimes& times,
                        MegaHertz measured_clock);

// One clock choice for a unit.
struct ClockOption {
  MegaHertz clock{0.0};
  double time_s = 0.0;
  double energy_j = 0.0;
};

// Time and energy at every clock of the device's table, ascending by clock.
std::vector<ClockOption> ClockOptions(const DeviceModel& device, const UnitModel& unit);

// A pack's time and energy at every clock, ascending by clock: the sum over its kernel classes
// of each class's own unit (PackUnitModel of that class alone). Each class runs its own
// stretched time at its own power, so the options are additive: cutting a stretch of work into
// several packs never changes its time or energy at one clock. (One unit over the whole mix
// weights the classes' power by their time at the measured clock, which drifts from the
// stretched times at low clocks.) At the measured clock both give the same energy.
std::vector<ClockOption> PackClockOptions(const DeviceModel& device, const ClassTimes& times,
                                          MegaHertz measured_clock);

// Per clock of the device's table (ascending) and share kind (ShareKindOf): the time of a kernel
// of that kind at the clock over its measured time (PackUnitModel of it alone, measured at
// `measured_clock`: the default clock, or the clock the power limiter held the run at, above
// which every ratio is 1).
std::vector<std::array<double, kNumShareKinds>> ShareKindTimeRatios(const DeviceModel& device,
                                                                    MegaHertz measured_clock);

// Indices of the Pareto-optimal options (no other option is at most as slow and at most as
// costly, and strictly better in one), sorted by time ascending. Ties in both keep the first.
std::vector<size_t> ParetoFront(std::span<const ClockOption> options);

}  // namespace emo::model
