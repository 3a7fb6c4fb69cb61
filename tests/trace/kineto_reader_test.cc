// Unit tests of the Kineto JSON reader and the reader registry, on small hand-written JSON.
#include <gtest/gtest.h>

#include <algorithm>
#include <zlib.h>

#include <cstdio>
#include <string>

#include "emo/base/diagnostics.h"
#include "emo/trace/reader.h"
#include "kineto_test_util.h"

namespace emo::trace {
namespace {

using testing::DataPath;
using testing::ExpectConsistent;
using testing::FindRow;
using testing::ReadJson;
using testing::Slurp;
using testing::TempFile;

constexpr int64_t kBase = 1'790'857'026'000'000'000;

// One complete event inside a traceEvents array of an otherwise empty trace.
std::string OneEvent(const std::string& event, const std::string& top = "") {
  return "{" + top + "\"traceEvents\": [" + event + "]}";
}

TEST(KinetoReaderTest, MiniTraceTablesAndMeta) {
  auto r = ReadJson(Slurp(DataPath("kineto_mini.json")), "mini.json");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Trace& t = *r;
  ExpectConsistent(t);

  EXPECT_EQ(t.meta.format, "kineto-json");
  EXPECT_EQ(t.meta.source_path, "mini.json");
  EXPECT_EQ(t.meta.raw_events, 28);
  EXPECT_EQ(t.meta.rank, 1);
  EXPECT_EQ(t.meta.world_size, 2);
  EXPECT_EQ(t.meta.backend, "nccl");
  EXPECT_EQ(t.meta.device_names, (std::vector<std::string>{"NVIDIA H200", "NVIDIA H200"}));
  EXPECT_EQ(t.meta.cuda_runtime_version, 13000);
  EXPECT_EQ(t.meta.cuda_driver_version, 13000);
  EXPECT_EQ(t.meta.cupti_version, 130001);
  EXPECT_TRUE(t.meta.record_shapes);
  EXPECT_FALSE(t.meta.with_stack);
  EXPECT_TRUE(t.meta.has_cuda_sync);
  EXPECT_FALSE(t.meta.rocm);
  // baseTimeNanoseconds comes after traceEvents in this file and is still applied.
  EXPECT_EQ(t.meta.base_time_ns, kBase);

  ASSERT_EQ(t.cpu.size(), 5u);
  EXPECT_EQ(t.Name(t.cpu.name[0]), "ProfilerStep#1");  // sorted by start
  EXPECT_EQ(t.cpu.kind[0], CpuKind::kAnnotation);
  const int mm = FindRow(t, t.cpu, "aten::mm");
  ASSERT_GE(mm, 0);
  EXPECT_EQ(t.cpu.kind[mm], CpuKind::kOp);
  EXPECT_EQ(t.cpu.start[mm], kBase + 11'250);
  EXPECT_EQ(t.cpu.end[mm], kBase + 31'750);
  EXPECT_EQ(t.cpu.external_id[mm], 2);
  EXPECT_EQ(t.cpu.correlation[mm], -1);
  EXPECT_EQ(t.cpu.cbid[mm], -1);
  const int launch = FindRow(t, t.cpu, "cudaLaunchKernel");
  ASSERT_GE(launch, 0);
  EXPECT_EQ(t.cpu.kind[launch], CpuKind::kRuntime);
  EXPECT_EQ(t.cpu.correlation[launch], 501);
  EXPECT_EQ(t.cpu.cbid[launch], 211);
  EXPECT_EQ(t.cpu.external_id[launch], 2);
  const int drv = FindRow(t, t.cpu, "cuLaunchKernelEx");
  ASSERT_GE(drv, 0);
  EXPECT_EQ(t.cpu.kind[drv], CpuKind::kDriver);
  EXPECT_EQ(t.cpu.cbid[drv], 652);
  EXPECT_EQ(t.cpu.external_id[drv], -1);

  ASSERT_EQ(t.threads.size(), 2u);
  const ThreadInfo& th_main = t.threads[t.cpu.thread[launch].value()];
  EXPECT_EQ(th_main.pid, 100);
  EXPECT_EQ(th_main.tid, 100);
  EXPECT_EQ(th_main.name, "thread 100 (python3)");
  // Named twice: the first name is kept.
  EXPECT_EQ(t.threads[t.cpu.thread[drv].value()].name, "thread 101 (pt_autograd_0)");

  ASSERT_EQ(t.gpu.size(), 5u);
  const int gemm = FindRow(t, t.gpu, "void gemm_kernel<float>(float const*, float*)");
  ASSERT_EQ(gemm, 0);
  EXPECT_EQ(t.gpu.kind[gemm], GpuKind::kKernel);
  EXPECT_EQ(t.gpu.start[gemm], kBase + 20'001);
  EXPECT_EQ(t.gpu.end[gemm], kBase + 23'334);
  EXPECT_EQ(t.gpu.correlation[gemm], 501);
  EXPECT_EQ(t.gpu.external_id[gemm], 2);
  const StreamInfo& s7 = t.streams[t.gpu.stream[gemm].value()];
  EXPECT_EQ(s7.device, 0);
  EXPECT_EQ(s7.stream, 7);
  const LaunchConfig& lc = t.gpu.launch[gemm];
  EXPECT_EQ(lc.grid[0], 64);
  EXPECT_EQ(lc.grid[1], 2);
  EXPECT_EQ(lc.grid[2], 1);
  EXPECT_EQ(lc.block[0], 256);
  EXPECT_EQ(lc.registers_per_thread, 128);
  EXPECT_EQ(lc.shared_memory, 49152);
  EXPECT_EQ(t.gpu.bytes[gemm], 0);
  EXPECT_EQ(t.gpu.graph_id[gemm], -1);
  EXPECT_FALSE(t.gpu.collective[gemm].valid());

  const int d2h = FindRow(t, t.gpu, "Memcpy DtoH (Device -> Pageable)");
  ASSERT_GE(d2h, 0);
  EXPECT_EQ(t.gpu.kind[d2h], GpuKind::kMemcpy);
  EXPECT_EQ(t.gpu.bytes[d2h], 4096);
  EXPECT_EQ(t.gpu.launch[d2h].grid[0], 0);
  const int memset = FindRow(t, t.gpu, "Memset (Device)");
  ASSERT_GE(memset, 0);
  EXPECT_EQ(t.gpu.kind[memset], GpuKind::kMemset);
  EXPECT_EQ(t.gpu.bytes[memset], 64);
  // A P2P copy names its device inDevice.
  const int p2p = FindRow(t, t.gpu, "Memcpy PtoP (Device -> Device)");
  ASSERT_GE(p2p, 0);
  EXPECT_EQ(t.streams[t.gpu.stream[p2p].value()].device, 1);
  EXPECT_EQ(t.streams[t.gpu.stream[p2p].value()].stream, 9);
  EXPECT_EQ(t.gpu.bytes[p2p], 1048576);

  const int nccl = FindRow(t, t.gpu, "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)");
  ASSERT_GE(nccl, 0);
  ASSERT_TRUE(t.gpu.collective[nccl].valid());
  ASSERT_EQ(t.collectives.size(), 1u);
  const CollectiveInfo& c = t.collectives[t.gpu.collective[nccl].value()];
  EXPECT_EQ(c.name, "send");
  EXPECT_EQ(c.process_group, "0");
  EXPECT_EQ(c.pg_ranks, "[0, 1]");
  EXPECT_EQ(c.group_size, 2);
  EXPECT_EQ(c.seq, 7);
  EXPECT_EQ(c.in_nelems, 1024);
  EXPECT_EQ(c.out_nelems, 1024);
  EXPECT_EQ(c.dtype, "Float");
  EXPECT_EQ(c.dst_rank, 0);
  EXPECT_EQ(c.src_rank, -1);
  EXPECT_EQ(t.streams.size(), 3u);  // (0,7) (0,17) (1,9)

  ASSERT_EQ(t.syncs.size(), 3u);
  EXPECT_EQ(t.syncs.kind[0], SyncKind::kStreamWaitEvent);
  EXPECT_EQ(t.syncs.device[0], 0);
  EXPECT_EQ(t.syncs.stream[0], 17);
  EXPECT_EQ(t.syncs.correlation[0], 506);
  EXPECT_EQ(t.syncs.wait_on_stream[0], -1);
  EXPECT_EQ(t.syncs.wait_on_record_corr[0], -1);
  EXPECT_EQ(t.syncs.event_id[0], 6);
  EXPECT_EQ(t.syncs.start[0], kBase + 33'000);
  EXPECT_EQ(t.syncs.kind[1], SyncKind::kEventSync);
  EXPECT_EQ(t.syncs.stream[1], -1);
  EXPECT_EQ(t.syncs.wait_on_stream[1], 7);
  EXPECT_EQ(t.syncs.wait_on_record_corr[1], 501);
  EXPECT_EQ(t.syncs.event_id[1], 2);
  EXPECT_EQ(t.syncs.kind[2], SyncKind::kContextSync);
  EXPECT_EQ(t.syncs.event_id[2], -1);

  ASSERT_EQ(t.gpu_annotations.size(), 1u);
  EXPECT_EQ(t.Name(t.gpu_annotations[0].name), "ProfilerStep#1");
  EXPECT_EQ(t.gpu_annotations[0].start, kBase + 19'999);
  EXPECT_EQ(t.gpu_annotations[0].end, kBase + 50'001);
  EXPECT_EQ(t.gpu_annotations[0].stream, t.gpu.stream[gemm]);

  // cuda_event record (Kineto >= 2025-11): event 2 recorded on stream 7 by correlation 509.
  ASSERT_EQ(t.cuda_events.size(), 1u);
  EXPECT_EQ(t.cuda_events.event_id[0], 2);
  EXPECT_EQ(t.cuda_events.stream[0], 7);
  EXPECT_EQ(t.cuda_events.correlation[0], 509);
  EXPECT_EQ(t.cuda_events.device[0], 0);

  const Diagnostics& d = t.diagnostics;
  EXPECT_EQ(d.Count(Diag::kPythonFunctionIgnored), 1u);
  EXPECT_EQ(d.Count(Diag::kCudaEventIgnored), 0u);
  // overhead, fwdbwd, cpu_instant_event, Trace span, 2 untyped instant markers.
  EXPECT_EQ(d.Count(Diag::kUnknownCategory), 6u);
  EXPECT_EQ(d.Count(Diag::kSyncUnresolved), 1u);
  EXPECT_EQ(d.Count(Diag::kCollectiveKernels), 1u);
  EXPECT_EQ(d.Count(Diag::kFlowMismatch), 0u);
  EXPECT_EQ(d.Count(Diag::kJsonEventSkipped), 0u);
  EXPECT_EQ(d.Count(Diag::kEventMissingField), 0u);
  EXPECT_EQ(d.Count(Diag::kGpuOpMissingCorrelation), 0u);
}

TEST(KinetoReaderTest, RecordShapesGiveTheWorkOfMatrixProductsByExternalId) {
  // Args as PyTorch 2.11 writes them with record_shapes; the addmm's work is kept under its
  // External id (its kernel carries the same id), an add's shapes are not read.
  auto r = ReadJson(R"js({"traceEvents": [
    {"ph":"X","cat":"cpu_op","name":"aten::addmm","pid":1,"tid":1,"ts":10,"dur":5,
     "args":{"External id":18,"Record function id":0,"Concrete Inputs":["","","","1","1"],
       "Input type":["c10::BFloat16","c10::BFloat16","c10::BFloat16","Scalar","Scalar"],
       "Input Strides":[[1],[1024,1],[1,1024],[],[]],
       "Input Dims":[[3072],[4096,1024],[1024,3072],[],[]],"Ev Idx":17}},
    {"ph":"X","cat":"cpu_op","name":"aten::cudnn_convolution","pid":1,"tid":1,"ts":20,"dur":5,
     "args":{"External id":6,"Concrete Inputs":["","","[3, 3]","[2, 2]","[1, 1]","1","False","False","True"],
       "Input type":["float","float","ScalarList"],"Input Dims":[[32,3,128,128],[64,3,7,7],[]]}},
    {"ph":"X","cat":"cpu_op","name":"aten::cat","pid":1,"tid":1,"ts":30,"dur":5,
     "args":{"External id":7,"Input Dims":[[[2,3],[2,3]],[]],"Input type":["TensorList","Scalar"]}},
    {"ph":"X","cat":"cpu_op","name":"aten::bmm","pid":1,"tid":1,"ts":40,"dur":5,
     "args":{"External id":8,"Input Dims":[[[2,3],[2,3]],[4,5,6]],"Input type":["float","float"]}},
    {"ph":"X","cat":"cpu_op","name":"aten::add","pid":1,"tid":1,"ts":50,"dur":5,
     "args":{"External id":9,"Input Dims":[[4,4],[4,4]],"Input type":["float","float"]}},
    {"ph":"X","cat":"kernel","name":"nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_bias_TNT","pid":0,"tid":7,
     "ts":12,"dur":3,"args":{"device":0,"stream":7,"correlation":1,"External id":18}}
  ]})js");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->cpu.size(), 5u);
  ASSERT_EQ(r->op_work.size(), 2u);  // the addmm and the convolution; cat, the nested bmm and add give none
  ASSERT_TRUE(r->op_work.contains(18));
  EXPECT_DOUBLE_EQ(r->op_work.at(18).flops, 2.0 * 4096 * 1024 * 3072);
  EXPECT_EQ(r->op_work.at(18).precision, OpPrecision::k16Bit);
  ASSERT_TRUE(r->op_work.contains(6));
  EXPECT_DOUBLE_EQ(r->op_work.at(6).flops, 2.0 * 32 * 64 * 3 * (64 * 7) * (64 * 7));
  EXPECT_EQ(r->op_work.at(6).precision, OpPrecision::kFp32);
  ASSERT_EQ(r->gpu.size(), 1u);
  EXPECT_EQ(r->gpu.external_id[0], 18);
}

TEST(KinetoReaderTest, ShapesBeforeTheExternalIdAndTracesWithoutShapes) {
  // Key order is free: the shapes may come first. Without record_shapes there is no work.
  auto r = ReadJson(OneEvent(R"js({"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":1,"dur":2,
      "args":{"Input Dims":[[32,100],[100,512]],"Input type":["float","float"],"External id":3}})js"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->op_work.size(), 1u);
  EXPECT_DOUBLE_EQ(r->op_work.at(3).flops, 2.0 * 32 * 100 * 512);
  auto light = ReadJson(OneEvent(R"js({"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":1,"dur":2,
      "args":{"External id":3,"Record function id":0}})js"));
  ASSERT_TRUE(light.ok()) << light.status().ToString();
  EXPECT_TRUE(light->op_work.empty());
}

TEST(KinetoReaderTest, IntegerMicroseconds) {
  auto r = ReadJson(OneEvent(R"js({"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,
      "ts":1694039968956739,"dur":5,"args":{"device":0,"stream":7,"correlation":1}})js"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->gpu.size(), 1u);
  EXPECT_EQ(r->gpu.start[0], 1'694'039'968'956'739'000);
  EXPECT_EQ(r->gpu.end[0], 1'694'039'968'956'744'000);
  EXPECT_EQ(r->meta.base_time_ns, 0);
}

TEST(KinetoReaderTest, AbsoluteMicrosWithThreeDecimalsKeepEveryNanosecond) {
  // 19 significant digits (Kineto, April 2024): as a double this would be off by ~100 ns.
  auto r = ReadJson(OneEvent(R"js({"ph":"X","cat":"cpu_op","name":"aten::add","pid":1102,
      "tid":1262,"ts":1712195495519689.047,"dur":63.813})js"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->cpu.size(), 1u);
  EXPECT_EQ(r->cpu.start[0], 1'712'195'495'519'689'047);
  EXPECT_EQ(r->cpu.end[0], 1'712'195'495'519'752'860);
}

TEST(KinetoReaderTest, RelativeMicrosAddBaseWhereverTheKeyIs) {
  const std::string event = R"js({"ph":"X","cat":"cpu_op","name":"op","pid":1,"tid":1,
      "ts":4458676522690.655,"dur":156.777})js";
  const int64_t expected = 1'711'964'646'000'000'000 + 4'458'676'522'690'655;
  auto before = ReadJson(OneEvent(event, R"js("baseTimeNanoseconds": 1711964646000000000, )js"));
  auto after = ReadJson("{\"traceEvents\": [" + event +
                        "], \"displayTimeUnit\": \"ms\", \"baseTimeNanoseconds\": "
                        "1711964646000000000}");
  for (const auto* r : {&before, &after}) {
    ASSERT_TRUE(r->ok()) << r->status().ToString();
    ASSERT_EQ((*r)->cpu.size(), 1u);
    EXPECT_EQ((*r)->cpu.start[0], expected);
    EXPECT_EQ((*r)->cpu.end[0], expected + 156'777);
    EXPECT_EQ((*r)->meta.base_time_ns, 1'711'964'646'000'000'000);
  }
}

TEST(KinetoReaderTest, AbsoluteTimesAreNotShiftedByABaseKey) {
  // A base below the absolute timestamps cannot be their origin: times stay as written.
  auto r = ReadJson(OneEvent(R"js({"ph":"X","cat":"cpu_op","name":"op","pid":1,"tid":1,
      "ts":1712195495519689.047,"dur":1})js",
                             R"js("baseTimeNanoseconds": 1711964646000000000, )js"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->cpu.start[0], 1'712'195'495'519'689'047);
  EXPECT_EQ(r->meta.base_time_ns, 0);
}

TEST(KinetoReaderTest, StringPidsAndTidsAreTolerated) {
  auto r = ReadJson(R"js({"traceEvents": [
    {"ph":"X","cat":"cpu_op","name":"a","pid":"Spans","tid":"PyTorch Profiler","ts":1,"dur":1},
    {"ph":"X","cat":"cpu_op","name":"b","pid":"Spans","tid":"PyTorch Profiler","ts":2,"dur":1},
    {"ph":"X","cat":"cpu_op","name":"c","pid":"4242","tid":"17","ts":3,"dur":1},
    {"ph":"X","cat":"cpu_op","name":"d","pid":"Spans","tid":"other","ts":4,"dur":1},
    {"ph":"X","cat":"kernel","name":"k","pid":"GPU 0","tid":"stream 7","ts":5,"dur":1,
     "args":{"device":0,"stream":7,"correlation":9}},
    {"name":"thread_name","ph":"M","pid":"Spans","tid":"other","args":{"name":"labelled"}}
  ]})js");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectConsistent(*r);
  ASSERT_EQ(r->cpu.size(), 4u);
  ASSERT_EQ(r->threads.size(), 3u);
  EXPECT_EQ(r->cpu.thread[0], r->cpu.thread[1]);  // same label, same thread
  const ThreadInfo& numeric = r->threads[r->cpu.thread[2].value()];
  EXPECT_EQ(numeric.pid, 4242);
  EXPECT_EQ(numeric.tid, 17);
  const ThreadInfo& spans = r->threads[r->cpu.thread[0].value()];
  EXPECT_LT(spans.pid, -1);  // labels get ids below Kineto's own -1
  EXPECT_EQ(r->threads[r->cpu.thread[3].value()].name, "labelled");
  ASSERT_EQ(r->gpu.size(), 1u);  // the GPU op is placed by args, whatever pid/tid say
  EXPECT_EQ(r->streams[r->gpu.stream[0].value()].stream, 7);
}

TEST(KinetoReaderTest, MalformedEventsAreCountedNotFatal) {
  auto r = ReadJson(R"js({"traceEvents": [
    42, "text", [1, 2], null,
    {"cat":"cpu_op","name":"no ph","pid":1,"tid":1,"ts":1,"dur":1},
    {"ph":"X","cat":"cpu_op","name":"no ts","pid":1,"tid":1,"dur":1},
    {"ph":"X","cat":"cpu_op","name":"no dur","pid":1,"tid":1,"ts":1},
    {"ph":"X","cat":"cpu_op","pid":1,"tid":1,"ts":1,"dur":1},
    {"ph":"X","cat":"cpu_op","name":7,"pid":1,"tid":1,"ts":1,"dur":1},
    {"ph":"X","cat":"cpu_op","name":"no pid","tid":1,"ts":1,"dur":1},
    {"ph":"X","cat":"cpu_op","name":"bad ts","pid":1,"tid":1,"ts":"abc","dur":1},
    {"ph":"X","cat":"cpu_op","name":"null ts","pid":1,"tid":1,"ts":null,"dur":1},
    {"ph":"X","cat":"cpu_op","name":"object dur","pid":1,"tid":1,"ts":1,"dur":{"a":1}},
    {"ph":"X","cat":"cpu_op","name":"negative","pid":1,"tid":1,"ts":10,"dur":-5},
    {"ph":"X","cat":"kernel","name":"no stream","pid":0,"tid":7,"ts":1,"dur":1,
     "args":{"device":0,"correlation":1}},
    {"ph":"X","cat":"kernel","name":"no device","pid":0,"tid":7,"ts":1,"dur":1,
     "args":{"stream":7,"correlation":1}},
    {"ph":"X","cat":"kernel","name":"no args","pid":0,"tid":7,"ts":1,"dur":1},
    {"ph":"X","cat":"kernel","name":"no correlation","pid":0,"tid":7,"ts":2,"dur":1,
     "args":{"device":0,"stream":7}},
    {"ph":"X","cat":"cuda_sync","name":"Stream Sync","pid":0,"tid":7,"ts":1,"dur":1,
     "args":{"stream":7}},
    {"ph":"X","cat":"kernel","name":"args not object","pid":0,"tid":7,"ts":1,"dur":1,"args":[1]}
  ]})js");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectConsistent(*r);
  const Diagnostics& d = r->diagnostics;
  EXPECT_EQ(r->meta.raw_events, 20);
  EXPECT_EQ(d.Count(Diag::kJsonEventSkipped), 5u);   // 4 non-objects + no ph
  EXPECT_EQ(d.Count(Diag::kEventMissingField), 5u);  // ts, dur, name x2, pid
  EXPECT_EQ(d.Count(Diag::kBadTimestamp), 3u);
  EXPECT_EQ(d.Count(Diag::kNegativeDuration), 1u);
  EXPECT_EQ(d.Count(Diag::kGpuOpMissingStream), 5u);  // incl. the sync without a device
  EXPECT_EQ(d.Count(Diag::kGpuOpMissingCorrelation), 1u);
  ASSERT_EQ(r->cpu.size(), 1u);
  EXPECT_EQ(r->Name(r->cpu.name[0]), "negative");
  EXPECT_EQ(r->cpu.start[0], r->cpu.end[0]);  // clamped to 0
  ASSERT_EQ(r->gpu.size(), 1u);
  EXPECT_EQ(r->gpu.correlation[0], -1);
}

TEST(KinetoReaderTest, EscapedNamesAreUnescapedOnce) {
  auto r = ReadJson(OneEvent(R"js({"ph":"X","cat":"cpu_op","name":"say \"caf\u00e9\"\n","pid":1,
      "tid":1,"ts":1,"dur":1})js"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->Name(r->cpu.name[0]), "say \"caf\xC3\xA9\"\n");
}

