// The cluster spec: chips, links and the shape of the network, as plain values. The graph of
// devices, switches and links is built from it in topologies/. Every peak comes with its source,
// and every efficiency (the fraction of a peak real kernels and collectives reach) is a named field.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/calibration.h"

namespace shardsim {

// Compute units (SMs) a collective library's kernel holds on each device while it runs: NCCL
// launches one thread block per channel, each on an SM of its own that no compute kernel shares
// meanwhile. By the communicator's scope (its devices in one node, or across nodes) and for NVLS.
// 0: none given (TPU tori and CPU hosts: their collectives take no compute units here).
struct CollectiveUnits {
  int64_t in_node = 0;
  int64_t across_nodes = 0;
  int64_t nvls = 0;
  std::string source;
  bool operator==(const CollectiveUnits&) const = default;
};

struct ChipSpec {
  std::string name;
  std::map<std::string, double> peak_flop_per_s;  // dense peak by dtype ("bf16", "fp8", "fp32", ...)
  int64_t hbm_bytes = 0;                          // device memory capacity
  double hbm_bandwidth_bytes_per_s = 0;
  // Matmul quantization: work is cut into square tiles of `matmul_tile` and spread over
  // `compute_units` (SMs, MXUs); a partial tile or a last partial wave wastes its share
  // (NVIDIA's Matrix Multiplication Background guide: tile and wave quantization). 0: ignored.
  int64_t matmul_tile = 0;
  int64_t compute_units = 0;
  // Tensor cores that scale 32-element blocks (MXFP8 / MXFP4: Blackwell): fp8_recipe mxfp8.
  bool microscaling = false;
  // FP8 GEMMs in any operand layout, not only TN (B200 / B300, compute capability 10.0 to 11.x, not
  // the 12.x RTX Blackwell parts): Transformer
  // Engine then keeps one copy of a per-tensor scaled FP8 weight, no transpose
  // (strategies::Fp8WeightCacheBytes).
  bool fp8_any_layout = false;
  CollectiveUnits collective_units;
  std::string source;
  bool operator==(const ChipSpec&) const = default;
};

// One class of link (ICI, DCN, NVLink, InfiniBand, shared memory).
struct LinkSpec {
  double bandwidth_bytes_per_s = 0;  // one link, one direction
  double latency_s = 0;              // per hop
  int64_t links_per_device = 0;      // links of this class each device has
  double efficiency = 1;             // fraction of bandwidth collectives reach over it
  std::string source;
  bool operator==(const LinkSpec&) const = default;
};

// The attention "kernel" of a plan without blockwise attention (flash_attention false): batched
// QK^T and AV products (cuBLAS's, XLA's dot products) around a separate softmax, which run at the
// matmul share, not at a fused kernel's (EfficiencySpec::Attention).
inline constexpr std::string_view kUnfusedAttention = "unfused";

// Fractions of the chip's peaks that real kernels reach.
struct EfficiencySpec {
  double matmul = 1;  // of peak FLOP/s, for large matmuls
  double hbm = 1;     // of HBM bandwidth, for memory-bound ops
  // Of the 16-bit peak, for attention kernels (flash attention runs at its own share of peak);
  // 0: as `matmul`.
  double attention = 0;
  // Of the FP8 peak, for FP8 weight matmuls (scaled GEMMs reach a smaller share of their doubled
  // peak); 0: as `matmul`.
  double fp8_matmul = 0;
  // Of the FP8 peak, per scaling recipe (PlanSpec::fp8_recipe: rowwise, blockwise, mxfp8), where
  // a recipe's GEMMs reach their own share; absent: fp8_matmul's.
  std::map<std::string, double> fp8_matmul_recipes;
  // Of the 16-bit peak, per attention kernel other than flash (PlanSpec::attention_kernel:
  // triton, flex), where a kernel reaches its own share; absent: `attention`'s.
  std::map<std::string, double> attention_kernels;
  // The backward passes' (input and weight gradients) matmul and attention rates as a share of
  // the rates above, which forward and recomputed work then run at. 1 (the catalogue's, and what
  // measured calibrations write): one rate for every pass, so the figures above are averages over
  // forward and backward (the Hopper presets' attention is FlashAttention-2's forward+backward);
  // below 1 they are forward rates. Fitted by calibrate --from-runs where runs differ in
  // recomputation: what the backward costs beyond its FLOPs at forward rates (autograd, gradient
  // accumulation, the kernels' own backward), not told apart.
  double backward = 1;
  std::string source;
  double Attention(const std::string& kernel = "") const {
    if (kernel == kUnfusedAttention) return matmul;
    return OwnOr(attention_kernels, kernel, attention > 0 ? attention : matmul);
  }
  double Fp8Matmul(const std::string& recipe = "") const { return OwnOr(fp8_matmul_recipes, recipe, fp8_matmul > 0 ? fp8_matmul : matmul); }
  bool operator==(const EfficiencySpec&) const = default;

