// The piecewise Kineto reader (src/trace/kineto_json_stream.cc, used for files of 8 MiB and more)
// against the whole-document one: on every trace at hand, cut into batches from one element to
// 1 MiB, it gives the same Trace, or declines (nullopt) where the whole reader fails.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "emo/trace/reader.h"
#include "trace/kineto_json_stream.h"
#include "trace/trace_fingerprint.h"

namespace emo::trace {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> Inputs() {
  std::vector<std::string> files = {std::string(EMO_SOURCE_DIR) + "/tests/trace/data/kineto_mini.json",
                                    std::string(EMO_SOURCE_DIR) + "/examples/gpt_train_h200.json.gz",
                                    std::string(EMO_SOURCE_DIR) + "/examples/multistream_h200.json.gz"};
  for (const auto& dir : {std::string(EMO_SOURCE_DIR) + "/tests/corpus/malformed",
                          std::string(EMO_SHARED_DIR) + "/traces/h200", std::string(EMO_SHARED_DIR) + "/traces/hta"}) {
    if (!fs::is_directory(dir)) continue;
    for (const auto& f : fs::directory_iterator(dir)) {
      const std::string p = f.path().string();
      if (p.ends_with(".json") || p.ends_with(".json.gz")) files.push_back(p);
    }
  }
  return files;
}

TEST(KinetoPiecewiseTest, SameTraceAsTheWholeReaderInBatchesOfAnySize) {
  int read_piecewise = 0;
  for (const std::string& path : Inputs()) {
    SCOPED_TRACE(path);
    Result<Trace> whole = ReadTrace(path);  // every input here is under the piecewise size
    // Batches of one element each on the repository's files; coarser on the shared traces
    // (tens of MB), to keep the test short.
    const bool shared = path.starts_with(EMO_SHARED_DIR);
    const std::vector<size_t> batches = shared ? std::vector<size_t>{4096, size_t{1} << 20}
                                               : std::vector<size_t>{1, 257, size_t{1} << 20};
    for (size_t batch : batches) {
      SCOPED_TRACE(batch);
      std::optional<Trace> piecewise = ReadKinetoJsonPiecewise(path, batch);
      if (!whole.ok()) {
        EXPECT_FALSE(piecewise.has_value()) << "the whole reader failed: " << whole.status().message();
        continue;
      }
      if (!piecewise.has_value()) continue;  // declined: the whole reader reads it
      ++read_piecewise;
      EXPECT_EQ(Fingerprint(*piecewise), Fingerprint(*whole));
    }
  }
  EXPECT_GE(read_piecewise, 9);  // at least the three checked-in traces, each batch size
}

TEST(KinetoPiecewiseTest, DeclinesWhatTheWholeReaderRefuses) {
  const fs::path dir = fs::temp_directory_path() / "emo_piecewise_test";
  fs::create_directories(dir);
  const std::vector<std::string> bad = {
      R"({"traceEvents":[{"ph":"X"},]})",           // an empty element after a cut
      R"({"traceEvents":[{"ph":"X"},,{"ph":"X"}]})",  // the same inside
      R"({"traceEvents":[{"ph":"X"}})",             // the array closed by '}'
      R"({"traceEvents":[{"ph":"X"}]} trailing)",    // content after the object
      R"({"traceEvents":[{"ph":"X"}])",              // the object never closed
      R"([{"traceEvents":[]}])",                     // not an object
  };
  for (const std::string& text : bad) {
    SCOPED_TRACE(text);
    const std::string path = (dir / "bad.json").string();
    { std::ofstream(path) << text; }
    EXPECT_FALSE(ReadTrace(path).ok());
    for (size_t batch : {size_t{1}, size_t{1} << 20}) EXPECT_FALSE(ReadKinetoJsonPiecewise(path, batch).has_value());
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace emo::trace
