#include "emulator.h"

#include "driver_api.h"
#include "trace_writer.h"

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

bool Emulator::Configure(const ScheduleGpu& gpu, std::string* error) {
  ctx_get_current_ = DriverFunction<CtxGetCurrentFn>("cuCtxGetCurrent");
  module_load_data_ = DriverFunction<ModuleLoadDataFn>("cuModuleLoadData");
  module_get_function_ = DriverFunction<ModuleGetFunctionFn>("cuModuleGetFunction");
  launch_kernel_ = DriverFunction<LaunchKernelFn>("cuLaunchKernel");
  get_error_name_ = DriverFunction<GetErrorNameFn>("cuGetErrorName");
  if (ctx_get_current_ == nullptr || module_load_data_ == nullptr || module_get_function_ == nullptr ||
      launch_kernel_ == nullptr || !capture_.Load()) {
    *error = "emulate: the CUDA driver in this process has no cuCtxGetCurrent/cuModuleLoadData/cuModuleGetFunction/"
             "cuLaunchKernel/cuStreamIsCapturing";
    return false;
  }
  calls_.SetCallsPerIteration(gpu.calls_per_iteration);
  ns_by_call_.assign(gpu.calls_per_iteration, 0);
  for (const auto& s : gpu.spins) {
    if (s.call >= 0 && s.call < static_cast<int64_t>(ns_by_call_.size())) ns_by_call_[static_cast<size_t>(s.call)] += s.ns;
  }
  return true;
}

void Emulator::Publish(bool active, uint64_t from_seq) {
  if (failed_.load(std::memory_order_relaxed)) active = false;
  if (calls_.Publish(active, from_seq)) activations_.fetch_add(1, std::memory_order_relaxed);
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
  calls_.Off();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    error_ = what;
  }
  std::fprintf(stderr, "emo run: emulate: %s; the plan's slowdown is no longer emulated\n", what.c_str());
}

void Emulator::AfterLaunch(uint64_t seq, void* stream, bool stream_known) {
  const int64_t call = calls_.CallOf(seq);
  if (call < 0) return;
  const int64_t ns = ns_by_call_[static_cast<size_t>(call)];
  if (ns <= 0) return;
  if (!stream_known) {
    unknown_stream_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  if (capture_.Capturing(stream)) {
    capturing_.fetch_add(1, std::memory_order_relaxed);
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
  put("capturing", std::to_string(capturing_.load()));
  put("activations", std::to_string(activations_.load()));
  put("failed", failed_.load() ? "1" : "0");
  std::lock_guard<std::mutex> lock(mutex_);
  if (!error_.empty()) put("error", MetaValue(error_));
  return m;
}

}  // namespace emo::runtime
