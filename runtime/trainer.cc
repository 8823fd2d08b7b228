#include "runtime/trainer.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <numeric>
#include <optional>
#include <set>

#include "core/error.h"
#include "runtime/checkpoint.h"
#include "runtime/pipeline_sends.h"
#include "runtime/stage_copies.h"
#include "strategies/build_step.h"
#include "strategies/op_keys.h"
#include "strategies/op_names.h"
#include "strategies/plan_rules.h"

#include <nlohmann/json.hpp>

namespace shardsim::runtime {
namespace {

double Now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Point-to-point tags: one per (receiving chunk's position on its path, forward or backward,
// the path's direction: DualPipe has two). Every schedule sends and receives a chunk's
// micro-batches in increasing order, and MPI delivers messages of one sender and tag in order,
// so the micro-batch needs no tag of its own (which keeps tags far below MPI_TAG_UB).
int Tag(int64_t direction, int64_t position, bool backward) { return static_cast<int>((position * 2 + (backward ? 1 : 0)) * 2 + direction); }

// Checks what the MPI job and the plan must agree on before any communicator is made (the splits
// are collective: a rank that fails later would leave the others waiting).
const PlanSpec& Validated(const ModelSpec& model, const PlanSpec& plan, MPI_Comm world) {
  int size = 0;
  MPI_Comm_size(world, &size);
  strategies::ValidatePlan(plan, model, size, "the MPI job", "plan:");
  CheckRuntimeSupports(model, plan);
  return plan;
}

}  // namespace

Trainer::Trainer(const ModelSpec& model, const PlanSpec& plan, const TrainOptions& options, MPI_Comm world, const Corpus& corpus)
    : spec_(model),
      plan_(plan),
      program_(strategies::BuildStep(model, Validated(model, plan, world))),
      options_(options),
      comms_(world, plan),
      corpus_(corpus) {
  comms_.set_timeout_s(options.timeout_s);
  model_ = std::make_unique<StageModel>(program_, comms_, options.architecture, options.seed);
  model_->set_tracer(&tracer_);
  comms_.set_tracer(&tracer_);
  tracer_.set_status(options.status);
  data_parallel_ = std::make_unique<DataParallel>(plan_, comms_, *model_);
  // Counted from here: the parameters were drawn whole, and data parallelism has now given
  // back what this rank does not hold (resident_pages.h).
  model_->set_memory_account(&memory_);
  data_parallel_->set_memory_account(&memory_);
  data_parallel_->set_tracer(&tracer_, comms_.Coordinate("pipeline"));
  UncountCopies(*model_, *data_parallel_);
  if (data_parallel_->gathers() || data_parallel_->scatters_per_microbatch()) {
    model_->set_param_use([this](int bucket, int next, int64_t mb, bool backward) { data_parallel_->Use(bucket, next, mb, backward); });
  }
  adam_m_.assign(static_cast<size_t>(data_parallel_->optimizer_elements()), 0.0f);
  adam_v_.assign(adam_m_.size(), 0.0f);
  adam_hold_ = MemoryHold(&memory_, MemoryCategory::kOptimizer, HeldBytes(adam_m_, adam_v_));
  if (!ResetProcessPeakResident()) resident_base_ = -1;  // the peak would include the construction's
}

Trainer::~Trainer() = default;

StepRecord Trainer::Step() {
  StepRecord record;
  const double start = Now();
  StageModel& m = *model_;
  data_parallel_->BeginStep();
  tracer_.set_step(step_);
  const int64_t stage = comms_.Coordinate("pipeline");
  const int64_t v = program_.layout.chunks;
  // Replicas that read their own sequences: data x fsdp x expert.
  const int64_t replicas = plan_.mesh.data * plan_.mesh.fsdp * plan_.mesh.expert;
  const int64_t replica = (comms_.Coordinate("data") * plan_.mesh.fsdp + comms_.Coordinate("fsdp")) * plan_.mesh.expert + comms_.Coordinate("expert");
  const int64_t per_replica = plan_.global_batch_size / replicas, microbatches = per_replica / plan_.micro_batch_size;
  const double normaliser = static_cast<double>(plan_.global_batch_size * plan_.seq_len);
  const int64_t tokens = m.tokens(), local = m.local_tokens() * m.hidden();
  std::vector<int32_t> ids(static_cast<size_t>(tokens)), targets(static_cast<size_t>(tokens));
  const std::vector<int32_t>& mine = m.sequence_positions();
  auto load = [&](int64_t mb) {
    // This context rank's tokens of each sequence.
    corpus_.Batch(ids.data(), targets.data(), step_, plan_.global_batch_size, replica * per_replica + mb * plan_.micro_batch_size,
                  plan_.micro_batch_size, mine);
  };
  PipelineSends sends(comms_);  // freed as they complete
  // Receives of stage inputs (activations forward, gradients backward), each posted one task
  // ahead of the task that reads it, so that the next task's input (under DualPipe, the other
  // direction's micro-batch) arrives while this task computes, as far as MPI's progress allows.
  struct Receipt {
    std::vector<float> data;
    MPI_Request request = MPI_REQUEST_NULL;
    std::string what;
  };
  std::map<size_t, Receipt> receipts;  // by task index
  // The step's token and pipeline buffers.
  MemoryHold buffers(&memory_, MemoryCategory::kBuffers);
  auto count_buffers = [&] {
    int64_t bytes = HeldBytes(ids, targets);
    bytes += sends.HeldBytes();
    for (const auto& [index, receipt] : receipts) bytes += HeldBytes(receipt.data);
    buffers.Set(bytes);
  };
  auto reap_sends = [&] {
    sends.Reap();
    count_buffers();
  };
  count_buffers();
  MPI_Comm world = comms_.world();
  double loss = 0;
  const std::vector<strategies::Task> tasks = strategies::StageTasks(program_, stage, microbatches);
  // Each bucket's gradients go to DataParallel as the backward writes them: all-reduced under
  // the last micro-batch's backward (data parallelism), reduce-scattered per micro-batch (ZeRO-2,
  // ZeRO-3, FSDP).
  std::vector<int64_t> backwards_done(static_cast<size_t>(v), 0);
  // The micro-batches through each chunk (all of them, or DualPipe's half in its direction).
  std::vector<int64_t> chunk_microbatches(static_cast<size_t>(v), 0);
  for (const strategies::Task& task : tasks) {
    if (task.phase == strategies::Phase::kForward) ++chunk_microbatches[static_cast<size_t>(task.chunk)];
  }
  // A zero-bubble schedule runs a micro-batch's weight gradients (W) apart from its input
  // gradients (B); where W follows its B at once, both are computed in the B task.
  std::vector<int64_t> weights_done(static_cast<size_t>(v), 0);
  std::set<std::pair<int64_t, int64_t>> deferred;
  auto post_receive = [&](size_t j) {
    if (j >= tasks.size() || receipts.count(j)) return;
    const strategies::Task& t = tasks[j];
    const strategies::ChunkLayout& c = m.chunk(t.chunk);
    const bool forward = t.phase == strategies::Phase::kForward;
    if (t.phase == strategies::Phase::kBackwardWeight || (forward ? c.embedding : c.head)) return;
    const int64_t from = program_.layout.paths[static_cast<size_t>(c.direction)][static_cast<size_t>(forward ? c.position - 1 : c.position + 1)].first;
    Receipt& r = receipts[j];
    r.data.resize(static_cast<size_t>(local));
    r.what = std::string("pipeline receive of ") + (forward ? "activations" : "gradients") + " for micro-batch " + std::to_string(t.microbatch) +
             " of part " + std::to_string(c.position) + " from rank " + std::to_string(comms_.PipelinePeer(from));
    r.request = comms_.StartReceive(r.data.data(), local, comms_.PipelinePeer(from), Tag(c.direction, c.position, !forward), r.what);
    count_buffers();
  };
  // Waits for task i's input under its receive op; null when it has none.
  auto receive = [&](size_t i, std::string_view op) -> float* {
    const auto it = receipts.find(i);
    if (it == receipts.end()) return nullptr;
    const TraceSpan span(&tracer_, strategies::OpKey(stage, strategies::ChunkLayer(tasks[i].chunk), op, tasks[i].microbatch), "pipeline");
    comms_.Wait(&it->second.request, it->second.what);
    return it->second.data.data();
  };
  for (size_t i = 0; i < tasks.size(); ++i) {
    post_receive(i);
    post_receive(i + 1);
    const strategies::Task& task = tasks[i];
    const strategies::ChunkLayout& chunk = m.chunk(task.chunk);
    const int64_t position = chunk.position, direction = chunk.direction;
    const auto& path = program_.layout.paths[static_cast<size_t>(direction)];
    const int64_t through = chunk_microbatches[static_cast<size_t>(task.chunk)];
    if (task.phase == strategies::Phase::kBackwardWeight) {
      const bool last_weight = ++weights_done[static_cast<size_t>(task.chunk)] == through;
      if (deferred.erase({task.chunk, task.microbatch})) {
        m.BackwardWeight(task.chunk, task.microbatch, [&](int bucket) { data_parallel_->GradientsDone(bucket, last_weight, task.microbatch); });
        data_parallel_->EndPass();
      }
      continue;
    }
    if (task.phase == strategies::Phase::kForward) {
      if (chunk.embedding || chunk.head) load(task.microbatch);
      const float* in = receive(i, strategies::ops::kRecvForward);
      reap_sends();
      // The last part returns the loss and writes no output.
      float* out = chunk.head ? nullptr : sends.Next(local).data();
      count_buffers();
      loss += m.Forward(task.chunk, task.microbatch, in, out, ids.data(), targets.data(), normaliser);
      data_parallel_->EndPass();
      if (!chunk.head) {
        const TraceSpan span(&tracer_, strategies::OpKey(stage, strategies::ChunkLayer(task.chunk), strategies::ops::kSendForward, task.microbatch), "pipeline");
        sends.Start(comms_.PipelinePeer(path[static_cast<size_t>(position + 1)].first), Tag(direction, position + 1, false),
                    "pipeline send of activations");
      }
    } else {
      const float* grad = receive(i, strategies::ops::kRecvBackward);
      reap_sends();
      // The first part writes no input gradient.
      float* grad_in = chunk.embedding ? nullptr : sends.Next(local).data();
      count_buffers();
      const bool last_backward = ++backwards_done[static_cast<size_t>(task.chunk)] == through;
      const bool defer = !(i + 1 < tasks.size() && tasks[i + 1].phase == strategies::Phase::kBackwardWeight &&
                           tasks[i + 1].microbatch == task.microbatch && tasks[i + 1].chunk == task.chunk);
      if (defer) deferred.insert({task.chunk, task.microbatch});
      m.Backward(
          task.chunk, task.microbatch, grad, grad_in,
          [&](int bucket) { data_parallel_->GradientsDone(bucket, last_backward, task.microbatch); }, defer);
      data_parallel_->EndPass();
      if (!chunk.embedding) {
        const TraceSpan span(&tracer_, strategies::OpKey(stage, strategies::ChunkLayer(task.chunk), strategies::ops::kSendBackward, task.microbatch), "pipeline");
        sends.Start(comms_.PipelinePeer(path[static_cast<size_t>(position - 1)].first), Tag(direction, position - 1, true),
                    "pipeline send of gradients");
      }
    }
    receipts.erase(i);
  }
  // The sends' completion (their time counts in "other": the program has no op for it).
  sends.WaitAll("pipeline send");
  count_buffers();
  Optimize(record);
  // The loss lives on the last stage; every rank reports the total.
  {
    MPI_Request request;
    CheckMpi(MPI_Iallreduce(MPI_IN_PLACE, &loss, 1, MPI_DOUBLE, MPI_SUM, world, &request), world, "loss all-reduce");
    comms_.Wait(&request, "loss all-reduce");
  }
  record.loss = loss;
  record.step_time_s = Now() - start;
  // Per category: the sum of the step's op spans; "other" is the rest of the step (batch loading,
  // bookkeeping, the loss all-reduce).
  record.category_s = tracer_.TakeTotals();
  double covered = 0;
  for (const auto& [category, seconds] : record.category_s) covered += seconds;
  record.category_s["other"] = std::max(0.0, record.step_time_s - covered);
  // The routing's load, outside the step's time: the warm-up's is not counted.
  if (steps_run_++ > 0) FoldExpertLoad();
  if (m.moe() != nullptr) m.moe()->ClearReceivedRows();
  ++step_;
  return record;
}

void Trainer::Optimize(StepRecord& record) {
  StageModel& m = *model_;
  std::vector<float>& g = data_parallel_->ReducedGradients();
  SumCopiedGradients(m, *data_parallel_, g, comms_, &tracer_);
  // Clipping (the global norm's all-reduce included) and AdamW: the program's optimizer op.
  std::optional<TraceSpan> span(std::in_place, &tracer_,
                                strategies::OpKey(comms_.Coordinate("pipeline"), strategies::kStepLayer, strategies::ops::kOptimizer, -1), "optimizer");
  const std::vector<DataParallel::Range>& ranges = data_parallel_->OptimizerRanges();
  const int64_t tensor_rank = comms_.Coordinate("tensor");
  // Visits the parts of every tensor inside this rank's optimizer ranges: (tensor, flat begin,
  // flat end, offset of begin in the AdamW state, counted). The reduced gradients are in `g` at
  // their flat offsets.
  auto each = [&](const auto& visit) {
    int64_t base = 0;
    for (const DataParallel::Range& r : ranges) {
      for (const ParamTensor& pt : m.tensors()) {
        const int64_t lo = std::max(pt.offset, r.begin), hi = std::min(pt.offset + pt.size(), r.end);
        if (lo < hi) visit(pt, lo, hi, base + (lo - r.begin), r.counted);
      }
      base += r.end - r.begin;
    }
  };
  // Global gradient norm: each element once over the world.
  double squares = 0;
  each([&](const ParamTensor& pt, int64_t lo, int64_t hi, int64_t, bool counted) {
    if (counted && !(pt.tensor_replicated && tensor_rank != 0)) squares += GradSquaredSum(g.data() + lo, hi - lo);
  });
  {
    MPI_Request request;
    MPI_Comm world = comms_.world();
    CheckMpi(MPI_Iallreduce(MPI_IN_PLACE, &squares, 1, MPI_DOUBLE, MPI_SUM, world, &request), world, "gradient norm all-reduce");
    comms_.Wait(&request, "gradient norm all-reduce");
  }
  record.grad_norm = std::sqrt(squares);
  const float factor = ClipFactor(squares, options_.clip_norm);
  std::vector<float>& params = m.params();
  each([&](const ParamTensor& pt, int64_t lo, int64_t hi, int64_t at, bool) {
    ScaleInPlace(g.data() + lo, hi - lo, factor);
    AdamWConfig config = options_.adamw;
    if (!pt.decay) config.weight_decay = 0;
    AdamWStep(params.data() + lo, adam_m_.data() + at, adam_v_.data() + at, g.data() + lo, hi - lo, config, step_ + 1);
  });
  span.reset();
  data_parallel_->AfterOptimizer();
}

std::string Trainer::GatherTrace() {
  // Each rank's events as JSON text, with their program op's kind, gathered to rank 0.
  std::map<std::string, std::string> kinds;
  for (const strategies::KeyedOp& k : strategies::StageOps(program_, comms_.Coordinate("pipeline"))) {
    const strategies::Op& op = k.op;
    std::string axes;
    for (const std::string& a : op.axes) axes += (axes.empty() ? "" : ",") + a;
    kinds.emplace(k.key, op.is_comm() ? ToString(op.collective) + " over " + axes : strategies::ToString(op.kind));
  }
  nlohmann::json mine = nlohmann::json::array();
  for (const TraceEvent& e : tracer_.events()) {
    const auto kind = kinds.find(e.key);
    mine.push_back({e.key, e.category, e.start_s, e.duration_s, e.step, kind == kinds.end() ? std::string() : kind->second});
  }
  const std::string text = mine.dump();
  int size = 0;
  MPI_Comm world = comms_.world();
  MPI_Comm_size(world, &size);
  int length = static_cast<int>(text.size());
  std::vector<int> lengths(static_cast<size_t>(size)), offsets(static_cast<size_t>(size));
  CheckMpi(MPI_Gather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0, world), world, "trace gather");
  int total = 0;
  for (int r = 0; r < size; ++r) offsets[static_cast<size_t>(r)] = total, total += lengths[static_cast<size_t>(r)];
  std::string all(static_cast<size_t>(comms_.rank() == 0 ? total : 0), ' ');
  CheckMpi(MPI_Gatherv(text.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(), MPI_CHAR, 0, world), world, "trace gather");
  if (comms_.rank() != 0) return "";
  std::vector<std::vector<TraceEvent>> by_rank(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) {
    for (const auto& e : nlohmann::json::parse(all.substr(static_cast<size_t>(offsets[static_cast<size_t>(r)]), static_cast<size_t>(lengths[static_cast<size_t>(r)])))) {
      by_rank[static_cast<size_t>(r)].push_back({e[0].get<std::string>(), e[1].get<std::string>(), e[2].get<double>(), e[3].get<double>(),
                                                 e[4].get<int64_t>(), e[5].get<std::string>()});
    }
  }
  return ChromeTrace(by_rank);
}

std::vector<RankMemory> Trainer::GatherMemory() {
  // Per rank: stage, the five peaks, the routed rows at the activations' peak (received, sent),
  // the peak total, the resident set before the trainer and its peak.
  constexpr int kFields = kMemoryCategories + 6;
  std::array<int64_t, kFields> mine{};
  mine[0] = comms_.Coordinate("pipeline");
  for (int c = 0; c < kMemoryCategories; ++c) mine[static_cast<size_t>(c) + 1] = memory_.peak(static_cast<MemoryCategory>(c));
  mine[kMemoryCategories + 1] = memory_.routed_at_activation_peak().received;
  mine[kMemoryCategories + 2] = memory_.routed_at_activation_peak().sent;
  mine[kFields - 3] = memory_.peak_total();
  mine[kFields - 2] = resident_base_;
  mine[kFields - 1] = resident_base_ < 0 ? -1 : ProcessPeakResidentBytes();
  int size = 0;
  MPI_Comm world = comms_.world();
  MPI_Comm_size(world, &size);
  std::vector<int64_t> all(comms_.rank() == 0 ? static_cast<size_t>(size) * kFields : 0);
  CheckMpi(MPI_Gather(mine.data(), kFields, MPI_INT64_T, all.data(), kFields, MPI_INT64_T, 0, world), world, "memory report gather");
  std::vector<RankMemory> ranks;
  if (comms_.rank() != 0) return ranks;
  for (int r = 0; r < size; ++r) {
    const int64_t* f = all.data() + static_cast<size_t>(r) * kFields;
    RankMemory m;
    m.rank = r;
    m.stage = f[0];
    for (size_t c = 0; c < kMemoryCategories; ++c) m.peak[c] = f[c + 1];
    m.routed_at_activation_peak = {f[kMemoryCategories + 1], f[kMemoryCategories + 2]};
    m.peak_total = f[kFields - 3];
    m.resident_base = f[kFields - 2];
    m.resident_peak = f[kFields - 1];
    ranks.push_back(m);
  }
  return ranks;
}

void Trainer::FoldExpertLoad() {
  const int64_t ranks = comms_.GroupSize({"expert"});
  MoeLayer* moe = model_->moe();
  if (ranks <= 1 || moe == nullptr || moe->received_rows().empty()) return;
  // Every rank of a group has run the same passes: each writes its own column, the sum over the
  // group fills the table [passes, ranks].
  const int64_t passes = static_cast<int64_t>(moe->received_rows().size());
  std::vector<double> table(static_cast<size_t>(passes * ranks), 0.0);
  const int64_t me = comms_.Coordinate("expert");
  for (int64_t p = 0; p < passes; ++p) table[static_cast<size_t>(p * ranks + me)] = static_cast<double>(moe->received_rows()[static_cast<size_t>(p)]);
  comms_.AllReduceSum(table.data(), passes * ranks, {"expert"}, "expert load table all-reduce");
  for (int64_t p = 0; p < passes; ++p) {
    const double* row = table.data() + p * ranks;
    const double total = std::accumulate(row, row + ranks, 0.0);
    if (total <= 0) continue;
    expert_load_[0] += *std::max_element(row, row + ranks) / (total / static_cast<double>(ranks));
    expert_load_[1] += 1;
  }
}

double Trainer::ExpertLoadImbalance() {
  std::array<double, 2> sums = expert_load_;
  MPI_Comm world = comms_.world();
  CheckMpi(MPI_Allreduce(MPI_IN_PLACE, sums.data(), 2, MPI_DOUBLE, MPI_SUM, world), world, "expert load all-reduce");
  return sums[1] > 0 ? sums[0] / sums[1] : -1;
}

CheckpointSubject Trainer::Checkpointed() {
  return {&comms_, &spec_, &plan_, {{"params", &model_->params()}, {"adam_m", &adam_m_}, {"adam_v", &adam_v_}}};
}

void Trainer::SaveCheckpoint(const std::string& dir) { runtime::SaveCheckpoint(Checkpointed(), dir, step_); }

void Trainer::LoadCheckpoint(const std::string& dir) {
  step_ = runtime::LoadCheckpoint(Checkpointed(), dir);
  data_parallel_->ReleaseGathered();  // the checkpoint wrote the whole buffer
}

double RelativeParamDistance(Trainer& trainer, Trainer& reference) {
  StageModel& m = trainer.model();
  StageModel& r = reference.model();
  std::map<std::string, const ParamTensor*> full;
  for (const ParamTensor& pt : r.tensors()) full[pt.name] = &pt;
  const int64_t tensor_rank = trainer.comms().Coordinate("tensor");
  double sums[2] = {0, 0};
  // Each global element once: from the rank whose optimizer updates it (the others may hold
  // stale copies of sharded parameters).
  for (const DataParallel::Range& range : trainer.data_parallel().OptimizerRanges()) {
    if (!range.counted) continue;
    for (const ParamTensor& pt : m.tensors()) {
      if (pt.tensor_replicated && tensor_rank != 0) continue;
      const int64_t lo = std::max(pt.offset, range.begin), hi = std::min(pt.offset + pt.size(), range.end);
      const ParamTensor& ref = *full.at(pt.name);
      const int64_t width = pt.col1 - pt.col0;
      for (int64_t at = lo; at < hi; ++at) {
        const int64_t row = pt.row0 + (at - pt.offset) / width, col = pt.col0 + (at - pt.offset) % width;
        const double a = m.params()[static_cast<size_t>(at)];
        const double b = r.params()[static_cast<size_t>(ref.offset + row * ref.cols + col)];
        sums[0] += (a - b) * (a - b);
        sums[1] += b * b;
      }
    }
  }
  MPI_Comm world = trainer.comms().world();
  CheckMpi(MPI_Allreduce(MPI_IN_PLACE, sums, 2, MPI_DOUBLE, MPI_SUM, world), world, "parameter comparison");
  return std::sqrt(sums[0] / sums[1]);
}

}  // namespace shardsim::runtime
