// A job that goes wrong on purpose, to check it ends with a message instead of hanging (run by
// ctest under mpiexec -n 2; see tests/runtime/CMakeLists.txt for the expected output):
//   silent: rank 1 never sends what rank 0 waits for -> rank 0 times out naming itself and the op.
//   die:    rank 1 crashes mid-step -> mpiexec ends the whole job.
#include <mpi.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "runtime/comm.h"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const std::string mode = argc > 1 ? argv[1] : "silent";
  shardsim::PlanSpec plan;
  plan.mesh.pipeline = 2;
  shardsim::runtime::MeshComms comms(MPI_COMM_WORLD, plan);
  comms.set_timeout_s(1);
  std::vector<float> buffer(16);
  if (comms.rank() == 1) {
    if (mode == "die") std::abort();
    std::this_thread::sleep_for(std::chrono::seconds(30));  // alive but silent
  } else {
    comms.Receive(buffer.data(), 16, 1, 7, "pipeline receive of activations for micro-batch 0 of part 1");
  }
  MPI_Finalize();
  return 0;
}
