// Ring attention over the context axis: sequence layouts, and the forward and backward rings with
// double-buffered non-blocking transfers under the blockwise attention kernels.
#include "runtime/ring_attention.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <deque>
#include <optional>
#include <string>
#include <type_traits>

#include "core/error.h"
#include "core/suggest.h"

namespace shardsim::runtime {
namespace {

// Tags of the kinds of ring message; the non-overtaking rule orders each kind by step.
constexpr int kTagKey = 7301;
constexpr int kTagValue = 7302;
constexpr int kTagPositions = 7303;
constexpr int kTagGrad = 7304;

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// This rank's place in the ring of the context group; comm is null over one rank.
struct Ring {
  MPI_Comm comm = MPI_COMM_NULL;
  int size = 1;
  int rank = 0;
  int next = 0;  // receives what this rank sends
  int prev = 0;  // sends what this rank receives
};

Ring RingOf(MeshComms& comms) {
  Ring ring;
  ring.size = static_cast<int>(comms.GroupSize({"context"}));
  if (ring.size == 1) return ring;
  ring.comm = comms.Comm({"context"});
  MPI_Comm_rank(ring.comm, &ring.rank);
  ring.next = (ring.rank + 1) % ring.size;
  ring.prev = (ring.rank + ring.size - 1) % ring.size;
  return ring;
}

int CountOf(int64_t n) {
  SHARDSIM_CHECK(n >= 0 && n <= INT_MAX, "ring attention: a message over 2^31 elements");
  return static_cast<int>(n);
}

// Non-blocking transfers to the next and from the previous rank of the ring, and their waits
// under the comms' timeout, timed into the stats.
class RingTransfers {
 public:
  RingTransfers(MeshComms& comms, const Ring& ring, RingAttentionStats& stats)
      : comms_(comms), ring_(ring), stats_(stats) {}
  RingTransfers(const RingTransfers&) = delete;
  RingTransfers& operator=(const RingTransfers&) = delete;
  ~RingTransfers() {
    SHARDSIM_CHECK(pending_.empty(), "ring attention: a transfer was never waited for");
  }

  template <class T>
  void Send(const T* data, int64_t count, int tag, const std::string& what) {
    Pending& p = pending_.emplace_back(Pending{
        MPI_REQUEST_NULL, "send of " + what + " to context rank " + std::to_string(ring_.next)});
    CheckMpi(MPI_Isend(data, CountOf(count), TypeOf<T>(), ring_.next, tag, ring_.comm, &p.request),
             ring_.comm, p.what);
    stats_.bytes_sent += count * static_cast<int64_t>(sizeof(T));
  }
  template <class T>
  void Receive(T* data, int64_t count, int tag, const std::string& what) {
    Pending& p = pending_.emplace_back(
        Pending{MPI_REQUEST_NULL,
                "receive of " + what + " from context rank " + std::to_string(ring_.prev)});
    CheckMpi(MPI_Irecv(data, CountOf(count), TypeOf<T>(), ring_.prev, tag, ring_.comm, &p.request),
             ring_.comm, p.what);
  }
  // Lets the transfers in flight move: MPI moves large messages only inside MPI calls, so the
  // block computation calls this between its pieces.
  void Progress() {
    if (pending_.empty()) return;
    const Clock::time_point start = Clock::now();
    for (Pending& p : pending_) {
      int done = 0;
      CheckMpi(MPI_Test(&p.request, &done, MPI_STATUS_IGNORE), ring_.comm, p.what);
    }
    stats_.progress_s += SecondsSince(start);
  }
  // Waits for the `index`-th transfer started since the last WaitAll (0-based).
  void Wait(size_t index) {
    SHARDSIM_CHECK(index < pending_.size(), "ring attention: waiting for a transfer never started");
    const Clock::time_point start = Clock::now();
    comms_.Wait(&pending_[index].request, pending_[index].what);
    stats_.comm_wait_s += SecondsSince(start);
  }
  // Waits for every transfer started since the last WaitAll.
  void WaitAll() {
    if (pending_.empty()) return;
    const Clock::time_point start = Clock::now();
    for (Pending& p : pending_) comms_.Wait(&p.request, p.what);
    pending_.clear();
    stats_.comm_wait_s += SecondsSince(start);
  }

