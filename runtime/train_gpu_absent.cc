// The CUDA path was not built (no nvcc at configure time): `--device cuda` is refused.
#include "core/error.h"
#include "runtime/train_gpu.h"

namespace shardsim::runtime {

bool GpuTrainingBuilt() { return false; }

int RunTrainOnGpu(const TrainCommandOptions&, const ModelSpec&, const PlanSpec&, const Corpus&) {
  throw InputError("--device cuda", "this build has no CUDA path (no CUDA compiler was found when it was configured)", "cpu",
                   "rebuild where nvcc is installed (docs/gpu.md)");
}

}  // namespace shardsim::runtime
