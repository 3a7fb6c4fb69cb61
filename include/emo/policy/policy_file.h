// A clock policy read back for `emo run`: only what following it needs, every field checked,
// and a precise error (file, field, what is wrong) for a policy that cannot be followed.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "emo/base/status.h"

namespace emo::policy {

struct RunPack {
  int64_t first_call = 0;   // launch call of the iteration that starts the pack
  int64_t switch_call = 0;  // launch call after which its clock is asked for (negative: earlier)
  double clock_mhz = 0;
  // The call whose op's completion on the GPU the switch waits for (negative: earlier); absent in
  // policies written before switches were anchored on the GPU, and where no op precedes the pack.
  std::optional<int64_t> gpu_switch_call;
};

struct RunGpu {
  int rank = -1;                    // the trace's rank, -1 when it had none
  int device = 0;                   // CUDA ordinal in the traced process
  std::string gpu_name;             // the traced GPU ("NVIDIA H200")
  uint32_t calls_per_iteration = 0;
  double iteration_time_us = 0;     // predicted for the plan
  double baseline_time_us = 0;      // predicted at the default clocks
  double deadline_us = 0;           // the latency target
  std::vector<RunPack> packs;       // in first_call order
  // The plan's slowdown as extra GPU time after launch calls (`emulate`, LaunchAnchors::spins);
  // absent in policies written before emulation existed.
  struct Spin {
    int64_t call = 0;
    int64_t ns = 0;
  };
  bool has_emulation = false;
  std::vector<Spin> spins;          // in call order
  double emulated_extra_us = 0;     // what the spins add per iteration
  double not_emulated_extra_us = 0; // the plan's extra on streams without a launch call
};

struct RunPolicy {
  std::string path;
  int version = 0;
  std::string model_device, model_source;
  double switch_lead_us = 0;
  std::vector<RunGpu> gpus;
  std::vector<std::string> warnings;
};

// Reads and checks a policy written by `emo optimize --policy`. Refuses what is not a policy,
// a version this emo does not follow, and plans with nothing to anchor their packs to.
Result<RunPolicy> ReadRunPolicy(const std::string& path);
// The same for a policy already in memory (decompressed); `path` names it in errors.
Result<RunPolicy> ParseRunPolicy(std::string_view text, const std::string& path);

}  // namespace emo::policy
