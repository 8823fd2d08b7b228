#include "cli/mpi_launch.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "cli/mpirun_output.h"
#include "cli/watched_process.h"
#include "core/error.h"
#include "core/rank_status.h"
#include "core/units.h"

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

// The folder the ranks on this machine post their status in (core/rank_status.h), named to them
// by the environment, removed with everything in it when the launch ends however it ends. A launch
// on this machine alone also keeps OpenMPI's session directory in it: launches sharing the default
// one (/tmp/ompi.HOST.UID) race, one ending and removing it while another starts in it, and the
// starting one fails with "A call to mkdir was unable to create the desired directory ... File
// exists" (OpenMPI 4.1, open-mpi/ompi#8510; seen here with two runs at once). A user's own
// OMPI_MCA_orte_tmpdir_base is kept; with a hostfile the other hosts' daemons would make the folder
// on theirs and leave it there, so those launches keep OpenMPI's default.
struct JobFolder {
  static constexpr const char* kSessionVariable = "OMPI_MCA_orte_tmpdir_base";
  std::string path = (std::filesystem::temp_directory_path() / "shardsim-job-XXXXXX").string();
  bool session_here = false;
  explicit JobFolder(bool local) {
    if (!mkdtemp(path.data())) path.clear();
    setenv(kRankStatusFolderVariable, path.c_str(), 1);
    session_here = local && !path.empty() && std::getenv(kSessionVariable) == nullptr;
    if (session_here) setenv(kSessionVariable, path.c_str(), 1);
  }
  ~JobFolder() {
    std::error_code ignored;
    if (!path.empty()) std::filesystem::remove_all(path, ignored);
    unsetenv(kRankStatusFolderVariable);
    if (session_here) unsetenv(kSessionVariable);
  }
  JobFolder(const JobFolder&) = delete;
  JobFolder& operator=(const JobFolder&) = delete;
};

}  // namespace

int64_t Hostfile::TotalSlots() const {
  int64_t total = 0;
  for (int64_t s : slots) total += s;
  return total;
}

int64_t Hostfile::HostsFor(int64_t ranks) const {
  int64_t used = 0, filled = 0;
  for (; used < static_cast<int64_t>(slots.size()) && filled < ranks; ++used) filled += slots[static_cast<size_t>(used)];
  return used;
}

Hostfile ReadHostfile(const std::string& path) {
  std::error_code folder_error;
  if (std::filesystem::is_directory(path, folder_error)) throw InputError("--hostfile " + path, "is a folder", "an OpenMPI hostfile", "name the file");
  std::ifstream in(path);
  if (!in) throw InputError("--hostfile " + path, "cannot be read", "an OpenMPI hostfile: one 'HOST slots=N' per line", "check the path");
  Hostfile h;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    line = line.substr(0, line.find('#'));
    std::istringstream words(line);
    std::string host, word;
    if (!(words >> host)) continue;
    int64_t slots = 1, most = 0;  // most: max_slots, 0 when not given
    const std::string where = "--hostfile " + path + ":" + std::to_string(number);
    while (words >> word) {
      const bool max_slots = word.rfind("max_slots=", 0) == 0 || word.rfind("max-slots=", 0) == 0;
      if (word.rfind("slots=", 0) != 0 && !max_slots) {
        throw InputError(where, "unknown word '" + word + "'", "HOST slots=N [max_slots=M]", "see docs/multi_host.md");
      }
      // At most 2^20 slots a host: their sum cannot overflow, and no machine has more cores.
      const int64_t value = ParseInteger(word.substr(word.find('=') + 1), where + " " + word, 1, int64_t{1} << 20);
      (max_slots ? most : slots) = value;
    }
    // Open MPI refuses a host whose max_slots is below its slots (a bad parameter, after launch).
    if (most > 0 && most < slots) {
      throw InputError(where, "max_slots=" + std::to_string(most) + " is below slots=" + std::to_string(slots), "max_slots at least slots",
                       "raise max_slots or lower slots");
    }
    h.hosts.push_back(host);
    h.slots.push_back(slots);
  }
  if (h.hosts.empty()) throw InputError("--hostfile " + path, "lists no host", "one 'HOST slots=N' per line", "see docs/multi_host.md");
  return h;
}

