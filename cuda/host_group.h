// The collectives a GPU rank needs over the other ranks of one mesh axis (its tensor-parallel or
// context-parallel group), on host memory: the runtime implements them over MPI
// (runtime/gpu_host_collectives.h), since Debian's Open MPI is not CUDA-aware; cuda/ itself stays
// free of MPI. `what` names the collective in error messages.
#pragma once

#include <cstdint>
#include <string>

namespace shardsim::cuda {

class HostGroup {
 public:
  virtual ~HostGroup() = default;
  virtual int Size() const = 0;
  virtual int Rank() const = 0;
  // In place, element by element over the group's ranks.
  virtual void Sum(float* data, int64_t n, const std::string& what) = 0;
  virtual void Sum(double* data, int64_t n, const std::string& what) = 0;
  virtual void Max(float* data, int64_t n, const std::string& what) = 0;
  // out [Size() * n] = every rank's in [n], in rank order.
  virtual void AllGather(float* out, const float* in, int64_t n, const std::string& what) = 0;
  // out [n] = this rank's block of the sum over the ranks of in [Size() * n].
  virtual void ReduceScatterSum(float* out, const float* in, int64_t n, const std::string& what) = 0;
};

}  // namespace shardsim::cuda
