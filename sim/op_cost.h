// Per-op costing, shared by both step engines (the analytic estimate and the SimGrid
// simulation): compute ops by roofline (FLOPs against the chip's peak x matmul efficiency x tile
// and wave quantization, bytes against HBM bandwidth x HBM efficiency), collectives by the
// analytic collective model on the links each mesh axis maps to, and the analytic overlap rule
// of one layer's phase (its overlapped collectives hide under its compute, the rest add).
#pragma once

#include <array>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "core/cluster_spec.h"
#include "sim/collective_cost.h"
#include "strategies/step_program.h"

namespace shardsim::sim {

// GroupCollectives shared by many AxisCollectives on one cluster (the planner's search): plans
// whose sampled groups are the same devices share one model, routed once. Thread-safe.
class SharedGroupCollectives {
 public:
  explicit SharedGroupCollectives(const topologies::Cluster& cluster) : cluster_(cluster) {}
  // The model of `op` over `groups` (auto algorithm, modelled groups only), built on first use:
  // groups are moved by the fabric's symmetry first (Cluster::Translated), so one model serves
  // every place a group shape occurs.
  std::shared_ptr<const GroupCollective> Get(const std::vector<DeviceGroup>& groups, CollectiveOp op, const std::string& where, size_t max_modelled_groups,
                                             const TokenRouting& routing = {});

 private:
  const topologies::Cluster& cluster_;
  std::mutex mutex_;
  std::map<std::tuple<int, size_t, TokenRouting, std::vector<std::vector<int64_t>>>, std::shared_ptr<const GroupCollective>> models_;
};

// Collective times over the mesh axes of a plan on a cluster: one GroupCollective (auto
// algorithm, every group of the axes) per (operation, axes), built on first use and cached
// (in `shared` when given, for other plans to reuse).
class AxisCollectives {
 public:
  // REQUIRES: the plan's mesh product equals the cluster's devices. `cluster` must outlive this.
  // `max_modelled_groups`: groups per axis routed and costed (evenly spread; the slowest counts).
  AxisCollectives(const topologies::Cluster& cluster, const PlanSpec& plan, size_t max_modelled_groups = 64, SharedGroupCollectives* shared = nullptr);
  ~AxisCollectives();
  // Seconds for `op` of `bytes` over the groups along `axes` (0 when the axes have one device):
  // the calibration's measured curve where the cluster has one for this operation, group size
  // and transport, else the analytic model. `routing`: an expert all-to-all sent once per node
  // and device (Op::routing; never a measured curve, which sent every copy).
  double Seconds(CollectiveOp op, const std::vector<std::string>& axes, double bytes, const TokenRouting& routing = {});
  // The same for a step program's collective op; a host copy (Stream::kHost) on the cluster's
  // "host" link (HostCopySeconds).
  double Seconds(const strategies::Op& op) {
    return op.stream == strategies::Stream::kHost ? HostCopySeconds(op.comm_bytes) : Seconds(op.collective, op.axes, op.comm_bytes, op.routing);
  }
  // Compute units the kernel of a step program's collective op holds on each device while it
  // runs: its modelled algorithm's (Schedule::units, the most over the modelled groups; 0 off
  // switched (GPU) clusters); 0 for host copies, one-device axes and measured curves.
  int64_t Units(const strategies::Op& op);
  // Seconds to copy `bytes` between a device and its host's memory, one way: the "host" link's
  // latency plus the bytes at its bandwidth x efficiency x links per device. REQUIRES: the
  // cluster has a "host" link class (core/inputs.h CheckPlanOnCluster refuses offloading without).
  double HostCopySeconds(double bytes) const;
  // What the measured curve takes beyond the analytic model for the same collective (the MPI
  // library's own algorithm, copies and progress), 0 without a curve or where the model is slower:
  // the simulator waits this out besides the flows of the model's schedule. Where the model is
  // slower than the curve, the simulation keeps the model's flows (slower than measured).
  double BeyondModelSeconds(CollectiveOp op, const std::vector<std::string>& axes, double bytes, const TokenRouting& routing = {});
  // The algorithm the analytic model picks for `op` of `bytes` over `axes` and its pipeline
  // chunks (the simulator runs the same schedule). REQUIRES: the axes have several devices.
  std::pair<Algorithm, int64_t> Choice(CollectiveOp op, const std::vector<std::string>& axes, double bytes, const TokenRouting& routing = {});

  const topologies::Cluster& cluster() const { return cluster_; }
  const PlanSpec& plan() const { return plan_; }

