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

// Vocabulary-parallel (Megatron-LM's VocabParallelEmbedding): `table` holds rows
// [row0, row0 + rows) of the [V, D] table. out [T, D] = each token's row when its id falls in the
// shard, zeros otherwise (the tensor group's sum is the whole lookup). REQUIRES: ids in [0, V).
void EmbeddingShardForward(float* out, const int32_t* ids, const float* table, int t, int v, int row0, int rows, int d);
// d_table [rows, D] += d_out [T, D] rows of the tokens whose ids fall in the shard; accumulates.
void EmbeddingShardBackward(float* d_table, const float* d_out, const int32_t* ids, int t, int v, int row0, int rows, int d);

}  // namespace shardsim::runtime
