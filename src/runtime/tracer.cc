#include "tracer.h"

// cupti.h (through tracer.h) brings the launch parameter structs of
// generated_cuda_runtime_api_meta.h and generated_cuda_meta.h.

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <span>

#include "cupti_check.h"
#include "thread_name.h"

namespace emo::runtime {
namespace {

// How long a detach waits for the CUPTI calls of the library's other threads in flight
// (BeginCuptiDetach): clock reads take microseconds, the writer's decoding of one buffer a few
// milliseconds.
constexpr int64_t kDetachPatienceNs = 50'000'000;

// Kernel and graph launches: the sequence the period finder reads (EnableLaunchCallbacks turns all
// four lists on and off). Runtime launches need the exit callback too, to tell the driver launch a
// runtime call makes from one the program makes.
constexpr CUpti_CallbackId kRuntimeLaunches[] = {
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000,
    CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000,
    CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000,
};
constexpr CUpti_CallbackId kRuntimeGraphLaunches[] = {
    CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000,
    CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000,
};
constexpr CUpti_CallbackId kDriverLaunches[] = {
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz,
};
constexpr CUpti_CallbackId kDriverGraphLaunches[] = {
    CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch,
    CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz,
};

// Anchor calls (anchor_finder.h): host syncs and copies, which most loops make a few times per
// iteration; followed from the start, so that once the loop is found one of them can stand in
// for the launch callbacks. Rare next to launches, so they cost little.
constexpr CUpti_CallbackId kRuntimeAnchors[] = {
    CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_ptds_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_ptsz_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_ptsz_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaEventSynchronize_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020,
};
constexpr CUpti_CallbackId kDriverAnchors[] = {
    CUPTI_DRIVER_TRACE_CBID_cuMemcpy,
    CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync,
    CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2_ptds,
    CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2_ptds,
    CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize,
    CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuEventSynchronize,
    CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize,
};

// The activity kinds of the window; never CUPTI_ACTIVITY_KIND_KERNEL, which serializes kernels.
// The GPU-side kinds, switched on and off with each window.
constexpr CUpti_ActivityKind kGpuActivityKinds[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,          CUPTI_ACTIVITY_KIND_MEMCPY2,
    CUPTI_ACTIVITY_KIND_MEMSET,            CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, CUPTI_ACTIVITY_KIND_CUDA_EVENT,
};
// The API kinds, which give every record its correlation id. Measured on the H200 (CUDA 13.0,
// CUPTI 130001): enabling them again while the program is inside a CUDA call (blocked in a
// stream or event sync, say) leaves every later API and GPU record with one stale correlation
// id, so a trace's launches no longer find their kernels. They stay on from the start until a
// window has been traced, and come back on only for a later window.
constexpr CUpti_ActivityKind kApiActivityKinds[] = {
    CUPTI_ACTIVITY_KIND_RUNTIME,
    CUPTI_ACTIVITY_KIND_DRIVER,
    CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
};

// Thread-local: how deep this thread is inside runtime launch calls, as of launch-callback
// generation t_launch_generation; and inside runtime anchor calls, as of CUPTI attachment
// t_anchor_generation.
thread_local int t_runtime_launch_depth = 0;
thread_local uint32_t t_launch_generation = 0;
thread_local int t_runtime_anchor_depth = 0;
thread_local uint32_t t_anchor_generation = 0;
// `emo run` (Tracer::AfterLaunch): the launch in progress on this thread as the application
// counts them, the stream of the latest driver launch, and whether the thread is making a call of
// the follower's own (a spin launch, an event record).
thread_local uint64_t t_launch_seq = 0;
thread_local void* t_driver_stream = nullptr;
thread_local bool t_driver_stream_known = false;
thread_local bool t_in_emo_call = false;

// Where a callback stands among nested calls: the entry or exit of an outermost call (a runtime
// call when no runtime call of its kind is in progress on this thread, `depth` counting them; a
// driver call outside any), or a call made inside another.
CallSite SiteOf(CUpti_CallbackDomain domain, const CUpti_CallbackData* data, int& depth) {
  const bool entry = data->callbackSite == CUPTI_API_ENTER;
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
    if (entry) return depth++ == 0 ? CallSite::kOutermostEntry : CallSite::kInner;
    if (depth == 0) return CallSite::kInner;  // an exit whose entry came before the callbacks went on
    return --depth == 0 ? CallSite::kOutermostExit : CallSite::kInner;
  }
  if (depth > 0) return CallSite::kInner;
  return entry ? CallSite::kOutermostEntry : CallSite::kOutermostExit;
}
bool OutermostEntry(CUpti_CallbackDomain domain, const CUpti_CallbackData* data, int& depth) {
  return SiteOf(domain, data, depth) == CallSite::kOutermostEntry;
}

// Per callback id of a domain, whether it is in `ids`: every launch callback asks whether it is
// an anchor call, so that is a table lookup rather than a search.
template <size_t Size, size_t N>
constexpr std::array<bool, Size> Membership(const CUpti_CallbackId (&ids)[N]) {
  std::array<bool, Size> member{};
  for (const CUpti_CallbackId id : ids) member[id] = true;
  return member;
}
constexpr auto kIsRuntimeAnchor = Membership<CUPTI_RUNTIME_TRACE_CBID_SIZE>(kRuntimeAnchors);
constexpr auto kIsDriverAnchor = Membership<CUPTI_DRIVER_TRACE_CBID_SIZE>(kDriverAnchors);
// The anchor calls that return only when the work before them is done: at their exit a block
// session may detach CUPTI without losing a record of the window (Tracer::RequestDetach).
constexpr CUpti_CallbackId kRuntimeWaits[] = {
    CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020,          CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_ptds_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020, CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_ptsz_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaEventSynchronize_v3020, CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020,
};
constexpr CUpti_CallbackId kDriverWaits[] = {
    CUPTI_DRIVER_TRACE_CBID_cuMemcpy,           CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2_ptds, CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize,
    CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize_ptsz, CUPTI_DRIVER_TRACE_CBID_cuEventSynchronize,
    CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize,
};
constexpr auto kIsRuntimeWait = Membership<CUPTI_RUNTIME_TRACE_CBID_SIZE>(kRuntimeWaits);
constexpr auto kIsDriverWait = Membership<CUPTI_DRIVER_TRACE_CBID_SIZE>(kDriverWaits);

// Whether `cbid` of `domain` is marked in the domain's table (runtime or driver).
bool Marked(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, std::span<const bool> runtime,
            std::span<const bool> driver) {
  const std::span<const bool> member = domain == CUPTI_CB_DOMAIN_RUNTIME_API ? runtime : driver;
  return cbid < member.size() && member[cbid];
}

bool IsWait(CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  return Marked(domain, cbid, kIsRuntimeWait, kIsDriverWait);
}

constexpr auto kIsRuntimeGraphLaunch = Membership<CUPTI_RUNTIME_TRACE_CBID_SIZE>(kRuntimeGraphLaunches);
constexpr auto kIsDriverGraphLaunch = Membership<CUPTI_DRIVER_TRACE_CBID_SIZE>(kDriverGraphLaunches);

bool IsGraphLaunch(CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  return Marked(domain, cbid, kIsRuntimeGraphLaunch, kIsDriverGraphLaunch);
}

bool IsAnchor(CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  return Marked(domain, cbid, kIsRuntimeAnchor, kIsDriverAnchor);
}

// Turns the callbacks of `ids` in `domain` on or off.
template <size_t N>
void SetCallbacks(CUpti_SubscriberHandle subscriber, CUpti_CallbackDomain domain, const CUpti_CallbackId (&ids)[N],
                  bool on) {
  for (const CUpti_CallbackId id : ids) EMO_CUPTI_OK(cuptiEnableCallback(on ? 1 : 0, subscriber, domain, id));
}

// The launch callbacks: kernel and graph launches of both APIs.
void EnableLaunchCallbacks(CUpti_SubscriberHandle subscriber, bool on) {
  SetCallbacks(subscriber, CUPTI_CB_DOMAIN_RUNTIME_API, kRuntimeLaunches, on);
  SetCallbacks(subscriber, CUPTI_CB_DOMAIN_RUNTIME_API, kRuntimeGraphLaunches, on);
  SetCallbacks(subscriber, CUPTI_CB_DOMAIN_DRIVER_API, kDriverLaunches, on);
  SetCallbacks(subscriber, CUPTI_CB_DOMAIN_DRIVER_API, kDriverGraphLaunches, on);
}

uint64_t Bits(const void* p) { return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p)); }

