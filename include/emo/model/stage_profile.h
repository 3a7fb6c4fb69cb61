// Per-clock time/energy profiles of units, as in the Perseus SOSP'24 stage profiles
// (`stage,instruction,frequency,time,energy`: s and J per microbatch at each locked SM clock).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "emo/base/status.h"
#include "emo/base/units.h"

namespace emo::model {

// One measurement of one unit at one clock.
struct ClockSample {
  MegaHertz clock{0.0};
  double time_s = 0.0;
  double energy_j = 0.0;
  double power_w() const { return energy_j / time_s; }
};

// One unit (e.g. "stage 3 backward") with its samples sorted by clock, ascending.
struct ProfileUnit {
  std::string name;
  std::vector<ClockSample> samples;
};

// A whole profile: units measured on one device. `clocks` is the sorted union of the clocks of
// every unit.
struct StageProfile {
  std::string source;  // file path, for messages and reports
  std::vector<ProfileUnit> units;
  std::vector<MegaHertz> clocks;
};

// Parses a Perseus stage-profile CSV. Units are named "<stage>/<instruction>" in order of first
// appearance. Errors name the file and line (bad header, bad number, non-positive time or energy,
// a clock repeated within a unit).
Result<StageProfile> ParseStageProfile(std::string_view csv, const std::string& source);
// Reads and parses `path`.
Result<StageProfile> ReadStageProfile(const std::string& path);

}  // namespace emo::model
