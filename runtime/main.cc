// shardsim-runtime: trains a small LLaMA-style model with a plan on MPI ranks (one per device of
// the plan's mesh), reporting per-step loss and measured times. Launched by `shardsim run`, or
// by hand: mpiexec -n 4 shardsim-runtime train --model tiny-dense --plan p.json --steps 10
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/inputs.h"
#include "core/plan_json.h"
#include "runtime/gemm.h"
#include "runtime/ring_attention_bench.h"
#include "runtime/trainer.h"

namespace {

using nlohmann::json;
using shardsim::FlopsPerToken;
using shardsim::InputError;
using shardsim::LoadModel;
using shardsim::LoadPlan;
using shardsim::ModelSpec;
using shardsim::PlanSpec;
using shardsim::PlanToJson;
namespace runtime = shardsim::runtime;

struct TrainArgs {
  std::string model = "tiny-dense", plan, corpus, checkpoint, resume, trace;
  int64_t checkpoint_every = 0;
  std::vector<std::string> set;
  int64_t steps = 10;
  uint64_t seed = 1234;
  float lr = 1e-3f;
  double timeout_s = 600;
  bool json = false;
};

int Train(const TrainArgs& a, int rank) {
  const ModelSpec model = LoadModel(a.model);
  const PlanSpec plan = LoadPlan(a.plan, a.set);
  if (a.steps < 1) throw InputError("--steps", std::to_string(a.steps), "1 or more");
  std::string text(runtime::ShippedCorpus());
  if (!a.corpus.empty()) {
    std::ifstream in(a.corpus, std::ios::binary);
    if (!in) throw InputError("--corpus " + a.corpus, "cannot be read", "a text file", "check the path");
    std::ostringstream all;
    all << in.rdbuf();
    text = all.str();
  }
  const runtime::Corpus corpus(text, plan.seq_len);
  runtime::TrainOptions options;
  options.seed = a.seed;
  options.adamw.lr = a.lr;
  options.timeout_s = a.timeout_s;
  runtime::Trainer trainer(model, plan, options, MPI_COMM_WORLD, corpus);
  if (!a.resume.empty()) trainer.LoadCheckpoint(a.resume);
  const int64_t first_step = trainer.steps_done();
  trainer.EnableTrace(!a.trace.empty());
  json steps = json::array();
  std::vector<double> losses, times;
  std::map<std::string, double> categories;
  for (int64_t s = 0; s < a.steps; ++s) {
    const runtime::StepRecord r = trainer.Step();
    losses.push_back(r.loss);
    times.push_back(r.step_time_s);
    for (const auto& [k, v] : r.category_s) categories[k] += v / static_cast<double>(a.steps);
    if (rank == 0 && !a.json) {
      std::printf("step %3ld  loss %.6f  grad norm %.4f  %.1f ms\n", static_cast<long>(first_step + s), r.loss, r.grad_norm, 1e3 * r.step_time_s);
    }
    const bool last = s + 1 == a.steps;
    if (!a.checkpoint.empty() && (last || (a.checkpoint_every > 0 && (s + 1) % a.checkpoint_every == 0))) trainer.SaveCheckpoint(a.checkpoint);
  }
  if (!a.trace.empty()) {
    const std::string trace = trainer.GatherTrace();
    if (rank == 0) {
      std::ofstream out(a.trace);
      out << trace << "\n";
      if (!out) throw InputError("--trace " + a.trace, "cannot be written", "a writable file path");
    }
  }
  if (rank != 0) return 0;
  std::vector<double> sorted = times;
  std::sort(sorted.begin(), sorted.end());
  const double median = sorted[sorted.size() / 2];
  // Model FLOPs: 6 N per token plus causal attention (blockwise: the masked half is skipped).
  const FlopsPerToken f = ForwardFlopsPerToken(model, plan.seq_len);
  const double model_flops = 3 * (f.matmul + f.attention / 2) * static_cast<double>(plan.global_batch_size * plan.seq_len);
  if (a.json) {
    int size = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    std::cout << json{{"losses", losses},
                      {"step_time_s", median},
                      {"step_times_s", times},
                      {"first_step", first_step},
                      {"category_s", categories},
                      {"ranks", size},
                      {"model", model.name},
                      {"plan", PlanToJson(plan)},
                      {"tokens_per_step", plan.global_batch_size * plan.seq_len},
                      {"model_flops_per_step", model_flops},
                      {"model_flop_per_s", model_flops / median},
                      {"corpus_bytes", corpus.bytes()},
                      {"precision", "fp32 (the plan's dtype is for the estimate)"},
                      {"blas", runtime::BlasConfig()}}
                     .dump(2)
              << "\n";
  } else {
    std::printf("median step %.1f ms (rank 0): %.2f GFLOP/s of model FLOPs over all ranks; %s\n", 1e3 * median, model_flops / median / 1e9,
                runtime::BlasConfig().c_str());
  }
  return 0;
}

}  // namespace

