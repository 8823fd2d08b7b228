#include "sim/op_cost.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "core/error.h"
#include "core/suggest.h"
#include "core/mesh.h"

namespace shardsim::sim {

using strategies::ComputeKind;
using strategies::LayerProgram;
using strategies::Op;
using strategies::Phase;
using strategies::Stream;

double MatmulQuantization(int64_t tile, int64_t units, int64_t m, int64_t n) {
  if (tile <= 0 || units <= 0 || m <= 0 || n <= 0) return 1.0;
  const int64_t tm = (m + tile - 1) / tile, tn = (n + tile - 1) / tile, tiles = tm * tn;
  const double tile_use = static_cast<double>(m) * static_cast<double>(n) / (static_cast<double>(tm * tile) * static_cast<double>(tn * tile));
  const int64_t waves = (tiles + units - 1) / units;
  return tile_use * static_cast<double>(tiles) / static_cast<double>(waves * units);
}

namespace {

// A calibration's rate measured for `op`'s kernel, if it costs it (an unfused attention's products
// are not the measured blockwise kernel).
const KernelRate* MeasuredKernel(const CalibrationSpec* calibration, const Op& op, bool unfused_attention) {
  if (calibration == nullptr || (unfused_attention && op.kind == ComputeKind::kAttention)) return nullptr;
  const auto kernel = calibration->kernels.find(op.name);
  return kernel == calibration->kernels.end() ? nullptr : &kernel->second;
}

}  // namespace

bool Roofline::Calibrated(const Op& op) const {
  if (calibration == nullptr) return false;
  if (op.kind == ComputeKind::kMatmul) return !calibration->gemm.empty() && !(op.sixteen_bit && fp8_casts);
  return MeasuredKernel(calibration, op, unfused_attention) != nullptr;
}

double Roofline::Seconds(const Op& op) const {
  // Forward and recomputed work at the forward rates, gradients at their share of them.
  const double pass = op.phase == Phase::kBackwardInput || op.phase == Phase::kBackwardWeight ? backward : 1.0;
  // A 16-bit product of an fp8 plan: neither the FP8 rates (measured or not) nor the casts.
  if (op.kind == ComputeKind::kMatmul && op.sixteen_bit && fp8_casts) {
    return std::max(op.flops / (sixteen_bit_flop_per_s * pass * Quantization(op.m, op.n)), op.bytes / hbm_bytes_per_s);
  }
  if (calibration != nullptr) {
    if (op.kind == ComputeKind::kMatmul && !calibration->gemm.empty()) return op.flops / (GemmFlopPerS(*calibration, op.m, op.n, op.k) * pass);
    if (const KernelRate* kernel = MeasuredKernel(calibration, op, unfused_attention)) {
      return (kernel->per_flop ? op.flops : op.bytes) / KernelRateAt(*kernel, tokens);
    }
  }
  const double memory = op.bytes / hbm_bytes_per_s;
  if (op.kind == ComputeKind::kMatmul) {
    const double gemm = std::max(op.flops / (peak_flop_per_s * matmul_efficiency * pass * Quantization(op.m, op.n)), memory);
    if (!fp8_casts) return gemm;
    // Each operand read at 16 bits and written at 8 (4 under nvfp4) with its scales (rows of k),
    // and the activation's amax read; the [k,n] operand's cast at its share
    // (Op::weight_cast_share: a weight cast once a step, or on its shard before an FP8 gather).
    const double a = static_cast<double>(op.m) * static_cast<double>(op.k), b = static_cast<double>(op.k) * static_cast<double>(op.n);
    const double written = fp8_scales.element + fp8_scales.per_element;
    const double cast_a = 2 * a + written * a + fp8_scales.per_row * static_cast<double>(op.m) + 2 * a;
    const double cast_b = 2 * b + written * b + fp8_scales.per_row * static_cast<double>(op.n);
    return gemm + (cast_a + op.weight_cast_share * cast_b) / hbm_bytes_per_s;
  }
  // A Mamba-2 mixer's chunked scan (SSD) runs blockwise tensor-core products as FlashAttention
  // does: costed at the fused attention kernels' share of the 16-bit peak, whatever kernel the
  // attention itself runs (no public per-chip figure for the SSD kernels; calibrate's attention
  // fit covers both, and a calibration's own "ssd" kernel rate wins above).
  if (op.kind == ComputeKind::kAttention) return std::max(op.flops / (attention_flop_per_s * pass), memory);
  if (op.kind == ComputeKind::kScan) return std::max(op.flops / (scan_flop_per_s * pass), memory);
  return memory;
}

Roofline RooflineOf(const ClusterSpec& cluster, const std::string& dtype, double tokens, const std::string& fp8_recipe,
                    const std::string& attention_kernel) {
  const std::string peak_dtype = MatmulPeakDtype(dtype, fp8_recipe);
  const auto peak = cluster.chip.peak_flop_per_s.find(peak_dtype);
  SHARDSIM_CHECK(peak != cluster.chip.peak_flop_per_s.end(), "dtype without a peak: " + peak_dtype);
  // A calibration's rates were measured at its own dtype: NVFP4 products take none of FP8's.
  const CalibrationSpec* calibration = cluster.calibration.dtype == peak_dtype ? &cluster.calibration : nullptr;
  const bool fp8 = dtype == "fp8";
  // The 16-bit peak attention runs at: bf16's, else fp16's, else (no 16-bit peak) the dtype's.
  double attention_peak = peak->second;
  if (fp8) {
    const auto& peaks = cluster.chip.peak_flop_per_s;
    if (peaks.count("bf16")) attention_peak = peaks.at("bf16");
    else if (peaks.count("fp16")) attention_peak = peaks.at("fp16");
  }
  Roofline r{.peak_flop_per_s = peak->second,
             .matmul_efficiency = fp8 ? cluster.efficiency.Fp8Matmul(fp8_recipe) : cluster.efficiency.matmul,
             .attention_flop_per_s = attention_peak * cluster.efficiency.Attention(attention_kernel),
             .unfused_attention = attention_kernel == kUnfusedAttention,
             .scan_flop_per_s = attention_peak * cluster.efficiency.Attention(),
             .sixteen_bit_flop_per_s = attention_peak * cluster.efficiency.matmul,
             .fp8_casts = fp8,
             .fp8_scales = fp8 ? Fp8ScaleBytes(fp8_recipe) : Fp8Scales{},  // "" (tensorwise): none
             .hbm_bytes_per_s = cluster.chip.hbm_bandwidth_bytes_per_s * cluster.efficiency.hbm,
             .backward = cluster.efficiency.backward,
             .tile = cluster.chip.matmul_tile,
             .units = cluster.chip.compute_units,
             .calibration = calibration,
             .tokens = tokens};
  return r;
}

std::string KindName(Stream stream, CollectiveOp op) {
  // A host stream's ops are the offloaded activations' copies, not collectives.
  if (stream == Stream::kHost) return "host offload copies";
  return strategies::ToString(stream) + " " + ToString(op);
}

double ExposedByKind::Total() const {
  double total = 0;
  for (double s : seconds) total += s;
  return total;
}

std::map<std::string, double> ExposedByKind::Named() const {
  std::map<std::string, double> named;
  for (size_t i = 0; i < seconds.size(); ++i) {
    if (seconds[i] == 0) continue;
    named[KindName(static_cast<Stream>(i / kCollectiveCount), static_cast<CollectiveOp>(i % kCollectiveCount))] = seconds[i];
  }
  return named;
}

std::shared_ptr<const GroupCollective> SharedGroupCollectives::Get(const std::vector<DeviceGroup>& groups, CollectiveOp op, const std::string& where,
                                                                   size_t max_modelled_groups, const TokenRouting& routing) {
  // Groups of one shape cost the same wherever the fabric's symmetry moves them: keyed (and
  // modelled) at the place it moves them to, each shape once (the cost is the slowest group's).
  std::vector<std::vector<int64_t>> devices;
  std::vector<DeviceGroup> moved;
  for (const DeviceGroup& g : groups) {
    std::vector<int64_t> at = cluster_.Translated(g.devices);
    if (std::find(devices.begin(), devices.end(), at) != devices.end()) continue;
    devices.push_back(at);
    moved.push_back({std::move(at)});
  }
  auto key = std::make_tuple(static_cast<int>(op), max_modelled_groups, routing, std::move(devices));
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto found = models_.find(key);
    if (found != models_.end()) return found->second;
  }
  // Built outside the lock (routing is the slow part); a second thread building the same model
  // keeps the first one stored.
  auto model = std::make_shared<const GroupCollective>(cluster_, moved, op, Algorithm::kAuto, where, max_modelled_groups, /*every_group=*/false, routing);
  std::lock_guard<std::mutex> lock(mutex_);
  return models_.emplace(std::move(key), std::move(model)).first->second;
}

