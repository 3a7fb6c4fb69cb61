// The per-unit time and power model as a function of the SM clock (BRIEF stage 5).
//
// A unit is anything that runs at one GPU-wide clock: a pack of kernels, or one pipeline-stage
// instruction (forward/backward) in a Perseus stage profile. With f_eff = min(f, f_cap):
//   t(f) = t_mem + t_comp * f_max / f_eff
//   P(f) = P_static + c * f_eff * V(f_eff)^2
//   E(f) = P(f) * t(f)
// where V is a GPU-wide relative voltage curve, flat (1) below a ridge clock and linear above it.
// f_cap is the clock at which the unit's power reaches the power limit (the firmware lowers the
// clock there whatever the lock says); a unit that never reaches it has f_cap = +inf.
#pragma once

#include <cstdint>
#include <limits>

#include "emo/base/units.h"

namespace emo::model {

// Relative voltage V(f) = 1 + slope * max(0, f - ridge); V is 1 at and below the ridge.
struct VoltageCurve {
  MegaHertz ridge{0.0};
  double slope_per_mhz = 0.0;  // >= 0

  double At(MegaHertz f) const;
  // f * V(f)^2 in MHz: the clock-dependent factor of dynamic power.
  double DynamicFactor(MegaHertz f) const;
};

// GPU-wide parameters shared by every unit on one device.
struct GpuParams {
  MegaHertz f_max{0.0};     // the top of the clock table; t_comp is measured at f_max
  Watts static_power{0.0};  // P_static: the clock-independent part of board power
  VoltageCurve voltage;
  Watts power_limit{std::numeric_limits<double>::infinity()};  // sustained board power limit
};

// How a unit's power behaves above its cap (fit.h: FitOptions::pinned explains when each applies).
enum class PowerForm : uint8_t {
  kCapped,        // P = P_static + c * f_eff * V(f_eff)^2: time and power both stop at f_cap
  kClockCeiling,  // P = P_static + c * f_eff * V(f)^2: the work stops speeding up at f_cap, the
                  // voltage still follows the locked clock
  kPowerLimited,  // P = min(power_cap_w, P_static + c * f * V(f)^2): the limiter holds the power
};

// One unit's parameters.
struct UnitModel {
  double t_mem_s = 0.0;   // clock-independent time (s)
  double t_comp_s = 0.0;  // time that scales as 1/f, measured at f_max (s)
  double activity = 0.0;  // c: dynamic power per MHz of f*V^2 (W/MHz)
  MegaHertz f_cap{std::numeric_limits<double>::infinity()};  // +inf when never capped
  PowerForm power_form = PowerForm::kCapped;
  double power_cap_w = std::numeric_limits<double>::infinity();  // kPowerLimited only
};

// min(f, unit.f_cap).
MegaHertz EffectiveClock(const UnitModel& unit, MegaHertz f);
// t(f) in seconds.
double UnitTime(const GpuParams& gpu, const UnitModel& unit, MegaHertz f);
// P(f): average board power while the unit runs (by the unit's PowerForm).
Watts UnitPower(const GpuParams& gpu, const UnitModel& unit, MegaHertz f);
// E(f) = P(f) * t(f).
Joules UnitEnergy(const GpuParams& gpu, const UnitModel& unit, MegaHertz f);

// The clock at which P_static + activity * f * V(f)^2 reaches gpu.power_limit, or +inf when it
// never does below `search_max` (bisection; the power curve is increasing in f).
MegaHertz CapClockForPowerLimit(const GpuParams& gpu, double activity, MegaHertz search_max);

}  // namespace emo::model
