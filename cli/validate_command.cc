// `shardsim validate`: is the prediction true? Calibrates this machine (or the hostfile's hosts)
// unless a calibrated --cluster is given, runs the plan for real with shardsim-runtime (trace
// on), estimates and simulates the same step program on the calibrated cluster, and compares per
// category, per op and memory per rank (validation/compare.h).
#include <stdlib.h>

#include <filesystem>
#include <optional>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/mpi_launch.h"
#include "cli/run_limits.h"
#include "cli/sim_limits.h"
#include "cli/validate_text.h"
#include "core/error.h"
#include "core/inputs.h"
#include "core/json_input.h"
#include "core/output_file.h"
#include "core/plan_json.h"
#include "sim/simulate.h"
#include "strategies/build_step.h"
#include "strategies/context_parallel.h"
#include "strategies/plan_rules.h"
#include "topologies/cluster.h"
#include "validation/compare.h"

namespace shardsim::cli {
namespace {

std::string WorkDir(const std::string& keep) {
  if (!keep.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(keep, ec);
    if (ec) throw InputError("--keep " + keep, "cannot be created: " + ec.message(), "a writable folder");
    return keep;
  }
  std::string pattern = (std::filesystem::temp_directory_path() / "shardsim-validate-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) throw InputError("validate", "cannot make a temporary folder", "a writable TMPDIR (or /tmp)", "check TMPDIR");
  return pattern;
}

// The work folder: removed when validate ends, unless the user asked to keep it (--keep) or a
// launch failed and its log is worth reading.
struct WorkFolder {
  std::string path;
  bool keep = false;
  ~WorkFolder() {
    std::error_code ec;
    if (!keep) std::filesystem::remove_all(path, ec);
  }
};

// A calibrated cluster of CPU cores: what validate predicts on.
ClusterSpec LoadCalibrated(const std::string& path) {
  const ClusterSpec c = LoadCluster(path);
  if (c.topology.kind != TopologyKind::kLocal || c.calibration.empty() || c.calibration.dtype != "fp32") {
    throw InputError("--cluster " + path, "is not a calibrated cluster of CPU cores", "a cluster JSON written by shardsim calibrate",
                     "leave --cluster out to calibrate now");
  }
  return c;
}

// The hosts of a calibrated cluster that `ranks` ranks take: mpirun fills hosts in order, so the
// first ceil(R / cores per host); one (time-shared) when they outnumber its cores.
int64_t CutHosts(const TopologySpec& t, int64_t ranks) {
  const int64_t per_host = t.local_devices / t.local_hosts;
  return ranks <= t.local_devices ? (ranks + per_host - 1) / per_host : 1;
}

// The calibrated cluster cut to the plan's ranks (CutHosts).
ClusterSpec ClusterForRanks(const ClusterSpec& calibrated, int64_t ranks, bool* time_faithful) {
  ClusterSpec c = calibrated;
  TopologySpec& t = c.topology;
  const int64_t per_host = t.local_devices / t.local_hosts;
  *time_faithful = ranks <= t.local_devices;
  t.local_hosts = CutHosts(calibrated.topology, ranks);
  if (*time_faithful) {
    if (ranks > per_host && ranks % per_host != 0) {
      throw InputError("the plan's mesh", std::to_string(ranks) + " ranks do not fill whole hosts of " + std::to_string(per_host) + " cores",
                       "a multiple of the cores per host (or at most one host's cores)", "the cluster model has as many devices on every host");
    }
  }
  t.local_devices = ranks;
  ValidateCluster(c, "validate cluster");
  return c;
}

}  // namespace

int RunValidate(const ValidateOptions& o, std::ostream& out) {
  if (o.model.empty() || (o.plan.empty() && o.overrides.empty())) {
    throw InputError("validate", "needs --model and a plan (--plan FILE and/or --set key=value)", "",
                     "e.g. shardsim validate --model tiny-dense --set mesh.data=2 --set global_batch_size=8 --set seq_len=256");
  }
  if (o.steps < 2 || o.steps > 1000) throw InputError("--steps", std::to_string(o.steps) + " steps", "2 to 1000 (the first is warm-up)", "the default, 6, compares five steps");
  std::vector<std::string> overrides = o.overrides;
  std::vector<std::string> notes;
  PlanSpec plan = LoadPlan(o.plan, overrides);
  const ModelSpec model = LoadModel(o.model);
  if (plan.dtype != "fp32") {
    overrides.push_back("dtype=fp32");
    std::string dropped;
    // The FP8 recipe's own fields go with it (they need dtype fp8).
    const nlohmann::json written = PlanToJson(plan);
    for (const std::string& field : Fp8RecipeFields()) {
      overrides.push_back(field + "=null");
      if (written.contains(field)) dropped += (dropped.empty() ? "" : ", ") + field;
    }
    // fp32 weights are their own master.
    overrides.push_back("master_weights=null");
    if (!plan.master_weights.empty()) dropped += std::string(dropped.empty() ? "" : ", ") + "master_weights";
    notes.push_back("dtype set to fp32 (was " + plan.dtype + "): the runtime trains in fp32" + (dropped.empty() ? "" : "; the fields that go with it dropped (" + dropped + ")"));
    plan = LoadPlan(o.plan, overrides);
  }
  if (plan.ep_dispatcher == "deepep") {
    overrides.push_back("ep_dispatcher=alltoall");
    notes.push_back("ep_dispatcher set to alltoall (was deepep): the runtime's MPI all-to-alls send every routed copy, as the prediction then does");
    plan = LoadPlan(o.plan, overrides);
  }
  if (EagerElementwise(plan)) {
    overrides.push_back("elementwise_kernels=null");
    notes.push_back("elementwise_kernels dropped (was " + plan.elementwise_kernels + "): the runtime's own kernels read and write each tensor once, as the prediction then costs them");
    plan = LoadPlan(o.plan, overrides);
  }
  if (plan.expert_routing == "round-robin") {
    overrides.push_back("expert_routing=null");
    notes.push_back("expert_routing dropped (was round-robin): the runtime's router picks each token's top-k by score (every routed copy sent, the same rows)");
    plan = LoadPlan(o.plan, overrides);
  }
  if (!plan.attention_kernel.empty() && plan.attention_kernel != "flash") {
    overrides.push_back("attention_kernel=null");
    notes.push_back("attention_kernel dropped (was " + plan.attention_kernel + "): the runtime runs its own blockwise attention, costed at the calibrated rate");
    plan = LoadPlan(o.plan, overrides);
  }
  if (strategies::RepeatsKv(model, plan)) {
    overrides.push_back("repeat_kv=false");
    notes.push_back("repeat_kv set to false: the runtime's attention reads the shared K/V heads, as the prediction then does");
    plan = LoadPlan(o.plan, overrides);
  }
  if (plan.offload_layers > 0) {
    overrides.push_back("offload_layers=0");
    notes.push_back("offload_layers set to 0 (was " + std::to_string(plan.offload_layers) +
                    "): a CPU rank's activations are in host memory already, and the prediction then keeps them there too");
    plan = LoadPlan(o.plan, overrides);
  }
  if (plan.mesh.context > 1 && plan.context_kv != "ring") {
    overrides.push_back("context_kv=ring");
    notes.push_back("context_kv set to ring (was " + plan.context_kv + "): the CPU runtime passes K/V around the ring, as the prediction then does");
    plan = LoadPlan(o.plan, overrides);
  }
  if (PipelineBuffersOf(plan) != "per-transfer") {
    overrides.push_back("pipeline_buffers=per-transfer");
    notes.push_back("pipeline_buffers set to per-transfer (was " + plan.pipeline_buffers +
                    "): the runtime receives into a buffer per transfer and frees each send once complete, as the prediction then does");
    plan = LoadPlan(o.plan, overrides);
  }
  const int64_t ranks = plan.mesh.Product();
  strategies::ValidatePlan(plan, model, ranks, "the plan's mesh", PlanSource(o.plan, overrides) + ":");
  if (!o.hostfile.empty()) CheckHostfileHolds(o.hostfile, ranks);
  CheckRunFitsThisMachine(model, plan, ranks, {.hostfile = !o.hostfile.empty(), .many_ranks = o.many_ranks, .skip_memory = o.skip_memory_check});
  // The report is written after minutes of calibration and running: check it can be, first.
  if (!o.report.empty()) CheckOutputWritable(o.report, "--report");
  // A given cluster is checked before anything is made or launched.
  const std::optional<ClusterSpec> given = o.cluster.empty() ? std::nullopt : std::optional<ClusterSpec>(LoadCalibrated(o.cluster));
  // The prediction cuts the calibrated cluster to the ranks (ClusterForRanks): the run must span
  // as many hosts as that cut, or it crosses links (and cores) the prediction does not.
  if (given) {
    const int64_t run_hosts = o.hostfile.empty() ? 1 : ReadHostfile(o.hostfile).HostsFor(ranks);
    const int64_t cut_hosts = CutHosts(given->topology, ranks);
    const int64_t per_host = given->topology.local_devices / given->topology.local_hosts;
    if (run_hosts != cut_hosts) {
      const auto count = [](int64_t n) { return std::to_string(n) + (n == 1 ? " host" : " hosts"); };
      throw InputError(o.hostfile.empty() ? "--cluster" : "--hostfile",
                       "the " + std::to_string(ranks) + " ranks would run on " + count(run_hosts) +
                           (o.hostfile.empty() ? " (this machine)" : " (" + o.hostfile + ")") + ", but " + o.cluster + " puts them on " +
                           count(cut_hosts) + " of " + std::to_string(per_host) + " cores (its calibration)",
                       "hosts that hold the ranks as the calibrated cluster does",
                       "calibrate the hosts the run uses (shardsim calibrate --hostfile H --out C), or leave --cluster out to calibrate them now");
    }
  }
  WorkFolder work{WorkDir(o.keep), !o.keep.empty()};
  const std::string& dir = work.path;

  // The cluster: given, or measured now.
  std::string cluster_path = o.cluster;
  if (!given) {
    cluster_path = dir + "/cluster.json";
    const CalibrationJob job = CalibrationJobFor(o.hostfile);
    const int status = LaunchRuntime({"calibrate", "--out", cluster_path, "--hosts", std::to_string(job.hosts)}, job.ranks, o.hostfile,
                                     dir + "/calibrate.txt");
    if (status != 0) {
      work.keep = true;
      throw std::runtime_error("validate: the calibration failed (mpirun exit " + std::to_string(status) + "); its output: " + dir + "/calibrate.txt");
    }
  }
  const ClusterSpec calibrated = given ? *given : LoadCalibrated(cluster_path);
  bool time_faithful = true;
  const ClusterSpec cluster = ClusterForRanks(calibrated, ranks, &time_faithful);
  if (!time_faithful) {
    notes.push_back(std::to_string(ranks) + " ranks on " + std::to_string(DeviceCount(calibrated)) +
                    " cores time-share them: not time-faithful (predicted as if each rank had a core; kept out of accuracy figures)");
  }

  // The run.
  std::vector<std::string> args = {"train", "--model", o.model, "--steps", std::to_string(o.steps), "--json", "--trace", dir + "/trace.json"};
  if (!o.plan.empty()) args.insert(args.end(), {"--plan", o.plan});
  for (const std::string& s : overrides) args.insert(args.end(), {"--set", s});
  out.flush();
  const int status = LaunchRuntime(args, ranks, o.hostfile, dir + "/run.json");
  if (status != 0) {
    work.keep = true;
    throw std::runtime_error("validate: the run failed (mpirun exit " + std::to_string(status) + "); the runtime's error is above, its files in " + dir);
  }
  const validation::MeasuredRun measured =
      validation::ReadMeasuredRun(ReadJsonFile(dir + "/run.json"), ReadJsonFile(dir + "/trace.json"), dir + "/run.json");

  // The predictions, on the same program at the routing that happened.
  const strategies::StepProgram balanced = strategies::BuildStep(model, plan);
  const PlanSpec timed_plan = validation::AtMeasuredRouting(plan, measured, notes);
  const strategies::StepProgram program = strategies::BuildStep(model, timed_plan);
  const topologies::Cluster graph(cluster);
  sim::AxisCollectives collectives(graph, timed_plan);
  sim::SimulateOptions options;
  options.timeline = !o.report.empty();
  options.limits = SimLimitsFrom(o.max_seconds, o.max_host_memory);
  const sim::SimReport simulated = sim::Simulate(program, cluster, graph, collectives, options);
  const validation::Comparison comparison =
      validation::Compare(measured, program, balanced, cluster, collectives, simulated.estimate, simulated.step);

  if (!given && o.keep.empty()) cluster_path = "calibrated now, not kept (--keep DIR keeps it)";
  ValidateContext context{model, plan, cluster, cluster_path, dir, o.keep.empty(), time_faithful, notes};
  if (!o.report.empty()) WriteValidateReport(o.report, context, comparison, measured, simulated, program);
  if (o.json) {
    out << ValidateJson(context, comparison, measured).dump(2) << "\n";
  } else {
    PrintValidate(out, context, comparison, measured);
    if (!o.report.empty()) out << "  report      " << o.report << "\n";
  }
  return 0;
}

}  // namespace shardsim::cli
