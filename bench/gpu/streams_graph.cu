// streams_graph: a plain CUDA program with several streams, cross-stream events, host syncs and a
// CUDA Graph, for tracing with `emo trace` (no NVTX, no profiler unless asked).
//
// One iteration (host-timed, it ends in a host sync):
//   A. plain kernel loop: --tiny launches of a one-block kernel on s0 (launch-bound);
//   B. fork: cudaEventRecord(fork, s0); s1 and s2 cudaStreamWaitEvent(fork);
//        s1: 3 compute-bound kernels (independent FMA chains, --inner iterations);
//        s2: memory-bound axpy, cudaMemcpyAsync device-to-device, cudaMemsetAsync, axpy;
//      cudaEventRecord(join1, s1), cudaEventRecord(join2, s2);
//   C. host sync on an event: cudaEventSynchronize(join2) (the host waits for the memory branch);
//   D. join: s0 cudaStreamWaitEvent(join1) and (join2); a combine kernel on s0;
//   E. cudaGraphLaunch on s0 of a graph captured once at start (stream capture with its own
//      fork/join across two capture streams: compute, axpy and tiny kernels in two branches);
//   F. a reduction to one float, cudaMemcpyAsync device-to-host into pinned memory, and
//      cudaStreamSynchronize(s0) (every 10th iteration cudaDeviceSynchronize instead).
// Every CUDA call is checked (CK: file:line, the call, the error; exit 1). No managed memory;
// about 200 MiB of device memory with the defaults.
//
// Options: --iters N (all iterations, warm-up included; default 1000), --warmup W (untimed
// first iterations; default 50), --inner K (FMA loop length of the compute kernels; default
// 2048), --tiny T (default 32), --nvtx (NVTX range "step" around each iteration),
// --nvml-energy (NVML energy counter, loaded with dlopen, getters only, read at the synchronized
// ends of the timed region), --device D.
// Prints one JSON line on stdout: {"workload": "streams_graph", "median_step_ms", "steps", ...}.
//
// Build: nvcc -O2 -arch=sm_90a -o streams_graph streams_graph.cu   (build_streams_graph.sh)
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <nvtx3/nvToolsExt.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#define CK(call)                                                                                 \
  do {                                                                                           \
    cudaError_t e_ = (call);                                                                     \
    if (e_ != cudaSuccess) {                                                                     \
      std::fprintf(stderr, "%s:%d: %s failed: %s (%s)\n", __FILE__, __LINE__, #call,             \
                   cudaGetErrorName(e_), cudaGetErrorString(e_));                                \
      std::exit(1);                                                                              \
    }                                                                                            \
  } while (0)

// A kernel launch: the launch itself (cudaGetLastError) is checked; errors raised while the
// kernel runs surface at the next checked synchronizing call.
#define LAUNCH(kernel, grid, block, stream, ...)                   \
  do {                                                             \
    kernel<<<(grid), (block), 0, (stream)>>>(__VA_ARGS__);         \
    CK(cudaGetLastError());                                        \
  } while (0)

// ------------------------------------------------------------------ kernels
__global__ void fma_work(float* x, int n, int inner) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    float a = x[i], b = a + 1.0f, c = a + 2.0f, d = a + 3.0f;
    for (int k = 0; k < inner; ++k) {  // four independent chains, bounded values
      a = fmaf(a, 0.9999f, 0.0001f);
      b = fmaf(b, 0.9999f, 0.0001f);
      c = fmaf(c, 0.9999f, 0.0001f);
      d = fmaf(d, 0.9999f, 0.0001f);
    }
    x[i] = 0.25f * (a + b + c + d);
  }
}

__global__ void axpy(float* y, const float* x, float a, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    y[i] = a * y[i] + (1.0f - a) * x[i];
}

__global__ void tiny(float* x, int n) {  // one block: a launch-bound kernel
  for (int i = threadIdx.x; i < n; i += blockDim.x) x[i] = x[i] * 0.5f + 0.25f;
}

__global__ void reduce_sum(const float* x, int n, float* out) {
  __shared__ float s[256];
  float acc = 0.0f;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) acc += x[i];
  s[threadIdx.x] = acc;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w >>= 1) {
    if (threadIdx.x < w) s[threadIdx.x] += s[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(out, s[0]);
}

__global__ void fill(float* x, int n, float v) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    x[i] = v + 1e-6f * (i & 1023);
}

