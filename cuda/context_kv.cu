#include "cuda/context_kv.h"

#include <algorithm>

#include "cuda/kernels.h"

namespace shardsim::cuda {

template <typename T>
ContextKv<T>::ContextKv(HostGroup& group, int64_t rows, int64_t local, int64_t width)
    : group_(group), size_(group.Size()), rows_(rows), row_(local * width), n_(rows * local * width) {
  k_ = DeviceBuffer<T>(n_ * size_);
  v_ = DeviceBuffer<T>(n_ * size_);
  dk_ = DeviceBuffer<T>(n_ * size_);
  dv_ = DeviceBuffer<T>(n_ * size_);
  local_f_ = DeviceBuffer<float>(n_);
  full_f_ = DeviceBuffer<float>(n_ * size_);
}

template <typename T>
void ContextKv<T>::Gather(T* full, const T* local, const std::string& what) {
  Convert(local_f_.data(), local, n_);
  mine_ = local_f_.Download();
  all_.resize(static_cast<size_t>(n_ * size_));
  group_.AllGather(all_.data(), mine_.data(), n_, what);
  ordered_.resize(all_.size());  // [rank][row][token] -> [row][rank][token]
  for (int64_t r = 0; r < size_; ++r) {
    for (int64_t b = 0; b < rows_; ++b) std::copy_n(all_.begin() + (r * rows_ + b) * row_, row_, ordered_.begin() + (b * size_ + r) * row_);
  }
  full_f_.Upload(ordered_);
  Convert(full, full_f_.data(), n_ * size_);
}

template <typename T>
void ContextKv<T>::ScatterSum(T* local, const T* full, const std::string& what) {
  Convert(full_f_.data(), full, n_ * size_);
  all_ = full_f_.Download();
  ordered_.resize(all_.size());  // [row][rank][token] -> [rank][row][token]
  for (int64_t r = 0; r < size_; ++r) {
    for (int64_t b = 0; b < rows_; ++b) std::copy_n(all_.begin() + (b * size_ + r) * row_, row_, ordered_.begin() + (r * rows_ + b) * row_);
  }
  mine_.resize(static_cast<size_t>(n_));
  group_.ReduceScatterSum(mine_.data(), ordered_.data(), n_, what);
  local_f_.Upload(mine_);
  Convert(local, local_f_.data(), n_);
}

template class ContextKv<float>;
template class ContextKv<bf16>;

}  // namespace shardsim::cuda
