#include "emo/runtime/inject_config.h"

#include <charconv>
#include <regex>

#include "emo/base/regex.h"

namespace emo::runtime {
namespace {

void ReadInt(const IntOption& option, const std::function<const char*(const char*)>& getenv, int64_t* out,
             std::vector<std::string>* warnings) {
  const char* text = getenv(option.env);
  if (text == nullptr || *text == '\0') return;
  const std::string_view value(text);
  int64_t parsed = 0;
  const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), parsed);
  if (error != std::errc() || end != value.data() + value.size() || parsed < option.min || parsed > option.max) {
    warnings->push_back(std::string(option.env) + "='" + std::string(value) + "' is not a whole number in [" +
                        std::to_string(option.min) + ", " + std::to_string(option.max) + "] " + option.unit +
                        "; using " + std::to_string(option.fallback));
    return;
  }
  *out = parsed;
}

}  // namespace

const char* TraceModeName(TraceMode mode) { return mode == TraceMode::kTrace ? "trace" : "monitor"; }

InjectConfig ReadInjectConfig(const std::function<const char*(const char*)>& getenv,
                              std::vector<std::string>* warnings) {
  InjectConfig config;
  if (const char* out = getenv(kOutputEnv); out != nullptr && *out != '\0') config.output_pattern = out;
  if (const char* mode = getenv(kModeEnv); mode != nullptr && *mode != '\0') {
    const std::string_view m(mode);
    if (m == "trace") {
      config.mode = TraceMode::kTrace;
    } else if (m == "monitor") {
      config.mode = TraceMode::kMonitor;
    } else {
      warnings->push_back(std::string(kModeEnv) + "='" + std::string(m) +
                          "' is neither 'trace' nor 'monitor'; using trace");
    }
  }
  ReadInt(kWarmupOption, getenv, &config.warmup, warnings);
  ReadInt(kIterationsOption, getenv, &config.iterations, warnings);
  ReadInt(kBufferPoolOption, getenv, &config.buffer_pool_mib, warnings);
  ReadInt(kAnchorOption, getenv, &config.anchor, warnings);
  ReadInt(kQuietOption, getenv, &config.quiet_ms, warnings);
  if (const char* log = getenv(kQuietLogEnv); log != nullptr && *log != '\0') config.quiet_log = log;
  if (const char* regex = getenv(kNvtxRegexEnv); regex != nullptr && *regex != '\0') {
    std::string why;
    if (CompileRegex(regex, std::regex::ECMAScript, &why)) {
      config.nvtx_regex = regex;
    } else {
      warnings->push_back(std::string(kNvtxRegexEnv) + "='" + regex + "' does not compile (" + why + "); using " +
                          kDefaultNvtxRegex);
    }
  }
  return config;
}

std::string ExpandOutputPath(std::string_view pattern, std::string_view rank, int64_t pid, std::string_view host) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c != '%' || i + 1 == pattern.size()) {
      out += c;
      continue;
    }
    const char next = pattern[++i];
    switch (next) {
      case 'r':
        out += rank;
        break;
      case 'p':
        out += std::to_string(pid);
        break;
      case 'h':
        out += host;
        break;
      case '%':
        out += '%';
        break;
      default:
        out += '%';
        out += next;
    }
  }
  return out;
}

}  // namespace emo::runtime
