#include "runtime/train_command.h"

#include <mpi.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/stats.h"
#include "core/units.h"
#include "core/output_file.h"
#include "core/inputs.h"
#include "core/plan_json.h"
#include "core/train_lines.h"
#include "core/train_settings.h"
#include "runtime/checkpoint.h"
#include "runtime/gemm.h"
#include "runtime/heap_policy.h"
#include "runtime/train_gpu.h"
#include "runtime/trainer.h"

namespace shardsim::runtime {

using nlohmann::json;

namespace {

std::string FormatNumber(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.6g", value);
  return text;
}

}  // namespace

CLI::App* AddTrainCommand(CLI::App& app, TrainCommandOptions& a) {
  CLI::App* train = app.add_subcommand("train", "train --steps steps with the plan; one MPI rank per device of its mesh");
  train->add_option("--model", a.model, "preset name or model JSON (default tiny-dense)");
  train->add_option("--plan", a.plan, "plan JSON (docs/cli.md); or give the plan by --set alone");
  train->add_option("--set", a.set, "override a plan field: key=value");
  train->add_option("--steps", a.steps, "training steps (default 10)");
  // Whole numbers only, in range: CLI11 alone clamps 2^64 to 2^63-1 silently.
  train->add_option("--seed", a.seed, "initialisation seed, 0 to 2^63-1 (default 1234)")
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            try {
              ParseInteger(text, "--seed", 0, std::numeric_limits<int64_t>::max());
              return "";
            } catch (const InputError& e) {
              return e.problem() + "; valid: " + e.valid();
            }
          },
          "0 to 2^63-1"));
  train->add_option("--lr", a.lr, "AdamW learning rate, in (0, 1] (default 1e-3)");
  train->add_option("--corpus", a.corpus, "a text file instead of the shipped corpus (the repository's documentation)");
  // CLI::PositiveNumber lets nan and inf through, and either would turn the timeout off.
  const CLI::Validator finite_positive(
      [](std::string& text) -> std::string {
        char* end = nullptr;
        const double value = std::strtod(text.c_str(), &end);
        if (text.empty() || *end != '\0' || !std::isfinite(value) || value <= 0) return "'" + text + "' is not a finite number of seconds > 0";
        return "";
      },
      "SECONDS > 0");
  train->add_option("--timeout", a.timeout_s, "seconds one receive or collective may wait before the job aborts (default 600)")
      ->check(finite_positive);
  train->add_option("--trace", a.trace, "write a Chrome trace (Perfetto) of every rank's ops, keyed stage/layer/op/microbatch");
  train->add_option("--checkpoint", a.checkpoint,
                    "write a sharded checkpoint into this folder after the last step (each save in a new step folder, switched to "
                    "only once every rank's file is complete)");
  train->add_option("--checkpoint-every", a.checkpoint_every, "... and every N steps")->check(CLI::NonNegativeNumber);
  train->add_option("--resume", a.resume, "continue from the checkpoint in this folder (same model, plan and ranks; checksums verified)");
  train->add_option("--device", a.device, "cpu (default) or cuda: one rank's compute on its GPU (docs/gpu.md)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  train->add_flag("--json", a.json, "print the JSON report");
  train->add_flag("--progress", a.progress, "with --json: print the per-step lines on stderr");
  return train;
}

void PrintStepLine(const TrainCommandOptions& a, int64_t step, double loss, double grad_norm, double seconds) {
  if (a.json && !a.progress) return;
  FILE* lines = a.json ? stderr : stdout;  // with --json stdout carries only the JSON report
  std::fprintf(lines, "%s\n", TrainStepLine(step, loss, grad_norm, seconds).c_str());
  std::fflush(lines);
}

double MedianStepTime(const std::vector<double>& times) {
  return Median(std::vector<double>(times.size() > 1 ? times.begin() + 1 : times.begin(), times.end()));
}

