#include "cuda/gradient_stream.h"

#include "cuda/cuda_check.h"

namespace shardsim::cuda {

GradientStream::~GradientStream() {
  for (const Pending& p : pending_) cudaEventDestroy(p.done);
  for (cudaEvent_t e : free_events_) cudaEventDestroy(e);
  if (copy_stream_ != nullptr) cudaStreamDestroy(copy_stream_);
}

void GradientStream::Begin(GradientSink* sink, int64_t n) {
  if (pinned_.size() != n) pinned_ = PinnedBuffer<float>(n);
  if (copy_stream_ == nullptr) Check(cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  sink_ = sink;
}

cudaEvent_t GradientStream::TakeEvent() {
  if (free_events_.empty()) {
    cudaEvent_t e = nullptr;
    Check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
    return e;
  }
  cudaEvent_t e = free_events_.back();
  free_events_.pop_back();
  return e;
}

void GradientStream::Send(const float* grads, int64_t offset, int64_t n) {
  if (n <= 0) return;
  // Every event goes back to free_events_ or pending_, whatever throws. `queued` is free again as
  // soon as the copy stream's wait on it is queued (a wait is on the record made before it), so
  // `copied` below may be the same event, recorded anew.
  cudaEvent_t queued = TakeEvent();
  free_events_.push_back(queued);
  Check(cudaEventRecord(queued, nullptr), "cudaEventRecord");
  Check(cudaStreamWaitEvent(copy_stream_, queued, 0), "cudaStreamWaitEvent");
  Check(cudaMemcpyAsync(pinned_.data() + offset, grads + offset, sizeof(float) * static_cast<size_t>(n), cudaMemcpyDeviceToHost,
                        copy_stream_),
        "cudaMemcpyAsync to host");
  cudaEvent_t copied = TakeEvent();
  pending_.push_back({copied, offset, n});
  Check(cudaEventRecord(copied, copy_stream_), "cudaEventRecord");
  HandOver(false);
}

void GradientStream::HandOver(bool all) {
  while (!pending_.empty()) {
    const cudaError_t state = cudaEventQuery(pending_.front().done);
    if (state == cudaSuccess) {
      const Pending p = pending_.front();
      pending_.pop_front();
      free_events_.push_back(p.done);
      sink_->Ready(pinned_.data() + p.offset, p.offset, p.n);
      continue;
    }
    if (state != cudaErrorNotReady) Check(state, "cudaEventQuery");
    if (!all) return;
    sink_->Progress();
  }
}

void GradientStream::Finish() {
  HandOver(true);
  sink_ = nullptr;
}

void GradientStream::Load(float* grads, int64_t n) {
  if (pinned_.size() != n) throw CudaError("GpuModel::LoadStreamedGradients: no Backward streamed gradients");
  Check(cudaMemcpy(grads, pinned_.data(), sizeof(float) * static_cast<size_t>(n), cudaMemcpyHostToDevice), "cudaMemcpy to device");
}

}  // namespace shardsim::cuda
