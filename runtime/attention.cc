// Blockwise attention with an online softmax (FlashAttention-2). For one batch row and kv head g,
// the H/G query heads that share g are stacked into the rows of one query tile, so each K/V tile is
// read once per query tile. Score tiles are kept transposed, S^T [keys, rows]: the softmax then
// runs along contiguous rows of queries (elementwise, so it vectorises) instead of reducing
// within a row.
#include "runtime/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "core/error.h"
#include "runtime/gemm.h"
#include "runtime/vector_math.h"

namespace shardsim::runtime {
namespace {

constexpr int kQueryTile = 64;  // query positions per tile (times H/G stacked heads)
constexpr int kKeyTile = 64;    // key positions per tile
constexpr float kInf = std::numeric_limits<float>::infinity();

void CheckShape(const AttentionShape& s) {
  SHARDSIM_CHECK(s.batch >= 0 && s.q_len >= 0 && s.kv_len >= 0, "attention: negative size");
  SHARDSIM_CHECK(s.heads > 0 && s.kv_heads > 0 && s.heads % s.kv_heads == 0,
                 "attention: heads must be a positive multiple of kv_heads");
  SHARDSIM_CHECK(s.head_dim > 0, "attention: head_dim must be positive");
}

// How the causal mask meets one (query tile, key tile) pair.
enum class TileMask { kNone, kPartial, kAll };

struct PositionRange {
  int32_t min;
  int32_t max;
};

// The range of the positions in each tile of `tile` entries.
std::vector<PositionRange> TileRanges(const int32_t* pos, int n, int tile) {
  std::vector<PositionRange> ranges;
  for (int i0 = 0; i0 < n; i0 += tile) {
    const auto [lo, hi] = std::minmax_element(pos + i0, pos + std::min(n, i0 + tile));
    ranges.push_back({*lo, *hi});
  }
  return ranges;
}

TileMask Classify(bool causal, PositionRange q, PositionRange kv) {
  if (!causal || kv.max <= q.min) return TileMask::kNone;
  if (kv.min > q.max) return TileMask::kAll;
  return TileMask::kPartial;
}

struct Strides {
  int group;       // H / G query heads per kv head
  int64_t q_row;   // floats between consecutive tokens of q, o: H * K
  int64_t kv_row;  // of k, v: G * K
};

Strides StridesOf(const AttentionShape& s) {
  return {s.heads / s.kv_heads, int64_t{s.heads} * s.head_dim, int64_t{s.kv_heads} * s.head_dim};
}

// Offset of (b, token, head) in a [B, len, n_heads, K] tensor.
int64_t TokenOffset(int b, int len, int tok, int n_heads, int head, int head_dim) {
  return ((int64_t{b} * len + tok) * n_heads + head) * head_dim;
}

// Offset of (b, head, query) in a [B, H, Sq] tensor.
int64_t RowOffset(const AttentionShape& s, int b, int head, int query) {
  return (int64_t{b} * s.heads + head) * s.q_len + query;
}

// One (batch row, kv head, query tile): rows = stacked heads * br, row r = hh * br + ii holding
// query i0 + ii of head g * group + hh. Buffers are sized once for the largest tile.
struct QueryTile {
  QueryTile(const AttentionShape& s, bool backward) {
    const int64_t max_rows = int64_t{s.heads / s.kv_heads} * kQueryTile;
    q.resize(max_rows * s.head_dim);
    rows_kd.resize(max_rows * s.head_dim);
    scores.resize(max_rows * kKeyTile);
    pos.resize(max_rows);
    row_a.resize(max_rows);
    row_b.resize(max_rows);
    row_c.resize(max_rows);
    if (backward) {
      grad_scores.resize(max_rows * kKeyTile);
      dq.resize(max_rows * s.head_dim);
    }
  }
  void Start(int b_, int g_, int i0_, const AttentionShape& s, int group) {
    b = b_;
    g = g_;
    i0 = i0_;
    br = std::min(kQueryTile, s.q_len - i0);
    rows = group * br;
  }

