// `shardsim run`: trains with a plan for real by launching shardsim-runtime under mpirun, one
// rank per device of the plan's mesh (oversubscribed when this machine has fewer cores and no
// hostfile spreads the ranks; as root too).
#include <cstdio>

#include "cli/commands.h"
#include "cli/mpi_launch.h"
#include "cli/run_limits.h"
#include "core/output_file.h"
#include "core/train_settings.h"
#include "strategies/plan_rules.h"
#include "core/error.h"
#include "core/inputs.h"

namespace shardsim::cli {
namespace {

// Full precision: std::to_string would print 1e-7 as 0.000000.
std::string FullPrecision(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.9g", value);
  return text;
}

}  // namespace

int RunRun(const RunOptions& o, std::ostream& out) {
  out.flush();
  if (o.model.empty() || (o.plan.empty() && o.overrides.empty())) {
    throw InputError("run", "needs --model and --plan", "", "e.g. shardsim run --model tiny-dense --plan examples/tiny-dense-data2.plan.json");
  }
  if (o.steps < 1) throw InputError("--steps", std::to_string(o.steps), "1 or more");
  CheckLearningRate(o.lr, "--lr");
  CheckSeed(o.seed, "--seed");
  if (o.timeout_s != 0 && !(o.timeout_s > 0 && o.timeout_s <= kMaxRunTimeoutS)) {
    throw InputError("--timeout", FullPrecision(o.timeout_s) + " is not a timeout", "seconds in (0, " + FullPrecision(kMaxRunTimeoutS) + "]");
  }
  const ModelSpec model = LoadModel(o.model);
  const PlanSpec plan = LoadPlan(o.plan, o.overrides);
  const int64_t ranks = plan.mesh.Product();
  strategies::ValidatePlan(plan, model, ranks, "the plan's mesh", PlanSource(o.plan, o.overrides) + ":");
  if (!o.hostfile.empty()) CheckHostfileHolds(o.hostfile, ranks);
  CheckRunFitsThisMachine(model, plan, ranks, {.hostfile = !o.hostfile.empty(), .many_ranks = o.many_ranks, .skip_memory = o.skip_memory_check});
  // Outputs are checked now, not after training.
  if (!o.trace.empty()) CheckOutputWritable(o.trace, "--trace");
  std::vector<std::string> args;
  args.insert(args.end(), {"train", "--model", o.model, "--steps", std::to_string(o.steps), "--seed", std::to_string(o.seed),
                           "--lr", FullPrecision(o.lr)});
  if (!o.plan.empty()) args.insert(args.end(), {"--plan", o.plan});
  for (const std::string& s : o.overrides) args.insert(args.end(), {"--set", s});
  if (!o.corpus.empty()) args.insert(args.end(), {"--corpus", o.corpus});
  if (!o.checkpoint.empty()) args.insert(args.end(), {"--checkpoint", o.checkpoint});
  if (o.checkpoint_every > 0) args.insert(args.end(), {"--checkpoint-every", std::to_string(o.checkpoint_every)});
  if (!o.trace.empty()) args.insert(args.end(), {"--trace", o.trace});
  if (!o.resume.empty()) args.insert(args.end(), {"--resume", o.resume});
  if (o.timeout_s != 0) args.insert(args.end(), {"--timeout", FullPrecision(o.timeout_s)});
  if (o.json) args.push_back("--json");
  if (o.json && o.progress) args.push_back("--progress");  // without --json the step lines are on stdout already
  return LaunchRuntime(args, ranks, o.hostfile);
}

}  // namespace shardsim::cli
