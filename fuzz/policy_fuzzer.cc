// libFuzzer target: the clock policy reader of `emo run` (ReadRunPolicy's parser).
#include "emo/policy/policy_file.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string name = "fuzz-policy.json";
  auto text = emo::fuzz::Input(data, size, name);
  if (!text) return -1;
  emo::Result<emo::policy::RunPolicy> policy = emo::policy::ParseRunPolicy(*text, name);
  (void)policy;
  return 0;
}
