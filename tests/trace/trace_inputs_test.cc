// The traces behind a job's inputs (trace::ExpandTraceInputs): files as given, folders and tar
// archives (plain, gzipped, GNU long names) expanded to their traces, sorted; the refusals.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "emo/trace/reader.h"
#include "test_util.h"

namespace emo::trace {
namespace {

namespace fs = std::filesystem;

class TraceInputsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / ("emo_inputs_" + std::to_string(getpid()) + "_" +
                                             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "job" / std::string(120, 'd'));
    const std::string example = testing::SourceDir() + "/examples/gpt_train_h200.json.gz";
    fs::copy_file(example, dir_ / "job" / "rank1.json.gz");
    fs::copy_file(example, dir_ / "job" / "rank0.json.gz");
    fs::copy_file(example, dir_ / "job" / std::string(120, 'd') / "rank2.json.gz");  // a name over 100 characters
    std::ofstream(dir_ / "job" / "notes.txt") << "not a trace\n";
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::vector<std::string> Names(const std::vector<TraceSource>& s) {
    std::vector<std::string> out;
    for (const auto& t : s) out.push_back(t.name);
    return out;
  }
  fs::path dir_;
};

TEST_F(TraceInputsTest, AFolderStandsForItsTracesSortedAndAFileForItself) {
  const std::string job = (dir_ / "job").string();
  auto s = ExpandTraceInputs({job, testing::SourceDir() + "/examples/multistream_h200.json.gz"});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(Names(*s), (std::vector<std::string>{job + "/rank0.json.gz", job + "/rank1.json.gz",
                                                 testing::SourceDir() + "/examples/multistream_h200.json.gz"}));
  for (const auto& t : *s) EXPECT_FALSE(t.in_memory);
}

TEST_F(TraceInputsTest, ATarArchiveStandsForItsTracesAndEachReadsAsTheFileDoes) {
  for (const char* archive : {"job.tar", "job.tar.gz"}) {
    SCOPED_TRACE(archive);
    const fs::path tar = dir_ / archive;
    ASSERT_EQ(std::system(("tar --format=gnu -c" + std::string(tar.extension() == ".gz" ? "z" : "") + "f '" +
                           tar.string() + "' -C '" + dir_.string() + "' job")
                              .c_str()),
              0);
    auto s = ExpandTraceInputs({tar.string()});
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    EXPECT_EQ(Names(*s), (std::vector<std::string>{tar.string() + ":job/" + std::string(120, 'd') + "/rank2.json.gz",
                                                   tar.string() + ":job/rank0.json.gz", tar.string() + ":job/rank1.json.gz"}));
    auto from_tar = ReadTrace(s->front());
    auto from_file = ReadTrace(testing::SourceDir() + "/examples/gpt_train_h200.json.gz");
    ASSERT_TRUE(from_tar.ok()) << from_tar.status().ToString();
    ASSERT_TRUE(from_file.ok());
    EXPECT_EQ(from_tar->meta.source_path, s->front().name);
    EXPECT_EQ(from_tar->gpu.size(), from_file->gpu.size());
    EXPECT_EQ(from_tar->cpu.size(), from_file->cpu.size());
  }
}

TEST_F(TraceInputsTest, InputsWithoutTracesAndBrokenArchivesAreRefusedByName) {
  fs::create_directories(dir_ / "empty");
  auto empty = ExpandTraceInputs({(dir_ / "empty").string()});
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("a folder with no trace in it"), std::string::npos) << empty.status().message();
  std::ofstream(dir_ / "short.tar") << "hello";
  auto shorter = ExpandTraceInputs({(dir_ / "short.tar").string()});
  ASSERT_FALSE(shorter.ok());
  EXPECT_NE(shorter.status().message().find("short.tar: not a tar archive"), std::string::npos) << shorter.status().message();
  std::ofstream(dir_ / "junk.tar") << std::string(2048, 'x');
  auto junk = ExpandTraceInputs({(dir_ / "junk.tar").string()});
  ASSERT_FALSE(junk.ok());
  EXPECT_NE(junk.status().message().find("junk.tar: not a tar archive EMO can read (bad header at byte 0)"),
            std::string::npos)
      << junk.status().message();
  const fs::path tar = dir_ / "cut.tar";
  ASSERT_EQ(std::system(("tar -cf '" + tar.string() + "' -C '" + dir_.string() + "' job").c_str()), 0);
  fs::resize_file(tar, 3000);
  auto cut = ExpandTraceInputs({tar.string()});
  ASSERT_FALSE(cut.ok());
  EXPECT_NE(cut.status().message().find("truncated"), std::string::npos) << cut.status().message();
}

}  // namespace
}  // namespace emo::trace
