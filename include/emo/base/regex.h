// Compiling a regex a user wrote (a device file's trace_gpu_regex, --iteration, --scale,
// EMO_TRACE_NVTX_REGEX) with std::regex, safely. libstdc++'s regex compiler overflows a signed
// integer on a repetition count of 19 digits or more (undefined behaviour: fuzz_device found it
// in a device file) and builds states for every repeat, so a count over kMaxRegexRepeat is
// refused before std::regex sees the pattern. Header-only: libemo_inject.so uses it too.
#pragma once

#include <algorithm>
#include <cstddef>
#include <optional>
#include <regex>
#include <string>
#include <string_view>

namespace emo {

inline constexpr long kMaxRegexRepeat = 1000;

// Why `pattern` must not reach std::regex, in a phrase ("a repetition count over 1000 at
// character 12"); empty when it may. Every unescaped '{' followed by digits is taken as a
// repetition, and every backslash followed by digits as a back-reference (the other number
// libstdc++ reads the same way), inside a bracket expression too.
inline std::string RegexLimitError(std::string_view pattern) {
  auto digits_over = [&pattern](size_t& j) {
    long value = 0;
    while (j < pattern.size() && pattern[j] >= '0' && pattern[j] <= '9') {
      value = value * 10 + (pattern[j] - '0');
      ++j;
      if (value > kMaxRegexRepeat) return true;
    }
    return false;
  };
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '\\') {
      size_t j = i + 1;
      if (digits_over(j)) {
        return "a back-reference over " + std::to_string(kMaxRegexRepeat) + " at character " + std::to_string(i + 2);
      }
      i = std::max(i + 1, j - 1);
      continue;
    }
    if (pattern[i] != '{') continue;
    size_t j = i + 1;
    for (int part = 0; part < 2; ++part) {
      const size_t start = j;
      if (digits_over(j)) {
        return "a repetition count over " + std::to_string(kMaxRegexRepeat) + " at character " +
               std::to_string(start + 1);
      }
      if (part == 0 && j < pattern.size() && pattern[j] == ',') {
        ++j;
      } else {
        break;
      }
    }
  }
  return {};
}

// std::regex of `pattern`, or nullopt with `why` set: the limit it breaks, or std::regex_error's
// message when it does not compile.
inline std::optional<std::regex> CompileRegex(std::string_view pattern, std::regex::flag_type flags,
                                              std::string* why) {
  if (std::string limit = RegexLimitError(pattern); !limit.empty()) {
    *why = std::move(limit);
    return std::nullopt;
  }
  try {
    return std::regex(pattern.begin(), pattern.end(), flags);
  } catch (const std::regex_error& e) {
    *why = e.what();
    return std::nullopt;
  }
}

}  // namespace emo
