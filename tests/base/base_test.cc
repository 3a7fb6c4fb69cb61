#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <limits>

#include <zlib.h>

#include "emo/base/diagnostics.h"
#include "emo/base/file.h"
#include "emo/base/ids.h"
#include "emo/base/json_read.h"
#include "emo/base/regex.h"
#include "emo/base/status.h"
#include "emo/base/text.h"
#include "emo/base/units.h"

namespace emo {
namespace {

Result<int> Half(int x) {
  if (x % 2 != 0) return InvalidArgument("odd");
  return x / 2;
}

Result<int> Quarter(int x) {
  EMO_ASSIGN_OR_RETURN(int h, Half(x));
  EMO_ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

TEST(StatusTest, ResultCarriesValueOrError) {
  EXPECT_EQ(*Quarter(8), 2);
  Result<int> bad = Quarter(6);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().ToString(), "invalid argument: odd");
}

TEST(TextTest, PluralAgreesWithTheCount) {
  EXPECT_EQ(Plural(1, "pack"), "1 pack");
  EXPECT_EQ(Plural(0, "pack"), "0 packs");
  EXPECT_EQ(Plural(2, "iteration"), "2 iterations");
  EXPECT_EQ(Plural(1, "switch", "switches"), "1 switch");
  EXPECT_EQ(Plural(3, "switch", "switches"), "3 switches");
}

TEST(UnitsTest, EnergyIsPowerTimesTime) {
  Joules e = Watts(100.0) * Nanoseconds(2'000'000'000);
  EXPECT_DOUBLE_EQ(e.value(), 200.0);
  EXPECT_LT(Nanoseconds(1), Nanoseconds(2));
}

TEST(IdsTest, DefaultIsInvalid) {
  struct Tag {};
  Id<Tag> a;
  EXPECT_FALSE(a.valid());
  EXPECT_TRUE(Id<Tag>(3).valid());
}

TEST(JsonFieldTest, TypedAccessNamesFileAndField) {
  Result<nlohmann::json> doc = ParseJsonText(R"({"a": {"b": [1, "two", null]}, "s": "x"})", "f.json");
  ASSERT_TRUE(doc.ok());
  const JsonField root(*doc, "f.json");
  Result<JsonField> b = root.Get("a");
  ASSERT_TRUE(b.ok());
  b = b->Get("b");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->path(), "a.b");
  EXPECT_EQ(*b->Size(), 3u);
  EXPECT_EQ(*b->At(0)->Number(), 1.0);
  EXPECT_EQ(b->At(1)->Number().status().message(), "f.json: a.b[1]: expected a number, got string");
  EXPECT_EQ(b->At(2)->String().status().message(), "f.json: a.b[2]: expected a string, got null");
  EXPECT_EQ(b->At(3).status().message(), "f.json: a.b: index 3 past the end (3 elements)");
  EXPECT_EQ(b->Get("c").status().message(), "f.json: a.b: expected an object, got array");
  EXPECT_EQ(root.Get("missing").status().message(), "f.json: missing: missing");
  EXPECT_EQ(*root.Get("s")->String(), "x");
  EXPECT_EQ(root.Get("s")->Bool().status().message(), "f.json: s: expected true or false, got string");
  EXPECT_TRUE(root.Has("s"));
  EXPECT_FALSE(b->Has("s"));  // an array has no members
  const nlohmann::json inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(JsonField(inf, "g.json").Number().status().message(), "g.json: expected a finite number");
  EXPECT_EQ(ParseJsonText("{", "h.json").status().message(), "h.json: not valid JSON");
}

// Repetition counts std::regex must not see (libstdc++ overflows on 19 digits) are refused by
// position; escaped braces, counts up to the limit and patterns without counts pass.
TEST(RegexTest, HugeRepetitionCountsAreRefusedBeforeStdRegexSeesThem) {
  EXPECT_EQ(RegexLimitError("H200{99999999999999999999}"), "a repetition count over 1000 at character 6");
  EXPECT_EQ(RegexLimitError("a{2,1001}"), "a repetition count over 1000 at character 5");
  EXPECT_EQ(RegexLimitError("x{1001"), "a repetition count over 1000 at character 3");  // unclosed too
  EXPECT_EQ(RegexLimitError("a{1000}b{0,1000}"), "");
  EXPECT_EQ(RegexLimitError("\\\\{5}"), "");                // an escaped backslash, then a count
  EXPECT_EQ(RegexLimitError("\\\\{99999}"), "a repetition count over 1000 at character 4");
  EXPECT_EQ(RegexLimitError("\\{99999}"), "");  // an escaped brace is a literal
  EXPECT_EQ(RegexLimitError("ProfilerStep#\\d+|[Ss]tep"), "");
  EXPECT_EQ(RegexLimitError("(a)\\1"), "");  // a back-reference
  EXPECT_EQ(RegexLimitError("(a)\\66666666666666666666"), "a back-reference over 1000 at character 5");
  EXPECT_EQ(RegexLimitError("\\\\66666666666666666666"), "");  // an escaped backslash, then digits
  std::string why;
  EXPECT_FALSE(CompileRegex("H100( 80GB{7777777777777777777777,", std::regex::ECMAScript, &why));
  EXPECT_EQ(why, "a repetition count over 1000 at character 12");
  EXPECT_FALSE(CompileRegex("(unclosed", std::regex::ECMAScript, &why));
  EXPECT_FALSE(why.empty());
  const std::optional<std::regex> re = CompileRegex("H20{2}", std::regex::ECMAScript, &why);
  ASSERT_TRUE(re.has_value());
  EXPECT_TRUE(std::regex_search("NVIDIA H200", *re));
}

TEST(DiagnosticsTest, RowsListNonZeroInOrder) {
  Diagnostics d;
  d.Add(Diag::kSyncUnresolved, 3);
  d.Add(Diag::kJsonEventSkipped);
  auto rows = d.Rows();
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].name, "json_event_skipped");
  EXPECT_EQ(rows[1].name, "sync_unresolved");
  EXPECT_EQ(rows[1].count, 3u);
}

TEST(FileTest, ReadsGzipAndPlain) {
  std::string plain = ::testing::TempDir() + "/emo_plain.txt";
  std::string gz = ::testing::TempDir() + "/emo_text.gz";
  { std::ofstream(plain) << "hello"; }
  gzFile f = gzopen(gz.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  gzputs(f, "hello gz");
  gzclose(f);
  EXPECT_EQ(*ReadFileMaybeGzip(plain), "hello");
  EXPECT_EQ(*ReadFileMaybeGzip(gz), "hello gz");
  auto missing = ReadFileMaybeGzip("/nonexistent/x.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/x.json"), std::string::npos);
}

TEST(FileTest, TruncatedGzipIsAnError) {
  std::string gz = ::testing::TempDir() + "/emo_trunc.gz";
  gzFile f = gzopen(gz.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  std::string big(100000, 'x');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>('a' + (i * 7919) % 26);
  gzwrite(f, big.data(), static_cast<unsigned>(big.size()));
  gzclose(f);
  std::string data = *ReadFileMaybeGzip(gz + "");  // sanity: full file reads
  ASSERT_EQ(data.size(), big.size());
  // Cut the compressed file in half.
  std::ifstream in(gz, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  std::ofstream(gz, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  auto r = ReadFileMaybeGzip(gz);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kParseError);
}

}  // namespace
}  // namespace emo