AxisCollectives::AxisCollectives(const topologies::Cluster& cluster, const PlanSpec& plan, size_t max_modelled_groups, SharedGroupCollectives* shared)
    : cluster_(cluster), plan_(plan), max_modelled_groups_(max_modelled_groups), shared_(shared) {}
AxisCollectives::~AxisCollectives() = default;

namespace {
// (operation, a bit per mesh axis): the caches' key.
int CollectiveKey(CollectiveOp op, const std::vector<std::string>& axes) {
  int mask = 0;
  const auto& names = MeshAxisNames();
  for (const std::string& a : axes) mask |= 1 << (std::find(names.begin(), names.end(), a) - names.begin());
  return static_cast<int>(op) * 64 + mask;
}
}  // namespace

AxisCollectives::Key AxisCollectives::KeyOf(CollectiveOp op, const std::vector<std::string>& axes, const TokenRouting& routing) {
  if (!routing.deduplicated()) return CollectiveKey(op, axes);
  if (!routing_.deduplicated()) routing_ = routing;
  SHARDSIM_CHECK(routing == routing_, "one plan's collectives route their tokens one way");
  return CollectiveKey(op, axes) + (1 << 12);
}

const GroupCollective& AxisCollectives::Model(CollectiveOp op, const std::vector<std::string>& axes, const TokenRouting& routing) {
  const Key key = KeyOf(op, axes, routing);
  auto it = cache_.find(key);
  if (it == cache_.end()) {
    const LogicalMesh mesh(plan_.mesh, plan_.mesh_order);
    // Only the modelled groups are needed: those of ranks spread evenly from the first to the
    // last (listing every group of a 16k-device mesh costs more than the model).
    std::vector<DeviceGroup> groups;
    const int64_t n = mesh.size(), wanted = static_cast<int64_t>(std::max<size_t>(1, max_modelled_groups_));
    for (int64_t k = 0; k < wanted; ++k) {
      const int64_t rank = wanted == 1 ? 0 : k * (n - 1) / (wanted - 1);
      std::vector<int64_t> ranks = mesh.Group(rank, axes);
      if (std::none_of(groups.begin(), groups.end(), [&](const DeviceGroup& g) { return g.devices == ranks; })) groups.push_back({std::move(ranks)});
    }
    const std::string where = "collective over " + JoinNames(axes, ",");
    std::shared_ptr<const GroupCollective> model =
        shared_ ? shared_->Get(groups, op, where, max_modelled_groups_, routing)
                : std::make_shared<const GroupCollective>(cluster_, groups, op, Algorithm::kAuto, where, max_modelled_groups_, /*every_group=*/false, routing);
    it = cache_.emplace(key, std::move(model)).first;
  }
  return *it->second;
}

