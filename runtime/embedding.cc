// Token embedding lookup and scatter-add.
#include "runtime/embedding.h"

#include <algorithm>
#include <string>

#include "core/error.h"

namespace shardsim::runtime {

void EmbeddingForward(float* out, const int32_t* ids, const float* table, int t, int v, int d) {
  SHARDSIM_CHECK(t >= 0 && v > 0 && d > 0, "EmbeddingForward: bad sizes");
  for (int i = 0; i < t; ++i) {
    SHARDSIM_CHECK(ids[i] >= 0 && ids[i] < v,
                   "token id " + std::to_string(ids[i]) + " outside vocab " + std::to_string(v));
    std::copy_n(table + int64_t{ids[i]} * d, d, out + int64_t{i} * d);
  }
}

void EmbeddingBackward(float* d_table, const float* d_out, const int32_t* ids, int t, int v,
                       int d) {
  SHARDSIM_CHECK(t >= 0 && v > 0 && d > 0, "EmbeddingBackward: bad sizes");
  for (int i = 0; i < t; ++i) {
    SHARDSIM_CHECK(ids[i] >= 0 && ids[i] < v,
                   "token id " + std::to_string(ids[i]) + " outside vocab " + std::to_string(v));
    float* row = d_table + int64_t{ids[i]} * d;
    const float* g = d_out + int64_t{i} * d;
    for (int j = 0; j < d; ++j) row[j] += g[j];
  }
}

void EmbeddingShardForward(float* out, const int32_t* ids, const float* table, int t, int v, int row0, int rows, int d) {
  SHARDSIM_CHECK(t >= 0 && v > 0 && d > 0 && row0 >= 0 && rows >= 0 && row0 + rows <= v, "EmbeddingShardForward: bad sizes");
  for (int i = 0; i < t; ++i) {
    SHARDSIM_CHECK(ids[i] >= 0 && ids[i] < v, "token id " + std::to_string(ids[i]) + " outside vocab " + std::to_string(v));
    const int r = ids[i] - row0;
    if (r >= 0 && r < rows) {
      std::copy_n(table + int64_t{r} * d, d, out + int64_t{i} * d);
    } else {
      std::fill_n(out + int64_t{i} * d, d, 0.0f);
    }
  }
}

void EmbeddingShardBackward(float* d_table, const float* d_out, const int32_t* ids, int t, int v, int row0, int rows, int d) {
  SHARDSIM_CHECK(t >= 0 && v > 0 && d > 0 && row0 >= 0 && rows >= 0 && row0 + rows <= v, "EmbeddingShardBackward: bad sizes");
  for (int i = 0; i < t; ++i) {
    SHARDSIM_CHECK(ids[i] >= 0 && ids[i] < v, "token id " + std::to_string(ids[i]) + " outside vocab " + std::to_string(v));
    const int r = ids[i] - row0;
    if (r < 0 || r >= rows) continue;
    float* row = d_table + int64_t{r} * d;
    const float* g = d_out + int64_t{i} * d;
    for (int j = 0; j < d; ++j) row[j] += g[j];
  }
}

}  // namespace shardsim::runtime
