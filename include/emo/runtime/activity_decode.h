// Conversion of one CUPTI activity record into one EMO trace record (emo_format.h). A pure
// function of the record and of the names and context→device map the caller provides, so tests
// build CUPTI structs by hand and check every field; it calls no CUPTI function.
//
// Struct versions are those of CUDA 13.0's cupti_activity.h: CUpti_ActivityKernel10,
// CUpti_ActivityMemcpy6, CUpti_ActivityMemcpyPtoP4, CUpti_ActivityMemset4,
// CUpti_ActivitySynchronization2, CUpti_ActivityCudaEvent2, CUpti_ActivityExternalCorrelation,
// CUpti_ActivityAPI. A newer libcupti appends fields to these, so reading through them stays
// correct.
#pragma once

#include <cupti_activity.h>

#include <cstdint>
#include <string_view>

#include "emo/trace/emo_format.h"

namespace emo::runtime {

// One encoded record body; `size` bytes of `body` hold the emo_format struct of `type`.
struct DecodedRecord {
  trace::emo_format::RecordType type = trace::emo_format::RecordType::kApi;
  uint16_t size = 0;
  alignas(8) unsigned char body[96] = {};
};

// What DecodeActivity needs from its caller: string ids and the device of a context.
class DecodeContext {
 public:
  virtual ~DecodeContext() = default;
  // The string id of a kernel's name as CUPTI gives it (mangled).
  virtual uint32_t KernelName(const char* name) = 0;
  // The string id of a runtime (driver = false) or driver API function's name.
  virtual uint32_t ApiName(bool driver, uint32_t cbid) = 0;
  // The CUDA device of a CUPTI context id, 0xffffffff when unknown.
  virtual uint32_t DeviceOfContext(uint32_t context) = 0;
};

enum class DecodeResult {
  kRecord,      // `out` holds a record
  kIncomplete,  // a record without its timestamps (a forced flush caught it unfinished)
  kFiltered,    // a record EMO drops on purpose (noisy API calls, polling queries)
  kUnknown,     // an activity kind EMO does not convert
};

// Converts `activity` into `out`. Kinds: CONCURRENT_KERNEL, MEMCPY, MEMCPY2, MEMSET,
// SYNCHRONIZATION, CUDA_EVENT, EXTERNAL_CORRELATION, RUNTIME, DRIVER.
DecodeResult DecodeActivity(const CUpti_Activity* activity, DecodeContext* context, DecodedRecord* out);

// True for API calls whose records say nothing about the schedule and would dominate the
// trace (cudaGetDevice, cudaGetLastError, cuCtxGetCurrent, ...). The tracer also asks CUPTI not
// to record them; this filter catches them where CUPTI still does.
bool IsNoisyApi(bool driver, uint32_t cbid);

// CUPTI's runtime API names carry the version of the entry point ("cudaLaunchKernel_v7000");
// this strips a trailing "_v" followed by four or more digits. Driver names are the exported
// function names ("cuCtxGetDevice_v2") and are passed through unchanged.
std::string_view ApiDisplayName(bool driver, std::string_view cupti_name);

}  // namespace emo::runtime
