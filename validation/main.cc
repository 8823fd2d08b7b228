// shardsim-runtime: the MPI program. `train` trains a small model with a plan (runtime/
// train_command.h); `ring-attention` measures ring attention and sets it beside the step
// program's prediction (validation/ring_attention_bench.h). Launched by `shardsim run`, or by
// hand: mpiexec -n 4 shardsim-runtime train --model tiny-dense --plan p.json --steps 10;
// `calibrate` measures the machines the job runs on (validation/calibrate.h), launched by
// `shardsim calibrate`.
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>

#include "core/error.h"
#include "core/rank_status.h"
#include "runtime/gemm.h"
#include "runtime/heap_policy.h"
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

// A failure only this rank sees (it cannot allocate, a system call fails): the other ranks may
// be waiting on it, so the whole job is stopped now, this rank and what it was doing named.
[[noreturn]] void AbortJob(int rank, const shardsim::RankStatus& status, const std::string& what) {
  const std::string doing = status.Text();
  std::fprintf(stderr, "shardsim-runtime: error: rank %d: %s%s\n", rank, what.c_str(), doing.empty() ? "" : (" (during " + doing + ")").c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 3);
  std::_Exit(3);
}

}  // namespace

int main(int argc, char** argv) {
  runtime::UseCachingHeap();  // every command, MPI's own buffers too: calibrate measures under training's allocator
  MPI_Init(&argc, &argv);
  runtime::UseOneBlasThread();
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const char* status_folder = std::getenv(shardsim::kRankStatusFolderVariable);
  shardsim::RankStatus status(status_folder ? status_folder : "", rank);
  status.SetPhase("start-up");
  CLI::App app{"shardsim-runtime: train a small transformer with a plan on MPI ranks"};
  app.require_subcommand(1);
  runtime::TrainCommandOptions train;
  runtime::AddTrainCommand(app, train);
  train.status = &status;
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
  } catch (const CLI::CallForHelp&) {
    if (rank == 0) std::printf("%s", app.help().c_str());
  } catch (const CLI::CallForAllHelp&) {
    if (rank == 0) std::printf("%s", app.help("", CLI::AppFormatMode::All).c_str());
  } catch (const CLI::ParseError& e) {
    // Every rank parses the same arguments: rank 0 speaks for all, in shardsim's one-line form.
    if (rank == 0) std::fprintf(stderr, "shardsim-runtime: error: %s (run 'shardsim-runtime train --help')\n", e.what());
    code = 2;
  } catch (const shardsim::InputError& e) {
    // The runtime raises InputError only where every rank sees the same problem (the inputs, or a
    // failure the ranks have agreed on), so rank 0 speaks for all and every rank ends normally.
    if (rank == 0) std::fprintf(stderr, "shardsim-runtime: error: %s\n", e.what());
    code = 2;
  } catch (const std::bad_alloc&) {
    AbortJob(rank, status, "cannot allocate memory (the plan needs more than this machine has free; see shardsim estimate's memory per device)");
  } catch (const std::exception& e) {
    AbortJob(rank, status, e.what());
  }
  status.SetPhase(code == 0 ? "finished" : "ended with an error");
  MPI_Finalize();
  return code;
}
