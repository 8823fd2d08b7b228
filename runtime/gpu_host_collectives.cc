#include "runtime/gpu_host_collectives.h"

#include <algorithm>
#include <climits>

#include "core/error.h"

namespace shardsim::runtime {
namespace {

std::string ReductionName(int64_t offset) {
  return "data- and context-parallel gradient all-reduce from parameter " + std::to_string(offset);
}

}  // namespace

const std::vector<std::string>& GradientReductionAxes() {
  static const std::vector<std::string> axes{"data", "context"};
  return axes;
}

void InPieces(int64_t n, const std::function<void(int64_t at, int64_t count)>& reduce) {
  constexpr int64_t kPiece = int64_t{1} << 28;
  for (int64_t at = 0; at < n; at += kPiece) reduce(at, std::min(kPiece, n - at));
}

int AxisGroup::Size() const { return static_cast<int>(comms_.GroupSize(axes_)); }
int AxisGroup::Rank() const { return comms_.GroupRank(axes_); }

void AxisGroup::Sum(float* data, int64_t n, const std::string& what) {
  InPieces(n, [&](int64_t at, int64_t k) { comms_.AllReduceSum(data + at, k, axes_, what); });
}
void AxisGroup::Sum(double* data, int64_t n, const std::string& what) {
  InPieces(n, [&](int64_t at, int64_t k) { comms_.AllReduceSum(data + at, k, axes_, what); });
}
void AxisGroup::Max(float* data, int64_t n, const std::string& what) {
  InPieces(n, [&](int64_t at, int64_t k) { comms_.AllReduceMax(data + at, k, axes_, what); });
}

void AxisGroup::AllGather(float* out, const float* in, int64_t n, const std::string& what) {
  CheckCount(n, what);
  if (Size() == 1) {
    std::copy_n(in, n, out);
  } else {
    comms_.AllGather(out, in, n, axes_, what);
  }
}

void AxisGroup::ReduceScatterSum(float* out, const float* in, int64_t n, const std::string& what) {
  CheckCount(n, what);
  if (Size() == 1) {
    std::copy_n(in, n, out);
  } else {
    comms_.ReduceScatterSum(out, in, n, axes_, what);
  }
}

void AxisGroup::CheckCount(int64_t n, const std::string& what) const {
  if (n * Size() > int64_t{INT_MAX}) {
    throw InputError("--device cuda", what + " moves " + std::to_string(n * Size()) + " elements", "under 2^31",
                     "a smaller micro-batch or sequence per context rank");
  }
}

OverlappedReduction::OverlappedReduction(MeshComms& comms) : comms_(comms) {
  CheckMpi(MPI_Comm_dup(comms.Comm(GradientReductionAxes()), &comm_), comms.world(), "gradient reduction communicator");
}

OverlappedReduction::~OverlappedReduction() {
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

void OverlappedReduction::Ready(float* data, int64_t offset, int64_t n) {
  InPieces(n, [&](int64_t at, int64_t k) {
    MPI_Request request = MPI_REQUEST_NULL;
    CheckMpi(MPI_Iallreduce(MPI_IN_PLACE, data + at, static_cast<int>(k), MPI_FLOAT, MPI_SUM, comm_, &request), comm_,
             ReductionName(offset + at));
    requests_.push_back(request);
    offsets_.push_back(offset + at);
  });
  Progress();
}

void OverlappedReduction::Progress() {
  if (requests_.empty()) return;
  int done = 0;
  CheckMpi(MPI_Testall(static_cast<int>(requests_.size()), requests_.data(), &done, MPI_STATUSES_IGNORE), comm_,
           ReductionName(offsets_.front()));
}

void OverlappedReduction::Finish() {
  for (size_t i = 0; i < requests_.size(); ++i) comms_.Wait(&requests_[i], ReductionName(offsets_[i]));
  requests_.clear();
  offsets_.clear();
}

}  // namespace shardsim::runtime
