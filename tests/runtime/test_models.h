// The narrow models the MPI tests train (equivalence_harness.h, checkpoint_test.cc), and the
// job's size.
#pragma once

#include <mpi.h>

#include "core/model_presets.h"
#include "core/model_spec.h"

namespace shardsim::runtime::equivalence {

inline int WorldSize() {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

// tiny-dense's shape, narrower so that eight oversubscribed ranks train it in seconds: 4 layers,
// width 64, 4 heads over 2 K/V heads (grouped-query), MLP 128, byte vocabulary.
inline ModelSpec TestModel() {
  ModelSpec m = FindModelPreset("tiny-dense")->spec;
  m.name = "mpi-test";
  m.hidden_size = 64;
  m.num_heads = 4;
  m.num_kv_heads = 2;
  m.head_dim = 16;
  m.ffn_hidden_size = 128;
  return m;
}

// tiny-moe's shape, as narrow: the first layer dense, then MoE layers of 4 experts (top-2, width
// 32) and one shared expert.
inline ModelSpec TestMoeModel() {
  ModelSpec m = TestModel();
  m.name = "mpi-test-moe";
  m.moe = MoeSpec{.num_experts = 4, .top_k = 2, .num_shared_experts = 1, .expert_ffn_hidden_size = 32, .first_dense_layers = 1, .layer_interval = 1};
  return m;
}

}  // namespace shardsim::runtime::equivalence