 private:
  // A recipe's or kernel's own figure where it has one, else `fallback`.
  static double OwnOr(const std::map<std::string, double>& own, const std::string& key, double fallback) {
    const auto it = own.find(key);
    return it != own.end() && it->second > 0 ? it->second : fallback;
  }
};

enum class TopologyKind {
  kTorus,     // TPU: N-D torus of chips over ICI, slices joined by DCN
  kSwitched,  // GPU: NVSwitch domains (nodes) joined by an InfiniBand fabric
  kLocal,     // CPU cores as devices: shared memory inside a host, TCP between hosts
};

struct TopologySpec {
  TopologyKind kind = TopologyKind::kSwitched;
  // Torus: chips along each axis (dimension 0 varies fastest in device order), wraparound per
  // axis, and how many such slices are joined by DCN.
  std::vector<int64_t> torus_dims;
  std::vector<bool> wraparound;
  int64_t slices = 1;
  // Switched: devices per NVLink/NVSwitch domain, number of domains, and the InfiniBand fabric.
  int64_t devices_per_node = 0;
  int64_t nodes = 0;
  std::string fabric;           // "fat-tree" or "rail-optimized"
  double oversubscription = 1;  // leaf uplink oversubscription (1 = non-blocking)
  int64_t leaf_ports = 32;      // NICs attached to each leaf switch (its down ports)
  bool nvls = false;            // the NVSwitch reduces and multicasts in the switch (NVLink SHARP)
  bool sharp = false;           // the InfiniBand switches reduce in the network (SHARP)
  // Local: CPU cores used as devices (all hosts together), spread evenly over `local_hosts`
  // machines joined by a TCP network (one NIC per host).
  int64_t local_devices = 0;
  int64_t local_hosts = 1;
  // Host memory per device (a node's system memory over its GPUs), what offloaded activations
  // may take (PlanSpec::offload_layers); 0: not given, not checked. Any kind.
  int64_t host_bytes_per_device = 0;
  std::string source;
  bool operator==(const TopologySpec&) const = default;
};

struct ClusterSpec {
  std::string name;    // as given: "dgx-h100:64", "tpu-v5p:8x8x8,slices=2", or the file's name
  std::string system;  // the catalogue entry it came from ("dgx-h100"), or "custom"
  ChipSpec chip;
  TopologySpec topology;
  std::map<std::string, LinkSpec> links;  // by class: "ici", "dcn", "nvlink", "infiniband", "shm", "tcp"; "host": a device to its host's memory (activation offloading)
  EfficiencySpec efficiency;
  CalibrationSpec calibration;  // measured rates (shardsim calibrate); empty for catalogue systems
  bool operator==(const ClusterSpec&) const = default;
};

// Number of devices (chips, GPUs, or CPU cores).
int64_t DeviceCount(const ClusterSpec& cluster);

// The rate at which one device copies to or from its host's memory, one way (activation
// offloading): the "host" link's bandwidth x efficiency x links per device; 0 without one.
double HostCopyBytesPerS(const ClusterSpec& cluster);

// The node `device` sits in: its NVLink domain on a switched cluster, its host on a local one;
// -1 on a torus, which has no nodes.
int64_t NodeOf(const TopologySpec& topology, int64_t device);

// The most devices a cluster may have: 2^18 = 262,144. The largest training clusters today are
// 100k-200k GPUs; at this size the analytic commands (collective, estimate) build the cluster
// graph and answer in under a second and about 400 MiB on a 2-core machine (memory grows by about
// 1.2 KiB per device: 1M devices took 1.2 GiB; 10M took 11.5 GB and over a minute). docs/cli.md,
// "Limits".
inline constexpr int64_t kMaxClusterDevices = int64_t{1} << 18;

// Throws InputError naming `where` when `devices` (what `what` describes, e.g. "dgx-h100:1048576")
// is more than kMaxClusterDevices.
void CheckClusterSize(int64_t devices, const std::string& what, const std::string& where);

// Link classes a topology kind requires ("ici" and, with slices > 1, "dcn"; "nvlink" and
// "infiniband"; "shm" and, over several hosts, "tcp").
std::vector<std::string> RequiredLinks(const TopologySpec& topology);

std::string ToString(TopologyKind kind);

// "16x16x16" (torus), "8 nodes x 8" (switched), "2 cores" (local).
std::string DescribeShape(const TopologySpec& topology);

// Checks sizes, fractions and that the required link classes are present; throws InputError
// naming `where` and the field.
void ValidateCluster(const ClusterSpec& cluster, const std::string& where);

}  // namespace shardsim
