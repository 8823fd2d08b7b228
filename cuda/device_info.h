// The GPU this process sees: whether there is one, and what it is (for reports and calibration).
#pragma once

#include <cstdint>
#include <string>

namespace shardsim::cuda {

struct DeviceInfo {
  std::string name;                // "NVIDIA H100 80GB HBM3"
  int compute_major = 0;           // 9 for Hopper
  int compute_minor = 0;
  int multiprocessors = 0;
  int64_t memory_bytes = 0;        // total device memory
  int64_t l2_bytes = 0;
  std::string driver;              // "13.0" (driver's CUDA version)
};

// Empty when there is no usable GPU; `why` then says what the CUDA runtime answered.
bool HasDevice(std::string* why);
// Makes device `index` modulo the device count current for this process (ranks sharing a machine
// spread over its GPUs; several ranks may share one). REQUIRES: HasDevice().
void SelectDevice(int index);
// The current device. REQUIRES: HasDevice().
DeviceInfo QueryDevice();

}  // namespace shardsim::cuda
