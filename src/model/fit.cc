#include "emo/model/fit.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <set>

#include <Eigen/Dense>
#include <fmt/format.h>

#include "emo/base/stats.h"

namespace emo::model {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

struct LinearTimeFit {
  double a = 0.0;  // t_mem
  double b = 0.0;  // t_comp
  double sse = kInf;
};

// Weighted (relative) least squares of t_i ~ a + b * x_i with a, b >= 0.
LinearTimeFit FitTimeLinear(std::span<const ClockSample> samples, std::span<const double> x) {
  const Eigen::Index n = static_cast<Eigen::Index>(samples.size());
  Eigen::MatrixXd A(n, 2);
  Eigen::VectorXd y(n);
  for (Eigen::Index i = 0; i < n; ++i) {
    const double w = 1.0 / samples[i].time_s;  // relative residuals
    A(i, 0) = w;
    A(i, 1) = w * x[i];
    y(i) = 1.0;
  }
  auto sse_of = [&](double a, double b) { return (A * Eigen::Vector2d(a, b) - y).squaredNorm(); };
  LinearTimeFit best;
  Eigen::Vector2d sol = A.colPivHouseholderQr().solve(y);
  if (sol(0) >= 0.0 && sol(1) >= 0.0) {
    best = {sol(0), sol(1), sse_of(sol(0), sol(1))};
    return best;
  }
  // A bound is active: try each one-parameter fit and keep the better.
  const double b_only = A.col(1).dot(y) / A.col(1).squaredNorm();
  const double a_only = A.col(0).dot(y) / A.col(0).squaredNorm();
  LinearTimeFit fb{0.0, std::max(0.0, b_only), sse_of(0.0, std::max(0.0, b_only))};
  LinearTimeFit fa{std::max(0.0, a_only), 0.0, sse_of(std::max(0.0, a_only), 0.0)};
  return fb.sse <= fa.sse ? fb : fa;
}

LinearTimeFit FitTimeWithCap(std::span<const ClockSample> samples, MegaHertz f_max, double cap) {
  std::vector<double> x(samples.size());
  for (size_t i = 0; i < samples.size(); ++i) {
    x[i] = f_max.value() / std::min(samples[i].clock.value(), cap);
  }
  return FitTimeLinear(samples, x);
}

struct LinearPowerFit {
  double p_static = 0.0;
  std::vector<double> activity;
  double sse = kInf;
};

// For a fixed voltage curve: relative least squares of P_i ~ P_static + c_u(i) * g_i.
// Solved in closed form: for a given P_static each c_u is a 1-D weighted fit, so the total error
// is a quadratic in P_static (the Schur complement of the normal equations).
LinearPowerFit FitPowerLinear(std::span<const PowerObservation> obs, size_t num_units,
                              const VoltageCurve& v, double p_static_max,
                              std::optional<double> fixed_p_static = std::nullopt) {
  // Per unit sums with weights w = 1/P^2: Sgg, SgP, Sg1 (w*g), and overall S11, S1P, SPP.
  std::vector<double> sgg(num_units, 0.0), sgp(num_units, 0.0), sg1(num_units, 0.0);
  double s11 = 0.0, s1p = 0.0, spp = 0.0;
  std::vector<double> g(obs.size());
  for (size_t i = 0; i < obs.size(); ++i) {
    const double volt = v.At(obs[i].VoltageClock());
    g[i] = obs[i].f_eff.value() * volt * volt;
    const double w = 1.0 / (obs[i].power_w * obs[i].power_w);
    const size_t u = obs[i].unit;
    sgg[u] += w * g[i] * g[i];
    sgp[u] += w * g[i] * obs[i].power_w;
    sg1[u] += w * g[i];
    s11 += w;
    s1p += w * obs[i].power_w;
    spp += w * obs[i].power_w * obs[i].power_w;
  }
  // With c_u = (SgP_u - p0 * Sg1_u) / Sgg_u, the error is
  //   SSE(p0) = spp - 2 p0 s1p + p0^2 s11 - sum_u (SgP_u - p0 Sg1_u)^2 / Sgg_u.
  double qa = s11, qb = -s1p, qc = spp;  // SSE = qa p0^2 + 2 qb p0 + qc
  for (size_t u = 0; u < num_units; ++u) {
    if (sgg[u] <= 0.0) continue;
    qa -= sg1[u] * sg1[u] / sgg[u];
    qb += sgp[u] * sg1[u] / sgg[u];
    qc -= sgp[u] * sgp[u] / sgg[u];
  }
  double p0 = qa > 1e-300 ? -qb / qa : 0.0;
  p0 = fixed_p_static ? *fixed_p_static : std::clamp(p0, 0.0, p_static_max);
  LinearPowerFit fit;
  fit.p_static = p0;
  fit.activity.assign(num_units, 0.0);
  for (size_t u = 0; u < num_units; ++u) {
    if (sgg[u] > 0.0) fit.activity[u] = std::max(0.0, (sgp[u] - p0 * sg1[u]) / sgg[u]);
  }
  double sse = 0.0;
  for (size_t i = 0; i < obs.size(); ++i) {
    const double r = (p0 + fit.activity[obs[i].unit] * g[i]) / obs[i].power_w - 1.0;
    sse += r * r;
  }
  fit.sse = sse;
  return fit;
}

// Every cap clock FitTime considers for one unit, with the linear time fit at each. Entry 0 is
// "no cap"; the others are a 1 MHz grid from the second-lowest sampled clock up to (not
// including) the highest: a cap needs one sample above it and two at or below it to be told
// apart from the plain curve.
struct CapCandidates {
  std::vector<double> caps;
  std::vector<LinearTimeFit> fits;
};

CapCandidates TimeCandidates(std::span<const ClockSample> samples, MegaHertz f_max,
                             bool allow_cap) {
  CapCandidates out;
  out.caps.push_back(kInf);
  out.fits.push_back(FitTimeWithCap(samples, f_max, kInf));
  std::set<double> distinct;
  for (const ClockSample& s : samples) distinct.insert(s.clock.value());
  if (!allow_cap || distinct.size() < 3) return out;
  const double lo = *std::next(distinct.begin());
  const double hi = *distinct.rbegin();
  for (double cap = lo; cap < hi; cap += 1.0) {
    out.caps.push_back(cap);
    out.fits.push_back(FitTimeWithCap(samples, f_max, cap));
  }
  return out;
}

// Index of the candidate FitTime keeps: the best cap when it cuts the rms by cap_min_gain.
size_t TimeOnlyChoice(const CapCandidates& c, const TimeFitOptions& options) {
  size_t best = 0;
  for (size_t i = 1; i < c.caps.size(); ++i) {
    if (c.fits[i].sse < c.fits[best].sse) best = i;
  }
  if (best == 0) return 0;
  return std::sqrt(c.fits[best].sse) <= (1.0 - options.cap_min_gain) * std::sqrt(c.fits[0].sse)
             ? best
             : 0;
}

// Relative squared power residual of one unit with the device curve fixed and the activity c
// fitted in closed form; returns the residual and stores c.
double UnitPowerResidual(std::span<const ClockSample> samples, double cap, const DeviceCurve& dev,
                         double& activity) {
  double sgg = 0.0, sgp = 0.0;
  for (const ClockSample& s : samples) {
    const double p = s.power_w();
    const double g = dev.voltage.DynamicFactor(MegaHertz(std::min(s.clock.value(), cap)));
    sgg += g * g / (p * p);
    sgp += g * (p - dev.static_power.value()) / (p * p);
  }
  activity = sgg > 0.0 ? std::max(0.0, sgp / sgg) : 0.0;
  double sse = 0.0;
  for (const ClockSample& s : samples) {
    const double g = dev.voltage.DynamicFactor(MegaHertz(std::min(s.clock.value(), cap)));
    const double r = (dev.static_power.value() + activity * g) / s.power_w() - 1.0;
    sse += r * r;
  }
  return sse;
}

}  // namespace

