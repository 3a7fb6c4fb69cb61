// libFuzzer target: the device file reader (LoadDevice's JSON parse and ParseDevice).
#include <nlohmann/json.hpp>

#include "emo/base/json_read.h"
#include "emo/model/device.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string name = "fuzz-device.json";
  auto text = emo::fuzz::Input(data, size, name);
  if (!text) return -1;
  emo::Result<nlohmann::json> j = emo::ParseJsonText(*text, name);
  if (!j.ok()) return 0;
  emo::Result<emo::model::DeviceModel> device = emo::model::ParseDevice(*j, name);
  (void)device;
  return 0;
}
