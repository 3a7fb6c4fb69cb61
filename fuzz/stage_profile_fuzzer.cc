// libFuzzer target: the Perseus stage-profile CSV reader of `emo model`.
#include "emo/model/stage_profile.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string name = "fuzz-profile.csv";
  auto text = emo::fuzz::Input(data, size, name);
  if (!text) return -1;
  emo::Result<emo::model::StageProfile> profile = emo::model::ParseStageProfile(*text, name);
  (void)profile;
  return 0;
}
