#include "emo/runtime/activity_decode.h"

#include <cupti_driver_cbid.h>
#include <cupti_runtime_cbid.h>

#include <algorithm>
#include <cstring>

namespace emo::runtime {
namespace {

namespace fmt = trace::emo_format;

template <typename T>
void Put(fmt::RecordType type, const T& record, DecodedRecord* out) {
  static_assert(sizeof(T) <= sizeof(out->body));
  out->type = type;
  out->size = static_cast<uint16_t>(sizeof(T));
  std::memset(out->body, 0, sizeof(out->body));
  std::memcpy(out->body, &record, sizeof(T));
}

int64_t Ns(uint64_t cupti_time) { return static_cast<int64_t>(cupti_time); }

// CUPTI times are 0 in records a forced flush delivered before the work finished.
bool Complete(uint64_t start, uint64_t end) { return start != 0 && end != 0 && end >= start; }

// CUPTI puts 0 in graphId for work not launched from a graph; the node id means nothing then.
uint64_t GraphId(uint32_t graph_id) { return graph_id == 0 ? fmt::kNone : graph_id; }
uint64_t GraphNodeId(uint32_t graph_id, uint64_t node_id) { return graph_id == 0 ? fmt::kNone : node_id; }

// cudaEventSyncId is CUPTI_SYNCHRONIZATION_INVALID_VALUE (a 32-bit all-ones) when the record
// has nothing to do with an event; accept the 64-bit all-ones too.
uint64_t EventSyncId(uint64_t id) {
  return (id == CUPTI_SYNCHRONIZATION_INVALID_VALUE || id == ~0ull) ? fmt::kNone : id;
}

DecodeResult Kernel(const CUpti_ActivityKernel10& k, DecodeContext* context, DecodedRecord* out) {
  if (!Complete(k.start, k.end)) return DecodeResult::kIncomplete;
  fmt::KernelRecord r{};
  r.start_ns = Ns(k.start);
  r.end_ns = Ns(k.end);
  r.correlation = k.correlationId;
  r.graph_id = GraphId(k.graphId);
  r.graph_node_id = GraphNodeId(k.graphId, k.graphNodeId);
  r.device = k.deviceId;
  r.context = k.contextId;
  r.stream = k.streamId;
  r.name = k.name != nullptr ? context->KernelName(k.name) : fmt::kNoName;
  r.grid[0] = k.gridX;
  r.grid[1] = k.gridY;
  r.grid[2] = k.gridZ;
  r.block[0] = k.blockX;
  r.block[1] = k.blockY;
  r.block[2] = k.blockZ;
  r.registers_per_thread = k.registersPerThread;
  r.static_shared_memory = k.staticSharedMemory;
  r.dynamic_shared_memory = k.dynamicSharedMemory;
  Put(fmt::RecordType::kKernel, r, out);
  return DecodeResult::kRecord;
}

// The fields every copy and memset record has (CUPTI's MEMCPY, MEMCPY2 and MEMSET structs name
// them alike).
template <typename Op, typename Record>
void CopyCommon(const Op& m, Record* r) {
  r->start_ns = Ns(m.start);
  r->end_ns = Ns(m.end);
  r->correlation = m.correlationId;
  r->bytes = m.bytes;
  r->graph_id = GraphId(m.graphId);
  r->device = m.deviceId;
  r->context = m.contextId;
  r->stream = m.streamId;
}

// MEMCPY and MEMCPY2 (peer-to-peer) records.
template <typename Copy>
DecodeResult AnyMemcpy(const Copy& m, uint8_t peer, DecodedRecord* out) {
  if (!Complete(m.start, m.end)) return DecodeResult::kIncomplete;
  fmt::MemcpyRecord r{};
  CopyCommon(m, &r);
  r.copy_kind = m.copyKind;
  r.src_kind = m.srcKind;
  r.dst_kind = m.dstKind;
  r.peer = peer;
  Put(fmt::RecordType::kMemcpy, r, out);
  return DecodeResult::kRecord;
}

DecodeResult Memcpy(const CUpti_ActivityMemcpy6& m, DecodedRecord* out) { return AnyMemcpy(m, 0, out); }

DecodeResult PeerMemcpy(const CUpti_ActivityMemcpyPtoP4& m, DecodedRecord* out) { return AnyMemcpy(m, 1, out); }

DecodeResult Memset(const CUpti_ActivityMemset4& m, DecodedRecord* out) {
  if (!Complete(m.start, m.end)) return DecodeResult::kIncomplete;
  fmt::MemsetRecord r{};
  CopyCommon(m, &r);
  r.value = m.value;
  Put(fmt::RecordType::kMemset, r, out);
  return DecodeResult::kRecord;
}

DecodeResult Sync(const CUpti_ActivitySynchronization2& s, DecodeContext* context, DecodedRecord* out) {
  // A non-zero return is a query (cudaEventQuery / cudaStreamQuery) that found the work
  // unfinished: the host did not wait, so it is not a synchronization.
  if (s.returnValue != 0) return DecodeResult::kFiltered;
  if (!Complete(s.start, s.end)) return DecodeResult::kIncomplete;
  fmt::SyncRecord r{};
  r.start_ns = Ns(s.start);
  r.end_ns = Ns(s.end);
  r.correlation = s.correlationId;
  r.event_sync_id = EventSyncId(s.cudaEventSyncId);
  r.type = static_cast<uint32_t>(s.type);
  r.context = s.contextId;
  r.stream = s.streamId;
  r.cuda_event = s.cudaEventId;
  r.device = context->DeviceOfContext(s.contextId);
  Put(fmt::RecordType::kSync, r, out);
  return DecodeResult::kRecord;
}

DecodeResult CudaEvent(const CUpti_ActivityCudaEvent2& e, DecodedRecord* out) {
  fmt::CudaEventRecord r{};
  r.correlation = e.correlationId;
  r.event_sync_id = EventSyncId(e.cudaEventSyncId);
  r.device_ns = Ns(e.deviceTimestamp);
  r.event = e.eventId;
  r.context = e.contextId;
  r.stream = e.streamId;
  r.device = e.deviceId;
  Put(fmt::RecordType::kCudaEvent, r, out);
  return DecodeResult::kRecord;
}

DecodeResult ExternalCorrelation(const CUpti_ActivityExternalCorrelation& e, DecodedRecord* out) {
  fmt::ExternalCorrRecord r{};
  r.correlation = e.correlationId;
  r.external_id = e.externalId;
  r.external_kind = static_cast<uint32_t>(e.externalKind);
  Put(fmt::RecordType::kExternalCorr, r, out);
  return DecodeResult::kRecord;
}

DecodeResult Api(const CUpti_ActivityAPI& a, bool driver, DecodeContext* context, DecodedRecord* out) {
  if (IsNoisyApi(driver, a.cbid)) return DecodeResult::kFiltered;
  if (!Complete(a.start, a.end)) return DecodeResult::kIncomplete;
  fmt::ApiRecord r{};
  r.start_ns = Ns(a.start);
  r.end_ns = Ns(a.end);
  r.correlation = a.correlationId;
  r.pid = a.processId;
  r.tid = a.threadId;
  r.cbid = a.cbid;
  r.name = context->ApiName(driver, a.cbid);
  r.driver = driver ? 1 : 0;
  r.return_value = static_cast<int32_t>(a.returnValue);
  Put(fmt::RecordType::kApi, r, out);
  return DecodeResult::kRecord;
}

// Records are read by copy: a CUPTI buffer keeps them 8-byte aligned, but a copy costs nothing
// here and keeps the decoder safe on any buffer a test builds.
template <typename T>
T Load(const CUpti_Activity* activity) {
  T value;
  std::memcpy(&value, activity, sizeof(T));
  return value;
}

constexpr uint32_t kNoisyRuntime[] = {
    CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaGetDeviceCount_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaGetLastError_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaPeekAtLastError_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaDeviceGetAttribute_v5000,
    CUPTI_RUNTIME_TRACE_CBID_cudaStreamIsCapturing_v10000,
    CUPTI_RUNTIME_TRACE_CBID_cudaStreamIsCapturing_ptsz_v10000,
    CUPTI_RUNTIME_TRACE_CBID_cudaStreamGetCaptureInfo_v10010,
    CUPTI_RUNTIME_TRACE_CBID_cudaStreamGetCaptureInfo_ptsz_v10010,
    CUPTI_RUNTIME_TRACE_CBID_cudaStreamGetCaptureInfo_v2_v11030,
    CUPTI_RUNTIME_TRACE_CBID_cudaStreamGetCaptureInfo_v2_ptsz_v11030,
    CUPTI_RUNTIME_TRACE_CBID_cudaStreamGetCaptureInfo_v12030,
    CUPTI_RUNTIME_TRACE_CBID_cudaStreamGetCaptureInfo_ptsz_v12030,
};

constexpr uint32_t kNoisyDriver[] = {
    CUPTI_DRIVER_TRACE_CBID_cuKernelGetAttribute,
    // CUDA 13.0's runtime asks for the kernel and its name at every cudaLaunchKernel (seen on
    // the H200: one cuKernelGetName per launch).
    CUPTI_DRIVER_TRACE_CBID_cuKernelGetName,
    CUPTI_DRIVER_TRACE_CBID_cuLibraryGetKernel,
    CUPTI_DRIVER_TRACE_CBID_cuDevicePrimaryCtxGetState,
    CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent,
    CUPTI_DRIVER_TRACE_CBID_cuCtxGetDevice,
    CUPTI_DRIVER_TRACE_CBID_cuCtxGetDevice_v2,
    CUPTI_DRIVER_TRACE_CBID_cuDeviceGet,
    CUPTI_DRIVER_TRACE_CBID_cuDeviceGetAttribute,
    CUPTI_DRIVER_TRACE_CBID_cuFuncGetAttribute,
    CUPTI_DRIVER_TRACE_CBID_cuPointerGetAttribute,
    CUPTI_DRIVER_TRACE_CBID_cuGetProcAddress,
    CUPTI_DRIVER_TRACE_CBID_cuGetProcAddress_v2,
    CUPTI_DRIVER_TRACE_CBID_cuStreamIsCapturing,
    CUPTI_DRIVER_TRACE_CBID_cuStreamIsCapturing_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuStreamGetCaptureInfo,
    CUPTI_DRIVER_TRACE_CBID_cuStreamGetCaptureInfo_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuStreamGetCaptureInfo_v2,
    CUPTI_DRIVER_TRACE_CBID_cuStreamGetCaptureInfo_v2_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuStreamGetCaptureInfo_v3,
    CUPTI_DRIVER_TRACE_CBID_cuStreamGetCaptureInfo_v3_ptsz,
};

}  // namespace

bool IsNoisyApi(bool driver, uint32_t cbid) {
  if (driver) return std::find(std::begin(kNoisyDriver), std::end(kNoisyDriver), cbid) != std::end(kNoisyDriver);
  return std::find(std::begin(kNoisyRuntime), std::end(kNoisyRuntime), cbid) != std::end(kNoisyRuntime);
}

std::string_view ApiDisplayName(bool driver, std::string_view cupti_name) {
  return driver ? cupti_name : fmt::BareApiName(cupti_name);
}

DecodeResult DecodeActivity(const CUpti_Activity* activity, DecodeContext* context, DecodedRecord* out) {
  switch (activity->kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      return Kernel(Load<CUpti_ActivityKernel10>(activity), context, out);
    case CUPTI_ACTIVITY_KIND_MEMCPY:
      return Memcpy(Load<CUpti_ActivityMemcpy6>(activity), out);
    case CUPTI_ACTIVITY_KIND_MEMCPY2:
      return PeerMemcpy(Load<CUpti_ActivityMemcpyPtoP4>(activity), out);
    case CUPTI_ACTIVITY_KIND_MEMSET:
      return Memset(Load<CUpti_ActivityMemset4>(activity), out);
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
      return Sync(Load<CUpti_ActivitySynchronization2>(activity), context, out);
    case CUPTI_ACTIVITY_KIND_CUDA_EVENT:
      return CudaEvent(Load<CUpti_ActivityCudaEvent2>(activity), out);
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION:
      return ExternalCorrelation(Load<CUpti_ActivityExternalCorrelation>(activity), out);
    case CUPTI_ACTIVITY_KIND_RUNTIME:
      return Api(Load<CUpti_ActivityAPI>(activity), false, context, out);
    case CUPTI_ACTIVITY_KIND_DRIVER:
      return Api(Load<CUpti_ActivityAPI>(activity), true, context, out);
    default:
      return DecodeResult::kUnknown;
  }
}

}  // namespace emo::runtime
