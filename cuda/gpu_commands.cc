#include "cuda/gpu_commands.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/cluster_json.h"
#include "core/error.h"
#include "core/inputs.h"
#include "core/output_file.h"
#include "core/stats.h"
#include "core/units.h"
#include "cuda/cuda_check.h"
#include "cuda/device_info.h"
#include "cuda/flash_attention.h"
#include "cuda/gpu_calibrate.h"
#include "cuda/gpu_model.h"
#include "cuda/sm_share.h"

namespace shardsim::cuda {
namespace {

using nlohmann::json;

DeviceInfo RequireDevice() {
  std::string why;
  if (!HasDevice(&why)) throw CudaError(why + " (shardsim-gpu needs an NVIDIA GPU; the CPU runtime is shardsim-runtime)");
  return QueryDevice();
}

// The preset a device's figures belong to: named, or recognised from the device's name.
ClusterSpec ClusterFor(const std::string& named, const DeviceInfo& device) {
  if (!named.empty()) return LoadCluster(named);
  if (device.name.find("H200") != std::string::npos) return LoadCluster("dgx-h200:1");
  if (device.name.find("H100") != std::string::npos) return LoadCluster("dgx-h100:1");
  throw InputError("--cluster", "no preset is known for the GPU '" + device.name + "'", "a cluster preset or JSON of this GPU",
                   "pass --cluster (shardsim presets lists them)");
}

double PeakOf(const ClusterSpec& cluster, const std::string& dtype) {
  const auto it = cluster.chip.peak_flop_per_s.find(dtype);
  if (it == cluster.chip.peak_flop_per_s.end()) {
    throw InputError("--cluster", cluster.name + " lists no " + dtype + " peak", "a cluster whose chip lists it", "");
  }
  return it->second;
}


std::string Shape(const GemmShape& s) {
  return std::to_string(s.m) + " x " + std::to_string(s.n) + " x " + std::to_string(s.k);
}

// Token ids of a repeating sequence of period 97: a model that trains drives its loss well below
// log(vocab) within a few steps.
std::vector<int32_t> SyntheticTokens(int64_t rows, int64_t seq, int64_t vocab) {
  std::vector<int32_t> t(static_cast<size_t>(rows * (seq + 1)));
  for (size_t i = 0; i < t.size(); ++i) t[i] = static_cast<int32_t>(((i % 97) * 2654435761u) % static_cast<uint64_t>(vocab));
  return t;
}

}  // namespace

int RunGpuInfo(std::ostream& out) {
  const DeviceInfo d = RequireDevice();
  out << d.name << ": compute capability " << d.compute_major << "." << d.compute_minor << ", " << d.multiprocessors
      << " multiprocessors, " << FormatBinaryBytes(static_cast<double>(d.memory_bytes)) << " of memory, "
      << FormatBinaryBytes(static_cast<double>(d.l2_bytes)) << " of L2; driver for CUDA " << d.driver << "\n";
  return 0;
}

int RunGpuCalibrate(const GpuCalibrateOptions& o, std::ostream& out) {
  const ModelSpec model = LoadModel(o.model);
  if (o.seq_len < 16 || o.seq_len > 131072) throw InputError("--seq", "must be in [16, 131072], got " + std::to_string(o.seq_len));
  if (o.tokens < 16 || o.tokens > 65536) throw InputError("--tokens", "must be in [16, 65536], got " + std::to_string(o.tokens));
  if (!o.out.empty()) CheckOutputWritable(o.out, "--out");
  if (!o.cluster.empty()) LoadCluster(o.cluster);  // a bad --cluster is named before the device is looked for
  const DeviceInfo device = RequireDevice();
  ClusterSpec cluster = ClusterFor(o.cluster, device);
  const double peak = PeakOf(cluster, "bf16");
  std::vector<GemmShape> shapes =
      ModelGemmShapes(o.tokens, model.hidden_size, model.num_heads * model.head_dim, model.num_kv_heads * model.head_dim,
                      model.ffn_hidden_size, model.vocab_size);
  const size_t model_shapes = shapes.size();
  shapes.push_back({4096, 4096, 4096, "square"});
  shapes.push_back({8192, 8192, 8192, "square"});
  AttentionMeasure attention;
  attention.seq = static_cast<int>(o.seq_len);
  attention.heads = static_cast<int>(model.num_heads);
  attention.kv_heads = static_cast<int>(model.num_kv_heads);
  attention.head_dim = static_cast<int>(model.head_dim);
  std::vector<AttentionMeasure> kernels{attention};
  if (FlashAttentionSupports(attention.seq, attention.head_dim)) {  // both kernels measured; the faster one sets the efficiency
    kernels.push_back(attention);
    kernels.back().fused = true;
  }
  const GpuCalibration cal = MeasureGpu(shapes, kernels);

  std::vector<double> model_rates, fp8_rates;
  for (size_t i = 0; i < model_shapes; ++i) model_rates.push_back(cal.gemms[i].flop_per_s);
  for (const GemmMeasure& g : cal.gemms) {
    if (g.dtype == "fp8" && g.shape.what != "square") fp8_rates.push_back(g.flop_per_s);
  }
  const double matmul = Median(model_rates) / peak;
  // FP8 products against the chip's FP8 peak, where both are to hand.
  const auto fp8_peak = cluster.chip.peak_flop_per_s.find("fp8");
  const double fp8_matmul = fp8_rates.empty() || fp8_peak == cluster.chip.peak_flop_per_s.end() ? 0 : Median(fp8_rates) / fp8_peak->second;
  const AttentionMeasure& a = *std::max_element(cal.attention.begin(), cal.attention.end(), [](const AttentionMeasure& x, const AttentionMeasure& y) {
    return x.training_flop_per_s < y.training_flop_per_s;
  });
  const double attention_eff = a.training_flop_per_s / peak;
  const double hbm = cal.hbm_bytes_per_s / cluster.chip.hbm_bandwidth_bytes_per_s;
  const std::string provenance = "measured by shardsim-gpu calibrate on one " + device.name + " (CUDA driver " + device.driver +
                                 "): matmul = median bf16 cuBLAS rate over " + o.model + "'s " + std::to_string(model_shapes) +
                                 " layer products at " + std::to_string(o.tokens) + " tokens" +
                                 (fp8_matmul > 0 ? "; fp8_matmul = the same products' median rate in FP8 (cuBLASLt, E4M3, bf16 out)" : "") +
                                 "; attention = the " +
                                 (a.fused ? "fused" : "tiled") + " attention's forward+backward at S=" + std::to_string(o.seq_len) +
                                 " (the faster kernel); hbm = a device-to-device copy";
  cluster.efficiency.matmul = std::min(1.0, matmul);
  if (fp8_matmul > 0) cluster.efficiency.fp8_matmul = std::min(1.0, fp8_matmul);
  cluster.efficiency.attention = std::min(1.0, attention_eff);
  cluster.efficiency.hbm = std::min(1.0, hbm);
  // The measured attention is a forward+backward rate and the products' rates hold for every pass:
  // a backward share fitted against other figures (calibrate --from-runs) would not apply.
  cluster.efficiency.backward = 1;
  cluster.efficiency.source = provenance;

  if (o.json) {
    json j = {{"device", {{"name", device.name}, {"multiprocessors", device.multiprocessors}, {"memory_bytes", device.memory_bytes}, {"driver", device.driver}}},
              {"peak_bf16_flop_per_s", peak},
              {"gemms", json::array()},
              {"attention", json::array()},
              {"hbm_bytes_per_s", cal.hbm_bytes_per_s},
              {"efficiency", EfficiencyToJson(cluster.efficiency)}};
    for (const AttentionMeasure& m : cal.attention) {
      j["attention"].push_back({{"kernel", m.fused ? "fused" : "tiled"}, {"seq", m.seq}, {"heads", m.heads}, {"kv_heads", m.kv_heads},
                                {"head_dim", m.head_dim}, {"forward_flop_per_s", m.forward_flop_per_s},
                                {"training_flop_per_s", m.training_flop_per_s}, {"forward_s", m.forward_s}, {"training_s", m.training_s}});
    }
    for (const GemmMeasure& g : cal.gemms) {
      j["gemms"].push_back({{"m", g.shape.m}, {"n", g.shape.n}, {"k", g.shape.k}, {"what", g.shape.what}, {"dtype", g.dtype},
                            {"flop_per_s", g.flop_per_s}, {"seconds", g.seconds}});
    }
    out << j.dump(2) << "\n";
  } else {
    out << device.name << " (" << device.multiprocessors << " SMs, " << FormatBinaryBytes(static_cast<double>(device.memory_bytes))
        << "), against " << cluster.name << "'s " << FormatSI(peak, "FLOP/s") << " bf16 peak and "
        << FormatSI(cluster.chip.hbm_bandwidth_bytes_per_s, "B/s") << " HBM (cluster spec)\n";
    out << "matrix products (M x N x K, row-major, cuBLAS; fp8 on cuBLASLt; fp32 accumulation):\n";
    for (const GemmMeasure& g : cal.gemms) {
      const bool fp8 = g.dtype == "fp8" && fp8_peak != cluster.chip.peak_flop_per_s.end();
      out << "  " << g.dtype << "  " << Shape(g.shape) << "  " << FormatSI(g.flop_per_s, "FLOP/s") << "  "
          << FormatPercent(g.flop_per_s / (fp8 ? fp8_peak->second : peak)) << " of the " << (fp8 ? "fp8" : "bf16") << " peak  (" << g.shape.what << ")\n";
    }
    for (const AttentionMeasure& m : cal.attention) {
      out << "attention, " << (m.fused ? "fused kernels" : "tiled products") << " (bf16, causal, S=" << m.seq << ", " << m.heads << " heads, "
          << m.kv_heads << " K/V heads, head dim " << m.head_dim << "): forward " << FormatSI(m.forward_flop_per_s, "FLOP/s") << " ("
          << FormatSeconds(m.forward_s) << "), forward+backward " << FormatSI(m.training_flop_per_s, "FLOP/s") << " ("
          << FormatSeconds(m.training_s) << ")\n";
    }
    out << "HBM: device-to-device copy " << FormatSI(cal.hbm_bytes_per_s, "B/s") << " (bytes read + written)\n";
    out << "efficiencies: matmul " << FormatPercent(matmul) << (fp8_matmul > 0 ? ", fp8_matmul " + FormatPercent(fp8_matmul) : std::string())
        << ", attention " << FormatPercent(attention_eff) << ", hbm " << FormatPercent(hbm)
        << " (catalogue: matmul " << FormatPercent(LoadCluster(cluster.name).efficiency.matmul) << ")\n";
  }
  if (!o.out.empty()) {
    WriteOutputFile(o.out, ClusterToJson(cluster).dump(2) + "\n", "--out");
    if (!o.json) out << "wrote " << o.out << "\n";
  }
  return 0;
}

int RunGpuTrain(const GpuTrainOptions& o, std::ostream& out) {
  const ModelSpec model = LoadModel(o.model);
  CheckGpuTrainable(model);
  if (o.seq_len < 2 || o.seq_len > 1048576) throw InputError("--seq", "must be in [2, 1048576], got " + std::to_string(o.seq_len));
  if (o.micro_batch < 1 || o.micro_batch > 4096) throw InputError("--micro-batch", "must be in [1, 4096], got " + std::to_string(o.micro_batch));
  if (o.steps < 1 || o.steps > 100000) throw InputError("--steps", "must be in [1, 100000], got " + std::to_string(o.steps));
  if (o.dtype != "bf16" && o.dtype != "fp32") throw InputError("--dtype", "unknown dtype '" + o.dtype + "'", "bf16 or fp32", "");
  if (o.attention != "tiled" && o.attention != "fused") {
    throw InputError("--attention", "unknown kernel '" + o.attention + "'", "tiled or fused", "leave it out for the fused kernels where they apply");
  }
  if (o.micro_batch * o.seq_len > (int64_t{1} << 30)) {
    throw InputError("--micro-batch", std::to_string(o.micro_batch * o.seq_len) + " tokens per step (with --seq)", "at most 2^30", "");
  }
  if (!o.cluster.empty()) LoadCluster(o.cluster);  // a bad --cluster is named before the device is looked for
  const DeviceInfo device = RequireDevice();
  const ClusterSpec cluster = ClusterFor(o.cluster, device);
  // MFU against the dtype's own peak where the chip lists one, else the bf16 peak (said so).
  const std::string peak_dtype = o.dtype == "fp32" && cluster.chip.peak_flop_per_s.count("fp32") ? "fp32" : "bf16";
  const double peak = PeakOf(cluster, peak_dtype);

  GpuTrainConfig config;
  config.micro_batch = static_cast<int>(o.micro_batch);
  config.seq_len = static_cast<int>(o.seq_len);
  config.dtype = o.dtype == "fp32" ? DType::kF32 : DType::kBf16;
  config.seed = o.seed;
  config.fused_attention = o.attention == "fused";
  GpuModel gpu(model, config);
  const std::vector<int32_t> tokens = SyntheticTokens(o.micro_batch, o.seq_len, model.vocab_size);
  size_t free_bytes = 0, total_bytes = 0;

  json steps = json::array();
  std::vector<double> times, forward_backward, optimizer;
  for (int64_t s = 0; s < o.steps; ++s) {
    const auto t0 = std::chrono::steady_clock::now();
    const GpuStepStats st = gpu.Step(tokens);
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s > 0 || o.steps == 1) {
      times.push_back(sec);
      forward_backward.push_back(st.forward_backward_s);
      optimizer.push_back(st.optimizer_s);
    }
    steps.push_back({{"step", s}, {"loss", st.loss}, {"grad_norm", st.grad_norm}, {"seconds", sec}, {"forward_backward_s", st.forward_backward_s},
                     {"optimizer_s", st.optimizer_s}});
    if (s == 0) Check(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
  }
  const double tokens_per_step = static_cast<double>(o.micro_batch * o.seq_len);
  const FlopsPerToken f = ForwardFlopsPerToken(model, o.seq_len);
  const double step_s = Median(times);
  const double model_flops = f.causal_training() * tokens_per_step / step_s;
  const double palm_flops = f.training() * tokens_per_step / step_s;
  const double used = static_cast<double>(total_bytes - free_bytes);
  const std::string kernel = gpu.FusedAttention() ? "fused" : "tiled";  // what ran
  if (o.json) {
    out << json{{"device", device.name},
                {"model", model.name},
                {"parameters", gpu.Parameters()},
                {"seq_len", o.seq_len},
                {"micro_batch", o.micro_batch},
                {"dtype", o.dtype},
                {"attention", kernel},
                {"steps", steps},
                {"step_time_s", step_s},
                {"forward_backward_s", Median(forward_backward)},
                {"optimizer_s", Median(optimizer)},
                {"tokens_per_s", tokens_per_step / step_s},
                {"model_flop_per_s", model_flops},
                {"mfu", model_flops / peak},
                {"mfu_palm", palm_flops / peak},
                {"peak_flop_per_s", peak},
                {"peak_dtype", peak_dtype},
                {"peak_source", cluster.name + " (cluster spec)"},
                {"device_memory_used_bytes", used}}
               .dump(2)
        << "\n";
    return 0;
  }
  out << model.name << " (" << FormatCount(static_cast<double>(gpu.Parameters())) << " parameters) on one " << device.name << ", "
      << o.micro_batch << " x " << o.seq_len << " tokens per step, " << o.dtype
      << (o.dtype == "bf16" ? " (bf16 products, fp32 master weights and optimizer)" : " (fp32, no TF32)") << ", attention " << kernel
      << (kernel != o.attention ? " (the fused kernels take bf16 at head dim 64 or 128 and a sequence a multiple of 64)" : "") << "\n";
  out << "  step  loss (nats)  grad norm  time\n";
  for (const json& s : steps) {
    char line[128];
    std::snprintf(line, sizeof line, "  %4lld  %11.5f  %9.4f  %s\n", static_cast<long long>(s["step"].get<int64_t>()), s["loss"].get<double>(),
                  s["grad_norm"].get<double>(), FormatSeconds(s["seconds"].get<double>()).c_str());
    out << line;
  }
  out << "step time " << FormatSeconds(step_s) << " (median of " << times.size() << (o.steps > 1 ? " steps after the first" : " step") << "), "
      << FormatSI(tokens_per_step / step_s, "tokens/s") << "; forward and backward " << FormatSeconds(Median(forward_backward))
      << ", optimizer (norm, clipping, AdamW" << (o.dtype == "bf16" ? ", bf16 weights) " : ") ") << FormatSeconds(Median(optimizer)) << " (medians)\n";
  out << "model FLOP/s " << FormatSI(model_flops, "FLOP/s") << ": MFU " << FormatPercent(model_flops / peak) << " (PaLM's count: "
      << FormatPercent(palm_flops / peak) << ") of " << FormatSI(peak, "FLOP/s") << " " << peak_dtype << " peak (" << cluster.name
      << ", cluster spec)\n";
  out << "device memory in use " << FormatBinaryBytes(used) << " of " << FormatBinaryBytes(static_cast<double>(total_bytes))
      << " (the whole device's, after the first step)\n";
  return 0;
}

int RunGpuSmShare(const GpuSmShareOptions& options, std::ostream& out) {
  const SmShareOptions& o = options.measure;
  for (const auto& [name, v] : {std::pair{"--m", o.m}, std::pair{"--n", o.n}, std::pair{"--k", o.k}}) {
    if (v < 64 || v > 65536) throw InputError(name, "must be in [64, 65536], got " + std::to_string(v), "a product's dimension", "");
  }
  if (o.repeats < 1 || o.repeats > 10000) throw InputError("--repeats", "must be in [1, 10000], got " + std::to_string(o.repeats));
  if (o.units.empty()) throw InputError("--units", "is empty", "multiprocessors to hold, e.g. 8,16,32", "");
  for (int64_t u : o.units) {
    if (u < 1) throw InputError("--units", "must each be at least 1, got " + std::to_string(u), "multiprocessors to hold, fewer than the GPU's", "");
  }
  RequireDevice();
  const SmShareResult r = MeasureSmShare(o);
  const double flops = 2.0 * static_cast<double>(r.m) * static_cast<double>(r.n) * static_cast<double>(r.k);
  if (options.json) {
    json j = {{"device", {{"name", r.device.name}, {"multiprocessors", r.device.multiprocessors}, {"driver", r.device.driver}}},
              {"m", r.m}, {"n", r.n}, {"k", r.k}, {"dtype", "bf16"}, {"rows", json::array()}};
    for (const SmShareRow& row : r.rows) {
      j["rows"].push_back({{"units", row.units}, {"alone_s", row.alone_s}, {"beside_s", row.beside_s},
                           {"copy_bytes_per_s", row.copy_bytes_per_s}, {"ratio", row.beside_s / row.alone_s}, {"modelled_ratio", row.modelled}});
    }
    out << j.dump(2) << "\n";
    return 0;
  }
  out << r.device.name << " (" << r.device.multiprocessors << " SMs): a bf16 product " << r.m << " x " << r.n << " x " << r.k
      << " (cuBLAS, measured) beside a kernel copying device memory on u SMs (one block each), against the simulator's U / (U - u)\n";
  for (const SmShareRow& row : r.rows) {
    out << "  u " << row.units << ": alone " << FormatSeconds(row.alone_s) << " (" << FormatSI(flops / row.alone_s, "FLOP/s") << "), beside it "
        << FormatSeconds(row.beside_s) << " (x" << FormatFixed(row.beside_s / row.alone_s, 3) << ", the copy at "
        << FormatSI(row.copy_bytes_per_s, "B/s") << "); modelled x" << FormatFixed(row.modelled, 3) << "\n";
  }
  return 0;
}

}  // namespace shardsim::cuda
