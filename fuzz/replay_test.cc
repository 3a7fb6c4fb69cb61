// Replays a fuzz target's regression cases without libFuzzer: every file of
// tests/corpus/fuzz/<target>/ and of tests/corpus/malformed/ goes through the target's
// LLVMFuzzerTestOneInput, which must return (0, or -1 for an input it keeps out of a corpus).
// A crash or, under the asan preset, a sanitizer report fails the test; so does a missing or
// empty regression folder.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

namespace fs = std::filesystem;

std::vector<fs::path> Files(const fs::path& dir) {
  std::vector<fs::path> files;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return files;
  for (const auto& entry : fs::recursive_directory_iterator(dir, ec)) {
    if (entry.is_regular_file()) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

void Replay(const std::vector<fs::path>& files) {
  for (const fs::path& file : files) {
    SCOPED_TRACE(file.string());
    std::ifstream in(file, std::ios::binary);
    ASSERT_TRUE(in) << "cannot open " << file;
    const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const int rc = LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    EXPECT_TRUE(rc == 0 || rc == -1) << "returned " << rc;
  }
}

TEST(FuzzReplay, RegressionCasesReturn) {
  const fs::path dir = fs::path(EMO_SOURCE_DIR) / "tests/corpus/fuzz" / EMO_FUZZ_TARGET;
  const std::vector<fs::path> files = Files(dir);
  ASSERT_FALSE(files.empty()) << dir << " is missing or empty: each fuzz target keeps its regression cases there";
  Replay(files);
}

TEST(FuzzReplay, MalformedCorpusReturns) {
  const fs::path dir = fs::path(EMO_SOURCE_DIR) / "tests/corpus/malformed";
  const std::vector<fs::path> files = Files(dir);
  ASSERT_GE(files.size(), 38u) << dir << " is missing cases";
  Replay(files);
}

}  // namespace