TEST(KinetoReaderTest, NamesAreInterned) {
  auto r = ReadJson(R"js({"traceEvents": [
    {"ph":"X","cat":"cpu_op","name":"aten::add","pid":1,"tid":1,"ts":1,"dur":1},
    {"ph":"X","cat":"cpu_op","name":"aten::add","pid":1,"tid":1,"ts":3,"dur":1}]})js");
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->cpu.size(), 2u);
  EXPECT_EQ(r->cpu.name[0], r->cpu.name[1]);
}

TEST(KinetoReaderTest, LegacyCategoriesMapToCurrentOnes) {
  // 2021 tb_plugin traces: Operator/Runtime/Kernel/Memcpy/Memset, "external id", async flows.
  auto r = ReadJson(R"js({"schemaVersion": 1, "traceEvents": [
    {"ph":"X","cat":"Operator","name":"aten::conv2d","pid":5,"tid":5,"ts":100,"dur":50,
     "args":{"External id":3}},
    {"ph":"X","cat":"Runtime","name":"cudaLaunchKernel","pid":5,"tid":5,"ts":110,"dur":5,
     "args":{"correlation":77,"external id":3,"cbid":211}},
    {"ph":"s","id":77,"pid":5,"tid":5,"ts":110,"cat":"async","name":"launch"},
    {"ph":"X","cat":"Kernel","name":"conv","pid":0,"tid":7,"ts":120,"dur":30,
     "args":{"queued":0,"device":0,"context":1,"stream":7,"correlation":77,"external id":3}},
    {"ph":"f","id":77,"pid":0,"tid":7,"ts":120,"cat":"async","name":"launch","bp":"e"},
    {"ph":"X","cat":"Memcpy","name":"Memcpy HtoD (Pageable -> Device)","pid":0,"tid":7,"ts":160,
     "dur":2,"args":{"device":0,"stream":7,"correlation":78,"bytes":256}},
    {"ph":"X","cat":"Memset","name":"Memset (Device)","pid":0,"tid":7,"ts":170,"dur":1,
     "args":{"device":0,"stream":7,"correlation":79,"bytes":8}},
    {"ph":"f","id":80,"pid":5,"tid":5,"ts":200,"cat":"async_cpu_to_gpu","name":"async_gpu","bp":"e"}
  ]})js");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->cpu.size(), 2u);
  EXPECT_EQ(r->cpu.kind[0], CpuKind::kOp);
  EXPECT_EQ(r->cpu.kind[1], CpuKind::kRuntime);
  EXPECT_EQ(r->cpu.external_id[1], 3);
  ASSERT_EQ(r->gpu.size(), 3u);
  EXPECT_EQ(r->gpu.kind[0], GpuKind::kKernel);
  EXPECT_EQ(r->gpu.external_id[0], 3);
  EXPECT_EQ(r->gpu.kind[1], GpuKind::kMemcpy);
  EXPECT_EQ(r->gpu.kind[2], GpuKind::kMemset);
  // The orphan "f" names no call at all (id 80): one mismatch; the matched pair is fine.
  EXPECT_EQ(r->diagnostics.Count(Diag::kFlowMismatch), 1u);
  EXPECT_EQ(r->diagnostics.Count(Diag::kUnknownCategory), 0u);
}

