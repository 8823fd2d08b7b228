// The training run's text lines, one home for the runtime (as the steps end) and `shardsim run
// --plot` (from the runtime's JSON report, which it captured).
#pragma once

#include <cstdint>
#include <string>

namespace shardsim {

// "step   3  loss 4.422365 nats  grad norm 3.0120  87.0 ms"
std::string TrainStepLine(int64_t step, double loss, double grad_norm, double seconds);

// The CPU runtime's closing line: the median step (rank 0's), the model FLOP rate over all ranks
// and the BLAS library that ran the products.
std::string CpuMedianLine(double median_s, double model_flop_per_s, const std::string& blas);

// The GPU path's closing line: the median step, the model FLOP rate, ranks, the device and the
// precision it trained in.
std::string GpuMedianLine(double median_s, double model_flop_per_s, int64_t ranks, const std::string& device, const std::string& precision);

}  // namespace shardsim
