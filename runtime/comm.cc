#include "runtime/comm.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

#include "core/error.h"
#include "core/host_resources.h"
#include "runtime/trace.h"

namespace shardsim::runtime {

void CheckMpi(int code, MPI_Comm comm, const std::string& what) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  int rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::fprintf(stderr, "shardsim-runtime: error: rank %d: MPI error in %s: %.*s\n", rank, what.c_str(), length, text);
  MPI_Abort(comm == MPI_COMM_NULL ? MPI_COMM_WORLD : comm, 3);
}

MeshComms::MeshComms(MPI_Comm world, const PlanSpec& plan) : world_(world), mesh_(plan.mesh, plan.mesh_order) {
  MPI_Comm_rank(world_, &rank_);
  int size = 0;
  MPI_Comm_size(world_, &size);
  SHARDSIM_CHECK(size == mesh_.size(), "the MPI job has " + std::to_string(size) + " ranks, the plan's mesh " + std::to_string(mesh_.size()));
  MPI_Comm_set_errhandler(world_, MPI_ERRORS_RETURN);
  MPI_Comm host = MPI_COMM_NULL;
  CheckMpi(MPI_Comm_split_type(world_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &host), world_, "communicator split by host");
  int host_ranks = 1;
  MPI_Comm_size(host, &host_ranks);
  MPI_Comm_free(&host);
  oversubscribed_ = host_ranks > UsableCores();
  // Splitting is collective over the whole world, so every communicator is made here, in the
  // same order on every rank: one per subset of the axes larger than one, in mesh_order.
  std::vector<std::string> used;
  for (const std::string& a : plan.mesh_order) {
    if (plan.mesh.Size(a) > 1) used.push_back(a);
  }
  for (uint32_t subset = 1; subset < (1u << used.size()); ++subset) {
    std::vector<std::string> axes;
    for (size_t i = 0; i < used.size(); ++i) {
      if (subset & (1u << i)) axes.push_back(used[i]);
    }
    const std::vector<int64_t> group = mesh_.Group(rank_, axes);
    const int color = static_cast<int>(group.front());  // the group's first rank names it
    const int key = static_cast<int>(std::find(group.begin(), group.end(), rank_) - group.begin());
    MPI_Comm comm = MPI_COMM_NULL;
    CheckMpi(MPI_Comm_split(world_, color, key, &comm), world_, "communicator split");
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    std::sort(axes.begin(), axes.end());
    comms_.emplace(axes, comm);
  }
}

MeshComms::~MeshComms() {
  for (auto& [axes, comm] : comms_) MPI_Comm_free(&comm);
}

MPI_Comm MeshComms::Comm(const std::vector<std::string>& axes) {
  std::vector<std::string> key;
  for (const std::string& a : axes) {
    if (mesh_.AxisSize(a) > 1) key.push_back(a);
  }
  std::sort(key.begin(), key.end());
  const auto it = comms_.find(key);
  SHARDSIM_CHECK(it != comms_.end(), "no communicator over these axes");
  return it->second;
}

int MeshComms::PipelinePeer(int64_t stage) const {
  const std::vector<int64_t> group = mesh_.Group(rank_, {"pipeline"});
  return static_cast<int>(group[static_cast<size_t>(stage)]);
}

int MeshComms::GroupRank(const std::vector<std::string>& axes) {
  if (GroupSize(axes) == 1) return 0;
  int rank = 0;
  MPI_Comm_rank(Comm(axes), &rank);
  return rank;
}

int64_t MeshComms::GroupSize(const std::vector<std::string>& axes) const {
  int64_t n = 1;
  for (const std::string& a : axes) n *= mesh_.AxisSize(a);
  return n;
}

void MeshComms::Wait(MPI_Request* request, const std::string& what) {
  const auto start = std::chrono::steady_clock::now();
  for (int64_t spins = 0;; ++spins) {
    int done = 0;
    CheckMpi(MPI_Test(request, &done, MPI_STATUS_IGNORE), world_, what);
    if (done) return;
    // More ranks than cores on this host: sleep, so that the rank it waits on runs. Otherwise poll,
    // as Open MPI's own blocking calls do unless oversubscribed: its non-blocking collectives move
    // only inside MPI calls, and a sleep of 50 us between tests slowed the suite's tensor plan
    // from 160 to 177 ms a step. (Cores as UsableCores counts them: a CPU quota it does not see
    // makes ranks poll where they should sleep, slower but correct.)
    if (oversubscribed_ && spins > 1000) std::this_thread::sleep_for(std::chrono::microseconds(50));
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (waited > timeout_s_) {
      std::fprintf(stderr, "shardsim-runtime: error: rank %d: timed out after %g s waiting for %s (a rank it waits on is stopped, dead or stuck; raise --timeout if it is only slow)\n", rank_,
                   timeout_s_, what.c_str());
      std::fflush(stderr);
      MPI_Abort(world_, 4);
    }
  }
}