 private:
  // (operation, a bit per mesh axis, a bit for a deduplicated routing): the caches' key. One plan
  // and model route their tokens one way, so the bit stands for routing_.
  using Key = int;
  Key KeyOf(CollectiveOp op, const std::vector<std::string>& axes, const TokenRouting& routing);
  const GroupCollective& Model(CollectiveOp op, const std::vector<std::string>& axes, const TokenRouting& routing);
  const CollectiveCurve* MeasuredCurve(CollectiveOp op, const std::vector<std::string>& axes, int64_t size) const;
  const topologies::Cluster& cluster_;
  PlanSpec plan_;
  size_t max_modelled_groups_;
  SharedGroupCollectives* shared_;
  std::map<Key, std::shared_ptr<const GroupCollective>> cache_;
  // A collective's seconds and its kernel's compute units (0 for a measured curve's).
  struct Cost {
    double seconds = 0;
    int64_t units = 0;
  };
  // The cost of `op` of `bytes` over `axes` (`size` devices > 1), made on first use and kept.
  const Cost& Costed(CollectiveOp op, const std::vector<std::string>& axes, double bytes, const TokenRouting& routing, int64_t size);
  std::map<std::pair<Key, double>, Cost> costs_;  // (key, bytes) -> cost
  std::map<Key, const CollectiveCurve*> curves_;       // key -> the measured curve, or null (looked up once per key)
  TokenRouting routing_;                               // the deduplicated routing seen, if any
};

// Fraction of peak an [m, n]-output matmul keeps after tile quantization (partial `tile` x `tile`
// tiles) and wave quantization (the last wave over `units` compute units); 1 when tile or units
// is 0.
double MatmulQuantization(int64_t tile, int64_t units, int64_t m, int64_t n);

// The roofline of one chip for one dtype, or the measured rates where a calibration of that
// dtype covers an op (the GEMM table for matmuls, the kernel's rate by op name at the
// micro-batch's tokens for the rest).
struct Roofline {
  double peak_flop_per_s = 0;  // of the weight matmuls' dtype
  double matmul_efficiency = 1;
  // Attention runs in 16 bits whatever the matmuls' dtype (TransformerEngine keeps
  // DotProductAttention in BF16 unless fp8_dpa is set; torchao's Float8Linear converts only
  // linear layers), at its kernel's share of that peak.
  double attention_flop_per_s = 0;  // peak x efficiency
  // Unfused attention (kUnfusedAttention): batched products at the matmul share, which a
  // calibration's measured (blockwise) attention kernel rate does not cost.
  bool unfused_attention = false;
  // A Mamba-2 mixer's chunked scan (SSD) at the fused attention kernels' share of that peak,
  // whichever kernel the plan's attention runs.
  double scan_flop_per_s = 0;
  // Products an fp8 plan runs at 16 bits (Op::sixteen_bit): the 16-bit peak attention runs at
  // (the dtype's own on a chip that lists no 16-bit peak), times the cluster's 16-bit matmul
  // efficiency.
  double sixteen_bit_flop_per_s = 0;
  // FP8 weight matmuls cast both operands first (read 16 bits, write 8 and the recipe's scales)
  // and take the amax of the activation for its scale (read 16 bits): memory-bound kernels
  // beside the GEMM.
  bool fp8_casts = false;
  Fp8Scales fp8_scales;
  double hbm_bytes_per_s = 0;  // x efficiency
  // The backward passes' matmul, attention and scan rates as a share of the above
  // (EfficiencySpec::backward), a measured GEMM table's included; kernels measured by name (per
  // op, each pass its own) run as measured.
  double backward = 1;
  int64_t tile = 0, units = 0;
  const CalibrationSpec* calibration = nullptr;  // of this dtype, else null (the cluster's; it outlives this)
  double tokens = 0;  // per micro-batch per device: where kernel rates are read
  double Quantization(int64_t m, int64_t n) const { return MatmulQuantization(tile, units, m, n); }
  // Seconds of one compute op.
  double Seconds(const strategies::Op& op) const;
  // Whether the measured rates cost `op` (else the roofline does).
  bool Calibrated(const strategies::Op& op) const;
};
// REQUIRES: the chip lists a peak for `dtype` (SHARDSIM_CHECK). `tokens`: per micro-batch per
// device (the step program's tokens_per_microbatch), for calibrated kernel rates.
// `fp8_recipe` picks an fp8 plan's GEMM efficiency (EfficiencySpec::Fp8Matmul).
Roofline RooflineOf(const ClusterSpec& cluster, const std::string& dtype, double tokens = 0, const std::string& fp8_recipe = "",
                    const std::string& attention_kernel = "");

// Exposed seconds per (stream, collective), in a fixed array: costing runs per plan in the
// planner's inner loop, where string-keyed maps cost more than the arithmetic.
struct ExposedByKind {
  static constexpr size_t kStreamCount = strategies::kStreams, kCollectiveCount = 6;
  std::array<double, kStreamCount * kCollectiveCount> seconds{};
  static size_t Index(strategies::Stream stream, CollectiveOp op) {
    return static_cast<size_t>(stream) * kCollectiveCount + static_cast<size_t>(op);
  }
  double& operator[](const strategies::Op& op) { return seconds[Index(op.stream, op.collective)]; }
  void Add(const ExposedByKind& other, double times) {
    for (size_t i = 0; i < seconds.size(); ++i) seconds[i] += other.seconds[i] * times;
  }
  double Total() const;
  // "tensor all-reduce" -> seconds, for the kinds with any time.
  std::map<std::string, double> Named() const;
};
// "tensor all-reduce": the name a (stream, collective) kind has in reports.
std::string KindName(strategies::Stream stream, CollectiveOp op);

// The cost of one layer's work on one micro-batch in one phase.
struct PhaseCost {
  double compute_s = 0;  // borrowed_s included
  // What the compute loses to collectives whose kernels run on compute units it would use
  // (Op::comm_units: DeepEP's), while they hide under it.
  double borrowed_s = 0;
  double total_s = 0;
  double flops = 0;
  ExposedByKind exposed_s;  // by stream and collective
  // Each collective of the phase (layer costs only; AddCost does not carry them): the op, its
  // seconds alone, its exposed share and the compute it may hide under (the phase's, or its
  // product's part for a collective overlapped with its own product: a tensor collective's, a
  // context K/V gather's attention; 0 when not overlapped), and that product's index in the
  // layer program (strategies::OverlapPartner; -1: none).
  struct Collective {
    const strategies::Op* op;
    double seconds, exposed_s, hide_under_s;
    int64_t partner = -1;
  };
  std::vector<Collective> collectives;
};

// What compute loses to a collective whose kernel holds `u` of the chip's `units` compute units
// while it hides under that compute for `hidden_s` seconds: the `hide_under_s` seconds of compute
// run on the rest meanwhile, min(hide_under_s u / (units - u), hidden_s u / units) more (all of
// it slowed, or the hidden part's share). 0 without units or with u >= units.
double BorrowedSeconds(int64_t u, int64_t units, double hide_under_s, double hidden_s);

// A gradient reduction of `seconds` overlapped with a stage's last backward (`last_backward_s`
// of it, over `layers` buckets) whose kernel holds `u` of `units`: the last bucket's share, or
// what outlasts the backward, is exposed; the backward loses BorrowedSeconds over the hidden
// part. `extra_s`: what the loss adds beyond `exposed_s` (none where the reduction outlasts
// the slowed backward anyway).
struct StepReduction {
  double exposed_s = 0, borrowed_s = 0, extra_s = 0;
};
StepReduction OverlappedStepReduction(double seconds, int64_t layers, double last_backward_s, int64_t u, int64_t units);

// The analytic cost of `layer`'s ops in `phase`; without its host copies (Stream::kHost) unless
// `offloaded` (a layer whose activations the plan offloads, strategies::OffloadedLayers).
PhaseCost CostPhase(const strategies::LayerProgram& layer, strategies::Phase phase, const Roofline& roofline, AxisCollectives& collectives,
                    bool offloaded = true);
void AddCost(PhaseCost& into, const PhaseCost& cost, double times);

// Index of F, B (with its recomputation) and W in per-phase arrays (inline: the schedule
// player calls it per task).
inline int PhaseIndex(strategies::Phase phase) {
  return phase == strategies::Phase::kForward ? 0 : phase == strategies::Phase::kBackwardWeight ? 2 : 1;
}

// Per layer program and phase (F, B with recomputation, W), and per (stage, chunk) slot and
// phase (its layers' costs summed): what a task costs.
struct ProgramCosts {
  std::vector<std::array<PhaseCost, 3>> layers;  // indexed by strategies::LayerRun::program()
  // The same for a layer whose activations are offloaded (with its host copies); empty without
  // offloading.
  std::vector<std::array<PhaseCost, 3>> offloaded_layers;
  std::vector<std::array<PhaseCost, 3>> slots;   // indexed by stage x chunks + chunk
  int64_t chunks = 1;
  size_t Slot(int64_t stage, int64_t chunk) const { return static_cast<size_t>(stage * chunks + chunk); }
};
ProgramCosts CostProgram(const strategies::StepProgram& program, const Roofline& roofline, AxisCollectives& collectives);

// One phase of one layer program for one micro-batch, each part alone (no overlap applied): the
// roofline compute seconds, and each collective's seconds. For explanations.
struct PhaseParts {
  double compute_s = 0;
  std::vector<std::pair<const strategies::Op*, double>> collectives;  // op (in `layer`), seconds
};
// The roofline is the plan's (its dtype, FP8 recipe and attention kernel), as Estimate's.
PhaseParts CostPhaseParts(const strategies::LayerProgram& layer, strategies::Phase phase, const ClusterSpec& cluster, const PlanSpec& plan,
                          AxisCollectives& collectives, double tokens = 0);

}  // namespace shardsim::sim
