// `shardsim run`: trains with a plan for real by launching shardsim-runtime under mpirun, one
// rank per device of the plan's mesh (oversubscribed when this machine has fewer cores and no
// hostfile spreads the ranks; as root too).
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <thread>

#include "cli/commands.h"
#include "strategies/plan_rules.h"
#include "core/error.h"
#include "core/inputs.h"

namespace shardsim::cli {
namespace {

std::string FindOnPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    const size_t end = dirs.find(':', start);
    const std::string dir = dirs.substr(start, end == std::string::npos ? std::string::npos : end - start);
    const std::filesystem::path candidate = std::filesystem::path(dir.empty() ? "." : dir) / name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate.string();
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return "";
}

// Full precision: std::to_string would print 1e-7 as 0.000000.
std::string LearningRate(double lr) {
  char text[32];
  std::snprintf(text, sizeof text, "%.9g", lr);
  return text;
}

}  // namespace

int RunRun(const RunOptions& o, std::ostream& out) {
  if (o.model.empty() || (o.plan.empty() && o.overrides.empty())) {
    throw InputError("run", "needs --model and --plan", "", "e.g. shardsim run --model tiny-dense --plan examples/tiny-dense-data2.plan.json");
  }
  if (o.steps < 1) throw InputError("--steps", std::to_string(o.steps), "1 or more");
  const ModelSpec model = LoadModel(o.model);
  const PlanSpec plan = LoadPlan(o.plan, o.overrides);
  const int64_t ranks = plan.mesh.Product();
  strategies::ValidatePlan(plan, model, ranks, "the plan's mesh", PlanSource(o.plan, o.overrides) + ":");
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  const std::filesystem::path runtime = self.parent_path() / "shardsim-runtime";
  if (ec || access(runtime.c_str(), X_OK) != 0) {
    throw InputError("run", "cannot find shardsim-runtime next to " + self.string(), "", "build it: make build (it is build/bin/shardsim-runtime)");
  }
  const std::string mpirun = FindOnPath("mpirun");
  if (mpirun.empty()) throw InputError("run", "mpirun is not on PATH", "", "install OpenMPI: apt-get install openmpi-bin");

  std::vector<std::string> args = {mpirun, "--quiet", "-n", std::to_string(ranks)};
  if (!o.hostfile.empty()) {
    args.insert(args.end(), {"--hostfile", o.hostfile});
  } else if (ranks > static_cast<int64_t>(std::thread::hardware_concurrency())) {
    args.push_back("--oversubscribe");  // more ranks than cores here: they time-share
  }
  args.insert(args.end(), {runtime.string(), "train", "--model", o.model, "--steps", std::to_string(o.steps), "--seed", std::to_string(o.seed),
                           "--lr", LearningRate(o.lr)});
  if (!o.plan.empty()) args.insert(args.end(), {"--plan", o.plan});
  for (const std::string& s : o.overrides) args.insert(args.end(), {"--set", s});
  if (!o.corpus.empty()) args.insert(args.end(), {"--corpus", o.corpus});
  if (!o.checkpoint.empty()) args.insert(args.end(), {"--checkpoint", o.checkpoint});
  if (!o.trace.empty()) args.insert(args.end(), {"--trace", o.trace});
  if (!o.resume.empty()) args.insert(args.end(), {"--resume", o.resume});
  if (o.json) args.push_back("--json");
  if (geteuid() == 0) {  // OpenMPI refuses root unless told twice
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  }
  setenv("OPENBLAS_NUM_THREADS", "1", 0);
  out.flush();
  const pid_t child = fork();
  if (child < 0) throw InputError("run", "cannot start mpirun (fork failed)");
  if (child == 0) {
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    std::perror("shardsim: exec mpirun");
    _exit(127);
  }
  int status = 0;
  waitpid(child, &status, 0);
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  std::cerr << "shardsim: error: mpirun ended by signal " << WTERMSIG(status) << "\n";
  return 1;
}

}  // namespace shardsim::cli
