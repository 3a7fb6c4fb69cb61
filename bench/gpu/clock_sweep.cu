// How each kernel class's time follows the SM clock on this GPU, without setting a clock (issue
// Order 8: "evidence at other clocks"). The power limiter lowers the SM clock on its own under
// big tensor-core GEMMs; a probe kernel launched right after such GEMMs runs at the lowered clock,
// and one launched after idle work runs at the default clock. Each probe is bracketed by two
// one-thread kernels that read clock64 (SM cycles) against %globaltimer (ns) for 20 us, which is
// the SM clock the probe ran at, measured inside the GPU; the probe's own time comes from CUDA
// events around it alone.
//
// Levels: per cycle, L hog GEMMs (bf16 8192^3 on the tensor cores, random data) and then every
// probe once, in a rotating order; L = 0 gives the default clock, larger L a lower average clock.
// Each level runs WARM_S seconds unmeasured, then MEASURE_S seconds.
//
// Probes (each 0.1-1 ms on an H200):
//   tc_gemm      bf16 4096^3, cuBLAS, tensor cores        (EMO class: compute)
//   fp32_gemm    fp32 2048^3, cuBLAS, no TF32             (compute, CUDA cores)
//   fma          FMA chains in registers, full grid       (compute)
//   copy         256 MiB device copy, float4              (memory)
//   triad        a = b + s * c over 3 x 256 MiB           (memory)
//   l2_read      16 MiB read 64 times (stays in L2)        (other: neither DRAM- nor ALU-bound)
//
// Output (stdout), one CSV line per probe run: level,hogs,probe,ms,mhz_before,mhz_after,nvml_mhz,
// nvml_w (NVML's SM clock and power read on the host after the cycle; -1 without NVML).
// bench/gpu/clock_sweep_fit.py fits t(f) = t_mem + t_comp * f_max / f per probe.
//
// NVML is used only through its getters (nvmlInit_v2, nvmlDeviceGetHandleByPciBusId_v2,
// nvmlDeviceGetClockInfo, nvmlDeviceGetPowerUsage, nvmlShutdown), loaded with dlopen: no clock,
// limit or mode is ever set. Memory: about 1.6 GiB of device memory, no managed memory.
//
//   C=/usr/local/cuda; $C/bin/nvcc -O2 -arch=sm_90a -std=c++17 bench/gpu/clock_sweep.cu -lcublas -ldl \
//     -o clock_sweep && ./clock_sweep [LEVELS=0,1,2,4,8,16] [WARM_S=0.5] [MEASURE_S=1.5] > sweep.csv
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <initializer_list>
#include <sstream>
#include <string>
#include <vector>

#include "cuda_ok.h"

#define CUBLAS_OK(call)                                                                          \
  do {                                                                                           \
    cublasStatus_t s_ = (call);                                                                  \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                                           \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cublasGetStatusString(s_)); \
      std::exit(1);                                                                              \
    }                                                                                            \
  } while (0)
#define LAUNCH_OK() CUDA_OK(cudaGetLastError())

namespace {

__device__ __forceinline__ uint64_t GlobalNs() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// The SM clock in MHz: SM cycles counted against the global timer over 20 us, on one thread.
__global__ void ClockProbe(double* mhz) {
  const uint64_t t0 = GlobalNs();
  const long long c0 = clock64();
  uint64_t t = t0;
  while (t - t0 < 20000) t = GlobalNs();
  const long long c1 = clock64();
  *mhz = static_cast<double>(c1 - c0) * 1000.0 / static_cast<double>(t - t0);
}

__global__ void Fill(float* x, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    x[i] = static_cast<float>(h & 0xffff) / 32768.0f - 1.0f;
  }
}

__global__ void ToBf16(const float* x, __nv_bfloat16* y, size_t n) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x) {
    y[i] = __float2bfloat16(x[i]);
  }
}

__global__ void Fma(float* out, int iterations) {
  float a = threadIdx.x * 1e-3f, b = blockIdx.x * 1e-3f, c = 1.0f, d = 0.5f;
  for (int i = 0; i < iterations; ++i) {
    a = fmaf(a, 0.9999f, 0.0001f);
    b = fmaf(b, 0.9998f, 0.0002f);
    c = fmaf(c, 0.9997f, 0.0003f);
    d = fmaf(d, 0.9996f, 0.0004f);
  }
  if (a + b + c + d == 12345.0f) out[0] = a;  // never true; keeps the chains
}

