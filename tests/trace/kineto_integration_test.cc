// Integration tests of the Kineto reader on every real trace in ../shared/traces. The expected
// numbers were measured from the files with Python's json module under the reader's rules (an X
// event is stored when it has name, ts and dur; a GPU op when its args have device and stream;
// timestamps via decimal.Decimal, not float), e.g. for the kernels of a file F:
//   python3 -c 'import json,gzip; d=json.load(gzip.open(F)); print(sum(1 for e in
//     d["traceEvents"] if e.get("ph")=="X" and e.get("cat")=="kernel" and "stream" in
//     e.get("args",{})))'
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "emo/base/file.h"
#include "kineto_test_util.h"
#include "test_util.h"

namespace emo::trace {
namespace {

using testing::ExpectConsistent;

struct Expected {
  const char* file;  // under ../shared/traces
  int64_t raw_events;
  size_t ops, annotations, runtime, driver;
  size_t kernels, memcpys, memsets, syncs, gpu_annotations, collectives;
  size_t threads, streams;
  uint64_t unknown_category, python_function, sync_unresolved;
  int64_t rank, world_size;
  bool rocm;
};

void PrintTo(const Expected& e, std::ostream* os) { *os << e.file; }

// clang-format off
const Expected kTraces[] = {
    {"h200/ddp_gpt_rank0.json.gz", 37738, 17916, 54, 4009, 627, 2636, 447, 360, 228, 51, 42, 3, 2, 3039, 0, 227, 0, 2, false},
    {"h200/ddp_gpt_rank1.json.gz", 37820, 17916, 54, 4033, 627, 2637, 447, 360, 244, 51, 42, 3, 2, 3039, 0, 243, 1, 2, false},
    {"h200/gpt_train.json.gz", 39341, 20796, 12, 3085, 780, 2860, 0, 480, 1, 8, 0, 2, 1, 4051, 0, 0, -1, -1, false},
    {"h200/multistream.json.gz", 1407, 212, 4, 225, 24, 240, 0, 48, 17, 12, 0, 1, 3, 3, 0, 16, -1, -1, false},
    {"h200/pp_gpt_rank0.json.gz", 81792, 40164, 33, 7595, 1560, 6540, 0, 888, 194, 30, 24, 3, 2, 7947, 0, 193, 0, 2, false},
    {"h200/pp_gpt_rank1.json.gz", 49902, 21159, 33, 5221, 828, 4203, 0, 517, 1433, 30, 24, 3, 2, 4212, 0, 1432, 1, 2, false},
    {"h200/overhead/gpt_train_async_light.json.gz", 49159, 25995, 15, 3856, 975, 3575, 0, 600, 1, 10, 0, 2, 1, 5063, 0, 0, -1, -1, false},
    {"h200/overhead/gpt_train_async_shapes.json.gz", 49159, 25995, 15, 3856, 975, 3575, 0, 600, 1, 10, 0, 2, 1, 5063, 0, 0, -1, -1, false},
    {"h200/overhead/gpt_train_sync_light.json.gz", 49179, 25995, 15, 3861, 975, 3575, 0, 600, 6, 10, 0, 2, 1, 5063, 0, 0, -1, -1, false},
    {"h200/overhead/gpt_train_sync_shapes.json.gz", 49179, 25995, 15, 3861, 975, 3575, 0, 600, 6, 10, 0, 2, 1, 5063, 0, 0, -1, -1, false},
    {"h200/overhead/multistream_async_light.json.gz", 1688, 265, 5, 281, 30, 280, 0, 56, 21, 15, 0, 1, 3, 3, 0, 20, -1, -1, false},
    {"h200/overhead/multistream_async_shapes.json.gz", 1688, 265, 5, 281, 30, 280, 0, 56, 21, 15, 0, 1, 3, 3, 0, 20, -1, -1, false},
    {"h200/overhead/multistream_sync_light.json.gz", 1516, 265, 5, 286, 30, 200, 0, 40, 26, 15, 0, 1, 3, 3, 0, 20, -1, -1, false},
    {"h200/overhead/multistream_sync_shapes.json.gz", 1516, 265, 5, 286, 30, 200, 0, 40, 26, 15, 0, 1, 3, 3, 0, 20, -1, -1, false},
    {"h200/overhead/resnet_train_async_light.json.gz", 42694, 18090, 15, 5791, 490, 4550, 5, 245, 1, 10, 0, 2, 1, 2353, 0, 0, -1, -1, false},
    {"h200/overhead/resnet_train_async_shapes.json.gz", 42838, 18090, 15, 5791, 490, 4616, 5, 251, 1, 10, 0, 2, 1, 2353, 0, 0, -1, -1, false},
    {"h200/overhead/resnet_train_sync_light.json.gz", 42714, 18090, 15, 5796, 490, 4550, 5, 245, 6, 10, 0, 2, 1, 2353, 0, 0, -1, -1, false},
    {"h200/overhead/resnet_train_sync_shapes.json.gz", 42714, 18090, 15, 5796, 490, 4550, 5, 245, 6, 10, 0, 2, 1, 2353, 0, 0, -1, -1, false},
    {"hta/cp_alexnet_a100.json.gz", 1408, 359, 8, 361, 0, 79, 16, 3, 41, 0, 0, 1, 2, 3, 0, 0, 0, -1, false},
    {"hta/cp_event_sync_a100.json.gz", 92, 10, 1, 12, 0, 4, 1, 0, 4, 0, 0, 1, 1, 3, 0, 0, 0, -1, false},
    {"hta/cp_event_sync_multistream_a100.json.gz", 149, 6, 0, 39, 0, 3, 0, 3, 5, 0, 0, 1, 3, 3, 0, 1, 0, -1, false},
    {"hta/cp_simple_add_a100.GOLDEN_overlaid_critical_path.json.gz", 1732, 359, 8, 331, 0, 79, 16, 3, 41, 0, 0, 1, 2, 387, 0, 0, 0, -1, false},
    {"hta/cp_simple_add_a100.json.gz", 1348, 359, 8, 331, 0, 79, 16, 3, 41, 0, 0, 1, 2, 3, 0, 0, 0, -1, false},
    {"hta/et_pair_simple_add_kineto.json.gz", 111, 28, 8, 15, 0, 4, 0, 0, 0, 0, 0, 1, 1, 3, 0, 0, 0, -1, false},
    {"hta/legacy_async_cpu_to_gpu_rank3_of8_a100.json.gz", 109123, 40506, 288, 24692, 0, 8568, 228, 654, 0, 0, 0, 3, 4, 3, 0, 0, 3, 8, false},
    {"hta/multistream_cudagraph_rank0_of16_a100.json.gz", 108936, 25185, 360, 33924, 0, 6080, 1390, 277, 0, 0, 0, 6, 6, 3, 0, 0, 0, 16, false},
    {"hta/nccl_allreduce_rank0_of2_a100.json.gz", 40573, 14346, 42, 8740, 0, 2700, 960, 114, 0, 30, 21, 3, 2, 1089, 0, 0, 0, 2, false},
    {"hta/ns_resolution_v100.json.gz", 68692, 23910, 70, 15329, 0, 4350, 1600, 145, 0, 15, 0, 3, 1, 1813, 0, 0, 0, 1, false},
    {"hta/rocm_mi250_minitoy.json.gz", 220, 70, 3, 21, 0, 14, 2, 0, 0, 2, 0, 2, 1, 11, 0, 0, -1, -1, true},
    {"hta/sampled_rank0_of128.json.gz", 4855, 2329, 73, 1204, 0, 1154, 40, 10, 0, 0, 0, 2, 5, 1, 0, 0, 0, 128, false},
    {"hta/sampled_rank1_of128.json.gz", 4720, 2302, 65, 1154, 0, 1104, 40, 10, 0, 0, 0, 2, 5, 1, 0, 0, 1, 128, false},
    {"hta/triton_cuLaunchKernel_a100.json.gz", 71, 3, 1, 1, 1, 1, 0, 0, 0, 0, 0, 2, 1, 3, 0, 0, -1, -1, false},
    {"kineto/synthetic_sync_after_fix_h100.json", 75, 4, 0, 1, 0, 1, 0, 0, 2, 0, 0, 1, 1, 3, 0, 0, -1, -1, false},
    {"tracelens/b200_eager_cuda129.json.gz", 24656, 4809, 3, 1151, 221, 768, 161, 0, 0, 3, 1, 1, 1, 9, 15230, 0, 0, 8, false},
    {"tracelens/h100_bert_small_inference.json.gz", 2551, 479, 1, 110, 22, 60, 1, 0, 0, 1, 0, 1, 1, 239, 1385, 0, -1, -1, false},
};
// clang-format on

// Files in those folders that are not Kineto traces, and must be refused.
const char* const kNotTraces[] = {"hta/et_pair_simple_add_pytorch_et.json.gz"};

std::string TracePath(const std::string& rel) { return ::SharedPath("traces/" + rel); }

template <typename Kind>
size_t CountKind(const std::vector<Kind>& kinds, Kind k) {
  return static_cast<size_t>(std::count(kinds.begin(), kinds.end(), k));
}

class KinetoSharedTraceTest : public ::testing::TestWithParam<Expected> {};

TEST_P(KinetoSharedTraceTest, CountsMatchTheFile) {
  EMO_REQUIRE_SHARED();
  const Expected& e = GetParam();
  auto r = ReadTrace(TracePath(e.file));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Trace& t = *r;
  ExpectConsistent(t);
  EXPECT_EQ(t.meta.format, "kineto-json");
  EXPECT_EQ(t.meta.raw_events, e.raw_events);
  EXPECT_EQ(CountKind(t.cpu.kind, CpuKind::kOp), e.ops);
  EXPECT_EQ(CountKind(t.cpu.kind, CpuKind::kAnnotation), e.annotations);
  EXPECT_EQ(CountKind(t.cpu.kind, CpuKind::kRuntime), e.runtime);
  EXPECT_EQ(CountKind(t.cpu.kind, CpuKind::kDriver), e.driver);
  EXPECT_EQ(CountKind(t.gpu.kind, GpuKind::kKernel), e.kernels);
  EXPECT_EQ(CountKind(t.gpu.kind, GpuKind::kMemcpy), e.memcpys);
  EXPECT_EQ(CountKind(t.gpu.kind, GpuKind::kMemset), e.memsets);
  EXPECT_EQ(t.syncs.size(), e.syncs);
  EXPECT_EQ(t.meta.has_cuda_sync, e.syncs > 0);
  EXPECT_EQ(t.gpu_annotations.size(), e.gpu_annotations);
  EXPECT_EQ(t.collectives.size(), e.collectives);
  EXPECT_EQ(t.threads.size(), e.threads);
  EXPECT_EQ(t.streams.size(), e.streams);
  EXPECT_EQ(t.meta.rank, e.rank);
  EXPECT_EQ(t.meta.world_size, e.world_size);
  EXPECT_EQ(t.meta.rocm, e.rocm);
  const Diagnostics& d = t.diagnostics;
  EXPECT_EQ(d.Count(Diag::kUnknownCategory), e.unknown_category);
  EXPECT_EQ(d.Count(Diag::kPythonFunctionIgnored), e.python_function);
  EXPECT_EQ(d.Count(Diag::kSyncUnresolved), e.sync_unresolved);
  EXPECT_EQ(d.Count(Diag::kCollectiveKernels), e.collectives);
  // Real traces are well formed: none of these may fire.
  for (Diag bad : {Diag::kJsonEventSkipped, Diag::kEventMissingField, Diag::kBadTimestamp,
                   Diag::kNegativeDuration, Diag::kGpuOpMissingStream,
                   Diag::kGpuOpMissingCorrelation, Diag::kFlowMismatch}) {
    EXPECT_EQ(d.Count(bad), 0u) << SpecOf(bad).name;
  }
  // Every time is absolute epoch ns (2020..2027), whatever the file's timestamp style.
  const TimeNs kYear2020 = 1'577'836'800'000'000'000, kYear2027 = 1'798'761'600'000'000'000;
  ASSERT_GT(t.gpu.size(), 0u);
  EXPECT_GT(t.gpu.start.front(), kYear2020);
  EXPECT_LT(t.gpu.end.back(), kYear2027);
  EXPECT_GT(t.cpu.start.front(), kYear2020);
}

std::string TestName(const ::testing::TestParamInfo<Expected>& info) {
  std::string name = info.param.file;
  std::replace_if(
      name.begin(), name.end(), [](char c) { return !std::isalnum(c); }, '_');
  return name;
}

INSTANTIATE_TEST_SUITE_P(All, KinetoSharedTraceTest, ::testing::ValuesIn(kTraces), TestName);

// Every trace-looking file of the shared folders is in the table (or known not to be one).
TEST(KinetoSharedTracesTest, TableCoversEverySharedTrace) {
  EMO_REQUIRE_SHARED();
  std::set<std::string> known;
  for (const Expected& e : kTraces) known.insert(e.file);
  for (const char* f : kNotTraces) known.insert(f);
  const std::filesystem::path root = TracePath("");
  size_t seen = 0;
  for (const char* dir : {"h200", "hta", "kineto", "tracelens"}) {
    for (const auto& entry : std::filesystem::recursive_directory_iterator(root / dir)) {
      const std::string name = entry.path().filename().string();
      const bool trace_like =
          name.ends_with(".json.gz") || (std::string(dir) == "kineto" && name.ends_with(".json"));
      if (!entry.is_regular_file() || !trace_like) continue;
      ++seen;
      const std::string rel = std::filesystem::relative(entry.path(), root).string();
      EXPECT_TRUE(known.count(rel)) << rel << " is not in the expectations table";
    }
  }
  EXPECT_EQ(seen, known.size());
}

TEST(KinetoSharedTracesTest, NonTracesAreRefusedClearly) {
  EMO_REQUIRE_SHARED();
  for (const char* f : kNotTraces) {
    auto r = ReadTrace(TracePath(f));
    ASSERT_FALSE(r.ok()) << f;
    EXPECT_EQ(r.status().code(), StatusCode::kParseError);
    EXPECT_NE(r.status().message().find(f), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("not a PyTorch-profiler/Kineto trace"), std::string::npos)
        << r.status().message();
  }
  auto measured = ReadTrace(TracePath("h200/measured.json"));
  EXPECT_FALSE(measured.ok());
}

// V100 trace of April 2024: absolute epoch µs with 3 decimals (19 significant digits).
TEST(KinetoSharedTracesTest, NanosecondDigitsSurviveInAbsoluteMicroseconds) {
  EMO_REQUIRE_SHARED();
  auto r = ReadTrace(TracePath("hta/ns_resolution_v100.json.gz"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->meta.base_time_ns, 0);
  // Written as "ts": 1712195495505582.988 (a CatArrayBatchedCopy kernel).
  EXPECT_EQ(r->gpu.start.front(), 1'712'195'495'505'582'988);
  EXPECT_EQ(*std::max_element(r->gpu.end.begin(), r->gpu.end.end()), 1'712'195'495'985'612'167);
  EXPECT_EQ(r->cpu.start.front(), 1'712'195'495'502'094'565);
  // 6084 of the 6095 GPU ops start at a time that is not a whole microsecond.
  const auto with_ns = std::count_if(r->gpu.start.begin(), r->gpu.start.end(),
                                     [](TimeNs t) { return t % 1000 != 0; });
  EXPECT_EQ(with_ns, 6084);
}

// Relative µs + baseTimeNanoseconds, the base written after traceEvents (2024 A100 trace).
TEST(KinetoSharedTracesTest, BaseTimeAfterTraceEventsIsApplied) {
  EMO_REQUIRE_SHARED();
  auto r = ReadTrace(TracePath("hta/nccl_allreduce_rank0_of2_a100.json.gz"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->meta.base_time_ns, 1'711'964'646'000'000'000);
  // "ts": 4458676422880.181 + base.
  EXPECT_EQ(r->gpu.start.front(), 1'716'423'322'422'880'181);
  EXPECT_EQ(*std::max_element(r->gpu.end.begin(), r->gpu.end.end()), 1'716'423'323'083'431'186);
  EXPECT_EQ(r->cpu.start.front(), 1'716'423'322'416'788'066);
}

TEST(KinetoSharedTracesTest, IntegerMicrosecondsAndOwnH200Trace) {
  EMO_REQUIRE_SHARED();
  auto sampled = ReadTrace(TracePath("hta/sampled_rank0_of128.json.gz"));
  ASSERT_TRUE(sampled.ok());
  EXPECT_EQ(sampled->gpu.start.front(), 1'682'725'898'082'228'000);
  EXPECT_EQ(sampled->cpu.start.front(), 1'682'725'898'079'292'000);

  auto gpt = ReadTrace(TracePath("h200/gpt_train.json.gz"));
  ASSERT_TRUE(gpt.ok());
  EXPECT_EQ(gpt->gpu.start.front(), 1'795'974'179'266'639'604);
  EXPECT_EQ(*std::max_element(gpt->gpu.end.begin(), gpt->gpu.end.end()), 1'795'974'179'506'286'217);
  EXPECT_EQ(gpt->cpu.start.front(), 1'795'974'179'266'142'480);
  EXPECT_EQ(gpt->meta.device_names, std::vector<std::string>{"NVIDIA H200"});
  EXPECT_EQ(gpt->meta.cuda_runtime_version, 13000);
  EXPECT_EQ(gpt->meta.cuda_driver_version, 13000);
  EXPECT_EQ(gpt->meta.cupti_version, 130001);
  EXPECT_TRUE(gpt->meta.record_shapes);
  EXPECT_FALSE(gpt->meta.with_stack);
  std::set<std::string> names;
  for (const ThreadInfo& th : gpt->threads) names.insert(th.name);
  EXPECT_EQ(names, (std::set<std::string>{"thread 420 (python3)", "thread 448 (pt_autograd_0)"}));
  const Trace& t = *gpt;
  // The lone cuda_sync of this trace.
  ASSERT_EQ(t.syncs.size(), 1u);
}

TEST(KinetoSharedTracesTest, RecordShapesGiveMatrixWorkTheH200CanDo) {
  // The work OperatorWork derives from each operator's shapes, over the time of the kernels that
  // carry its External id, is a rate the H200 can reach (dense bf16 peak 989.4 TFLOP/s, NVIDIA's
  // data sheet) and, on these transformer loops, most of it (their large GEMMs run at
  // 700-840 TFLOP/s: bench/research/flop_rate_power.py). A misread shape shows as a rate far off.
  // The same loops without record_shapes carry no work.
  EMO_REQUIRE_SHARED();
  for (const char* name : {"h200/gpt_train.json.gz", "h200/ddp_gpt_rank0.json.gz", "h200/pp_gpt_rank1.json.gz",
                           "h200/overhead/gpt_train_sync_shapes.json.gz"}) {
    SCOPED_TRACE(name);
    auto r = ReadTrace(TracePath(name));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_GT(r->op_work.size(), 100u);
    std::map<int64_t, double> kernel_s;
    for (size_t i = 0; i < r->gpu.size(); ++i) {
      if (r->gpu.kind[i] == GpuKind::kKernel && r->op_work.contains(r->gpu.external_id[i])) {
        kernel_s[r->gpu.external_id[i]] += static_cast<double>(r->gpu.end[i] - r->gpu.start[i]) * 1e-9;
      }
    }
    ASSERT_GT(kernel_s.size(), 100u);
    double fastest = 0;
    for (const auto& [id, s] : kernel_s) {
      const double rate = r->op_work.at(id).flops / s;
      EXPECT_LE(rate, 989.4e12) << "External id " << id;
      fastest = std::max(fastest, rate);
    }
    EXPECT_GT(fastest, 600e12);
  }
  auto light = ReadTrace(TracePath("h200/overhead/gpt_train_sync_light.json.gz"));
  ASSERT_TRUE(light.ok()) << light.status().ToString();
  EXPECT_TRUE(light->op_work.empty());
}

TEST(KinetoSharedTracesTest, NewestKinetoMetadataAndCollectives) {
  EMO_REQUIRE_SHARED();
  auto r = ReadTrace(TracePath("tracelens/b200_eager_cuda129.json.gz"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->meta.device_names.size(), 8u);
  EXPECT_EQ(r->meta.device_names[0], "NVIDIA B200");
  EXPECT_EQ(r->meta.cuda_runtime_version, 12090);
  EXPECT_EQ(r->meta.cupti_version, 28);
  EXPECT_TRUE(r->meta.with_stack);
  EXPECT_EQ(r->meta.backend, "nccl");
  ASSERT_EQ(r->collectives.size(), 1u);
  const CollectiveInfo& c = r->collectives[0];
  EXPECT_EQ(c.name, "_allgather_base");
  EXPECT_EQ(c.in_nelems, 25136);
  EXPECT_EQ(c.out_nelems, 201088);
  EXPECT_EQ(c.group_size, 8);
  EXPECT_EQ(c.dtype, "BFloat16");
  EXPECT_EQ(c.process_group, "3");
  EXPECT_EQ(c.pg_ranks, "[0, 1, 2, 3, 4, 5, 6, 7]");

  auto pp = ReadTrace(TracePath("h200/pp_gpt_rank1.json.gz"));
  ASSERT_TRUE(pp.ok());
  int sends = 0, recvs = 0;
  for (const CollectiveInfo& ci : pp->collectives) {
    if (ci.name == "send") sends += ci.dst_rank == 0;
    if (ci.name == "recv") recvs += ci.src_rank == 0;
  }
  EXPECT_EQ(sends, 12);
  EXPECT_EQ(recvs, 12);
}

// --- param/dlrm_kineto_8ranks_v100.tar.gz: 8 ranks in one (ustar) tarball. ---

struct TarMember {
  std::string name;
  std::string data;
};

// The regular files of an uncompressed ustar archive (what the test data uses); enough of
// the format for a test, no dependency needed.
std::vector<TarMember> ReadTar(const std::string& tar) {
  std::vector<TarMember> out;
  size_t pos = 0;
  while (pos + 512 <= tar.size()) {
    const char* h = tar.data() + pos;
    if (h[0] == '\0') break;  // end-of-archive block
    std::string name(h, strnlen(h, 100));
    const std::string prefix(h + 345, strnlen(h + 345, 155));
    if (!prefix.empty()) name = prefix + "/" + name;
    const size_t size = std::strtoull(std::string(h + 124, 12).c_str(), nullptr, 8);
    const char type = h[156];
    pos += 512;
    if ((type == '0' || type == '\0') && pos + size <= tar.size()) {
      out.push_back({name, tar.substr(pos, size)});
    }
    pos += (size + 511) / 512 * 512;
  }
  return out;
}

TEST(KinetoSharedTracesTest, EightRankDlrmTarball) {
  EMO_REQUIRE_SHARED();
  auto tar = ReadFileMaybeGzip(TracePath("param/dlrm_kineto_8ranks_v100.tar.gz"));
  ASSERT_TRUE(tar.ok()) << tar.status().ToString();
  std::vector<TarMember> members = ReadTar(*tar);
  std::sort(members.begin(), members.end(),
            [](const TarMember& a, const TarMember& b) { return a.name < b.name; });
  ASSERT_EQ(members.size(), 8u);
  // Per rank: kernels, runtime calls, memsets, traceEvents (measured with Python).
  const size_t kKernels[8] = {245, 310, 246, 315, 251, 245, 246, 246};
  const size_t kRuntime[8] = {525, 527, 513, 541, 523, 505, 515, 504};
  const size_t kMemsets[8] = {0, 0, 0, 6, 6, 0, 0, 0};
  const int64_t kRaw[8] = {3290, 3424, 3268, 3474, 3310, 3250, 3272, 3250};
  for (int rank = 0; rank < 8; ++rank) {
    const TarMember& m = members[rank];
    SCOPED_TRACE(m.name);
    ASSERT_NE(m.name.find("worker" + std::to_string(rank) + "_"), std::string::npos);
    const Reader& k = testing::KinetoReader();
    ASSERT_TRUE(k.Sniff(m.data.substr(0, 4096)));
    auto r = k.Read("dlrm_kineto_8ranks_v100.tar.gz:" + m.name, m.data);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ExpectConsistent(*r);
    EXPECT_EQ(r->meta.rank, rank);
    EXPECT_EQ(r->meta.world_size, 8);
    EXPECT_EQ(r->meta.raw_events, kRaw[rank]);
    EXPECT_EQ(CountKind(r->cpu.kind, CpuKind::kOp), 1633u);
    EXPECT_EQ(CountKind(r->cpu.kind, CpuKind::kAnnotation), 40u);
    EXPECT_EQ(CountKind(r->cpu.kind, CpuKind::kRuntime), kRuntime[rank]);
    EXPECT_EQ(CountKind(r->gpu.kind, GpuKind::kKernel), kKernels[rank]);
    EXPECT_EQ(CountKind(r->gpu.kind, GpuKind::kMemcpy), 16u);
    EXPECT_EQ(CountKind(r->gpu.kind, GpuKind::kMemset), kMemsets[rank]);
    EXPECT_EQ(r->streams.size(), 4u);
    EXPECT_EQ(r->threads.size(), 2u);
    EXPECT_EQ(r->diagnostics.Count(Diag::kFlowMismatch), 0u);
  }
}

}  // namespace
}  // namespace emo::trace
