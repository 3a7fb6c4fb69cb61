// Hold-out validation of the clock model: fit from K clocks spread over the measured range,
// predict time and energy at every other clock, and score the predictions.
#pragma once

#include <span>
#include <vector>

#include "emo/base/status.h"
#include "emo/model/fit.h"
#include "emo/model/stage_profile.h"

namespace emo::model {

// The fixed rule for "K clocks spread over the range": from the sorted table c[0..n-1], the
// clocks c[round(i * (n-1) / (K-1))] for i = 0..K-1 (K = 2: min and max; K = 3: min, middle,
// max). The same rule for every file; never chosen per file. Requires 2 <= K <= n.
Result<std::vector<MegaHertz>> SpreadClocks(std::span<const MegaHertz> sorted_clocks, int k);

// Prediction error of one unit at one held-out clock.
struct HeldOutPoint {
  size_t unit = 0;
  MegaHertz clock{0.0};
  double time_error_pct = 0.0;    // signed: 100 * (predicted - measured) / measured
  double energy_error_pct = 0.0;  // signed
};

// Scores of a hold-out validation.
struct ValidationReport {
  int k = 0;
  std::vector<MegaHertz> fit_clocks;
  size_t units = 0;
  size_t points = 0;  // held-out (unit, clock) pairs scored
  double time_mape_pct = 0.0;
  double energy_mape_pct = 0.0;
  double power_mape_pct = 0.0;
  double time_max_error_pct = 0.0;    // largest |error| of time
  double energy_max_error_pct = 0.0;  // largest |error| of energy
  double max_error_pct = 0.0;         // max of the two
  std::vector<HeldOutPoint> errors;
  ProfileFit fit;
};

// Fits `profile` from SpreadClocks(profile.clocks, k) and scores time and energy at every other
// clock of every unit. Fails when the profile has fewer than k + 1 clocks.
Result<ValidationReport> ValidateProfile(const StageProfile& profile, int k,
                                         const FitOptions& options = {});

}  // namespace emo::model
