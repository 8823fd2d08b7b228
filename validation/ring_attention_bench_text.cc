#include "validation/ring_attention_bench_text.h"

#include <cstdio>
#include <string>

namespace shardsim::validation {

using nlohmann::json;

void PrintShapeText(const json& j, int ranks) {
  const json& s = j["shape"];
  std::printf(
      "ring attention on %d ranks, %s, S=%lld H=%lld G=%lld K=%lld B=%lld%s (block %lld tokens per "
      "rank)\n",
      ranks, s["layout"].get<std::string>().c_str(), s["seq"].get<long long>(),
      s["heads"].get<long long>(), s["kv_heads"].get<long long>(), s["head_dim"].get<long long>(),
      s["batch"].get<long long>(), s["causal"].get<bool>() ? " causal" : "",
      j["block_tokens"].get<long long>());
  for (const char* pass : {"forward", "backward"}) {
    const json& p = j["prediction"][pass];
    const json& ov = j["overlap"][pass];
    std::printf(
        "  %-8s %.3f ms measured, %.3f ms predicted by the step program's ops (compute %.3f ms, "
        "transfers %.3f ms)\n",
        pass, 1e3 * ov["both_s"].get<double>(), 1e3 * p["time_s"].get<double>(),
        1e3 * p["compute_s"].get<double>(), 1e3 * p["transfers_s"].get<double>());
    std::printf(
        "           overlap: compute alone %.3f ms, transfers alone %.3f ms, both %.3f ms -> ",
        1e3 * ov["compute_only_s"].get<double>(), 1e3 * ov["transfers_only_s"].get<double>(),
        1e3 * ov["both_s"].get<double>());
    if (ov["hidden_fraction"].is_null()) {
      std::printf("nothing to hide\n");
    } else {
      std::printf("%.1f%% of the transfers hidden\n", 100 * ov["hidden_fraction"].get<double>());
      const json& rs = ov["ring_stats"];
      std::printf(
          "           ring timers: %.3f ms in MPI calls between pieces (copies on this core), %.3f "
          "ms waiting -> %.1f%% hidden\n",
          1e3 * rs["progress_s"]["both"].get<double>(), 1e3 * rs["wait_s"]["both"].get<double>(),
          100 * rs["hidden_fraction_from_timers"].get<double>());
    }
    std::printf(
        "           per step: compute %.3f ms, transfer %.3f ms; formula crossover at %.0f tokens "
        "per rank\n",
        1e3 * ov["compute_per_step_s"].get<double>(), 1e3 * ov["transfer_per_step_s"].get<double>(),
        j["crossover"]["formula_block_tokens"][pass].get<double>());
  }
  const json& c = j["compute_s"];
  std::printf("  compute  slowest rank %.3f ms, fastest %.3f ms (%.1f%% apart)\n",
              1e3 * c["slowest_rank"].get<double>(), 1e3 * c["fastest_rank"].get<double>(),
              100 * c["imbalance"].get<double>());
  std::printf(
      "  waits    %.3f ms forward, %.3f ms backward blocked in waits in the real passes (a late "
      "neighbour included)\n",
      1e3 * j["comm_wait"]["forward_s"].get<double>(),
      1e3 * j["comm_wait"]["backward_s"].get<double>());
  const json& r = j["measured_rates"];
  std::printf(
      "  rates    kernel %.1f GFLOP/s forward, %.1f backward; p2p %.2f GB/s, %.1f us latency "
      "(measured here)\n",
      r["attention_forward_flop_per_s"].get<double>() / 1e9,
      r["attention_backward_flop_per_s"].get<double>() / 1e9,
      r["p2p_bytes_per_s"].get<double>() / 1e9, 1e6 * r["p2p_latency_s"].get<double>());
  std::printf("  memory   %.1f MiB peak per rank\n",
              j["peak_memory_bytes_per_rank"].get<double>() / 1048576.0);
  if (j.contains("max_abs_error")) {
    std::printf("  check    max_abs_error output %.3g, gradients %.3g\n",
                j["max_abs_error"]["output"].get<double>(),
                j["max_abs_error"]["gradients"].get<double>());
  }
}

void PrintSweepText(const json& report) {
  const json& s = report["shape"];
  std::printf("ring attention block-size sweep on %d ranks, %s, H=%lld G=%lld K=%lld B=%lld%s\n",
              report["ranks"].get<int>(), s["layout"].get<std::string>().c_str(),
              s["heads"].get<long long>(), s["kv_heads"].get<long long>(),
              s["head_dim"].get<long long>(), s["batch"].get<long long>(),
              s["causal"].get<bool>() ? " causal" : "");
  std::printf("  %8s  %-8s %12s %12s %8s %8s %12s %12s\n", "block", "pass", "compute/step",
              "transfer/step", "hidden", "(timers)", "measured", "predicted");
  for (const json& p : report["sweep"]) {
    for (const char* pass : {"forward", "backward"}) {
      const json& ov = p["overlap"][pass];
      const json& timers = ov["ring_stats"]["hidden_fraction_from_timers"];
      std::printf(
          "  %8lld  %-8s %9.3f ms %10.3f ms %7.1f%% %7.1f%% %9.3f ms %9.3f ms\n",
          p["block_tokens"].get<long long>(), pass, 1e3 * ov["compute_per_step_s"].get<double>(),
          1e3 * ov["transfer_per_step_s"].get<double>(),
          ov["hidden_fraction"].is_null() ? 0.0 : 100 * ov["hidden_fraction"].get<double>(),
          timers.is_null() ? 0.0 : 100 * timers.get<double>(), 1e3 * ov["both_s"].get<double>(),
          1e3 * p["prediction"][pass]["time_s"].get<double>());
    }
  }
  for (const char* pass : {"forward", "backward"}) {
    const json& c = report["crossover"][pass];
    auto tokens = [](const json& v) {
      return v.is_null() ? std::string("none")
                         : std::to_string(static_cast<long long>(std::llround(v.get<double>())));
    };
    std::printf(
        "  crossover %-8s measured %s tokens per rank (interpolated %s), formula %s (rates at "
        "block %s)\n",
        pass, tokens(c["measured_block_tokens"]).c_str(),
        tokens(c["measured_interpolated_block_tokens"]).c_str(),
        tokens(c["formula_block_tokens"]).c_str(),
        tokens(c["formula_rates_from_block_tokens"]).c_str());
  }
}

}  // namespace shardsim::validation
