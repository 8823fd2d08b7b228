// The fault suite for `shardsim run`: a rank killed or stopped mid-training, shardsim itself sent
// SIGTERM or SIGINT, and values that must be refused before anything is launched. Each case checks
// the exit status, that stderr is one line naming the cause, and that no process is left.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/cli/cli_test_util.h"

namespace shardsim::cli_test {
namespace {

using Clock = std::chrono::steady_clock;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// The processes whose command line holds `token` (the job's own seed) and whose program is
// shardsim-runtime (`ranks_only`) or anything of the job (mpirun, the ranks).
std::vector<pid_t> JobProcesses(const std::string& token, bool ranks_only) {
  std::vector<pid_t> pids;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmdline = ReadAll(entry.path() / "cmdline");
    if (cmdline.find(token) == std::string::npos) continue;
    const std::string program = cmdline.substr(0, cmdline.find('\0'));
    const bool rank = program.size() >= 16 && program.compare(program.size() - 16, 16, "shardsim-runtime") == 0;
    const bool ours = rank || program.find("mpirun") != std::string::npos || program.find("orted") != std::string::npos;
    // A zombie (state Z) has ended; its parent only has not reaped it yet.
    const std::string stat = ReadAll(entry.path() / "stat");
    const size_t close = stat.rfind(')');
    const bool zombie = close != std::string::npos && close + 2 < stat.size() && stat[close + 2] == 'Z';
    if (!zombie && (ranks_only ? rank : ours)) pids.push_back(static_cast<pid_t>(std::stol(name)));
  }
  return pids;
}

// A variable of a process's environment ("" when it has none or it cannot be read).
std::string EnvironmentOf(pid_t pid, const std::string& name) {
  const std::string env = ReadAll("/proc/" + std::to_string(pid) + "/environ");
  for (size_t at = 0; at < env.size();) {
    const size_t end = std::min(env.find('\0', at), env.size());
    if (env.compare(at, name.size() + 1, name + "=") == 0) return env.substr(at + name.size() + 1, end - at - name.size() - 1);
    at = end + 1;
  }
  return "";
}

// A rank's world rank, from the environment mpirun gave it (-1 when unreadable).
int WorldRankOf(pid_t pid) {
  const std::string rank = EnvironmentOf(pid, "OMPI_COMM_WORLD_RANK");
  return rank.empty() ? -1 : std::stoi(rank);
}

// `shardsim run` started in the background, its stdout and stderr going to files.
class Job {
 public:
  Job(const std::vector<std::string>& args, const TempDir& dir, const std::string& program = SHARDSIM_BIN, const std::string& stdout_to = "")
      : out_(dir.PathOf("job.out")), err_(dir.PathOf("job.err")) {
    pid_ = fork();
    if (pid_ == 0) {
      freopen("/dev/null", "r", stdin);
      freopen(stdout_to.empty() ? out_.c_str() : stdout_to.c_str(), "w", stdout);
      freopen(err_.c_str(), "w", stderr);
      std::vector<char*> argv = {const_cast<char*>(program.c_str())};
      for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execv(program.c_str(), argv.data());
      _exit(127);
    }
  }
  pid_t pid() const { return pid_; }
  // Waits until stdout shows `line` (true) or the job ends or `seconds` pass (false).
  bool WaitFor(const std::string& line, double seconds) const {
    const auto end = Clock::now() + std::chrono::duration<double>(seconds);
    while (Clock::now() < end) {
      if (ReadAll(out_).find(line) != std::string::npos) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }
  // Waits for the job to end (killing it past `seconds`, which fails the test).
  CliResult Finish(double seconds) {
    CliResult r;
    const auto end = Clock::now() + std::chrono::duration<double>(seconds);
    int status = 0;
    while (waitpid(pid_, &status, WNOHANG) == 0) {
      if (Clock::now() > end) {
        ADD_FAILURE() << "shardsim run still running after " << seconds << " s";
        kill(pid_, SIGKILL);
        waitpid(pid_, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    r.exited = WIFEXITED(status);
    r.exit_code = r.exited ? WEXITSTATUS(status) : -1;
    r.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    r.out = ReadAll(out_);
    r.err = ReadAll(err_);
    return r;
  }

 private:
  pid_t pid_ = -1;
  std::string out_, err_;
};

// Success when nothing of the job is left within a few seconds.
::testing::AssertionResult NothingLeft(const std::string& token) {
  const auto end = Clock::now() + std::chrono::seconds(5);
  std::vector<pid_t> left;
  while (Clock::now() < end) {
    left = JobProcesses(token, false);
    if (left.empty()) return ::testing::AssertionSuccess();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  for (pid_t p : left) kill(p, SIGKILL);
  return ::testing::AssertionFailure() << left.size() << " process(es) of the job left running";
}

class RunFaultTest : public CliTest {
 protected:
  // A seed no other job uses: it marks this job's processes.
  RunFaultTest() : seed_(std::to_string(100000 + std::random_device{}() % 800000000)) {}
  std::vector<std::string> LongRun(const std::vector<std::string>& extra = {}) {
    const std::string plan = Write("p.json", R"({"mesh": {"data": 2}, "global_batch_size": 4, "seq_len": 64})");
    std::vector<std::string> args = {"run", "--model", "tiny-dense", "--plan", plan, "--steps", "100000", "--seed", seed_};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }
  std::string seed_;
};

TEST_F(RunFaultTest, AKilledRankIsNamedWithTheOpItWasIn) {
  Job job(LongRun(), dir_);
  ASSERT_TRUE(job.WaitFor("step   2", 60)) << ReadAll(PathOf("job.err"));
  pid_t victim = -1;
  for (pid_t p : JobProcesses(seed_, true)) {
    if (WorldRankOf(p) == 1) victim = p;
  }
  ASSERT_GT(victim, 0) << "rank 1 not found";
  kill(victim, SIGKILL);
  const CliResult r = job.Finish(30);
  EXPECT_TRUE(r.exited && r.exit_code == 4) << r.exit_code << " " << r.err;
  EXPECT_EQ(CountLines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("shardsim: error: rank 1 (node "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("killed by signal 9 (Killed) during step "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(", op "), std::string::npos) << r.err;
  EXPECT_TRUE(NothingLeft(seed_));
}

// OpenMPI's session directory is the job's own folder (cli/mpi_launch.cc, JobFolder): launches
// sharing the default one race when one ends as another starts. It goes when the job ends.
TEST_F(RunFaultTest, OpenMpisSessionIsTheJobsOwnFolderAndGoesWithIt) {
  if (std::getenv("OMPI_MCA_orte_tmpdir_base") != nullptr) GTEST_SKIP() << "OMPI_MCA_orte_tmpdir_base is set here: the user's own is kept";
  Job job(LongRun(), dir_);
  ASSERT_TRUE(job.WaitFor("step   1", 60)) << ReadAll(PathOf("job.err"));
  const std::vector<pid_t> ranks = JobProcesses(seed_, true);
  ASSERT_FALSE(ranks.empty());
  const std::string session = EnvironmentOf(ranks.front(), "OMPI_MCA_orte_tmpdir_base");
  EXPECT_FALSE(session.empty());
  EXPECT_EQ(session, EnvironmentOf(ranks.front(), "SHARDSIM_STATUS_DIR"));
  bool openmpi_in_it = false;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(session, ec)) {
    openmpi_in_it = openmpi_in_it || entry.path().filename().string().rfind("ompi.", 0) == 0;
  }
  EXPECT_TRUE(openmpi_in_it) << session;
  kill(job.pid(), SIGTERM);
  const CliResult r = job.Finish(30);
  EXPECT_EQ(r.exit_code, 128 + SIGTERM) << r.err;
  EXPECT_FALSE(std::filesystem::exists(session)) << session;
  EXPECT_TRUE(NothingLeft(seed_));
}

TEST_F(RunFaultTest, AStoppedRankEndsTheJobAtTheTimeout) {
  Job job(LongRun({"--timeout", "2"}), dir_);
  ASSERT_TRUE(job.WaitFor("step   2", 60)) << ReadAll(PathOf("job.err"));
  pid_t victim = -1;
  for (pid_t p : JobProcesses(seed_, true)) {
    if (WorldRankOf(p) == 1) victim = p;
  }
  ASSERT_GT(victim, 0) << "rank 1 not found";
  const auto stopped = Clock::now();
  kill(victim, SIGSTOP);
  const CliResult r = job.Finish(60);
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - stopped).count(), 30);
  EXPECT_TRUE(r.exited && r.exit_code == 4) << r.exit_code << " " << r.err;
  EXPECT_EQ(CountLines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("rank 0: timed out after 2 s waiting for "), std::string::npos) << r.err;
  EXPECT_TRUE(NothingLeft(seed_));
}

class SignalTest : public RunFaultTest, public ::testing::WithParamInterface<int> {};

TEST_P(SignalTest, IsForwardedAndTheJobEnds) {
  const int signal = GetParam();
  Job job(LongRun(), dir_);
  ASSERT_TRUE(job.WaitFor("step   1", 60)) << ReadAll(PathOf("job.err"));
  kill(job.pid(), signal);
  const CliResult r = job.Finish(30);
  EXPECT_TRUE(r.exited && r.exit_code == 128 + signal) << r.exit_code << " " << r.err;
  EXPECT_EQ(CountLines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("shardsim: stopped by signal " + std::to_string(signal)), std::string::npos) << r.err;
  EXPECT_TRUE(NothingLeft(seed_));
}

INSTANTIATE_TEST_SUITE_P(TermIntHup, SignalTest, ::testing::Values(SIGTERM, SIGINT, SIGHUP));

#ifndef SHARDSIM_SANITIZE  // AddressSanitizer reports a huge allocation itself instead of throwing
TEST_F(RunFaultTest, ARankThatCannotAllocateEndsTheJobInOneLine) {
  // 25 G parameters: the memory check refuses it; skipped, the rank's allocation fails at once.
  const std::string model = Write("huge.json", R"({"name": "huge", "num_layers": 8, "hidden_size": 16384, "num_heads": 128, "num_kv_heads": 8,
    "head_dim": 128, "ffn_hidden_size": 65536, "mlp": "swiglu", "norm": "rmsnorm", "position": "rope", "vocab_size": 256, "max_seq_len": 1024})");
  const std::string plan = Write("p1.json", R"({"mesh": {"data": 1}, "global_batch_size": 1, "seq_len": 64})");
  EXPECT_TRUE(IsInputError(RunShardsim({"run", "--model", model, "--plan", plan, "--steps", "1"}), {"needs about", "--skip-memory-check"}));
  Job job({"run", "--model", model, "--plan", plan, "--steps", "1", "--seed", seed_, "--skip-memory-check"}, dir_);
  const CliResult r = job.Finish(60);
  EXPECT_TRUE(r.exited && r.exit_code == 4) << r.exit_code << " " << r.err;
  EXPECT_EQ(CountLines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("rank 0: cannot allocate memory"), std::string::npos) << r.err;
  EXPECT_TRUE(NothingLeft(seed_));
}
#endif

TEST_F(RunFaultTest, ValuesOutOfRangeAreRefusedBeforeLaunching) {
  const std::vector<std::string> base = LongRun();
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    return RunShardsim(args);
  };
  for (const std::string lr : {"nan", "inf", "-inf", "1e300", "-1", "0"}) EXPECT_TRUE(IsInputError(with({"--lr", lr}), {"--lr", "(0, 1]"})) << lr;
  std::vector<std::string> negative_seed = base;
  negative_seed.back() = "-1";  // the job's own --seed
  EXPECT_TRUE(IsInputError(RunShardsim(negative_seed), {"--seed", "'-1' is out of range"}));
  for (const std::string t : {"nan", "0", "-3", "1e999"}) EXPECT_TRUE(IsInputError(with({"--timeout", t}), {"--timeout"})) << t;
  EXPECT_TRUE(IsInputError(with({"--hostfile", PathOf("none.txt")}), {"--hostfile", "cannot be read"}));
  EXPECT_TRUE(IsInputError(with({"--hostfile", Write("empty.txt", "")}), {"--hostfile", "lists no host"}));
  EXPECT_TRUE(IsInputError(with({"--hostfile", Write("one.txt", "localhost slots=1\n")}), {"--hostfile", "1 slots for 2 ranks"}));
  EXPECT_TRUE(IsInputError(with({"--trace", PathOf("missing/trace.json")}), {"--trace", "No such file"}));
  EXPECT_TRUE(IsInputError(with({"--checkpoint-every", "-1"}), {"--checkpoint-every"}));
  std::vector<std::string> huge_seed = base;
  huge_seed.back() = "18446744073709551616";  // 2^64: refused, not clamped to 2^63-1
  EXPECT_TRUE(IsInputError(RunShardsim(huge_seed), {"--seed", "out of range"}));
  EXPECT_TRUE(IsInputError(with({"--hostfile", Write("big.txt", "a slots=9223372036854775807\nb slots=9223372036854775807\n")}),
                           {"--hostfile", "big.txt:1", "out of range"}));
  EXPECT_TRUE(IsInputError(with({"--hostfile", dir_.path().string()}), {"--hostfile", "is a folder"}));
  // Far more ranks than this machine's cores could time-share.
  EXPECT_TRUE(IsInputError(RunShardsim({"run", "--model", "tiny-dense", "--set", "mesh.data=100000", "--global-batch-tokens", "6400000", "--seq-len",
                                        "64", "--steps", "1"}),
                           {"100000 ranks", "--many-ranks"}));
  EXPECT_TRUE(JobProcesses(seed_, false).empty());
}

TEST_F(RunFaultTest, RuntimeArgumentErrorsAreOneLine) {
  // A corpus the runtime reads and finds too short for the sequences: its one line passed on.
  const std::string plan = Write("p.json", R"({"mesh": {"data": 2}, "global_batch_size": 4, "seq_len": 64})");
  const CliResult r = RunShardsim({"run", "--model", "tiny-dense", "--plan", plan, "--steps", "1", "--corpus", Write("short.txt", "too short")});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(CountLines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("shardsim-runtime: error: --corpus"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("too few for sequences of 64"), std::string::npos) << r.err;
  // A missing one is refused before anything is launched.
  EXPECT_TRUE(IsInputError(RunShardsim({"run", "--model", "tiny-dense", "--plan", plan, "--steps", "1", "--corpus", PathOf("missing.txt")}),
                           {"--corpus", "missing.txt: file not found"}));
}

// Faults mid-run (a rank killed by SIGKILL, shardsim sent SIGTERM) leave the last complete
// checkpoint, which resumes bit-identically: its next loss equals an uninterrupted run's.
class CheckpointAfterFaultTest : public RunFaultTest, public ::testing::WithParamInterface<bool> {};

TEST_P(CheckpointAfterFaultTest, TheLastGoodCheckpointResumesBitIdentically) {
  const bool kill_rank = GetParam();
  const std::string plan = Write("p.json", R"({"mesh": {"data": 2}, "global_batch_size": 4, "seq_len": 64})");
  Job job({"run", "--model", "tiny-dense", "--plan", plan, "--steps", "100000", "--seed", seed_, "--checkpoint", PathOf("ck"),
           "--checkpoint-every", "1"},
          dir_);
  ASSERT_TRUE(job.WaitFor("step   3", 60)) << ReadAll(PathOf("job.err"));
  pid_t victim = job.pid();
  if (kill_rank) {
    for (pid_t p : JobProcesses(seed_, true)) {
      if (WorldRankOf(p) == 1) victim = p;
    }
  }
  kill(victim, kill_rank ? SIGKILL : SIGTERM);
  const CliResult ended = job.Finish(30);
  EXPECT_TRUE(ended.exited && ended.exit_code == (kill_rank ? 4 : 128 + SIGTERM)) << ended.err;
  EXPECT_TRUE(NothingLeft(seed_));
  const nlohmann::json manifest = nlohmann::json::parse(ReadAll(PathOf("ck/checkpoint.json")));
  const int64_t step = manifest.at("step").get<int64_t>();
  ASSERT_GE(step, 3);
  const CliResult resumed = RunShardsim({"run", "--model", "tiny-dense", "--plan", plan, "--steps", "1", "--seed", seed_, "--resume", PathOf("ck"), "--json"});
  ASSERT_TRUE(resumed.exited && resumed.exit_code == 0) << resumed.err;
  const CliResult straight = RunShardsim({"run", "--model", "tiny-dense", "--plan", plan, "--steps", std::to_string(step + 1), "--seed", seed_, "--json"});
  ASSERT_TRUE(straight.exited && straight.exit_code == 0) << straight.err;
  const nlohmann::json a = nlohmann::json::parse(resumed.out), b = nlohmann::json::parse(straight.out);
  EXPECT_EQ(a.at("first_step").get<int64_t>(), step);
  EXPECT_EQ(a.at("losses").at(0).get<double>(), b.at("losses").at(static_cast<size_t>(step)).get<double>());
}

INSTANTIATE_TEST_SUITE_P(KillAndTerm, CheckpointAfterFaultTest, ::testing::Bool());

// A checkpoint folder may hold the user's own files, even ones named like ours: only rank files
// of older saves are removed.
TEST_F(RunFaultTest, CheckpointsRemoveOnlyTheirOwnFiles) {
  const std::string notes = Write("ck/step-by-step-notes/notes.txt", "precious");
  const std::string mine = Write("ck/step-000001/mine.txt", "also mine");
  const std::string plan = Write("p.json", R"({"mesh": {"data": 2}, "global_batch_size": 4, "seq_len": 64})");
  const CliResult r = RunShardsim({"run", "--model", "tiny-dense", "--plan", plan, "--steps", "3", "--checkpoint", PathOf("ck"),
                                   "--checkpoint-every", "1", "--seed", seed_});
  ASSERT_TRUE(r.exited && r.exit_code == 0) << r.err;
  EXPECT_TRUE(std::filesystem::exists(notes));
  EXPECT_TRUE(std::filesystem::exists(mine));
  EXPECT_FALSE(std::filesystem::exists(PathOf("ck/step-000001/rank-0.bin")));
  EXPECT_FALSE(std::filesystem::exists(PathOf("ck/step-000002")));
  EXPECT_TRUE(std::filesystem::exists(PathOf("ck/step-000003/rank-1.bin")));
}

// The ranks' stdout comes through shardsim, so a full disk there is an error, not a lost report.
TEST_F(RunFaultTest, AReportThatCannotBeWrittenIsAnError) {
  const std::string plan = Write("p.json", R"({"mesh": {"data": 2}, "global_batch_size": 4, "seq_len": 64})");
  Job job({"run", "--model", "tiny-dense", "--plan", plan, "--steps", "1", "--json", "--seed", seed_}, dir_, SHARDSIM_BIN, "/dev/full");
  const CliResult r = job.Finish(60);
  EXPECT_TRUE(r.exited && r.exit_code != 0) << r.err;
  EXPECT_EQ(CountLines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("standard output: cannot be written"), std::string::npos) << r.err;
  EXPECT_TRUE(NothingLeft(seed_));
}

// shardsim-runtime started by hand (one rank, no mpirun): its argument errors are one line in
// shardsim's form, with its name.
TEST_F(RunFaultTest, RuntimeParseErrorsAreOneLineWithItsName) {
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"train", "--bogus"}, {"train", "--steps", "many"}, {"train", "--timeout", "nan"}, {"train", "--model", "tiny-dense"}}) {
    Job job(args, dir_, SHARDSIM_RUNTIME_BIN);
    const CliResult r = job.Finish(60);
    EXPECT_TRUE(r.exited && r.exit_code == 2) << r.exit_code << " " << r.err;
    EXPECT_EQ(CountLines(r.err), 1) << r.err;
    EXPECT_EQ(r.err.rfind("shardsim-runtime: error: ", 0), 0u) << r.err;
  }
}

}  // namespace
}  // namespace shardsim::cli_test
