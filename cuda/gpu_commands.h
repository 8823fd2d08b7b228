// The subcommands of shardsim-gpu: `info`, `calibrate` (measure the GPU, write a cluster JSON)
// `train` (one rank's training steps on the GPU, timed, model FLOP/s against the peak) and
// `sm-share` (a product beside a kernel holding some multiprocessors: cuda/sm_share.h).
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "cuda/sm_share.h"

namespace shardsim::cuda {

struct GpuCalibrateOptions {
  std::string cluster;            // preset whose JSON is written with the measured figures ("" : by device name)
  std::string model = "llama3-8b";  // its layer shapes are the products measured
  int64_t seq_len = 4096;
  int64_t tokens = 8192;          // rows of the measured products
  std::string out;                // cluster JSON to write ("" : none)
  bool json = false;
};

struct GpuTrainOptions {
  std::string model;
  int64_t seq_len = 4096;
  int64_t micro_batch = 1;
  int64_t steps = 5;
  std::string dtype = "bf16";
  std::string attention = "fused";  // where it applies (bf16, head dim 64/128, sequence a multiple of 64), or "tiled"
  std::string cluster;  // whose peak MFU is against ("" : by device name)
  uint64_t seed = 1;
  bool json = false;
};

struct GpuSmShareOptions {
  SmShareOptions measure;  // the product, the units held, the repeats (cuda/sm_share.h)
  bool json = false;
};

int RunGpuInfo(std::ostream& out);
int RunGpuCalibrate(const GpuCalibrateOptions& options, std::ostream& out);
int RunGpuTrain(const GpuTrainOptions& options, std::ostream& out);
int RunGpuSmShare(const GpuSmShareOptions& options, std::ostream& out);

}  // namespace shardsim::cuda
