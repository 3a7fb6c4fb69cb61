// Shared by the fuzz targets: the input as the readers see it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "emo/base/file.h"

namespace emo::fuzz {

// The input decompressed as `emo` decompresses a file it reads (MaybeGunzip: gzip by its magic
// bytes, so gzip seeds reach the readers too); nullopt when it is a gzip stream that does not
// decompress, which the reader under test never sees.
inline std::optional<std::string> Input(const uint8_t* data, size_t size, const std::string& name) {
  Result<std::string> text = MaybeGunzip(name, std::string(reinterpret_cast<const char*>(data), size));
  if (!text.ok()) return std::nullopt;
  return std::move(text).value();
}

}  // namespace emo::fuzz
