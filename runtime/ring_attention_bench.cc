#include "runtime/ring_attention_bench.h"

#include <mpi.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "runtime/init.h"
#include "runtime/ring_attention.h"

namespace shardsim::runtime {
namespace {

double Now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

double PeakRssBytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) * 1024.0;
}

// Element (token, col) of tensor `name`, the same on every rank whatever the layout.
void Fill(std::vector<float>& out, const std::string& name, const std::vector<int32_t>& positions, int64_t batch, int64_t seq_len, int64_t row) {
  out.resize(static_cast<size_t>(batch) * positions.size() * static_cast<size_t>(row));
  size_t i = 0;
  for (int64_t b = 0; b < batch; ++b) {
    for (int32_t pos : positions) {
      for (int64_t c = 0; c < row; ++c) out[i++] = InitNormal(7, name, b * seq_len + pos, c, 1.0f);
    }
  }
}

// Seconds per byte between ring neighbours: a timed exchange of `bytes` with both.
double MeasureP2pSecondsPerByte(MeshComms& comms, int64_t bytes) {
  int size = 0, rank = comms.rank();
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size == 1) return 0;
  std::vector<char> out(static_cast<size_t>(bytes)), in(static_cast<size_t>(bytes));
  const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  double best = 1e30;
  for (int trial = 0; trial < 3; ++trial) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = Now();
    MPI_Sendrecv(out.data(), static_cast<int>(bytes), MPI_CHAR, next, 91, in.data(), static_cast<int>(bytes), MPI_CHAR, prev, 91, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    best = std::min(best, Now() - t0);
  }
  MPI_Allreduce(MPI_IN_PLACE, &best, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return best / static_cast<double>(bytes);
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int RunRingAttentionBench(const RingAttentionBenchOptions& o) {
  int size = 0, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  for (const auto& [name, value] : std::vector<std::pair<std::string, int64_t>>{
           {"--seq", o.seq_len}, {"--heads", o.heads}, {"--kv-heads", o.kv_heads}, {"--head-dim", o.head_dim}, {"--batch", o.batch}, {"--repeats", o.repeats}}) {
    if (value < 1) throw InputError(name, std::to_string(value), "1 or more");
  }
  if (o.heads % o.kv_heads != 0) {
    throw InputError("--kv-heads", std::to_string(o.kv_heads) + " must divide --heads " + std::to_string(o.heads), "a divisor of the heads");
  }
  const SequenceLayout layout = ParseSequenceLayout(o.layout);
  CheckSequenceSplit(layout, o.seq_len, size);
  PlanSpec plan;
  plan.mesh.context = size;
  MeshComms comms(MPI_COMM_WORLD, plan);
  const std::vector<int32_t> positions = SequencePositions(layout, o.seq_len, size, rank);
  const int64_t local = static_cast<int64_t>(positions.size());
  const int64_t qrow = o.heads * o.head_dim, kvrow = o.kv_heads * o.head_dim;
  std::vector<float> q, k, v, d_o;
  Fill(q, "q", positions, o.batch, o.seq_len, qrow);
  Fill(k, "k", positions, o.batch, o.seq_len, kvrow);
  Fill(v, "v", positions, o.batch, o.seq_len, kvrow);
  Fill(d_o, "do", positions, o.batch, o.seq_len, qrow);
  const AttentionShape shape{static_cast<int>(o.batch), static_cast<int>(local), static_cast<int>(local), static_cast<int>(o.heads),
                             static_cast<int>(o.kv_heads), static_cast<int>(o.head_dim)};
  const float scale = 1.0f / std::sqrt(static_cast<float>(o.head_dim));
  std::vector<float> out(q.size()), lse(static_cast<size_t>(o.batch * o.heads * local)), dq(q.size()), dk(k.size()), dv(v.size());

  std::vector<double> forward_s, backward_s;
  RingAttentionStats fwd, bwd;
  for (int64_t r = 0; r < o.repeats; ++r) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = Now();
    fwd = RingAttentionForward(out.data(), lse.data(), q.data(), k.data(), v.data(), positions.data(), shape, o.causal, scale, comms);
    forward_s.push_back(Now() - t0);
    std::fill(dq.begin(), dq.end(), 0.0f), std::fill(dk.begin(), dk.end(), 0.0f), std::fill(dv.begin(), dv.end(), 0.0f);
    t0 = Now();
    bwd = RingAttentionBackward(dq.data(), dk.data(), dv.data(), q.data(), k.data(), v.data(), out.data(), d_o.data(), lse.data(), positions.data(),
                                shape, o.causal, scale, comms);
    backward_s.push_back(Now() - t0);
  }

  // This machine's rates, measured in the same run: the block kernel on one local block pair
  // (non-causal: every pair computed) and the neighbour exchange of one K/V block.
  std::vector<float> o_blk(out.size()), lse_blk(lse.size());
  std::vector<int32_t> far(positions.size(), 0);  // keys all visible
  double t0 = Now();
  AttentionForwardBlock(o_blk.data(), lse_blk.data(), q.data(), k.data(), v.data(), positions.data(), far.data(), shape, false, scale);
  const double block_s = Now() - t0;
  const double block_flops = 4.0 * static_cast<double>(o.batch) * static_cast<double>(local) * static_cast<double>(local) * static_cast<double>(qrow);
  const double kernel_flop_per_s = block_flops / block_s;
  const int64_t kv_block_bytes = 2 * static_cast<int64_t>(k.size()) * 4 + local * 4;
  const double p2p_s_per_byte = MeasureP2pSecondsPerByte(comms, kv_block_bytes);

  // The cost model of the step program's context-parallel ops: c blocks each way; each of the
  // c - 1 transfers runs under one block's compute, so a step costs max(compute, transfer).
  // Causal zigzag: half the pairs, evenly spread. Backward: 2x the compute, K/V plus dK/dV moved.
  const double c = static_cast<double>(size), pair_fraction = o.causal ? 0.5 * (c + 1) / c : 1.0;
  const double compute_fwd = pair_fraction * c * block_flops / kernel_flop_per_s;
  const double transfer_fwd = static_cast<double>(kv_block_bytes) * p2p_s_per_byte;
  const double predicted_fwd = compute_fwd + (c - 1) * std::max(0.0, transfer_fwd - compute_fwd / c);
  const double transfer_bwd = 2 * transfer_fwd;
  const double predicted_bwd = 2 * compute_fwd + c * std::max(0.0, transfer_bwd - 2 * compute_fwd / c);

  // Hidden communication: transfer time the measured bandwidth implies, less the time blocked.
  const double transfer_total = static_cast<double>(fwd.bytes_sent + bwd.bytes_sent) * p2p_s_per_byte;
  const double exposed = fwd.comm_wait_s + bwd.comm_wait_s;
  const double hidden_fraction = transfer_total > 0 ? std::clamp(1.0 - exposed / transfer_total, 0.0, 1.0) : 1.0;

  double max_error[2] = {0, 0};
  if (o.check) {
    // Full attention of this rank's queries over every key, and the full backward.
    std::vector<int32_t> all(static_cast<size_t>(o.seq_len));
    for (int64_t i = 0; i < o.seq_len; ++i) all[static_cast<size_t>(i)] = static_cast<int32_t>(i);
    std::vector<float> qa, ka, va, da;
    Fill(qa, "q", all, o.batch, o.seq_len, qrow);
    Fill(ka, "k", all, o.batch, o.seq_len, kvrow);
    Fill(va, "v", all, o.batch, o.seq_len, kvrow);
    Fill(da, "do", all, o.batch, o.seq_len, qrow);
    const AttentionShape full{static_cast<int>(o.batch), static_cast<int>(o.seq_len), static_cast<int>(o.seq_len), static_cast<int>(o.heads),
                              static_cast<int>(o.kv_heads), static_cast<int>(o.head_dim)};
    std::vector<float> of(qa.size()), lf(static_cast<size_t>(o.batch * o.heads * o.seq_len)), dqf(qa.size()), dkf(ka.size()), dvf(va.size());
    AttentionForward(of.data(), lf.data(), qa.data(), ka.data(), va.data(), full, o.causal, scale);
    AttentionBackward(dqf.data(), dkf.data(), dvf.data(), qa.data(), ka.data(), va.data(), of.data(), da.data(), lf.data(), full, o.causal, scale);
    auto compare = [&](const std::vector<float>& mine, const std::vector<float>& whole, int64_t row, double& worst) {
      for (int64_t b = 0; b < o.batch; ++b) {
        for (size_t i = 0; i < positions.size(); ++i) {
          for (int64_t col = 0; col < row; ++col) {
            const double a = mine[(static_cast<size_t>(b) * positions.size() + i) * static_cast<size_t>(row) + static_cast<size_t>(col)];
            const double w = whole[static_cast<size_t>((b * o.seq_len + positions[i]) * row + col)];
            worst = std::max(worst, std::abs(a - w));
          }
        }
      }
    };
    compare(out, of, qrow, max_error[0]);
    compare(dq, dqf, qrow, max_error[1]);
    compare(dk, dkf, kvrow, max_error[1]);
    compare(dv, dvf, kvrow, max_error[1]);
    MPI_Allreduce(MPI_IN_PLACE, max_error, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  }

  // Balance and memory over the ranks.
  double compute[2] = {fwd.compute_s + bwd.compute_s, -(fwd.compute_s + bwd.compute_s)};
  MPI_Allreduce(MPI_IN_PLACE, compute, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  double peak = PeakRssBytes();
  MPI_Allreduce(MPI_IN_PLACE, &peak, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  const double fwd_med = Median(forward_s), bwd_med = Median(backward_s);
  double times[2] = {fwd_med, bwd_med};
  MPI_Allreduce(MPI_IN_PLACE, times, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  if (rank != 0) return o.check && std::max(max_error[0], max_error[1]) > 1e-5 ? 1 : 0;
  const double slowest = compute[0], fastest = -compute[1];
  nlohmann::json report = {
      {"ranks", size},
      {"shape", {{"batch", o.batch}, {"seq", o.seq_len}, {"heads", o.heads}, {"kv_heads", o.kv_heads}, {"head_dim", o.head_dim}, {"causal", o.causal},
                 {"layout", o.layout}}},
      {"forward_s", times[0]},
      {"backward_s", times[1]},
      {"predicted_forward_s", predicted_fwd},
      {"predicted_backward_s", predicted_bwd},
      {"compute_s", {{"slowest_rank", slowest}, {"fastest_rank", fastest}, {"imbalance", fastest > 0 ? slowest / fastest - 1 : 0.0}}},
      {"comm_exposed_s", exposed},
      {"comm_hidden_fraction", hidden_fraction},
      {"measured_rates", {{"attention_kernel_flop_per_s", kernel_flop_per_s}, {"p2p_bytes_per_s", p2p_s_per_byte > 0 ? 1 / p2p_s_per_byte : 0.0},
                          {"kv_block_bytes", kv_block_bytes}}},
      {"peak_memory_bytes_per_rank", peak}};
  if (o.check) report["max_abs_error"] = {{"output", max_error[0]}, {"gradients", max_error[1]}};
  if (o.json) {
    std::cout << report.dump(2) << "\n";
  } else {
    std::printf("ring attention on %d ranks, %s, S=%ld H=%ld G=%ld K=%ld B=%ld%s\n", size, o.layout.c_str(), static_cast<long>(o.seq_len),
                static_cast<long>(o.heads), static_cast<long>(o.kv_heads), static_cast<long>(o.head_dim), static_cast<long>(o.batch),
                o.causal ? " causal" : "");
    std::printf("  forward  %.3f ms measured, %.3f ms predicted\n  backward %.3f ms measured, %.3f ms predicted\n", 1e3 * times[0],
                1e3 * predicted_fwd, 1e3 * times[1], 1e3 * predicted_bwd);
    std::printf("  compute  slowest rank %.3f ms, fastest %.3f ms (%.1f%% apart)\n", 1e3 * slowest, 1e3 * fastest,
                fastest > 0 ? 100 * (slowest / fastest - 1) : 0.0);
    std::printf("  comm     %.1f%% hidden under compute (%.3f ms exposed); p2p %.2f GB/s, kernel %.1f GFLOP/s (measured here)\n",
                100 * hidden_fraction, 1e3 * exposed, p2p_s_per_byte > 0 ? 1e-9 / p2p_s_per_byte : 0.0, kernel_flop_per_s / 1e9);
    std::printf("  memory   %.1f MiB peak per rank\n", peak / 1048576.0);
    if (o.check) std::printf("  check    max_abs_error output %.3g, gradients %.3g\n", max_error[0], max_error[1]);
  }
  // fp32 ring attention equals full attention within 1e-5, or the check fails.
  return o.check && std::max(max_error[0], max_error[1]) > 1e-5 ? 1 : 0;
}

}  // namespace shardsim::runtime
