// Where a GPU rank's gradients go as its backward finishes them, so that their data- and
// context-parallel reduction (over MPI, runtime/gpu_host_collectives.h) runs while the GPU
// computes the layers before them: the GPU model copies each finished layer's gradients to host
// memory on a stream of its own and hands them over when the copy is done (gradient_stream.h).
#pragma once

#include <cstdint>

namespace shardsim::cuda {

class GradientSink {
 public:
  virtual ~GradientSink() = default;
  // `data` [n] holds this rank's gradients of parameters [offset, offset + n), final for the
  // step, in host memory the model leaves alone until LoadStreamedGradients; the sink may reduce
  // them in place (started here, finished by the time the caller loads them back).
  virtual void Ready(float* data, int64_t offset, int64_t n) = 0;
  // Called while the model waits for copies: lets started reductions move.
  virtual void Progress() = 0;
};

}  // namespace shardsim::cuda