TEST(KinetoReaderTest, FlowStartWithoutItsLaunchCallIsAMismatch) {
  auto r = ReadJson(R"js({"traceEvents": [
    {"ph":"s","id":12,"pid":1,"tid":1,"ts":1,"cat":"ac2g","name":"ac2g"},
    {"ph":"s","id":"not a number","pid":1,"tid":1,"ts":1,"cat":"ac2g","name":"ac2g"}]})js");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->diagnostics.Count(Diag::kFlowMismatch), 2u);
}

TEST(KinetoReaderTest, GraphIdsAndCollectiveRanksAsArray) {
  auto r = ReadJson(R"js({"traceEvents": [
    {"ph":"X","cat":"kernel","name":"g","pid":0,"tid":7,"ts":1,"dur":1,
     "args":{"device":0,"stream":7,"correlation":1,"graph id":12,"graph node id":3}},
    {"ph":"X","cat":"kernel","name":"nograph","pid":0,"tid":7,"ts":2,"dur":1,
     "args":{"device":0,"stream":7,"correlation":2,"graph id":0}},
    {"ph":"X","cat":"kernel","name":"ncclKernel","pid":0,"tid":20,"ts":3,"dur":1,
     "args":{"device":0,"stream":20,"correlation":3,"Collective name":"allreduce",
             "Process Group Name":5,"Process Group Ranks":[0,1, 2],"Seq":"41","Src Rank":3}}
  ]})js");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->gpu.size(), 3u);
  EXPECT_EQ(r->gpu.graph_id[0], 12);
  EXPECT_EQ(r->gpu.graph_id[1], -1);  // CUPTI's 0 means "not launched from a graph"
  ASSERT_TRUE(r->gpu.collective[2].valid());
  const CollectiveInfo& c = r->collectives[r->gpu.collective[2].value()];
  EXPECT_EQ(c.name, "allreduce");
  EXPECT_EQ(c.process_group, "5");
  EXPECT_EQ(c.pg_ranks, "[0,1, 2]");
  EXPECT_EQ(c.seq, 41);
  EXPECT_EQ(c.src_rank, 3);
  EXPECT_EQ(c.group_size, -1);
}

