// Streams a GPU rank's gradients to a GradientSink during its backward (cuda/gradient_sink.h):
// each range the backward has finished is copied to pinned host memory on a copy stream of its
// own, after the work queued so far on the default stream, and handed to the sink once the copy
// is done, while the GPU goes on with the layers before it.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include <cuda_runtime.h>

#include "cuda/device_buffer.h"
#include "cuda/gradient_sink.h"

namespace shardsim::cuda {

class GradientStream {
 public:
  GradientStream() = default;
  ~GradientStream();
  GradientStream(const GradientStream&) = delete;
  GradientStream& operator=(const GradientStream&) = delete;

  // Starts a backward's streaming of gradients [n] to `sink` (pinned memory for n floats kept
  // between steps).
  void Begin(GradientSink* sink, int64_t n);
  bool active() const { return sink_ != nullptr; }
  // grads [offset, offset + n) are final once the work queued so far has run: copy them out, then
  // hand over whatever copies have finished.
  void Send(const float* grads, int64_t offset, int64_t n);
  // Waits for every copy, handing each over in order and letting the sink's reductions progress
  // meanwhile; ends the streaming.
  void Finish();
  // grads [n] = the pinned memory as the sink left it (the reduced gradients).
  void Load(float* grads, int64_t n);

 private:
  struct Pending {
    cudaEvent_t done;
    int64_t offset, n;
  };
  void HandOver(bool all);
  cudaEvent_t TakeEvent();

  GradientSink* sink_ = nullptr;
  PinnedBuffer<float> pinned_;
  cudaStream_t copy_stream_ = nullptr;
  std::deque<Pending> pending_;
  std::vector<cudaEvent_t> free_events_;  // created once, reused every step
};

}  // namespace shardsim::cuda
