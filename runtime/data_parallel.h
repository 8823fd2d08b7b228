// Data parallelism, ZeRO-1/2/3 and FSDP on one rank's parameters, bucket by bucket (a bucket is
// a layer's parameters of one kind, the embedding, or the final norm with the head), by the rules
// of strategies/data_parallel.h: the same axes, the same collectives, the same order.
//
// With P the axes parameters are sharded over (ParamShardAxes: fsdp, and the replica axes at
// ZeRO-3), G the axes gradients are reduce-scattered over per micro-batch (GradShardAxes: fsdp,
// and the replicas from ZeRO-2) and R the replica axes not in G:
//   - each bucket [offset, offset + count) is cut into |G| blocks of ceil(count / |G|); this rank
//     keeps block GroupRank(G) of the gradients (and of the parameters when P is not empty);
//   - before a bucket is read, its parameters are all-gathered over P, the next bucket's gather
//     already in flight (prefetch);
//   - after each micro-batch's backward writes a bucket, its gradients are reduce-scattered over
//     G (non-blocking) into this rank's block, and the bucket's full gradients are zeroed;
//   - once per step over R: ZeRO-0 all-reduces the block (without G: bucket by bucket under the
//     last backward), ZeRO-1 reduce-scatters it into a sub-block the optimizer updates and
//     all-gathers the updated parameters after; ZeRO-2 all-gathers the updated parameters over G.
// The gathered parameters live in the flat buffer while the layer that reads them runs and are
// given back after it (kept gathered: at the step's end), but for this rank's block, the only
// part ever updated; a bucket's full gradients are given back once reduce-scattered. What is given
// back goes to a page pool (page_pool.h) that the next gather, or the next backward's gradients,
// take their pages from, as a framework's caching allocator reuses a freed block. A tied embedding read by a head in another chunk of the stage stays gathered
// for the step.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/page_pool.h"

#include "core/plan_spec.h"
#include "runtime/comm.h"
#include "runtime/memory_account.h"
#include "runtime/stage_model.h"
#include "runtime/trace.h"

namespace shardsim::runtime {

class DataParallel {
 public:
  // REQUIRES: `model` outlives this. Throws InputError for ZeRO-2 with fsdp > 1 (its gradient
  // and parameter shards would differ).
  DataParallel(const PlanSpec& plan, MeshComms& comms, StageModel& model);
  ~DataParallel();
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  // Whether parameters are gathered before use / gradients reduce-scattered per micro-batch.
  bool gathers() const { return gathers_; }
  bool scatters_per_microbatch() const { return per_microbatch_; }

  // Traces every collective under the step program's op key (stage `stage`).
  void set_tracer(Tracer* tracer, int64_t stage) { tracer_ = tracer, stage_ = stage; }
  // At the start of a step: the gradients zeroed (parameters kept gathered are gathered again).
  void BeginStep();
  // Before bucket `bucket`'s parameters are read by micro-batch `mb`'s forward or backward:
  // completes its gather, then starts `next`'s (-1: none); in a backward, takes pooled pages for
  // its gradients where they were given back. Kept gathered (strategies::KeepsGatheredParams):
  // gathered at its first use in the step only. Needed where gathers() or
  // scatters_per_microbatch().
  void Use(int bucket, int next, int64_t mb, bool backward);
  // After micro-batch `mb`'s backward wrote bucket `bucket`'s gradients; `last` when it was the
  // last micro-batch of the step for this bucket.
  void GradientsDone(int bucket, bool last, int64_t mb);
  // Completes the step's gradient reduction and returns the stage's flat gradient buffer
  // (StageModel::grads), whose OptimizerRanges() now hold the summed gradients of the parameters
  // this rank updates, each at its flat offset (written there, so no second copy of the
  // gradients is kept); the rest of the buffer is stale. Sums the tensor-replicated weights'
  // gradients over tensor when sequence parallelism split their tokens.
  std::vector<float>& ReducedGradients();
  // The flat parameter ranges this rank's optimizer updates, one per bucket, in bucket order. `counted`: this
  // rank is the one that counts the range in a global sum (ranks holding the same updated range
  // after an all-reduce count it once), so that summing counted ranges (tensor-replicated tensors
  // on tensor rank 0 only) over the world visits every parameter once.
  struct Range {
    int64_t begin = 0, end = 0;
    bool counted = true;
  };
  const std::vector<Range>& OptimizerRanges() const { return opt_ranges_; }
  // Bucket `bucket`'s range is counted on another stage (a copy of its parameters: stage_copies.h).
  void Uncount(int bucket) { opt_ranges_[static_cast<size_t>(bucket)].counted = false; }
  int64_t optimizer_elements() const { return opt_elements_; }
  // After the optimizer: all-gathers the updated parameters where ZeRO-1/2 ask for it, gives
  // back every gathered sharded bucket.
  void AfterOptimizer();
  // After each forward or backward task: gives back the gathered buckets it read (not when kept
  // gathered).
  void EndPass();
  // Gives back every gathered sharded bucket but this rank's blocks (after a checkpoint wrote
  // the whole buffer, say).
  void ReleaseGathered();
  // Counts the gradient blocks (grads) and the gather, reduce-scatter and ZeRO partition buffers
  // (buffers) into `account` from now on; `account` must outlive this.
  void set_memory_account(MemoryAccount* account);

 private:
  struct Bucket;
  struct Pending;
  void StartGather(int bucket);
  std::string Key(const Bucket& b, std::string_view op, int64_t mb) const;
  Tracer* tracer_ = nullptr;
  int64_t stage_ = 0;
  bool keep_gathered_ = false;
  std::vector<bool> gathered_;  // per bucket, gathered this step (kept gathered only)
  void FinishGather(int bucket);
  void Complete(Pending& p);  // waits for it; adds a reduce-scatter into this rank's block
  void FinishScatters();
  bool Release(int bucket);       // gives back the bucket's gathered parameters but this rank's block (false: none held)
  std::vector<bool> resident_;    // per bucket, its sharded parameters gathered in the flat buffer now
  std::vector<int> in_use_;       // the buckets of the layer being read now
  const PlanSpec& plan_;
  MeshComms& comms_;
  StageModel& model_;
  std::vector<Bucket> buckets_;
  std::deque<Pending> pending_;  // reduce-scatters and all-reduces in flight, in issue order
  std::vector<float> block_grads_;  // per bucket, this rank's block of the gradients (with G)
  std::vector<Range> opt_ranges_;
  int64_t opt_elements_ = 0;
  bool gathers_ = false, per_microbatch_ = false;
  int gathering_ = -1;  // the bucket whose gather is in flight
  MPI_Request gather_request_ = MPI_REQUEST_NULL;
  std::vector<float> gather_in_, gather_out_;
  MemoryAccount* account_ = nullptr;
  MemoryHold block_grads_hold_, gather_hold_;
  PagePool pages_;  // what the flat parameter and gradient buffers gave back
  int64_t poolable_bytes_ = 0;  // the most they can give back: sharded buckets' gathers and gradients
};

}  // namespace shardsim::runtime
