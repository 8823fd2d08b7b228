// What `shardsim calibrate` measured on the machines it ran on, as part of a cluster spec: GEMM
// throughput over a grid of shapes, each runtime kernel's rate by op name and tokens, and
// point-to-point and collective cost curves per transport. Where a calibration covers an op, the
// step engines use the measured rate instead of the roofline (sim/op_cost.h); every table here
// is interpolated, never extrapolated past its last point's rate.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace shardsim {

// GEMM throughput ([m,k] x [k,n]) over a grid: every (m, n, k) of the listed sizes, increasing.
struct GemmTable {
  std::vector<int64_t> m, n, k;
  std::vector<double> flop_per_s;  // index (im * n.size() + in) * k.size() + ik
  double At(size_t im, size_t in, size_t ik) const { return flop_per_s[(im * n.size() + in) * k.size() + ik]; }
  bool empty() const { return flop_per_s.empty(); }
  bool operator==(const GemmTable&) const = default;
};

// A rate measured at several sizes: (tokens of the micro-batch, rate) in increasing tokens.
struct RatePoint {
  double tokens = 0;
  double rate = 0;  // FLOP/s (flop kernels) or bytes/s (memory-bound kernels)
  bool operator==(const RatePoint&) const = default;
};

// One runtime kernel, named as the step program names its op ("attention", "mlp_norm_grad").
struct KernelRate {
  bool per_flop = false;  // rate in FLOP/s against the op's FLOPs; else bytes/s against its bytes
  std::vector<RatePoint> points;
  bool operator==(const KernelRate&) const = default;
};

// Seconds of one collective (nccl-tests sizes) over a group measured with MPI.
struct CurvePoint {
  double bytes = 0;
  double seconds = 0;
  bool operator==(const CurvePoint&) const = default;
};
struct CollectiveCurve {
  std::string op;     // "all-reduce", "all-gather", "reduce-scatter", "all-to-all", "permute" (point to point)
  int64_t group = 0;  // ranks in the group
  std::string link;   // the link class the group crosses: "shm" inside a host, "tcp" across hosts
  std::vector<CurvePoint> points;  // increasing bytes
  bool operator==(const CollectiveCurve&) const = default;
};

struct CalibrationSpec {
  std::string dtype;  // the dtype every rate is for ("fp32"); empty: no calibration
  GemmTable gemm;
  std::map<std::string, KernelRate> kernels;  // by the step program's op name
  std::vector<CollectiveCurve> collectives;
  // The share of a non-blocking collective's time that compute issued after it hides: the
  // median over all-gather, reduce-scatter and all-reduce of 4 MiB under matrix products; < 0:
  // not measured. MPI on CPU cores moves a collective only inside MPI calls: 0 to 0.25 measured.
  double collective_hidden = -1;
  // How and when: the processor, cores per host, hosts, the BLAS kernel, the date, and the
  // largest relative spread between repeated measurements (a fraction).
  std::string processor, blas, measured_at, method;
  int64_t cores_per_host = 0, hosts = 0;
  double spread = 0;
  bool empty() const { return dtype.empty(); }
  bool operator==(const CalibrationSpec&) const = default;
};

// GEMM FLOP/s at (m, n, k): trilinear in log2 of each dimension over the grid, clamped to the
// grid's edges. REQUIRES: !calibration.gemm.empty().
double GemmFlopPerS(const CalibrationSpec& calibration, int64_t m, int64_t n, int64_t k);

// The kernel's rate at `tokens`: linear in log2(tokens) between points, the end point's rate
// outside them.
double KernelRateAt(const KernelRate& kernel, double tokens);

// Seconds of `bytes` on a curve: linear between points; past the last point at the last
// segment's bandwidth, below the first at the first point's time.
double CurveSeconds(const CollectiveCurve& curve, double bytes);

// Whether the collectives a step program overlaps with compute (Op::overlapped) run under it on
// this cluster: yes, unless a calibration measured that at most half of their time hides; then
// the step engines run them as blocking (strategies::WithBlockingCollectives).
bool CollectivesOverlapCompute(const CalibrationSpec& calibration);

// The curve for (op, group size, link) if measured, else nullptr.
const CollectiveCurve* FindCurve(const CalibrationSpec& calibration, const std::string& op, int64_t group, const std::string& link);

// Checks the tables (sizes, positive rates, increasing points, a full GEMM grid); throws
// InputError naming `where`.
void ValidateCalibration(const CalibrationSpec& calibration, const std::string& where);

}  // namespace shardsim