__global__ void Copy(const float4* x, float4* y, size_t n) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x) y[i] = x[i];
}

__global__ void Triad(float* a, const float* b, const float* c, size_t n) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x) {
    a[i] = b[i] + 1.5f * c[i];
  }
}

__global__ void L2Read(const float4* x, size_t n, int passes, float* out) {
  float4 s = make_float4(0, 0, 0, 0);
  for (int p = 0; p < passes; ++p) {
    for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x) {
      const float4 v = x[i];
      s.x += v.x;
      s.y += v.y;
      s.z += v.z;
      s.w += v.w;
    }
  }
  if (s.x + s.y + s.z + s.w == 12345.0f) out[0] = s.x;
}

// NVML through dlopen, getters only.
struct Nvml {
  using Init = int (*)();
  using ByPci = int (*)(const char*, void**);
  using Clock = int (*)(void*, int, unsigned*);
  using Power = int (*)(void*, unsigned*);
  using Shutdown = int (*)();
  void* lib = nullptr;
  void* device = nullptr;
  Clock clock = nullptr;
  Power power = nullptr;
  Shutdown shutdown = nullptr;

  explicit Nvml(int cuda_device) {
    lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      std::fprintf(stderr, "clock_sweep: no NVML (%s); NVML columns are -1\n", dlerror());
      return;
    }
    auto init = reinterpret_cast<Init>(dlsym(lib, "nvmlInit_v2"));
    auto by_pci = reinterpret_cast<ByPci>(dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2"));
    clock = reinterpret_cast<Clock>(dlsym(lib, "nvmlDeviceGetClockInfo"));
    power = reinterpret_cast<Power>(dlsym(lib, "nvmlDeviceGetPowerUsage"));
    shutdown = reinterpret_cast<Shutdown>(dlsym(lib, "nvmlShutdown"));
    char bus[32] = {};
    CUDA_OK(cudaDeviceGetPCIBusId(bus, sizeof bus, cuda_device));
    int rc = -1;
    if (!init || !by_pci || !clock || !power || !shutdown || (rc = init()) != 0 || (rc = by_pci(bus, &device)) != 0) {
      std::fprintf(stderr, "clock_sweep: NVML unusable for %s (rc %d); NVML columns are -1\n", bus, rc);
      device = nullptr;
    }
  }
  ~Nvml() {
    if (device && shutdown) shutdown();
  }
  // SM clock (NVML_CLOCK_SM = 1) in MHz and board power in W; -1 when unavailable.
  std::pair<double, double> Read() const {
    unsigned mhz = 0, mw = 0;
    if (!device || clock(device, 1, &mhz) != 0 || power(device, &mw) != 0) return {-1, -1};
    return {static_cast<double>(mhz), mw / 1000.0};
  }
};

std::vector<int> ParseLevels(const char* s) {
  std::vector<int> v;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) {
    char* end = nullptr;
    const long n = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || n < 0 || n > 1000) {
      std::fprintf(stderr, "clock_sweep: LEVELS must be hog counts 0-1000 separated by commas, got '%s'\n", s);
      std::exit(2);
    }
    v.push_back(static_cast<int>(n));
  }
  return v;
}