void MeshComms::Receive(float* data, int64_t count, int source, int tag, const std::string& what) {
  MPI_Request request = StartReceive(data, count, source, tag, what);
  Wait(&request, what + " from rank " + std::to_string(source));
}

void MeshComms::Send(const float* data, int64_t count, int dest, int tag, const std::string& what) {
  MPI_Request request = StartSend(data, count, dest, tag, what);
  Wait(&request, what + " to rank " + std::to_string(dest));
}

MPI_Request MeshComms::StartSend(const float* data, int64_t count, int dest, int tag, const std::string& what) {
  MPI_Request request;
  CheckMpi(MPI_Isend(data, static_cast<int>(count), MPI_FLOAT, dest, tag, world_, &request), world_, what);
  return request;
}

MPI_Request MeshComms::StartReceive(float* data, int64_t count, int source, int tag, const std::string& what) {
  MPI_Request request;
  CheckMpi(MPI_Irecv(data, static_cast<int>(count), MPI_FLOAT, source, tag, world_, &request), world_, what);
  return request;
}

void MeshComms::ExchangeSumWithStage(float* data, int64_t count, int64_t stage, const std::string& what) {
  if (count == 0) return;
  Record(CollectiveOp::kPermute, {"pipeline"}, count, what);
  // Far above the pipeline's point-to-point tags (trainer.cc), which stay below 4 x positions.
  constexpr int kTag = 32000;
  const int peer = PipelinePeer(stage);
  std::vector<float> theirs(static_cast<size_t>(count));
  MPI_Request requests[2];
  CheckMpi(MPI_Irecv(theirs.data(), static_cast<int>(count), MPI_FLOAT, peer, kTag, world_, &requests[0]), world_, what);
  CheckMpi(MPI_Isend(data, static_cast<int>(count), MPI_FLOAT, peer, kTag, world_, &requests[1]), world_, what);
  Wait(&requests[0], what + " from rank " + std::to_string(peer));
  Wait(&requests[1], what + " to rank " + std::to_string(peer));
  for (int64_t i = 0; i < count; ++i) data[i] += theirs[static_cast<size_t>(i)];
}

void MeshComms::Record(CollectiveOp op, const std::vector<std::string>& axes, int64_t elements, const std::string& what) {
  if (!log_) return;
  std::vector<std::string> used;
  for (const std::string& a : axes) {
    if (mesh_.AxisSize(a) > 1) used.push_back(a);
  }
  log_->push_back({op, used, elements, what, tracer_ ? tracer_->current_key() : std::string()});
}

MPI_Request MeshComms::StartAllReduce(void* data, int64_t count, MPI_Datatype type, MPI_Op reduce, const std::vector<std::string>& axes,
                                      const std::string& what) {
  MPI_Request request = MPI_REQUEST_NULL;
  if (GroupSize(axes) == 1 || count == 0) return request;
  Record(CollectiveOp::kAllReduce, axes, count, what);
  MPI_Comm comm = Comm(axes);
  CheckMpi(MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(count), type, reduce, comm, &request), comm, what);
  return request;
}

void MeshComms::AllReduceSum(float* data, int64_t count, const std::vector<std::string>& axes, const std::string& what) {
  MPI_Request request = StartAllReduce(data, count, MPI_FLOAT, MPI_SUM, axes, what);
  if (request != MPI_REQUEST_NULL) Wait(&request, what);
}

MPI_Request MeshComms::StartAllReduceSum(float* data, int64_t count, const std::vector<std::string>& axes, const std::string& what) {
  return StartAllReduce(data, count, MPI_FLOAT, MPI_SUM, axes, what);
}

void MeshComms::AllReduceSum(double* data, int64_t count, const std::vector<std::string>& axes, const std::string& what) {
  MPI_Request request = StartAllReduce(data, count, MPI_DOUBLE, MPI_SUM, axes, what);
  if (request != MPI_REQUEST_NULL) Wait(&request, what);
}

