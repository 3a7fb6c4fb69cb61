// `mpirun -np N emo analyze --mpi`: the ranks of a job shared out over N processes give the
// result of one process, byte for byte (JSON and text), with processes that hold several ranks,
// one each, or none; a trace that fails in one process fails the job once, naming it.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "emo_run.h"

namespace {

using emo::testing::Emo;
using emo::testing::ReadText;
using emo::testing::RunShell;
using emo::testing::TempPath;

// mpirun on this one machine: as root too (CI containers), more processes than cores, shared
// memory without cross-memory attach (not allowed in every container); Open MPI's own
// allocations at exit are not EMO's leaks (ASan builds).
std::string Mpirun(int np, const std::string& args) {
  return "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none "
         "ASAN_OPTIONS=detect_leaks=0 timeout 600 mpirun --oversubscribe -np " +
         std::to_string(np) + " '" + EMO_BINARY + "' analyze --mpi " + args;
}

// The text `emo analyze` printed, without the progress lines (each process says what it reads).
std::string Report(const std::string& out) {
  std::string kept, line;
  for (size_t at = 0; at < out.size();) {
    const size_t nl = out.find('\n', at);
    line = out.substr(at, nl == std::string::npos ? std::string::npos : nl - at + 1);
    at = nl == std::string::npos ? out.size() : nl + 1;
    if (line.rfind("emo analyze: reading ", 0) != 0) kept += line;
  }
  return kept;
}

#ifdef EMO_HAVE_MPI

void ExpectSameAsOneProcess(const std::string& traces, int np) {
  SCOPED_TRACE(std::to_string(np) + " processes: " + traces);
  const std::string one = TempPath("one.json"), many = TempPath("many.json");
  const auto threaded = Emo("analyze " + traces + " --json " + one);
  ASSERT_EQ(threaded.exit_code, 0) << threaded.out;
  const auto mpi = RunShell(Mpirun(np, traces + " --json " + many));
  ASSERT_EQ(mpi.exit_code, 0) << mpi.out;
  const std::string a = ReadText(one), b = ReadText(many);
  ASSERT_NE(a.find("\"joint_replay\""), std::string::npos) << "not analysed as a job";
  EXPECT_EQ(a, b);
  EXPECT_EQ(Report(threaded.out), Report(mpi.out));
  std::remove(one.c_str());
  std::remove(many.c_str());
}

TEST(MpiCliTest, FourProcessesGiveTheResultOfOne) {
  EMO_REQUIRE_SHARED();
  // 8 ranks in a tar: two per process, and the straggler's critical path crosses processes.
  ExpectSameAsOneProcess(SharedPath("traces/param/dlrm_kineto_8ranks_v100.tar.gz"), 4);
  // 8 ranks on 3 processes: shares of 3, 3 and 2.
  ExpectSameAsOneProcess(SharedPath("traces/param/dlrm_kineto_8ranks_v100.tar.gz"), 3);
  // 2 ranks on 4 processes: two of them hold none and still take part.
  ExpectSameAsOneProcess(
      SharedPath("traces/h200/pp_gpt_rank0.json.gz") + " " + SharedPath("traces/h200/pp_gpt_rank1.json.gz"), 4);
}

TEST(MpiCliTest, ATraceThatFailsInOneProcessFailsTheJobOnce) {
  EMO_REQUIRE_SHARED();
  const std::string bad = TempPath("broken.json");
  std::ofstream(bad) << "{\"traceEvents\": [";
  const auto r = RunShell(Mpirun(2, SharedPath("traces/h200/ddp_gpt_rank0.json.gz") + " " + bad));
  EXPECT_NE(r.exit_code, 0);
  size_t said = 0;
  for (size_t at = r.out.find("emo analyze: parse error: " + bad); at != std::string::npos;
       at = r.out.find("emo analyze: parse error: ", at + 1)) {
    ++said;
  }
  EXPECT_EQ(said, 1u) << r.out;
  EXPECT_NE(r.out.find("(in MPI process 1)"), std::string::npos) << r.out;
  std::remove(bad.c_str());
}

TEST(MpiCliTest, PerfettoNeedsOneProcess) {
  EMO_REQUIRE_SHARED();
  const auto r = Emo("analyze --mpi " + SharedPath("traces/h200/ddp_gpt_rank0.json.gz") + " --perfetto " +
                     TempPath("x.perfetto.json"));
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("not with --mpi"), std::string::npos) << r.out;
}

#else

TEST(MpiCliTest, WithoutMpiTheFlagSaysSo) {
  const auto r = Emo("analyze --mpi " EMO_SOURCE_DIR "/examples/streams_graph_h200.emotrace");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("built without MPI"), std::string::npos) << r.out;
}

#endif

}  // namespace