TEST(KinetoReaderTest, GpuAnnotationFallsBackToPidTid) {
  auto r = ReadJson(OneEvent(R"js({"ph":"X","cat":"gpu_user_annotation","name":"step","pid":2,
      "tid":11,"ts":1,"dur":1,"args":{"External id":4}})js"));
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->gpu_annotations.size(), 1u);
  const StreamInfo& s = r->streams[r->gpu_annotations[0].stream.value()];
  EXPECT_EQ(s.device, 2);
  EXPECT_EQ(s.stream, 11);
}

TEST(KinetoReaderTest, RocmIsRecognisedButRead) {
  auto by_key = ReadJson(OneEvent("", R"js("roctracer_version": 4, )js"));
  ASSERT_TRUE(by_key.ok());
  EXPECT_TRUE(by_key->meta.rocm);
  auto by_name = ReadJson(R"js({"traceEvents": [
    {"ph":"X","cat":"cuda_runtime","name":"hipLaunchKernel","pid":9,"tid":9,"ts":1,"dur":1,
     "args":{"External id":1,"stream":"0x0","cid":153,"correlation":117}},
    {"ph":"X","cat":"kernel","name":"k","pid":2,"tid":0,"ts":2,"dur":1,
     "args":{"device":2,"stream":0,"correlation":117,"kind":"Dispatch Kernel"}}]})js");
  ASSERT_TRUE(by_name.ok()) << by_name.status().ToString();
  EXPECT_TRUE(by_name->meta.rocm);
  EXPECT_EQ(by_name->gpu.size(), 1u);
  EXPECT_EQ(by_name->cpu.correlation[0], 117);
}

