// `shardsim-runtime train` end to end, under `mpiexec --quiet -n 2`: flags out of range (--lr
// nan, inf, 1e300, -1, 0; --seed -1) and checkpoint folders that cannot be used are one line on
// stderr and exit status 2 before any step; a checkpoint saved by the command resumes, and once
// damaged on rank 1 is refused naming rank 1 and its file; a save that rank 1 cannot write ends
// the job at once, keeping the previous checkpoint.
#include <sys/wait.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "core/model_json.h"
#include "core/model_presets.h"

namespace shardsim {
namespace {

namespace fs = std::filesystem;

struct Result {
  int code = -1;
  std::string out, err;
  double seconds = 0;
};

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream all;
  all << in.rdbuf();
  return all.str();
}

size_t Lines(const std::string& text) {
  size_t lines = 0;
  for (char c : text) lines += c == '\n';
  return lines + (!text.empty() && text.back() != '\n');
}

class TrainCliTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
    setenv("OPENBLAS_NUM_THREADS", "1", 0);
    std::string dir = (fs::temp_directory_path() / "shardsim-train-cli-XXXXXX").string();
    ASSERT_NE(mkdtemp(dir.data()), nullptr);
    dir_ = new fs::path(dir);
    // The equivalence test's narrow tiny-dense, data parallel over the 2 ranks.
    ModelSpec m = FindModelPreset("tiny-dense")->spec;
    m.name = "cli-test";
    m.hidden_size = 64;
    m.num_heads = 4;
    m.num_kv_heads = 2;
    m.head_dim = 16;
    m.ffn_hidden_size = 128;
    std::ofstream(*dir_ / "model.json") << ModelToJson(m).dump(2);
    std::ofstream(*dir_ / "plan.json") << R"({"mesh": {"data": 2}, "global_batch_size": 4, "seq_len": 32})";
  }
  static void TearDownTestSuite() {
    std::error_code ignored;
    fs::remove_all(*dir_, ignored);
    delete dir_;
  }

  // Runs `shardsim-runtime train` with the test's model and plan and `args` on 2 ranks.
  static Result Train(const std::string& args) {
    const fs::path out = *dir_ / "stdout.txt", err = *dir_ / "stderr.txt";
    const std::string command = std::string(SHARDSIM_MPIEXEC) + " --quiet -n 2 --oversubscribe " + SHARDSIM_RUNTIME + " train --model " +
                                (*dir_ / "model.json").string() + " --plan " + (*dir_ / "plan.json").string() + " " + args + " > " + out.string() +
                                " 2> " + err.string();
    Result r;
    const auto start = std::chrono::steady_clock::now();
    const int status = std::system(command.c_str());
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = ReadFile(out);
    r.err = ReadFile(err);
    return r;
  }

  // Exit 2, one line on stderr holding `part`, and no step trained.
  static void ExpectOneLineError(const Result& r, const std::string& part) {
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_EQ(Lines(r.err), 1u) << r.err;
    EXPECT_NE(r.err.find(part), std::string::npos) << r.err;
    EXPECT_EQ(r.out.find("step "), std::string::npos) << "trained before the error:\n" << r.out;
  }

  static fs::path* dir_;
};

fs::path* TrainCliTest::dir_ = nullptr;

TEST_F(TrainCliTest, LearningRatesOutOfRangeAreOneLineErrors) {
  for (const std::string lr : {"nan", "inf", "1e300", "-1", "0"}) {
    SCOPED_TRACE(lr);
    const Result r = Train("--steps 1 --lr " + lr);
    ExpectOneLineError(r, "--lr: ");
    EXPECT_NE(r.err.find("valid: a finite number in (0, 1]"), std::string::npos) << r.err;
  }
}

TEST_F(TrainCliTest, ANegativeSeedIsRefusedNotWrapped) {
  ExpectOneLineError(Train("--steps 1 --seed -1"), "--seed: '-1' is out of range; valid: 0 to 9223372036854775807");
  ExpectOneLineError(Train("--steps 1 --seed 18446744073709551616"), "--seed: '18446744073709551616' is out of range");
}

TEST_F(TrainCliTest, CheckpointFoldersThatCannotBeUsedAreReportedBeforeAnyStep) {
  std::ofstream(*dir_ / "a-file") << "x";
  const std::string under_file = (*dir_ / "a-file" / "ck").string();
  ExpectOneLineError(Train("--steps 3 --checkpoint " + under_file), "--checkpoint " + under_file + ": rank 0 cannot create the folder: Not a directory");
  const std::string missing = (*dir_ / "missing").string();
  ExpectOneLineError(Train("--steps 3 --resume " + missing), "--resume " + missing + ": does not exist");
  const std::string empty = (*dir_ / "empty").string();
  fs::create_directories(empty);
  ExpectOneLineError(Train("--steps 3 --resume " + empty), "--resume " + empty + ": holds no checkpoint");
}

TEST_F(TrainCliTest, ACheckpointResumesAndOnceDamagedIsRefusedNamingTheRankAndFile) {
  const std::string ck = (*dir_ / "ck").string();
  Result r = Train("--steps 2 --checkpoint " + ck + " --checkpoint-every 1");
  ASSERT_EQ(r.code, 0) << r.err;
  r = Train("--steps 1 --resume " + ck);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("step   2  loss"), std::string::npos) << r.out;
  const fs::path file = fs::path(ck) / "step-000002" / "rank-1.bin";
  std::string bytes = ReadFile(file);
  bytes[bytes.size() / 2] ^= 0x04;
  std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;
  ExpectOneLineError(Train("--steps 1 --resume " + ck), "--resume " + ck + ": rank 1: " + file.string() + ": checksum mismatch (file damaged)");
}

TEST_F(TrainCliTest, ASaveThatOneRankCannotWriteEndsTheJobAtOnceKeepingThePreviousCheckpoint) {
  const std::string ck = (*dir_ / "blocked").string();
  Result r = Train("--steps 1 --checkpoint " + ck);
  ASSERT_EQ(r.code, 0) << r.err;
  // Resumed at step 1 and saving into the same folder after 2 more steps: rank 1 finds a folder
  // where its temporary file goes.
  fs::create_directories(fs::path(ck) / "step-000003" / "rank-1.bin.tmp");
  r = Train("--steps 2 --resume " + ck + " --checkpoint " + ck + " --timeout 60");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_EQ(Lines(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find("--checkpoint " + ck + ": rank 1 cannot write " + ck + "/step-000003/rank-1.bin: Is a directory; the checkpoint of step 1 is kept"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.out.find("step   2  loss"), std::string::npos) << r.out;
  EXPECT_LT(r.seconds, 30.0) << "the job should end at once, not after the 60 s timeout";
  std::printf("the job with a failed save (2 steps after a resume) ended after %.1f s\n", r.seconds);
  EXPECT_FALSE(fs::exists(fs::path(ck) / "step-000003"));
  r = Train("--steps 1 --resume " + ck);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("step   1  loss"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace shardsim
