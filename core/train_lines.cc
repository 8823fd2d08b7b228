#include "core/train_lines.h"

#include <cstdio>

namespace shardsim {

std::string TrainStepLine(int64_t step, double loss, double grad_norm, double seconds) {
  char line[160];
  std::snprintf(line, sizeof line, "step %3lld  loss %.6f nats  grad norm %.4f  %.1f ms", static_cast<long long>(step), loss, grad_norm, 1e3 * seconds);
  return line;
}

std::string CpuMedianLine(double median_s, double model_flop_per_s, const std::string& blas) {
  char line[128];
  std::snprintf(line, sizeof line, "median step %.1f ms (rank 0): %.2f GFLOP/s of model FLOPs over all ranks; ", 1e3 * median_s, model_flop_per_s / 1e9);
  return line + blas;
}

std::string GpuMedianLine(double median_s, double model_flop_per_s, int64_t ranks, const std::string& device, const std::string& precision) {
  char line[128];
  std::snprintf(line, sizeof line, "median step %.1f ms (rank 0): %.2f TFLOP/s of model FLOPs over %lld rank%s on ", 1e3 * median_s, model_flop_per_s / 1e12,
                static_cast<long long>(ranks), ranks == 1 ? "" : "s");
  return line + device + " (" + precision + ")";
}

}  // namespace shardsim
