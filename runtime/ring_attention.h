// Ring attention (Liu et al. 2023), the runtime's context parallelism: the sequence is split over
// the c ranks of the `context` axis; queries stay, K/V blocks rotate c-1 times around the ring,
// each block's partial (o, lse) merged by log-sum-exp while the next block is in flight.
//
// Sharding: q, o [B, S_context, H, K], k, v [B, S_context, G, K]. Forward: c-1 ring steps of the
// local K/V (2·B·(S/c)·G·K floats) plus their positions. Backward: K/V rotate again and each
// block's dK/dV accumulator travels with it, returning to its owner after a full circle (c
// transfers of 2·B·(S/c)·G·K floats), so dq, dk, dv come out sharded like q, k, v.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "runtime/attention.h"
#include "runtime/comm.h"

namespace shardsim::runtime {

// How the S tokens of a sequence are dealt to the c context ranks (each holds S/c of them).
enum class SequenceLayout {
  kContiguous,  // rank i holds tokens [i·S/c, (i+1)·S/c); causal work grows with i
  kZigzag,      // 2c chunks; rank i holds chunk i then chunk 2c-1-i: equal causal work
  kStriped,     // token j on rank j % c: rank i does i·S/c more causal (q, k) pairs than rank 0
};

// "contiguous", "zigzag", "striped".
std::string_view SequenceLayoutName(SequenceLayout layout);
// The layout named `name`. Throws InputError (where "context_layout") naming the valid ones.
SequenceLayout ParseSequenceLayout(std::string_view name);

// Throws InputError (where "seq_len") unless `layout` splits seq_len tokens over `ranks`:
// zigzag needs seq_len % (2·ranks) == 0, striped and contiguous seq_len % ranks == 0.
// REQUIRES: ranks >= 1.
void CheckSequenceSplit(SequenceLayout layout, int64_t seq_len, int64_t ranks);

// The absolute positions (0-based token indices) of the seq_len / ranks tokens `rank` holds, in
// the order they are stored locally (ascending). Throws as CheckSequenceSplit.
// REQUIRES: 0 <= rank < ranks.
std::vector<int32_t> SequencePositions(SequenceLayout layout, int64_t seq_len, int64_t ranks,
                                       int64_t rank);

// local [B, P, row] = the rows of full [B, S, row] at `positions` (P = positions.size()), where a
// row is `row_elems` floats (H·K for q, G·K for k and v). local is overwritten.
// REQUIRES: every position in [0, seq_len).
void ScatterSequence(float* local, const float* full, const std::vector<int32_t>& positions,
                     int batch, int seq_len, int64_t row_elems);
// The inverse: writes the rows of local [B, P, row] into full [B, S, row] at `positions`; rows of
// full held by other ranks are left as they are.
void GatherSequence(float* full, const float* local, const std::vector<int32_t>& positions,
                    int batch, int seq_len, int64_t row_elems);

// What one ring call did on this rank, to report how much communication compute hid:
// comm_wait_s is the exposed part; the rest of the transfer time ran under compute_s.
struct RingAttentionStats {
  double compute_s = 0.0;    // seconds in the block kernels, merges and accumulator sums
  double comm_wait_s = 0.0;  // seconds blocked in MeshComms::Wait on ring transfers
  // Seconds in the MPI calls between a block's pieces that move the transfers in flight: over
  // shared memory the copies happen there, on the core that computes (in neither field above).
  double progress_s = 0.0;
  int64_t bytes_sent = 0;  // bytes this rank sent (K/V, positions, dK/dV accumulators)
  int64_t blocks = 0;      // K/V blocks computed (c per call)