 private:
  template <class T>
  static MPI_Datatype TypeOf() {
    if constexpr (std::is_same_v<T, float>) {
      return MPI_FLOAT;
    } else {
      static_assert(std::is_same_v<T, int32_t>);
      return MPI_INT32_T;
    }
  }
  struct Pending {
    MPI_Request request;
    std::string what;
  };

  MeshComms& comms_;
  const Ring& ring_;
  RingAttentionStats& stats_;
  std::deque<Pending> pending_;  // a deque: MPI writes into the requests by address
};

// A K/V block as this rank sees it in one step: its own (the caller's arrays) at step 0, then
// the blocks received into the double buffer.
struct KvBlock {
  const float* k;
  const float* v;
  const int32_t* positions;
};

// K/V rows per piece when a block is computed in about `pieces` pieces (at least 64 rows each;
// one piece when the batch is not 1: rows of a piece must be contiguous). Between pieces the
// transfers in flight progress: over shared memory one MPI call after the neighbour's send has
// started is enough for the receiver to copy the whole block, so few pieces do. Each piece costs
// the kernel's query packing again, and in the forward a merge of the partial output: with 8
// pieces a 2-rank causal forward ran 15-25% slower than with 1 or 2 (S = 1024 to 4096, 2 cores).
constexpr int kForwardPieces = 2;
// The backward's dK/dV accumulator travels in these pieces: the trip home after the last step
// exposes one piece.
constexpr int kBackwardPieces = 4;
int PieceRows(const AttentionShape& s, int pieces) {
  return s.batch == 1 ? std::max(64, (s.kv_len + pieces - 1) / pieces) : s.kv_len;
}

using RingBuffers = RingAttentionWorkspace;

// The double buffer a K/V block travels through, and the transfers of one rotation.
class KvRotation {
 public:
  KvRotation(const float* k, const float* v, const int32_t* positions, const AttentionShape& s,
             RingBuffers& buffers)
      : own_{k, v, positions},
        kv_elems_(int64_t{s.batch} * s.kv_len * s.kv_heads * s.head_dim),
        len_(s.kv_len) {
    for (int i = 0; i < 2; ++i) {
      k_[i] = buffers.Floats(i == 0 ? RingBuffers::kKey0 : RingBuffers::kKey1, kv_elems_);
      v_[i] = buffers.Floats(i == 0 ? RingBuffers::kValue0 : RingBuffers::kValue1, kv_elems_);
      positions_[i] = buffers.Positions(i, len_);
    }
  }
  // The block of step `step` (its sender is `step` ranks back along the ring).
  KvBlock Current(int step) const {
    if (step == 0) return own_;
    const int i = step % 2;
    return {k_[i], v_[i], positions_[i]};
  }
  // Starts sending the block of `step` on and receiving the block of step + 1 into the other
  // buffer (which held the block of step - 1, whose sends completed with that step).
  void Start(int step, RingTransfers& transfers, const std::string& step_name) {
    const KvBlock cur = Current(step);
    const int i = (step + 1) % 2;
    transfers.Receive(k_[i], kv_elems_, kTagKey, "K block in " + step_name);
    transfers.Receive(v_[i], kv_elems_, kTagValue, "V block in " + step_name);
    transfers.Receive(positions_[i], len_, kTagPositions, "K/V positions in " + step_name);
    transfers.Send(cur.k, kv_elems_, kTagKey, "K block in " + step_name);
    transfers.Send(cur.v, kv_elems_, kTagValue, "V block in " + step_name);
    transfers.Send(cur.positions, len_, kTagPositions, "K/V positions in " + step_name);
  }

