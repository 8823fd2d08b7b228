// shardsim-runtime: the MPI program. `train` trains a small model with a plan (runtime/
// train_command.h); `ring-attention` measures ring attention and sets it beside the step
// program's prediction (validation/ring_attention_bench.h). Launched by `shardsim run`, or by
// hand: mpiexec -n 4 shardsim-runtime train --model tiny-dense --plan p.json --steps 10;
// `calibrate` measures the machines the job runs on (validation/calibrate.h), launched by
// `shardsim calibrate`.
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <cstdio>

#include "core/error.h"
#include "runtime/gemm.h"
#include "runtime/train_command.h"
#include "validation/calibrate.h"
#include "validation/ring_attention_bench.h"

#ifdef SHARDSIM_SANITIZE
// OpenMPI keeps allocations until exit by design: LeakSanitizer would fail every run.
extern "C" const char* __asan_default_options() { return "detect_leaks=0"; }
#endif

namespace {

namespace runtime = shardsim::runtime;
namespace validation = shardsim::validation;

// Adds the `ring-attention` subcommand to `app`, its flags bound to `ring`.
CLI::App* AddRingAttentionCommand(CLI::App& app, validation::RingAttentionBenchOptions& ring) {
  CLI::App* cmd = app.add_subcommand(
      "ring-attention",
      "ring attention alone over every rank (the context axis): timed, checked, predicted");
  cmd->add_option("--seq", ring.seq_len, "sequence length S (default 4096)");
  cmd->add_option("--heads", ring.heads, "query heads H (default 8)");
  cmd->add_option("--kv-heads", ring.kv_heads, "key/value heads G (default: H)");
  cmd->add_option("--head-dim", ring.head_dim, "head dimension K (default 64)");
  cmd->add_option("--batch", ring.batch, "sequences B (default 1)");
  cmd->add_option("--layout", ring.layout, "zigzag (default), striped or contiguous");
  cmd->add_option("--repeats", ring.repeats,
                  "timed passes of each kind (compute alone, transfers alone, both), medians "
                  "reported (default 3)");
  cmd->add_option("--sweep", ring.sweep_block_tokens,
                  "block sizes (tokens per rank, S/c) to measure in turn instead of --seq, e.g. "
                  "16,64,256,1024: reports the crossover block size")
      ->delimiter(',');
  cmd->add_flag("--causal", ring.causal, "causal masking");
  cmd->add_flag("--check", ring.check,
                "compare output and gradients with full attention (O(S^2) per rank)");
  cmd->add_flag("--json", ring.json, "print the JSON report");
  return cmd;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  runtime::UseOneBlasThread();
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  CLI::App app{"shardsim-runtime: train a small transformer with a plan on MPI ranks"};
  app.require_subcommand(1);
  runtime::TrainCommandOptions train;
  runtime::AddTrainCommand(app, train);
  validation::RingAttentionBenchOptions ring;
  CLI::App* ring_cmd = AddRingAttentionCommand(app, ring);
  validation::CalibrateOptions calibrate;
  CLI::App* calibrate_cmd = app.add_subcommand("calibrate", "measure the machines this job runs on and write a cluster JSON (one device per rank)");
  calibrate_cmd->add_option("--out", calibrate.out, "cluster JSON to write (default cluster.json)");
  calibrate_cmd->add_option("--hosts", calibrate.hosts, "hosts the ranks fill in order, equal ranks per host (default 1)");
  calibrate_cmd->add_option("--repeats", calibrate.repeats, "whole measurements; medians kept, spread reported (default 3)");
  calibrate_cmd->add_flag("--json", calibrate.json, "print the summary as JSON");
  int code = 0;
  try {
    app.parse(argc, argv);
    if (calibrate_cmd->parsed()) {
      code = validation::RunCalibrate(calibrate);
    } else if (ring_cmd->parsed()) {
      if (ring_cmd->count("--kv-heads") == 0) ring.kv_heads = ring.heads;
      code = validation::RunRingAttentionBench(ring);
    } else {
      code = runtime::RunTrainCommand(train);
    }
  } catch (const CLI::ParseError& e) {
    code = rank == 0 ? app.exit(e) : (e.get_exit_code() == 0 ? 0 : 2);
    if (code != 0) code = 2;
  } catch (const shardsim::InputError& e) {
    if (rank == 0) std::fprintf(stderr, "shardsim-runtime: error: %s\n", e.what());
    code = 2;
  }
  MPI_Finalize();
  return code;
}