// FNV-1a of a name, for the entry points whose parameters are not in the CUDA headers.
uint64_t HashName(const char* s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (int i = 0; s != nullptr && s[i] != '\0' && i < 512; ++i) {
    h = (h ^ static_cast<unsigned char>(s[i])) * 0x100000001b3ull;
  }
  return h;
}

// A driver launch names a CUfunction, which a library loaded again hands out anew: on the H200,
// PyTorch's decode loop loaded a cuBLAS library at every step, so one kernel had a new
// CUfunction each step and the launch sequence never repeated. The kernel's name (CUPTI's
// symbolName) is the stable identity; it is hashed once per CUfunction through a per-thread
// direct-mapped cache (no allocation, no lock in the launch path).
uint64_t DriverFunction(const void* f, const char* symbol) {
  if (symbol == nullptr || symbol[0] == '\0') return Bits(f);
  struct Entry {
    const void* f = nullptr;
    uint64_t hash = 0;
  };
  thread_local Entry cache[1024];
  Entry& e = cache[(Bits(f) >> 4) & 1023];
  if (e.f != f) {
    e.f = f;
    e.hash = HashName(symbol);
  }
  return e.hash;
}

template <typename Params>
const Params* ParamsOf(const CUpti_CallbackData* d) {
  return static_cast<const Params*>(d->functionParams);
}

// What identifies a launch: the launched host stub, CUfunction or graph exec, tagged by kind so
// a pointer seen through two entry points cannot collide with another kind's.
uint64_t Signature(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const CUpti_CallbackData* d) {
  constexpr uint64_t kRuntimeKernel = 1, kDriverKernel = 2, kGraph = 3, kNamed = 4;
  if (d->functionParams != nullptr) {
    if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
      switch (cbid) {
        case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000:
          return kRuntimeKernel ^ Bits(ParamsOf<cudaLaunchKernel_v7000_params>(d)->func);
        case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000:
          return kRuntimeKernel ^ Bits(ParamsOf<cudaLaunchKernel_ptsz_v7000_params>(d)->func);
        case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060:
          return kRuntimeKernel ^ Bits(ParamsOf<cudaLaunchKernelExC_v11060_params>(d)->func);
        case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060:
          return kRuntimeKernel ^ Bits(ParamsOf<cudaLaunchKernelExC_ptsz_v11060_params>(d)->func);
        case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000:
          return kRuntimeKernel ^ Bits(ParamsOf<cudaLaunchCooperativeKernel_v9000_params>(d)->func);
        case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000:
          return kRuntimeKernel ^ Bits(ParamsOf<cudaLaunchCooperativeKernel_ptsz_v9000_params>(d)->func);
        case CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000:
          return kGraph ^ Bits(ParamsOf<cudaGraphLaunch_v10000_params>(d)->graphExec);
        case CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000:
          return kGraph ^ Bits(ParamsOf<cudaGraphLaunch_ptsz_v10000_params>(d)->graphExec);
        default:
          break;
      }
    } else {
      switch (cbid) {
        case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
          return kDriverKernel ^ DriverFunction(ParamsOf<cuLaunchKernel_params>(d)->f, d->symbolName);
        case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz:
          return kDriverKernel ^ DriverFunction(ParamsOf<cuLaunchKernel_ptsz_params>(d)->f, d->symbolName);
        case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx:
          return kDriverKernel ^ DriverFunction(ParamsOf<cuLaunchKernelEx_params>(d)->f, d->symbolName);
        case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz:
          return kDriverKernel ^ DriverFunction(ParamsOf<cuLaunchKernelEx_ptsz_params>(d)->f, d->symbolName);
        case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel:
          return kDriverKernel ^ DriverFunction(ParamsOf<cuLaunchCooperativeKernel_params>(d)->f, d->symbolName);
        case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz:
          return kDriverKernel ^ DriverFunction(ParamsOf<cuLaunchCooperativeKernel_ptsz_params>(d)->f, d->symbolName);
        case CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch:
          return kGraph ^ Bits(ParamsOf<cuGraphLaunch_params>(d)->hGraph);
        case CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz:
          return kGraph ^ Bits(ParamsOf<cuGraphLaunch_ptsz_params>(d)->hGraphExec);
        default:
          break;
      }
    }
  }
  // __cudaLaunchKernel (CUDA 13's <<<>>>) has no parameter struct in the 13.0 headers: its
  // kernel's name stands in.
  return kNamed ^ HashName(d->symbolName);
}

