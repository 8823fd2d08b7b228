// `shardsim-runtime train --device cuda` against the CPU runtime: the same model, initial values,
// corpus batches and AdamW, fp32 on both sides (no TF32); the losses agree step by step to 1e-4
// relative, with micro-batches accumulated per step, on one rank and on two data-parallel ranks.
// Skips without a GPU.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cuda/device_info.h"

namespace {

// `ranks` > 1: under mpiexec (SHARDSIM_MPIEXEC, else the one CMake found), data parallel.
std::vector<double> Losses(const std::string& device, int ranks = 1) {
  const char* mpiexec = std::getenv("SHARDSIM_MPIEXEC");
  const std::string launch = ranks == 1 ? "" : std::string(mpiexec != nullptr ? mpiexec : SHARDSIM_MPIEXEC) + " -n " + std::to_string(ranks) + " --oversubscribe ";
  // SHARDSIM_RUNTIME_BIN: the program to run where the build folder's path does not exist (a
  // copy of the binaries on a GPU machine).
  const char* bin = std::getenv("SHARDSIM_RUNTIME_BIN");
  const std::string command = launch + std::string(bin != nullptr ? bin : SHARDSIM_RUNTIME) +
                              " train --model tiny-dense --set global_batch_size=8 --set micro_batch_size=2 --set seq_len=128"
                              " --set dtype=fp32 --steps 6 --json --set mesh.data=" + std::to_string(ranks) + " --device " + device + " 2>&1";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), pclose);
  std::string out;
  std::array<char, 4096> buf{};
  while (pipe && fgets(buf.data(), buf.size(), pipe.get()) != nullptr) out += buf.data();
  const nlohmann::json report = nlohmann::json::parse(out.substr(std::min(out.find('{'), out.size())), nullptr, false);
  EXPECT_FALSE(report.is_discarded()) << command << "\n" << out;
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

}  // namespace
