// Unit tests of the raw-token parsers behind the Kineto reader (src/trace/kineto_json_token.h).
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>

#include "trace/kineto_json_token.h"

namespace emo::trace::kineto {
namespace {

std::optional<int64_t> Ns(std::string_view token) {
  int64_t ns = 0;
  if (!ParseMicrosAsNs(token, &ns)) return std::nullopt;
  return ns;
}

std::optional<int64_t> Int(std::string_view token) {
  int64_t v = 0;
  if (!ParseIntToken(token, &v)) return std::nullopt;
  return v;
}

std::string Unescape(std::string_view content) {
  std::string out = "stale";
  UnescapeJson(content, &out);
  return out;
}

TEST(KinetoTokenTest, MicrosecondsBecomeExactNanoseconds) {
  EXPECT_EQ(Ns("12"), 12'000);
  EXPECT_EQ(Ns("12.5"), 12'500);
  EXPECT_EQ(Ns("12.05"), 12'050);
  EXPECT_EQ(Ns("0.001"), 1);
  EXPECT_EQ(Ns("-3.000"), -3'000);
  // 19 significant digits: a double would lose the last ones.
  EXPECT_EQ(Ns("1712195495519689.047"), 1'712'195'495'519'689'047);
  EXPECT_EQ(Ns("1712195495519689.999"), 1'712'195'495'519'689'999);
  EXPECT_EQ(Ns("1694039968956739"), 1'694'039'968'956'739'000);
  // The raw token carries the whitespace up to the next structural character.
  EXPECT_EQ(Ns("5117153287312.634 \n  "), 5'117'153'287'312'634);
  // Around the 8-digits-at-once fast path.
  EXPECT_EQ(Ns("12345678"), 12'345'678'000);
  EXPECT_EQ(Ns("1234567.125"), 1'234'567'125);
  EXPECT_EQ(Ns("123456789012345.999"), 123'456'789'012'345'999);
  EXPECT_EQ(Ns("9876543210"), 9'876'543'210'000);
  EXPECT_EQ(Ns("1234a678"), std::nullopt);
}

TEST(KinetoTokenTest, DigitsBeyondNanosecondsRound) {
  EXPECT_EQ(Ns("0.0004"), 0);
  EXPECT_EQ(Ns("0.0005"), 1);
  EXPECT_EQ(Ns("1.2345678"), 1'235);
  EXPECT_EQ(Ns("-1.0005"), -1'001);
}

TEST(KinetoTokenTest, OtherNumberFormsAndStrings) {
  EXPECT_EQ(Ns("1.5e3"), 1'500'000);
  EXPECT_EQ(Ns("2E-3"), 2);
  EXPECT_EQ(Ns("\"12.25\""), 12'250);
}

TEST(KinetoTokenTest, NonNumbersAndOverflowAreRejected) {
  for (std::string_view bad :
       {"", "abc", "null", "true", "-", "1.", ".5", "1.2.3", "12x", "[1]", "{}", "\"\"", "\"abc\"",
        "1e", "99999999999999999999", "9223372036854775.807", "1e300"}) {
    EXPECT_EQ(Ns(bad), std::nullopt) << bad;
  }
  // The largest whole-µs value that still fits in int64 ns.
  EXPECT_TRUE(Ns("9223372036854774").has_value());
}

TEST(KinetoTokenTest, IntegerTokens) {
  EXPECT_EQ(Int("42"), 42);
  EXPECT_EQ(Int("-7 "), -7);
  EXPECT_EQ(Int("3.9"), 3);  // truncated
  EXPECT_EQ(Int("1e3"), 1000);
  EXPECT_EQ(Int("\"12\""), 12);
  EXPECT_EQ(Int("\"0x1f\""), 31);  // ROCm writes "stream": "0x0"
  EXPECT_EQ(Int("\"0x0\""), 0);
  EXPECT_EQ(Int("9223372036854775807"), INT64_MAX);
  for (std::string_view bad : {"", "true", "null", "[1]", "{}", "\"x\"", "9223372036854775808",
                               "\"0xZZ\"", "0x10", "1.", "-"}) {
    EXPECT_EQ(Int(bad), std::nullopt) << bad;
  }
}

TEST(KinetoTokenTest, StringTokenContent) {
  std::string_view s;
  ASSERT_TRUE(StringTokenContent("\"kernel\"  ", &s));
  EXPECT_EQ(s, "kernel");
  ASSERT_TRUE(StringTokenContent("\"\"", &s));
  EXPECT_EQ(s, "");
  ASSERT_TRUE(StringTokenContent(R"("a\"b")", &s));
  EXPECT_EQ(s, R"(a\"b)");
  EXPECT_FALSE(StringTokenContent("12", &s));
  EXPECT_FALSE(StringTokenContent("\"", &s));
  EXPECT_FALSE(StringTokenContent("", &s));
}

TEST(KinetoTokenTest, Unescape) {
  EXPECT_EQ(Unescape("plain"), "plain");
  EXPECT_EQ(Unescape(R"(a\nb\t\"q\"\\/\/)"), "a\nb\t\"q\"\\//");
  EXPECT_EQ(Unescape(R"(caf\u00e9)"), "caf\xC3\xA9");
  EXPECT_EQ(Unescape(R"(\u20ac)"), "\xE2\x82\xAC");
  EXPECT_EQ(Unescape(R"(\ud83d\ude00)"), "\xF0\x9F\x98\x80");  // surrogate pair
  EXPECT_EQ(Unescape(R"(\ud83d!)"), "\xEF\xBF\xBD!");          // lone surrogate
  EXPECT_EQ(Unescape(R"(\u12)"), R"(\u12)");                   // malformed: kept
  EXPECT_EQ(Unescape(R"(\q)"), R"(\q)");
  EXPECT_EQ(Unescape("end\\"), "end\\");
  EXPECT_TRUE(HasEscapes(R"(a\nb)"));
  EXPECT_FALSE(HasEscapes("ab"));
}

}  // namespace
}  // namespace emo::trace::kineto
