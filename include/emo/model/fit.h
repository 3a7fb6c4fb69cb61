// Least-squares fits of the clock model (clock_model.h) to measured samples.
//
// Time, per unit: t = t_mem + t_comp * f_max / min(f, f_cap). For a fixed f_cap this is linear in
// (t_mem, t_comp); f_cap is found by a search over candidate clocks with the linear fit inside.
// Power, per device: P = P_static + c_u * f_eff * V(f_eff)^2 with P_static and V shared by every
// unit (the same GPU) and c_u per unit. For a fixed voltage curve this is linear in
// (P_static, c_1..c_U); the ridge and slope are found by a grid search with the linear fit inside
// and a golden-section refinement of the slope. All residuals are relative (divided by the
// measurement), so the fit minimizes the same kind of error that MAPE reports.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "emo/base/status.h"
#include "emo/model/clock_model.h"
#include "emo/model/stage_profile.h"

namespace emo::model {

// Options of the per-unit time fit.
struct TimeFitOptions {
  // Search for a power-cap clock; off fits the plain t_mem + t_comp * f_max / f.
  bool allow_cap = true;
  // A cap is kept only when it cuts the relative rms residual of the uncapped fit by at least
  // this fraction (0.5 = halves it). With as many samples as parameters a cap can always bend
  // the curve through the top sample; this keeps it for when the top clocks really are flat.
  double cap_min_gain = 0.5;
};

// Result of the per-unit time fit.
struct TimeFit {
  double t_mem_s = 0.0;
  double t_comp_s = 0.0;
  MegaHertz f_cap{std::numeric_limits<double>::infinity()};
  double rms_rel = 0.0;  // rms of (model - measured) / measured over the samples
};

// Fits one unit's time model to `samples` (at least 2 distinct clocks). t_mem, t_comp >= 0.
Result<TimeFit> FitTime(std::span<const ClockSample> samples, MegaHertz f_max,
                        const TimeFitOptions& options = {});

// One power measurement of one unit at its effective clock.
struct PowerObservation {
  size_t unit = 0;
  MegaHertz f_eff{0.0};
  double power_w = 0.0;
  MegaHertz f_volt{0.0};  // the clock the voltage follows; 0 = f_eff
  MegaHertz VoltageClock() const { return f_volt.value() > 0.0 ? f_volt : f_eff; }
};

// Options of the joint power fit.
struct PowerFitOptions {
  double ridge_step_mhz = 5.0;    // ridge grid spacing between the lowest and highest f_eff
  int slope_steps = 120;          // slope grid size over [0, max_voltage_rise / range]
  double max_voltage_rise = 1.0;  // V(f_max) <= 1 + this
  std::optional<double> static_power_w;  // when set, P_static is pinned to it, not fitted
};

// Result of the joint power fit.
struct PowerFit {
  Watts static_power{0.0};
  VoltageCurve voltage;
  std::vector<double> activity;  // per unit, W/MHz
  double rms_rel = 0.0;
};

// Fits P_static, the voltage curve and one activity per unit (units 0..num_units-1) to
// `observations`. P_static is kept in [0, min observed power].
Result<PowerFit> FitPower(std::span<const PowerObservation> observations, size_t num_units,
                          const PowerFitOptions& options = {});

// The device-wide part of the power model: static power and voltage curve.
struct DeviceCurve {
  Watts static_power{0.0};
  VoltageCurve voltage;
};

// Options of a whole-profile fit.
struct FitOptions {
  TimeFitOptions time;
  PowerFitOptions power;
  // When set, P_static and V are taken from here (e.g. a device calibration sweep of another
  // workload on the same GPU) and only the per-unit parameters are fitted.
  std::optional<DeviceCurve> device;
  int max_iterations = 6;  // rounds of (power fit, joint cap choice); see FitProfile
  // Device numbers a device file holds (not from any workload's sweep). When set, FitProfile
  // pins P_static to `static_power` (the GPU's idle/blocking power), takes every unit's cap from
  // its time curve alone, and classes the profile by `power_limit`: power-limited when the
  // median unit power at the top fit clock is at least `limited_fraction` of the limit
  // (PowerForm::kPowerLimited: the limiter holds each unit at its top-clock power; the top
  // clock is not used for the voltage curve), else clock-ceiling (PowerForm::kClockCeiling:
  // the work stops speeding up at the cap while the voltage follows the locked clock).
  // bench/research/model_fit_order3.md has the derivation and its caveats.
  struct Pinned {
    Watts static_power{0.0};
    Watts power_limit{0.0};
    double limited_fraction = 0.97;
  };
  std::optional<Pinned> pinned;
};

// A fitted profile: the GPU-wide parameters and one UnitModel per profile unit (same order).
struct ProfileFit {
  GpuParams gpu;
  std::vector<std::string> unit_names;
  std::vector<UnitModel> units;
  std::vector<MegaHertz> fit_clocks;  // the clocks whose samples were used
  double time_rms_rel = 0.0;          // over the samples used
  double power_rms_rel = 0.0;
  bool device_fixed = false;  // P_static and V came from FitOptions::device
  int iterations = 0;
  // FitOptions::pinned: the class found and the median top-clock power over the limit.
  bool power_limited = false;
  double top_power_fraction = 0.0;
};

// Fits every unit of `profile` using only the samples at `clocks` (all samples when empty).
// f_max is the highest clock of the profile (the top of the measured table). The voltage curve and
// P_static are fitted jointly over all units (they are properties of the device, not the unit)
// unless options.device fixes them.
//
// The cap clock links time and power: a capped unit's time and power both stop changing above
// f_cap. Caps start from the time-only fit (FitTime); then, alternately, the power model is fitted
// with f_eff from the current caps, and each unit's cap is chosen again to minimize its time plus
// power relative squared residuals (t_mem, t_comp and c refitted for every candidate cap), until
// the caps stop changing. A time-only cap puts the flattening where the time curve bends, which
// with a soft firmware limiter is lower than where the power curve flattens; the joint choice
// splits the difference by least squares.
Result<ProfileFit> FitProfile(const StageProfile& profile, std::span<const MegaHertz> clocks = {},
                              const FitOptions& options = {});

// Summary of a profile fit, for reports and device files.
struct FitSummary {
  double comp_share_min = 0.0, comp_share_median = 0.0, comp_share_max = 0.0;
  double activity_min = 0.0, activity_median = 0.0, activity_max = 0.0;  // W/MHz
  size_t capped_units = 0;
  // Median measured power at f_max over units whose fitted cap is below f_max: the average
  // board power the limiter holds; 0 when no unit is capped.
  double cap_power_w = 0.0;
  double time_mape_pct = 0.0;    // in-sample, over the fitted samples
  double energy_mape_pct = 0.0;  // in-sample
};

FitSummary SummarizeFit(const StageProfile& profile, const ProfileFit& fit);

// Joins profiles measured on the same device (e.g. GPT-3 and BLOOM on A100) so one fit shares
// the voltage curve across them; unit names get "<label>:" prefixes.
StageProfile MergeProfiles(std::span<const StageProfile> profiles,
                           std::span<const std::string> labels);

}  // namespace emo::model
