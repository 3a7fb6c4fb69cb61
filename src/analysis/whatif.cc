#include "emo/analysis/whatif.h"

#include <charconv>
#include <cmath>
#include <regex>

#include <fmt/format.h>

#include "emo/base/regex.h"

namespace emo::analysis {

Result<ScaleRule> ParseScaleRule(const std::string& text) {
  auto eq = text.rfind('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size()) {
    return InvalidArgument(fmt::format("--scale '{}': expected REGEX=FACTOR, e.g. 'gemm=1.1'", text));
  }
  ScaleRule rule;
  rule.regex = text.substr(0, eq);
  std::string f = text.substr(eq + 1);
  char* endp = nullptr;
  rule.factor = std::strtod(f.c_str(), &endp);
  if (endp == f.c_str() || *endp != '\0' || !std::isfinite(rule.factor) || rule.factor < 0) {
    return InvalidArgument(fmt::format("--scale '{}': factor '{}' is not a non-negative number", text, f));
  }
  return rule;
}

Result<std::vector<TimeNs>> ScaledDurations(const graph::Graph& g, const std::vector<TimeNs>& base,
                                            const std::vector<ScaleRule>& rules,
                                            std::vector<size_t>* matched) {
  std::vector<TimeNs> d = base;
  if (matched) matched->assign(rules.size(), 0);
  const auto& t = g.trace();
  const auto& n = g.nodes();
  for (size_t r = 0; r < rules.size(); ++r) {
    std::string why;
    std::optional<std::regex> compiled =
        CompileRegex(rules[r].regex, std::regex::ECMAScript | std::regex::optimize, &why);
    if (!compiled) return InvalidArgument(fmt::format("--scale: '{}' is not a valid regex ({})", rules[r].regex, why));
    const std::regex& re = *compiled;
    // Match each distinct name once (names are interned).
    std::vector<int8_t> name_match(t.strings.size(), -1);
    for (uint32_t v = 0; v < n.size(); ++v) {
      if (n.kind[v] != graph::NodeKind::kGpuOp) continue;
      auto name = t.gpu.name[n.ref[v]];
      int8_t& m = name_match[name.value()];
      if (m < 0) {
        std::string_view sv = t.Name(name);
        m = std::regex_search(sv.begin(), sv.end(), re) ? 1 : 0;
      }
      if (!m) continue;
      d[v] = static_cast<TimeNs>(std::llround(static_cast<double>(d[v]) * rules[r].factor));
      if (matched) ++(*matched)[r];
    }
  }
  return d;
}

}  // namespace emo::analysis