// The stream a launch call enqueues on, for the follower's spin or event behind it; `known` false where
// the call's parameters do not say (CUDA 13's __cudaLaunchKernel). Per-thread-stream variants
// (_ptsz) take a null stream as the calling thread's default stream.
void* LaunchStream(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const CUpti_CallbackData* d, bool* known) {
  *known = d->functionParams != nullptr;
  if (!*known) return nullptr;
  void* const kPerThread = reinterpret_cast<void*>(uintptr_t{2});  // CU_STREAM_PER_THREAD
  auto per_thread = [&](void* s) { return s != nullptr ? s : kPerThread; };
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
    switch (cbid) {
      case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000:
        return ParamsOf<cudaLaunchKernel_v7000_params>(d)->stream;
      case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000:
        return per_thread(ParamsOf<cudaLaunchKernel_ptsz_v7000_params>(d)->stream);
      case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000:
        return ParamsOf<cudaLaunchCooperativeKernel_v9000_params>(d)->stream;
      case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000:
        return per_thread(ParamsOf<cudaLaunchCooperativeKernel_ptsz_v9000_params>(d)->stream);
      case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060:
      case CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060: {
        const cudaLaunchConfig_t* config = ParamsOf<cudaLaunchKernelExC_v11060_params>(d)->config;
        *known = config != nullptr;
        if (!*known) return nullptr;
        return cbid == CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060 ? config->stream : per_thread(config->stream);
      }
      case CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000:
        return ParamsOf<cudaGraphLaunch_v10000_params>(d)->stream;
      case CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000:
        return per_thread(ParamsOf<cudaGraphLaunch_ptsz_v10000_params>(d)->stream);
      default:
        *known = false;
        return nullptr;
    }
  }
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
      return ParamsOf<cuLaunchKernel_params>(d)->hStream;
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz:
      return per_thread(ParamsOf<cuLaunchKernel_ptsz_params>(d)->hStream);
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel:
      return ParamsOf<cuLaunchCooperativeKernel_params>(d)->hStream;
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz:
      return per_thread(ParamsOf<cuLaunchCooperativeKernel_ptsz_params>(d)->hStream);
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx:
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz: {
      const CUlaunchConfig* config = ParamsOf<cuLaunchKernelEx_params>(d)->config;
      *known = config != nullptr;
      if (!*known) return nullptr;
      return cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx ? config->hStream : per_thread(config->hStream);
    }
    case CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch:
      return ParamsOf<cuGraphLaunch_params>(d)->hStream;
    case CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz:
      return per_thread(ParamsOf<cuGraphLaunch_ptsz_params>(d)->hStream);
    default:
      *known = false;
      return nullptr;
  }
}

// Bytes moved by an anchor copy (0 for a sync): part of its signature, so that the loss read
// back each step is told apart from a batch copied in.
uint64_t AnchorBytes(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const CUpti_CallbackData* d) {
  if (d->functionParams == nullptr) return 0;
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
    switch (cbid) {
      case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020:
        return ParamsOf<cudaMemcpy_v3020_params>(d)->count;
      case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_ptds_v7000:
        return ParamsOf<cudaMemcpy_ptds_v7000_params>(d)->count;
      case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020:
        return ParamsOf<cudaMemcpyAsync_v3020_params>(d)->count;
      case CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_ptsz_v7000:
        return ParamsOf<cudaMemcpyAsync_ptsz_v7000_params>(d)->count;
      default:
        return 0;
    }
  }
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpy:
      return ParamsOf<cuMemcpy_params>(d)->ByteCount;
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync:
      return ParamsOf<cuMemcpyAsync_params>(d)->ByteCount;
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync_ptsz:
      return ParamsOf<cuMemcpyAsync_ptsz_params>(d)->ByteCount;
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2:
      return ParamsOf<cuMemcpyHtoD_v2_params>(d)->ByteCount;
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2_ptds:
      return ParamsOf<cuMemcpyHtoD_v2_ptds_params>(d)->ByteCount;
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2:
      return ParamsOf<cuMemcpyDtoH_v2_params>(d)->ByteCount;
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2_ptds:
      return ParamsOf<cuMemcpyDtoH_v2_ptds_params>(d)->ByteCount;
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2:
      return ParamsOf<cuMemcpyHtoDAsync_v2_params>(d)->ByteCount;
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2_ptsz:
      return ParamsOf<cuMemcpyHtoDAsync_v2_ptsz_params>(d)->ByteCount;
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2:
      return ParamsOf<cuMemcpyDtoHAsync_v2_params>(d)->ByteCount;
    case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2_ptsz:
      return ParamsOf<cuMemcpyDtoHAsync_v2_ptsz_params>(d)->ByteCount;
    default:
      return 0;
  }
}

std::string CommandLine() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  while (!raw.empty() && raw.back() == '\0') raw.pop_back();
  if (raw.size() > 4096) raw.resize(4096);
  return MetaValue(raw);
}

std::string EnvOr(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? MetaValue(v) : fallback;
}

std::string HostName() {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) return "unknown";
  return host;
}

// The file libcupti was loaded from: the launcher points NVTX_INJECTION64_PATH at it so that
// NVTX ranges reach CUPTI's NVTX callbacks.
std::string CuptiLibraryPath() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&cuptiGetVersion), &info) != 0 && info.dli_fname != nullptr) {
    return info.dli_fname;
  }
  return "";
}

// The quiet phases' marks (EMO_TRACE_QUIET_LOG), replacing the file; errno tells why not.
bool WriteQuietLog(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  out.flush();
  return static_cast<bool>(out);
}

}  // namespace

bool IsWaitCall(uint32_t anchor) {
  return IsWait(static_cast<CUpti_CallbackDomain>(anchor >> 24), anchor & 0xffffffu);
}

std::atomic<Tracer*> Tracer::current_{nullptr};
std::atomic<uint32_t> Tracer::sessions_{0};

