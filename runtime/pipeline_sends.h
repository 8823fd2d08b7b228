// Pipeline sends in flight (activations forward, gradients backward), each with the buffer MPI
// reads; kept in a list, so a buffer stays where MPI reads it until its send completes. The CPU
// trainer and the GPU path send between stages through it.
#pragma once

#include <cstdint>
#include <list>
#include <string>
#include <vector>

#include <mpi.h>

#include "runtime/comm.h"

namespace shardsim::runtime {

class PipelineSends {
 public:
  explicit PipelineSends(MeshComms& comms) : comms_(comms) {}
  // The buffer of the next send, `count` floats, for the caller to fill; Start sends it.
  std::vector<float>& Next(int64_t count);
  // Starts the send of the buffer Next gave last, without waiting.
  void Start(int dest, int tag, const std::string& what);
  // Frees the buffers of the sends that completed (MPI_Test also moves them along).
  void Reap();
  // Waits for every send (past the runtime's timeout, aborts naming `what`) and frees them.
  void WaitAll(const std::string& what);
  // Bytes of the buffers held.
  int64_t HeldBytes() const;

 private:
  struct Send {
    std::vector<float> data;
    MPI_Request request = MPI_REQUEST_NULL;
  };
  MeshComms& comms_;
  std::list<Send> sends_;
};

}  // namespace shardsim::runtime
