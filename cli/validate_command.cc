// `shardsim validate`: is the prediction true? Calibrates this machine (or the hostfile's hosts)
// unless a calibrated --cluster is given, runs the plan for real with shardsim-runtime (trace
// on), estimates and simulates the same step program on the calibrated cluster, and compares per
// category, per op and memory per rank (validation/compare.h).
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/mpi_launch.h"
#include "cli/validate_text.h"
#include "core/error.h"
#include "core/inputs.h"
#include "core/json_input.h"
#include "core/plan_json.h"
#include "sim/simulate.h"
#include "strategies/build_step.h"
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
  if (mkdtemp(pattern.data()) == nullptr) throw InputError("validate", "cannot make a temporary folder", "", "check TMPDIR");
  return pattern;
}

// The calibrated cluster cut to the plan's ranks: mpirun fills hosts in order, so R ranks take
// the first ceil(R / cores per host) hosts.
ClusterSpec ClusterForRanks(const ClusterSpec& calibrated, int64_t ranks, bool* time_faithful) {
  ClusterSpec c = calibrated;
  TopologySpec& t = c.topology;
  const int64_t per_host = t.local_devices / t.local_hosts;
  *time_faithful = ranks <= t.local_devices;
  if (!*time_faithful) {
    t.local_hosts = 1;
  } else {
    t.local_hosts = (ranks + per_host - 1) / per_host;
    if (ranks % t.local_hosts != 0) t.local_hosts = 1;
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
  if (o.steps < 2 || o.steps > 1000) throw InputError("--steps", std::to_string(o.steps), "2 to 1000 (the first is warm-up)");
  std::vector<std::string> overrides = o.overrides;
  std::vector<std::string> notes;
  PlanSpec plan = LoadPlan(o.plan, overrides);
  if (plan.dtype != "fp32") {
    overrides.push_back("dtype=fp32");
    notes.push_back("dtype set to fp32 (was " + plan.dtype + "): the runtime trains in fp32");
    plan = LoadPlan(o.plan, overrides);
  }
  const ModelSpec model = LoadModel(o.model);
  const int64_t ranks = plan.mesh.Product();
  strategies::ValidatePlan(plan, model, ranks, "the plan's mesh", PlanSource(o.plan, overrides) + ":");
  if (!o.hostfile.empty()) {
    const int64_t slots = ReadHostfile(o.hostfile).TotalSlots();
    if (ranks > slots) {
      throw InputError("--hostfile " + o.hostfile, "has " + std::to_string(slots) + " slots; the plan needs " + std::to_string(ranks) + " ranks",
                       "at least as many slots as the mesh has devices", "add hosts or slots, or shrink the mesh");
    }
  }
  const std::string dir = WorkDir(o.keep);

  // The cluster: given, or measured now.
  std::string cluster_path = o.cluster;
  if (cluster_path.empty()) {
    cluster_path = dir + "/cluster.json";
    const CalibrationJob job = CalibrationJobFor(o.hostfile);
    const int status = LaunchRuntime({"calibrate", "--out", cluster_path, "--hosts", std::to_string(job.hosts)}, job.ranks, o.hostfile,
                                     dir + "/calibrate.txt");
    if (status != 0) throw InputError("validate", "calibration failed (exit " + std::to_string(status) + ")", "", "see " + dir + "/calibrate.txt");
  }
  const ClusterSpec calibrated = LoadCluster(cluster_path);
  if (calibrated.topology.kind != TopologyKind::kLocal || calibrated.chip.peak_flop_per_s.count("fp32") == 0) {
    throw InputError("--cluster " + cluster_path, "is not a cluster of CPU cores with an fp32 rate", "a cluster JSON from shardsim calibrate",
                     "leave --cluster out to calibrate now");
  }
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
  if (status != 0) throw InputError("validate", "the run failed (exit " + std::to_string(status) + ")", "", "its report: " + dir + "/run.json");
  const validation::MeasuredRun measured =
      validation::ReadMeasuredRun(ReadJsonFile(dir + "/run.json"), ReadJsonFile(dir + "/trace.json"), dir + "/run.json");

  // The predictions, on the same program.
  const strategies::StepProgram program = strategies::BuildStep(model, plan);
  const topologies::Cluster graph(cluster);
  sim::AxisCollectives collectives(graph, plan);
  sim::SimulateOptions options;
  options.timeline = !o.report.empty();
  const sim::SimReport simulated = sim::Simulate(program, cluster, graph, collectives, options);
  const validation::Comparison comparison = validation::Compare(measured, program, cluster, collectives, simulated.estimate, simulated.step);

  ValidateContext context{model, plan, cluster, cluster_path, dir, o.keep.empty(), time_faithful, notes};
  if (!o.report.empty()) WriteValidateReport(o.report, context, comparison, measured, simulated, program);
  if (o.json) {
    out << ValidateJson(context, comparison, measured).dump(2) << "\n";
  } else {
    PrintValidate(out, context, comparison, measured);
    if (!o.report.empty()) out << "  report      " << o.report << "\n";
  }
  if (o.keep.empty()) std::filesystem::remove_all(dir);
  return 0;
}

}  // namespace shardsim::cli