const CollectiveCurve* AxisCollectives::MeasuredCurve(CollectiveOp op, const std::vector<std::string>& axes, int64_t size) const {
  const ClusterSpec& spec = cluster_.spec();
  if (spec.calibration.collectives.empty() || spec.topology.kind != TopologyKind::kLocal) return nullptr;
  // The groups cross the TCP network if any of them spans hosts.
  const LogicalMesh mesh(plan_.mesh, plan_.mesh_order);
  bool across = false;
  for (int64_t rank = 0; rank < mesh.size() && !across; ++rank) {
    const std::vector<int64_t> group = mesh.Group(rank, axes);
    for (int64_t d : group) across = across || NodeOf(spec.topology, d) != NodeOf(spec.topology, group.front());
  }
  return FindCurve(spec.calibration, ToString(op), size, across ? "tcp" : "shm");
}

double AxisCollectives::Seconds(CollectiveOp op, const std::vector<std::string>& axes, double bytes, const TokenRouting& routing) {
  int64_t size = 1;
  for (const std::string& a : axes) size *= plan_.mesh.Size(a);
  if (size == 1 || bytes <= 0) return 0;
  return Costed(op, axes, bytes, routing, size).seconds;
}

const AxisCollectives::Cost& AxisCollectives::Costed(CollectiveOp op, const std::vector<std::string>& axes, double bytes, const TokenRouting& routing,
                                                     int64_t size) {
  const Key key = KeyOf(op, axes, routing);
  const auto known = costs_.find({key, bytes});
  if (known != costs_.end()) return known->second;
  auto found = curves_.find(key);
  if (found == curves_.end()) found = curves_.emplace(key, routing.deduplicated() ? nullptr : MeasuredCurve(op, axes, size)).first;
  const CollectiveCurve* curve = found->second;
  Cost cost;
  if (curve) {
    cost.seconds = CurveSeconds(*curve, bytes);
  } else {
    const GroupCollective& model = Model(op, axes, routing);
    const GroupCollective::Choice choice = model.Fastest(bytes);
    cost.seconds = choice.estimate.time_s;
    for (const Schedule& s : model.candidates()[choice.candidate].schedules) cost.units = std::max(cost.units, s.units);
  }
  return costs_.emplace(std::make_pair(key, bytes), cost).first->second;
}