void CheckHostfileHolds(const std::string& hostfile, int64_t ranks) {
  const int64_t slots = ReadHostfile(hostfile).TotalSlots();
  if (ranks > slots) {
    throw InputError("--hostfile " + hostfile, "has " + std::to_string(slots) + " slots for " + std::to_string(ranks) + " ranks",
                     "at least one slot per rank", "add hosts or slots, or shrink the mesh");
  }
}

int LaunchRuntime(const std::vector<std::string>& runtime_args, int64_t ranks, const std::string& hostfile, const std::string& stdout_path) {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  const std::filesystem::path runtime = self.parent_path() / "shardsim-runtime";
  if (ec || access(runtime.c_str(), X_OK) != 0) {
    throw InputError("shardsim-runtime", "cannot find it next to " + self.string(), "shardsim-runtime beside shardsim",
                     "build it (make build: build/bin/shardsim-runtime), and keep build/bin's programs together");
  }
  const std::string mpirun = FindOnPath("mpirun");
  if (mpirun.empty()) throw InputError("mpirun", "is not on PATH", "Open MPI's mpirun on PATH", "install OpenMPI: apt-get install openmpi-bin");
  std::vector<std::string> args = {mpirun, "-n", std::to_string(ranks)};
  if (!hostfile.empty()) {
    CheckHostfileHolds(hostfile, ranks);
    args.insert(args.end(), {"--hostfile", hostfile});
  } else if (ranks > static_cast<int64_t>(std::thread::hardware_concurrency())) {
    args.push_back("--oversubscribe");  // more ranks than cores here: they time-share
  }
  args.push_back(runtime.string());
  args.insert(args.end(), runtime_args.begin(), runtime_args.end());
  if (geteuid() == 0) {  // OpenMPI refuses root unless told twice
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  }
  setenv("OPENBLAS_NUM_THREADS", "1", 0);
  // The ranks on this machine post what they are doing here, so a dead one can be named with its op.
  const JobFolder job_folder(hostfile.empty());
  const std::string& status_folder = job_folder.path;
  MpirunOutput output;
  const WatchedEnd end = RunWatched(args, stdout_path, [&](const std::string& line) {
    if (output.Take(line)) std::cerr << line << std::endl;
  });
  const MpirunNews& news = output.Finish();
  const int blamed = news.BlamedRank();
  const std::string doing = blamed >= 0 && !status_folder.empty() ? ReadRankStatus(status_folder, blamed) : "";
  if (end.forwarded) {
    std::cerr << "shardsim: stopped by signal " << end.forwarded << " (" << strsignal(end.forwarded) << "): mpirun and its ranks "
              << (end.escalated ? "were killed " + std::to_string(kGraceSeconds) + " s later" : "ended") << "\n";
    return 128 + end.forwarded;
  }
  if (end.killed_by) {
    std::cerr << "shardsim: error: mpirun was killed by signal " << end.killed_by << " (" << strsignal(end.killed_by) << ")\n";
    return 128 + end.killed_by;
  }
  if (end.exit_code == 0) return 0;
  const std::string line = FailureLine(news, end.exit_code, doing);
  if (!line.empty()) std::cerr << "shardsim: error: " << line << "\n";
  // Bad input the ranks agreed on keeps its status 2; a job that could not start or failed while
  // running (a rank died, aborted or timed out) is 4.
  // (mpirun passes on the ranks' status: 2 when they all ended on bad input, the abort code else;
  // its banners are not reliable enough to tell, as it may fail to print them while aborting.)
  const bool input_error = news.runtime_error && end.exit_code == 2 && news.killed_rank < 0;
  return input_error ? 2 : 4;
}

}  // namespace shardsim::cli
