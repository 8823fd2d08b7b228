#include "cli/mpi_launch.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "core/error.h"

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

}  // namespace

int64_t Hostfile::TotalSlots() const {
  int64_t total = 0;
  for (int64_t s : slots) total += s;
  return total;
}

Hostfile ReadHostfile(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError("--hostfile " + path, "cannot be read", "an OpenMPI hostfile: one 'HOST slots=N' per line", "check the path");
  Hostfile h;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    line = line.substr(0, line.find('#'));
    std::istringstream words(line);
    std::string host, word;
    if (!(words >> host)) continue;
    int64_t slots = 1;
    while (words >> word) {
      const std::string where = "--hostfile " + path + ":" + std::to_string(number);
      const bool max_slots = word.rfind("max_slots=", 0) == 0 || word.rfind("max-slots=", 0) == 0;
      if (word.rfind("slots=", 0) != 0 && !max_slots) {
        throw InputError(where, "unknown word '" + word + "'", "HOST slots=N [max_slots=M]", "see docs/multi_host.md");
      }
      char* end = nullptr;
      const char* number_text = word.c_str() + word.find('=') + 1;
      const long long value = std::strtoll(number_text, &end, 10);
      if (end == number_text || *end != '\0' || value < 1) throw InputError(where, "'" + word + "' is not a slot count", "slots=N with N >= 1");
      if (!max_slots) slots = value;
    }
    h.hosts.push_back(host);
    h.slots.push_back(slots);
  }
  if (h.hosts.empty()) throw InputError("--hostfile " + path, "lists no host", "one 'HOST slots=N' per line", "see docs/multi_host.md");
  return h;
}

int LaunchRuntime(const std::vector<std::string>& runtime_args, int64_t ranks, const std::string& hostfile, const std::string& stdout_path) {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  const std::filesystem::path runtime = self.parent_path() / "shardsim-runtime";
  if (ec || access(runtime.c_str(), X_OK) != 0) {
    throw InputError("shardsim-runtime", "cannot find it next to " + self.string(), "", "build it: make build (it is build/bin/shardsim-runtime)");
  }
  const std::string mpirun = FindOnPath("mpirun");
  if (mpirun.empty()) throw InputError("mpirun", "is not on PATH", "", "install OpenMPI: apt-get install openmpi-bin");
  std::vector<std::string> args = {mpirun, "--quiet", "-n", std::to_string(ranks)};
  if (!hostfile.empty()) {
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
  std::cout.flush();
  const pid_t child = fork();
  if (child < 0) throw InputError("mpirun", "cannot be started (fork failed)");
  if (child == 0) {
    if (!stdout_path.empty()) {
      const int fd = open(stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd < 0 || dup2(fd, STDOUT_FILENO) < 0) _exit(126);
      close(fd);
    }
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