  RingAttentionStats& operator+=(const RingAttentionStats& other);
};

// Forward over the context axis of `comms`. This rank's tokens are at `positions` [S_l] (from
// SequencePositions, or any distinct positions; the same for every batch row); shape is the local
// one: q_len == kv_len == S_l, with q [B, S_l, H, K], k, v [B, S_l, G, K]. o [B, S_l, H, K] and
// lse [B, H, S_l] are overwritten with this rank's rows of attention over the whole sequence.
// Collective over the context group: every rank calls it with the same B, S_l, H, G, K, causal
// and scale. Every wait runs under comms' timeout (the job aborts naming the rank and step).
// REQUIRES: shape.q_len == shape.kv_len, heads % kv_heads == 0, each buffer under 2^31 floats.
RingAttentionStats RingAttentionForward(float* o, float* lse, const float* q, const float* k,
                                        const float* v, const int32_t* positions,
                                        const AttentionShape& shape, bool causal, float scale,
                                        MeshComms& comms);

// Backward of RingAttentionForward: dq [B, S_l, H, K], dk, dv [B, S_l, G, K] accumulate (as the
// kernels of attention.h) the gradients of this rank's rows; o and lse are the forward's, d_o
// [B, S_l, H, K] the output gradient. Collective and REQUIRES as the forward.
RingAttentionStats RingAttentionBackward(float* dq, float* dk, float* dv, const float* q,
                                         const float* k, const float* v, const float* o,
                                         const float* d_o, const float* lse,
                                         const int32_t* positions, const AttentionShape& shape,
                                         bool causal, float scale, MeshComms& comms);

// The ring's receive buffers and scratch, for a caller to keep between calls (RingPass::workspace):
// each slot grows to the largest size asked for and is never shrunk until Release(). The
// shared-memory transport copies into the receive buffers inside MPI calls on the receiving core;
// buffers mapped afresh on every call take a page fault per 4 KB inside that copy, which made a
// 2 MB block's transfer about 5x slower than into pages already mapped (measured on 2 cores).
class RingAttentionWorkspace {
 public:
  enum Slot { kKey0, kKey1, kValue0, kValue1, kBlockOut, kBlockLse, kDelta, kGrad, kAccumulator0, kAccumulator1, kSlots };
  // At least n floats of `slot`, contents unspecified. Pointers stay valid until the next call
  // for the same slot.
  float* Floats(Slot slot, int64_t n) { return Grown(floats_[slot], n); }
  int32_t* Positions(int i, int64_t n) { return Grown(positions_[i], n); }
  // Bytes the slots hold now.
  int64_t bytes() const {
    int64_t total = 0;
    for (const std::vector<float>& v : floats_) total += static_cast<int64_t>(v.capacity() * sizeof(float));
    for (const std::vector<int32_t>& v : positions_) total += static_cast<int64_t>(v.capacity() * sizeof(int32_t));
    return total;
  }
  void Release() {
    for (std::vector<float>& v : floats_) std::vector<float>().swap(v);
    for (std::vector<int32_t>& v : positions_) std::vector<int32_t>().swap(v);
  }

 private:
  template <class T>
  static T* Grown(std::vector<T>& v, int64_t n) {
    if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
    return v.data();
  }
  std::vector<float> floats_[kSlots];
  std::vector<int32_t> positions_[2];
};

// Which halves of a ring pass run. The real pass runs both; each half alone is the baseline of
// the standard overlap measure: hidden = (t_compute + t_transfers - t_both) / t_transfers.
enum class RingWork {
  kComputeAndTransfers,  // the ring pass (exact)
  kComputeOnly,          // the same block computations, no MPI: each step computes this rank's
                         // own K/V values at the positions the real step's block would carry
                         // (same masks, same tiles skipped, same work; other numbers)
  kTransfersOnly,        // the same messages in the same order, no computation
};

struct RingPass {
  RingWork work = RingWork::kComputeAndTransfers;
  // kComputeOnly: the K/V positions of each of the c steps' blocks, step s holding those of the
  // rank s places back along the ring (step 0: this rank's own), each S_l long; ignored otherwise.
  std::vector<const int32_t*> step_kv_positions;
  // Buffers kept between calls (null: the call allocates its own, at the cost above).
  RingAttentionWorkspace* workspace = nullptr;
};

// The forward and backward above, running only `pass.work`. kComputeAndTransfers is exactly
// RingAttentionForward/Backward. kComputeOnly overwrites o and lse (forward) and accumulates into
// dq, dk, dv (backward) with numbers of no meaning; kTransfersOnly leaves them as they are. The
// stats count what ran (no bytes without transfers, no compute time without compute). Every rank
// of the context group must run the same work. REQUIRES: as the forward, and for kComputeOnly
// pass.step_kv_positions.size() == the context group's size.
RingAttentionStats RingAttentionForward(float* o, float* lse, const float* q, const float* k,
                                        const float* v, const int32_t* positions,
                                        const AttentionShape& shape, bool causal, float scale,
                                        MeshComms& comms, const RingPass& pass);
RingAttentionStats RingAttentionBackward(float* dq, float* dk, float* dv, const float* q,
                                         const float* k, const float* v, const float* o,
                                         const float* d_o, const float* lse,
                                         const int32_t* positions, const AttentionShape& shape,
                                         bool causal, float scale, MeshComms& comms,
                                         const RingPass& pass);

}  // namespace shardsim::runtime
