// `shardsim-runtime train --device cuda` against the CPU runtime: the same model, initial values,
// corpus batches and AdamW, fp32 on both sides (no TF32); the losses agree step by step to 1e-4
// relative, with micro-batches accumulated per step, on one rank and on data-parallel,
// tensor-parallel, pipeline-parallel and context-parallel ranks sharing the GPU, alone and
// together. Skips without a GPU.
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "cuda/device_info.h"

namespace {

// The runtime's output for `mesh` ("--set mesh.data=2 ..."), under mpiexec (SHARDSIM_MPIEXEC,
// else the one CMake found) when `ranks` > 1; `status` gets the exit status.
std::string RunRuntime(const std::string& device, int ranks, const std::string& mesh, int* status = nullptr,
                       const std::string& model = "tiny-dense") {
  // Open MPI refuses root unless told twice, as `shardsim run` tells it (cli/mpi_launch.cc);
  // ctest's ENVIRONMENT list does not reach the discovered tests whole.
  if (geteuid() == 0) {
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  }
  const char* mpiexec = std::getenv("SHARDSIM_MPIEXEC");
  const std::string launch = ranks == 1 ? "" : std::string(mpiexec != nullptr ? mpiexec : SHARDSIM_MPIEXEC) + " -n " + std::to_string(ranks) + " --oversubscribe ";
  // SHARDSIM_RUNTIME_BIN: the program to run where the build folder's path does not exist (a
  // copy of the binaries on a GPU machine).
  const char* bin = std::getenv("SHARDSIM_RUNTIME_BIN");
  const std::string command = launch + std::string(bin != nullptr ? bin : SHARDSIM_RUNTIME) +
                              " train --model " + model + " --set global_batch_size=8 --set micro_batch_size=2 --set seq_len=128"
                              " --set dtype=fp32 --steps 6 --json " + mesh + " --device " + device + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  std::string out = command + "\n";
  std::array<char, 4096> buf{};
  while (pipe != nullptr && fgets(buf.data(), buf.size(), pipe) != nullptr) out += buf.data();
  const int code = pipe != nullptr ? pclose(pipe) : -1;
  if (status != nullptr) *status = code;
  return out;
}

// The per-step losses of the run (`ranks` ranks over `mesh`; data parallel by default).
std::vector<double> Losses(const std::string& device, int ranks = 1, std::string mesh = "") {
  if (mesh.empty()) mesh = "--set mesh.data=" + std::to_string(ranks);
  const std::string out = RunRuntime(device, ranks, mesh);
  const nlohmann::json report = nlohmann::json::parse(out.substr(std::min(out.find('{'), out.size())), nullptr, false);
  EXPECT_FALSE(report.is_discarded()) << out;
  return report.is_discarded() ? std::vector<double>{} : report["losses"].get<std::vector<double>>();
}

void ExpectSameLosses(const std::vector<double>& cpu, const std::vector<double>& gpu) {
  ASSERT_EQ(cpu.size(), 6u);
  ASSERT_EQ(gpu.size(), cpu.size());
  for (size_t i = 0; i < cpu.size(); ++i) {
    EXPECT_NEAR(gpu[i], cpu[i], 1e-4 * cpu[i]) << "step " << i;
    std::printf("step %zu  cpu %.7f  cuda %.7f  relative difference %.2e\n", i, cpu[i], gpu[i], (gpu[i] - cpu[i]) / cpu[i]);
  }
}

TEST(GpuTrainEquivalenceTest, OneRankMatchesTheCpuRuntime) {
  std::string why;
  if (!shardsim::cuda::HasDevice(&why)) GTEST_SKIP() << "CUDA path not checked: " << why;
  ExpectSameLosses(Losses("cpu"), Losses("cuda"));
}

// Two data-parallel ranks sharing the GPU, gradients summed over MPI through host memory, against
// the CPU runtime's two ranks (and so against its one: the runtime's own tests tie them).
TEST(GpuTrainEquivalenceTest, DataParallelRanksMatchTheCpuRuntime) {
  std::string why;
  if (!shardsim::cuda::HasDevice(&why)) GTEST_SKIP() << "CUDA path not checked: " << why;
  ExpectSameLosses(Losses("cpu", 2), Losses("cuda", 2));
}

// The same with the reduction after the backward instead of overlapped with it (the plan's
// overlap.data, on by default: each layer's gradients reduced as the backward finishes them).
TEST(GpuTrainEquivalenceTest, DataParallelRanksWithoutOverlapMatchTheCpuRuntime) {
  std::string why;
  if (!shardsim::cuda::HasDevice(&why)) GTEST_SKIP() << "CUDA path not checked: " << why;
  ExpectSameLosses(Losses("cpu", 2), Losses("cuda", 2, "--set mesh.data=2 --set overlap.data=false"));
}

// Two tensor-parallel ranks sharing the GPU (heads, MLP width and vocabulary split; partial sums
// and the loss's row figures reduced over MPI through host memory) against the CPU runtime's.
TEST(GpuTrainEquivalenceTest, TensorParallelRanksMatchTheCpuRuntime) {
  std::string why;
  if (!shardsim::cuda::HasDevice(&why)) GTEST_SKIP() << "CUDA path not checked: " << why;
  const std::string mesh = "--set mesh.tensor=2";
  ExpectSameLosses(Losses("cpu", 2, mesh), Losses("cuda", 2, mesh));
}

// Two pipeline stages (layers 0-1 with the embedding, 2-3 with the head), activations and their
// gradients sent between them through host memory.
TEST(GpuTrainEquivalenceTest, PipelineStagesMatchTheCpuRuntime) {
  std::string why;
  if (!shardsim::cuda::HasDevice(&why)) GTEST_SKIP() << "CUDA path not checked: " << why;
  const std::string mesh = "--set mesh.pipeline=2";
  ExpectSameLosses(Losses("cpu", 2, mesh), Losses("cuda", 2, mesh));
}

// The same stages under GPipe: the first stage holds all four micro-batches' activations before
// the first backward (1F1B above holds two), each in a slot of its own.
TEST(GpuTrainEquivalenceTest, PipelineStagesUnderGPipeMatchTheCpuRuntime) {
  std::string why;
  if (!shardsim::cuda::HasDevice(&why)) GTEST_SKIP() << "CUDA path not checked: " << why;
  const std::string mesh = "--set mesh.pipeline=2 --set pipeline_schedule=gpipe";
  ExpectSameLosses(Losses("cpu", 2, mesh), Losses("cuda", 2, mesh));
}

// Two axes together: four ranks on the GPU.
TEST(GpuTrainEquivalenceTest, DataAndTensorParallelRanksMatchTheCpuRuntime) {
  std::string why;
  if (!shardsim::cuda::HasDevice(&why)) GTEST_SKIP() << "CUDA path not checked: " << why;
  const std::string mesh = "--set mesh.data=2 --set mesh.tensor=2";
  ExpectSameLosses(Losses("cpu", 4, mesh), Losses("cuda", 4, mesh));
}

TEST(GpuTrainEquivalenceTest, TensorParallelPipelineStagesMatchTheCpuRuntime) {
  std::string why;
  if (!shardsim::cuda::HasDevice(&why)) GTEST_SKIP() << "CUDA path not checked: " << why;
  const std::string mesh = "--set mesh.tensor=2 --set mesh.pipeline=2";
  ExpectSameLosses(Losses("cpu", 4, mesh), Losses("cuda", 4, mesh));
}

// Two context ranks, two zigzag chunks of each sequence each: on the GPU K and V all-gathered
// and dK, dV reduce-scattered over MPI through host memory (the plan's context_kv all-gather),
// on the CPU passed round the ring; the same sums. Gradients summed over context.
TEST(GpuTrainEquivalenceTest, ContextParallelRanksMatchTheCpuRuntime) {
  std::string why;
  if (!shardsim::cuda::HasDevice(&why)) GTEST_SKIP() << "CUDA path not checked: " << why;
  const std::string mesh = "--set mesh.context=2";
  ExpectSameLosses(Losses("cpu", 2, mesh), Losses("cuda", 2, mesh + " --set context_kv=all-gather"));
}

TEST(GpuTrainEquivalenceTest, TensorAndContextParallelRanksMatchTheCpuRuntime) {
  std::string why;
  if (!shardsim::cuda::HasDevice(&why)) GTEST_SKIP() << "CUDA path not checked: " << why;
  const std::string mesh = "--set mesh.tensor=2 --set mesh.context=2";
  ExpectSameLosses(Losses("cpu", 4, mesh), Losses("cuda", 4, mesh + " --set context_kv=all-gather"));
}

// The overlapped reduction on pipeline stages (a middle or last stage streams no embedding) and
// over data x context (the reduction over both axes at once).
TEST(GpuTrainEquivalenceTest, DataParallelPipelineStagesMatchTheCpuRuntime) {
  std::string why;
  if (!shardsim::cuda::HasDevice(&why)) GTEST_SKIP() << "CUDA path not checked: " << why;
  const std::string mesh = "--set mesh.data=2 --set mesh.pipeline=2";
  ExpectSameLosses(Losses("cpu", 4, mesh), Losses("cuda", 4, mesh));
}

TEST(GpuTrainEquivalenceTest, DataAndContextParallelRanksMatchTheCpuRuntime) {
  std::string why;
  if (!shardsim::cuda::HasDevice(&why)) GTEST_SKIP() << "CUDA path not checked: " << why;
  const std::string mesh = "--set mesh.data=2 --set mesh.context=2";
  ExpectSameLosses(Losses("cpu", 4, mesh), Losses("cuda", 4, mesh + " --set context_kv=all-gather"));
}

// What the GPU path does not run is refused with one line naming it, on every rank alike and
// before any GPU is looked for (so these run without one).
TEST(GpuTrainRefusalTest, FsdpMeshIsRefusedWithTheAxesItRuns) {
  int status = 0;
  const std::string out = RunRuntime("cuda", 2, "--set mesh.fsdp=2", &status);
  EXPECT_NE(status, 0) << out;
  EXPECT_NE(out.find("runs data, tensor, pipeline and context parallelism only"), std::string::npos) << out;
  EXPECT_NE(out.find("fsdp"), std::string::npos) << out;
}

TEST(GpuTrainRefusalTest, RingContextExchangeIsRefusedWithTheHint) {
  int status = 0;
  const std::string out = RunRuntime("cuda", 2, "--set mesh.context=2", &status);
  EXPECT_NE(status, 0) << out;
  EXPECT_NE(out.find("plan:/context_kv"), std::string::npos) << out;
  EXPECT_NE(out.find("--set context_kv=all-gather"), std::string::npos) << out;
}

TEST(GpuTrainRefusalTest, SequenceParallelismIsRefused) {
  int status = 0;
  const std::string out = RunRuntime("cuda", 2, "--set mesh.tensor=2 --set sequence_parallel=true", &status);
  EXPECT_NE(status, 0) << out;
  EXPECT_NE(out.find("sequence parallelism is not on the GPU path yet"), std::string::npos) << out;
}

TEST(GpuTrainRefusalTest, ZeroBubbleScheduleIsRefusedWithTheHint) {
  int status = 0;
  const std::string out = RunRuntime("cuda", 2, "--set mesh.pipeline=2 --set pipeline_schedule=zb-h1", &status);
  EXPECT_NE(status, 0) << out;
  EXPECT_NE(out.find("runs weight gradients apart from input gradients"), std::string::npos) << out;
  EXPECT_NE(out.find("--set pipeline_schedule=1f1b"), std::string::npos) << out;
}

// A tied head on the last stage would need the embedding's copy kept in step with the first
// stage's: refused on every rank (rank 0 holds the embedding; a refusal on the last stage alone
// would leave it waiting for activations until the timeout).
TEST(GpuTrainRefusalTest, TiedHeadOnALaterPipelineStageIsRefusedOnEveryRank) {
  char path[] = "/tmp/shardsim-tied-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  const std::string model = R"({"name": "tiny-tied", "num_layers": 4, "hidden_size": 256, "num_heads": 8, "num_kv_heads": 4,
    "head_dim": 32, "ffn_hidden_size": 768, "mlp": "swiglu", "norm": "rmsnorm", "position": "rope", "vocab_size": 256,
    "max_seq_len": 1024, "tied_embeddings": true, "linear_bias": false, "qkv_bias": false, "dropout": false, "moe": null,
    "mla": null, "source": "a tied tiny-dense for this test"})";
  ASSERT_EQ(write(fd, model.data(), model.size()), static_cast<ssize_t>(model.size()));
  close(fd);
  int status = 0;
  const auto start = std::chrono::steady_clock::now();
  const std::string out = RunRuntime("cuda", 2, "--set mesh.pipeline=2 --timeout 60", &status, path);
  std::remove(path);
  EXPECT_NE(status, 0) << out;
  EXPECT_NE(out.find("tied output head on pipeline stage 1"), std::string::npos) << out;
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 30.0) << out;
}

}  // namespace