json TrainReportJson(const std::vector<double>& losses, const std::vector<double>& grad_norms, const std::vector<double>& times, int64_t first_step, int64_t ranks,
                     const ModelSpec& model, const PlanSpec& plan, int64_t corpus_bytes, const std::string& precision) {
  const double median = MedianStepTime(times);
  // Model FLOPs: 6 N per token plus causal attention (blockwise: the masked half is skipped).
  const double model_flops = ForwardFlopsPerToken(model, plan.seq_len).causal_training() * static_cast<double>(plan.global_batch_size * plan.seq_len);
  return json{{"losses", losses},
              {"grad_norms", grad_norms},
              {"step_time_s", median},
              {"step_times_s", times},
              {"first_step", first_step},
              {"ranks", ranks},
              {"model", model.name},
              {"plan", PlanToJson(plan)},
              {"tokens_per_step", plan.global_batch_size * plan.seq_len},
              {"model_flops_per_step", model_flops},
              {"model_flop_per_s", model_flops / median},
              {"corpus_bytes", corpus_bytes},
              {"precision", precision}};
}

int RunTrainCommand(const TrainCommandOptions& a) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (a.plan.empty() && a.set.empty()) throw InputError("train", "needs a plan", "--plan FILE and/or --set key=value", "see docs/cli.md");
  CheckLearningRate(a.lr, "--lr");
  // The runtime trains in fp32: a rate that rounds to 0 there would train nothing.
  if (static_cast<float>(a.lr) <= 0) {
    throw InputError("--lr", FormatNumber(a.lr) + " rounds to 0 in fp32", "a finite number in (0, 1] that fp32 holds (from about 1.4e-45)");
  }
  CheckSeed(a.seed, "--seed");
  const ModelSpec model = LoadModel(a.model);
  const PlanSpec plan = LoadPlan(a.plan, a.set);
  if (a.steps < 1) throw InputError("--steps", std::to_string(a.steps), "1 or more");
  std::string text(ShippedCorpus());
  if (!a.corpus.empty()) {
    std::error_code ec;
    if (std::filesystem::is_directory(a.corpus, ec)) throw InputError("--corpus " + a.corpus, "is a directory", "a text file", "name a file inside it");
    std::ifstream in(a.corpus, std::ios::binary);
    if (!in) throw InputError("--corpus " + a.corpus, "cannot be read", "a text file", "check the path");
    std::ostringstream all;
    all << in.rdbuf();
    text = all.str();
  }
  const Corpus corpus(text, plan.seq_len);
  if (a.device == "cuda") return RunTrainOnGpu(a, model, plan, corpus);
  if (!a.trace.empty()) {
    // Rank 0 writes the trace after training: find out now, on every rank, that it can.
    // (CheckOutputWritable creates nothing: a refused run leaves no empty file behind.)
    std::string problem;
    if (rank == 0) {
      try {
        CheckOutputWritable(a.trace, "--trace");
      } catch (const InputError& e) {
        problem = e.what();
      }
    }
    int writable = problem.empty() ? 1 : 0;
    MPI_Allreduce(MPI_IN_PLACE, &writable, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!writable) throw InputError("--trace " + a.trace, "cannot be written", "a writable file path", "check that the folder exists and is writable");
  }
  UseCachingHeap();
  TrainOptions options;
  options.seed = static_cast<uint64_t>(a.seed);
  options.adamw.lr = static_cast<float>(a.lr);
  options.timeout_s = a.timeout_s;
  options.status = a.status;
  Trainer trainer(model, plan, options, MPI_COMM_WORLD, corpus);
  // The checkpoint folders are checked now, on every rank, not after training.
  if (!a.resume.empty()) CheckResumeFolder(trainer.comms(), a.resume);
  if (!a.checkpoint.empty()) CheckCheckpointFolder(trainer.comms(), a.checkpoint);
  if (!a.resume.empty()) {
    if (a.status) a.status->SetPhase("loading the checkpoint " + a.resume);
    trainer.LoadCheckpoint(a.resume);
  }
  const int64_t first_step = trainer.steps_done();
  trainer.EnableTrace(!a.trace.empty());
  json steps = json::array();
  std::vector<double> losses, grad_norms, times;
  std::map<std::string, double> categories;
  for (int64_t s = 0; s < a.steps; ++s) {
    const StepRecord r = trainer.Step();
    losses.push_back(r.loss);
    grad_norms.push_back(r.grad_norm);
    times.push_back(r.step_time_s);
    // Per category: the mean over the steps MedianStepTime counts (after the first, when several).
    if (a.steps == 1 || s > 0) {
      for (const auto& [k, v] : r.category_s) categories[k] += v / static_cast<double>(a.steps == 1 ? 1 : a.steps - 1);
    }
    if (rank == 0) PrintStepLine(a, first_step + s, r.loss, r.grad_norm, r.step_time_s);
    const bool last = s + 1 == a.steps;
    if (!a.checkpoint.empty() && (last || (a.checkpoint_every > 0 && (s + 1) % a.checkpoint_every == 0))) {
      if (a.status) a.status->SetPhase("saving the checkpoint of step " + std::to_string(trainer.steps_done()));
      trainer.SaveCheckpoint(a.checkpoint);
    }
  }
  if (!a.trace.empty()) {
    const std::string trace = trainer.GatherTrace();
    // Rank 0 writes (an existing trace survives a failed write); every rank learns how it went,
    // so none is left waiting in the collective below.
    std::optional<InputError> failed;
    if (rank == 0) {
      try {
        WriteOutputFile(a.trace, trace + "\n", "--trace");
      } catch (const InputError& e) {
        failed = e;
      }
    }
    int written = failed ? 0 : 1;
    MPI_Allreduce(MPI_IN_PLACE, &written, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!written) throw failed ? *failed : InputError("--trace " + a.trace, "cannot be written");  // rank 0's is printed
  }
  const std::vector<RankMemory> memory = trainer.GatherMemory();  // collective
  const double expert_load = trainer.ExpertLoadImbalance();        // collective
  if (rank != 0) return 0;
  const double median = MedianStepTime(times);
  const double model_flops = ForwardFlopsPerToken(model, plan.seq_len).causal_training() * static_cast<double>(plan.global_batch_size * plan.seq_len);
  if (a.json) {
    int size = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    // Per rank, each category's peak bytes over the run (runtime/memory_account.h says what each
    // counts) and the peak of their sum.
    json memory_bytes = json::array();
    for (const RankMemory& m : memory) {
      json entry{{"rank", m.rank}, {"stage", m.stage}};
      for (int c = 0; c < kMemoryCategories; ++c) entry[std::string(MemoryCategoryName(static_cast<MemoryCategory>(c)))] = m.peak[static_cast<size_t>(c)];
      entry["peak_total"] = m.peak_total;
      // MoE (dropless routing): the routed rows the saved activations held at their peak, received
      // by this rank's experts and sent by its tokens (balanced routing receives what it sends).
      if (m.routed_at_activation_peak.sent > 0) {
        entry["expert_rows_at_activation_peak"] = {{"received", m.routed_at_activation_peak.received}, {"sent", m.routed_at_activation_peak.sent}};
      }
      // The process's resident set as the operating system sees it (a cross-check): before the
      // trainer was built, and its peak over the steps.
      if (m.resident_base >= 0) {
        entry["resident_base"] = m.resident_base;
        entry["resident_peak"] = m.resident_peak;
      }
      memory_bytes.push_back(entry);
    }
    json report = TrainReportJson(losses, grad_norms, times, first_step, size, model, plan, corpus.bytes(), "fp32 (the plan's dtype is for the estimate)");
    report["category_s"] = categories;
    report["memory_bytes"] = memory_bytes;
    report["blas"] = BlasConfig();
    if (expert_load >= 1) report["expert_load_imbalance"] = expert_load;
    std::cout << report.dump(2) << "\n";
  } else {
    std::printf("%s\n", CpuMedianLine(median, model_flops / median, BlasConfig()).c_str());
  }
  return 0;
}

}  // namespace shardsim::runtime