int64_t AxisCollectives::Units(const Op& op) {
  if (op.stream == Stream::kHost || op.comm_bytes <= 0) return 0;
  int64_t size = 1;
  for (const std::string& a : op.axes) size *= plan_.mesh.Size(a);
  if (size == 1) return 0;
  return Costed(op.collective, op.axes, op.comm_bytes, op.routing, size).units;
}

double AxisCollectives::BeyondModelSeconds(CollectiveOp op, const std::vector<std::string>& axes, double bytes, const TokenRouting& routing) {
  const double seconds = Seconds(op, axes, bytes, routing);
  if (seconds <= 0 || curves_.at(KeyOf(op, axes, routing)) == nullptr) return 0;
  return std::max(0.0, seconds - Model(op, axes, routing).Fastest(bytes).estimate.time_s);
}

std::pair<Algorithm, int64_t> AxisCollectives::Choice(CollectiveOp op, const std::vector<std::string>& axes, double bytes, const TokenRouting& routing) {
  const GroupCollective& model = Model(op, axes, routing);
  const GroupCollective::Choice choice = model.Fastest(bytes);
  return {model.candidates()[choice.candidate].algorithm, choice.estimate.chunks};
}

double AxisCollectives::HostCopySeconds(double bytes) const {
  const double rate = HostCopyBytesPerS(cluster_.spec());
  SHARDSIM_CHECK(rate > 0, "a host copy on a cluster without a host link");
  if (bytes <= 0) return 0;
  return cluster_.spec().links.at("host").latency_s + bytes / rate;
}

double BorrowedSeconds(int64_t u, int64_t units, double hide_under_s, double hidden_s) {
  if (u <= 0 || units <= u) return 0;
  const double share = static_cast<double>(u);
  return std::min(hide_under_s * share / static_cast<double>(units - u), hidden_s * share / static_cast<double>(units));
}

StepReduction OverlappedStepReduction(double seconds, int64_t layers, double last_backward_s, int64_t u, int64_t units) {
  StepReduction r;
  const double last_bucket = seconds / static_cast<double>(std::max<int64_t>(1, layers));
  r.exposed_s = std::max(last_bucket, seconds - last_backward_s);
  r.borrowed_s = BorrowedSeconds(u, units, last_backward_s, seconds - r.exposed_s);
  // The slowed backward ends b later, then its last bucket goes; a reduction that outlasts that
  // ends as before.
  r.extra_s = std::max(last_bucket + r.borrowed_s, seconds - last_backward_s) - r.exposed_s;
  return r;
}

