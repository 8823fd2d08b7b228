#include "cuda/sm_share.h"

#include <cuda_bf16.h>

#include <chrono>
#include <string>
#include <thread>

#include "core/error.h"
#include "cuda/blas.h"
#include "cuda/cuda_check.h"
#include "cuda/device_buffer.h"
#include "cuda/kernels.h"

namespace shardsim::cuda {
namespace {

// Nanoseconds of the GPU's global timer.
__device__ uint64_t GlobalNs() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// One block per multiprocessor (its shared memory fills one): counts itself in `started`, then
// copies its slice of `src` to `dst` over and over, as a collective's kernel moves its chunks,
// until the host sets `*stop` (or 20 s pass: a stuck host never leaves the GPU held). `copied`
// gets the bytes it moved (read + written).
__global__ void HoldUnits(const volatile int* stop, int* started, const float4* src, float4* dst, int64_t per_block,
                          unsigned long long* copied) {
  extern __shared__ float4 scratch[];
  __shared__ int done;
  if (threadIdx.x == 0) {
    atomicAdd(started, 1);
    done = 0;
  }
  scratch[threadIdx.x] = make_float4(0, 0, 0, 0);
  __syncthreads();
  const uint64_t deadline = GlobalNs() + 20000000000ull;
  const float4* from = src + blockIdx.x * per_block;
  float4* to = dst + blockIdx.x * per_block;
  unsigned long long moved = 0;
  uint64_t next_poll = 0;
  while (!done) {
    for (int64_t i = threadIdx.x; i < per_block; i += blockDim.x) to[i] = from[i];
    moved += 2 * sizeof(float4) * static_cast<unsigned long long>(per_block);
    __syncthreads();
    // The host's flag is read across PCIe: at most every 20 us.
    if (threadIdx.x == 0) {
      const uint64_t now = GlobalNs();
      if (now >= next_poll) {
        next_poll = now + 20000;
        if (*stop != 0 || now > deadline) done = 1;
      }
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(copied, moved);  // each thread counted the whole block's bytes
}

class Timer {
 public:
  Timer() {
    Check(cudaEventCreate(&start_), "cudaEventCreate");
    Check(cudaEventCreate(&stop_), "cudaEventCreate");
  }
  ~Timer() {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  void Start(cudaStream_t s) { Check(cudaEventRecord(start_, s), "cudaEventRecord"); }
  double Stop(cudaStream_t s) {
    Check(cudaEventRecord(stop_, s), "cudaEventRecord");
    Check(cudaEventSynchronize(stop_), "cudaEventSynchronize");
    float ms = 0;
    Check(cudaEventElapsedTime(&ms, start_, stop_), "cudaEventElapsedTime");
    return ms * 1e-3;
  }

 private:
  cudaEvent_t start_{}, stop_{};
};

}  // namespace

SmShareResult MeasureSmShare(const SmShareOptions& o) {
  SmShareResult result{.device = QueryDevice(), .m = o.m, .n = o.n, .k = o.k, .rows = {}};
  const int units = result.device.multiprocessors;
  for (int64_t u : o.units) {
    if (u < 1 || u >= units) {
      throw InputError("--units", "must each be in [1, " + std::to_string(units - 1) + "] on this GPU, got " + std::to_string(u),
                       "multiprocessors to hold, fewer than the GPU's " + std::to_string(units), "");
    }
  }
  int device = 0, shared_optin = 0;
  Check(cudaGetDevice(&device), "cudaGetDevice");
  Check(cudaDeviceGetAttribute(&shared_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device), "cudaDeviceGetAttribute");
  // The most a block may ask for, less the kernel's static `done`: one block fills a multiprocessor.
  const int shared = shared_optin - 16;
  Check(cudaFuncSetAttribute(HoldUnits, cudaFuncAttributeMaxDynamicSharedMemorySize, shared), "cudaFuncSetAttribute");
  const int threads = 512;

  // Random normal inputs, as calibrate's (tensor cores draw less power on zeros, which would
  // flatter the rates).
  DeviceBuffer<__nv_bfloat16> a(o.m * o.k), b(o.k * o.n), c(o.m * o.n);
  {
    DeviceBuffer<float> a32(a.size()), b32(b.size());
    FillNormal(a32.data(), a32.size(), 7, 1, 1.0f);
    FillNormal(b32.data(), b32.size(), 7, 2, 1.0f);
    Convert(a.data(), a32.data(), a32.size());
    Convert(b.data(), b32.data(), b32.size());
  }
  // 8 MiB a block to copy: well beyond the L2, so the copies reach HBM as a collective's do.
  const int64_t per_block = (8 << 20) / static_cast<int64_t>(sizeof(float4));
  DeviceBuffer<float4> src(per_block * units), dst(per_block * units);
  Check(cudaMemset(src.data(), 0, src.bytes()), "cudaMemset");
  int* host_flags = nullptr;  // [stop, started], mapped into the device's address space
  Check(cudaHostAlloc(reinterpret_cast<void**>(&host_flags), 2 * sizeof(int), cudaHostAllocMapped), "cudaHostAlloc");
  int* device_flags = nullptr;
  Check(cudaHostGetDevicePointer(reinterpret_cast<void**>(&device_flags), host_flags, 0), "cudaHostGetDevicePointer");
  DeviceBuffer<unsigned long long> copied(1);

  cudaStream_t gemm_stream{}, hold_stream{};
  Check(cudaStreamCreateWithFlags(&gemm_stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  Check(cudaStreamCreateWithFlags(&hold_stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  Blas blas;
  blas.SetStream(gemm_stream);
  Timer timer;
  auto products = [&] {
    timer.Start(gemm_stream);
    for (int64_t r = 0; r < o.repeats; ++r) {
      blas.Gemm({c.data(), DType::kBf16, o.n}, {a.data(), DType::kBf16, o.k}, {b.data(), DType::kBf16, o.n}, o.m, o.n, o.k, 1.0f, 0.0f);
    }
    return timer.Stop(gemm_stream) / static_cast<double>(o.repeats);
  };
  // Products beside `u` held multiprocessors: started once every block runs, timed, then released.
  auto beside = [&](int64_t u, double* copy_rate) {
    volatile int* flags = host_flags;
    flags[0] = 0;
    flags[1] = 0;
    Check(cudaMemsetAsync(copied.data(), 0, sizeof(unsigned long long), hold_stream), "cudaMemsetAsync");
    const auto began = std::chrono::steady_clock::now();
    HoldUnits<<<static_cast<unsigned>(u), threads, shared, hold_stream>>>(device_flags, device_flags + 1, src.data(), dst.data(), per_block,
                                                                          copied.data());
    CheckLaunch("HoldUnits");
    while (flags[1] < u) {
      if (std::chrono::steady_clock::now() - began > std::chrono::seconds(10)) {
        flags[0] = 1;
        cudaStreamSynchronize(hold_stream);
        throw CudaError("sm-share: the holding kernel's " + std::to_string(u) + " blocks did not all start within 10 s");
      }
      std::this_thread::yield();
    }
    const double seconds = products();
    flags[0] = 1;
    Check(cudaStreamSynchronize(hold_stream), "cudaStreamSynchronize");
    // From the launch: the blocks copied from their start (a launch's latency included).
    const double window = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
    unsigned long long bytes = 0;
    Check(cudaMemcpy(&bytes, copied.data(), sizeof(bytes), cudaMemcpyDeviceToHost), "cudaMemcpy");
    *copy_rate = static_cast<double>(bytes) / window;
    return seconds;
  };
  products();  // warm-up: cuBLAS's heuristics and the clocks
  double ignored = 0;
  beside(o.units.front(), &ignored);
  for (int64_t u : o.units) {
    SmShareRow row{.units = u};
    row.alone_s = products();
    row.beside_s = beside(u, &row.copy_bytes_per_s);
    row.modelled = static_cast<double>(units) / static_cast<double>(units - u);
    result.rows.push_back(row);
  }
  cudaStreamDestroy(gemm_stream);
  cudaStreamDestroy(hold_stream);
  cudaFreeHost(host_flags);
  return result;
}

}  // namespace shardsim::cuda
