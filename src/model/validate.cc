#include "emo/model/validate.h"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "emo/base/text.h"

namespace emo::model {

Result<std::vector<MegaHertz>> SpreadClocks(std::span<const MegaHertz> sorted_clocks, int k) {
  const size_t n = sorted_clocks.size();
  if (k < 2 || static_cast<size_t>(k) > n) {
    return InvalidArgument(
        fmt::format("--clocks must be between 2 and {} (the number of measured "
                    "clocks), got {}",
                    n, k));
  }
  std::vector<MegaHertz> out;
  for (int i = 0; i < k; ++i) {
    const double pos = static_cast<double>(i) * static_cast<double>(n - 1) / (k - 1);
    out.push_back(sorted_clocks[static_cast<size_t>(std::lround(pos))]);
  }
  return out;
}

Result<ValidationReport> ValidateProfile(const StageProfile& profile, int k,
                                         const FitOptions& options) {
  if (profile.clocks.size() < static_cast<size_t>(std::max(k, 0)) + 1) {
    return InvalidArgument(
        fmt::format("{}: {} measured; fitting from {} leaves none to predict", profile.source,
                    Plural(profile.clocks.size(), "clock"), k));
  }
  EMO_ASSIGN_OR_RETURN(std::vector<MegaHertz> fit_clocks, SpreadClocks(profile.clocks, k));
  ValidationReport report;
  report.k = k;
  report.fit_clocks = fit_clocks;
  EMO_ASSIGN_OR_RETURN(report.fit, FitProfile(profile, fit_clocks, options));
  std::set<double> in_fit;
  for (MegaHertz f : fit_clocks) in_fit.insert(f.value());
  report.units = profile.units.size();
  double sum_t = 0.0, sum_e = 0.0, sum_p = 0.0;
  for (size_t u = 0; u < profile.units.size(); ++u) {
    const UnitModel& m = report.fit.units[u];
    for (const ClockSample& s : profile.units[u].samples) {
      if (in_fit.count(s.clock.value())) continue;
      const double t = UnitTime(report.fit.gpu, m, s.clock);
      const double p = UnitPower(report.fit.gpu, m, s.clock).value();
      const double et = 100.0 * (t - s.time_s) / s.time_s;
      const double ee = 100.0 * (p * t - s.energy_j) / s.energy_j;
      const double ep = 100.0 * (p - s.power_w()) / s.power_w();
      report.errors.push_back(HeldOutPoint{u, s.clock, et, ee});
      sum_t += std::abs(et);
      sum_e += std::abs(ee);
      sum_p += std::abs(ep);
      report.time_max_error_pct = std::max(report.time_max_error_pct, std::abs(et));
      report.energy_max_error_pct = std::max(report.energy_max_error_pct, std::abs(ee));
    }
  }
  report.points = report.errors.size();
  if (report.points == 0) {
    return InvalidArgument(fmt::format("{}: no held-out samples to score", profile.source));
  }
  const double n = static_cast<double>(report.points);
  report.time_mape_pct = sum_t / n;
  report.energy_mape_pct = sum_e / n;
  report.power_mape_pct = sum_p / n;
  report.max_error_pct = std::max(report.time_max_error_pct, report.energy_max_error_pct);
  return report;
}

}  // namespace emo::model