Result<TimeFit> FitTime(std::span<const ClockSample> samples, MegaHertz f_max,
                        const TimeFitOptions& options) {
  std::set<double> distinct;
  for (const ClockSample& s : samples) distinct.insert(s.clock.value());
  if (distinct.size() < 2) {
    return InvalidArgument(
        fmt::format("time fit needs samples at 2 or more clocks, got {}", distinct.size()));
  }
  const CapCandidates c = TimeCandidates(samples, f_max, options.allow_cap);
  const size_t i = TimeOnlyChoice(c, options);
  const double n = static_cast<double>(samples.size());
  return TimeFit{c.fits[i].a, c.fits[i].b, MegaHertz(c.caps[i]), std::sqrt(c.fits[i].sse / n)};
}

Result<PowerFit> FitPower(std::span<const PowerObservation> observations, size_t num_units,
                          const PowerFitOptions& options) {
  if (observations.empty()) return InvalidArgument("power fit: no observations");
  double f_lo = kInf, f_hi = 0.0, p_min = kInf;
  for (const PowerObservation& o : observations) {
    if (o.unit >= num_units) return Internal("power fit: unit index out of range");
    if (!(o.power_w > 0.0) || !(o.f_eff.value() > 0.0)) {
      return InvalidArgument("power fit: powers and clocks must be positive");
    }
    f_lo = std::min({f_lo, o.f_eff.value(), o.VoltageClock().value()});
    f_hi = std::max({f_hi, o.f_eff.value(), o.VoltageClock().value()});
    p_min = std::min(p_min, o.power_w);
  }
  const double range = std::max(1.0, f_hi - f_lo);
  const double slope_max = options.max_voltage_rise / range;
  LinearPowerFit best;
  VoltageCurve best_v{MegaHertz(f_hi), 0.0};
  auto consider = [&](const VoltageCurve& v) {
    LinearPowerFit fit = FitPowerLinear(observations, num_units, v, p_min, options.static_power_w);
    if (fit.sse < best.sse) {
      best = std::move(fit);
      best_v = v;
    }
    return best.sse;
  };
  consider(VoltageCurve{MegaHertz(f_hi), 0.0});  // flat voltage: P linear in f
  const int steps = std::max(2, options.slope_steps);
  for (double ridge = f_lo; ridge < f_hi; ridge += options.ridge_step_mhz) {
    for (int s = 1; s <= steps; ++s) {
      consider(VoltageCurve{MegaHertz(ridge), slope_max * s / steps});
    }
  }
  // Golden-section refinement of the slope around the best grid point, ridge fixed.
  {
    const double step = slope_max / steps;
    double a = std::max(0.0, best_v.slope_per_mhz - step);
    double b = best_v.slope_per_mhz + step;
    const MegaHertz ridge = best_v.ridge;
    const double phi = 0.5 * (std::sqrt(5.0) - 1.0);
    for (int i = 0; i < 40; ++i) {
      const double m1 = b - phi * (b - a);
      const double m2 = a + phi * (b - a);
      const double e1 = FitPowerLinear(observations, num_units, {ridge, m1}, p_min, options.static_power_w).sse;
      const double e2 = FitPowerLinear(observations, num_units, {ridge, m2}, p_min, options.static_power_w).sse;
      (e1 < e2 ? b : a) = (e1 < e2 ? m2 : m1);
    }
    consider(VoltageCurve{ridge, 0.5 * (a + b)});
  }
  PowerFit out;
  out.static_power = Watts(best.p_static);
  out.voltage = best_v;
  out.activity = std::move(best.activity);
  out.rms_rel = std::sqrt(best.sse / static_cast<double>(observations.size()));
  return out;
}

