// `shardsim-runtime calibrate` (launched by `shardsim calibrate` under mpirun, one rank per core
// of every host): measures the machines this job runs on and writes a cluster JSON whose
// devices are the job's ranks, with the measured rates as its calibration (core/calibration.h).
#pragma once

#include <cstdint>
#include <string>

namespace shardsim::validation {

struct CalibrateOptions {
  std::string out = "cluster.json";  // the cluster JSON to write
  int64_t hosts = 1;                 // hosts the ranks fill in order (equal ranks per host)
  int64_t repeats = 3;               // whole measurements; medians kept, spread reported
  bool json = false;                 // print the cluster JSON's summary as JSON
};

// Collective over MPI_COMM_WORLD; rank 0 writes and prints. Returns the exit status.
int RunCalibrate(const CalibrateOptions& options);

}  // namespace shardsim::validation
