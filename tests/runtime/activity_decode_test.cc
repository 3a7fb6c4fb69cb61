// DecodeActivity on CUPTI records built by hand, field by field.
#include "emo/runtime/activity_decode.h"

#include <cupti_driver_cbid.h>
#include <cupti_runtime_cbid.h>
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <string>

namespace emo::runtime {
namespace {

namespace fmt = trace::emo_format;

// Hands out string ids and remembers what it was asked.
class FakeContext : public DecodeContext {
 public:
  uint32_t KernelName(const char* name) override {
    kernel_names.push_back(name);
    return 100 + static_cast<uint32_t>(kernel_names.size());
  }
  uint32_t ApiName(bool driver, uint32_t cbid) override {
    api_names.push_back({driver, cbid});
    return driver ? 2000 + cbid : 1000 + cbid;
  }
  uint32_t DeviceOfContext(uint32_t context) override { return context == 5 ? 3u : 0xffffffffu; }

  std::vector<std::string> kernel_names;
  std::vector<std::pair<bool, uint32_t>> api_names;
};

template <typename T>
T Body(const DecodedRecord& r) {
  EXPECT_EQ(r.size, sizeof(T));
  T out;
  std::memcpy(&out, r.body, sizeof(T));
  return out;
}

template <typename T>
const CUpti_Activity* AsActivity(const T& record) {
  return reinterpret_cast<const CUpti_Activity*>(&record);
}

CUpti_ActivityKernel10 Kernel() {
  CUpti_ActivityKernel10 k;
  std::memset(&k, 0, sizeof(k));
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.start = 1'000'000;
  k.end = 1'250'000;
  k.deviceId = 1;
  k.contextId = 5;
  k.streamId = 7;
  k.correlationId = 4242;
  k.name = "_Z6kernelPf";
  k.gridX = 128;
  k.gridY = 2;
  k.gridZ = 1;
  k.blockX = 256;
  k.blockY = 1;
  k.blockZ = 1;
  k.registersPerThread = 32;
  k.staticSharedMemory = 1024;
  k.dynamicSharedMemory = 4096;
  return k;
}

TEST(ActivityDecodeTest, KernelOutsideAGraph) {
  FakeContext context;
  DecodedRecord out;
  const CUpti_ActivityKernel10 k = Kernel();
  ASSERT_EQ(DecodeActivity(AsActivity(k), &context, &out), DecodeResult::kRecord);
  EXPECT_EQ(out.type, fmt::RecordType::kKernel);
  const auto r = Body<fmt::KernelRecord>(out);
  EXPECT_EQ(r.start_ns, 1'000'000);
  EXPECT_EQ(r.end_ns, 1'250'000);
  EXPECT_EQ(r.correlation, 4242u);
  EXPECT_EQ(r.graph_id, fmt::kNone);
  EXPECT_EQ(r.graph_node_id, fmt::kNone);
  EXPECT_EQ(r.device, 1u);
  EXPECT_EQ(r.context, 5u);
  EXPECT_EQ(r.stream, 7u);
  EXPECT_EQ(r.name, 101u);
  ASSERT_EQ(context.kernel_names.size(), 1u);
  EXPECT_EQ(context.kernel_names[0], "_Z6kernelPf");
  EXPECT_EQ(r.grid[0], 128);
  EXPECT_EQ(r.grid[1], 2);
  EXPECT_EQ(r.grid[2], 1);
  EXPECT_EQ(r.block[0], 256);
  EXPECT_EQ(r.block[1], 1);
  EXPECT_EQ(r.block[2], 1);
  EXPECT_EQ(r.registers_per_thread, 32);
  EXPECT_EQ(r.static_shared_memory, 1024);
  EXPECT_EQ(r.dynamic_shared_memory, 4096);
  EXPECT_EQ(r.reserved, 0);
}

TEST(ActivityDecodeTest, KernelFromAGraphKeepsGraphIdsAndTheGraphLaunchCorrelation) {
  FakeContext context;
  DecodedRecord out;
  CUpti_ActivityKernel10 k = Kernel();
  k.graphId = 17;
  k.graphNodeId = 0x1'0000'0003ull;
  k.correlationId = 99;  // the cudaGraphLaunch's
  ASSERT_EQ(DecodeActivity(AsActivity(k), &context, &out), DecodeResult::kRecord);
  const auto r = Body<fmt::KernelRecord>(out);
  EXPECT_EQ(r.graph_id, 17u);
  EXPECT_EQ(r.graph_node_id, 0x1'0000'0003ull);
  EXPECT_EQ(r.correlation, 99u);
}

TEST(ActivityDecodeTest, KernelWithoutTimesIsIncomplete) {
  FakeContext context;
  DecodedRecord out;
  CUpti_ActivityKernel10 k = Kernel();
  k.end = 0;
  EXPECT_EQ(DecodeActivity(AsActivity(k), &context, &out), DecodeResult::kIncomplete);
  k = Kernel();
  k.end = k.start - 1;
  EXPECT_EQ(DecodeActivity(AsActivity(k), &context, &out), DecodeResult::kIncomplete);
}

TEST(ActivityDecodeTest, Memcpy) {
  FakeContext context;
  DecodedRecord out;
  CUpti_ActivityMemcpy6 m;
  std::memset(&m, 0, sizeof(m));
  m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
  m.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
  m.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  m.bytes = 1 << 20;
  m.start = 10;
  m.end = 30;
  m.deviceId = 2;
  m.contextId = 3;
  m.streamId = 14;
  m.correlationId = 77;
  m.graphId = 4;
  ASSERT_EQ(DecodeActivity(AsActivity(m), &context, &out), DecodeResult::kRecord);
  EXPECT_EQ(out.type, fmt::RecordType::kMemcpy);
  const auto r = Body<fmt::MemcpyRecord>(out);
  EXPECT_EQ(r.start_ns, 10);
  EXPECT_EQ(r.end_ns, 30);
  EXPECT_EQ(r.correlation, 77u);
  EXPECT_EQ(r.bytes, 1u << 20);
  EXPECT_EQ(r.graph_id, 4u);
  EXPECT_EQ(r.device, 2u);
  EXPECT_EQ(r.context, 3u);
  EXPECT_EQ(r.stream, 14u);
  EXPECT_EQ(r.copy_kind, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD);
  EXPECT_EQ(r.src_kind, CUPTI_ACTIVITY_MEMORY_KIND_PINNED);
  EXPECT_EQ(r.dst_kind, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE);
  EXPECT_EQ(r.peer, 0);
}

TEST(ActivityDecodeTest, PeerToPeerMemcpy) {
  FakeContext context;
  DecodedRecord out;
  CUpti_ActivityMemcpyPtoP4 m;
  std::memset(&m, 0, sizeof(m));
  m.kind = CUPTI_ACTIVITY_KIND_MEMCPY2;
  m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_PTOP;
  m.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  m.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  m.bytes = 4096;
  m.start = 100;
  m.end = 200;
  m.deviceId = 0;
  m.contextId = 1;
  m.streamId = 9;
  m.srcDeviceId = 0;
  m.dstDeviceId = 1;
  m.correlationId = 5;
  ASSERT_EQ(DecodeActivity(AsActivity(m), &context, &out), DecodeResult::kRecord);
  const auto r = Body<fmt::MemcpyRecord>(out);
  EXPECT_EQ(r.start_ns, 100);
  EXPECT_EQ(r.end_ns, 200);
  EXPECT_EQ(r.correlation, 5u);
  EXPECT_EQ(r.bytes, 4096u);
  EXPECT_EQ(r.graph_id, fmt::kNone);
  EXPECT_EQ(r.device, 0u);
  EXPECT_EQ(r.context, 1u);
  EXPECT_EQ(r.stream, 9u);
  EXPECT_EQ(r.copy_kind, CUPTI_ACTIVITY_MEMCPY_KIND_PTOP);
  EXPECT_EQ(r.peer, 1);
}

TEST(ActivityDecodeTest, Memset) {
  FakeContext context;
  DecodedRecord out;
  CUpti_ActivityMemset4 m;
  std::memset(&m, 0, sizeof(m));
  m.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  m.value = 0xAB;
  m.bytes = 512;
  m.start = 40;
  m.end = 41;
  m.deviceId = 6;
  m.contextId = 2;
  m.streamId = 13;
  m.correlationId = 808;
  m.graphId = 0;
  ASSERT_EQ(DecodeActivity(AsActivity(m), &context, &out), DecodeResult::kRecord);
  EXPECT_EQ(out.type, fmt::RecordType::kMemset);
  const auto r = Body<fmt::MemsetRecord>(out);
  EXPECT_EQ(r.start_ns, 40);
  EXPECT_EQ(r.end_ns, 41);
  EXPECT_EQ(r.correlation, 808u);
  EXPECT_EQ(r.bytes, 512u);
  EXPECT_EQ(r.graph_id, fmt::kNone);
  EXPECT_EQ(r.device, 6u);
  EXPECT_EQ(r.context, 2u);
  EXPECT_EQ(r.stream, 13u);
  EXPECT_EQ(r.value, 0xABu);
}

CUpti_ActivitySynchronization2 Sync() {
  CUpti_ActivitySynchronization2 s;
  std::memset(&s, 0, sizeof(s));
  s.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
  s.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT;
  s.start = 500;
  s.end = 520;
  s.correlationId = 31;
  s.contextId = 5;
  s.streamId = 21;
  s.cudaEventId = 8;
  s.cudaEventSyncId = 123456;
  return s;
}

TEST(ActivityDecodeTest, SynchronizationWithEventSyncId) {
  FakeContext context;
  DecodedRecord out;
  const CUpti_ActivitySynchronization2 s = Sync();
  ASSERT_EQ(DecodeActivity(AsActivity(s), &context, &out), DecodeResult::kRecord);
  EXPECT_EQ(out.type, fmt::RecordType::kSync);
  const auto r = Body<fmt::SyncRecord>(out);
  EXPECT_EQ(r.start_ns, 500);
  EXPECT_EQ(r.end_ns, 520);
  EXPECT_EQ(r.correlation, 31u);
  EXPECT_EQ(r.event_sync_id, 123456u);
  EXPECT_EQ(r.type, static_cast<uint32_t>(fmt::SyncType::kStreamWaitEvent));
  EXPECT_EQ(r.context, 5u);
  EXPECT_EQ(r.stream, 21u);
  EXPECT_EQ(r.cuda_event, 8u);
  EXPECT_EQ(r.device, 3u);  // from the context → device map
  EXPECT_EQ(r.reserved, 0);
}

TEST(ActivityDecodeTest, ContextSynchronizeHasNoEventOrStream) {
  FakeContext context;
  DecodedRecord out;
  CUpti_ActivitySynchronization2 s = Sync();
  s.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE;
  s.contextId = 9;  // unknown to the map
  s.streamId = CUPTI_SYNCHRONIZATION_INVALID_VALUE;
  s.cudaEventId = CUPTI_SYNCHRONIZATION_INVALID_VALUE;
  s.cudaEventSyncId = CUPTI_SYNCHRONIZATION_INVALID_VALUE;
  ASSERT_EQ(DecodeActivity(AsActivity(s), &context, &out), DecodeResult::kRecord);
  const auto r = Body<fmt::SyncRecord>(out);
  EXPECT_EQ(r.type, static_cast<uint32_t>(fmt::SyncType::kContextSynchronize));
  EXPECT_EQ(r.event_sync_id, fmt::kNone);
  EXPECT_EQ(r.stream, 0xffffffffu);
  EXPECT_EQ(r.cuda_event, 0xffffffffu);
  EXPECT_EQ(r.device, 0xffffffffu);
}

TEST(ActivityDecodeTest, UnfinishedQueryIsNotASynchronization) {
  FakeContext context;
  DecodedRecord out;
  CUpti_ActivitySynchronization2 s = Sync();
  s.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE;
  s.returnValue = 600;  // CUDA_ERROR_NOT_READY
  EXPECT_EQ(DecodeActivity(AsActivity(s), &context, &out), DecodeResult::kFiltered);
}

TEST(ActivityDecodeTest, CudaEvent) {
  FakeContext context;
  DecodedRecord out;
  CUpti_ActivityCudaEvent2 e;
  std::memset(&e, 0, sizeof(e));
  e.kind = CUPTI_ACTIVITY_KIND_CUDA_EVENT;
  e.correlationId = 64;
  e.contextId = 5;
  e.streamId = 22;
  e.eventId = 8;
  e.deviceId = 3;
  e.deviceTimestamp = 987654321;
  e.cudaEventSyncId = 123456;
  ASSERT_EQ(DecodeActivity(AsActivity(e), &context, &out), DecodeResult::kRecord);
  EXPECT_EQ(out.type, fmt::RecordType::kCudaEvent);
  const auto r = Body<fmt::CudaEventRecord>(out);
  EXPECT_EQ(r.correlation, 64u);
  EXPECT_EQ(r.event_sync_id, 123456u);
  EXPECT_EQ(r.device_ns, 987654321);
  EXPECT_EQ(r.event, 8u);
  EXPECT_EQ(r.context, 5u);
  EXPECT_EQ(r.stream, 22u);
  EXPECT_EQ(r.device, 3u);
}

TEST(ActivityDecodeTest, ExternalCorrelation) {
  FakeContext context;
  DecodedRecord out;
  CUpti_ActivityExternalCorrelation e;
  std::memset(&e, 0, sizeof(e));
  e.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
  e.externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;
  e.externalId = 0xDEADBEEF01ull;
  e.correlationId = 12;
  ASSERT_EQ(DecodeActivity(AsActivity(e), &context, &out), DecodeResult::kRecord);
  EXPECT_EQ(out.type, fmt::RecordType::kExternalCorr);
  const auto r = Body<fmt::ExternalCorrRecord>(out);
  EXPECT_EQ(r.correlation, 12u);
  EXPECT_EQ(r.external_id, 0xDEADBEEF01ull);
  EXPECT_EQ(r.external_kind, static_cast<uint32_t>(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0));
  EXPECT_EQ(r.reserved, 0u);
}

CUpti_ActivityAPI Api(CUpti_ActivityKind kind, CUpti_CallbackId cbid) {
  CUpti_ActivityAPI a;
  std::memset(&a, 0, sizeof(a));
  a.kind = kind;
  a.cbid = cbid;
  a.start = 70;
  a.end = 95;
  a.processId = 4321;
  a.threadId = 4330;
  a.correlationId = 4242;
  a.returnValue = 0;
  return a;
}

TEST(ActivityDecodeTest, RuntimeApiCall) {
  FakeContext context;
  DecodedRecord out;
  CUpti_ActivityAPI a = Api(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000);
  a.returnValue = 2;
  ASSERT_EQ(DecodeActivity(AsActivity(a), &context, &out), DecodeResult::kRecord);
  EXPECT_EQ(out.type, fmt::RecordType::kApi);
  const auto r = Body<fmt::ApiRecord>(out);
  EXPECT_EQ(r.start_ns, 70);
  EXPECT_EQ(r.end_ns, 95);
  EXPECT_EQ(r.correlation, 4242u);
  EXPECT_EQ(r.pid, 4321u);
  EXPECT_EQ(r.tid, 4330u);
  EXPECT_EQ(r.cbid, static_cast<uint32_t>(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000));
  EXPECT_EQ(r.name, 1000u + CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000);
  EXPECT_EQ(r.driver, 0u);
  EXPECT_EQ(r.return_value, 2);
  ASSERT_EQ(context.api_names.size(), 1u);
  EXPECT_FALSE(context.api_names[0].first);
}

TEST(ActivityDecodeTest, DriverApiCall) {
  FakeContext context;
  DecodedRecord out;
  const CUpti_ActivityAPI a = Api(CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel);
  ASSERT_EQ(DecodeActivity(AsActivity(a), &context, &out), DecodeResult::kRecord);
  const auto r = Body<fmt::ApiRecord>(out);
  EXPECT_EQ(r.driver, 1u);
  EXPECT_EQ(r.cbid, static_cast<uint32_t>(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel));
  EXPECT_EQ(r.name, 2000u + CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel);
  EXPECT_EQ(r.return_value, 0);
}

TEST(ActivityDecodeTest, NoisyApiCallsAreFiltered) {
  FakeContext context;
  DecodedRecord out;
  EXPECT_EQ(DecodeActivity(AsActivity(Api(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020)),
                           &context, &out),
            DecodeResult::kFiltered);
  EXPECT_EQ(DecodeActivity(AsActivity(Api(CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_DRIVER_TRACE_CBID_cuKernelGetAttribute)),
                           &context, &out),
            DecodeResult::kFiltered);
  EXPECT_TRUE(context.api_names.empty());
  // The same cbid number means another function in the other domain.
  EXPECT_FALSE(IsNoisyApi(true, CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020));
  EXPECT_FALSE(IsNoisyApi(false, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000));
  EXPECT_FALSE(IsNoisyApi(false, CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020));
}

TEST(ActivityDecodeTest, UnknownKind) {
  FakeContext context;
  DecodedRecord out;
  CUpti_ActivityAPI a = Api(CUPTI_ACTIVITY_KIND_OVERHEAD, 1);
  EXPECT_EQ(DecodeActivity(AsActivity(a), &context, &out), DecodeResult::kUnknown);
  a.kind = CUPTI_ACTIVITY_KIND_KERNEL;  // never enabled: it serializes kernels
  EXPECT_EQ(DecodeActivity(AsActivity(a), &context, &out), DecodeResult::kUnknown);
}

TEST(ActivityDecodeTest, ApiDisplayNameDropsTheRuntimeVersionSuffix) {
  EXPECT_EQ(ApiDisplayName(false, "cudaLaunchKernel_v7000"), "cudaLaunchKernel");
  EXPECT_EQ(ApiDisplayName(false, "cudaLaunchKernel_ptsz_v7000"), "cudaLaunchKernel_ptsz");
  EXPECT_EQ(ApiDisplayName(false, "cudaStreamGetCaptureInfo_v2_v11030"), "cudaStreamGetCaptureInfo_v2");
  EXPECT_EQ(ApiDisplayName(false, "cudaGetDeviceProperties_v12000"), "cudaGetDeviceProperties");
  EXPECT_EQ(ApiDisplayName(false, "cudaFoo_v2"), "cudaFoo_v2");
  EXPECT_EQ(ApiDisplayName(false, "cudaFoo"), "cudaFoo");
  EXPECT_EQ(ApiDisplayName(true, "cuCtxGetDevice_v2"), "cuCtxGetDevice_v2");
  EXPECT_EQ(ApiDisplayName(true, "cuMemcpy_v7000"), "cuMemcpy_v7000");
}

}  // namespace
}  // namespace emo::runtime