Result<ProfileFit> FitProfile(const StageProfile& profile, std::span<const MegaHertz> clocks,
                              const FitOptions& options) {
  if (profile.units.empty() || profile.clocks.empty()) {
    return InvalidArgument(fmt::format("{}: empty profile", profile.source));
  }
  std::set<double> use;
  for (MegaHertz f : clocks) use.insert(f.value());
  const size_t num_units = profile.units.size();

  ProfileFit fit;
  fit.gpu.f_max = profile.clocks.back();
  std::set<double> fit_clocks;
  std::vector<std::vector<ClockSample>> samples(num_units);
  std::vector<CapCandidates> candidates(num_units);
  std::vector<size_t> choice(num_units, 0);
  for (size_t u = 0; u < num_units; ++u) {
    const ProfileUnit& unit = profile.units[u];
    for (const ClockSample& s : unit.samples) {
      if (use.empty() || use.count(s.clock.value())) {
        samples[u].push_back(s);
        fit_clocks.insert(s.clock.value());
      }
    }
    std::set<double> distinct;
    for (const ClockSample& s : samples[u]) distinct.insert(s.clock.value());
    if (distinct.size() < 2) {
      return InvalidArgument(
          fmt::format("{}: unit {}: samples at {} of the fit clocks; the time "
                      "fit needs 2 or more",
                      profile.source, unit.name, distinct.size()));
    }
    candidates[u] = TimeCandidates(samples[u], fit.gpu.f_max, options.time.allow_cap);
    choice[u] = TimeOnlyChoice(candidates[u], options.time);
    fit.unit_names.push_back(unit.name);
  }

  // The fitted units from the chosen caps, `activity` and the power form (`cap_power`: each
  // unit's held power when power-limited), with the fit clocks and the time residual.
  auto assemble = [&](const std::vector<double>& activity, PowerForm form, const std::vector<double>& cap_power) {
    double time_sse = 0.0;
    size_t n = 0;
    for (size_t u = 0; u < num_units; ++u) {
      const LinearTimeFit& tf = candidates[u].fits[choice[u]];
      UnitModel m;
      m.t_mem_s = tf.a;
      m.t_comp_s = tf.b;
      m.f_cap = MegaHertz(candidates[u].caps[choice[u]]);
      m.activity = activity[u];
      m.power_form = form;
      if (form == PowerForm::kPowerLimited) m.power_cap_w = cap_power[u] > 0.0 ? cap_power[u] : kInf;
      fit.units.push_back(m);
      time_sse += tf.sse;
      n += samples[u].size();
    }
    for (double f : fit_clocks) fit.fit_clocks.push_back(MegaHertz(f));
    fit.time_rms_rel = std::sqrt(time_sse / static_cast<double>(std::max<size_t>(1, n)));
  };

  if (options.pinned) {
    // Pinned device numbers: caps from time alone, P_static fixed, the profile classed as
    // power-limited or clock-ceiling (FitOptions::pinned).
    const double f_top = *fit_clocks.rbegin();
    std::vector<double> top_power(num_units, 0.0);
    for (size_t u = 0; u < num_units; ++u) {
      double sum = 0.0;
      int count = 0;
      for (const ClockSample& s : samples[u]) {
        if (s.clock.value() == f_top) {
          sum += s.power_w();
          ++count;
        }
      }
      top_power[u] = count > 0 ? sum / count : 0.0;
    }
    const double median_top = Median(top_power);
    const double limit = options.pinned->power_limit.value();
    fit.top_power_fraction = limit > 0.0 ? median_top / limit : 0.0;
    fit.power_limited = limit > 0.0 && median_top >= options.pinned->limited_fraction * limit;
    std::vector<PowerObservation> obs;
    for (size_t u = 0; u < num_units; ++u) {
      const double cap = candidates[u].caps[choice[u]];
      double highest_below_top = 0.0;
      for (const ClockSample& s : samples[u]) {
        const double f = s.clock.value();
        if (!fit.power_limited) {
          obs.push_back(PowerObservation{u, MegaHertz(std::min(f, cap)), s.power_w(), MegaHertz(f)});
        } else if (f < f_top) {
          // The top clock measures the limiter, not the curve.
          obs.push_back(PowerObservation{u, MegaHertz(f), s.power_w(), MegaHertz(f)});
          highest_below_top = std::max(highest_below_top, f);
        }
      }
      // A hard limiter holds the power where the clock stops speeding the work up.
      if (fit.power_limited && std::isfinite(cap) && cap > highest_below_top && top_power[u] > 0.0) {
        obs.push_back(PowerObservation{u, MegaHertz(cap), top_power[u], MegaHertz(cap)});
      }
    }
    PowerFitOptions po = options.power;
    po.static_power_w = options.pinned->static_power.value();
    EMO_ASSIGN_OR_RETURN(PowerFit pf, FitPower(obs, num_units, po));
    fit.gpu.static_power = pf.static_power;
    fit.gpu.voltage = pf.voltage;
    assemble(pf.activity, fit.power_limited ? PowerForm::kPowerLimited : PowerForm::kClockCeiling, top_power);
    fit.power_rms_rel = pf.rms_rel;
    fit.device_fixed = false;
    fit.iterations = 1;
    return fit;
  }

  DeviceCurve device;
  std::vector<double> activity(num_units, 0.0);
  double power_rms = 0.0;
  auto fit_power = [&]() -> Status {
    std::vector<PowerObservation> obs;
    for (size_t u = 0; u < num_units; ++u) {
      const double cap = candidates[u].caps[choice[u]];
      for (const ClockSample& s : samples[u]) {
        obs.push_back(PowerObservation{u, MegaHertz(std::min(s.clock.value(), cap)), s.power_w()});
      }
    }
    if (options.device) {
      device = *options.device;
      double sse = 0.0;
      for (size_t u = 0; u < num_units; ++u) {
        sse += UnitPowerResidual(samples[u], candidates[u].caps[choice[u]], device, activity[u]);
      }
      power_rms = std::sqrt(sse / static_cast<double>(obs.size()));
      return Status::Ok();
    }
    Result<PowerFit> pf = FitPower(obs, num_units, options.power);
    if (!pf.ok()) return pf.status();
    device = DeviceCurve{pf->static_power, pf->voltage};
    activity = pf->activity;
    power_rms = pf->rms_rel;
    return Status::Ok();
  };

  EMO_RETURN_IF_ERROR(fit_power());
  int iterations = 1;
  for (; iterations <= options.max_iterations; ++iterations) {
    bool changed = false;
    for (size_t u = 0; u < num_units; ++u) {
      const CapCandidates& c = candidates[u];
      size_t best = choice[u];
      double best_cost = kInf;
      for (size_t i = 0; i < c.caps.size(); ++i) {
        double a = 0.0;
        const double cost = c.fits[i].sse + UnitPowerResidual(samples[u], c.caps[i], device, a);
        if (cost < best_cost) {
          best_cost = cost;
          best = i;
        }
      }
      changed |= best != choice[u];
      choice[u] = best;
    }
    EMO_RETURN_IF_ERROR(fit_power());
    if (!changed) break;
  }
  fit.iterations = std::min(iterations, options.max_iterations);

  fit.gpu.static_power = device.static_power;
  fit.gpu.voltage = device.voltage;
  fit.device_fixed = options.device.has_value();
  assemble(activity, PowerForm::kCapped, {});
  fit.power_rms_rel = power_rms;
  return fit;
}