// ------------------------------------------------------------------ NVML through dlopen, getters only
struct Nvml {
  typedef int (*InitFn)();
  typedef int (*ShutdownFn)();
  typedef const char* (*ErrorStringFn)(int);
  typedef int (*HandleByPciFn)(const char*, void**);
  typedef int (*EnergyFn)(void*, unsigned long long*);
  typedef int (*PowerFn)(void*, unsigned int*);
  typedef int (*ClockFn)(void*, int, unsigned int*);
  void* lib = nullptr;
  void* dev = nullptr;
  ShutdownFn shutdown = nullptr;
  ErrorStringFn error_string = nullptr;
  EnergyFn energy = nullptr;
  PowerFn power = nullptr;
  ClockFn clock = nullptr;

  void* sym(const char* name) {
    void* p = dlsym(lib, name);
    if (!p) {
      std::fprintf(stderr, "%s:%d: NVML symbol %s not found in libnvidia-ml.so.1\n", __FILE__, __LINE__, name);
      std::exit(1);
    }
    return p;
  }
  void check(int rc, const char* what, int line) {
    if (rc != 0) {
      std::fprintf(stderr, "%s:%d: NVML %s failed: %d (%s)\n", __FILE__, line, what, rc,
                   error_string ? error_string(rc) : "?");
      std::exit(1);
    }
  }
  void open(const char* pci_bus_id) {
    lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      std::fprintf(stderr, "%s:%d: dlopen(libnvidia-ml.so.1) failed: %s\n", __FILE__, __LINE__, dlerror());
      std::exit(1);
    }
    error_string = reinterpret_cast<ErrorStringFn>(sym("nvmlErrorString"));
    shutdown = reinterpret_cast<ShutdownFn>(sym("nvmlShutdown"));
    energy = reinterpret_cast<EnergyFn>(sym("nvmlDeviceGetTotalEnergyConsumption"));
    power = reinterpret_cast<PowerFn>(sym("nvmlDeviceGetPowerUsage"));
    clock = reinterpret_cast<ClockFn>(sym("nvmlDeviceGetClockInfo"));
    check(reinterpret_cast<InitFn>(sym("nvmlInit_v2"))(), "nvmlInit_v2", __LINE__);
    check(reinterpret_cast<HandleByPciFn>(sym("nvmlDeviceGetHandleByPciBusId_v2"))(pci_bus_id, &dev),
          "nvmlDeviceGetHandleByPciBusId_v2", __LINE__);
  }
  unsigned long long energy_mj() {
    unsigned long long v = 0;
    check(energy(dev, &v), "nvmlDeviceGetTotalEnergyConsumption", __LINE__);
    return v;
  }
  unsigned int power_mw() {
    unsigned int v = 0;
    check(power(dev, &v), "nvmlDeviceGetPowerUsage", __LINE__);
    return v;
  }
  unsigned int sm_mhz() {
    unsigned int v = 0;
    check(clock(dev, 1 /* NVML_CLOCK_SM */, &v), "nvmlDeviceGetClockInfo(SM)", __LINE__);
    return v;
  }
  void close() {
    if (lib) {
      check(shutdown(), "nvmlShutdown", __LINE__);
      dlclose(lib);
      lib = nullptr;
    }
  }
};

// ------------------------------------------------------------------ options
struct Options {
  int iters = 1000, warmup = 50, inner = 2048, tiny = 32, device = 0;
  bool nvtx = false, nvml_energy = false, step_list = true;
};

static void usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s [--iters N] [--warmup W] [--inner K] [--tiny T] [--nvtx] [--nvml-energy] "
               "[--no-step-list] [--device D]\n"
               "  Several streams, cross-stream events, host syncs and a CUDA Graph; prints one JSON line\n"
               "  {\"workload\": \"streams_graph\", \"median_step_ms\", \"steps\", ...} (host-timed iterations).\n",
               argv0);
}

static int int_arg(int argc, char** argv, int& i) {
  if (i + 1 >= argc) {
    std::fprintf(stderr, "%s needs a value\n", argv[i]);
    std::exit(2);
  }
  char* end = nullptr;
  long v = std::strtol(argv[++i], &end, 10);
  if (!end || *end || v < 0 || v > (1L << 30)) {
    std::fprintf(stderr, "%s: not a non-negative integer: %s\n", argv[i - 1], argv[i]);
    std::exit(2);
  }
  return static_cast<int>(v);
}

static Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--iters") o.iters = int_arg(argc, argv, i);
    else if (a == "--warmup") o.warmup = int_arg(argc, argv, i);
    else if (a == "--inner") o.inner = int_arg(argc, argv, i);
    else if (a == "--tiny") o.tiny = int_arg(argc, argv, i);
    else if (a == "--device") o.device = int_arg(argc, argv, i);
    else if (a == "--nvtx") o.nvtx = true;
    else if (a == "--nvml-energy") o.nvml_energy = true;
    else if (a == "--no-step-list") o.step_list = false;
    else if (a == "-h" || a == "--help") {
      usage(argv[0]);
      std::exit(0);
    } else {
      std::fprintf(stderr, "unknown option: %s\n", argv[i]);
      usage(argv[0]);
      std::exit(2);
    }
  }
  if (o.iters <= o.warmup) {
    std::fprintf(stderr, "--iters (%d) must exceed --warmup (%d)\n", o.iters, o.warmup);
    std::exit(2);
  }
  return o;
}

static double quantile(std::vector<double> v, double q) {  // linear interpolation, v non-empty
  std::sort(v.begin(), v.end());
  double pos = q * (v.size() - 1);
  size_t lo = static_cast<size_t>(pos);
  size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (pos - lo) * (v[hi] - v[lo]);
}

