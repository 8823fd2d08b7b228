#include "cuda/device_info.h"

#include <cuda_runtime.h>

#include "cuda/cuda_check.h"

namespace shardsim::cuda {

bool HasDevice(std::string* why) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    // Without an NVIDIA driver the runtime answers "driver version is insufficient": say what it means.
    const bool absent = status == cudaErrorInsufficientDriver || status == cudaErrorNoDevice;
    if (why != nullptr) {
      *why = absent ? std::string("no NVIDIA GPU or driver found (the CUDA runtime says: ") + cudaGetErrorString(status) + ")"
                    : std::string("no usable CUDA device: ") + cudaGetErrorString(status);
    }
    return false;
  }
  if (count == 0) {
    if (why != nullptr) *why = "no CUDA device: the driver sees none";
    return false;
  }
  return true;
}

void SelectDevice(int index) {
  int count = 0;
  Check(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
  Check(cudaSetDevice(index % count), "cudaSetDevice");
}

DeviceInfo QueryDevice() {
  int device = 0;
  Check(cudaGetDevice(&device), "cudaGetDevice");
  cudaDeviceProp prop{};
  Check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  int driver = 0;
  Check(cudaDriverGetVersion(&driver), "cudaDriverGetVersion");
  DeviceInfo info;
  info.name = prop.name;
  info.compute_major = prop.major;
  info.compute_minor = prop.minor;
  info.multiprocessors = prop.multiProcessorCount;
  info.memory_bytes = static_cast<int64_t>(prop.totalGlobalMem);
  info.l2_bytes = prop.l2CacheSize;
  info.driver = std::to_string(driver / 1000) + "." + std::to_string((driver % 1000) / 10);
  return info;
}

}  // namespace shardsim::cuda