  int b = 0, g = 0, i0 = 0, br = 0, rows = 0;
  std::vector<float> q;            // [rows, K], times scale
  std::vector<float> rows_kd;      // [rows, K]: forward o accumulator; backward d_o
  std::vector<float> scores;       // [bc, rows]: S^T, then P^T
  std::vector<float> grad_scores;  // [bc, rows]: dP^T, then dS^T (backward)
  std::vector<float> dq;           // [rows, K] (backward)
  std::vector<int32_t> pos;        // [rows] query position of each row
  std::vector<float> row_a;        // forward: running max; backward: lse (+inf if no key seen)
  std::vector<float> row_b;        // forward: running sum; backward: delta
  std::vector<float> row_c;        // forward: scratch
};

// Copies the stacked rows of src [B, Sq, H, K] for tile t into dst [rows, K], times factor.
void PackRows(float* dst, const float* src, const AttentionShape& s, const Strides& st,
              const QueryTile& t, float factor) {
  const int kd = s.head_dim;
  for (int hh = 0; hh < st.group; ++hh) {
    for (int ii = 0; ii < t.br; ++ii) {
      const float* from =
          src + TokenOffset(t.b, s.q_len, t.i0 + ii, s.heads, t.g * st.group + hh, kd);
      float* to = dst + int64_t{hh * t.br + ii} * kd;
      for (int d = 0; d < kd; ++d) to[d] = from[d] * factor;
    }
  }
}

void PackPositions(int32_t* dst, const int32_t* q_pos, const QueryTile& t, int group) {
  for (int hh = 0; hh < group; ++hh) std::copy_n(q_pos + t.i0, t.br, dst + hh * t.br);
}

// st [bc, rows]: -inf where the key's position is after the row's query position.
SHARDSIM_VECTOR_CLONES
void MaskTransposed(float* __restrict st, const int32_t* __restrict kv_pos,
                    const int32_t* __restrict row_pos, int bc, int rows) {
  for (int j = 0; j < bc; ++j) {
    float* col = st + int64_t{j} * rows;
    const int32_t kp = kv_pos[j];
    for (int r = 0; r < rows; ++r) col[r] = kp > row_pos[r] ? -kInf : col[r];
  }
}

// Online softmax over one tile p [bc, rows] holding S^T: updates each row's running max m and sum
// l, turns p into exp(S - m_new)^T, and writes alpha = exp(m_old - m_new), the factor the row's
// output accumulator must be scaled by. A row that has seen no key keeps m = -inf and l = 0; its
// shift is 0 rather than -inf so that -inf - shift stays -inf (exp 0) instead of NaN.
SHARDSIM_VECTOR_CLONES
void OnlineSoftmaxTile(float* __restrict p, float* __restrict m, float* __restrict l,
                       float* __restrict alpha, float* __restrict shift, int bc, int rows) {
  for (int r = 0; r < rows; ++r) shift[r] = m[r];
  for (int j = 0; j < bc; ++j) {
    const float* col = p + int64_t{j} * rows;
    for (int r = 0; r < rows; ++r) shift[r] = shift[r] > col[r] ? shift[r] : col[r];
  }
  for (int r = 0; r < rows; ++r) {
    const float m_new = shift[r];
    shift[r] = m_new == -kInf ? 0.0f : m_new;
    alpha[r] = FastExp(m[r] - shift[r]);
    l[r] *= alpha[r];
    m[r] = m_new;
  }
  for (int j = 0; j < bc; ++j) {
    float* col = p + int64_t{j} * rows;
    for (int r = 0; r < rows; ++r) {
      col[r] = FastExp(col[r] - shift[r]);
      l[r] += col[r];
    }
  }
}

// acc [rows, K]: row r *= alpha[r].
SHARDSIM_VECTOR_CLONES
void ScaleRows(float* __restrict acc, const float* __restrict alpha, int rows, int kd) {
  for (int r = 0; r < rows; ++r) {
    float* row = acc + int64_t{r} * kd;
    for (int d = 0; d < kd; ++d) row[d] *= alpha[r];
  }
}

// p [bc, rows] holding S^T becomes P^T = exp(S - lse)^T; shift is lse, or +inf for a row that saw
// no key (so its P is 0).
SHARDSIM_VECTOR_CLONES
void ProbabilitiesTile(float* __restrict p, const float* __restrict shift, int bc, int rows) {
  for (int j = 0; j < bc; ++j) {
    float* col = p + int64_t{j} * rows;
    for (int r = 0; r < rows; ++r) col[r] = FastExp(col[r] - shift[r]);
  }
}

// ds [bc, rows] holding dP^T becomes dS^T = P^T (dP^T - delta).
SHARDSIM_VECTOR_CLONES
void ScoreGradTile(float* __restrict ds, const float* __restrict p, const float* __restrict delta,
                   int bc, int rows) {
  for (int j = 0; j < bc; ++j) {
    float* col = ds + int64_t{j} * rows;
    const float* pcol = p + int64_t{j} * rows;
    for (int r = 0; r < rows; ++r) col[r] = pcol[r] * (col[r] - delta[r]);
  }
}

}  // namespace

void AttentionForwardBlock(float* o, float* lse, const float* q, const float* k, const float* v,
                           const int32_t* q_pos, const int32_t* kv_pos, const AttentionShape& shape,
                           bool causal, float scale) {
  CheckShape(shape);
  const AttentionShape& s = shape;
  const Strides st = StridesOf(s);
  const int kd = s.head_dim;
  const std::vector<PositionRange> q_ranges = TileRanges(q_pos, s.q_len, kQueryTile);
  const std::vector<PositionRange> kv_ranges = TileRanges(kv_pos, s.kv_len, kKeyTile);
  QueryTile t(s, /*backward=*/false);
  std::vector<float> alpha(t.row_a.size());
  for (int b = 0; b < s.batch; ++b) {
    for (int g = 0; g < s.kv_heads; ++g) {
      const int64_t kv_head = TokenOffset(b, s.kv_len, 0, s.kv_heads, g, kd);
      for (int qt = 0; qt * kQueryTile < s.q_len; ++qt) {
        t.Start(b, g, qt * kQueryTile, s, st.group);
        PackRows(t.q.data(), q, s, st, t, scale);
        PackPositions(t.pos.data(), q_pos, t, st.group);
        float* acc = t.rows_kd.data();
        std::fill_n(acc, int64_t{t.rows} * kd, 0.0f);
        std::fill_n(t.row_a.begin(), t.rows, -kInf);
        std::fill_n(t.row_b.begin(), t.rows, 0.0f);
        for (int kt = 0; kt * kKeyTile < s.kv_len; ++kt) {
          const TileMask mask = Classify(causal, q_ranges[qt], kv_ranges[kt]);
          if (mask == TileMask::kAll) continue;
          const int j0 = kt * kKeyTile;
          const int bc = std::min(kKeyTile, s.kv_len - j0);
          float* p = t.scores.data();
          // S^T [bc, rows] = K_tile (scale Q)^T
          GemmStrided(p, t.rows, k + kv_head + j0 * st.kv_row, st.kv_row, t.q.data(), kd, bc,
                      t.rows, kd, Transpose::kNo, Transpose::kYes, 1.0f, 0.0f);
          if (mask == TileMask::kPartial) {
            MaskTransposed(p, kv_pos + j0, t.pos.data(), bc, t.rows);
          }
          OnlineSoftmaxTile(p, t.row_a.data(), t.row_b.data(), alpha.data(), t.row_c.data(), bc,
                            t.rows);
          ScaleRows(acc, alpha.data(), t.rows, kd);
          // acc [rows, K] += (P^T)^T V_tile
          GemmStrided(acc, kd, p, t.rows, v + kv_head + j0 * st.kv_row, st.kv_row, t.rows, kd, bc,
                      Transpose::kYes, Transpose::kNo, 1.0f, 1.0f);
        }
        for (int hh = 0; hh < st.group; ++hh) {
          const int h = g * st.group + hh;
          for (int ii = 0; ii < t.br; ++ii) {
            const int r = hh * t.br + ii;
            const float l = t.row_b[r];
            float* out = o + TokenOffset(b, s.q_len, t.i0 + ii, s.heads, h, kd);
            const float* from = acc + int64_t{r} * kd;
            const int64_t at = RowOffset(s, b, h, t.i0 + ii);
            if (l == 0.0f) {
              std::fill_n(out, kd, 0.0f);
              lse[at] = -kInf;
            } else {
              const float inv = 1.0f / l;
              for (int d = 0; d < kd; ++d) out[d] = from[d] * inv;
              lse[at] = t.row_a[r] + std::log(l);
            }
          }
        }
      }
    }
  }
}

void AttentionMerge(float* o_acc, float* lse_acc, const float* o_blk, const float* lse_blk,
                    const AttentionShape& shape) {
  CheckShape(shape);
  const AttentionShape& s = shape;
  const int kd = s.head_dim;
  for (int b = 0; b < s.batch; ++b) {
    for (int h = 0; h < s.heads; ++h) {
      for (int i = 0; i < s.q_len; ++i) {
        const int64_t at = RowOffset(s, b, h, i);
        const float a = lse_acc[at];
        const float c = lse_blk[at];
        float* oa = o_acc + TokenOffset(b, s.q_len, i, s.heads, h, kd);
        const float* ob = o_blk + TokenOffset(b, s.q_len, i, s.heads, h, kd);
        if (c == -kInf) continue;
        if (a == -kInf) {
          std::copy_n(ob, kd, oa);
          lse_acc[at] = c;
          continue;
        }
        const float m = std::max(a, c);
        const float wa = std::exp(a - m);
        const float wc = std::exp(c - m);
        const float inv = 1.0f / (wa + wc);
        for (int d = 0; d < kd; ++d) oa[d] = (wa * oa[d] + wc * ob[d]) * inv;
        lse_acc[at] = m + std::log(wa + wc);
      }
    }
  }
}

void AttentionBackwardPrepare(float* delta, const float* o, const float* d_o,
                              const AttentionShape& shape) {
  CheckShape(shape);
  const AttentionShape& s = shape;
  const int kd = s.head_dim;
  for (int b = 0; b < s.batch; ++b) {
    for (int i = 0; i < s.q_len; ++i) {
      for (int h = 0; h < s.heads; ++h) {
        const int64_t off = TokenOffset(b, s.q_len, i, s.heads, h, kd);
        double sum = 0.0;
        for (int d = 0; d < kd; ++d) sum += double{o[off + d]} * d_o[off + d];
        delta[RowOffset(s, b, h, i)] = static_cast<float>(sum);
      }
    }
  }
}

// Per (b, g, query tile): pack scale q, d_o, lse and delta once; then for each visible key tile
//   S^T = k q^T, P^T = exp(S - lse)^T, dv += P^T d_o, dP^T = v d_o^T, dS^T = P^T (dP^T - delta),
//   dk += dS^T (scale q), dq += scale dS k.
void AttentionBackwardBlock(float* dq, float* dk, float* dv, const float* q, const float* k,
                            const float* v, const float* d_o, const float* lse, const float* delta,
                            const int32_t* q_pos, const int32_t* kv_pos,
                            const AttentionShape& shape, bool causal, float scale) {
  CheckShape(shape);
  const AttentionShape& s = shape;
  const Strides st = StridesOf(s);
  const int kd = s.head_dim;
  const std::vector<PositionRange> q_ranges = TileRanges(q_pos, s.q_len, kQueryTile);
  const std::vector<PositionRange> kv_ranges = TileRanges(kv_pos, s.kv_len, kKeyTile);
  QueryTile t(s, /*backward=*/true);
  for (int b = 0; b < s.batch; ++b) {
    for (int g = 0; g < s.kv_heads; ++g) {
      const int64_t kv_head = TokenOffset(b, s.kv_len, 0, s.kv_heads, g, kd);
      for (int qt = 0; qt * kQueryTile < s.q_len; ++qt) {
        t.Start(b, g, qt * kQueryTile, s, st.group);
        bool packed = false;
        for (int kt = 0; kt * kKeyTile < s.kv_len; ++kt) {
          const TileMask mask = Classify(causal, q_ranges[qt], kv_ranges[kt]);
          if (mask == TileMask::kAll) continue;
          if (!packed) {
            PackRows(t.q.data(), q, s, st, t, scale);
            PackRows(t.rows_kd.data(), d_o, s, st, t, 1.0f);
            PackPositions(t.pos.data(), q_pos, t, st.group);
            std::fill_n(t.dq.begin(), int64_t{t.rows} * kd, 0.0f);
            for (int hh = 0; hh < st.group; ++hh) {
              const int64_t at = RowOffset(s, b, g * st.group + hh, t.i0);
              for (int ii = 0; ii < t.br; ++ii) {
                const float row_lse = lse[at + ii];
                t.row_a[hh * t.br + ii] = row_lse == -kInf ? kInf : row_lse;
              }
              std::copy_n(delta + at, t.br, t.row_b.begin() + hh * t.br);
            }
            packed = true;
          }
          const int j0 = kt * kKeyTile;
          const int bc = std::min(kKeyTile, s.kv_len - j0);
          const int64_t tile_at = kv_head + j0 * st.kv_row;
          float* p = t.scores.data();
          float* ds = t.grad_scores.data();
          const float* d_o_tile = t.rows_kd.data();
          GemmStrided(p, t.rows, k + tile_at, st.kv_row, t.q.data(), kd, bc, t.rows, kd,
                      Transpose::kNo, Transpose::kYes, 1.0f, 0.0f);
          if (mask == TileMask::kPartial) {
            MaskTransposed(p, kv_pos + j0, t.pos.data(), bc, t.rows);
          }
          ProbabilitiesTile(p, t.row_a.data(), bc, t.rows);
          GemmStrided(dv + tile_at, st.kv_row, p, t.rows, d_o_tile, kd, bc, kd, t.rows,
                      Transpose::kNo, Transpose::kNo, 1.0f, 1.0f);
          GemmStrided(ds, t.rows, v + tile_at, st.kv_row, d_o_tile, kd, bc, t.rows, kd,
                      Transpose::kNo, Transpose::kYes, 1.0f, 0.0f);
          ScoreGradTile(ds, p, t.row_b.data(), bc, t.rows);
          GemmStrided(dk + tile_at, st.kv_row, ds, t.rows, t.q.data(), kd, bc, kd, t.rows,
                      Transpose::kNo, Transpose::kNo, 1.0f, 1.0f);
          GemmStrided(t.dq.data(), kd, ds, t.rows, k + tile_at, st.kv_row, t.rows, kd, bc,
                      Transpose::kYes, Transpose::kNo, scale, 1.0f);
        }
        if (!packed) continue;
        for (int hh = 0; hh < st.group; ++hh) {
          for (int ii = 0; ii < t.br; ++ii) {
            float* to = dq + TokenOffset(b, s.q_len, t.i0 + ii, s.heads, g * st.group + hh, kd);
            const float* from = t.dq.data() + int64_t{hh * t.br + ii} * kd;
            for (int d = 0; d < kd; ++d) to[d] += from[d];
          }
        }
      }
    }
  }
}

void AttentionForward(float* o, float* lse, const float* q, const float* k, const float* v,
                      const AttentionShape& shape, bool causal, float scale) {
  SHARDSIM_CHECK(shape.q_len == shape.kv_len, "AttentionForward: q_len must equal kv_len");
  std::vector<int32_t> pos(shape.q_len);
  std::iota(pos.begin(), pos.end(), 0);
  AttentionForwardBlock(o, lse, q, k, v, pos.data(), pos.data(), shape, causal, scale);
}

void AttentionBackward(float* dq, float* dk, float* dv, const float* q, const float* k,
                       const float* v, const float* o, const float* d_o, const float* lse,
                       const AttentionShape& shape, bool causal, float scale) {
  SHARDSIM_CHECK(shape.q_len == shape.kv_len, "AttentionBackward: q_len must equal kv_len");
  std::vector<int32_t> pos(shape.q_len);
  std::iota(pos.begin(), pos.end(), 0);
  std::vector<float> delta(int64_t{shape.batch} * shape.heads * shape.q_len);
  AttentionBackwardPrepare(delta.data(), o, d_o, shape);
  AttentionBackwardBlock(dq, dk, dv, q, k, v, d_o, lse, delta.data(), pos.data(), pos.data(), shape,
                         causal, scale);
}

}  // namespace shardsim::runtime
