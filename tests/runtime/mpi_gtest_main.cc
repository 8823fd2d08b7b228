// main() of the MPI googletest binaries: every rank runs every test (they are collective), rank 0
// prints, and the job fails if any rank failed.
#include <mpi.h>

#include <gtest/gtest.h>

#include "runtime/gemm.h"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  shardsim::runtime::UseOneBlasThread();
  ::testing::InitGoogleTest(&argc, argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  int failed = RUN_ALL_TESTS();
  MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return failed;
}
