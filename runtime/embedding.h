// Token embedding: a lookup into a table [V, D] and its scatter-add backward. Sharding the table
// by columns (D/t per rank) needs no change: call with d = D/t on the shard.
#pragma once

#include <cstdint>

namespace shardsim::runtime {

// out [T, D] = table[ids[t], :] for each token; out overwritten. ids [T]; table [V, D].
// REQUIRES: every id in [0, V) (checked).
void EmbeddingForward(float* out, const int32_t* ids, const float* table, int t, int v, int d);

// d_table [V, D] += scatter of d_out [T, D] rows to rows ids[t] (repeated ids add up); accumulates.
void EmbeddingBackward(float* d_table, const float* d_out, const int32_t* ids, int t, int v, int d);

}  // namespace shardsim::runtime
