// Ring attention is exact: run under mpiexec with the whole world as the context axis, every rank
// computes single-rank attention over the full sequence and checks its own rows of the ring's o,
// lse, dq, dk and dv against it within 1e-5, for each layout, causal or not, GQA and MHA. Also the
// layouts' invariants (partition, round trip, zigzag's equal causal work) and their errors; the
// halves of a pass that the overlap measure runs alone. The ring-attention command's prediction and
// report are validation's (tests/validation/).
#include "runtime/ring_attention.h"

#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "tests/runtime/kernel_test_util.h"

namespace shardsim::runtime {
namespace {

using testing::RandomVector;

constexpr double kTolerance = 1e-5;

int WorldSize() {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

// A plan whose mesh is the whole world along the context axis.
PlanSpec ContextPlan(int ranks) {
  PlanSpec plan;
  plan.mesh.context = ranks;
  return plan;
}

// Sequence lengths that are not powers of two and split in each layout.
int SeqLenFor(SequenceLayout layout, int ranks) {
  return layout == SequenceLayout::kZigzag ? 2 * ranks * 7 : ranks * 9;
}

// The largest |a - b| over this rank's elements, then over every rank; rank 0 reports which.
struct WorstError {
  double error;
  int rank;
};

WorstError MaxOverRanks(const std::vector<float>& a, const std::vector<float>& b) {
  struct {
    double value;
    int rank;
  } local{0.0, 0}, global{0.0, 0};
  MPI_Comm_rank(MPI_COMM_WORLD, &local.rank);
  if (a.size() != b.size()) {
    local.value = INFINITY;
  } else {
    for (size_t i = 0; i < a.size(); ++i) {
      const double err = a[i] == b[i] ? 0.0 : std::abs(double{a[i]} - b[i]);
      local.value = std::isnan(err) ? INFINITY : std::max(local.value, err);
    }
  }
  MPI_Allreduce(&local, &global, 1, MPI_DOUBLE_INT, MPI_MAXLOC, MPI_COMM_WORLD);
  return {global.value, global.rank};
}

// lse [B, H, S] restricted to the queries at `positions`: [B, H, P].
std::vector<float> LocalLse(const std::vector<float>& full, const std::vector<int32_t>& positions,
                            int batch, int heads, int seq_len) {
  std::vector<float> local;
  for (int b = 0; b < batch; ++b) {
    for (int h = 0; h < heads; ++h) {
      for (int32_t p : positions)
        local.push_back(full[(static_cast<size_t>(b) * heads + h) * seq_len + p]);
    }
  }
  return local;
}

struct RingCase {
  std::string name;
  SequenceLayout layout;
  bool causal;
  int heads;
  int kv_heads;
  int head_dim;
  int batch = 2;
  int local_len = 0;  // tokens per rank; 0: SeqLenFor's
};

std::vector<RingCase> RingCases() {
  std::vector<RingCase> cases;
  for (bool causal : {true, false}) {
    for (SequenceLayout layout :
         {SequenceLayout::kZigzag, SequenceLayout::kStriped, SequenceLayout::kContiguous}) {
      const std::string prefix =
          std::string(causal ? "causal_" : "full_") + std::string(SequenceLayoutName(layout));
      cases.push_back({prefix + "_gqa", layout, causal, 6, 2, 8});
      cases.push_back({prefix + "_mha", layout, causal, 3, 3, 16});
    }
  }
  // One sequence of 150 tokens per rank: the forward computes each block in two pieces of 75
  // rows, the backward in pieces of 64, 64 and 22 rows, in which its dK/dV accumulator travels.
  cases.push_back({"pieces_causal_zigzag_gqa", SequenceLayout::kZigzag, true, 4, 2, 8, 1, 150});
  cases.push_back({"pieces_full_striped_mha", SequenceLayout::kStriped, false, 2, 2, 8, 1, 150});
  return cases;
}

class RingAttentionExactness : public ::testing::TestWithParam<RingCase> {};

TEST_P(RingAttentionExactness, MatchesSingleRankAttention) {
  const RingCase& rc = GetParam();
  const int ranks = WorldSize();
  MeshComms comms(MPI_COMM_WORLD, ContextPlan(ranks));
  comms.set_timeout_s(120);
  const int me = static_cast<int>(comms.Coordinate("context"));

  const int batch = rc.batch;
  const int seq_len = rc.local_len > 0 ? rc.local_len * ranks : SeqLenFor(rc.layout, ranks);
  const float scale = 1.0f / std::sqrt(static_cast<float>(rc.head_dim));
  const int64_t q_row = int64_t{rc.heads} * rc.head_dim;
  const int64_t kv_row = int64_t{rc.kv_heads} * rc.head_dim;

  // The single-rank reference over the full sequence, the same on every rank.
  const AttentionShape full{batch, seq_len, seq_len, rc.heads, rc.kv_heads, rc.head_dim};
  const std::vector<float> q = RandomVector(batch * seq_len * q_row, 11);
  const std::vector<float> k = RandomVector(batch * seq_len * kv_row, 12);
  const std::vector<float> v = RandomVector(batch * seq_len * kv_row, 13);
  const std::vector<float> d_o = RandomVector(batch * seq_len * q_row, 14);
  std::vector<float> o(q.size()), lse(static_cast<size_t>(batch) * rc.heads * seq_len);
  AttentionForward(o.data(), lse.data(), q.data(), k.data(), v.data(), full, rc.causal, scale);
  std::vector<float> dq(q.size()), dk(k.size()), dv(v.size());
  AttentionBackward(dq.data(), dk.data(), dv.data(), q.data(), k.data(), v.data(), o.data(),
                    d_o.data(), lse.data(), full, rc.causal, scale);

  // This rank's rows, through the ring.
  const std::vector<int32_t> positions = SequencePositions(rc.layout, seq_len, ranks, me);
  const int local_len = static_cast<int>(positions.size());
  ASSERT_EQ(local_len, seq_len / ranks);
  const auto local = [&](const std::vector<float>& x, int64_t row) {
    std::vector<float> out(static_cast<size_t>(batch * local_len * row));
    ScatterSequence(out.data(), x.data(), positions, batch, seq_len, row);
    return out;
  };
  const std::vector<float> q_l = local(q, q_row), k_l = local(k, kv_row), v_l = local(v, kv_row);
  const std::vector<float> d_o_l = local(d_o, q_row);
  const AttentionShape shape{batch, local_len, local_len, rc.heads, rc.kv_heads, rc.head_dim};

  std::vector<float> o_l(q_l.size()), lse_l(static_cast<size_t>(batch) * rc.heads * local_len);
  const RingAttentionStats fwd =
      RingAttentionForward(o_l.data(), lse_l.data(), q_l.data(), k_l.data(), v_l.data(),
                           positions.data(), shape, rc.causal, scale, comms);
  std::vector<float> dq_l(q_l.size()), dk_l(k_l.size()), dv_l(v_l.size());
  const RingAttentionStats bwd = RingAttentionBackward(
      dq_l.data(), dk_l.data(), dv_l.data(), q_l.data(), k_l.data(), v_l.data(), o_l.data(),
      d_o_l.data(), lse_l.data(), positions.data(), shape, rc.causal, scale, comms);

  const struct {
    const char* what;
    WorstError worst;
  } checks[] = {
      {"o", MaxOverRanks(o_l, local(o, q_row))},
      {"lse", MaxOverRanks(lse_l, LocalLse(lse, positions, batch, rc.heads, seq_len))},
      {"dq", MaxOverRanks(dq_l, local(dq, q_row))},
      {"dk", MaxOverRanks(dk_l, local(dk, kv_row))},
      {"dv", MaxOverRanks(dv_l, local(dv, kv_row))},
  };
  for (const auto& c : checks) {
    EXPECT_LE(c.worst.error, kTolerance)
        << c.what << " on rank " << c.worst.rank << " of " << ranks << ", S=" << seq_len;
  }

  // Known traffic: K, V and positions move c-1 times each way round; dK/dV c times.
  const int64_t kv_bytes = 2 * int64_t{batch} * local_len * kv_row * 4;
  const int64_t rotation_bytes = (ranks - 1) * (kv_bytes + int64_t{local_len} * 4);
  EXPECT_EQ(fwd.blocks, ranks);
  EXPECT_EQ(bwd.blocks, ranks);
  EXPECT_EQ(fwd.bytes_sent, rotation_bytes);
  EXPECT_EQ(bwd.bytes_sent, rotation_bytes + (ranks > 1 ? ranks * kv_bytes : 0));
  EXPECT_GT(fwd.compute_s, 0.0);
  EXPECT_GE(fwd.comm_wait_s, 0.0);
  EXPECT_GE(bwd.comm_wait_s, 0.0);
  if (ranks == 1) {
    EXPECT_EQ(fwd.comm_wait_s + bwd.comm_wait_s, 0.0);
  }
}

std::string CaseName(const ::testing::TestParamInfo<RingCase>& param) { return param.param.name; }

INSTANTIATE_TEST_SUITE_P(Layouts, RingAttentionExactness, ::testing::ValuesIn(RingCases()),
                         CaseName);

// The two halves of a pass that the overlap measurement runs alone: the transfers move the
// real pass's bytes and compute nothing; the compute moves nothing and does each step's work on
// this rank's own K/V. Non-causal, that is c copies of the own block: o equals attention over
// the own block alone, lse that plus log(c).
TEST(RingAttentionParts, ComputeOnlyAndTransfersOnly) {
  const int ranks = WorldSize();
  MeshComms comms(MPI_COMM_WORLD, ContextPlan(ranks));
  comms.set_timeout_s(120);
  const int me = static_cast<int>(comms.Coordinate("context"));
  const int batch = 1, heads = 4, kv_heads = 2, head_dim = 8;
  const int seq_len = SeqLenFor(SequenceLayout::kZigzag, ranks);
  const std::vector<int32_t> positions =
      SequencePositions(SequenceLayout::kZigzag, seq_len, ranks, me);
  const int local_len = static_cast<int>(positions.size());
  const AttentionShape shape{batch, local_len, local_len, heads, kv_heads, head_dim};
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  const std::vector<float> q = RandomVector(batch * local_len * heads * head_dim, 31 + me);
  const std::vector<float> k = RandomVector(batch * local_len * kv_heads * head_dim, 32 + me);
  const std::vector<float> v = RandomVector(batch * local_len * kv_heads * head_dim, 33 + me);
  const std::vector<float> d_o = RandomVector(q.size(), 34 + me);

  std::vector<std::vector<int32_t>> step_positions;
  RingPass compute_only{RingWork::kComputeOnly, {}};
  for (int s = 0; s < ranks; ++s) {
    step_positions.push_back(
        SequencePositions(SequenceLayout::kZigzag, seq_len, ranks, (me - s + ranks) % ranks));
  }
  for (const auto& p : step_positions) compute_only.step_kv_positions.push_back(p.data());

  std::vector<float> o(q.size()), lse(static_cast<size_t>(batch) * heads * local_len);
  const RingAttentionStats fwd =
      RingAttentionForward(o.data(), lse.data(), q.data(), k.data(), v.data(), positions.data(),
                           shape, false, scale, comms, compute_only);
  std::vector<float> o_own(o.size()), lse_own(lse.size());
  AttentionForwardBlock(o_own.data(), lse_own.data(), q.data(), k.data(), v.data(),
                        positions.data(), positions.data(), shape, false, scale);
  for (float& x : lse_own) x += std::log(static_cast<float>(ranks));
  EXPECT_LE(MaxOverRanks(o, o_own).error, kTolerance);
  EXPECT_LE(MaxOverRanks(lse, lse_own).error, 1e-4);
  EXPECT_EQ(fwd.bytes_sent, 0);
  EXPECT_EQ(fwd.comm_wait_s, 0.0);
  EXPECT_EQ(fwd.blocks, ranks);

  std::vector<float> dq(q.size()), dk(k.size()), dv(v.size());
  const RingAttentionStats bwd = RingAttentionBackward(
      dq.data(), dk.data(), dv.data(), q.data(), k.data(), v.data(), o.data(), d_o.data(),
      lse.data(), positions.data(), shape, true, scale, comms, compute_only);
  EXPECT_EQ(bwd.bytes_sent, 0);
  EXPECT_EQ(bwd.blocks, ranks);
  for (float x : dk) ASSERT_TRUE(std::isfinite(x));

  // Transfers alone: the real pass's bytes, no compute, outputs untouched.
  const RingPass transfers_only{RingWork::kTransfersOnly, {}};
  std::vector<float> o_t(o.size(), 7.0f), lse_t(lse.size(), 7.0f);
  const RingAttentionStats fwd_t =
      RingAttentionForward(o_t.data(), lse_t.data(), q.data(), k.data(), v.data(), positions.data(),
                           shape, true, scale, comms, transfers_only);
  std::vector<float> dq_t(q.size(), 7.0f), dk_t(k.size(), 7.0f), dv_t(v.size(), 7.0f);
  const RingAttentionStats bwd_t = RingAttentionBackward(
      dq_t.data(), dk_t.data(), dv_t.data(), q.data(), k.data(), v.data(), o.data(), d_o.data(),
      lse.data(), positions.data(), shape, true, scale, comms, transfers_only);
  const int64_t kv_bytes = 2 * int64_t{batch} * local_len * kv_heads * head_dim * 4;
  const int64_t rotation_bytes = (ranks - 1) * (kv_bytes + int64_t{local_len} * 4);
  EXPECT_EQ(fwd_t.bytes_sent, rotation_bytes);
  EXPECT_EQ(bwd_t.bytes_sent, rotation_bytes + (ranks > 1 ? ranks * kv_bytes : 0));
  EXPECT_EQ(fwd_t.compute_s + bwd_t.compute_s, 0.0);
  EXPECT_EQ(fwd_t.blocks + bwd_t.blocks, 0);
  for (const auto* x : {&o_t, &lse_t, &dq_t, &dk_t, &dv_t}) {
    EXPECT_TRUE(std::all_of(x->begin(), x->end(), [](float e) { return e == 7.0f; }));
  }
}

// The number of unmasked (query, key) pairs `rank` computes over the whole ring for causal
// attention: its queries against every rank's keys.
int64_t CausalPairs(SequenceLayout layout, int seq_len, int ranks, int rank) {
  const std::vector<int32_t> mine = SequencePositions(layout, seq_len, ranks, rank);
  int64_t pairs = 0;
  for (int other = 0; other < ranks; ++other) {
    for (int32_t kp : SequencePositions(layout, seq_len, ranks, other)) {
      for (int32_t qp : mine) pairs += kp <= qp ? 1 : 0;
    }
  }
  return pairs;
}

TEST(RingAttentionLayout, ZigzagBalancesCausalWork) {
  for (int ranks : {WorldSize(), 1, 2, 3, 4, 5, 8}) {
    const int seq_len = SeqLenFor(SequenceLayout::kZigzag, ranks);
    const int64_t first = CausalPairs(SequenceLayout::kZigzag, seq_len, ranks, 0);
    for (int r = 1; r < ranks; ++r) {
      EXPECT_EQ(CausalPairs(SequenceLayout::kZigzag, seq_len, ranks, r), first)
          << "rank " << r << " of " << ranks;
    }
    // All ranks together compute the S (S + 1) / 2 pairs of the causal triangle.
    EXPECT_EQ(first * ranks, int64_t{seq_len} * (seq_len + 1) / 2) << ranks << " ranks";
  }
}

TEST(RingAttentionLayout, StripedAndContiguousImbalanceIsKnown) {
  for (int ranks : {WorldSize(), 2, 3, 8}) {
    const int seq_len = SeqLenFor(SequenceLayout::kStriped, ranks);
    const int64_t local = seq_len / ranks;
    const int64_t striped0 = CausalPairs(SequenceLayout::kStriped, seq_len, ranks, 0);
    const int64_t contiguous0 = CausalPairs(SequenceLayout::kContiguous, seq_len, ranks, 0);
    for (int r = 1; r < ranks; ++r) {
      // Rank r's i-th query sits r tokens after rank 0's: r more keys each.
      EXPECT_EQ(CausalPairs(SequenceLayout::kStriped, seq_len, ranks, r) - striped0, r * local);
      // Rank r's queries sit r·S/c tokens later: r·(S/c)^2 more pairs.
      EXPECT_EQ(CausalPairs(SequenceLayout::kContiguous, seq_len, ranks, r) - contiguous0,
                r * local * local);
    }
  }
}

TEST(RingAttentionLayout, PositionsPartitionTheSequenceAndRoundTrip) {
  for (SequenceLayout layout :
       {SequenceLayout::kZigzag, SequenceLayout::kStriped, SequenceLayout::kContiguous}) {
    for (int ranks : {WorldSize(), 1, 2, 3, 4, 8}) {
      const int seq_len = SeqLenFor(layout, ranks);
      const int batch = 2;
      const int64_t row = 5;
      const std::vector<float> full = RandomVector(batch * seq_len * row, 21);
      std::vector<float> back(full.size(), NAN);
      std::vector<int> seen(seq_len, 0);
      for (int r = 0; r < ranks; ++r) {
        const std::vector<int32_t> positions = SequencePositions(layout, seq_len, ranks, r);
        ASSERT_EQ(static_cast<int>(positions.size()), seq_len / ranks);
        EXPECT_TRUE(std::is_sorted(positions.begin(), positions.end()));
        for (int32_t p : positions) ++seen[p];
        std::vector<float> local(batch * positions.size() * row);
        ScatterSequence(local.data(), full.data(), positions, batch, seq_len, row);
        GatherSequence(back.data(), local.data(), positions, batch, seq_len, row);
      }
      const std::string what =
          std::string(SequenceLayoutName(layout)) + " over " + std::to_string(ranks);
      EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), seq_len) << what;
      EXPECT_EQ(back, full) << what;
    }
  }
  // Zigzag over 2 ranks of 8 tokens: chunks of 2, rank 0 holds chunks 0 and 3.
  EXPECT_EQ(SequencePositions(SequenceLayout::kZigzag, 8, 2, 0),
            (std::vector<int32_t>{0, 1, 6, 7}));
  EXPECT_EQ(SequencePositions(SequenceLayout::kStriped, 8, 2, 1),
            (std::vector<int32_t>{1, 3, 5, 7}));
}

TEST(RingAttentionLayout, UnsplittableSequenceIsAnInputError) {
  const int ranks = WorldSize();
  const int zigzag_bad = 2 * ranks * 7 + 1;  // odd: never a multiple of 2c
  try {
    SequencePositions(SequenceLayout::kZigzag, zigzag_bad, ranks, 0);
    ADD_FAILURE() << "zigzag accepted seq_len " << zigzag_bad;
  } catch (const InputError& e) {
    EXPECT_EQ(e.where(), "seq_len");
    EXPECT_NE(e.problem().find("zigzag"), std::string::npos) << e.what();
    EXPECT_NE(e.valid().find(std::to_string(2 * ranks)), std::string::npos) << e.what();
    EXPECT_NE(e.hint().find(std::to_string(2 * ranks * 7)), std::string::npos) << e.what();
  }
  EXPECT_THROW(CheckSequenceSplit(SequenceLayout::kStriped, 0, ranks), InputError);
  EXPECT_THROW(CheckSequenceSplit(SequenceLayout::kStriped, 3 * 9 + 1, 3), InputError);
  EXPECT_THROW(CheckSequenceSplit(SequenceLayout::kContiguous, 8 * 9 + 4, 8), InputError);
  EXPECT_THROW(CheckSequenceSplit(SequenceLayout::kZigzag, 2 * 9, 2), InputError);  // 18 % 4 != 0
  if (ranks > 1) {
    EXPECT_THROW(CheckSequenceSplit(SequenceLayout::kStriped, ranks * 9 + 1, ranks), InputError);
  } else {
    EXPECT_NO_THROW(CheckSequenceSplit(SequenceLayout::kStriped, 10, 1));
  }
  try {
    ParseSequenceLayout("zigzg");
    ADD_FAILURE() << "accepted layout 'zigzg'";
  } catch (const InputError& e) {
    EXPECT_NE(e.hint().find("zigzag"), std::string::npos) << e.what();
    EXPECT_NE(e.valid().find("striped"), std::string::npos) << e.what();
  }
  EXPECT_EQ(ParseSequenceLayout("striped"), SequenceLayout::kStriped);
}

}  // namespace
}  // namespace shardsim::runtime
