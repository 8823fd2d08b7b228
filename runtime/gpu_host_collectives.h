// The GPU path's collectives over MPI on host memory (Debian's Open MPI is not CUDA-aware), for
// `train --device cuda` (train_gpu.cc): one mesh axis's group as the GPU model's HostGroup, and
// the data- and context-parallel gradient reduction overlapped with the backward as its
// GradientSink. Both wait under the job's timeout (MeshComms::Wait).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cuda/gradient_sink.h"
#include "cuda/host_group.h"
#include "runtime/comm.h"

namespace shardsim::runtime {

// The axes a GPU rank's gradients are summed over: data and context (every parameter is replicated
// over both).
const std::vector<std::string>& GradientReductionAxes();

// `reduce(at, count)` over pieces of at most 2^28 elements: MPI counts are int, and a 1B model's
// gradients are more.
void InPieces(int64_t n, const std::function<void(int64_t at, int64_t count)>& reduce);

// One mesh axis's group (the tensor or the context group of the GPU model).
class AxisGroup final : public cuda::HostGroup {
 public:
  AxisGroup(MeshComms& comms, std::string axis) : comms_(comms), axes_{std::move(axis)} {}
  int Size() const override;
  int Rank() const override;
  void Sum(float* data, int64_t n, const std::string& what) override;
  void Sum(double* data, int64_t n, const std::string& what) override;
  void Max(float* data, int64_t n, const std::string& what) override;
  // Refuse (InputError) more than 2^31 elements in all: gathers cannot be cut into pieces in place.
  void AllGather(float* out, const float* in, int64_t n, const std::string& what) override;
  void ReduceScatterSum(float* out, const float* in, int64_t n, const std::string& what) override;

 private:
  void CheckCount(int64_t n, const std::string& what) const;
  MeshComms& comms_;
  std::vector<std::string> axes_;
};

// The data- and context-parallel gradient reduction overlapped with the backward (the plan's
// overlap.data, as Megatron-LM's --overlap-grad-reduce): each layer's gradients are summed in
// place over MPI as soon as the GPU model hands them over, while the GPU computes the layers
// before it. The hand-overs come when copies finish, at times that differ between ranks, so they
// run on a communicator of their own: MPI matches collectives per communicator in issue order,
// and the backward's own collectives (context parallelism's K/V gathers) stay on theirs.
// Constructing it is collective over the job.
class OverlappedReduction final : public cuda::GradientSink {
 public:
  explicit OverlappedReduction(MeshComms& comms);
  ~OverlappedReduction() override;
  OverlappedReduction(const OverlappedReduction&) = delete;
  OverlappedReduction& operator=(const OverlappedReduction&) = delete;
  void Ready(float* data, int64_t offset, int64_t n) override;
  void Progress() override;
  // Waits for every reduction started.
  void Finish();

 private:
  MeshComms& comms_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  std::vector<MPI_Request> requests_;
  std::vector<int64_t> offsets_;  // of each request's first parameter, for error messages
};

}  // namespace shardsim::runtime