void MeshComms::AllReduceMax(float* data, int64_t count, const std::vector<std::string>& axes, const std::string& what) {
  MPI_Request request = StartAllReduce(data, count, MPI_FLOAT, MPI_MAX, axes, what);
  if (request != MPI_REQUEST_NULL) Wait(&request, what);
}

MPI_Request MeshComms::StartAllGather(float* out, const float* in, int64_t count, const std::vector<std::string>& axes, const std::string& what) {
  SHARDSIM_CHECK(GroupSize(axes) > 1, "a gather over one rank");
  Record(CollectiveOp::kAllGather, axes, count * GroupSize(axes), what);
  MPI_Comm comm = Comm(axes);
  MPI_Request request = MPI_REQUEST_NULL;
  CheckMpi(MPI_Iallgather(in, static_cast<int>(count), MPI_FLOAT, out, static_cast<int>(count), MPI_FLOAT, comm, &request), comm, what);
  return request;
}

MPI_Request MeshComms::StartReduceScatterSum(float* out, const float* in, int64_t count, const std::vector<std::string>& axes,
                                             const std::string& what) {
  SHARDSIM_CHECK(GroupSize(axes) > 1, "a reduce-scatter over one rank");
  Record(CollectiveOp::kReduceScatter, axes, count * GroupSize(axes), what);
  MPI_Comm comm = Comm(axes);
  MPI_Request request = MPI_REQUEST_NULL;
  CheckMpi(MPI_Ireduce_scatter_block(in, out, static_cast<int>(count), MPI_FLOAT, MPI_SUM, comm, &request), comm, what);
  return request;
}

void MeshComms::AllToAllV(float* out, const std::vector<int>& receive_counts, const float* in, const std::vector<int>& send_counts,
                          const std::vector<std::string>& axes, const std::string& what) {
  const int64_t n = GroupSize(axes);
  SHARDSIM_CHECK(static_cast<int64_t>(send_counts.size()) == n && static_cast<int64_t>(receive_counts.size()) == n, "one count per group rank");
  std::vector<int> send_at(static_cast<size_t>(n), 0), receive_at(static_cast<size_t>(n), 0);
  int64_t sent = 0, received = 0;
  for (size_t i = 0; i < static_cast<size_t>(n); ++i) {
    send_at[i] = static_cast<int>(sent), receive_at[i] = static_cast<int>(received);
    sent += send_counts[i], received += receive_counts[i];
  }
  if (n == 1) {
    std::copy(in, in + sent, out);
    return;
  }
  Record(CollectiveOp::kAllToAll, axes, sent, what);
  MPI_Comm comm = Comm(axes);
  MPI_Request request;
  CheckMpi(MPI_Ialltoallv(in, send_counts.data(), send_at.data(), MPI_FLOAT, out, receive_counts.data(), receive_at.data(), MPI_FLOAT, comm, &request),
           comm, what);
  Wait(&request, what);
}

void MeshComms::AllToAll(int* out, const int* in, int count, const std::vector<std::string>& axes, const std::string& what) {
  if (GroupSize(axes) == 1) {
    std::copy(in, in + count, out);
    return;
  }
  MPI_Comm comm = Comm(axes);
  MPI_Request request;
  CheckMpi(MPI_Ialltoall(in, count, MPI_INT, out, count, MPI_INT, comm, &request), comm, what);
  Wait(&request, what);
}

void MeshComms::AllGather(float* out, const float* in, int64_t count, const std::vector<std::string>& axes, const std::string& what) {
  if (GroupSize(axes) == 1) {
    std::copy(in, in + count, out);
    return;
  }
  Record(CollectiveOp::kAllGather, axes, count * GroupSize(axes), what);
  MPI_Comm comm = Comm(axes);
  MPI_Request request;
  CheckMpi(MPI_Iallgather(in, static_cast<int>(count), MPI_FLOAT, out, static_cast<int>(count), MPI_FLOAT, comm, &request), comm, what);
  Wait(&request, what);
}

void MeshComms::ReduceScatterSum(float* out, const float* in, int64_t count, const std::vector<std::string>& axes, const std::string& what) {
  if (GroupSize(axes) == 1) {
    std::copy(in, in + count, out);
    return;
  }
  Record(CollectiveOp::kReduceScatter, axes, count * GroupSize(axes), what);
  MPI_Comm comm = Comm(axes);
  MPI_Request request;
  CheckMpi(MPI_Ireduce_scatter_block(in, out, static_cast<int>(count), MPI_FLOAT, MPI_SUM, comm, &request), comm, what);
  Wait(&request, what);
}

}  // namespace shardsim::runtime
