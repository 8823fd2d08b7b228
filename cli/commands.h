// The subcommands, each a function of its parsed options that writes to `out` and returns the
// exit status. Options are plain values, so commands do not see CLI11.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace shardsim::cli {

struct PresetsOptions {
  bool json = false;
};
int RunPresets(const PresetsOptions& options, std::ostream& out);

// What --model, --cluster, --plan, --set and --json gave (the subcommands that read them share it).
struct Inputs {
  std::string model, cluster, plan;
  std::vector<std::string> overrides;  // --set key=value
  bool json = false;
};

struct DescribeOptions : Inputs {
  std::string mesh;                    // "data=8,tensor=8": show the links each axis uses
  int64_t seq_len = 0;                 // 0: the plan's, else the model's max_seq_len
  std::string write_model;    // write the model as shardsim model JSON to this file
  std::string write_cluster;  // write the cluster as cluster JSON to this file
  std::string write_plan;     // write the plan (after --set) as plan JSON to this file
};
int RunDescribe(const DescribeOptions& options, std::ostream& out);

struct CollectiveOptions {
  std::string cluster;
  std::string op;
  std::string bytes;      // "8,1M,1G"
  int64_t devices = 0;    // the first N devices ...
  std::string mesh;       // ... or the group(s) along `axes` of this mesh
  std::string axes;       // "tensor" or "data,fsdp"
  std::string algorithm = "auto";
  std::string engine = "analytic";
  double max_seconds = 0;       // --engine des: wall-time limit of the simulation (0: the default, 600 s)
  std::string max_host_memory;  // --engine des: memory limit, "0.5" (of MemAvailable) or "8GiB" (empty: half of MemAvailable)
  bool json = false;
};
int RunCollective(const CollectiveOptions& options, std::ostream& out);

struct EstimateOptions : Inputs {
  bool dump_program = false;  // print the StepProgram instead of the estimate
  double train_tokens = 0;           // --train-tokens: report the time and device-hours to train on them (0: off)
  double price_per_device_hour = 0;  // with --train-tokens: the run's cost at this price (0: not priced)
};
int RunEstimate(const EstimateOptions& options, std::ostream& out);

struct SimulateOptions : Inputs {
  std::string trace;       // write a Chrome trace of the simulated step
  std::string report;      // write the report page (HTML)
  bool no_fold = false;    // simulate every device
  bool progress = false;   // progress line on stderr (when it is a terminal)
  double max_seconds = 0;       // wall-time limit of the simulation (0: the default, 600 s)
  std::string max_host_memory;  // memory limit, "0.5" (of MemAvailable) or "8GiB" (empty: half of MemAvailable)
};
// Every device simulated (--no-fold) is for small clusters: above this, refused.
inline constexpr int64_t kMaxUnfoldedDevices = 1024;
int RunSimulate(const SimulateOptions& options, std::ostream& out);

// Inputs' --plan and --set fix plan fields: the search tries only plans that keep them.
struct PlanOptions : Inputs {
  int64_t global_batch_tokens = 0;  // 0: the plan's (--plan/--set global_batch_size x seq_len)
  int64_t seq_len = 0;              // 0: the plan's
  int64_t top = 5;
  int threads = 0;      // 0: all hardware threads
  bool progress = false;  // progress line on stderr (when it is a terminal)
  std::string exporter;   // megatron, maxtext, torchtitan, deepspeed or jax: print the best plan for it
  std::string framework;  // search only what this framework runs (megatron-core, torchtitan, maxtext, deepspeed)
  std::string max_memory;  // "0.85" (of HBM) or "70GiB"; empty: the default headroom
  bool wide = false;       // every column, uncut (text wider than 120 columns)
  double train_tokens = 0;           // --train-tokens: report the time and device-hours to train on them (0: off)
  double price_per_device_hour = 0;  // with --train-tokens: the run's cost at this price (0: not priced)
  std::string plot;       // write the Pareto view (tokens/s against memory) as SVG to this file
  double max_seconds = 0;       // --refine: wall-time limit of each simulation (0: the default, 600 s)
  std::string max_host_memory;  // --refine: memory limit of each simulation (empty: half of MemAvailable)
  int64_t refine = 0;     // simulate the top K plans on SimGrid and rank them by that (0: off)
};
int RunPlan(const PlanOptions& options, std::ostream& out);

