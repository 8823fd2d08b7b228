// Training steps under a plan: the pipeline schedule's tasks (strategies::ScheduleStage, the
// same order the estimator plays) with activations and gradients sent point to point between
// stages; data parallelism, ZeRO-1/2/3 and FSDP by DataParallel (parameter gathers with
// prefetch, per micro-batch gradient reduce-scatters, the step's reduction and sharded AdamW
// state); global-norm clipping; AdamW. Each of the data x fsdp x expert replicas reads its own
// sequences of the same global batch.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/host_resources.h"
#include "runtime/adamw.h"
#include "runtime/comm.h"
#include "runtime/corpus.h"
#include "runtime/data_parallel.h"
#include "runtime/memory_account.h"
#include "runtime/stage_model.h"
#include "runtime/trace.h"
#include "strategies/step_program.h"

namespace shardsim::runtime {

struct CheckpointSubject;

struct TrainOptions {
  uint64_t seed = 1234;
  AdamWConfig adamw{.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f};
  float clip_norm = 1.0f;
  double timeout_s = 600;  // longest wait on one receive or collective before aborting the job
  ArchitectureConfig architecture;
  RankStatus* status = nullptr;  // where each op is posted as it starts (core/rank_status.h); null: nowhere
};

struct StepRecord {
  double loss = 0;         // mean next-token cross-entropy over the global batch, nats
  double grad_norm = 0;    // before clipping
  double step_time_s = 0;  // wall, this rank
  // Seconds per category, summed from the step's op spans (the trace's categories): "compute"
  // (kernels), "tensor" (tensor/sequence-parallel collectives), "context" (ring attention waits
  // not hidden under its blocks), "expert" (all-to-all dispatch and combine with their
  // reordering), "pipeline" (waits for stage inputs and sends), "data" (gradient reduction,
  // parameter gathers), "optimizer", and "other" (the rest of the step's wall time).
  std::map<std::string, double> category_s;
};

// One rank's peak bytes per category over the steps run so far (memory_account.h says what each
// category counts).
struct RankMemory {
  int rank = 0;
  int64_t stage = 0;  // pipeline coordinate
  std::array<int64_t, kMemoryCategories> peak{};  // by MemoryCategory
  int64_t peak_total = 0;  // the largest sum of the categories at one moment
  // The process's resident set before the trainer was built and its peak over the steps (from
  // the trainer's end of construction, its parameters drawn and sharded): the operating system's
  // view, a cross-check of the accounting (the difference also holds MPI's and the allocator's
  // own memory). -1 where /proc cannot tell.
  int64_t resident_base = -1, resident_peak = -1;
  RoutedRows routed_at_activation_peak;  // MoE: the routed rows held when the activations peaked
};

class Trainer {
 public:
  // Throws InputError for what the runtime does not support (CheckRuntimeSupports) and plans
  // that ValidatePlan rejects.
  Trainer(const ModelSpec& model, const PlanSpec& plan, const TrainOptions& options, MPI_Comm world, const Corpus& corpus);
  ~Trainer();
  StepRecord Step();
  int64_t steps_done() const { return step_; }
  StageModel& model() { return *model_; }
  // Writes this job's state after steps_done() steps into `dir` (runtime/checkpoint.h): each
  // rank's parameters and AdamW moments into a new step folder, then rank 0 switches
  // `checkpoint.json` to it once every rank's file is durably in place, so a checkpoint is
  // complete or absent. Throws the same InputError on every rank when a rank cannot write (the
  // previous checkpoint is kept). Collective.
  void SaveCheckpoint(const std::string& dir);
  // Restores the state SaveCheckpoint wrote; training then continues exactly as if it had not
  // stopped. Throws the same InputError on every rank, naming the rank, the file and what differs,
  // when `dir` holds no checkpoint, a damaged one, or one of another model, plan or world size;
  // nothing is changed then. Collective.
  void LoadCheckpoint(const std::string& dir);
  // Records every op of the following steps (trace.h) when `enabled`.
  void EnableTrace(bool enabled) { tracer_.set_enabled(enabled); }
  // The Chrome trace of every rank's recorded ops, on rank 0 (empty elsewhere). Collective.
  std::string GatherTrace();
  // This rank's recorded ops.
  const std::vector<TraceEvent>& trace_events() const { return tracer_.events(); }
  MeshComms& comms() { return comms_; }
  const strategies::StepProgram& program() const { return program_; }
  const DataParallel& data_parallel() const { return *data_parallel_; }
  // This rank's memory account.
  const MemoryAccount& memory() const { return memory_; }
  // Every rank's peaks, in rank order, on rank 0 (empty elsewhere). Collective.
  std::vector<RankMemory> GatherMemory();
  // The routing's load on the expert ranks over the steps after this run's first (warm-up): per
  // MoE forward pass, the most rows any rank of the expert group received over their mean (rows
  // as this rank's tensor shard routes them, before any gather over tensor), then the mean over
  // passes and groups; -1 where nothing was measured (no expert parallelism, a single step). The
  // step program costs balanced routing (1), so `shardsim validate` predicts at this load.
  // Collective.
  double ExpertLoadImbalance();

 private:
  // First member: the resident set before anything of the trainer exists (RankMemory).
  int64_t resident_base_ = ProcessResidentBytes();
  void Optimize(StepRecord& record);
  // What the checkpoint code saves and restores (runtime/checkpoint.h).
  CheckpointSubject Checkpointed();
  ModelSpec spec_;
  PlanSpec plan_;
  strategies::StepProgram program_;  // what every rank executes
  TrainOptions options_;
  MeshComms comms_;
  const Corpus& corpus_;
  MemoryAccount memory_;  // outlives the holds of everything below
  std::unique_ptr<StageModel> model_;
  std::unique_ptr<DataParallel> data_parallel_;
  std::vector<float> adam_m_, adam_v_;  // over this rank's optimizer ranges (DataParallel)
  MemoryHold adam_hold_;
  Tracer tracer_;
  int64_t step_ = 0;
  int64_t steps_run_ = 0;  // by this process (a resumed run counts from its first step here)
  // After each step but the first: folds the step's expert loads into expert_load_ (sum of the
  // per-pass ratios, passes). Collective over the expert group.
  void FoldExpertLoad();
  std::array<double, 2> expert_load_{};
};

// Relative distance between this job's parameters and a single-rank reference trainer's:
// sqrt(sum (p - p_ref)^2 / sum p_ref^2) over every global parameter element, each counted once.
// Collective over `trainer`'s world.
double RelativeParamDistance(Trainer& trainer, Trainer& reference);

}  // namespace shardsim::runtime
