// What a matrix product loses to a kernel that holds some of the GPU's multiprocessors meanwhile
// (`shardsim-gpu sm-share`): the product timed alone, then beside a kernel of u thread blocks, one
// per multiprocessor (each asks for the most shared memory a block may have, so nothing else fits
// beside it), that copies device memory as a collective's kernel does, for as long as the
// products run. The simulator charges overlapped compute U / (U - u) of its time for such a
// kernel (sim/op_cost.cc, DeepEP's and NCCL's SMs); this measures that ratio on the GPU at hand.
#pragma once

#include <cstdint>
#include <vector>

#include "cuda/device_info.h"

namespace shardsim::cuda {

struct SmShareOptions {
  int64_t m = 8192, n = 8192, k = 8192;  // the bf16 product (row-major [m,k] x [k,n])
  std::vector<int64_t> units = {8, 16, 24, 32, 48, 66};
  int64_t repeats = 20;                  // products per timing
};

struct SmShareRow {
  int64_t units = 0;          // multiprocessors held
  double alone_s = 0;         // one product, alone
  double beside_s = 0;        // beside `units` blocks that copy device memory
  double copy_bytes_per_s = 0;  // what those blocks copied meanwhile (read + written)
  double modelled = 0;        // U / (U - units): the simulator's ratio
};

struct SmShareResult {
  DeviceInfo device;
  int64_t m = 0, n = 0, k = 0;
  std::vector<SmShareRow> rows;
};

// REQUIRES: a GPU (HasDevice); each of `options.units` in 1 .. multiprocessors - 1 (InputError
// otherwise).
SmShareResult MeasureSmShare(const SmShareOptions& options);

}  // namespace shardsim::cuda
