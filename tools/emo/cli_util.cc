#include "cli_util.h"

#include <fmt/format.h>

#include "emo/base/file.h"

namespace emo::cli {

int Fail(const char* command, const Status& status) {
  fmt::print(stderr, "emo {}: {}\n", command, status.ToString());
  return 1;
}

Status WriteJson(const std::string& path, const nlohmann::json& j) {
  if (path.empty()) return Status::Ok();
  return WriteFile(path, j.dump(2) + "\n");
}

}  // namespace emo::cli
