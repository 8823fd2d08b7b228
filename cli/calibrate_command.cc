// `shardsim calibrate`: measures the machines it runs on (this one, or a hostfile's hosts) with
// shardsim-runtime calibrate under mpirun, one rank per core, and writes a cluster JSON.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <thread>

#include "cli/commands.h"
#include "cli/mpi_launch.h"
#include "cli/watched_process.h"
#include "core/error.h"
#include "core/output_file.h"

namespace shardsim::cli {

CalibrationJob CalibrationJobFor(const std::string& hostfile) {
  CalibrationJob job;
  if (hostfile.empty()) {
    job.ranks = std::max<int64_t>(1, std::thread::hardware_concurrency());
    return job;
  }
  const Hostfile h = ReadHostfile(hostfile);
  for (int64_t s : h.slots) {
    if (s != h.slots.front()) {
      throw InputError("--hostfile " + hostfile, "hosts have different slot counts", "the same slots=N on every host (one per core)",
                       "calibrate measures a cluster of equal hosts");
    }
  }
  job.ranks = h.TotalSlots();
  job.hosts = static_cast<int64_t>(h.hosts.size());
  return job;
}

namespace {

// The GPU is measured by shardsim-gpu (cuda/), built next to this program where nvcc was found.
int CalibrateGpu(const CalibrateOptions& o) {
  if (!o.hostfile.empty()) throw InputError("--hostfile", "not with --device cuda", "--hostfile with --device cpu", "run shardsim calibrate --device cuda on each GPU machine");
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  const std::filesystem::path gpu = self.parent_path() / "shardsim-gpu";
  if (ec || access(gpu.c_str(), X_OK) != 0) {
    throw InputError("--device cuda", "cannot find shardsim-gpu next to " + (ec ? std::string("this program") : self.string()) +
                                          " (a build makes it only where CUDA's compiler was found when it was configured)",
                     "cpu, or cuda with shardsim-gpu beside shardsim", "keep build/bin's programs together, or rebuild where nvcc is installed (docs/gpu.md)");
  }
  CheckOutputWritable(o.out, "--out");
  std::vector<std::string> args = {gpu.string(), "calibrate", "--out", o.out};
  if (o.json) args.push_back("--json");
  const WatchedEnd end = RunWatched(args, "", [](const std::string& line) { std::cerr << line << "\n"; });
  return end.killed_by != 0 ? 128 + end.killed_by : end.exit_code;
}

}  // namespace

int RunCalibrate(const CalibrateOptions& options, std::ostream& out) {
  if (!options.out_dir.empty() || options.no_fit || options.catalogue) {
    const std::string flag = options.no_fit ? "--no-fit" : options.catalogue ? "--catalogue" : "--out-dir";
    throw InputError(flag, "only with --from-runs", "with --from-runs FILE", "calibrate --from-runs runs.json " + flag + (flag == "--out-dir" ? " DIR" : ""));
  }
  CalibrateOptions o = options;
  if (o.out.empty()) o.out = "cluster.json";
  if (o.device == "cuda") return CalibrateGpu(o);
  if (o.repeats < 1 || o.repeats > 20) throw InputError("--repeats", std::to_string(o.repeats) + " measurements", "1 to 20", "the default, 3, reports their spread");
  const CalibrationJob job = CalibrationJobFor(o.hostfile);
  // Checked before the measurement, without creating the file: shardsim-runtime writes it at the
  // end (core/output_file.h), so a failed calibration leaves no empty or partial cluster JSON.
  CheckOutputWritable(o.out, "--out");
  std::vector<std::string> args = {"calibrate", "--out", o.out, "--hosts", std::to_string(job.hosts), "--repeats", std::to_string(o.repeats)};
  if (o.json) args.push_back("--json");
  out.flush();
  return LaunchRuntime(args, job.ranks, o.hostfile);
}

}  // namespace shardsim::cli
