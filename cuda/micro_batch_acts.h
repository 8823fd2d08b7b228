// The activations the GPU model saves from a micro-batch's forward for its backward, one set per
// micro-batch in flight (cuda/gpu_model.cu). Device memory only; included by .cu files.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "cuda/device_buffer.h"

namespace shardsim::cuda {

// Saved activations of one layer (T) and its norms' rstd and the attention's lse (fp32).
template <typename T>
struct LayerActs {
  DeviceBuffer<T> x_in, xn1, q, k, v, o, x_mid, xn2, gate, up, h;
  DeviceBuffer<float> rstd1, rstd2, lse;
};

// A stage's sizes per micro-batch: tokens, hidden, this rank's heads x head dim, K/V heads x head
// dim, MLP width and vocabulary rows, lse entries, layers; whether it holds the head.
struct MicroBatchShape {
  int64_t tokens = 0, hidden = 0, q_width = 0, kv_width = 0, mlp = 0, vocab = 0, lse = 0, layers = 0;
  bool head = false;
};

// What one micro-batch in flight keeps from its forward for its backward: every layer's
// activations, the stage's output and final norm, the loss's gradient (the logits, in place) on
// the last stage, and the ids (the embedding's backward).
template <typename T>
struct MicroBatchActs {
  std::vector<LayerActs<T>> layers;
  DeviceBuffer<T> x_final, xnf;
  DeviceBuffer<float> rstdf, logits;
  DeviceBuffer<int32_t> ids;

  // Allocated for `s` (CudaError when the device is short of memory).
  static std::unique_ptr<MicroBatchActs> Allocate(const MicroBatchShape& s) {
    auto held = std::make_unique<MicroBatchActs>();
    const int64_t td = s.tokens * s.hidden, tq = s.tokens * s.q_width, tkv = s.tokens * s.kv_width, tf = s.tokens * s.mlp;
    held->layers.resize(static_cast<size_t>(s.layers));
    for (LayerActs<T>& a : held->layers) {
      for (DeviceBuffer<T>* b : {&a.x_in, &a.xn1, &a.x_mid, &a.xn2}) *b = DeviceBuffer<T>(td);
      for (DeviceBuffer<T>* b : {&a.q, &a.o}) *b = DeviceBuffer<T>(tq);
      for (DeviceBuffer<T>* b : {&a.k, &a.v}) *b = DeviceBuffer<T>(tkv);
      for (DeviceBuffer<T>* b : {&a.gate, &a.up, &a.h}) *b = DeviceBuffer<T>(tf);
      a.rstd1 = DeviceBuffer<float>(s.tokens);
      a.rstd2 = DeviceBuffer<float>(s.tokens);
      a.lse = DeviceBuffer<float>(s.lse);
    }
    held->x_final = DeviceBuffer<T>(td);
    held->xnf = DeviceBuffer<T>(td);
    held->rstdf = DeviceBuffer<float>(s.tokens);
    if (s.head) held->logits = DeviceBuffer<float>(s.tokens * s.vocab);
    held->ids = DeviceBuffer<int32_t>(s.tokens);
    return held;
  }
};

}  // namespace shardsim::cuda
