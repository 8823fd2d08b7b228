// The one place CLI11 is used: every subcommand's flags, bound to its plain options struct.
#include "cli/app.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <limits>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <iostream>

#include <CLI/CLI.hpp>

#include "cli/batch_flags.h"
#include "cli/commands.h"
#include "cli/memory_limit.h"
#include "cli/parse_errors.h"
#include "core/error.h"
#include "core/suggest.h"
#include "core/units.h"
#include "planner/frameworks.h"

#include <unistd.h>

namespace shardsim::cli {
namespace {

constexpr int kBadInput = 2;
constexpr int kInternalFailure = 1;

// A CLI11 check from one of our parsers: its InputError, less the flag (CLI11 puts that first).
CLI::Validator Parses(std::function<void(const std::string&)> parse, const std::string& description) {
  return CLI::Validator(
      [parse](std::string& text) -> std::string {
        try {
          parse(text);
          return "";
        } catch (const InputError& e) {
          return e.problem() + (e.valid().empty() ? "" : "; valid: " + e.valid()) + (e.hint().empty() ? "" : " (hint: " + e.hint() + ")");
        }
      },
      description);
}

// A finite number in (0, max]: CLI11's own ranges let nan through.
CLI::Validator PositiveUpTo(double max, const std::string& unit) {
  char bound[32];
  std::snprintf(bound, sizeof bound, "%g", max);
  const std::string valid = "greater than 0 and at most " + std::string(bound) + unit;
  return Parses(
      [max, valid](const std::string& text) {
        char* end = nullptr;
        const double value = std::strtod(text.c_str(), &end);
        if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(value) || value <= 0 || value > max) {
          throw InputError("", "'" + text + "' is out of range", valid);
        }
      },
      "(0, " + std::string(bound) + "]");
}

// An output named for another format than the one written (FILE.png for an SVG); a name
// without an extension (/dev/stdout) is taken as it is.
CLI::Validator NamedAs(const std::string& extension) {
  return Parses(
      [extension](const std::string& text) {
        std::string given = std::filesystem::path(text).extension().string();
        std::transform(given.begin(), given.end(), given.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
        if (!given.empty() && given != extension) {
          throw InputError("", "'" + text + "' is named " + given + " but is written as " + extension.substr(1), "a path ending in " + extension,
                           "name it FILE" + extension);
        }
      },
      "FILE" + extension);
}

CLI::Validator TokensPerStep() {
  return Parses([](const std::string& text) { ParseTokensPerStep(text, ""); }, "TOKENS");
}
CLI::Validator TokenBudget() {
  return Parses([](const std::string& text) { ParseTokenCount(text, ""); }, "TOKENS");
}

// An option given an empty value ("--from-runs ''", a shell variable left unset) names nothing:
// refused for every option of the parsed subcommands, before any of them is acted on, rather
// than read as the option left out.
void RefuseEmptyValues(const CLI::App& app) {
  for (const CLI::App* sub : app.get_subcommands()) {
    for (const CLI::Option* opt : sub->get_options()) {
      if (opt->count() == 0 || opt->get_expected_min() == 0) continue;  // not given, or a flag
      for (const std::string& value : opt->results()) {
        if (value.empty()) {
          throw InputError(opt->get_name(), "is given an empty value", "a non-empty value",
                           "leave the option out for its default");
        }
      }
    }
  }
}

// --max-seconds and --max-host-memory, the SimGrid simulations' limits (cli/sim_limits.h); `when`
// says which of the command's runs they bound ("" for all), and `needs` the flag they need (or null).
void AddSimLimitFlags(CLI::App* sub, double& seconds, std::string& memory, const std::string& when, CLI::Option* needs = nullptr) {
  CLI::Option* a = sub->add_option("--max-seconds", seconds, when + "wall-time limit of the simulation in seconds (default 600)")->check(PositiveUpTo(86400, " s"));
  CLI::Option* b = sub->add_option("--max-host-memory", memory, when + "memory limit of the simulation: a fraction of MemAvailable (0.5, the default) or a size (8GiB)");
  if (needs != nullptr) a->needs(needs), b->needs(needs);
}

// --max-memory: a fraction of HBM in (0, 1] ("0.85") or a size ("70GiB", ParseByteSize).
// --train-tokens and --price-per-device-hour (estimate and plan): the whole run (core/run_cost.h).
// Returns --train-tokens's option.
CLI::Option* AddTrainingRunFlags(CLI::App* sub, std::string& tokens, double& price) {
  CLI::Option* tokens_opt =
      sub->add_option("--train-tokens", tokens, "the whole run: time and device-hours to train on this many tokens, e.g. 15T (x1000^4), 2.5T, 300B")
          ->check(TokenBudget());
  sub->add_option("--price-per-device-hour", price, "with --train-tokens: the run's cost at this price (in its currency)")
      ->check(PositiveUpTo(1e9, ""))
      ->needs(tokens_opt);
  return tokens_opt;
}

// --global-batch-tokens and --seq-len, for the subcommands that read a plan (cli/batch_flags.h).
void AddBatchFlags(CLI::App* sub, BatchFlags& flags) {
  sub->add_option("--global-batch-tokens", flags.global_batch_tokens,
                  "tokens per step, e.g. 4M (x1024^2) or 4MB (x1000^2): sets the plan's global_batch_size to this over the sequence length")
      ->check(TokensPerStep());
  sub->add_option("--seq-len", flags.seq_len, "tokens per sequence: sets the plan's seq_len (these two win over --plan's; an --set of the same field must agree)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
}

void AddInputs(CLI::App* sub, Inputs& flags, bool with_cluster, bool with_plan) {
  sub->add_option("--model", flags.model, "model: a preset (shardsim presets), a shardsim model JSON, or a Hugging Face config.json");
  if (with_cluster) sub->add_option("--cluster", flags.cluster, "cluster: SYSTEM:SIZE[,key=value] (shardsim presets), a cluster JSON, or FILE.json:SIZE (that file at another size)");
  if (with_plan) {
    sub->add_option("--plan", flags.plan, "plan JSON file (docs/cli.md: Plan JSON; examples/*.plan.json)");
    sub->add_option("--set", flags.overrides, "override one plan field, e.g. --set mesh.tensor=8 (repeatable)");
  }
  sub->add_flag("--json", flags.json, "print one JSON object on stdout");
}

}  // namespace

int Run(int argc, char** argv) {
  CLI::App app{"shardsim: plan, simulate and validate the sharding of transformer training on TPU pods and GPU clusters"};
  app.set_version_flag("--version", std::string("shardsim ") + SHARDSIM_VERSION);
  app.require_subcommand(1);

  PresetsOptions presets;
  CLI::App* presets_cmd = app.add_subcommand("presets", "list the model and cluster presets, pipeline schedules and recomputation modes");
  presets_cmd->add_flag("--json", presets.json, "print one JSON object on stdout");

  DescribeOptions describe;
  CLI::App* describe_cmd = app.add_subcommand(
      "describe", "parameters and FLOPs of a model, devices, peaks, memory and links of a cluster, and whether a plan fits them");
  AddInputs(describe_cmd, describe, true, true);
  describe_cmd->add_option("--seq-len", describe.seq_len, "sequence length for FLOPs per token (default: the plan's, else the model's max_seq_len)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
  describe_cmd->add_option("--mesh", describe.mesh, "mesh axes, e.g. data=8,tensor=8: show which links each axis uses (a plan's mesh is shown too)");
  describe_cmd->add_option("--write-model", describe.write_model, "write the model as shardsim model JSON to this file");
  describe_cmd->add_option("--write-cluster", describe.write_cluster, "write the cluster as cluster JSON to this file");
  describe_cmd->add_option("--write-plan", describe.write_plan, "write the plan (after --set) as plan JSON to this file");

  CollectiveOptions collective;
  CLI::App* collective_cmd = app.add_subcommand("collective", "time a collective over a group of devices, swept over sizes, like nccl-tests");
  collective_cmd->add_option("--cluster", collective.cluster, "cluster: SYSTEM:SIZE[,key=value], a cluster JSON, or FILE.json:SIZE");
  collective_cmd->add_option("--op", collective.op, "all-gather, reduce-scatter, all-reduce, all-to-all, broadcast or permute");
  collective_cmd->add_option("--bytes", collective.bytes, "sizes, e.g. 8,1M,1G (K, M, G, T: x1024; KB, MB, GB: x1000)");
  collective_cmd->add_option("--devices", collective.devices, "the group: the first N devices in the cluster's device order")
      ->check(CLI::Range(int64_t{2}, int64_t{1} << 24));
  collective_cmd->add_option("--mesh", collective.mesh, "the group(s): a mesh over all devices, e.g. data=8,tensor=8 ...");
  collective_cmd->add_option("--axes", collective.axes, "... and the axes each group runs along, e.g. tensor or data,fsdp");
  collective_cmd->add_option("--algorithm", collective.algorithm, "auto (default: the fastest of those but hierarchical), ring, bidirectional-ring, torus, hierarchical, tree, nvls, sharp, direct");
  collective_cmd->add_option("--engine", collective.engine, "analytic (default) or des (SimGrid, every group at once)");
  collective_cmd->add_option("--max-seconds", collective.max_seconds, "--engine des: wall-time limit of the simulation in seconds (default 600)")
      ->check(PositiveUpTo(86400, " s"));
  collective_cmd->add_option("--max-host-memory", collective.max_host_memory,
                             "--engine des: memory limit of the simulation: a fraction of MemAvailable (0.5, the default) or a size (8GiB)");
  collective_cmd->add_flag("--json", collective.json, "print one JSON object on stdout");

  EstimateOptions estimate;
  BatchFlags estimate_batch;
  std::string estimate_train_tokens;
  CLI::App* estimate_cmd = app.add_subcommand("estimate", "analytic prediction of one training step: time, MFU, memory, breakdown");
  AddInputs(estimate_cmd, estimate, true, true);
  AddBatchFlags(estimate_cmd, estimate_batch);
  CLI::Option* dump_opt =
      estimate_cmd->add_flag("--dump-program", estimate.dump_program, "print the step program instead of the estimate (deterministic text; one JSON object with --json)");
  dump_opt->excludes(AddTrainingRunFlags(estimate_cmd, estimate_train_tokens, estimate.price_per_device_hour));

  PlanOptions plan;
  std::string batch_tokens;
  CLI::App* plan_cmd = app.add_subcommand("plan", "search the shardings of a model on a cluster, rank them and explain the best");
  std::string plan_train_tokens;
  AddInputs(plan_cmd, plan, true, true);
  plan_cmd->add_option("--global-batch-tokens", batch_tokens, "tokens per step, e.g. 4194304 or 4M (x1024^2) or 4MB (x1000^2) (default: the plan's)")
      ->check(TokensPerStep());
  plan_cmd->add_option("--seq-len", plan.seq_len, "tokens per sequence (default: the plan's)")->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
  plan_cmd->add_option("--top", plan.top, "plans to show (default 5)")->check(CLI::Range(int64_t{1}, int64_t{1000}));
  plan_cmd->add_option("--export", plan.exporter, "print the best plan for megatron, maxtext, torchtitan, deepspeed or jax");
  plan_cmd->add_option("--framework", plan.framework, "search only the plans this framework runs: megatron-core (or megatron), torchtitan, maxtext, deepspeed")
      ->check(Parses([](const std::string& name) { planner::ParseFramework(name, ""); }, "NAME"));
  plan_cmd->add_option("--max-memory", plan.max_memory, "memory a plan may use per device: a fraction of HBM (0.85) or a size (70GiB); default: 90% of HBM")
      ->check(Parses([](const std::string& text) { ParseMemoryLimit(text, 1, ""); }, "FRACTION|SIZE"));
  plan_cmd->add_flag("--wide", plan.wide, "print every column uncut (wider than 120 columns)");
  AddTrainingRunFlags(plan_cmd, plan_train_tokens, plan.price_per_device_hour);
  plan_cmd->add_option("--plot", plan.plot, "write the Pareto view (tokens/s against memory per device) as an SVG file")->check(NamedAs(".svg"));
  CLI::Option* refine_opt =
      plan_cmd->add_option("--refine", plan.refine, "simulate the top K plans on SimGrid, rank them by the simulation and say why the predictions differ")
          ->check(CLI::Range(int64_t{1}, int64_t{50}));
  AddSimLimitFlags(plan_cmd, plan.max_seconds, plan.max_host_memory, "--refine: ", refine_opt);
  plan_cmd->add_option("--threads", plan.threads, "search threads (default: all hardware threads)")->check(CLI::Range(0, 1024));

  SimulateOptions simulate;
  BatchFlags simulate_batch;
  CLI::App* simulate_cmd = app.add_subcommand("simulate", "discrete-event (SimGrid) prediction of one training step over the cluster's links");
  AddInputs(simulate_cmd, simulate, true, true);
  AddBatchFlags(simulate_cmd, simulate_batch);
  simulate_cmd->add_option("--trace", simulate.trace, "write a Chrome trace (Perfetto) of the simulated step");
  simulate_cmd->add_option("--report", simulate.report, "write a self-contained HTML page of the simulated step");
  simulate_cmd->add_flag("--no-fold", simulate.no_fold, "simulate every device (small clusters; folding is exact where links are not shared)");
  AddSimLimitFlags(simulate_cmd, simulate.max_seconds, simulate.max_host_memory, "");
  RunOptions run;
  BatchFlags run_batch;
  CLI::App* run_cmd = app.add_subcommand("run", "train with a plan for real: shardsim-runtime under mpirun, one rank per device of the mesh");
  AddInputs(run_cmd, run, false, true);
  AddBatchFlags(run_cmd, run_batch);
  run_cmd->add_option("--steps", run.steps, "training steps (default 10)");
  run_cmd->add_option("--device", run.device, "cpu (default) or cuda: one rank's compute on its GPU (docs/gpu.md)")->check(CLI::IsMember({"cpu", "cuda"}));
  run_cmd->add_option("--hostfile", run.hostfile, "spread the ranks over machines: an Open MPI hostfile, one 'HOST slots=N' per line (docs/multi_host.md)");
  run_cmd->add_option("--trace", run.trace, "write a Chrome trace of every rank's ops (stage/layer/op/microbatch keys)");
  // Parsed by ParseInteger first: CLI11 alone clamps 2^64 to 2^63-1 silently.
  run_cmd->add_option("--seed", run.seed, "initialisation seed, 0 to 2^63-1 (default 1234)")
      ->check(Parses([](const std::string& text) { ParseInteger(text, "--seed", 0, std::numeric_limits<int64_t>::max()); }, "0 to 2^63-1"));
  run_cmd->add_option("--lr", run.lr, "AdamW learning rate (default 1e-3)");
  run_cmd->add_option("--corpus", run.corpus, "train on this text file instead of the shipped corpus");
  CLI::Option* checkpoint_opt = run_cmd->add_option("--checkpoint", run.checkpoint, "write a sharded checkpoint into this folder after the last step");
  run_cmd->add_option("--checkpoint-every", run.checkpoint_every, "... and every N steps, each save replacing the last only once complete")
      ->check(Parses([](const std::string& text) { ParseInteger(text, "", 0, std::numeric_limits<int32_t>::max()); }, "0 or more"))
      ->needs(checkpoint_opt);
  run_cmd->add_option("--resume", run.resume, "continue from the checkpoint in this folder (same model and plan)");
  run_cmd->add_option("--plot", run.plot, "write the loss per step as an SVG, with the --compare runs overlaid")->check(NamedAs(".svg"));
  run_cmd->add_option("--compare", run.compare, "a report of an earlier run (shardsim run --json > FILE) to overlay on --plot; repeatable; without --model, plots these only");
  run_cmd->add_flag("--many-ranks", run.many_ranks, "allow more than 16 ranks per core of this machine");
  run_cmd->add_flag("--skip-memory-check", run.skip_memory_check, "launch even when the plan's memory exceeds what this machine has free");
  run_cmd->add_option("--timeout", run.timeout_s, "seconds one receive or collective may wait before the job aborts naming the rank and op (default 600)")
      ->check(PositiveUpTo(kMaxRunTimeoutS, " s"));
  CalibrateOptions calibrate;
  CLI::App* calibrate_cmd = app.add_subcommand("calibrate", "measure this machine (or a hostfile's hosts) and write a cluster JSON of its cores");
  CLI::Option* out_opt = calibrate_cmd->add_option("--out", calibrate.out, "cluster JSON to write (default cluster.json; from runs: only when given, one group of runs)");
  CLI::Option* hostfile_opt = calibrate_cmd->add_option("--hostfile", calibrate.hostfile, "measure these hosts (OpenMPI hostfile, slots = cores per host; docs/multi_host.md)");
  CLI::Option* repeats_opt = calibrate_cmd->add_option("--repeats", calibrate.repeats, "whole measurements, medians kept and the spread reported (default 3)");
  calibrate_cmd->add_flag("--json", calibrate.json, "print one JSON object on stdout");
  calibrate_cmd->add_option("--device", calibrate.device, "cpu (default: the cores, under mpirun) or cuda (this machine's GPU, with shardsim-gpu; docs/gpu.md)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  calibrate_cmd->add_option("--from-runs", calibrate.from_runs, "fit the efficiencies to these measured runs (docs/accuracy.md) instead of measuring this machine")
      ->excludes(hostfile_opt)
      ->excludes(repeats_opt);
  calibrate_cmd->add_option("--out-dir", calibrate.out_dir, "from runs: write GROUP.cluster.json per group of runs into this directory")
      ->excludes(out_opt);
  calibrate_cmd->add_flag("--no-fit", calibrate.no_fit, "from runs: predict every run with its cluster's own efficiencies (the presets' accuracy)");
  calibrate_cmd->add_flag("--catalogue", calibrate.catalogue,
                          "from runs: presets at the catalogue's efficiencies (data/hardware.json), not the fitted ones they default to (what data/fitted_presets.json is fitted from)");
  ValidateOptions validate;
  BatchFlags validate_batch;
  CLI::App* validate_cmd = app.add_subcommand("validate", "run a plan for real, estimate and simulate it on the calibrated cluster, and compare");
  AddInputs(validate_cmd, validate, true, true);
  AddBatchFlags(validate_cmd, validate_batch);
  validate_cmd->add_option("--hostfile", validate.hostfile, "run (and calibrate) over these hosts (docs/multi_host.md)");
  validate_cmd->add_option("--report", validate.report, "write a self-contained HTML page of the comparison");
  validate_cmd->add_option("--steps", validate.steps, "training steps (default 6; the first is warm-up)");
  validate_cmd->add_flag("--many-ranks", validate.many_ranks, "allow more than 16 ranks per core of this machine");
  validate_cmd->add_flag("--skip-memory-check", validate.skip_memory_check, "launch even when the plan's memory exceeds what this machine has free");
  validate_cmd->add_option("--keep", validate.keep, "keep the runtime's report, trace and calibration in this folder");
  AddSimLimitFlags(validate_cmd, validate.max_seconds, validate.max_host_memory, "");

  // A first word that is no subcommand: CLI11 would only say one is required.
  if (argc > 1 && argv[1][0] != '-') {
    std::vector<std::string> names;
    for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) names.push_back(sub->get_name());
    if (std::find(names.begin(), names.end(), argv[1]) == names.end()) {
      const std::string suggestion = DidYouMean(argv[1], names);
      std::cerr << "shardsim: error: "
                << InputError("", "unknown subcommand '" + std::string(argv[1]) + "'" + (suggestion.empty() ? "" : "; " + suggestion), JoinNames(names),
                              "run 'shardsim --help'")
                       .what()
                << "\n";
      return kBadInput;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    std::cerr << "shardsim: error: " << ParseErrorLine(app, e, argc, argv) << "\n";
    return kBadInput;
  }

  try {
    RefuseEmptyValues(app);
    if (presets_cmd->parsed()) return RunPresets(presets, std::cout);
    if (collective_cmd->parsed()) return RunCollective(collective, std::cout);
    if (estimate_cmd->parsed()) {
      ApplyBatchFlags(estimate_batch, estimate);
      if (!estimate_train_tokens.empty()) estimate.train_tokens = ParseTokenCount(estimate_train_tokens, "--train-tokens");
      return RunEstimate(estimate, std::cout);
    }
    if (simulate_cmd->parsed()) {
      ApplyBatchFlags(simulate_batch, simulate);
      simulate.progress = isatty(fileno(stderr)) != 0;
      return RunSimulate(simulate, std::cout);
    }
    if (plan_cmd->parsed()) {
      if (!batch_tokens.empty()) plan.global_batch_tokens = ParseTokensPerStep(batch_tokens, "--global-batch-tokens");
      if (!plan_train_tokens.empty()) plan.train_tokens = ParseTokenCount(plan_train_tokens, "--train-tokens");
      plan.progress = isatty(fileno(stderr)) != 0;
      return RunPlan(plan, std::cout);
    }
    if (describe_cmd->parsed()) return RunDescribe(describe, std::cout);
    if (run_cmd->parsed()) {
      ApplyBatchFlags(run_batch, run);
      run.progress = isatty(fileno(stderr)) != 0;
      return RunRun(run, std::cout);
    }
    if (calibrate_cmd->parsed()) {
      if (calibrate.device == "cuda" && (repeats_opt->count() > 0 || !calibrate.from_runs.empty())) {
        throw InputError(repeats_opt->count() > 0 ? "--repeats" : "--from-runs", "not with --device cuda", "",
                         "--device cuda measures this machine's GPU once per call (shardsim-gpu calibrate)");
      }
      return calibrate.from_runs.empty() ? RunCalibrate(calibrate, std::cout) : RunCalibrateFromRuns(calibrate, std::cout);
    }
    if (validate_cmd->parsed()) {
      ApplyBatchFlags(validate_batch, validate);
      return RunValidate(validate, std::cout);
    }
    return kInternalFailure;
  } catch (const InputError& e) {
    std::cerr << "shardsim: error: " << e.what() << "\n";
    return kBadInput;
  } catch (const std::exception& e) {
    std::cerr << "shardsim: internal error: " << e.what() << "\n";
    return kInternalFailure;
  }
}

}  // namespace shardsim::cli
