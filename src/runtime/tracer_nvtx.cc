// NVTX ranges through CUPTI's NVTX callback domain. CUPTI sees NVTX calls only when the
// program's NVTX library loads CUPTI as its injection (NVTX_INJECTION64_PATH=<libcupti.so>,
// which `emo trace` sets; the meta chunk's cupti.library names the file).
#include <generated_nvtx_meta.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>

#include "tracer.h"

namespace emo::runtime {
namespace {

namespace fmt = trace::emo_format;

// Deeper pushes are not recorded (a program that pushes without popping must not grow memory).
constexpr size_t kMaxDepth = 1024;
// Open start/end ranges kept; more are dropped.
constexpr size_t kMaxOpenRanges = size_t{1} << 16;
// Names whose regex verdict a thread remembers.
constexpr size_t kMaxCachedNames = 4096;
constexpr uint32_t kNotNested = 0xffffffffu;

struct Frame {
  int64_t start_ns;
  std::string name;
};

// Each thread's push/pop stack.
struct NvtxThread {
  uint32_t session = 0;  // the CUPTI attachment (Tracer::attach_generation_) they belong to
  uint32_t tid = 0;
  std::vector<Frame> stack;
  size_t overflow = 0;  // pushes beyond kMaxDepth not yet popped
  std::unordered_map<std::string, bool> matches;
};

thread_local NvtxThread t_nvtx;

uint32_t ThreadId() {
  if (t_nvtx.tid == 0) t_nvtx.tid = static_cast<uint32_t>(syscall(SYS_gettid));
  return t_nvtx.tid;
}

void AppendUtf8(uint32_t c, std::string* out) {
  if (c < 0x80) {
    *out += static_cast<char>(c);
  } else if (c < 0x800) {
    *out += static_cast<char>(0xC0 | (c >> 6));
    *out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    *out += static_cast<char>(0xE0 | (c >> 12));
    *out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    *out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x110000) {
    *out += static_cast<char>(0xF0 | (c >> 18));
    *out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    *out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    *out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    *out += '?';
  }
}

std::string Ascii(const char* s) { return s != nullptr ? std::string(s) : std::string(); }

std::string Wide(const wchar_t* s) {
  std::string out;
  for (size_t i = 0; s != nullptr && s[i] != 0 && i < 4096; ++i) AppendUtf8(static_cast<uint32_t>(s[i]), &out);
  return out;
}

template <typename Params>
const Params* ParamsOf(const CUpti_NvtxData* d) {
  return static_cast<const Params*>(d->functionParams);
}

uint64_t ReturnedRangeId(const CUpti_NvtxData* d) {
  return d->functionReturnValue != nullptr ? *static_cast<const nvtxRangeId_t*>(d->functionReturnValue) : 0;
}

}  // namespace

void Tracer::OnNvtx(CUpti_CallbackId cbid, const void* data) {
  const auto* d = static_cast<const CUpti_NvtxData*>(data);
  if (d->functionParams == nullptr && cbid != CUPTI_CBID_NVTX_nvtxRangePop) return;
  // Ranges pushed under an earlier session, or before CUPTI was detached, end unseen.
  if (const uint32_t g = attach_generation_.load(std::memory_order_relaxed); t_nvtx.session != g) {
    t_nvtx.session = g;
    t_nvtx.stack.clear();
    t_nvtx.overflow = 0;
    t_nvtx.matches.clear();
  }
  switch (cbid) {
    case CUPTI_CBID_NVTX_nvtxRangePushA:
      return NvtxPush(Ascii(ParamsOf<nvtxRangePushA_params>(d)->message));
    case CUPTI_CBID_NVTX_nvtxRangePushW:
      return NvtxPush(Wide(ParamsOf<nvtxRangePushW_params>(d)->message));
    case CUPTI_CBID_NVTX_nvtxRangePushEx:
      return NvtxPush(NvtxMessage(ParamsOf<nvtxRangePushEx_params>(d)->eventAttrib));
    case CUPTI_CBID_NVTX_nvtxDomainRangePushEx:
      return NvtxPush(NvtxMessage(ParamsOf<nvtxDomainRangePushEx_params>(d)->core.eventAttrib));
    case CUPTI_CBID_NVTX_nvtxRangePop:
    case CUPTI_CBID_NVTX_nvtxDomainRangePop:
      return NvtxPop();
    case CUPTI_CBID_NVTX_nvtxRangeStartA:
      return NvtxStart(ReturnedRangeId(d), Ascii(ParamsOf<nvtxRangeStartA_params>(d)->message));
    case CUPTI_CBID_NVTX_nvtxRangeStartW:
      return NvtxStart(ReturnedRangeId(d), Wide(ParamsOf<nvtxRangeStartW_params>(d)->message));
    case CUPTI_CBID_NVTX_nvtxRangeStartEx:
      return NvtxStart(ReturnedRangeId(d), NvtxMessage(ParamsOf<nvtxRangeStartEx_params>(d)->eventAttrib));
    case CUPTI_CBID_NVTX_nvtxDomainRangeStartEx:
      return NvtxStart(ReturnedRangeId(d), NvtxMessage(ParamsOf<nvtxDomainRangeStartEx_params>(d)->core.eventAttrib));
    case CUPTI_CBID_NVTX_nvtxRangeEnd:
      return NvtxEnd(ParamsOf<nvtxRangeEnd_params>(d)->id);
    case CUPTI_CBID_NVTX_nvtxDomainRangeEnd:
      return NvtxEnd(ParamsOf<nvtxDomainRangeEnd_params>(d)->core.id);
    case CUPTI_CBID_NVTX_nvtxDomainRegisterStringA:
    case CUPTI_CBID_NVTX_nvtxDomainRegisterStringW: {
      if (d->functionReturnValue == nullptr) return;
      const void* handle = *static_cast<const nvtxStringHandle_t*>(d->functionReturnValue);
      std::string text =
          cbid == CUPTI_CBID_NVTX_nvtxDomainRegisterStringA
              ? Ascii(ParamsOf<nvtxDomainRegisterStringA_params>(d)->string)
              // CUDA 13.0's struct declares the wide string as const char*.
              : Wide(reinterpret_cast<const wchar_t*>(ParamsOf<nvtxDomainRegisterStringW_params>(d)->string));
      std::lock_guard<std::mutex> lock(nvtx_mutex_);
      nvtx_strings_[handle] = std::move(text);
      return;
    }
    default:
      return;
  }
}

std::string Tracer::NvtxMessage(const void* attributes) {
  const auto* a = static_cast<const nvtxEventAttributes_t*>(attributes);
  if (a == nullptr) return "";
  switch (a->messageType) {
    case NVTX_MESSAGE_TYPE_ASCII:
      return Ascii(a->message.ascii);
    case NVTX_MESSAGE_TYPE_UNICODE:
      return Wide(a->message.unicode);
    case NVTX_MESSAGE_TYPE_REGISTERED: {
      std::lock_guard<std::mutex> lock(nvtx_mutex_);
      const auto it = nvtx_strings_.find(a->message.registered);
      return it != nvtx_strings_.end() ? it->second : std::string();
    }
    default:
      return "";
  }
}

bool Tracer::IterationName(const std::string& name) {
  if (name.empty()) return false;
  auto& cache = t_nvtx.matches;
  if (const auto it = cache.find(name); it != cache.end()) return it->second;
  const bool match = std::regex_search(name, *iteration_regex_);
  // Names with step numbers never repeat; the cache only pays for names that do.
  if (cache.size() >= kMaxCachedNames) cache.clear();
  cache.emplace(name, match);
  return match;
}

void Tracer::NvtxPush(std::string name) {
  const int64_t now = CuptiNow();
  if (t_nvtx.stack.size() >= kMaxDepth) {
    ++t_nvtx.overflow;
    return;
  }
  if (IterationName(name)) {
    std::lock_guard<std::mutex> lock(nvtx_mutex_);
    nvtx_boundaries_.push_back(NvtxBoundary{now, name, NvtxIterationKey(name)});
  }
  t_nvtx.stack.push_back(Frame{now, std::move(name)});
}

void Tracer::NvtxPop() {
  const int64_t now = CuptiNow();
  if (t_nvtx.overflow > 0) {
    --t_nvtx.overflow;
    return;
  }
  if (t_nvtx.stack.empty()) return;
  Frame frame = std::move(t_nvtx.stack.back());
  t_nvtx.stack.pop_back();
  fmt::RangeRecord r{};
  r.start_ns = frame.start_ns;
  r.end_ns = now;
  r.pid = static_cast<uint32_t>(pid_);
  r.tid = ThreadId();
  r.name = fmt::kNoName;
  r.depth = static_cast<uint32_t>(t_nvtx.stack.size());
  DecodedRecord d;
  d.type = fmt::RecordType::kRange;
  d.size = sizeof(r);
  std::memcpy(d.body, &r, sizeof(r));
  writer_.AddRecord(d, std::move(frame.name), static_cast<int>(offsetof(fmt::RangeRecord, name)));
}

void Tracer::NvtxStart(uint64_t id, std::string name) {
  // Without the id CUPTI returned, the end cannot be matched.
  if (id == 0) return;
  const int64_t now = CuptiNow();
  const bool boundary = IterationName(name);
  std::lock_guard<std::mutex> lock(nvtx_mutex_);
  if (boundary) nvtx_boundaries_.push_back(NvtxBoundary{now, name, NvtxIterationKey(name)});
  if (nvtx_open_.size() >= kMaxOpenRanges) return;
  nvtx_open_[id] = OpenRange{now, ThreadId(), std::move(name)};
}

void Tracer::NvtxEnd(uint64_t id) {
  const int64_t now = CuptiNow();
  OpenRange range;
  {
    std::lock_guard<std::mutex> lock(nvtx_mutex_);
    const auto it = nvtx_open_.find(id);
    if (it == nvtx_open_.end()) return;
    range = std::move(it->second);
    nvtx_open_.erase(it);
  }
  fmt::RangeRecord r{};
  r.start_ns = range.start_ns;
  r.end_ns = now;
  r.pid = static_cast<uint32_t>(pid_);
  r.tid = range.tid;
  r.name = fmt::kNoName;
  // Start/end ranges may overlap freely and end on another thread: they are not nested.
  r.depth = kNotNested;
  DecodedRecord d;
  d.type = fmt::RecordType::kRange;
  d.size = sizeof(r);
  std::memcpy(d.body, &r, sizeof(r));
  writer_.AddRecord(d, std::move(range.name), static_cast<int>(offsetof(fmt::RangeRecord, name)));
}

}  // namespace emo::runtime
