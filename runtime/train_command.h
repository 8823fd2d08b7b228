// `shardsim-runtime train`: trains a small LLaMA-style model with a plan on MPI ranks (one per
// device of the plan's mesh), reporting per-step loss and measured times. The program's entry
// (validation/main.cc) registers this subcommand beside `ring-attention`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/model_spec.h"
#include "core/plan_spec.h"
#include "core/rank_status.h"

namespace CLI {
class App;
}

namespace shardsim::runtime {

// The subcommand's flags (AddTrainCommand names each with its default).
struct TrainCommandOptions {
  std::string model = "tiny-dense";  // preset name or model JSON
  std::string plan;                  // plan JSON (required)
  std::vector<std::string> set;      // plan overrides, key=value
  std::string corpus;                // a text file instead of the shipped corpus
  std::string checkpoint, resume, trace;
  int64_t checkpoint_every = 0;  // 0: only after the last step
  int64_t steps = 10;
  int64_t seed = 1234;  // 0 to 2^63-1 (a negative one is refused, never wrapped)
  double lr = 1e-3;     // in (0, 1]; read as double so that 1e300 is refused, not rounded to inf
  double timeout_s = 600;  // one receive or collective, before the job aborts
  std::string device = "cpu";  // "cuda": one rank on the GPU (runtime/train_gpu.h)
  bool json = false;
  bool progress = false;  // with json: the per-step lines on stderr (rank 0), so a terminal sees the run move
  RankStatus* status = nullptr;  // what this rank is doing, for its launcher (not a flag; main's)
};

// One step's line as the flags ask (rank 0): on stdout, on stderr with --json --progress, else none.
void PrintStepLine(const TrainCommandOptions& a, int64_t step, double loss, double grad_norm, double seconds);

// The median step time: over the steps after the first (warm-up: first touches of the buffers,
// cold caches) when there are several.
double MedianStepTime(const std::vector<double>& times);

// The report's keys both devices share: losses, grad_norms, step_time_s (MedianStepTime), step_times_s,
// first_step, ranks, model, plan, tokens_per_step, model_flops_per_step (causal attention at half),
// model_flop_per_s, corpus_bytes and precision.
nlohmann::json TrainReportJson(const std::vector<double>& losses, const std::vector<double>& grad_norms, const std::vector<double>& times, int64_t first_step, int64_t ranks,
                               const ModelSpec& model, const PlanSpec& plan, int64_t corpus_bytes, const std::string& precision);

// Adds the `train` subcommand to `app`, its flags bound to `options`; returns the subcommand.
CLI::App* AddTrainCommand(CLI::App& app, TrainCommandOptions& options);

// Trains on MPI_COMM_WORLD (collective: every rank calls it with the same options) and prints the
// report on rank 0 (JSON with options.json, else a line per step and the median; with
// options.json and options.progress the step lines go to stderr). Returns the exit
// code, 0. Throws InputError (the same on every rank) for unreadable or invalid model, plan,
// corpus or trace paths, --lr and --seed out of range, a --checkpoint folder a rank cannot write
// or a --resume folder without a checkpoint (all before the first step), a checkpoint that
// cannot be resumed, and a save that failed on any rank (the previous checkpoint is kept).
int RunTrainCommand(const TrainCommandOptions& options);

}  // namespace shardsim::runtime
