// Helpers shared by the Kineto reader tests.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "emo/base/status.h"
#include "emo/trace/reader.h"

namespace emo::trace::testing {

// The registered Kineto reader (tests reach it through the public registry).
inline const Reader& KinetoReader() {
  for (const auto& r : Readers()) {
    if (r->Name() == "kineto-json") return *r;
  }
  ADD_FAILURE() << "no kineto-json reader registered";
  std::abort();
}

// Parses in-memory JSON with the Kineto reader, as if read from `path`.
inline Result<Trace> ReadJson(const std::string& json, const std::string& path = "test.json") {
  return KinetoReader().Read(path, json);
}

// The checked-in test input tests/trace/data/<name>.
inline std::string DataPath(const std::string& name) {
  return std::string(EMO_SOURCE_DIR) + "/tests/trace/data/" + name;
}

inline std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Index of the first row of `table` named `name`, or -1.
template <typename Table>
int FindRow(const Trace& t, const Table& table, std::string_view name) {
  for (size_t i = 0; i < table.size(); ++i) {
    if (t.Name(table.name[i]) == name) return static_cast<int>(i);
  }
  return -1;
}

// Structural invariants every successfully read Trace must satisfy, whatever the input.
inline void ExpectConsistent(const Trace& t) {
  const size_t nc = t.cpu.size();
  EXPECT_EQ(t.cpu.thread.size(), nc);
  EXPECT_EQ(t.cpu.kind.size(), nc);
  EXPECT_EQ(t.cpu.name.size(), nc);
  EXPECT_EQ(t.cpu.end.size(), nc);
  EXPECT_EQ(t.cpu.correlation.size(), nc);
  EXPECT_EQ(t.cpu.external_id.size(), nc);
  EXPECT_EQ(t.cpu.cbid.size(), nc);
  for (size_t i = 0; i < nc; ++i) {
    ASSERT_LT(t.cpu.thread[i].value(), t.threads.size());
    ASSERT_LT(t.cpu.name[i].value(), t.strings.size());
    EXPECT_LE(t.cpu.start[i], t.cpu.end[i]);
    if (i > 0) {
      EXPECT_LE(t.cpu.start[i - 1], t.cpu.start[i]);
    }
  }
  const size_t ng = t.gpu.size();
  EXPECT_EQ(t.gpu.kind.size(), ng);
  EXPECT_EQ(t.gpu.name.size(), ng);
  EXPECT_EQ(t.gpu.stream.size(), ng);
  EXPECT_EQ(t.gpu.end.size(), ng);
  EXPECT_EQ(t.gpu.correlation.size(), ng);
  EXPECT_EQ(t.gpu.external_id.size(), ng);
  EXPECT_EQ(t.gpu.launch.size(), ng);
  EXPECT_EQ(t.gpu.bytes.size(), ng);
  EXPECT_EQ(t.gpu.graph_id.size(), ng);
  EXPECT_EQ(t.gpu.collective.size(), ng);
  for (size_t i = 0; i < ng; ++i) {
    ASSERT_LT(t.gpu.stream[i].value(), t.streams.size());
    ASSERT_LT(t.gpu.name[i].value(), t.strings.size());
    if (t.gpu.collective[i].valid()) {
      ASSERT_LT(t.gpu.collective[i].value(), t.collectives.size());
    }
    EXPECT_LE(t.gpu.start[i], t.gpu.end[i]);
    if (i > 0) {
      EXPECT_LE(t.gpu.start[i - 1], t.gpu.start[i]);
    }
  }
  const size_t ns = t.syncs.size();
  EXPECT_EQ(t.syncs.kind.size(), ns);
  EXPECT_EQ(t.syncs.device.size(), ns);
  EXPECT_EQ(t.syncs.stream.size(), ns);
  EXPECT_EQ(t.syncs.end.size(), ns);
  EXPECT_EQ(t.syncs.correlation.size(), ns);
  EXPECT_EQ(t.syncs.wait_on_stream.size(), ns);
  EXPECT_EQ(t.syncs.wait_on_record_corr.size(), ns);
  EXPECT_EQ(t.syncs.event_id.size(), ns);
  for (size_t i = 0; i < ns; ++i) EXPECT_LE(t.syncs.start[i], t.syncs.end[i]);
  for (const GpuAnnotation& a : t.gpu_annotations) {
    ASSERT_LT(a.stream.value(), t.streams.size());
    ASSERT_LT(a.name.value(), t.strings.size());
    EXPECT_LE(a.start, a.end);
  }
}

// A file in a fresh temporary folder, removed with the object.
class TempFile {
 public:
  TempFile(const std::string& name, const std::string& bytes) {
    dir_ = std::filesystem::temp_directory_path() /
           ("emo_trace_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter_++));
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / name).string();
    std::ofstream(path_, std::ios::binary) << bytes;
  }
  ~TempFile() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  static inline int counter_ = 0;
  std::filesystem::path dir_;
  std::string path_;
};

}  // namespace emo::trace::testing