TEST(KinetoReaderTest, SyncKindFromNameOrArgs) {
  auto r = ReadJson(R"js({"traceEvents": [
    {"ph":"X","cat":"cuda_sync","name":"Stream Sync","pid":0,"tid":1000007,"ts":1,"dur":1,
     "args":{"stream":7,"correlation":3,"device":0}},
    {"ph":"X","cat":"cuda_sync","name":"renamed","pid":0,"tid":1,"ts":2,"dur":1,
     "args":{"cuda_sync_kind":"Event Sync","stream":-1,"correlation":4,"device":0,
             "wait_on_stream":20,"wait_on_cuda_event_record_corr_id":2}},
    {"ph":"X","cat":"cuda_sync","name":"Who knows","pid":0,"tid":1,"ts":3,"dur":1,
     "args":{"correlation":5,"device":1}}]})js");
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->syncs.size(), 3u);
  EXPECT_EQ(r->syncs.kind[0], SyncKind::kStreamSync);
  EXPECT_EQ(r->syncs.stream[0], 7);  // from args, not from tid 1000007
  EXPECT_EQ(r->syncs.kind[1], SyncKind::kEventSync);
  EXPECT_EQ(r->syncs.wait_on_stream[1], 20);
  EXPECT_EQ(r->syncs.kind[2], SyncKind::kUnknown);
  EXPECT_EQ(r->syncs.stream[2], -1);
  EXPECT_EQ(r->diagnostics.Count(Diag::kSyncUnresolved), 0u);
}

