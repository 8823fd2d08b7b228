// Context parallelism's K/V exchange on the GPU path (the plan's context_kv all-gather, as Llama 3
// trains): each rank of the context group holds S / c tokens of every sequence; attention needs
// the whole sequence's K and V, gathered over the group, and the gradients of those sum back to
// their owners. Staged through host memory in fp32 over the group's collectives (host_group.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cuda/device_buffer.h"
#include "cuda/host_group.h"

namespace shardsim::cuda {

template <typename T>
class ContextKv {
 public:
  // `rows` sequences of `local` tokens each on this rank, `width` elements per token (K/V heads x
  // head dimension); the group's ranks hold `group.Size()` x local tokens of each sequence.
  ContextKv(HostGroup& group, int64_t rows, int64_t local, int64_t width);

  // full [rows, size x local, width] = every rank's local [rows, local, width], each row's tokens
  // in group order (the keys' positions are the ranks' positions concatenated).
  void Gather(T* full, const T* local, const std::string& what);
  // local [rows, local, width] = this rank's tokens of the group's sum of full (the same layout).
  // bf16: each rank's partial is rounded to bf16 before the sum (as its attention writes it).
  void ScatterSum(T* local, const T* full, const std::string& what);

  // Device buffers for the gathered K, V and their gradients [rows, size x local, width].
  T* k() { return k_.data(); }
  T* v() { return v_.data(); }
  T* dk() { return dk_.data(); }
  T* dv() { return dv_.data(); }

 private:
  HostGroup& group_;
  int64_t size_, rows_, row_, n_;  // ranks; rows; elements of one row's local tokens; of all local rows
  DeviceBuffer<T> k_, v_, dk_, dv_;
  DeviceBuffer<float> local_f_, full_f_;
  std::vector<float> mine_, all_, ordered_;
};

}  // namespace shardsim::cuda