PhaseCost CostPhase(const LayerProgram& layer, Phase phase, const Roofline& roofline, AxisCollectives& collectives, bool offloaded) {
  PhaseCost cost;
  double overlapped = 0, host = 0;
  ExposedByKind overlapped_by_kind, host_by_kind;
  // Collectives overlapped with a product (strategies::OverlapPartner): their seconds, by product
  // and the part of it they hide under.
  std::map<std::tuple<int64_t, double, double>, double> on_product;
  auto window = [](int64_t partner, const Op& op) { return std::make_tuple(partner, op.partner_from, op.partner_to); };
  for (size_t i = 0; i < layer.ops.size(); ++i) {
    const Op& op = layer.ops[i];
    if (op.phase != phase || (op.stream == Stream::kHost && !offloaded)) continue;
    if (!op.is_comm()) {
      cost.compute_s += roofline.Seconds(op);
      cost.flops += op.flops;
      continue;
    }
    const double seconds = collectives.Seconds(op);
    const int64_t partner = strategies::OverlapPartner(layer.ops, i);
    cost.collectives.push_back({&op, seconds, op.overlapped ? 0.0 : seconds, 0.0, partner});
    if (partner >= 0) {
      on_product[window(partner, op)] += seconds;
    } else if (op.stream == Stream::kHost) {
      host += seconds;
      host_by_kind[op] += seconds;
    } else if (op.overlapped) {
      overlapped += seconds;
      overlapped_by_kind[op] += seconds;
    } else {
      cost.exposed_s[op] += seconds;
    }
  }
  // Collectives overlapped with their own product (strategies::OverlapPartner) hide under that
  // product alone (their part of it), one after another on their stream: what they take together
  // beyond it is exposed, shared among them in proportion.
  for (PhaseCost::Collective& c : cost.collectives) {
    if (c.partner < 0) continue;
    const double together = on_product.at(window(c.partner, *c.op));
    c.hide_under_s = roofline.Seconds(layer.ops[static_cast<size_t>(c.partner)]) * (c.op->partner_to - c.op->partner_from);
    c.exposed_s = together > 0 ? std::max(0.0, together - c.hide_under_s) * c.seconds / together : 0.0;
    cost.exposed_s[*c.op] += c.exposed_s;
  }
  // Other overlapped collectives hide under the phase's compute; what sticks out is exposed,
  // shared among them in proportion.
  const double sticking_out = std::max(0.0, overlapped - cost.compute_s - cost.exposed_s.Total());
  if (overlapped > 0) cost.exposed_s.Add(overlapped_by_kind, sticking_out / overlapped);
  for (PhaseCost::Collective& c : cost.collectives) {
    if (c.op->overlapped && c.partner < 0 && c.op->stream != Stream::kHost) {
      c.exposed_s = sticking_out * c.seconds / overlapped;
      c.hide_under_s = cost.compute_s;
    }
  }
  // Collectives whose kernels run on compute units (Op::comm_units: DeepEP's SMs; else NCCL's
  // thread blocks, AxisCollectives::Units) take them from the compute they hide under
  // (BorrowedSeconds). The time the collective is exposed, nothing runs beside it. A collective
  // overlapped with its own product (a tensor collective split with its GEMM: Transformer
  // Engine's userbuffers, torch's async TP over symmetric memory) is not NCCL's and keeps its
  // op's units (none given).
  for (const PhaseCost::Collective& c : cost.collectives) {
    if (!c.op->overlapped || c.op->stream == Stream::kHost) continue;
    const int64_t u = c.op->comm_units > 0 || c.partner >= 0 ? c.op->comm_units : collectives.Units(*c.op);
    cost.borrowed_s += BorrowedSeconds(u, roofline.units, c.hide_under_s, std::max(0.0, c.seconds - c.exposed_s));
  }
  cost.compute_s += cost.borrowed_s;
  // Host copies (activation offloading) take the copy engines and the host link, which no
  // collective uses: they hide under the whole phase as the rest makes it, compute and exposed
  // collectives; what sticks out beyond it is exposed.
  if (host > 0) {
    const double phase_s = cost.compute_s + cost.exposed_s.Total();
    const double host_out = std::max(0.0, host - phase_s);
    cost.exposed_s.Add(host_by_kind, host_out / host);
    for (PhaseCost::Collective& c : cost.collectives) {
      if (c.op->stream != Stream::kHost) continue;
      c.exposed_s = host_out * c.seconds / host;
      c.hide_under_s = phase_s;
    }
  }
  cost.total_s = cost.compute_s + cost.exposed_s.Total();
  return cost;
}