bool Tracer::Start(const InjectConfig& config, std::string* error, Begin begin) {
  config_ = config;
  begin_ = begin;
  session_ = sessions_.fetch_add(1) + 1;
  // Each session's launch generations are its own, so a thread's nesting depth from an earlier
  // session is reset by the generation check alone (OnLaunch).
  launch_generation_.store(session_ << 16, std::memory_order_relaxed);
  attach_generation_.store(session_ << 16, std::memory_order_relaxed);
  pid_ = static_cast<int>(getpid());
  // After an earlier block's detach: the clock read attaches CUPTI again on this thread, the only
  // one of the library's running (the earlier session's stopped at its end).
  OpenCuptiGate();
  clock_ = ReadClockReference();
  driver_.Load();
  // The pattern compiled when the configuration was read; compile errors cannot reach here.
  try {
    iteration_regex_ = std::make_unique<std::regex>(config_.nvtx_regex, std::regex::ECMAScript | std::regex::optimize);
  } catch (const std::regex_error&) {
    iteration_regex_ = std::make_unique<std::regex>(kDefaultNvtxRegex, std::regex::ECMAScript | std::regex::optimize);
  }

  // NVTX reads NVTX_INJECTION64_PATH at the program's first NVTX call; most programs make it
  // after CUDA is initialized (here), so pointing it at this CUPTI now lets their ranges reach
  // CUPTI's NVTX callbacks even when the launcher did not set it. A program that used NVTX
  // before initializing CUDA keeps its ranges to itself (meta nvtx.injection says what was set).
  if (const std::string cupti = CuptiLibraryPath(); !cupti.empty()) setenv("NVTX_INJECTION64_PATH", cupti.c_str(), 0);

  if (!Subscribe(error)) return false;
  int fd = -1;
  if (!OpenOutput(&path_, &fd, error)) {
    EMO_CUPTI_OK(cuptiUnsubscribe(subscriber_));
    return false;
  }
  finder_.emplace();
  if (const char* schedule = std::getenv(kRunScheduleEnv);
      begin_ == Begin::kAtCudaInit && schedule != nullptr && *schedule != '\0') {
    clock_follower_ = std::make_unique<ClockFollower>();
    std::string why;
    if (clock_follower_->Load(schedule, &why)) {
      // Switches are placed by launch: the launch callbacks stay on, unless the plan needs no
      // launch once its clock is in force.
      if (!clock_follower_->may_follow_by_anchor()) config_.anchor = 0;
      if (clock_follower_->wants_launch_exits()) after_launch_ = clock_follower_.get();
    } else {
      std::fprintf(stderr, "emo run: %s; the clocks are left at the default\n", why.c_str());
      clock_follower_.reset();
    }
  }
  if (config_.mode == TraceMode::kTrace) window_.emplace(config_.warmup, config_.iterations, /*pretrace=*/true);
  // Quiet phases are for the tracer of `emo trace`; `emo run`'s follower and a block never settle.
  if (config_.quiet_ms > 0 && begin_ == Begin::kAtCudaInit && !clock_follower_) {
    quiet_.emplace(config_.quiet_ms * 1'000'000);
    std::fprintf(stderr,
                 "emo trace: EMO_TRACE_QUIET_MS=%lld, a benchmark knob: after the window CUPTI is detached for "
                 "%lld ms and attached again, once a run (CUPTI aborts a program whose callbacks are switched after "
                 "repeated detaches; docs/runtime.md)\n",
                 static_cast<long long>(config_.quiet_ms), static_cast<long long>(config_.quiet_ms));
  }
  const size_t pool = static_cast<size_t>(config_.buffer_pool_mib) << 20;
  if (!writer_.Start(fd, path_, pool, [this](uint32_t context) { return DeviceOfContext(context); })) {
    *error = "cannot write " + path_ + " (" + std::strerror(errno) + ")";
    unlink(path_.c_str());
    EMO_CUPTI_OK(cuptiUnsubscribe(subscriber_));
    return false;
  }
  auto fail = [&](std::string why) {
    *error = std::move(why);
    writer_.Finish("", false);
    unlink(path_.c_str());
    EMO_CUPTI_OK(cuptiUnsubscribe(subscriber_));
    current_.store(nullptr, std::memory_order_release);
    return false;
  };
  current_.store(this, std::memory_order_release);
  if (config_.mode == TraceMode::kTrace) {
    if (!RegisterActivityBuffers()) return fail("cannot receive CUPTI activity records (cuptiActivityRegisterCallbacks failed)");
    activity_buffers_registered_ = true;
  }
  if (!EnableCallbacks(error)) return fail(*error);
  writer_.AddMeta(StartMeta(path_));
  // EMO_TRACE_NVML=0 leaves NVML alone (no energy, no power): to measure what sampling costs.
  if (const char* nvml = std::getenv("EMO_TRACE_NVML"); nvml == nullptr || std::string(nvml) != "0") {
    gpus_.Start(clock_, &driver_, [this](const DecodedRecord& r, std::string name, int offset) {
      writer_.AddRecord(r, std::move(name), offset);
    });
  }
  if (begin_ == Begin::kBlock) AddLiveContexts();
  // Pretrace: on until the first loop is found (the window decides from there), so a program
  // whose iterations are never found is traced from start to exit.
  if (config_.mode == TraceMode::kTrace) SetActivities(true);
  if (clock_follower_) clock_follower_->Start(&driver_);
  control_ = StartNamedThread("emo-control", [this] { ControlLoop(); });
  return true;
}

bool Tracer::Subscribe(std::string* error) {
  CUpti_SubscriberParams params{};
  params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
  params.subscriberName = "EMO trace";
  char previous[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN] = {};
  params.oldSubscriberName = previous;
  params.oldSubscriberSize = sizeof(previous);
  const CUptiResult subscribed = cuptiSubscribe_v2(&subscriber_, &Tracer::OnCallback, this, &params);
  if (subscribed == CUPTI_SUCCESS) return true;
  *error = std::string("cannot attach to CUDA (cuptiSubscribe_v2: ") + CuptiResultString(subscribed) + ")";
  if (previous[0] != '\0') {
    *error += "; CUPTI is already used by " + std::string(previous);
  } else if (subscribed == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
    *error += "; another profiler (Nsight, the PyTorch profiler) holds CUPTI";
  }
  return false;
}

bool Tracer::RegisterActivityBuffers() {
  if (!EMO_CUPTI_OK(cuptiActivityRegisterCallbacks(&Tracer::OnBufferRequested, &Tracer::OnBufferCompleted))) {
    return false;
  }
  // Both only refine the records; tracing goes on without them.
  EMO_CUPTI_OK(cuptiActivityEnableCudaEventDeviceTimestamps(1));
  // Off: no records for event/stream queries that found the work unfinished (polling).
  EMO_CUPTI_OK(cuptiActivityEnableAllSyncRecords(0));
  return true;
}

