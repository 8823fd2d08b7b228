// Owned device memory (cudaMalloc, never managed memory) for n elements of T, and owned pinned
// host memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "cuda/cuda_check.h"

namespace shardsim::cuda {

template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(int64_t n) : n_(n) {
    if (n > 0) Check(cudaMalloc(reinterpret_cast<void**>(&data_), sizeof(T) * static_cast<size_t>(n)), "cudaMalloc");
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : data_(std::exchange(o.data_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      Free();
      data_ = std::exchange(o.data_, nullptr);
      n_ = std::exchange(o.n_, 0);
    }
    return *this;
  }
  ~DeviceBuffer() { Free(); }

  T* data() { return data_; }
  const T* data() const { return data_; }
  int64_t size() const { return n_; }
  size_t bytes() const { return sizeof(T) * static_cast<size_t>(n_); }

  void Upload(const std::vector<T>& host) {
    if (static_cast<int64_t>(host.size()) != n_) throw CudaError("DeviceBuffer::Upload: size mismatch");
    if (n_ > 0) Check(cudaMemcpy(data_, host.data(), bytes(), cudaMemcpyHostToDevice), "cudaMemcpy to device");
  }
  std::vector<T> Download() const {
    std::vector<T> host(static_cast<size_t>(n_));
    if (n_ > 0) Check(cudaMemcpy(host.data(), data_, bytes(), cudaMemcpyDeviceToHost), "cudaMemcpy to host");
    return host;
  }
  void Zero() {
    if (n_ > 0) Check(cudaMemset(data_, 0, bytes()), "cudaMemset");
  }

 private:
  void Free() {
    if (data_ != nullptr) cudaFree(data_);
    data_ = nullptr;
  }
  T* data_ = nullptr;
  int64_t n_ = 0;
};

// Owned page-locked host memory (cudaMallocHost) for n elements of T: what asynchronous copies
// from the device need to run while the host goes on.
template <typename T>
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  explicit PinnedBuffer(int64_t n) : n_(n) {
    if (n > 0) Check(cudaMallocHost(reinterpret_cast<void**>(&data_), sizeof(T) * static_cast<size_t>(n)), "cudaMallocHost");
  }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  PinnedBuffer(PinnedBuffer&& o) noexcept : data_(std::exchange(o.data_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  PinnedBuffer& operator=(PinnedBuffer&& o) noexcept {
    if (this != &o) {
      if (data_ != nullptr) cudaFreeHost(data_);
      data_ = std::exchange(o.data_, nullptr);
      n_ = std::exchange(o.n_, 0);
    }
    return *this;
  }
  ~PinnedBuffer() {
    if (data_ != nullptr) cudaFreeHost(data_);
  }
  T* data() { return data_; }
  int64_t size() const { return n_; }

 private:
  T* data_ = nullptr;
  int64_t n_ = 0;
};

template <typename T>
DeviceBuffer<T> ToDevice(const std::vector<T>& host) {
  DeviceBuffer<T> d(static_cast<int64_t>(host.size()));
  d.Upload(host);
  return d;
}

}  // namespace shardsim::cuda
