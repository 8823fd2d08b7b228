#include "validation/calibrate_comm.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/stats.h"
#include "runtime/gemm.h"

namespace shardsim::validation {
namespace {

// Repetitions of one timing: enough to fill `min_s` judged from a first trial, agreed by all
// ranks of `comm` (they must call the collective the same number of times).
int Repetitions(MPI_Comm comm, const std::function<void()>& run, double min_s) {
  MPI_Barrier(comm);
  const double t0 = MPI_Wtime();
  run();
  double once = MPI_Wtime() - t0;
  MPI_Allreduce(MPI_IN_PLACE, &once, 1, MPI_DOUBLE, MPI_MAX, comm);
  return std::clamp(static_cast<int>(min_s / std::max(once, 1e-7)), 3, 2000);
}

// The median call's seconds over the repetitions (robust to a rank being descheduled now and
// then), the slowest rank of `comm`.
double TimeCalls(MPI_Comm comm, const std::function<void()>& run, double min_s) {
  const int reps = Repetitions(comm, run, min_s);
  std::vector<double> times(static_cast<size_t>(reps));
  MPI_Barrier(comm);
  for (double& t : times) {
    const double t0 = MPI_Wtime();
    run();
    t = MPI_Wtime() - t0;
  }
  double seconds = UpperMedian(times);
  MPI_Allreduce(MPI_IN_PLACE, &seconds, 1, MPI_DOUBLE, MPI_MAX, comm);
  return seconds;
}

// Starts `op` ("all-reduce", "all-gather", "reduce-scatter", "all-to-all") of `floats` floats
// (nccl-tests size) over `comm`'s `group` ranks with the runtime's calls (runtime/comm.cc:
// non-blocking, then waited for; Open MPI runs them with other algorithms than the blocking ones).
MPI_Request StartCollective(const std::string& op, const float* in, float* out, int floats, int group, MPI_Comm comm) {
  const int part = floats / group;
  MPI_Request request = MPI_REQUEST_NULL;
  if (op == "all-reduce") {
    MPI_Iallreduce(in, out, floats, MPI_FLOAT, MPI_SUM, comm, &request);
  } else if (op == "all-gather") {
    MPI_Iallgather(in, part, MPI_FLOAT, out, part, MPI_FLOAT, comm, &request);
  } else if (op == "reduce-scatter") {
    MPI_Ireduce_scatter_block(in, out, part, MPI_FLOAT, MPI_SUM, comm, &request);
  } else {
    MPI_Ialltoall(in, part, MPI_FLOAT, out, part, MPI_FLOAT, comm, &request);
  }
  return request;
}

}  // namespace

CollectiveCurve MeasurePointToPoint(MPI_Comm world, int a, int b, const std::vector<double>& sizes, double min_s) {
  int rank = 0;
  MPI_Comm_rank(world, &rank);
  MPI_Comm pair = MPI_COMM_NULL;
  MPI_Comm_split(world, rank == a || rank == b ? 0 : MPI_UNDEFINED, rank, &pair);
  CollectiveCurve curve{"permute", 2, "shm", {}};
  std::vector<double> seconds(sizes.size(), 0.0);
  if (pair != MPI_COMM_NULL) {
    int me = 0;
    MPI_Comm_rank(pair, &me);
    std::vector<char> buffer(static_cast<size_t>(sizes.back()), 1);
    for (size_t i = 0; i < sizes.size(); ++i) {
      const int bytes = static_cast<int>(sizes[i]);
      seconds[i] = TimeCalls(
                       pair,
                       [&] {
                         if (me == 0) {
                           MPI_Send(buffer.data(), bytes, MPI_BYTE, 1, 0, pair);
                           MPI_Recv(buffer.data(), bytes, MPI_BYTE, 1, 0, pair, MPI_STATUS_IGNORE);
                         } else {
                           MPI_Recv(buffer.data(), bytes, MPI_BYTE, 0, 0, pair, MPI_STATUS_IGNORE);
                           MPI_Send(buffer.data(), bytes, MPI_BYTE, 0, 0, pair);
                         }
                       },
                       min_s) /
                   2;
    }
    MPI_Comm_free(&pair);
  }
  MPI_Bcast(seconds.data(), static_cast<int>(seconds.size()), MPI_DOUBLE, a, world);
  for (size_t i = 0; i < sizes.size(); ++i) curve.points.push_back({sizes[i], seconds[i]});
  return curve;
}

std::vector<CollectiveCurve> MeasureCollectives(MPI_Comm world, int group, int stride, const std::vector<double>& sizes, double min_s) {
  int rank = 0, size = 0;
  MPI_Comm_rank(world, &rank);
  MPI_Comm_size(world, &size);
  SHARDSIM_CHECK(group >= 2 && size % (group * stride) == 0, "collective groups must tile the world");
  // Groups: blocks of group x stride ranks, inside a block every stride-th rank.
  const int block = rank / (group * stride), offset = rank % stride;
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Comm_split(world, block * stride + offset, rank, &comm);
  // Buffers rotate through pools larger than the caches: training's gradients and activations
  // come from memory, not from the last call's cache lines.
  const size_t largest = static_cast<size_t>(sizes.back()), pool = std::max(largest, size_t{64} << 20);
  std::vector<char> in_pool(pool, 1), out_pool(pool, 0);
  size_t next = 0;
  std::vector<CollectiveCurve> curves;
  for (const char* op : {"all-reduce", "all-gather", "reduce-scatter", "all-to-all"}) {
    CollectiveCurve curve{op, group, "shm", {}};
    for (double bytes : sizes) {
      // nccl-tests sizes: the buffer (all-reduce), the gathered output (all-gather), the input
      // before scattering (reduce-scatter), each rank's whole send buffer (all-to-all).
      const int floats = static_cast<int>(bytes / 4);
      const size_t copies = pool / static_cast<size_t>(bytes);
      const std::string name = op;
      char* in_base = in_pool.data();
      char* out_base = out_pool.data();
      // Each call's buffers: the next slot of the pools (every rank of a group in step).
      auto slot = [&] {
        const size_t at = (next++ % copies) * static_cast<size_t>(bytes);
        return std::pair<char*, char*>{in_base + at, out_base + at};
      };
      auto run = [&] {
        auto [in, out] = slot();
        MPI_Request request = StartCollective(name, reinterpret_cast<const float*>(in), reinterpret_cast<float*>(out), floats, group, comm);
        MPI_Wait(&request, MPI_STATUS_IGNORE);
      };
      // Every group runs at once; the world's slowest rank counts.
      curve.points.push_back({bytes, TimeCalls(world, run, min_s)});
    }
    curves.push_back(std::move(curve));
  }
  MPI_Comm_free(&comm);
  return curves;
}

double MeasureCollectiveHidden(MPI_Comm world, int group, double bytes, double min_s) {
  int rank = 0;
  MPI_Comm_rank(world, &rank);
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Comm_split(world, rank / group, rank, &comm);
  const int floats = static_cast<int>(bytes / 4);
  std::vector<float> in(static_cast<size_t>(floats), 1.0f), out(static_cast<size_t>(floats), 0.0f);
  // Compute: products of 256 x 256 matrices, as many as take about as long as the collective
  // (longer compute would only add its own noise to the difference).
  constexpr int kSide = 256;
  std::vector<float> a(kSide * kSide, 0.5f), b(kSide * kSide, 0.5f), c(kSide * kSide, 0.0f);
  int products = 1;
  auto compute = [&] {
    for (int i = 0; i < products; ++i) runtime::Gemm(c.data(), a.data(), b.data(), kSide, kSide, kSide, runtime::Transpose::kNo, runtime::Transpose::kNo, 1.0f, 0.0f);
  };
  std::vector<double> hidden;
  for (const char* op : {"all-gather", "reduce-scatter", "all-reduce"}) {
    auto start = [&](MPI_Request* request) { *request = StartCollective(op, in.data(), out.data(), floats, group, comm); };
    const double alone = TimeCalls(world, [&] {
      MPI_Request request;
      start(&request);
      MPI_Wait(&request, MPI_STATUS_IGNORE);
    }, min_s);
    products = 1;
    const double one = TimeCalls(world, compute, min_s);
    products = std::clamp(static_cast<int>(std::lround(alone / std::max(one, 1e-9))), 1, 100000);
    const double computing = TimeCalls(world, compute, min_s);
    const double both = TimeCalls(world, [&] {
      MPI_Request request;
      start(&request);
      compute();
      MPI_Wait(&request, MPI_STATUS_IGNORE);
    }, min_s);
    hidden.push_back(std::clamp((alone + computing - both) / alone, 0.0, 1.0));
  }
  MPI_Comm_free(&comm);
  std::sort(hidden.begin(), hidden.end());
  return hidden[1];  // the median of the three
}

}  // namespace shardsim::validation
