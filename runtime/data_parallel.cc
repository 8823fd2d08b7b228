#include "runtime/data_parallel.h"

#include <algorithm>
#include <optional>

#include "core/error.h"
#include "runtime/resident_pages.h"
#include "strategies/data_parallel.h"
#include "strategies/op_keys.h"
#include "strategies/op_names.h"

namespace shardsim::runtime {

struct DataParallel::Bucket {
  std::vector<std::string> param_axes, grad_axes, step_axes;  // P, G, R
  int64_t offset = 0, count = 0;
  int64_t block = 0;                    // ceil(count / |G|)
  int64_t block_begin = 0, block_end = 0;  // this rank's block, flat
  int64_t block_grad_offset = 0;        // into block_grads_
  int64_t sub = 0;                      // ZeRO-1: ceil(block / |R|)
  int64_t opt_begin = 0, opt_end = 0;   // what the optimizer updates, flat
  std::string name;
  std::string layer;         // its layer in op keys
  std::string_view kind;     // "dense" or "expert" in op names
};

struct DataParallel::Pending {
  MPI_Request request = MPI_REQUEST_NULL;
  int bucket = -1;
  std::string key;  // the op it belongs to
  std::vector<float> send, receive;  // a reduce-scatter's buffers; empty for an all-reduce in place
  MemoryHold hold;                   // their bytes, while in flight
};

DataParallel::DataParallel(const PlanSpec& plan, MeshComms& comms, StageModel& model) : plan_(plan), comms_(comms), model_(model) {
  SHARDSIM_CHECK(!(plan.zero_stage == 2 && plan.mesh.fsdp > 1), "ZeRO-2 with fsdp is refused by CheckRuntimeSupports");
  int64_t block_grads = 0;
  for (const ParamBucket& pb : model.buckets()) {
    const strategies::ParamKind kind = pb.expert ? strategies::ParamKind::kExpert : strategies::ParamKind::kDense;
    Bucket b;
    b.name = pb.name;
    b.layer = pb.layer;
    b.kind = pb.expert ? strategies::ops::kExpert : strategies::ops::kDense;
    b.offset = pb.offset;
    b.count = pb.count;
    b.param_axes = strategies::ParamShardAxes(plan, kind);
    b.grad_axes = strategies::GradShardAxes(plan, kind);
    for (const std::string& a : strategies::ReplicaAxes(plan, kind)) {
      if (std::find(b.grad_axes.begin(), b.grad_axes.end(), a) == b.grad_axes.end()) b.step_axes.push_back(a);
    }
    SHARDSIM_CHECK(b.param_axes.empty() || b.param_axes == b.grad_axes, "parameters and gradients sharded alike");
    const int64_t n = comms.GroupSize(b.grad_axes), j = comms.GroupRank(b.grad_axes);
    b.block = (b.count + n - 1) / n;
    b.block_begin = std::min(b.offset + j * b.block, b.offset + b.count);
    b.block_end = std::min(b.block_begin + b.block, b.offset + b.count);
    b.block_grad_offset = block_grads;
    if (!b.grad_axes.empty()) block_grads += b.block;
    gathers_ = gathers_ || !b.param_axes.empty();
    per_microbatch_ = per_microbatch_ || !b.grad_axes.empty();
    bool counted = true;
    if (plan.zero_stage == 1 && !b.step_axes.empty()) {
      const int64_t r = comms.GroupSize(b.step_axes), jr = comms.GroupRank(b.step_axes);
      b.sub = (b.block + r - 1) / r;
      b.opt_begin = std::min(b.block_begin + jr * b.sub, b.block_end);
      b.opt_end = std::min(b.opt_begin + b.sub, b.block_end);
    } else {
      b.opt_begin = b.block_begin, b.opt_end = b.block_end;
      // ZeRO-0: every replica ends with the same all-reduced block; one of them counts it.
      counted = b.step_axes.empty() || comms.GroupRank(b.step_axes) == 0;
    }
    opt_elements_ += b.opt_end - b.opt_begin;
    if (!b.param_axes.empty()) poolable_bytes_ += (b.count - (b.block_end - b.block_begin)) * static_cast<int64_t>(sizeof(float));
    if (!b.grad_axes.empty()) poolable_bytes_ += b.count * static_cast<int64_t>(sizeof(float));
    opt_ranges_.push_back({b.opt_begin, b.opt_end, counted});
    buckets_.push_back(b);
  }
  block_grads_.assign(static_cast<size_t>(block_grads), 0.0f);
  keep_gathered_ = strategies::KeepsGatheredParams(plan);
  gathered_.assign(buckets_.size(), false);
  // Every parameter was written at initialisation: the sharded buckets give back all but this
  // rank's block until they are gathered.
  resident_.assign(buckets_.size(), true);
  ReleaseGathered();
  pages_.Trim(0);  // the whole model existed only for initialisation: its pages go to the system
}

bool DataParallel::Release(int bucket) {
  const Bucket& b = buckets_[static_cast<size_t>(bucket)];
  if (b.param_axes.empty() || !resident_[static_cast<size_t>(bucket)]) return false;
  float* params = model_.params().data();
  pages_.Release(params + b.offset, params + b.block_begin);
  pages_.Release(params + b.block_end, params + b.offset + b.count);
  resident_[static_cast<size_t>(bucket)] = false;
  return true;
}

void DataParallel::ReleaseGathered() {
  for (size_t i = 0; i < buckets_.size(); ++i) Release(static_cast<int>(i));
  in_use_.clear();
  model_.CountStates();
}

void DataParallel::EndPass() {
  if (keep_gathered_) return;
  bool released = false;
  for (int b : in_use_) {
    if (!model_.buckets()[static_cast<size_t>(b)].read_by_other_chunk) released = Release(b) || released;
  }
  in_use_.clear();
  if (released) model_.CountStates();  // ZeRO-2's buckets hold their parameters: nothing to count
}

void DataParallel::set_memory_account(MemoryAccount* account) {
  account_ = account;
  block_grads_hold_ = MemoryHold(account, MemoryCategory::kGrads, HeldBytes(block_grads_));
  gather_hold_ = MemoryHold(account, MemoryCategory::kBuffers, HeldBytes(gather_in_, gather_out_));
}

DataParallel::~DataParallel() {
  // A request left by an aborted step: complete it rather than free buffers MPI still writes.
  if (gather_request_ != MPI_REQUEST_NULL) MPI_Wait(&gather_request_, MPI_STATUS_IGNORE);
  for (Pending& p : pending_) {
    if (p.request != MPI_REQUEST_NULL) MPI_Wait(&p.request, MPI_STATUS_IGNORE);
  }
}

void DataParallel::StartGather(int bucket) {
  const Bucket& b = buckets_[static_cast<size_t>(bucket)];
  const float* params = model_.params().data();
  gather_in_.assign(params + b.block_begin, params + b.block_end);
  gather_in_.resize(static_cast<size_t>(b.block), 0.0f);
  gather_out_.resize(static_cast<size_t>(b.block * comms_.GroupSize(b.param_axes)));
  gather_hold_.SetTo(gather_in_, gather_out_);
  gather_request_ = comms_.StartAllGather(gather_out_.data(), gather_in_.data(), b.block, b.param_axes, "sharded " + b.name + " parameter all-gather");
  gathering_ = bucket;
}

void DataParallel::FinishGather(int bucket) {
  const Bucket& b = buckets_[static_cast<size_t>(bucket)];
  comms_.Wait(&gather_request_, "sharded " + b.name + " parameter all-gather");
  float* params = model_.params().data() + b.offset;
  pages_.Acquire(params, params + b.count, PagePool::Contents::kOverwritten);  // the copy below writes it all
  std::copy(gather_out_.begin(), gather_out_.begin() + b.count, model_.params().begin() + b.offset);
  gathering_ = -1;
  resident_[static_cast<size_t>(bucket)] = true;
  model_.CountStates();
}

std::string DataParallel::Key(const Bucket& b, std::string_view op, int64_t mb) const {
  return strategies::OpKey(stage_, mb < 0 ? strategies::kStepLayer : std::string_view(b.layer), op, mb);
}

void DataParallel::BeginStep() {
  // The pool never needs more than the buffers can give back: every sharded bucket's gathered
  // parameters and full gradients. More means a write without Acquire took fresh pages.
  pages_.Trim(poolable_bytes_);
  std::fill(gathered_.begin(), gathered_.end(), false);
  // The step's gradients start at zero: a bucket reduced whole is written whole again, so it is
  // cleared in place; a reduce-scattered one holds only its reduced range, given back.
  float* grads = model_.grads().data();
  for (const Bucket& b : buckets_) {
    if (b.grad_axes.empty()) {
      std::fill(grads + b.offset, grads + b.offset + b.count, 0.0f);
    } else {
      pages_.Release(grads + b.offset, grads + b.offset + b.count);
    }
  }
}

void DataParallel::Use(int bucket, int next, int64_t mb, bool backward) {
  const Bucket& b = buckets_[static_cast<size_t>(bucket)];
  // A bucket of another layer: the previous layer's are done with (FSDP's reshard after use).
  if (!in_use_.empty() && buckets_[static_cast<size_t>(in_use_.front())].layer != b.layer) EndPass();
  in_use_.push_back(bucket);
  // The backward writes the bucket's gradients: pooled pages where they were given back.
  if (backward && !b.grad_axes.empty()) {
    float* grads = model_.grads().data() + b.offset;
    pages_.Acquire(grads, grads + b.count);
  }
  // Kept gathered: one gather per step, the step program's step-level op.
  const bool needed = !b.param_axes.empty() && !(keep_gathered_ && gathered_[static_cast<size_t>(bucket)]);
  if (!needed && gathering_ != bucket) return;
  // Each gather under its own bucket's op (a prefetch too: the next bucket may be of the other kind).
  auto key = [&](const Bucket& of) {
    return keep_gathered_ ? Key(of, strategies::ops::StepParamAllGather(of.kind), -1)
                          : Key(of, backward ? strategies::ops::ParamAllGatherBackward(of.kind) : strategies::ops::ParamAllGather(of.kind), mb);
  };
  {
    const TraceSpan span(tracer_, key(b), "data");
    if (gathering_ >= 0 && gathering_ != bucket) FinishGather(gathering_);  // a prefetch not used next: complete it
    if (gathering_ != bucket) StartGather(bucket);
    FinishGather(bucket);
  }
  gathered_[static_cast<size_t>(bucket)] = true;
  if (next >= 0 && !buckets_[static_cast<size_t>(next)].param_axes.empty() && !(keep_gathered_ && gathered_[static_cast<size_t>(next)])) {
    const TraceSpan span(tracer_, key(buckets_[static_cast<size_t>(next)]), "data");
    StartGather(next);
  }
}

void DataParallel::GradientsDone(int bucket, bool last, int64_t mb) {
  const Bucket& b = buckets_[static_cast<size_t>(bucket)];
  float* grads = model_.grads().data() + b.offset;
  // Kept gathered: the gradients accumulate whole until the last micro-batch's backward.
  if (!b.grad_axes.empty() && keep_gathered_ && !last) return;
  std::optional<TraceSpan> span;
  if (!b.grad_axes.empty()) {
    const std::string key = keep_gathered_ ? Key(b, strategies::ops::StepGradReduceScatter(b.kind), -1)
                                           : Key(b, strategies::ops::GradReduceScatter(b.kind), mb);
    span.emplace(tracer_, key, "data");
    // Sharded gradients cannot accumulate over micro-batches: this one's are reduce-scattered now
    // and the bucket's full gradients cleared for the next.
    Pending p;
    p.bucket = bucket;
    p.key = key;
    p.send.assign(grads, grads + b.count);
    p.send.resize(static_cast<size_t>(b.block * comms_.GroupSize(b.grad_axes)), 0.0f);
    model_.CountStates();  // the bucket's full gradients, at their largest
    pages_.Release(grads, grads + b.count);
    model_.CountStates();
    p.receive.resize(static_cast<size_t>(b.block));
    p.hold = MemoryHold(account_, MemoryCategory::kBuffers, HeldBytes(p.send, p.receive));
    pending_.push_back(std::move(p));
    Pending& q = pending_.back();
    q.request = comms_.StartReduceScatterSum(q.receive.data(), q.send.data(), b.block, b.grad_axes, "sharded " + b.name + " gradient reduce-scatter");
  } else if (plan_.zero_stage == 0 && !b.step_axes.empty() && last) {
    // Plain data parallelism: the bucket's all-reduce runs under the backward of the layers before it.
    Pending p;
    p.bucket = bucket;
    p.key = Key(b, strategies::ops::DataAllReduce(b.kind), -1);
    span.emplace(tracer_, p.key, "data");
    p.request = comms_.StartAllReduceSum(grads, b.count, b.step_axes, "data-parallel gradient all-reduce (bucket)");
    pending_.push_back(std::move(p));
  } else {
    return;
  }
  // Non-blocking collectives move only inside MPI calls: nudge the ones in flight, and take in
  // those done at the front (in issue order, so the sums are the same whatever the timing).
  for (Pending& p : pending_) {
    int done = 0;
    MPI_Test(&p.request, &done, MPI_STATUS_IGNORE);
  }
  while (!pending_.empty() && pending_.front().request == MPI_REQUEST_NULL) {
    Complete(pending_.front());
    pending_.pop_front();
  }
}

void DataParallel::Complete(Pending& p) {
  const Bucket& b = buckets_[static_cast<size_t>(p.bucket)];
  const TraceSpan span(tracer_, p.key, "data");
  comms_.Wait(&p.request, p.receive.empty() ? "data-parallel gradient all-reduce of " + b.name : "sharded " + b.name + " gradient reduce-scatter");
  if (p.receive.empty()) return;
  float* block = block_grads_.data() + b.block_grad_offset;
  for (int64_t i = 0; i < b.block; ++i) block[i] += p.receive[static_cast<size_t>(i)];
}

void DataParallel::FinishScatters() {
  for (Pending& p : pending_) Complete(p);
  pending_.clear();
}

std::vector<float>& DataParallel::ReducedGradients() {
  FinishScatters();
  float* grads = model_.grads().data();
  std::vector<float> padded, mine;
  MemoryHold scratch(account_, MemoryCategory::kBuffers);  // ZeRO-1's partition buffers
  for (const Bucket& b : buckets_) {
    // This rank's block of the summed gradients: reduce-scattered per micro-batch, or the whole
    // bucket.
    float* block = b.grad_axes.empty() ? grads + b.offset : block_grads_.data() + b.block_grad_offset;
    const int64_t valid = b.block_end - b.block_begin;
    float* out = grads + b.opt_begin;
    pages_.Acquire(out, out + (b.opt_end - b.opt_begin));  // given back after its reduce-scatter
    if (plan_.zero_stage == 1 && !b.step_axes.empty()) {
      const TraceSpan span(tracer_, Key(b, strategies::ops::DataReduceScatter(b.kind), -1), "data");
      const int64_t r = comms_.GroupSize(b.step_axes);
      padded.assign(block, block + valid);
      padded.resize(static_cast<size_t>(b.sub * r), 0.0f);
      mine.resize(static_cast<size_t>(b.sub));
      scratch.SetTo(padded, mine);
      comms_.ReduceScatterSum(mine.data(), padded.data(), b.sub, b.step_axes, "data-parallel gradient reduce-scatter (bucket)");
      std::copy(mine.begin(), mine.begin() + (b.opt_end - b.opt_begin), out);
    } else {
      if (plan_.zero_stage == 0 && !b.grad_axes.empty() && !b.step_axes.empty()) {
        const TraceSpan span(tracer_, Key(b, strategies::ops::DataAllReduce(b.kind), -1), "data");
        comms_.AllReduceSum(block, b.block, b.step_axes, "data-parallel gradient all-reduce (bucket)");
      }
      const float* from = block + (b.opt_begin - b.block_begin);
      if (from != out) std::copy(from, from + (b.opt_end - b.opt_begin), out);
    }
  }
  // Sequence parallelism gave each tensor rank a share of the tokens (MLA's down projections a
  // share of the heads): those replicated weights' gradients are partial sums over tensor (every
  // tensor rank holds the same ranges).
  if (model_.replicated_grads_partial()) {
    const TraceSpan span(tracer_, strategies::OpKey(stage_, strategies::kStepLayer, strategies::ops::kTensorReplicatedGrads, -1), "tensor");
    for (size_t i = 0; i < buckets_.size(); ++i) {
      const Bucket& b = buckets_[i];
      for (const ParamTensor& pt : model_.tensors()) {
        if (pt.bucket != static_cast<int>(i) || !pt.tensor_partial) continue;
        const int64_t lo = std::max(pt.offset, b.opt_begin), hi = std::min(pt.offset + pt.size(), b.opt_end);
        if (lo < hi) comms_.AllReduceSum(grads + lo, hi - lo, {"tensor"}, pt.name + " gradient all-reduce over tensor");
      }
    }
  }
  std::fill(block_grads_.begin(), block_grads_.end(), 0.0f);
  model_.CountStates();
  return model_.grads();
}

void DataParallel::AfterOptimizer() {
  float* params = model_.params().data();
  std::vector<float> in, out;
  MemoryHold scratch(account_, MemoryCategory::kBuffers);  // the gathers' buffers
  for (const Bucket& b : buckets_) {
    std::optional<TraceSpan> span;
    if ((plan_.zero_stage == 1 && !b.step_axes.empty()) || (plan_.zero_stage == 2 && !b.grad_axes.empty())) {
      span.emplace(tracer_, Key(b, strategies::ops::ZeroParamAllGather(b.kind), -1), "data");
    }
    if (plan_.zero_stage == 1 && !b.step_axes.empty()) {
      // The updated sub-blocks make this rank's block again.
      in.assign(params + b.opt_begin, params + b.opt_end);
      in.resize(static_cast<size_t>(b.sub), 0.0f);
      out.resize(static_cast<size_t>(b.sub * comms_.GroupSize(b.step_axes)));
      scratch.SetTo(in, out);
      comms_.AllGather(out.data(), in.data(), b.sub, b.step_axes, "ZeRO parameter all-gather (bucket)");
      std::copy(out.begin(), out.begin() + (b.block_end - b.block_begin), params + b.block_begin);
    } else if (plan_.zero_stage == 2 && !b.grad_axes.empty()) {
      // ZeRO-2 keeps whole parameters: the updated blocks make the bucket again.
      in.assign(params + b.block_begin, params + b.block_end);
      in.resize(static_cast<size_t>(b.block), 0.0f);
      out.resize(static_cast<size_t>(b.block * comms_.GroupSize(b.grad_axes)));
      scratch.SetTo(in, out);
      comms_.AllGather(out.data(), in.data(), b.block, b.grad_axes, "ZeRO parameter all-gather (bucket)");
      std::copy(out.begin(), out.begin() + b.count, params + b.offset);
    }
  }
  ReleaseGathered();
}

}  // namespace shardsim::runtime