double Seconds(const char* s, const char* name) {
  char* end = nullptr;
  const double v = std::strtod(s, &end);
  if (*end != '\0' || !(v >= 0 && v <= 600)) {
    std::fprintf(stderr, "clock_sweep: %s must be seconds in [0, 600], got '%s'\n", name, s);
    std::exit(2);
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<int> levels = ParseLevels(argc > 1 ? argv[1] : "0,1,2,4,8,16");
  const double warm_s = Seconds(argc > 2 ? argv[2] : "0.5", "WARM_S");
  const double measure_s = Seconds(argc > 3 ? argv[3] : "1.5", "MEASURE_S");

  int device = 0;
  CUDA_OK(cudaGetDevice(&device));
  cudaDeviceProp prop{};
  CUDA_OK(cudaGetDeviceProperties(&prop, device));
  const int sms = prop.multiProcessorCount;
  std::fprintf(stderr, "clock_sweep: %s, %d SMs\n", prop.name, sms);
  Nvml nvml(device);

  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cublasHandle_t blas;
  CUBLAS_OK(cublasCreate(&blas));
  CUBLAS_OK(cublasSetStream(blas, stream));
  CUBLAS_OK(cublasSetMathMode(blas, CUBLAS_DEFAULT_MATH));  // fp32 GEMMs stay off TF32

  // Hog and tc_gemm operands (bf16) are made from one float buffer of random values.
  const size_t hog_n = 8192, gemm_n = 4096, sgemm_n = 2048;
  const size_t big = 64ull << 20;  // floats: 256 MiB
  float *f32 = nullptr, *x = nullptr, *y = nullptr, *z = nullptr, *l2 = nullptr, *sink = nullptr, *sa = nullptr,
        *sb = nullptr, *sc = nullptr;
  __nv_bfloat16 *ha = nullptr, *hb = nullptr, *hc = nullptr;
  double* mhz = nullptr;
  const size_t hog_elems = hog_n * hog_n;
  const size_t l2_floats = 4ull << 20;  // 16 MiB
  CUDA_OK(cudaMalloc(&f32, hog_elems * sizeof(float)));
  CUDA_OK(cudaMalloc(&ha, hog_elems * sizeof(__nv_bfloat16)));
  CUDA_OK(cudaMalloc(&hb, hog_elems * sizeof(__nv_bfloat16)));
  CUDA_OK(cudaMalloc(&hc, hog_elems * sizeof(__nv_bfloat16)));
  CUDA_OK(cudaMalloc(&x, big * sizeof(float)));
  CUDA_OK(cudaMalloc(&y, big * sizeof(float)));
  CUDA_OK(cudaMalloc(&z, big * sizeof(float)));
  CUDA_OK(cudaMalloc(&l2, l2_floats * sizeof(float)));
  CUDA_OK(cudaMalloc(&sink, sizeof(float)));
  CUDA_OK(cudaMalloc(&sa, sgemm_n * sgemm_n * sizeof(float)));
  CUDA_OK(cudaMalloc(&sb, sgemm_n * sgemm_n * sizeof(float)));
  CUDA_OK(cudaMalloc(&sc, sgemm_n * sgemm_n * sizeof(float)));
  const int probes_max = 16;
  CUDA_OK(cudaMalloc(&mhz, 2 * probes_max * sizeof(double)));

  const int grid = sms * 8, block = 256;
  Fill<<<grid, block, 0, stream>>>(f32, hog_elems, 1);
  LAUNCH_OK();
  ToBf16<<<grid, block, 0, stream>>>(f32, ha, hog_elems);
  LAUNCH_OK();
  Fill<<<grid, block, 0, stream>>>(f32, hog_elems, 2);
  LAUNCH_OK();
  ToBf16<<<grid, block, 0, stream>>>(f32, hb, hog_elems);
  LAUNCH_OK();
  for (float* p : {x, y, z}) {
    Fill<<<grid, block, 0, stream>>>(p, big, 3);
    LAUNCH_OK();
  }
  Fill<<<grid, block, 0, stream>>>(l2, l2_floats, 4);
  LAUNCH_OK();
  for (float* p : {sa, sb, sc}) {
    Fill<<<grid, block, 0, stream>>>(p, sgemm_n * sgemm_n, 5);
    LAUNCH_OK();
  }
  CUDA_OK(cudaStreamSynchronize(stream));

  const float one = 1.0f, zero = 0.0f;
  auto bf16_gemm = [&](size_t n) {
    CUBLAS_OK(cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(n), static_cast<int>(n),
                           &one, ha, CUDA_R_16BF, static_cast<int>(n), hb, CUDA_R_16BF, static_cast<int>(n), &zero, hc,
                           CUDA_R_16BF, static_cast<int>(n), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  };
  struct Probe {
    const char* name;
    std::function<void()> run;
  };
  const int fma_iterations = 40000;
  const std::vector<Probe> probes = {
      {"tc_gemm", [&] { bf16_gemm(gemm_n); }},
      {"fp32_gemm",
       [&] {
         const int n = static_cast<int>(sgemm_n);
         CUBLAS_OK(cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, sa, n, sb, n, &zero, sc, n));
       }},
      {"fma",
       [&] {
         Fma<<<sms * 4, 512, 0, stream>>>(sink, fma_iterations);
         LAUNCH_OK();
       }},
      {"copy",
       [&] {
         Copy<<<sms * 8, 512, 0, stream>>>(reinterpret_cast<const float4*>(x), reinterpret_cast<float4*>(y), big / 4);
         LAUNCH_OK();
       }},
      {"triad",
       [&] {
         Triad<<<sms * 8, 512, 0, stream>>>(z, x, y, big);
         LAUNCH_OK();
       }},
      {"l2_read",
       [&] {
         L2Read<<<sms * 8, 512, 0, stream>>>(reinterpret_cast<const float4*>(l2), l2_floats / 4, 64, sink);
         LAUNCH_OK();
       }},
  };
  const int np = static_cast<int>(probes.size());
  std::vector<cudaEvent_t> start(np), end(np);
  for (int i = 0; i < np; ++i) {
    CUDA_OK(cudaEventCreate(&start[i]));
    CUDA_OK(cudaEventCreate(&end[i]));
  }
  // Warm-up: cuBLAS picks its kernels, every probe runs once.
  bf16_gemm(hog_n);
  for (const Probe& p : probes) p.run();
  CUDA_OK(cudaStreamSynchronize(stream));

  std::printf("level,hogs,probe,ms,mhz_before,mhz_after,nvml_mhz,nvml_w\n");
  int rotation = 0;
  for (size_t level = 0; level < levels.size(); ++level) {
    const int hogs = levels[level];
    for (int phase = 0; phase < 2; ++phase) {
      const bool measured = phase == 1;
      const auto t0 = std::chrono::steady_clock::now();
      const double span = measured ? measure_s : warm_s;
      size_t cycles = 0;
      while (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < span) {
        for (int h = 0; h < hogs; ++h) bf16_gemm(hog_n);
        std::vector<int> order(np);
        for (int i = 0; i < np; ++i) order[i] = (i + rotation) % np;
        ++rotation;
        for (int k = 0; k < np; ++k) {
          const int i = order[k];
          ClockProbe<<<1, 1, 0, stream>>>(mhz + 2 * k);
          LAUNCH_OK();
          CUDA_OK(cudaEventRecord(start[i], stream));
          probes[i].run();
          CUDA_OK(cudaEventRecord(end[i], stream));
          ClockProbe<<<1, 1, 0, stream>>>(mhz + 2 * k + 1);
          LAUNCH_OK();
        }
        CUDA_OK(cudaStreamSynchronize(stream));
        ++cycles;
        if (!measured) continue;
        double clocks[2 * probes_max];
        CUDA_OK(cudaMemcpy(clocks, mhz, 2 * np * sizeof(double), cudaMemcpyDeviceToHost));
        const auto [nvml_mhz, nvml_w] = nvml.Read();
        for (int k = 0; k < np; ++k) {
          const int i = order[k];
          float ms = 0;
          CUDA_OK(cudaEventElapsedTime(&ms, start[i], end[i]));
          std::printf("%zu,%d,%s,%.5f,%.1f,%.1f,%.0f,%.1f\n", level, hogs, probes[i].name, ms, clocks[2 * k],
                      clocks[2 * k + 1], nvml_mhz, nvml_w);
        }
      }
      std::fprintf(stderr, "clock_sweep: level %zu (%d hogs) %s: %zu cycles\n", level, hogs,
                   measured ? "measured" : "warm-up", cycles);
    }
  }
  for (int i = 0; i < np; ++i) {
    CUDA_OK(cudaEventDestroy(start[i]));
    CUDA_OK(cudaEventDestroy(end[i]));
  }
  CUBLAS_OK(cublasDestroy(blas));
  for (void* p : std::initializer_list<void*>{f32, ha, hb, hc, x, y, z, l2, sink, sa, sb, sc, mhz}) CUDA_OK(cudaFree(p));
  CUDA_OK(cudaStreamDestroy(stream));
  return 0;
}