void AddCost(PhaseCost& into, const PhaseCost& cost, double times) {
  into.compute_s += cost.compute_s * times;
  into.borrowed_s += cost.borrowed_s * times;
  into.total_s += cost.total_s * times;
  into.flops += cost.flops * times;
  into.exposed_s.Add(cost.exposed_s, times);
}

ProgramCosts CostProgram(const strategies::StepProgram& program, const Roofline& roofline, AxisCollectives& collectives) {
  ProgramCosts costs;
  const bool offloading = program.plan.offload_layers > 0;
  auto cost_layers = [&](bool offloaded, std::vector<std::array<PhaseCost, 3>>& into) {
    into.resize(program.layer_programs.size());
    for (size_t i = 0; i < program.layer_programs.size(); ++i) {
      const LayerProgram& layer = program.layer_programs[i];
      if (layer.ops.empty()) continue;
      auto& cost = into[i];
      cost[0] = CostPhase(layer, Phase::kForward, roofline, collectives, offloaded);
      cost[1] = CostPhase(layer, Phase::kBackwardInput, roofline, collectives, offloaded);
      const PhaseCost recompute = CostPhase(layer, Phase::kRecompute, roofline, collectives, offloaded);
      AddCost(cost[1], recompute, 1);
      cost[1].collectives.insert(cost[1].collectives.end(), recompute.collectives.begin(), recompute.collectives.end());
      cost[2] = CostPhase(layer, Phase::kBackwardWeight, roofline, collectives, offloaded);
    }
  };
  cost_layers(false, costs.layers);
  if (offloading) cost_layers(true, costs.offloaded_layers);
  const int64_t p = static_cast<int64_t>(program.stages.size());
  costs.chunks = static_cast<int64_t>(program.stages.front().chunks.size());
  costs.slots.resize(static_cast<size_t>(p * costs.chunks));
  for (int64_t s = 0; s < p; ++s) {
    for (int64_t c = 0; c < costs.chunks; ++c) {
      auto& cost = costs.slots[costs.Slot(s, c)];
      const strategies::Chunk& chunk = program.stages[static_cast<size_t>(s)].chunks[static_cast<size_t>(c)];
      const std::vector<int64_t> offloaded = strategies::OffloadedPerRun(program.plan, chunk);
      for (size_t run = 0; run < chunk.layers.size(); ++run) {
        const strategies::LayerRun& r = chunk.layers[run];
        const int64_t off = offloaded[run];
        for (size_t ph = 0; ph < 3; ++ph) {
          AddCost(cost[ph], costs.layers[r.program()][ph], static_cast<double>(r.count - off));
          if (off > 0) AddCost(cost[ph], costs.offloaded_layers[r.program()][ph], static_cast<double>(off));
        }
      }
    }
  }
  return costs;
}

PhaseParts CostPhaseParts(const LayerProgram& layer, Phase phase, const ClusterSpec& cluster, const PlanSpec& plan, AxisCollectives& collectives,
                          double tokens) {
  const Roofline roofline = RooflineOf(cluster, plan.dtype, tokens, Fp8RecipeOf(plan), AttentionKernelOf(plan));
  PhaseParts parts;
  for (const Op& op : layer.ops) {
    if (op.phase != phase) continue;
    if (op.is_comm()) {
      parts.collectives.push_back({&op, collectives.Seconds(op)});
    } else {
      parts.compute_s += roofline.Seconds(op);
    }
  }
  return parts;
}

}  // namespace shardsim::sim