#ifdef SHARDSIM_SANITIZE
// OpenMPI keeps allocations until exit by design: LeakSanitizer would fail every run.
extern "C" const char* __asan_default_options() { return "detect_leaks=0"; }
#endif

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  runtime::UseOneBlasThread();
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  CLI::App app{"shardsim-runtime: train a small transformer with a plan on MPI ranks"};
  app.require_subcommand(1);
  TrainArgs a;
  CLI::App* train = app.add_subcommand("train", "train --steps steps with the plan; one MPI rank per device of its mesh");
  train->add_option("--model", a.model, "preset name or model JSON (default tiny-dense)");
  train->add_option("--plan", a.plan, "plan JSON (docs/cli.md)")->required();
  train->add_option("--set", a.set, "override a plan field: key=value");
  train->add_option("--steps", a.steps, "training steps (default 10)");
  train->add_option("--seed", a.seed, "initialisation seed (default 1234)");
  train->add_option("--lr", a.lr, "AdamW learning rate (default 1e-3)");
  train->add_option("--corpus", a.corpus, "a text file instead of the shipped corpus (the repository's documentation)");
  train->add_option("--timeout", a.timeout_s, "seconds one receive or collective may wait before the job aborts (default 600)")
      ->check(CLI::PositiveNumber);
  train->add_option("--trace", a.trace, "write a Chrome trace (Perfetto) of every rank's ops, keyed stage/layer/op/microbatch");
  train->add_option("--checkpoint", a.checkpoint, "write a sharded checkpoint into this folder after the last step");
  train->add_option("--checkpoint-every", a.checkpoint_every, "... and every N steps")->check(CLI::NonNegativeNumber);
  train->add_option("--resume", a.resume, "continue from the checkpoint in this folder (same model and plan)");
  train->add_flag("--json", a.json, "print the JSON report");
  runtime::RingAttentionBenchOptions ring;
  CLI::App* ring_cmd = app.add_subcommand("ring-attention", "ring attention alone over every rank (the context axis): timed, checked, predicted");
  ring_cmd->add_option("--seq", ring.seq_len, "sequence length S (default 4096)");
  ring_cmd->add_option("--heads", ring.heads, "query heads H (default 8)");
  ring_cmd->add_option("--kv-heads", ring.kv_heads, "key/value heads G (default: H)");
  ring_cmd->add_option("--head-dim", ring.head_dim, "head dimension K (default 64)");
  ring_cmd->add_option("--batch", ring.batch, "sequences B (default 1)");
  ring_cmd->add_option("--layout", ring.layout, "zigzag (default), striped or contiguous");
  ring_cmd->add_option("--repeats", ring.repeats, "timed passes of each kind (compute alone, transfers alone, both), medians reported (default 3)");
  ring_cmd->add_option("--sweep", ring.sweep_block_tokens,
                       "block sizes (tokens per rank, S/c) to measure in turn instead of --seq, e.g. 16,64,256,1024: reports the crossover block size")
      ->delimiter(',');
  ring_cmd->add_flag("--causal", ring.causal, "causal masking");
  ring_cmd->add_flag("--check", ring.check, "compare output and gradients with full attention (O(S^2) per rank)");
  ring_cmd->add_flag("--json", ring.json, "print the JSON report");
  int code = 0;
  try {
    app.parse(argc, argv);
    if (ring_cmd->parsed()) {
      if (ring_cmd->count("--kv-heads") == 0) ring.kv_heads = ring.heads;
      code = runtime::RunRingAttentionBench(ring);
    } else {
      code = Train(a, rank);
    }
  } catch (const CLI::ParseError& e) {
    code = rank == 0 ? app.exit(e) : (e.get_exit_code() == 0 ? 0 : 2);
    if (code != 0) code = 2;
  } catch (const InputError& e) {
    if (rank == 0) std::fprintf(stderr, "shardsim-runtime: error: %s\n", e.what());
    code = 2;
  }
  MPI_Finalize();
  return code;
}
