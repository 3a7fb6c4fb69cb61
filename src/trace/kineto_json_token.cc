#include "kineto_json_token.h"

#include <charconv>
#include <cmath>
#include <limits>
#include <system_error>

namespace emo::trace::kineto {
namespace {

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
// Largest whole-microsecond part whose nanoseconds (plus a rounded-up fraction) fit int64.
constexpr uint64_t kMaxWholeMicros = (static_cast<uint64_t>(kInt64Max) - 1000) / 1000;

using internal::IsDigit;
bool IsSpace(char c) { return internal::IsJsonSpace(c); }

std::string_view Trim(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

// Strips one level of JSON string quotes around a numeric string ("\"12\"" -> "12").
std::string_view Unquote(std::string_view s, bool* quoted) {
  *quoted = s.size() >= 2 && s.front() == '"' && s.back() == '"';
  return *quoted ? Trim(s.substr(1, s.size() - 2)) : s;
}

// A double in [lo, hi) that is not NaN.
bool InRange(double x, double lo, double hi) { return x >= lo && x < hi; }

bool ParseDouble(std::string_view s, double* v) {
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
  return ec == std::errc() && end == s.data() + s.size();
}

}  // namespace

namespace internal {

bool ParseMicrosAsNsGeneral(std::string_view token, int64_t* ns) {
  bool quoted = false;
  std::string_view s = Unquote(Trim(token), &quoted);
  size_t i = 0;
  const bool negative = i < s.size() && s[i] == '-';
  if (negative) ++i;
  if (i >= s.size() || !IsDigit(s[i])) return false;
  uint64_t whole = 0;
  for (; i < s.size() && IsDigit(s[i]); ++i) {
    whole = whole * 10 + static_cast<uint64_t>(s[i] - '0');
    if (whole > kMaxWholeMicros) return false;
  }
  uint64_t fraction_ns = 0;
  int fraction_digits = 0;
  bool round_up = false;
  if (i < s.size() && s[i] == '.') {
    ++i;
    if (i >= s.size() || !IsDigit(s[i])) return false;
    for (; i < s.size() && IsDigit(s[i]); ++i, ++fraction_digits) {
      if (fraction_digits < 3) {
        fraction_ns = fraction_ns * 10 + static_cast<uint64_t>(s[i] - '0');
      } else if (fraction_digits == 3) {
        round_up = s[i] >= '5';
      }
    }
    for (int d = fraction_digits; d < 3; ++d) fraction_ns *= 10;
  }
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    // Not Kineto's style; a double is as exact as such a writer was.
    double us = 0;
    if (!ParseDouble(s, &us)) return false;
    const double x = us * 1000.0;
    if (!InRange(x, -9.2e18, 9.2e18)) return false;
    *ns = static_cast<int64_t>(std::llround(x));
    return true;
  }
  if (i != s.size()) return false;
  const uint64_t magnitude = whole * 1000 + fraction_ns + (round_up ? 1 : 0);
  *ns = negative ? -static_cast<int64_t>(magnitude) : static_cast<int64_t>(magnitude);
  return true;
}

bool ParseIntTokenGeneral(std::string_view token, int64_t* value) {
  bool quoted = false;
  std::string_view s = Unquote(Trim(token), &quoted);
  if (s.empty()) return false;
  if (quoted && s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    uint64_t v = 0;
    auto [end, ec] = std::from_chars(s.data() + 2, s.data() + s.size(), v, 16);
    if (ec != std::errc() || end != s.data() + s.size()) return false;
    if (v > static_cast<uint64_t>(kInt64Max)) return false;
    *value = static_cast<int64_t>(v);
    return true;
  }
  size_t i = 0;
  const bool negative = s[0] == '-';
  if (negative) ++i;
  if (i >= s.size() || !IsDigit(s[i])) return false;
  uint64_t magnitude = 0;
  for (; i < s.size() && IsDigit(s[i]); ++i) {
    magnitude = magnitude * 10 + static_cast<uint64_t>(s[i] - '0');
    if (magnitude > static_cast<uint64_t>(kInt64Max)) return false;
  }
  if (i < s.size() && s[i] == '.') {
    ++i;
    if (i >= s.size() || !IsDigit(s[i])) return false;
    while (i < s.size() && IsDigit(s[i])) ++i;  // truncated toward zero
  }
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    double v = 0;
    if (!ParseDouble(s, &v) || !InRange(v, -9.2e18, 9.2e18)) return false;
    *value = static_cast<int64_t>(v);
    return true;
  }
  if (i != s.size()) return false;
  *value = negative ? -static_cast<int64_t>(magnitude) : static_cast<int64_t>(magnitude);
  return true;
}

}  // namespace internal

namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Reads the 4 hex digits after "\u" at content[pos]; -1 when malformed.
int32_t ReadHex4(std::string_view content, size_t pos) {
  if (pos + 4 > content.size()) return -1;
  int32_t v = 0;
  for (size_t k = 0; k < 4; ++k) {
    int h = HexValue(content[pos + k]);
    if (h < 0) return -1;
    v = v * 16 + h;
  }
  return v;
}

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace

void UnescapeJson(std::string_view content, std::string* out) {
  out->clear();
  out->reserve(content.size());
  for (size_t i = 0; i < content.size(); ++i) {
    const char c = content[i];
    if (c != '\\' || i + 1 >= content.size()) {
      out->push_back(c);
      continue;
    }
    const char e = content[++i];
    switch (e) {
      case '"':
      case '\\':
      case '/':
        out->push_back(e);
        break;
      case 'b':
        out->push_back('\b');
        break;
      case 'f':
        out->push_back('\f');
        break;
      case 'n':
        out->push_back('\n');
        break;
      case 'r':
        out->push_back('\r');
        break;
      case 't':
        out->push_back('\t');
        break;
      case 'u': {
        int32_t cp = ReadHex4(content, i + 1);
        if (cp < 0) {  // malformed: keep the text as written
          out->append("\\u");
          break;
        }
        i += 4;
        if (cp >= 0xD800 && cp <= 0xDBFF && i + 2 < content.size() && content[i + 1] == '\\' &&
            content[i + 2] == 'u') {
          int32_t low = ReadHex4(content, i + 3);
          if (low >= 0xDC00 && low <= 0xDFFF) {
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
            i += 6;
          }
        }
        if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0xFFFD;  // a lone surrogate
        AppendUtf8(static_cast<uint32_t>(cp), out);
        break;
      }
      default:  // not a JSON escape: keep both characters
        out->push_back('\\');
        out->push_back(e);
        break;
    }
  }
}

}  // namespace emo::trace::kineto
