// The runtime's MPI layer: one communicator per set of mesh axes, built from the same rank rule
// as the simulator (core/mesh.h LogicalMesh), and the collectives the strategies issue on them.
// An MPI error aborts the whole job with the rank and the operation named, never a hang.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/collective_op.h"
#include "core/mesh.h"
#include "core/plan_spec.h"

namespace shardsim::runtime {

// One collective as issued, in the step program's terms: the operation, the mesh axes, and its
// size in elements by the nccl-tests convention (all-gather: the gathered output; reduce-scatter:
// the input before scattering; all-reduce: the buffer).
struct IssuedCollective {
  CollectiveOp op;
  std::vector<std::string> axes;
  int64_t elements = 0;
  std::string what;
  std::string key;  // the op key of the trace span open when it was issued ("" outside any)
};

class Tracer;

// Every communicator one rank needs for a plan. `world` holds plan.mesh.Product() ranks.
class MeshComms {
 public:
  // REQUIRES: the size of `world` equals the mesh product.
  MeshComms(MPI_Comm world, const PlanSpec& plan);
  ~MeshComms();
  MeshComms(const MeshComms&) = delete;
  MeshComms& operator=(const MeshComms&) = delete;

  int rank() const { return rank_; }
  const LogicalMesh& mesh() const { return mesh_; }
  // This rank's position along `axis`.
  int64_t Coordinate(const std::string& axis) const { return mesh_.Coordinate(rank_, axis); }
  // The communicator over the group along `axes` that holds this rank. Its ranks follow the
  // mesh_order (as Group() with the axes in that order), whatever the order of `axes`.
  MPI_Comm Comm(const std::vector<std::string>& axes);
  // The world rank of the pipeline neighbour `stage` with the same other coordinates.
  int PipelinePeer(int64_t stage) const;
  MPI_Comm world() const { return world_; }

  // Collectives over `axes` (no-ops over one rank). Sums are in float; `what` names the op in
  // error messages ("tensor all-reduce of layer 3 attention output").
  void AllReduceSum(float* data, int64_t count, const std::vector<std::string>& axes, const std::string& what);
  // Starts an all-reduce and returns at once; Wait() on the request before touching `data`.
  MPI_Request StartAllReduceSum(float* data, int64_t count, const std::vector<std::string>& axes, const std::string& what);
  void AllReduceSum(double* data, int64_t count, const std::vector<std::string>& axes, const std::string& what);
  // Element-wise maximum over the group, in place.
  void AllReduceMax(float* data, int64_t count, const std::vector<std::string>& axes, const std::string& what);
  // out [n * count] = the group's `in` [count], in group order.
  void AllGather(float* out, const float* in, int64_t count, const std::vector<std::string>& axes, const std::string& what);
  // out [count] = this rank's block of the sum of every rank's in [n * count].
  void ReduceScatterSum(float* out, const float* in, int64_t count, const std::vector<std::string>& axes, const std::string& what);
  // Non-blocking forms of the two above (REQUIRES: more than one rank over `axes`); Wait() on
  // the request before touching `out` or `in`.
  MPI_Request StartAllGather(float* out, const float* in, int64_t count, const std::vector<std::string>& axes, const std::string& what);
  MPI_Request StartReduceScatterSum(float* out, const float* in, int64_t count, const std::vector<std::string>& axes, const std::string& what);
  // All-to-all over `axes`: `in` holds send_counts[i] elements for group rank i, in group order;
  // `out` receives receive_counts[i] from group rank i, in group order.
  void AllToAllV(float* out, const std::vector<int>& receive_counts, const float* in, const std::vector<int>& send_counts,
                 const std::vector<std::string>& axes, const std::string& what);
  // All-to-all of `count` ints per group rank (sizes exchanged before an AllToAllV; not recorded).
  void AllToAll(int* out, const int* in, int count, const std::vector<std::string>& axes, const std::string& what);
  int64_t GroupSize(const std::vector<std::string>& axes) const;
  // This rank's index in the communicator of `axes` (its block in a reduce-scatter).
  int GroupRank(const std::vector<std::string>& axes);

  // Waits for `request`; past the timeout, aborts the job naming this rank and `what` (a rank
  // that died or a schedule that deadlocks must not hang the job).
  void Wait(MPI_Request* request, const std::string& what);
  // Blocking receive from world rank `source` under the same timeout.
  void Receive(float* data, int64_t count, int source, int tag, const std::string& what);
  // Blocking send to world rank `dest` under the same timeout.
  void Send(const float* data, int64_t count, int dest, int tag, const std::string& what);
  // The send, started: Wait() on the request before touching `data` again.
  MPI_Request StartSend(const float* data, int64_t count, int dest, int tag, const std::string& what);
  // The receive, started: Wait() on the request before reading `data`.
  MPI_Request StartReceive(float* data, int64_t count, int source, int tag, const std::string& what);
  // data[i] += pipeline stage `stage`'s data[i] (the rank with this rank's other coordinates: a
  // swap with it, a permute over pipeline in the step program's terms): both call it with the same count. Blocking, under the timeout.
  void ExchangeSumWithStage(float* data, int64_t count, int64_t stage, const std::string& what);
  void set_timeout_s(double seconds) { timeout_s_ = seconds; }
  // Record every collective issued over more than one rank into `log` (null: stop recording).
  void set_log(std::vector<IssuedCollective>* log) { log_ = log; }
  // Where logged collectives take their op key from (the span open at the time).
  void set_tracer(const Tracer* tracer) { tracer_ = tracer; }
  double timeout_s() const { return timeout_s_; }

 private:
  MPI_Comm world_;
  int rank_ = 0;
  LogicalMesh mesh_;
  std::map<std::vector<std::string>, MPI_Comm> comms_;
  double timeout_s_ = 600;
  bool oversubscribed_ = false;  // more ranks on this host than it has cores
  std::vector<IssuedCollective>* log_ = nullptr;
  const Tracer* tracer_ = nullptr;
  void Record(CollectiveOp op, const std::vector<std::string>& axes, int64_t elements, const std::string& what);
  // An in-place all-reduce of `count` elements of `type` with `reduce`, started (null over one rank).
  MPI_Request StartAllReduce(void* data, int64_t count, MPI_Datatype type, MPI_Op reduce, const std::vector<std::string>& axes,
                             const std::string& what);
};

// Aborts the job naming the rank and `what` when `code` is not MPI_SUCCESS.
void CheckMpi(int code, MPI_Comm comm, const std::string& what);

}  // namespace shardsim::runtime