TEST(KinetoReaderTest, CudaEventRecordsNeedAnIdACorrelationAndADevice) {
  auto r = ReadJson(R"js({"traceEvents": [
    {"ph":"X","cat":"cuda_event","name":"cudaEvent","pid":0,"tid":7,"ts":5,"dur":1,
     "args":{"event_id":4,"stream":7,"correlation":30,"device":1,"context":1}},
    {"ph":"X","cat":"cuda_event","name":"cudaEvent","pid":0,"tid":7,"ts":1,"dur":1,
     "args":{"event_id":3,"stream":7,"correlation":20,"device":0,"context":1}},
    {"ph":"X","cat":"cuda_event","name":"cudaEvent","pid":0,"tid":7,"ts":6,"dur":1,
     "args":{"stream":7,"correlation":31,"device":0}}]})js");
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->cuda_events.size(), 2u);
  EXPECT_EQ(r->cuda_events.event_id[0], 3);  // sorted by time like every table
  EXPECT_EQ(r->cuda_events.event_id[1], 4);
  EXPECT_EQ(r->cuda_events.device[1], 1);
  EXPECT_EQ(r->diagnostics.Count(Diag::kCudaEventIgnored), 1u);
}

TEST(KinetoReaderTest, ArgsBeforeCatAreStillRead) {
  auto r = ReadJson(OneEvent(R"js({"args":{"stream":7,"correlation":5,"device":0},"dur":1,
      "ts":1,"tid":7,"pid":0,"name":"k","cat":"kernel","ph":"X"})js"));
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->gpu.size(), 1u);
  EXPECT_EQ(r->gpu.correlation[0], 5);
}