struct RunOptions : Inputs {
  int64_t steps = 10;
  std::string hostfile;  // MPI hostfile: ranks across machines
  std::string trace;     // Chrome trace of every rank's ops
  int64_t seed = 1234;
  double lr = 1e-3;
  std::string corpus;    // a text file instead of the shipped corpus
  std::string checkpoint;  // write a sharded checkpoint here after the last step
  int64_t checkpoint_every = 0;  // ... and every N steps (0: only after the last)
  bool many_ranks = false;         // allow more than kMaxRanksPerCore ranks per core here
  bool skip_memory_check = false;  // launch even when the plan's memory exceeds what is free
  std::string resume;      // continue from the checkpoint in this folder
  double timeout_s = 0;    // shardsim-runtime train --timeout: longest wait on one receive or collective (0: its default, 600 s)
  bool progress = false;   // with --json: the runtime's step lines on stderr (when it is a terminal)
  std::string plot;        // the loss per step as an SVG (cli/loss_plot.h)
  std::vector<std::string> compare;  // reports of earlier runs (run --json) overlaid on the plot
  std::string device = "cpu";  // "cuda": one rank's compute on its GPU (shardsim-runtime train --device cuda)
};
// The longest --timeout run accepts: one receive or collective waiting a day has hung.
inline constexpr double kMaxRunTimeoutS = 86400;
// Launches shardsim-runtime (next to this binary) under mpirun with one rank per device of the
// plan's mesh; returns its exit status.
int RunRun(const RunOptions& options, std::ostream& out);

struct CalibrateOptions {
  std::string out;       // the cluster JSON to write ("" : cluster.json when measuring, none from runs)
  std::string hostfile;  // measure these hosts (equal slots, one per core)
  int64_t repeats = 3;
  bool json = false;
  std::string from_runs;  // fit efficiencies to these measured runs instead of measuring
  std::string out_dir;    // from runs: one GROUP.cluster.json per group of runs
  bool no_fit = false;    // from runs: predict with the clusters' own efficiencies
  bool catalogue = false;  // from runs: presets at the catalogue's efficiencies, not their fitted ones
  std::string device = "cpu";  // "cuda": measure this machine's GPU with shardsim-gpu (docs/gpu.md)
};
// calibrate --from-runs (cli/calibrate_runs.cc).
int RunCalibrateFromRuns(const CalibrateOptions& options, std::ostream& out);
// The ranks calibrate runs: one per core here, or the hostfile's slots over its hosts.
struct CalibrationJob {
  int64_t ranks = 1, hosts = 1;
};
CalibrationJob CalibrationJobFor(const std::string& hostfile);
// Launches shardsim-runtime calibrate under mpirun; returns its exit status.
int RunCalibrate(const CalibrateOptions& options, std::ostream& out);

struct ValidateOptions : Inputs {
  std::string hostfile;  // run (and calibrate) over these hosts
  std::string report;    // write an HTML page
  std::string keep;      // keep the runtime's report, trace and the calibration in this folder
  int64_t steps = 6;     // training steps run (the first is warm-up, left out of the op diff)
  bool many_ranks = false;         // --many-ranks, as run's
  bool skip_memory_check = false;  // --skip-memory-check, as run's
  double max_seconds = 0;       // wall-time limit of the simulation (0: the default, 600 s)
  std::string max_host_memory;  // memory limit of the simulation (empty: half of MemAvailable)
};
// Calibrates (unless --cluster is given), runs the plan with shardsim-runtime, estimates and
// simulates it on the calibrated cluster and compares.
int RunValidate(const ValidateOptions& options, std::ostream& out);

}  // namespace shardsim::cli
