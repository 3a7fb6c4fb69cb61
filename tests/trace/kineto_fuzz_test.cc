// Robustness ("fuzz") test of the Kineto reader: a small valid trace is mutated at many seeded
// random positions (bytes flipped, deleted, inserted, spans duplicated or cut) and every
// result must be either a Trace that satisfies the table invariants or a Status; never a
// crash, a hang or a sanitizer report (CI runs this under ASan+UBSan). The seed makes any
// failure reproducible: the failing iteration prints it.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <random>
#include <string>

#include "kineto_test_util.h"

namespace emo::trace {
namespace {

using testing::DataPath;
using testing::ExpectConsistent;
using testing::ReadJson;
using testing::Slurp;

// Bytes that steer mutations toward JSON structure and number syntax, where parsers break.
constexpr char kInterestingBytes[] = "{}[]\",:0123456789.-eE \\u\n\x00\xff";
constexpr std::string_view kInteresting(kInterestingBytes, sizeof(kInterestingBytes) - 1);

std::string Mutate(const std::string& input, std::mt19937_64& rng) {
  std::string s = input;
  std::uniform_int_distribution<int> n_edits(1, 4);
  const int edits = n_edits(rng);
  for (int e = 0; e < edits && !s.empty(); ++e) {
    std::uniform_int_distribution<size_t> pos_dist(0, s.size() - 1);
    const size_t pos = pos_dist(rng);
    std::uniform_int_distribution<size_t> pick(0, kInteresting.size() - 1);
    switch (rng() % 6) {
      case 0:  // flip bits
        s[pos] = static_cast<char>(s[pos] ^ static_cast<char>(1u << (rng() % 8)));
        break;
      case 1:  // replace with a structural or number byte
        s[pos] = kInteresting[pick(rng)];
        break;
      case 2:  // delete a run
        s.erase(pos, 1 + rng() % 8);
        break;
      case 3:  // insert a byte
        s.insert(s.begin() + static_cast<std::ptrdiff_t>(pos), kInteresting[pick(rng)]);
        break;
      case 4: {  // duplicate a span somewhere else
        const size_t len = 1 + rng() % 64;
        const std::string span = s.substr(pos, len);
        s.insert(pos_dist(rng) % s.size(), span);
        break;
      }
      default:  // truncate
        s.resize(pos);
        break;
    }
  }
  return s;
}

TEST(KinetoFuzzTest, SeededMutationsNeverCrash) {
  const std::string seed_trace = Slurp(DataPath("kineto_mini.json"));
  ASSERT_FALSE(seed_trace.empty());
  ASSERT_TRUE(ReadJson(seed_trace).ok());
  constexpr uint64_t kSeed = 20261129;
  constexpr int kIterations = 20000;
  std::mt19937_64 rng(kSeed);
  int ok = 0, failed = 0;
  for (int i = 0; i < kIterations; ++i) {
    const std::string input = Mutate(seed_trace, rng);
    auto r = ReadJson(input, "fuzz.json");
    if (r.ok()) {
      ++ok;
      SCOPED_TRACE(::testing::Message() << "seed " << kSeed << " iteration " << i);
      ExpectConsistent(*r);
    } else {
      ++failed;
      EXPECT_EQ(r.status().code(), StatusCode::kParseError) << r.status().ToString();
      EXPECT_NE(r.status().message().find("fuzz.json"), std::string::npos);
    }
    if (::testing::Test::HasFatalFailure()) {
      FAIL() << "seed " << kSeed << " iteration " << i;
    }
  }
  // Both outcomes must occur, or the mutations are not exercising the reader.
  EXPECT_GT(ok, kIterations / 20);
  EXPECT_GT(failed, kIterations / 20);
  std::printf("  %d mutated traces read, %d rejected with a ParseError\n", ok, failed);
}

// Mutating the events alone (the envelope intact) exercises the per-event diagnostics path.
TEST(KinetoFuzzTest, MutatedEventsAreDiagnosticsNotErrors) {
  const std::string seed_trace = Slurp(DataPath("kineto_mini.json"));
  const size_t begin = seed_trace.find("\"traceEvents\"");
  const size_t end = seed_trace.rfind("\"traceName\"");
  ASSERT_NE(begin, std::string::npos);
  ASSERT_NE(end, std::string::npos);
  std::mt19937_64 rng(7);
  int ok = 0;
  for (int i = 0; i < 2000; ++i) {
    std::string s = seed_trace;
    // Replace a value-ish byte with another value byte: stays JSON far more often.
    std::uniform_int_distribution<size_t> pos_dist(begin + 20, end - 20);
    const size_t pos = pos_dist(rng);
    constexpr std::string_view kValueBytes = "0123456789-.\"tfn";
    s[pos] = kValueBytes[rng() % kValueBytes.size()];
    auto r = ReadJson(s);
    if (r.ok()) {
      ++ok;
      ExpectConsistent(*r);
    }
  }
  EXPECT_GT(ok, 100);
}

}  // namespace
}  // namespace emo::trace