FitSummary SummarizeFit(const StageProfile& profile, const ProfileFit& fit) {
  FitSummary s;
  std::vector<double> share, activity, cap_power;
  std::set<double> used;
  for (MegaHertz f : fit.fit_clocks) used.insert(f.value());
  double sum_t = 0.0, sum_e = 0.0;
  size_t n = 0;
  for (size_t u = 0; u < fit.units.size(); ++u) {
    const UnitModel& m = fit.units[u];
    share.push_back(m.t_comp_s / (m.t_mem_s + m.t_comp_s));
    activity.push_back(m.activity);
    const bool capped = m.f_cap < fit.gpu.f_max;
    for (const ClockSample& smp : profile.units[u].samples) {
      if (capped && smp.clock == fit.gpu.f_max) cap_power.push_back(smp.power_w());
      if (!used.count(smp.clock.value())) continue;
      const double t = UnitTime(fit.gpu, m, smp.clock);
      const double e = UnitEnergy(fit.gpu, m, smp.clock).value();
      sum_t += std::abs(t / smp.time_s - 1.0);
      sum_e += std::abs(e / smp.energy_j - 1.0);
      ++n;
    }
    s.capped_units += capped ? 1 : 0;
  }
  if (!share.empty()) {
    s.comp_share_min = *std::min_element(share.begin(), share.end());
    s.comp_share_max = *std::max_element(share.begin(), share.end());
    s.comp_share_median = Median(share);
    s.activity_min = *std::min_element(activity.begin(), activity.end());
    s.activity_max = *std::max_element(activity.begin(), activity.end());
    s.activity_median = Median(activity);
  }
  s.cap_power_w = Median(cap_power);
  if (n > 0) {
    s.time_mape_pct = 100.0 * sum_t / static_cast<double>(n);
    s.energy_mape_pct = 100.0 * sum_e / static_cast<double>(n);
  }
  return s;
}

StageProfile MergeProfiles(std::span<const StageProfile> profiles,
                           std::span<const std::string> labels) {
  StageProfile out;
  std::set<double> clocks;
  for (size_t i = 0; i < profiles.size(); ++i) {
    const std::string label = i < labels.size() ? labels[i] : profiles[i].source;
    out.source += (i ? "," : "") + profiles[i].source;
    for (const ProfileUnit& u : profiles[i].units) {
      out.units.push_back(ProfileUnit{label + ":" + u.name, u.samples});
    }
    for (MegaHertz f : profiles[i].clocks) clocks.insert(f.value());
  }
  for (double f : clocks) out.clocks.push_back(MegaHertz(f));
  return out;
}

}  // namespace emo::model
