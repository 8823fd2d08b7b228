// `shardsim run`: trains with a plan for real by launching shardsim-runtime under mpirun, one
// rank per device of the plan's mesh (oversubscribed when this machine has fewer cores and no
// hostfile spreads the ranks; as root too).
#include <cstdio>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <limits>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/loss_plot.h"
#include "cli/mpi_launch.h"
#include "cli/run_limits.h"
#include "core/output_file.h"
#include "core/train_lines.h"
#include "core/train_settings.h"
#include "strategies/plan_rules.h"
#include "core/error.h"
#include "core/inputs.h"
#include "core/json_input.h"

namespace shardsim::cli {
namespace {

// Full precision: std::to_string would print 1e-7 as 0.000000.
std::string FullPrecision(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.9g", value);
  return text;
}

// A temporary file removed when this goes.
class TempFile {
 public:
  TempFile() {
    char name[] = "/tmp/shardsim-run-XXXXXX";
    const int fd = mkstemp(name);
    if (fd < 0) throw InputError("--plot", "cannot create a temporary file in /tmp for the run's report", "a writable /tmp");
    close(fd);
    path_ = name;
  }
  ~TempFile() { std::remove(path_.c_str()); }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The runs --compare names, read before anything is launched.
std::vector<LossRun> ComparedRuns(const RunOptions& o) {
  if (!o.compare.empty() && o.plot.empty()) throw InputError("--compare", "needs --plot", "--plot FILE.svg", "the compared runs are drawn on the plot");
  if (!o.plot.empty()) CheckOutputWritable(o.plot, "--plot");
  std::vector<LossRun> runs;
  for (const std::string& path : o.compare) {
    std::error_code error;
    if (std::filesystem::equivalent(path, o.plot, error)) {
      throw InputError("--plot " + o.plot, "is the --compare report " + path + ": the plot would replace it", "another file, e.g. loss.svg");
    }
    runs.push_back(ReadLossRun(path));
    if (runs.back().model != runs.front().model) {
      throw InputError("--compare " + path, "is a run of model '" + runs.back().model + "', " + o.compare.front() + " of '" + runs.front().model + "'",
                       "reports of one model", "compare runs of the same model: their losses differ by the model, not by the sharding");
    }
  }
  return runs;
}

// Writes the plot of `runs` and says so in one line (or a JSON object with --json and no run).
void WritePlot(const RunOptions& o, const std::vector<LossRun>& runs, std::ostream& out, bool json) {
  WriteOutputFile(o.plot, LossPlotSvg(runs), "--plot");
  const LossDifference diff = LargestRelativeDifference(runs);
  if (json) {
    out << nlohmann::json{{"plot", o.plot}, {"runs", runs.size()}, {"largest_relative_difference", diff.relative}}.dump(2) << "\n";
    return;
  }
  out << "wrote " << o.plot << ": the loss per step of " << runs.size() << (runs.size() == 1 ? " run" : " runs");
  if (diff.run > 0) out << ", largest relative difference from the first " << FullPrecision(diff.relative) << " (step " << diff.step << ")";
  out << "\n";
}

// The runtime's text from its captured report, as a run without --plot prints it: each step's line
// (unless `shown` live on this terminal already, through stderr) and the closing median line.
void PrintRunLines(const nlohmann::json& report, bool shown, std::ostream& out) try {
  // JSON writes a non-finite number as null: read back as NaN, as the runtime printed it.
  auto as_number = [](const nlohmann::json& x) { return x.is_number() ? x.get<double>() : std::numeric_limits<double>::quiet_NaN(); };
  auto numbers = [&](const char* key) {
    std::vector<double> v;
    for (const nlohmann::json& x : report.at(key)) v.push_back(as_number(x));
    return v;
  };
  auto number = [&](const char* key) { return as_number(report.at(key)); };
  const std::vector<double> losses = numbers("losses"), norms = numbers("grad_norms"), times = numbers("step_times_s");
  const int64_t first = report.at("first_step").get<int64_t>();
  for (size_t s = 0; !shown && s < losses.size() && s < norms.size() && s < times.size(); ++s) {
    out << TrainStepLine(first + static_cast<int64_t>(s), losses[s], norms[s], times[s]) << "\n";
  }
  const double median = number("step_time_s"), rate = number("model_flop_per_s");
  out << (report.contains("device") ? GpuMedianLine(median, rate, report.at("ranks").get<int64_t>(), report.at("device").get<std::string>(),
                                                   report.at("precision").get<std::string>())
                                    : CpuMedianLine(median, rate, report.at("blas").get<std::string>()))
      << "\n";
} catch (const nlohmann::json::exception& e) {
  throw InputError("shardsim-runtime's report", std::string("lacks a field of its text lines: ") + e.what(), "the report this build's runtime writes", "run shardsim-runtime from the same build as shardsim");
}

}  // namespace

int RunRun(const RunOptions& o, std::ostream& out) {
  out.flush();
  std::vector<LossRun> compared = ComparedRuns(o);
  if (o.model.empty() && !compared.empty()) {
    // Only the earlier runs: nothing is launched.
    WritePlot(o, compared, out, o.json);
    return 0;
  }
  if (o.model.empty() || (o.plan.empty() && o.overrides.empty())) {
    throw InputError("run", "needs --model and a plan", "--model M with --plan FILE and/or --set key=value",
                     "e.g. shardsim run --model tiny-dense --set mesh.data=2 --set global_batch_size=8 --set seq_len=256");
  }
  if (o.steps < 1) throw InputError("--steps", std::to_string(o.steps) + " steps", "1 or more", "leave it out for 10");
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
  // On the GPU the plan's memory is the device's, not this machine's (shardsim-gpu info says how much).
  CheckRunFitsThisMachine(model, plan, ranks,
                          {.hostfile = !o.hostfile.empty(), .many_ranks = o.many_ranks, .skip_memory = o.skip_memory_check || o.device == "cuda"});
  if (!o.corpus.empty()) {
    std::error_code ec;
    if (std::filesystem::is_directory(o.corpus, ec)) throw InputError("--corpus " + o.corpus, "is a directory", "a text file", "name a file inside it");
    if (!std::filesystem::exists(o.corpus, ec)) throw InputError("--corpus " + o.corpus, "file not found", "a text file", "check the path");
  }
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
  if (o.device != "cpu") args.insert(args.end(), {"--device", o.device});
  if (o.json || !o.plot.empty()) args.push_back("--json");
  // Without --json the step lines are on stdout already; with --json, or --plot, whose report is
  // captured, they go to stderr (when it is a terminal) as the steps end.
  if ((o.json || !o.plot.empty()) && o.progress) args.push_back("--progress");
  if (o.plot.empty()) return LaunchRuntime(args, ranks, o.hostfile);
  // With --plot mpirun's stdout, the report (rank 0's, on whichever host), goes to a file first,
  // its losses drawn, then it is shown.
  const TempFile report;
  const int status = LaunchRuntime(args, ranks, o.hostfile, report.path());
  if (status != 0) return status;
  const nlohmann::json result = ReadJsonFile(report.path());
  std::vector<LossRun> runs{LossRunFromReport(result, "shardsim-runtime's report")};
  if (!compared.empty() && compared.front().model != runs.front().model) {
    throw InputError("--compare " + o.compare.front(), "is a run of model '" + compared.front().model + "', this run of '" + runs.front().model + "'",
                     "reports of the same model");
  }
  runs.insert(runs.end(), compared.begin(), compared.end());
  if (o.json) {
    out << result.dump(2) << "\n";
  } else {
    PrintRunLines(result, o.progress && isatty(fileno(stdout)) != 0, out);
  }
  WritePlot(o, runs, o.json ? std::cerr : out, false);
  return 0;
}

}  // namespace shardsim::cli