bool Tracer::OpenOutput(std::string* path, int* fd, std::string* error) const {
  const std::string rank = EnvOr("RANK", ("pid" + std::to_string(pid_)).c_str());
  *path = ExpandOutputPath(config_.output_pattern, rank, pid_, HostName());
  for (int attempt = 0; attempt < 2; ++attempt) {
    *fd = open(path->c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (*fd < 0) {
      *error = "cannot open " + *path + " (" + std::strerror(errno) + ")";
      return false;
    }
    // Two live processes of one job can expand to the same name (a child that inherited RANK);
    // the lock keeps the second off the first's file.
    if (flock(*fd, LOCK_EX | LOCK_NB) == 0) {
      if (ftruncate(*fd, 0) != 0) {
        *error = "cannot truncate " + *path + " (" + std::strerror(errno) + ")";
        close(*fd);
        return false;
      }
      return true;
    }
    const int e = errno;
    close(*fd);
    if (e != EWOULDBLOCK || attempt == 1) {
      *error = "cannot lock " + *path + " (" + std::strerror(e) + ")";
      return false;
    }
    *path += ".pid" + std::to_string(pid_);
  }
  return false;
}

bool Tracer::EnableCallbacks(std::string* error) {
  EnableLaunchCallbacks(subscriber_, true);
  SetCallbacks(subscriber_, CUPTI_CB_DOMAIN_RUNTIME_API, kRuntimeAnchors, true);
  SetCallbacks(subscriber_, CUPTI_CB_DOMAIN_DRIVER_API, kDriverAnchors, true);
  if (!EMO_CUPTI_OK(
          cuptiEnableCallback(1, subscriber_, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_CREATED)) ||
      !EMO_CUPTI_OK(cuptiEnableCallback(1, subscriber_, CUPTI_CB_DOMAIN_RESOURCE,
                                        CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING))) {
    *error = "cannot follow CUDA contexts (cuptiEnableCallback for the resource domain failed)";
    return false;
  }
  constexpr CUpti_CallbackId kNvtx[] = {
      CUPTI_CBID_NVTX_nvtxRangePushA,
      CUPTI_CBID_NVTX_nvtxRangePushW,
      CUPTI_CBID_NVTX_nvtxRangePushEx,
      CUPTI_CBID_NVTX_nvtxRangePop,
      CUPTI_CBID_NVTX_nvtxRangeStartA,
      CUPTI_CBID_NVTX_nvtxRangeStartW,
      CUPTI_CBID_NVTX_nvtxRangeStartEx,
      CUPTI_CBID_NVTX_nvtxRangeEnd,
      CUPTI_CBID_NVTX_nvtxDomainRangePushEx,
      CUPTI_CBID_NVTX_nvtxDomainRangePop,
      CUPTI_CBID_NVTX_nvtxDomainRangeStartEx,
      CUPTI_CBID_NVTX_nvtxDomainRangeEnd,
      CUPTI_CBID_NVTX_nvtxDomainRegisterStringA,
      CUPTI_CBID_NVTX_nvtxDomainRegisterStringW,
  };
  for (const CUpti_CallbackId cbid : kNvtx)
    EMO_CUPTI_OK(cuptiEnableCallback(1, subscriber_, CUPTI_CB_DOMAIN_NVTX, cbid));
  return true;
}

std::string Tracer::StartMeta(const std::string& path) const {
  uint32_t cupti_version = 0;
  if (!EMO_CUPTI_OK(cuptiGetVersion(&cupti_version))) cupti_version = 0;
  std::string m;
  auto put = [&m](const char* key, const std::string& value) { m += std::string(key) + "=" + MetaValue(value) + "\n"; };
  put("format", "emo-trace");
  put("tool", std::string("emo-inject ") + EMO_VERSION);
  put("host", HostName());
  put("pid", std::to_string(pid_));
  put("ppid", std::to_string(getppid()));
  put("rank", EnvOr("RANK", "-1"));
  put("local_rank", EnvOr("LOCAL_RANK", "-1"));
  put("world_size", EnvOr("WORLD_SIZE", "-1"));
  put("command", CommandLine());
  put("output", path);
  put("clock.cupti_ns", std::to_string(clock_.cupti_ns));
  put("clock.realtime_ns", std::to_string(clock_.realtime_ns));
  put("clock.monotonic_ns", std::to_string(clock_.monotonic_ns));
  put("cuda.driver_version", std::to_string(driver_.DriverVersion()));
  put("cupti.version", std::to_string(cupti_version));
  put("cupti.library", CuptiLibraryPath());
  put("nvtx.injection", EnvOr("NVTX_INJECTION64_PATH", ""));
  put("session.begin", begin_ == Begin::kBlock ? "block" : "cuda_init");
  put("config.mode", TraceModeName(config_.mode));
  put("config.warmup", std::to_string(config_.warmup));
  put("config.iterations", std::to_string(config_.iterations));
  put("config.buffer_pool_mib", std::to_string(config_.buffer_pool_mib));
  put("iteration.source", "none");
  put("iteration.nvtx_regex", config_.nvtx_regex);
  return m;
}

void CUPTIAPI Tracer::OnCallback(void* userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
  auto* tracer = static_cast<Tracer*>(userdata);
  if (tracer == nullptr || data == nullptr) return;
  // Launches are counted as they are taken from the ring (launches.seen); the hot path adds
  // nothing shared. The others, rare, are counted here (meta callbacks.*).
  const bool launch = (domain == CUPTI_CB_DOMAIN_RUNTIME_API || domain == CUPTI_CB_DOMAIN_DRIVER_API) &&
                      !IsAnchor(domain, cbid);
  if (!launch) tracer->callbacks_.fetch_add(1, std::memory_order_relaxed);
  switch (domain) {
    case CUPTI_CB_DOMAIN_RUNTIME_API:
    case CUPTI_CB_DOMAIN_DRIVER_API:
      if (launch) {
        if (IsGraphLaunch(domain, cbid) && tracer->traced_since_attach_.load(std::memory_order_relaxed)) {
          tracer->graph_traced_.store(true, std::memory_order_relaxed);
        }
        tracer->OnLaunch(domain, cbid, static_cast<const CUpti_CallbackData*>(data));
      } else {
        tracer->OnAnchor(domain, cbid, static_cast<const CUpti_CallbackData*>(data));
      }
      if (const int detach = tracer->detach_requested_.load(std::memory_order_relaxed);
          detach != kDetachNone && static_cast<const CUpti_CallbackData*>(data)->callbackSite == CUPTI_API_EXIT &&
          (detach == kDetachAtAnyExit || IsWait(domain, cbid))) {
        tracer->DetachAtApiExit();
      }
      return;
    case CUPTI_CB_DOMAIN_RESOURCE:
      tracer->OnResource(cbid, static_cast<const CUpti_ResourceData*>(data));
      return;
    case CUPTI_CB_DOMAIN_NVTX:
      tracer->OnNvtx(cbid, data);
      return;
    default:
      return;
  }
}

// The hot path: runs on the application's thread for every kernel launch. No lock, no
// allocation: a timestamp and one push into the ring.
void Tracer::OnLaunch(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const CUpti_CallbackData* data) {
  if (t_in_emo_call) return;  // a spin or event the follower launched or recorded
  if (const uint32_t g = launch_generation_.load(std::memory_order_relaxed); g != t_launch_generation) {
    t_launch_generation = g;
    t_runtime_launch_depth = 0;
  }
  // A runtime launch made inside another (__cudaLaunchKernel calling cudaLaunchKernel) is the
  // same launch; a driver launch inside a runtime launch is the runtime launch itself.
  const CallSite site = SiteOf(domain, data, t_runtime_launch_depth);
  if (after_launch_ != nullptr) AfterLaunch(domain, cbid, data, site);
  if (site != CallSite::kOutermostEntry) return;
  uint64_t seq = 0;
  if (after_launch_ != nullptr) t_launch_seq = seq = launch_seq_.fetch_add(1, std::memory_order_relaxed);
  launches_.TryPush(LaunchEvent{Signature(domain, cbid, data), CuptiNow(), 0, 0, seq});
}

// `emo run` (emulate, switches on the GPU): the stream of a driver launch is kept for the runtime
// call it is made in (CUDA 13's __cudaLaunchKernel has no parameter struct); at the exit of the
// outermost call the launch is enqueued and the follower may add a spin or an event behind it.
void Tracer::AfterLaunch(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const CUpti_CallbackData* data,
                         CallSite site) {
  if (data->callbackSite == CUPTI_API_ENTER) {
    if (domain == CUPTI_CB_DOMAIN_DRIVER_API) t_driver_stream = LaunchStream(domain, cbid, data, &t_driver_stream_known);
    if (site == CallSite::kOutermostEntry && domain == CUPTI_CB_DOMAIN_RUNTIME_API) t_driver_stream_known = false;
    return;
  }
  if (site != CallSite::kOutermostExit) return;
  bool known = false;
  void* stream = LaunchStream(domain, cbid, data, &known);
  if (!known && t_driver_stream_known) {
    stream = t_driver_stream;
    known = true;
  }
  t_in_emo_call = true;
  after_launch_->AfterLaunch(t_launch_seq, stream, known);
  t_in_emo_call = false;
}

// An anchor call: as cheap as a launch, and as rare as the program's syncs and copies. A
// driver call made inside a runtime one (cudaMemcpyAsync calling cuMemcpyAsync) is the same call.
void Tracer::OnAnchor(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const CUpti_CallbackData* data) {
  if (const uint32_t g = attach_generation_.load(std::memory_order_relaxed); g != t_anchor_generation) {
    t_anchor_generation = g;
    t_runtime_anchor_depth = 0;
  }
  if (!OutermostEntry(domain, data, t_runtime_anchor_depth)) return;
  const uint64_t bytes = AnchorBytes(domain, cbid, data);
  const uint32_t call = (static_cast<uint32_t>(domain) << 24) | (cbid & 0xffffffu);
  const uint64_t signature = (0xA5C0000000000000ull | call) ^ (bytes * 0x9E3779B97F4A7C15ull);
  launches_.TryPush(LaunchEvent{signature, CuptiNow(), call, static_cast<uint32_t>(std::min<uint64_t>(bytes, UINT32_MAX))});
}

void Tracer::SetLaunchCallbacks(bool on) {
  if (on == launch_callbacks_on_) return;
  CountLaunchOffStretch(on);
  if (on) launch_generation_.fetch_add(1, std::memory_order_relaxed);
  EnableLaunchCallbacks(subscriber_, on);
  launch_callbacks_on_ = on;
}

// Opens (on = false) or closes a stretch with the launch callbacks off. The count is read
// before they go off and before they come back on, so a callback in flight at either edge
// counts in the stretch: an upper bound. Iterations count in it by their end (WriteIteration),
// not by when this thread gets to them: one the program ended before the stretch is not its.
void Tracer::CountLaunchOffStretch(bool on) {
  const uint64_t n = callbacks_.load(std::memory_order_relaxed);
  if (on) {
    callbacks_launch_off_ += n - callbacks_at_launch_off_;
  } else {
    callbacks_at_launch_off_ = n;
    launch_off_since_ns_ = CuptiNow();
  }
}

void Tracer::AddContext(CUcontext handle) {
  uint32_t context = 0;
  uint32_t device = 0;
  if (!EMO_CUPTI_OK(cuptiGetContextId(handle, &context)) || !EMO_CUPTI_OK(cuptiGetDeviceId(handle, &device))) {
    return;
  }
  {
    std::lock_guard<std::mutex> lock(contexts_mutex_);
    context_devices_[context] = device;
  }
  gpus_.AddDevice(device);
  if (clock_follower_) clock_follower_->OnDevice(device);
}

void Tracer::AddLiveContexts() {
  driver_.ForEachLiveContext([this](void* context) { AddContext(static_cast<CUcontext>(context)); });
}

void Tracer::OnResource(CUpti_CallbackId cbid, const CUpti_ResourceData* data) {
  if (cbid == CUPTI_CBID_RESOURCE_CONTEXT_CREATED) {
    AddContext(data->context);
  } else if (cbid == CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING) {
    // The context's records must leave CUPTI's buffers before the context goes.
    if (ever_traced_.load(std::memory_order_acquire)) {
      EMO_CUPTI_OK(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
    }
  }
}

uint32_t Tracer::DeviceOfContext(uint32_t context) {
  std::lock_guard<std::mutex> lock(contexts_mutex_);
  const auto it = context_devices_.find(context);
  return it == context_devices_.end() ? 0xffffffffu : it->second;
}

void CUPTIAPI Tracer::OnBufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *max_records = 0;
  Tracer* tracer = Current();
  if (tracer == nullptr) {
    *buffer = nullptr;
    *size = 0;
    return;
  }
  *buffer = tracer->writer_.AcquireBuffer(size);
}

void CUPTIAPI Tracer::OnBufferCompleted(CUcontext context, uint32_t stream, uint8_t* buffer, size_t /*size*/,
                                        size_t valid) {
  Tracer* tracer = Current();
  if (tracer == nullptr) return;
  tracer->writer_.SubmitBuffer(buffer, valid);
  size_t dropped = 0;
  if (EMO_CUPTI_OK(cuptiActivityGetNumDroppedRecords(context, stream, &dropped)) && dropped > 0) {
    trace::emo_format::DroppedRecord d{};
    d.time_ns = CuptiNow();
    d.dropped = dropped;
    d.context = 0xffffffffu;
    d.stream = stream;
    d.reason = 1;
    DecodedRecord r;
    r.type = trace::emo_format::RecordType::kDropped;
    r.size = sizeof(d);
    std::memcpy(r.body, &d, sizeof(d));
    tracer->writer_.AddRecord(r);
  }
}

void Tracer::SetActivityKinds(const CUpti_ActivityKind* kinds, size_t n, bool on) {
  for (size_t i = 0; i < n; ++i) {
    const CUpti_ActivityKind kind = kinds[i];
    // A kind this CUPTI refused once is reported once, not at every window.
    const uint64_t bit = uint64_t{1} << (static_cast<unsigned>(kind) & 63);
    if (refused_kinds_ & bit) continue;
    if (on) {
      if (!EMO_CUPTI_OK(cuptiActivityEnable(kind))) refused_kinds_ |= bit;
    } else {
      EMO_CUPTI_OK(cuptiActivityDisable(kind));
    }
  }
}

void Tracer::SetActivities(bool on, bool api_too) {
  if (on && writer_failed_) return;
  if (on && !activity_buffers_registered_) {
    if (!RegisterActivityBuffers()) return;  // reported; the window goes untraced
    activity_buffers_registered_ = true;
  }
  const bool gpu_change = on != activities_on_;
  const bool api_change = on ? !api_on_ : (api_too && api_on_);
  if (!gpu_change && !api_change) return;
  if (gpu_change) SetActivityKinds(kGpuActivityKinds, std::size(kGpuActivityKinds), on);
  activities_on_ = on;
  if (api_change) {
    api_on_ = on;
    SetActivityKinds(kApiActivityKinds, std::size(kApiActivityKinds), on);
  }
  if (on) {
    ever_traced_.store(true, std::memory_order_release);
    traced_since_attach_.store(true, std::memory_order_release);
    if (!api_change) return;
    // Enabling RUNTIME and DRIVER turned every API on; these calls turn the noisy ones off
    // again (the order matters: an enable of the kind overrides earlier per-API settings).
    for (uint32_t cbid = 1; cbid < CUPTI_RUNTIME_TRACE_CBID_SIZE; ++cbid) {
      if (IsNoisyApi(false, cbid)) EMO_CUPTI_OK(cuptiActivityEnableRuntimeApi(cbid, 0));
    }
    for (uint32_t cbid = 1; cbid < CUPTI_DRIVER_TRACE_CBID_SIZE; ++cbid) {
      if (IsNoisyApi(true, cbid)) EMO_CUPTI_OK(cuptiActivityEnableDriverApi(cbid, 0));
    }
    return;
  }
  // Off: deliver what is complete now, the rest (work still queued on the GPU) by a forced
  // flush a little later, when it has run.
  EMO_CUPTI_OK(cuptiActivityFlushAll(0));
  const int64_t now = CuptiNow();
  forced_flush_at_ns_ = now + 2'000'000'000;
  flush_until_ns_ = now + 3'000'000'000;
}

void Tracer::Shutdown(const char* reason) {
  if (static_cast<int>(getpid()) != pid_) return;
  if (shut_down_.exchange(true)) return;
  {
    std::lock_guard<std::mutex> lock(control_mutex_);
    control_stop_ = true;
  }
  control_wake_.notify_one();
  if (control_.joinable()) control_.join();
  // The control thread has stopped: its state is this thread's now. A detach asked for and not
  // yet made is called off; one made and not yet followed by a new subscription left nothing
  // subscribed.
  std::unique_lock<std::mutex> detach_lock(detach_mutex_);
  detach_requested_.store(kDetachNone, std::memory_order_relaxed);
  const bool attached = !detached_.load(std::memory_order_acquire);
  // A block that traced since CUPTI was last attached detaches it at the end (below).
  const bool detach = attached && begin_ == Begin::kBlock && traced_since_attach_.load() && MayDetach();
  if (activities_on_ || api_on_) SetActivities(false, /*api_too=*/true);
  if (attached && traced_since_attach_.load()) EMO_CUPTI_OK(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
  if (attached) EMO_CUPTI_OK(cuptiUnsubscribe(subscriber_));
  detach_lock.unlock();
  // The clock goes back to the default before the slow parts of the exit.
  const std::string run_meta = clock_follower_ ? clock_follower_->Stop() : std::string();
  gpus_.Stop();
  std::string m = run_meta;
  auto put = [&m](const char* key, const std::string& value) { m += std::string(key) + "=" + MetaValue(value) + "\n"; };
  put("end.reason", reason);
  put("end.cupti_ns", std::to_string(CuptiNow()));
  const uint64_t loops = loop_offset_ + (finder_ ? finder_->loops() : 0);
  put("iteration.source", nvtx_source_ ? "nvtx" : loops > 0 ? "launch_period" : "none");
  put("iteration.count", std::to_string(next_index_));
  put("launches.seen", std::to_string(launches_seen_.load()));
  put("launches.dropped", std::to_string(launches_.dropped()));
  put("nvml", gpus_.nvml_status());
  if (finder_) {
    put("launch_period.loops", std::to_string(loops));
    put("launch_period.lost", std::to_string(lost_offset_ + finder_->lost()));
  }
  put("cupti.detaches", std::to_string(detaches_));
  if (quiet_) {
    put("quiet.phases", std::to_string(quiet_->quiet_phases()));
    put("quiet.phase_ms", std::to_string(config_.quiet_ms));
    if (!config_.quiet_log.empty() && !WriteQuietLog(config_.quiet_log, QuietMarksText(quiet_->marks()))) {
      std::fprintf(stderr, "emo trace: cannot write the quiet phases to %s (%s)\n", config_.quiet_log.c_str(),
                   std::strerror(errno));
    }
  }
  if (!reattach_error_.empty()) put("cupti.reattach_error", reattach_error_);
  put("anchor.follows", std::to_string(anchor_follows_));
  put("anchor.given_up", std::to_string(anchor_given_up_));
  if (!launch_callbacks_on_) CountLaunchOffStretch(/*on=*/true);  // the stretch open at the end
  put("callbacks.non_launch", std::to_string(callbacks_.load()));
  put("callbacks.launch_off", std::to_string(callbacks_launch_off_));
  put("callbacks.launch_off_iterations", std::to_string(iterations_launch_off_));
  if (!anchor_last_reason_.empty()) put("anchor.given_up_reason", anchor_last_reason_);
  if (window_ && !nvtx_source_ && loops == 0) {
    put("window.note", "no iterations were found: activities were on from the start to the end");
  }
  // The writer adds its record counts once the last records are written.
  writer_.Finish(m, true);
  if (begin_ != Begin::kBlock) return;
  // The next block session's buffers are its own; the callbacks of this one are unsubscribed.
  current_.store(nullptr, std::memory_order_release);
  // Activities enabled on running contexts leave a cost after they are disabled (RequestDetach):
  // a block that traced since CUPTI was last attached detaches it, so the program's steps after
  // the block run as before it. NVIDIA advises detaching at the exit of a CUDA call; here it is
  // the thread leaving the block, between its CUDA calls. The next CUPTI call attaches again.
  if (detach && BeginCuptiDetach(kDetachPatienceNs)) {
    EMO_CUPTI_OK(cuptiFinalize());
    EndCuptiDetach();
  }
}

// Measured on the H200 (CUDA 13.0; bench/gpu/cupti_attach_probe.cu, BENCHMARKS.md "emo.trace"):
// activity kinds enabled on a running context leave the launches made after they are disabled
// slower (a loop of 500 empty launches: 2.0-2.3 ms a step plain, 2.5-3.1 ms disabled), and
// cuptiFinalize takes that away (1.9-2.4 ms). cuptiFinalize also waits for the GPU's queued
// work and then drops the records CUPTI still holds: the detach flushes them first, at the
// exit of a call that waited for the work before it (a sync, a copy to the host), so the
// window's records are complete; a loop that makes no such call detaches at any call's exit
// after the forced flush that fetches the window's last records (2 s after the window).
void Tracer::RequestDetach(int when) {
  if (!MayDetach()) return;
  // Launches are the calls a loop surely makes; the iterations are followed afresh after it.
  if (when == kDetachAtAnyExit) SetLaunchCallbacks(true);
  detach_requested_.store(when, std::memory_order_release);
}

void Tracer::DetachAtApiExit() {
  // Never waits inside a callback: cuptiFinalize on another thread may be waiting for this one to
  // return. Busy (the control thread's turn, another thread detaching): a later exit tries again.
  std::unique_lock<std::mutex> lock(detach_mutex_, std::try_to_lock);
  if (!lock.owns_lock()) return;
  const int when = detach_requested_.exchange(kDetachNone, std::memory_order_acq_rel);
  if (when == kDetachNone) return;  // another did
  if (!MayDetach()) return;  // not asked again (RequestDetach)
  EMO_CUPTI_OK(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
  // The records just flushed are decoded first: decoding calls CUPTI, which after the finalize
  // would attach it again on the writer's thread. The library's other threads (NVML's, the
  // writer's, the program's other callbacks) make no CUPTI call while it goes, nor after it until
  // Reattach.
  if (!writer_.WaitBuffersDecoded(kDetachPatienceNs) || !BeginCuptiDetach(kDetachPatienceNs)) {
    detach_requested_.store(when, std::memory_order_release);  // a later exit tries again
    return;
  }
  EMO_CUPTI_OK(cuptiFinalize());
  EndCuptiDetach();
  traced_since_attach_.store(false, std::memory_order_release);
  detached_at_monotonic_ns_.store(MonotonicNow(), std::memory_order_relaxed);
  detached_.store(true, std::memory_order_release);
}

bool Tracer::MayDetach() {
  if (!graph_traced_.load(std::memory_order_relaxed)) return true;
  if (!detach_skip_reported_) {
    detach_skip_reported_ = true;
    std::fprintf(stderr,
                 "emo trace: CUPTI stays attached after the window: a CUDA graph ran while it traced, and CUPTI's "
                 "detach would make the graph's later launches fail (docs/runtime.md)\n");
    writer_.AddMeta("cupti.detach_skipped=a CUDA graph ran while CUPTI traced\n");
  }
  return false;
}

void Tracer::Reattach() {
  // CUPTI forgot the subscriber, its callbacks, the buffer functions and its context ids.
  // No activity call is made until a later window needs one (SetActivities): the buffer functions
  // are registered again then. The window's records were flushed at the detach.
  //
  // The calls made while nothing was subscribed are a hole in the launch sequence and between
  // anchor calls or NVTX ranges: the iterations are found again from here. What the ring holds
  // now is from before the hole (no callback pushes while nothing is subscribed) and only counts.
  // All of this comes before the subscription: a launch made the moment the callbacks are on
  // already belongs to the new sequence and must reach the new finder.
  uint64_t launches_before = 0;
  for (LaunchEvent e; launches_.TryPop(&e);) launches_before += e.anchor == 0 ? 1 : 0;
  launches_seen_.fetch_add(launches_before, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(nvtx_mutex_);
    nvtx_boundaries_.clear();
  }
  FindIterationsAfresh();
  nvtx_started_ = false;
  attach_generation_.fetch_add(1, std::memory_order_relaxed);
  launch_generation_.fetch_add(1, std::memory_order_relaxed);
  std::string why;
  // The subscription attaches CUPTI: no other thread of ours calls it meanwhile. The callbacks come
  // on after it, so each of them reads CUPTI's clock again.
  BeginCuptiAttach();
  const bool subscribed = Subscribe(&why);
  EndCuptiAttach();
  if (!subscribed || !EnableCallbacks(&why)) {
    // Nothing is followed from here: the trace ends with the iterations before the detach.
    reattach_error_ = why;
    std::fprintf(stderr, "emo trace: after the window: %s; the block's later iterations are not recorded\n",
                 why.c_str());
    return;
  }
  ++detaches_;
  activity_buffers_registered_ = false;
  forced_flush_at_ns_ = 0;
  flush_until_ns_ = 0;
  // A stretch with the launch callbacks off ends here (none came while detached).
  if (!launch_callbacks_on_) CountLaunchOffStretch(/*on=*/true);
  launch_callbacks_on_ = true;  // EnableCallbacks turned them on
  detached_.store(false, std::memory_order_release);
  AddLiveContexts();
}

}  // namespace emo::runtime