TEST(KinetoReaderTest, EmptyTraceEventsIsAnEmptyTrace) {
  auto r = ReadJson(R"js({"schemaVersion": 1, "traceEvents": []})js");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->meta.raw_events, 0);
  EXPECT_EQ(r->cpu.size() + r->gpu.size() + r->syncs.size(), 0u);
}

// Errors of the file as a whole: a ParseError naming the file.
void ExpectParseError(const std::string& json, const std::string& needle) {
  auto r = ReadJson(json, "/data/x.json");
  ASSERT_FALSE(r.ok()) << json;
  EXPECT_EQ(r.status().code(), StatusCode::kParseError);
  EXPECT_NE(r.status().message().find("/data/x.json"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
  std::printf("  %s\n", r.status().ToString().c_str());  // the messages users see
}

TEST(KinetoReaderTest, WholeFileErrors) {
  ExpectParseError("", "not valid JSON");
  ExpectParseError("not json at all", "JSON");
  ExpectParseError(R"js({"schemaVersion": 1, "other": []})js", "traceEvents");
  ExpectParseError(R"js({"traceEvents": {"a": 1}})js", "traceEvents");
  ExpectParseError("[1, 2]", "does not hold a JSON object");
  ExpectParseError("42", "does not hold a JSON object");
  ExpectParseError(R"js({"traceEvents": []} trailing)js", "not valid JSON");
  ExpectParseError(R"js({"traceEvents": []} {"traceEvents": []})js", "after the top-level object");
  ExpectParseError(R"js({"traceEvents": [{"ph": "X",, "name": "a"}]})js", "near byte");
  ExpectParseError(R"js({"traceEvents": [{"ph": "X"} {"ph": "X"}]})js", "invalid JSON");
  ExpectParseError(R"js({"traceEvents": [{"ph": "X", "name": "unterminated}]})js", "JSON");
}