 private:
  KvBlock own_;
  int64_t kv_elems_;
  int64_t len_;
  float* k_[2];
  float* v_[2];
  int32_t* positions_[2];
};

// What a pass runs, checked against the ring.
struct PassParts {
  bool compute;
  bool transfers;  // false over one rank: nothing to send
};

PassParts PartsOf(const RingPass& pass, const Ring& ring) {
  if (pass.work == RingWork::kComputeOnly) {
    SHARDSIM_CHECK(pass.step_kv_positions.size() == static_cast<size_t>(ring.size),
                   "ring attention compute-only pass: one K/V position list per ring step");
  }
  return {pass.work != RingWork::kTransfersOnly,
          pass.work != RingWork::kComputeOnly && ring.size > 1};
}

void CheckRingShape(const AttentionShape& s) {
  SHARDSIM_CHECK(s.q_len == s.kv_len,
                 "ring attention: each rank's queries are its keys (q_len == kv_len)");
  SHARDSIM_CHECK(s.batch >= 0 && s.q_len >= 0 && s.heads > 0 && s.kv_heads > 0 &&
                     s.heads % s.kv_heads == 0 && s.head_dim > 0,
                 "ring attention: bad shape");
}

std::string StepName(const char* pass, int step, int steps) {
  return std::string("ring attention ") + pass + " step " + std::to_string(step + 1) + "/" +
         std::to_string(steps);
}

}  // namespace

std::string_view SequenceLayoutName(SequenceLayout layout) {
  switch (layout) {
    case SequenceLayout::kContiguous:
      return "contiguous";
    case SequenceLayout::kZigzag:
      return "zigzag";
    case SequenceLayout::kStriped:
      return "striped";
  }
  return "?";
}

SequenceLayout ParseSequenceLayout(std::string_view name) {
  const std::vector<SequenceLayout> all = {SequenceLayout::kContiguous, SequenceLayout::kZigzag,
                                           SequenceLayout::kStriped};
  std::vector<std::string> names;
  for (SequenceLayout l : all) {
    if (SequenceLayoutName(l) == name) return l;
    names.emplace_back(SequenceLayoutName(l));
  }
  throw InputError("context_layout", "unknown sequence layout '" + std::string(name) + "'",
                   JoinNames(names), DidYouMean(name, names));
}

void CheckSequenceSplit(SequenceLayout layout, int64_t seq_len, int64_t ranks) {
  SHARDSIM_CHECK(ranks >= 1, "sequence split over no ranks");
  const int64_t unit = layout == SequenceLayout::kZigzag ? 2 * ranks : ranks;
  if (seq_len > 0 && seq_len % unit == 0) return;
  const std::string layout_name(SequenceLayoutName(layout));
  const std::string what = "seq_len=" + std::to_string(seq_len) +
                           " does not split over context=" + std::to_string(ranks) +
                           " ranks in the " + layout_name + " layout" +
                           (layout == SequenceLayout::kZigzag ? " (2 chunks per rank)" : "");
  const int64_t below = seq_len / unit * unit;
  std::string hint = "use seq_len=";
  if (below > 0) hint += std::to_string(below) + " or ";
  hint += std::to_string(below + unit) + ", or a context size that divides it";
  throw InputError("seq_len", what, "positive multiples of " + std::to_string(unit), hint);
}

std::vector<int32_t> SequencePositions(SequenceLayout layout, int64_t seq_len, int64_t ranks,
                                       int64_t rank) {
  CheckSequenceSplit(layout, seq_len, ranks);
  SHARDSIM_CHECK(rank >= 0 && rank < ranks, "sequence split: rank out of range");
  SHARDSIM_CHECK(seq_len <= INT32_MAX, "sequence split: seq_len over 2^31");
  const int64_t local = seq_len / ranks;
  std::vector<int32_t> positions;
  positions.reserve(local);
  switch (layout) {
    case SequenceLayout::kContiguous:
      for (int64_t j = 0; j < local; ++j)
        positions.push_back(static_cast<int32_t>(rank * local + j));
      break;
    case SequenceLayout::kZigzag: {
      const int64_t chunk = seq_len / (2 * ranks);
      for (const int64_t c : {rank, 2 * ranks - 1 - rank}) {
        for (int64_t j = 0; j < chunk; ++j)
          positions.push_back(static_cast<int32_t>(c * chunk + j));
      }
      break;
    }
    case SequenceLayout::kStriped:
      for (int64_t j = 0; j < local; ++j)
        positions.push_back(static_cast<int32_t>(j * ranks + rank));
      break;
  }
  return positions;
}

void ScatterSequence(float* local, const float* full, const std::vector<int32_t>& positions,
                     int batch, int seq_len, int64_t row_elems) {
  const int64_t n = static_cast<int64_t>(positions.size());
  for (int b = 0; b < batch; ++b) {
    for (int64_t j = 0; j < n; ++j) {
      SHARDSIM_CHECK(positions[j] >= 0 && positions[j] < seq_len,
                     "sequence scatter: position out of range");
      const float* from = full + (int64_t{b} * seq_len + positions[j]) * row_elems;
      std::copy_n(from, row_elems, local + (b * n + j) * row_elems);
    }
  }
}

void GatherSequence(float* full, const float* local, const std::vector<int32_t>& positions,
                    int batch, int seq_len, int64_t row_elems) {
  const int64_t n = static_cast<int64_t>(positions.size());
  for (int b = 0; b < batch; ++b) {
    for (int64_t j = 0; j < n; ++j) {
      SHARDSIM_CHECK(positions[j] >= 0 && positions[j] < seq_len,
                     "sequence gather: position out of range");
      std::copy_n(local + (b * n + j) * row_elems, row_elems,
                  full + (int64_t{b} * seq_len + positions[j]) * row_elems);
    }
  }
}

RingAttentionStats& RingAttentionStats::operator+=(const RingAttentionStats& other) {
  compute_s += other.compute_s;
  comm_wait_s += other.comm_wait_s;
  progress_s += other.progress_s;
  bytes_sent += other.bytes_sent;
  blocks += other.blocks;
  return *this;
}

RingAttentionStats RingAttentionForward(float* o, float* lse, const float* q, const float* k,
                                        const float* v, const int32_t* positions,
                                        const AttentionShape& shape, bool causal, float scale,
                                        MeshComms& comms) {
  return RingAttentionForward(o, lse, q, k, v, positions, shape, causal, scale, comms, RingPass{});
}

RingAttentionStats RingAttentionForward(float* o, float* lse, const float* q, const float* k,
                                        const float* v, const int32_t* positions,
                                        const AttentionShape& shape, bool causal, float scale,
                                        MeshComms& comms, const RingPass& pass) {
  CheckRingShape(shape);
  const Ring ring = RingOf(comms);
  const PassParts parts = PartsOf(pass, ring);
  RingAttentionStats stats;
  RingAttentionWorkspace call_workspace;  // used when the caller keeps none
  RingBuffers& buffers = pass.workspace ? *pass.workspace : call_workspace;
  std::optional<KvRotation> rotation;
  if (parts.transfers) rotation.emplace(k, v, positions, shape, buffers);
  float* o_blk = nullptr;
  float* lse_blk = nullptr;
  if (parts.compute) {
    o_blk = buffers.Floats(RingBuffers::kBlockOut,
                           int64_t{shape.batch} * shape.q_len * shape.heads * shape.head_dim);
    lse_blk =
        buffers.Floats(RingBuffers::kBlockLse, int64_t{shape.batch} * shape.heads * shape.q_len);
  }
  for (int step = 0; step < ring.size; ++step) {
    RingTransfers transfers(comms, ring, stats);
    if (parts.transfers && step + 1 < ring.size) {
      rotation->Start(step, transfers, StepName("forward", step, ring.size));
    }
    if (parts.compute) {
      const Clock::time_point start = Clock::now();
      const double progress_before = stats.progress_s;
      const KvBlock blk = parts.transfers ? rotation->Current(step)
                          : pass.work == RingWork::kComputeOnly
                              ? KvBlock{k, v, pass.step_kv_positions[static_cast<size_t>(step)]}
                              : KvBlock{k, v, positions};
      // The block in pieces of K/V rows, merged as they come, with the transfers nudged between.
      const int rows = PieceRows(shape, kForwardPieces);
      const int64_t row_elems = int64_t{shape.kv_heads} * shape.head_dim;
      for (int r0 = 0; r0 < shape.kv_len; r0 += rows) {
        AttentionShape piece = shape;
        piece.kv_len = std::min(rows, shape.kv_len - r0);
        const bool first = step == 0 && r0 == 0;
        AttentionForwardBlock(first ? o : o_blk, first ? lse : lse_blk, q, blk.k + r0 * row_elems,
                              blk.v + r0 * row_elems, positions, blk.positions + r0, piece, causal,
                              scale);
        if (!first) AttentionMerge(o, lse, o_blk, lse_blk, shape);
        transfers.Progress();
      }
      stats.compute_s += SecondsSince(start) - (stats.progress_s - progress_before);
      ++stats.blocks;
    }
    transfers.WaitAll();
  }
  return stats;
}

RingAttentionStats RingAttentionBackward(float* dq, float* dk, float* dv, const float* q,
                                         const float* k, const float* v, const float* o,
                                         const float* d_o, const float* lse,
                                         const int32_t* positions, const AttentionShape& shape,
                                         bool causal, float scale, MeshComms& comms) {
  return RingAttentionBackward(dq, dk, dv, q, k, v, o, d_o, lse, positions, shape, causal, scale,
                               comms, RingPass{});
}

RingAttentionStats RingAttentionBackward(float* dq, float* dk, float* dv, const float* q,
                                         const float* k, const float* v, const float* o,
                                         const float* d_o, const float* lse,
                                         const int32_t* positions, const AttentionShape& shape,
                                         bool causal, float scale, MeshComms& comms,
                                         const RingPass& pass) {
  CheckRingShape(shape);
  const Ring ring = RingOf(comms);
  const PassParts parts = PartsOf(pass, ring);
  RingAttentionStats stats;
  const int64_t kv_elems = int64_t{shape.batch} * shape.kv_len * shape.kv_heads * shape.head_dim;

  RingAttentionWorkspace call_workspace;  // used when the caller keeps none
  RingBuffers& buffers = pass.workspace ? *pass.workspace : call_workspace;
  Clock::time_point start = Clock::now();
  float* delta = nullptr;
  if (parts.compute) {
    delta = buffers.Floats(RingBuffers::kDelta, int64_t{shape.batch} * shape.heads * shape.q_len);
    AttentionBackwardPrepare(delta, o, d_o, shape);
    stats.compute_s += SecondsSince(start);
  }

  std::optional<KvRotation> rotation;
  if (parts.transfers) rotation.emplace(k, v, positions, shape, buffers);
  // The block of step s brings its dK/dV accumulator from the previous rank, which added its
  // share in step s - 1; the sum of the last step goes to the next rank, the block's owner,
  // closing the circle. The accumulator travels in the pieces the block is computed in, each
  // piece [dk rows | dv rows] contiguous: as soon as a piece of this rank's share is computed it
  // is added to the arrived piece and sent on, so the transfers run under the remaining pieces,
  // the trip home too but for its last piece. Without transfers (a compute-only pass) every
  // step adds into the first accumulator: the same work.
  const int rows = PieceRows(shape, kBackwardPieces);
  const int64_t row_elems = int64_t{shape.kv_heads} * shape.head_dim;
  struct Piece {
    int r0, rows;
    int64_t offset, elems;  // in an accumulator: dk at offset, dv at offset + elems
  };
  std::vector<Piece> pieces;
  for (int r0 = 0; r0 < shape.kv_len; r0 += rows) {
    const int n = std::min(rows, shape.kv_len - r0);
    // One piece over the whole block when the batch is not 1 (rows = kv_len).
    const int64_t elems = n == shape.kv_len ? kv_elems : n * row_elems;
    pieces.push_back({r0, n, 2 * int64_t{r0} * row_elems, elems});
  }
  float* grad_blk = buffers.Floats(RingBuffers::kGrad, 2 * kv_elems);
  float* grad_acc[2] = {
      buffers.Floats(RingBuffers::kAccumulator0, 2 * kv_elems),
      parts.transfers ? buffers.Floats(RingBuffers::kAccumulator1, 2 * kv_elems) : nullptr};
  // What grad_acc[i] sent in step s must be gone before step s + 2 receives into it.
  RingTransfers grad_out[2] = {RingTransfers(comms, ring, stats),
                               RingTransfers(comms, ring, stats)};
  // This rank's own block's sums coming home in the last step, into grad_blk's pieces as
  // they free up.
  RingTransfers home(comms, ring, stats);
  for (int step = 0; step < ring.size; ++step) {
    const std::string name = StepName("backward", step, ring.size);
    const bool last = step + 1 == ring.size;
    RingTransfers kv_transfers(comms, ring, stats);
    if (parts.transfers && !last) rotation->Start(step, kv_transfers, name);
    float* acc = grad_acc[parts.transfers ? step % 2 : 0];
    RingTransfers grad_in(comms, ring, stats);
    if (parts.transfers && step > 0) {
      grad_out[step % 2].WaitAll();
      for (const Piece& p : pieces) {
        grad_in.Receive(acc + p.offset, 2 * p.elems, kTagGrad, "dK/dV accumulator in " + name);
      }
    }
    const KvBlock blk = !parts.compute    ? KvBlock{k, v, positions}
                        : parts.transfers ? rotation->Current(step)
                        : pass.work == RingWork::kComputeOnly
                            ? KvBlock{k, v, pass.step_kv_positions[static_cast<size_t>(step)]}
                            : KvBlock{k, v, positions};
    for (size_t i = 0; i < pieces.size(); ++i) {
      const Piece& p = pieces[i];
      float* grad = grad_blk + p.offset;
      if (parts.compute) {
        start = Clock::now();
        AttentionShape piece = shape;
        piece.kv_len = p.rows;
        std::fill_n(grad, 2 * p.elems, 0.0f);
        AttentionBackwardBlock(dq, grad, grad + p.elems, q, blk.k + p.r0 * row_elems,
                               blk.v + p.r0 * row_elems, d_o, lse, delta, positions,
                               blk.positions + p.r0, piece, causal, scale);
        stats.compute_s += SecondsSince(start);
      }
      kv_transfers.Progress();
      grad_in.Progress();
      if (parts.transfers && step > 0) grad_in.Wait(i);
      if (parts.compute) {
        start = Clock::now();
        float* sum = acc + p.offset;
        if (step == 0) {
          std::copy_n(grad, 2 * p.elems, sum);
        } else {
          for (int64_t j = 0; j < 2 * p.elems; ++j) sum[j] += grad[j];
        }
        stats.compute_s += SecondsSince(start);
      }
      if (parts.transfers) {
        grad_out[step % 2].Send(acc + p.offset, 2 * p.elems, kTagGrad,
                                "dK/dV accumulator in " + name);
        if (last) {
          home.Receive(grad, 2 * p.elems, kTagGrad,
                       "dK/dV accumulator returning home after ring attention backward");
        }
        grad_out[step % 2].Progress();
        home.Progress();
      }
    }
    if (parts.compute) ++stats.blocks;
    grad_in.WaitAll();
    kv_transfers.WaitAll();
  }

  // This rank's own sums, home after the full circle (or never sent, over one rank or without
  // transfers).
  const float* own = grad_acc[0];
  if (parts.transfers) {
    home.WaitAll();
    grad_out[0].WaitAll();
    grad_out[1].WaitAll();
    own = grad_blk;
  }
  if (parts.compute) {
    start = Clock::now();
    for (const Piece& p : pieces) {
      const float* sum = own + p.offset;
      float* dk_rows = dk + p.r0 * row_elems;
      float* dv_rows = dv + p.r0 * row_elems;
      for (int64_t j = 0; j < p.elems; ++j) dk_rows[j] += sum[j];
      for (int64_t j = 0; j < p.elems; ++j) dv_rows[j] += sum[p.elems + j];
    }
    stats.compute_s += SecondsSince(start);
  }
  return stats;
}


}  // namespace shardsim::runtime
