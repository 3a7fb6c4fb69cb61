// Exact parsing of raw JSON value tokens for the Kineto reader (private to src/trace).
//
// The reader hands these functions the raw text simdjson's On-Demand API gives for a value
// (value::raw_json_token(): the token and any whitespace up to the next structural
// character). Parsing the text ourselves matters for timestamps: Kineto writes absolute
// epoch microseconds with three decimals ("1712195495519689.047", 19 significant digits),
// which a double cannot hold, so ts/dur are scaled to nanoseconds on the decimal text.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace emo::trace::kineto {

namespace internal {

inline bool IsDigit(char c) { return static_cast<unsigned char>(c - '0') < 10; }
inline bool IsJsonSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
// When the 8 bytes at p are all ASCII digits, sets *value to their decimal value (SWAR, as
// simdjson's parse_eight_digits_unrolled) and returns true. Little-endian hosts only.
inline bool EightDigits(const char* p, uint64_t* value) {
  if constexpr (std::endian::native != std::endian::little) return false;
  uint64_t x = 0;
  std::memcpy(&x, p, 8);
  if (((x & 0xF0F0F0F0F0F0F0F0) | (((x + 0x0606060606060606) & 0xF0F0F0F0F0F0F0F0) >> 4)) !=
      0x3333333333333333) {
    return false;
  }
  x -= 0x3030303030303030;
  x = (x * 10) + (x >> 8);
  x = (((x & 0x000000FF000000FF) * (100 + (1000000ULL << 32))) +
       (((x >> 16) & 0x000000FF000000FF) * (1 + (10000ULL << 32)))) >>
      32;
  *value = x;
  return true;
}

// The complete parsers; the inline functions below take them for anything unusual.
bool ParseMicrosAsNsGeneral(std::string_view token, int64_t* ns);
bool ParseIntTokenGeneral(std::string_view token, int64_t* value);

}  // namespace internal

// Parses a number token in microseconds ("12", "12.5", "1712195495519689.047", "-3.000")
// into integer nanoseconds. The decimal text is scaled by 1000 without a double, so every
// digit survives; digits past the third decimal round half away from zero. A token with an
// exponent ("1.5e3") goes through a double (such tokens are not Kineto's). A JSON string
// holding such a number is accepted too. Returns false for anything else (null, words,
// objects) and when the value does not fit int64 nanoseconds.
inline bool ParseMicrosAsNs(std::string_view token, int64_t* ns) {
  // Fast path for what Kineto writes, "digits" or "digits.ddd" with at most 15 whole digits
  // (so no overflow check is needed); everything else takes the general parser.
  using internal::IsDigit;
  const char* p = token.data();
  const char* const end = p + token.size();
  const char* const first = p;
  uint64_t whole = 0;
  if (end - p >= 8 && internal::EightDigits(p, &whole)) p += 8;  // most of an epoch timestamp
  while (p != end && IsDigit(*p)) whole = whole * 10 + static_cast<uint64_t>(*p++ - '0');
  if (p == first || p - first > 15) return internal::ParseMicrosAsNsGeneral(token, ns);
  uint64_t fraction = 0;
  if (p != end && *p == '.') {
    if (end - p < 4 || !IsDigit(p[1]) || !IsDigit(p[2]) || !IsDigit(p[3]) ||
        (end - p > 4 && IsDigit(p[4]))) {
      return internal::ParseMicrosAsNsGeneral(token, ns);
    }
    fraction = static_cast<uint64_t>((p[1] - '0') * 100 + (p[2] - '0') * 10 + (p[3] - '0'));
    p += 4;
  }
  while (p != end && internal::IsJsonSpace(*p)) ++p;
  if (p != end) return internal::ParseMicrosAsNsGeneral(token, ns);
  *ns = static_cast<int64_t>(whole * 1000 + fraction);
  return true;
}

// Parses an integer-valued token: a JSON integer, a number with a fraction or exponent
// (truncated toward zero), or a string holding a decimal or 0x-hex integer (ROCm traces
// write "stream": "0x0"). Returns false otherwise or on overflow.
inline bool ParseIntToken(std::string_view token, int64_t* value) {
  // Fast path: an optional '-' and at most 18 digits (no overflow possible).
  const char* p = token.data();
  const char* const end = p + token.size();
  const bool negative = p != end && *p == '-';
  if (negative) ++p;
  const char* const first = p;
  uint64_t magnitude = 0;
  while (p != end && internal::IsDigit(*p))
    magnitude = magnitude * 10 + static_cast<uint64_t>(*p++ - '0');
  if (p == first || p - first > 18) return internal::ParseIntTokenGeneral(token, value);
  while (p != end && internal::IsJsonSpace(*p)) ++p;
  if (p != end) return internal::ParseIntTokenGeneral(token, value);
  *value = negative ? -static_cast<int64_t>(magnitude) : static_cast<int64_t>(magnitude);
  return true;
}

// If `token` is a JSON string, sets *content to the text between its quotes (still
// escaped) and returns true.
inline bool StringTokenContent(std::string_view token, std::string_view* content) {
  while (!token.empty() && internal::IsJsonSpace(token.back())) token.remove_suffix(1);
  if (token.size() < 2 || token.front() != '"' || token.back() != '"') return false;
  *content = token.substr(1, token.size() - 2);
  return true;
}

// True when JSON string content has escapes (a backslash) and must be unescaped.
inline bool HasEscapes(std::string_view content) {
  return content.find('\\') != std::string_view::npos;
}

// Replaces *out with the unescaped form of JSON string content (\n, \", \uXXXX with
// surrogate pairs to UTF-8, ...). A malformed escape is kept verbatim rather than failing:
// names are labels, and the reader never rejects an event for its name's spelling.
void UnescapeJson(std::string_view content, std::string* out);

}  // namespace emo::trace::kineto