TEST(KinetoReaderTest, TruncationIsAnErrorNeverACrash) {
  const std::string full = Slurp(DataPath("kineto_mini.json"));
  const size_t last_brace = full.rfind('}');
  ASSERT_NE(last_brace, std::string::npos);
  for (size_t n = 0; n < last_brace; n += 3) {
    auto r = ReadJson(full.substr(0, n));
    EXPECT_FALSE(r.ok()) << "prefix of " << n << " bytes was accepted";
  }
  EXPECT_TRUE(ReadJson(full.substr(0, last_brace + 1)).ok());
}

TEST(KinetoReaderTest, Sniff) {
  const Reader& k = testing::KinetoReader();
  EXPECT_TRUE(k.Sniff("\xEF\xBB\xBF \n {\"schemaVersion\": 1"));
  EXPECT_TRUE(k.Sniff("{\"metadata\": {\"x\": 1}, \"traceEvents\": ["));
  EXPECT_TRUE(k.Sniff("{\"deviceProperties\": ["));
  EXPECT_FALSE(k.Sniff("{\"nodes\": []}"));
  EXPECT_FALSE(k.Sniff("[{\"traceEvents\": 1}]"));
  EXPECT_FALSE(k.Sniff("SQLite format 3"));
  EXPECT_FALSE(k.Sniff(""));
}

// --- The registry (ReadTrace): files, gzip, sniffing, errors. ---

std::string Gzip(const std::string& data) {
  z_stream zs{};
  EXPECT_EQ(deflateInit2(&zs, Z_BEST_SPEED, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY),
            Z_OK);
  std::string out(deflateBound(&zs, static_cast<uLong>(data.size())) + 64, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = static_cast<uInt>(data.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&zs, Z_FINISH), Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

TEST(TraceRegistryTest, ReadsPlainAndGzippedJsonAlike) {
  const std::string json = Slurp(DataPath("kineto_mini.json"));
  TempFile plain("mini.json", json);
  TempFile gz("mini.json.gz", Gzip(json));
  TempFile gz_odd_name("mini.trace", Gzip(json));  // gzip is found by magic, not by name
  auto a = ReadTrace(plain.path());
  auto b = ReadTrace(gz.path());
  auto c = ReadTrace(gz_odd_name.path());
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(b->meta.source_path, gz.path());
  for (const Trace* t : {&*b, &*c}) {
    EXPECT_EQ(t->cpu.size(), a->cpu.size());
    EXPECT_EQ(t->gpu.size(), a->gpu.size());
    EXPECT_EQ(t->gpu.start, a->gpu.start);
    EXPECT_EQ(t->syncs.size(), a->syncs.size());
    EXPECT_EQ(t->meta.raw_events, a->meta.raw_events);
  }
}

TEST(TraceRegistryTest, SniffLooksPastALeadingMetadataObject) {
  // TraceLens traces put ~26 KiB of their own metadata before traceEvents.
  std::string json = "{\"metadata\": {\"pad\": \"" + std::string(30000, 'x') +
                     "\"}, \"traceEvents\": [], \"schemaVersion\": 1}";
  TempFile f("lens.json", json);
  auto r = ReadTrace(f.path());
  EXPECT_TRUE(r.ok()) << r.status().ToString();
}

void ExpectUnreadable(const std::string& bytes, const std::string& needle) {
  TempFile f("input.bin", bytes);
  auto r = ReadTrace(f.path());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kParseError);
  EXPECT_NE(r.status().message().find(f.path()), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
}

TEST(TraceRegistryTest, UnreadableFilesSayWhatTheyLookLike) {
  ExpectUnreadable("", "empty file");
  ExpectUnreadable(Gzip(""), "empty file");
  ExpectUnreadable(" \n\t ", "whitespace only");
  ExpectUnreadable(std::string("SQLite format 3\0rest", 20), "SQLite");
  ExpectUnreadable("[{\"ph\": \"X\"}]", "JSON array");
  ExpectUnreadable("{\"schema\": \"1.0.1\", \"nodes\": []}", "not a PyTorch-profiler/Kineto trace");
  ExpectUnreadable("hello world", "text starting with \"hello world\"");
  ExpectUnreadable(std::string("\x00\x01\x02\x03", 4), "binary data (first bytes 00 01 02 03)");
  ExpectUnreadable(Gzip("{\"traceEvents\": [}"), "invalid JSON");
}

TEST(TraceRegistryTest, MissingFileIsNotFound) {
  auto r = ReadTrace("/nonexistent/emo/trace.json");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
}

TEST(TraceRegistryTest, KinetoAndEmoReadersAreRegistered) {
  std::vector<std::string> names;
  for (const auto& r : Readers()) names.emplace_back(r->Name());
  EXPECT_NE(std::find(names.begin(), names.end(), "kineto-json"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "emo"), names.end());
}

}  // namespace
}  // namespace emo::trace