// ------------------------------------------------------------------ main
int main(int argc, char** argv) {
  Options o = parse(argc, argv);
  using clk = std::chrono::steady_clock;
  auto ms_since = [](clk::time_point t0) {
    return std::chrono::duration<double, std::milli>(clk::now() - t0).count();
  };

  CK(cudaSetDevice(o.device));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, o.device));
  const int sms = prop.multiProcessorCount;

  const int nA = 1 << 20;    // compute branch: 4 MiB
  const int nB = 16 << 20;   // memory branch: 64 MiB per buffer (past the L2)
  const int nT = 1 << 12;    // tiny kernels' buffer
  const int nG = 1 << 20;    // graph's buffers
  float *dA, *dB, *dC, *dD, *dT, *dG1, *dG2, *dSum, *hSum;
  CK(cudaMalloc(&dA, nA * sizeof(float)));
  CK(cudaMalloc(&dB, size_t(nB) * sizeof(float)));
  CK(cudaMalloc(&dC, size_t(nB) * sizeof(float)));
  CK(cudaMalloc(&dD, size_t(nB) * sizeof(float)));
  CK(cudaMalloc(&dT, nT * sizeof(float)));
  CK(cudaMalloc(&dG1, nG * sizeof(float)));
  CK(cudaMalloc(&dG2, nG * sizeof(float)));
  CK(cudaMalloc(&dSum, sizeof(float)));
  CK(cudaMallocHost(&hSum, sizeof(float)));  // pinned host memory for the D2H copy

  cudaStream_t s0, s1, s2, cs0, cs1;
  CK(cudaStreamCreateWithFlags(&s0, cudaStreamNonBlocking));
  CK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
  CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  CK(cudaStreamCreateWithFlags(&cs0, cudaStreamNonBlocking));
  CK(cudaStreamCreateWithFlags(&cs1, cudaStreamNonBlocking));
  cudaEvent_t evFork, evJoin1, evJoin2, gFork, gJoin;
  CK(cudaEventCreateWithFlags(&evFork, cudaEventDisableTiming));
  CK(cudaEventCreateWithFlags(&evJoin1, cudaEventDisableTiming));
  CK(cudaEventCreateWithFlags(&evJoin2, cudaEventDisableTiming));
  CK(cudaEventCreateWithFlags(&gFork, cudaEventDisableTiming));
  CK(cudaEventCreateWithFlags(&gJoin, cudaEventDisableTiming));

  const int blk = 256;
  const int gridA = (nA + blk - 1) / blk;   // one element per thread: 4096 blocks
  const int gridB = sms * 8;                // grid-stride over the large buffers
  const int gridG = (nG + blk - 1) / blk;
  LAUNCH(fill, gridA, blk, s0, dA, nA, 0.5f);
  LAUNCH(fill, gridB, blk, s0, dB, nB, 1.0f);
  LAUNCH(fill, gridB, blk, s0, dC, nB, 2.0f);
  LAUNCH(fill, gridB, blk, s0, dD, nB, 3.0f);
  LAUNCH(fill, 8, blk, s0, dT, nT, 0.1f);
  LAUNCH(fill, gridG, blk, s0, dG1, nG, 0.2f);
  LAUNCH(fill, gridG, blk, s0, dG2, nG, 0.3f);
  CK(cudaStreamSynchronize(s0));

  // The graph: captured once from cs0 with a fork to cs1 and a join back.
  cudaGraph_t graph;
  cudaGraphExec_t graphExec;
  CK(cudaStreamBeginCapture(cs0, cudaStreamCaptureModeThreadLocal));
  LAUNCH(tiny, 1, blk, cs0, dT, nT);
  CK(cudaEventRecord(gFork, cs0));
  CK(cudaStreamWaitEvent(cs1, gFork, 0));
  // branch 1 (cs0) touches dG1 only, branch 2 (cs1) dG2 and dT: no race between them
  LAUNCH(fma_work, gridG, blk, cs0, dG1, nG, std::max(1, o.inner / 8));
  LAUNCH(tiny, 1, blk, cs0, dG1, nT);
  LAUNCH(axpy, gridG, blk, cs1, dG2, dA, 0.5f, std::min(nG, nA));
  LAUNCH(tiny, 1, blk, cs1, dT, nT);
  CK(cudaEventRecord(gJoin, cs1));
  CK(cudaStreamWaitEvent(cs0, gJoin, 0));
  LAUNCH(axpy, gridG, blk, cs0, dG1, dG2, 0.5f, nG);
  CK(cudaStreamEndCapture(cs0, &graph));
  size_t graphNodes = 0;
  CK(cudaGraphGetNodes(graph, nullptr, &graphNodes));
  CK(cudaGraphInstantiate(&graphExec, graph, 0));
  CK(cudaGraphUpload(graphExec, s0));
  CK(cudaStreamSynchronize(s0));

  char busId[32] = {0};
  CK(cudaDeviceGetPCIBusId(busId, sizeof(busId), o.device));
  Nvml nvml;
  if (o.nvml_energy) nvml.open(busId);

  std::vector<double> step_ms;
  step_ms.reserve(o.iters);
  unsigned long long e0 = 0, e1 = 0;
  clk::time_point tRegion, tEnergy;
  double region_ms = 0, window_s = 0;
  float checksum = 0.0f;

  for (int it = 0; it < o.iters; ++it) {
    if (it == o.warmup) {  // the timed region starts: synchronized boundary
      CK(cudaDeviceSynchronize());
      if (o.nvml_energy) {
        e0 = nvml.energy_mj();
        tEnergy = clk::now();
      }
      tRegion = clk::now();
    }
    auto t0 = clk::now();
    if (o.nvtx) nvtxRangePushA("step");
    // A. plain kernel loop
    for (int k = 0; k < o.tiny; ++k) LAUNCH(tiny, 1, blk, s0, dT, nT);
    // B. fork to s1 (compute) and s2 (memory, copy, memset)
    CK(cudaEventRecord(evFork, s0));
    CK(cudaStreamWaitEvent(s1, evFork, 0));
    CK(cudaStreamWaitEvent(s2, evFork, 0));
    for (int k = 0; k < 3; ++k) LAUNCH(fma_work, gridA, blk, s1, dA, nA, o.inner);
    LAUNCH(axpy, gridB, blk, s2, dB, dC, 0.5f, nB);
    CK(cudaMemcpyAsync(dD, dB, size_t(nB) * sizeof(float), cudaMemcpyDeviceToDevice, s2));
    CK(cudaMemsetAsync(dC, 0, size_t(nB) * sizeof(float), s2));
    LAUNCH(axpy, gridB, blk, s2, dC, dD, 0.5f, nB);
    CK(cudaEventRecord(evJoin1, s1));
    CK(cudaEventRecord(evJoin2, s2));
    // C. the host waits for the memory branch
    CK(cudaEventSynchronize(evJoin2));
    // D. join on s0, combine
    CK(cudaStreamWaitEvent(s0, evJoin1, 0));
    CK(cudaStreamWaitEvent(s0, evJoin2, 0));
    LAUNCH(axpy, gridA, blk, s0, dA, dC, 0.5f, nA);
    // E. the captured graph
    CK(cudaGraphLaunch(graphExec, s0));
    // F. reduce, copy one float to the host, host sync
    CK(cudaMemsetAsync(dSum, 0, sizeof(float), s0));
    LAUNCH(reduce_sum, sms * 2, blk, s0, dG1, nG, dSum);
    CK(cudaMemcpyAsync(hSum, dSum, sizeof(float), cudaMemcpyDeviceToHost, s0));
    if (it % 10 == 9) CK(cudaDeviceSynchronize());
    else CK(cudaStreamSynchronize(s0));
    checksum = *hSum;
    if (o.nvtx) nvtxRangePop();
    step_ms.push_back(ms_since(t0));
  }
  CK(cudaDeviceSynchronize());
  region_ms = ms_since(tRegion);
  double energy_j = 0;
  if (o.nvml_energy) {
    window_s = std::chrono::duration<double>(clk::now() - tEnergy).count();
    e1 = nvml.energy_mj();
    energy_j = (e1 - e0) / 1000.0;
  }

  std::vector<double> timed(step_ms.begin() + o.warmup, step_ms.end());
  const int n = static_cast<int>(timed.size());
  double mean = 0;
  for (double v : timed) mean += v;
  mean /= n;

  std::printf("{\"workload\": \"streams_graph\", \"median_step_ms\": %.6f, \"steps\": %d, \"timed_steps\": %d, "
              "\"warmup_steps\": %d, \"mean_step_ms\": %.6f, \"p10_step_ms\": %.6f, \"p90_step_ms\": %.6f, "
              "\"region_s\": %.6f, \"region_ms_per_step\": %.6f, \"nvtx\": %s, "
              "\"timing\": \"steady_clock per iteration (each ends in a host sync)\", "
              "\"device\": \"%s\", \"pci_bus_id\": \"%s\", \"graph_nodes\": %zu, \"checksum\": %.6g, "
              "\"config\": {\"inner\": %d, \"tiny\": %d, \"streams\": 3, \"capture_streams\": 2}",
              quantile(timed, 0.5), o.iters, n, o.warmup, mean, quantile(timed, 0.1), quantile(timed, 0.9),
              region_ms / 1e3, region_ms / n, o.nvtx ? "true" : "false", prop.name, busId, graphNodes,
              std::isfinite(checksum) ? checksum : -1.0f, o.inner, o.tiny);
  if (o.nvml_energy) {
    std::printf(", \"energy_per_step_j\": %.6f, \"energy_j\": %.6f, \"window_s\": %.6f, \"energy_steps\": %d, "
                "\"avg_power_w\": %.3f, \"energy_bound_pct\": %.3f, \"energy_source\": "
                "\"nvmlDeviceGetTotalEnergyConsumption (dlopen, read at synchronized window ends)\", "
                "\"sm_mhz_at_end\": %u, \"power_w_at_end\": %.3f",
                energy_j / n, energy_j, window_s, n, window_s > 0 ? energy_j / window_s : 0.0,
                window_s > 0 ? 100.0 * 2 * 0.1 / window_s : 0.0, nvml.sm_mhz(), nvml.power_mw() / 1000.0);
    nvml.close();
  }
  if (o.step_list) {
    std::printf(", \"step_ms\": [");
    for (size_t i = 0; i < step_ms.size(); ++i) std::printf(i ? ", %.4f" : "%.4f", step_ms[i]);
    std::printf("]");
  }
  std::printf("}\n");
  std::fflush(stdout);

  CK(cudaGraphExecDestroy(graphExec));
  CK(cudaGraphDestroy(graph));
  for (cudaEvent_t e : {evFork, evJoin1, evJoin2, gFork, gJoin}) CK(cudaEventDestroy(e));
  for (cudaStream_t s : {s0, s1, s2, cs0, cs1}) CK(cudaStreamDestroy(s));
  for (float* p : {dA, dB, dC, dD, dT, dG1, dG2, dSum}) CK(cudaFree(p));
  CK(cudaFreeHost(hSum));
  return 0;
}
