// `emo trace` and `emo monitor` as a user meets them without a GPU: the program runs, its exit
// code comes back, and a run that traced nothing says why. (The tracer on a GPU is tested by the
// `gpu`-labelled tests in tests/runtime.)
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "emo_run.h"

namespace emo::testing {
namespace {

// In these tests any existing file stands in for the tracer library ($EMO_INJECT_LIB): a program
// that never initializes CUDA never loads it.

TEST(TraceCliTest, AProgramWithoutCudaRunsAndIsToldItWroteNoTrace) {
  setenv("EMO_INJECT_LIB", "/bin/true", 1);
  const EmoRun r = Emo("trace -o " + TempPath("none_%r.emotrace") + " -- sh -c 'echo hello from the program'");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("hello from the program"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("never initialized CUDA"), std::string::npos) << r.out;
  unsetenv("EMO_INJECT_LIB");
}

TEST(TraceCliTest, TheProgramsExitCodeComesBack) {
  setenv("EMO_INJECT_LIB", "/bin/true", 1);
  for (const char* cmd : {"trace", "monitor"}) {
    const EmoRun r = Emo(std::string(cmd) + " -- sh -c 'exit 3'");
    EXPECT_EQ(r.exit_code, 3) << cmd << "\n" << r.out;
    EXPECT_NE(r.out.find("exited with 3"), std::string::npos) << r.out;
  }
  const EmoRun missing = Emo("trace -- emo-no-such-program-here");
  EXPECT_EQ(missing.exit_code, 127) << missing.out;
  EXPECT_NE(missing.out.find("cannot run emo-no-such-program-here"), std::string::npos) << missing.out;
  unsetenv("EMO_INJECT_LIB");
}

TEST(TraceCliTest, ProgramArgumentsAfterTheSeparatorAreTheProgramsOwn) {
  setenv("EMO_INJECT_LIB", "/bin/true", 1);
  // --iterations after `--` belongs to the program, not to emo.
  const EmoRun r = Emo("trace --iterations 2 -- sh -c 'echo \"$@\"' sh --iterations 7 --json x");
  EXPECT_NE(r.out.find("--iterations 7 --json x"), std::string::npos) << r.out;
  unsetenv("EMO_INJECT_LIB");
}

TEST(TraceCliTest, TheTracersSettingsReplaceTheCallersAndItsOtherKnobsPassThrough) {
  setenv("EMO_INJECT_LIB", "/bin/true", 1);
  setenv("EMO_TRACE_WARMUP", "99", 1);  // emo trace sets its own (--warmup)
  setenv("EMO_TRACE_ANCHOR", "0", 1);   // no option: the caller's reaches the tracer
  const EmoRun r = Emo("trace --warmup 7 -- sh -c 'echo \"w=$EMO_TRACE_WARMUP a=$EMO_TRACE_ANCHOR\"'");
  EXPECT_NE(r.out.find("w=7 a=0"), std::string::npos) << r.out;
  unsetenv("EMO_TRACE_WARMUP");
  unsetenv("EMO_TRACE_ANCHOR");
  unsetenv("EMO_INJECT_LIB");
}

// torchrun's launcher initializes CUDA but runs no GPU work: beside the ranks' traces its empty
// one is dropped and named; alone, it is kept (it is all there is to say about the run). The
// "program" here copies two files the tracer wrote on the H200 (data/h200_emo/README.md).
TEST(TraceCliTest, ALauncherThatRanNoGpuWorkIsDroppedBesideTheRanksThatDid) {
  setenv("EMO_INJECT_LIB", "/bin/true", 1);
  const std::string d = SourceDir() + "/data/h200_emo/";
  const std::string rank0 = TempPath("job_0.emotrace"), launcher = TempPath("job_pid597.emotrace");
  const std::string json = TempPath("job.json");
  const EmoRun r = Emo("trace -o " + TempPath("job_%r.emotrace") + " --json " + json + " -- sh -c 'cp " + d +
                       "ddp_train_rank0.emotrace " + rank0 + " && cp " + d + "ddp_launcher.emotrace " + launcher + "'");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("pid 597 on vm initialized CUDA but ran no GPU work"), std::string::npos) << r.out;
  EXPECT_TRUE(std::filesystem::exists(rank0));
  EXPECT_FALSE(std::filesystem::exists(launcher));
  const auto j = ReadJson(json);
  ASSERT_EQ(j["traces"].size(), 1u) << j.dump();
  EXPECT_EQ(j["traces"][0]["rank"], 0);
  ASSERT_EQ(j["processes_without_gpu_work"].size(), 1u);
  EXPECT_EQ(j["processes_without_gpu_work"][0]["pid"], 597);

  const std::string alone = TempPath("alone_pid597.emotrace");
  const EmoRun a = Emo("trace -o " + TempPath("alone_%r.emotrace") + " -- cp " + d + "ddp_launcher.emotrace " + alone);
  EXPECT_TRUE(std::filesystem::exists(alone)) << a.out;
  EXPECT_NE(a.out.find("none found"), std::string::npos) << a.out;
  for (const auto& f : {rank0, json, alone}) std::filesystem::remove(f);
  unsetenv("EMO_INJECT_LIB");
}

TEST(TraceCliTest, MissingPiecesAreNamed) {
  const EmoRun none = Emo("trace");
  EXPECT_EQ(none.exit_code, 2) << none.out;
  EXPECT_NE(none.out.find("command"), std::string::npos) << none.out;

  setenv("EMO_INJECT_LIB", "/no/such/libemo_inject.so", 1);
  const EmoRun nolib = Emo("trace -o " + TempPath("x_%r.emotrace") + " -- true");
  unsetenv("EMO_INJECT_LIB");
  // A build without CUPTI has no library anywhere; one with it finds the build tree's.
  if (nolib.exit_code != 1 || nolib.out.find("wrote no trace") == std::string::npos) {
    EXPECT_NE(nolib.out.find("/no/such/libemo_inject.so"), std::string::npos) << nolib.out;
    EXPECT_NE(nolib.out.find("built without CUPTI"), std::string::npos) << nolib.out;
  }

  setenv("EMO_INJECT_LIB", "/bin/true", 1);
  const EmoRun nodir = Emo("trace -o /no/such/folder/t.emotrace -- true");
  EXPECT_EQ(nodir.exit_code, 1) << nodir.out;
  EXPECT_NE(nodir.out.find("/no/such/folder"), std::string::npos) << nodir.out;
  unsetenv("EMO_INJECT_LIB");
}

}  // namespace
}  // namespace emo::testing
