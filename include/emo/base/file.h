// Reading whole files, transparently gunzipping `.gz` (detected by magic bytes, not name).
#pragma once

#include <string>

#include "emo/base/status.h"

namespace emo {

// Reads `path` into memory; gzip streams (magic 1f 8b) are decompressed. Errors name the file.
Result<std::string> ReadFileMaybeGzip(const std::string& path);

// `data` decompressed when it is a gzip stream (magic 1f 8b), else as it is; `name` names it in
// errors.
Result<std::string> MaybeGunzip(const std::string& name, std::string data);

// Writes `data` to `path`, or to stdout when path is "-".
Status WriteFile(const std::string& path, const std::string& data);

}  // namespace emo
