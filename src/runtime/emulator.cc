#include "emulator.h"

#include "trace_writer.h"

#include <dlfcn.h>

#include <cstdio>
#include <ctime>

namespace emo::runtime {

// Built for the oldest ISA with %globaltimer reads in a loop; the driver JIT-compiles it for the
// GPU in use (sm_90 on the H200), so nothing here depends on nvcc at build time.
const char kSpinKernelPtx[] = R"(.version 7.0
.target sm_70
.address_size 64

.visible .entry emo_emulate_spin(.param .u64 ns)
{
  .reg .pred %p<2>;
  .reg .b64 %rd<5>;
  ld.param.u64 %rd1, [ns];
  mov.u64 %rd2, %globaltimer;
  add.u64 %rd3, %rd2, %rd1;
$L_wait:
  mov.u64 %rd4, %globaltimer;
  setp.lt.u64 %p1, %rd4, %rd3;
  @%p1 bra $L_wait;
  ret;
}
)";

namespace {

template <typename Fn>
Fn Find(void* library, const char* name) {
  return reinterpret_cast<Fn>(dlsym(library, name));
}

}  // namespace

bool Emulator::Configure(const ScheduleGpu& gpu, std::string* error) {
  void* library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (library != nullptr) {
    ctx_get_current_ = Find<CtxGetCurrentFn>(library, "cuCtxGetCurrent");
    module_load_data_ = Find<ModuleLoadDataFn>(library, "cuModuleLoadData");
    module_get_function_ = Find<ModuleGetFunctionFn>(library, "cuModuleGetFunction");
    launch_kernel_ = Find<LaunchKernelFn>(library, "cuLaunchKernel");
    get_error_name_ = Find<GetErrorNameFn>(library, "cuGetErrorName");
  }
  if (ctx_get_current_ == nullptr || module_load_data_ == nullptr || module_get_function_ == nullptr ||
      launch_kernel_ == nullptr) {
    *error = "emulate: the CUDA driver in this process has no cuCtxGetCurrent/cuModuleLoadData/cuModuleGetFunction/"
             "cuLaunchKernel";
    return false;
  }
  calls_ = gpu.calls_per_iteration;
  ns_by_call_.assign(calls_, 0);
  for (const auto& s : gpu.spins) {
    if (s.call >= 0 && static_cast<uint64_t>(s.call) < calls_) ns_by_call_[static_cast<size_t>(s.call)] += s.ns;
  }
  return true;
}

void Emulator::Publish(bool active, uint64_t from_seq) {
  if (failed_.load(std::memory_order_relaxed)) active = false;
  const uint64_t want = active ? from_seq : kOff;
  const uint64_t was = from_seq_.exchange(want, std::memory_order_acq_rel);
  if (was == kOff && want != kOff) activations_.fetch_add(1, std::memory_order_relaxed);
}

void* Emulator::SpinFunction(std::string* error) {
  void* context = nullptr;
  int rc = ctx_get_current_(&context);
  if (rc != 0 || context == nullptr) {
    *error = "cuCtxGetCurrent returned " + std::to_string(rc) + (context == nullptr ? " (no current context)" : "");
    return nullptr;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [c, f] : functions_) {
    if (c == context) return f;
  }
  void* module = nullptr;
  void* function = nullptr;
  rc = module_load_data_(&module, kSpinKernelPtx);
  if (rc == 0) rc = module_get_function_(&function, module, kSpinKernelName);
  if (rc != 0) {
    const char* name = nullptr;
    if (get_error_name_ != nullptr) get_error_name_(rc, &name);
    *error = std::string("loading the spin kernel failed: ") + (name != nullptr ? name : std::to_string(rc).c_str());
    return nullptr;
  }
  functions_.emplace_back(context, function);
  return function;
}

void Emulator::Fail(const std::string& what) {
  if (failed_.exchange(true)) return;
  from_seq_.store(kOff, std::memory_order_release);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    error_ = what;
  }
  std::fprintf(stderr, "emo run: emulate: %s; the plan's slowdown is no longer emulated\n", what.c_str());
}

void Emulator::AfterLaunch(uint64_t seq, void* stream, bool stream_known) {
  const uint64_t from = from_seq_.load(std::memory_order_acquire);
  if (from == kOff || seq < from || calls_ == 0) return;
  const int64_t ns = ns_by_call_[(seq - from) % calls_];
  if (ns <= 0) return;
  if (!stream_known) {
    unknown_stream_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  std::string error;
  void* function = SpinFunction(&error);
  if (function == nullptr) return Fail(error);
  uint64_t arg = static_cast<uint64_t>(ns);
  void* params[] = {&arg};
  // The launch's own host time is the emulation's cost to the program (not the plan's).
  timespec t0{}, t1{};
  clock_gettime(CLOCK_MONOTONIC, &t0);
  const int rc = launch_kernel_(function, 1, 1, 1, 1, 1, 1, 0, stream, params, nullptr);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  launch_ns_.fetch_add(static_cast<uint64_t>((t1.tv_sec - t0.tv_sec) * 1'000'000'000LL + (t1.tv_nsec - t0.tv_nsec)),
                       std::memory_order_relaxed);
  if (rc != 0) {
    const char* name = nullptr;
    if (get_error_name_ != nullptr) get_error_name_(rc, &name);
    return Fail(std::string("cuLaunchKernel of the spin kernel failed: ") + (name != nullptr ? name : std::to_string(rc)));
  }
  spins_.fetch_add(1, std::memory_order_relaxed);
  spin_ns_.fetch_add(static_cast<uint64_t>(ns), std::memory_order_relaxed);
}

std::string Emulator::Meta() const {
  std::string m;
  auto put = [&m](const char* key, const std::string& value) { m += std::string("run.emulate_") + key + "=" + value + "\n"; };
  put("spins", std::to_string(spins_.load()));
  put("spin_ns", std::to_string(spin_ns_.load()));
  put("launch_ns", std::to_string(launch_ns_.load()));
  put("unknown_stream", std::to_string(unknown_stream_.load()));
  put("activations", std::to_string(activations_.load()));
  put("failed", failed_.load() ? "1" : "0");
  std::lock_guard<std::mutex> lock(mutex_);
  if (!error_.empty()) put("error", MetaValue(error_));
  return m;
}

}  // namespace emo::runtime
