#include "validation/ring_attention_bench.h"

#include <mpi.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/plan_spec.h"
#include "core/stats.h"
#include "runtime/init.h"
#include "runtime/ring_attention.h"
#include "validation/ring_attention_bench_text.h"

namespace shardsim::validation {
namespace {

using nlohmann::json;
using runtime::AttentionBackward;
using runtime::AttentionForward;
using runtime::AttentionShape;
using runtime::CheckSequenceSplit;
using runtime::InitNormal;
using runtime::MeshComms;
using runtime::ParseSequenceLayout;
using runtime::RingAttentionBackward;
using runtime::RingAttentionForward;
using runtime::RingAttentionStats;
using runtime::RingAttentionWorkspace;
using runtime::RingPass;
using runtime::RingWork;
using runtime::SequenceLayout;
using runtime::SequencePositions;

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double PeakRssBytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) * 1024.0;
}

// Element (token, col) of tensor `name`, the same on every rank whatever the layout.
void Fill(std::vector<float>& out, const std::string& name, const std::vector<int32_t>& positions,
          int64_t batch, int64_t seq_len, int64_t row) {
  out.resize(static_cast<size_t>(batch) * positions.size() * static_cast<size_t>(row));
  size_t i = 0;
  for (int64_t b = 0; b < batch; ++b) {
    for (int32_t pos : positions) {
      for (int64_t c = 0; c < row; ++c) out[i++] = InitNormal(7, name, b * seq_len + pos, c, 1.0f);
    }
  }
}

// The queries, keys, values and output gradient of the tokens at `positions`.
struct Inputs {
  std::vector<float> q, k, v, d_o;
};
Inputs MakeInputs(const RingAttentionBenchOptions& o, const std::vector<int32_t>& positions, int64_t seq_len) {
  const int64_t qrow = o.heads * o.head_dim, kvrow = o.kv_heads * o.head_dim;
  Inputs in;
  Fill(in.q, "q", positions, o.batch, seq_len, qrow);
  Fill(in.k, "k", positions, o.batch, seq_len, kvrow);
  Fill(in.v, "v", positions, o.batch, seq_len, kvrow);
  Fill(in.d_o, "do", positions, o.batch, seq_len, qrow);
  return in;
}


// The slowest rank's value of each entry.
void MaxOverRanks(std::vector<double>& values) {
  MPI_Allreduce(MPI_IN_PLACE, values.data(), static_cast<int>(values.size()), MPI_DOUBLE, MPI_MAX,
                MPI_COMM_WORLD);
}

// Median over `trials` of the seconds both ring neighbours take to exchange `bytes` each way at
// once (as a ring step does), on the slowest rank, after one untimed exchange (the buffers'
// pages mapped, as the ring's are after its first call). 0 over one rank.
double ExchangeSeconds(int64_t bytes, int trials) {
  int size = 0, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (size == 1) return 0;
  std::vector<char> out(static_cast<size_t>(bytes), 1), in(static_cast<size_t>(bytes));
  const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  std::vector<double> seconds;
  for (int trial = -1; trial < trials; ++trial) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = Now();
    MPI_Sendrecv(out.data(), static_cast<int>(bytes), MPI_CHAR, next, 91, in.data(),
                 static_cast<int>(bytes), MPI_CHAR, prev, 91, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (trial >= 0) seconds.push_back(Now() - t0);
  }
  MaxOverRanks(seconds);
  return UpperMedian(seconds);
}

// One timed pass on this rank: wall seconds, and what its kernel did meanwhile (system CPU
// seconds: shared-memory copies between processes and page faults run there, on this core).
struct PassSample {
  double wall_s = 0, system_s = 0, minor_faults = 0;
  double compute_s = 0, progress_s = 0, wait_s = 0;  // the ring's own RingAttentionStats
};
constexpr int kSampleFields = 6;

PassSample Usage() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return {Now(),
          static_cast<double>(usage.ru_stime.tv_sec) +
              1e-6 * static_cast<double>(usage.ru_stime.tv_usec),
          static_cast<double>(usage.ru_minflt)};
}

// The standard overlap measure of one pass from `repeats` rounds, each running the compute
// alone, the transfers alone and both (the real pass) back to back (slowest rank per sample),
// and per-step figures for the crossover.
struct PassOverlap {
  std::vector<PassSample> both, compute, transfers;  // one per repeat
  int64_t steps = 0;                                 // ring steps (blocks computed)
  int64_t bytes_sent = 0;                            // by the transfers, per rank
  int64_t bytes_per_step =
      0;  // what one steady-state step moves: a K/V block (+ a dK/dV accumulator backward)

  static double MedianOf(const std::vector<PassSample>& samples, double PassSample::*field) {
    std::vector<double> v;
    for (const PassSample& s : samples) v.push_back(s.*field);
    return UpperMedian(v);
  }
  double both_s() const { return MedianOf(both, &PassSample::wall_s); }
  double compute_s() const { return MedianOf(compute, &PassSample::wall_s); }
  double transfers_s() const { return MedianOf(transfers, &PassSample::wall_s); }
  bool moves_bytes() const { return bytes_sent > 0; }
  // Per repeat, from the three passes run back to back, not clamped: their spread shows how far
  // timing noise carries the measure when the transfers are small beside the compute.
  std::vector<double> hidden_per_repeat() const {
    std::vector<double> h;
    for (size_t r = 0; r < both.size(); ++r) {
      const double t = transfers[r].wall_s;
      h.push_back(t > 0 ? (compute[r].wall_s + t - both[r].wall_s) / t : 0.0);
    }
    return h;
  }
  // The measure on the medians: (t_compute + t_transfers - t_both) / t_transfers in [0, 1].
  double hidden() const {
    const double t = transfers_s();
    return t > 0 ? std::clamp((compute_s() + t - both_s()) / t, 0.0, 1.0) : 0.0;
  }
  // From the ring's own timers in the real pass: the transfer time that cost the computing core
  // nothing, 1 - (seconds in MPI calls between pieces + seconds waiting) / transfers alone. Less
  // noisy than the wall-clock measure when the transfers are small beside the compute, but a
  // late neighbour's wait counts as exposed.
  double hidden_from_timers() const {
    const double t = transfers_s();
    const double exposed =
        MedianOf(both, &PassSample::progress_s) + MedianOf(both, &PassSample::wait_s);
    return t > 0 ? std::clamp(1.0 - exposed / t, 0.0, 1.0) : 0.0;
  }
  double compute_per_step_s() const { return compute_s() / static_cast<double>(steps); }
  double transfer_per_step_s() const {
    return moves_bytes() ? transfers_s() * static_cast<double>(bytes_per_step) /
                               static_cast<double>(bytes_sent)
                         : 0.0;
  }
};

json OverlapJson(const PassOverlap& p) {
  auto kernel = [&](double PassSample::*field) {
    return json{{"both", PassOverlap::MedianOf(p.both, field)},
                {"compute_only", PassOverlap::MedianOf(p.compute, field)},
                {"transfers_only", PassOverlap::MedianOf(p.transfers, field)}};
  };
  json j = {
      {"both_s", p.both_s()},
      {"compute_only_s", p.compute_s()},
      {"transfers_only_s", p.transfers_s()},
      {"hidden_fraction", p.moves_bytes() ? json(p.hidden()) : json(nullptr)},
      {"hidden_fraction_per_repeat", p.moves_bytes() ? json(p.hidden_per_repeat()) : json::array()},
      {"steps", p.steps},
      {"compute_per_step_s", p.compute_per_step_s()},
      {"bytes_per_step", p.bytes_per_step},
      {"transfer_per_step_s", p.transfer_per_step_s()},
      {"compute_per_step_exceeds_transfer", p.compute_per_step_s() >= p.transfer_per_step_s()},
      {"ring_stats",
       {{"compute_s", kernel(&PassSample::compute_s)},
        {"progress_s", kernel(&PassSample::progress_s)},
        {"wait_s", kernel(&PassSample::wait_s)},
        {"hidden_fraction_from_timers",
         p.moves_bytes() ? json(p.hidden_from_timers()) : json(nullptr)}}},
      {"system_cpu_s", kernel(&PassSample::system_s)},
      {"minor_page_faults", kernel(&PassSample::minor_faults)}};
  return j;
}

json PredictionJson(const RingPassPrediction& p) {
  return {{"time_s", p.time_s},
          {"compute_s", p.compute_s},
          {"transfers_s", p.transfers_s},
          {"ops", p.ops}};
}

constexpr const char* kOverlapMethod =
    "each of --repeats rounds runs, back to back: compute_only (the same block computations with "
    "no MPI, each step on this rank's "
    "own K/V at the positions the real step's block carries: same masks and work), transfers_only "
    "(the same messages with no "
    "compute) and both (the real ring pass), timed on the slowest rank; the *_s fields are the "
    "medians over rounds and hidden_fraction = "
    "(compute_only_s + transfers_only_s - both_s) / transfers_only_s clamped to [0, 1] "
    "(hidden_fraction_per_repeat: each round's, "
    "unclamped, to show the noise); transfer_per_step_s = "
    "transfers_only_s x bytes_per_step / bytes sent; ring_stats: the ring's own timers (compute_s "
    "in the kernels, progress_s in the "
    "MPI calls between pieces, where shared-memory copies run on the computing core, wait_s "
    "blocked), and hidden_fraction_from_timers "
    "= 1 - (progress_s + wait_s of the real pass) / transfers_only_s; system_cpu_s: CPU seconds "
    "this rank spent in the OS kernel "
    "(tick-sampled)";

// One measured shape at `seq_len`: the report object and whether --check failed.
struct ShapeResult {
  json report;
  bool check_failed = false;
};

ShapeResult MeasureShape(const RingAttentionBenchOptions& o, int64_t seq_len, MeshComms& comms) {
  int size = 0, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const SequenceLayout layout = ParseSequenceLayout(o.layout);
  CheckSequenceSplit(layout, seq_len, size);
  const std::vector<int32_t> positions = SequencePositions(layout, seq_len, size, rank);
  const int64_t local = static_cast<int64_t>(positions.size());
  const int64_t qrow = o.heads * o.head_dim, kvrow = o.kv_heads * o.head_dim;
  Inputs in = MakeInputs(o, positions, seq_len);
  std::vector<float>&q = in.q, &k = in.k, &v = in.v, &d_o = in.d_o;
  const AttentionShape shape{static_cast<int>(o.batch),    static_cast<int>(local),
                             static_cast<int>(local),      static_cast<int>(o.heads),
                             static_cast<int>(o.kv_heads), static_cast<int>(o.head_dim)};
  const float scale = 1.0f / std::sqrt(static_cast<float>(o.head_dim));
  std::vector<float> out(q.size()), lse(static_cast<size_t>(o.batch * o.heads * local)),
      dq(q.size()), dk(k.size()), dv(v.size());

  std::vector<std::vector<int32_t>> step_positions;
  RingAttentionWorkspace workspace;  // buffers kept between the passes, as the trainer keeps them
  RingPass compute_only{RingWork::kComputeOnly, {}, &workspace};
  for (int s = 0; s < size; ++s)
    step_positions.push_back(SequencePositions(layout, seq_len, size, (rank - s + size) % size));
  for (const auto& p : step_positions) compute_only.step_kv_positions.push_back(p.data());

  // This machine's rates, measured first. The attention-kernel rate as the ring runs the kernels
  // (in its pieces, with its merges and sums) on unmasked blocks: compute-only passes with causal
  // off, c block pairs of 4·B·S_l²·H·K FLOPs forward and twice that backward (the step
  // program's count). A single call on a whole block runs at another rate (cache footprint):
  // at S_l = 4096 the backward kernel reached 44 GFLOP/s in one call against 63 in the ring's
  // pieces.
  RingMeasuredRates rates;
  {
    std::vector<double> times(2 * static_cast<size_t>(o.repeats));
    for (int64_t r = 0; r < 2 * o.repeats; ++r) {
      MPI_Barrier(MPI_COMM_WORLD);
      const double t0 = Now();
      if (r < o.repeats) {
        RingAttentionForward(out.data(), lse.data(), q.data(), k.data(), v.data(), positions.data(),
                             shape, false, scale, comms, compute_only);
      } else {
        RingAttentionBackward(dq.data(), dk.data(), dv.data(), q.data(), k.data(), v.data(),
                              out.data(), d_o.data(), lse.data(), positions.data(), shape, false,
                              scale, comms, compute_only);
      }
      times[static_cast<size_t>(r)] = Now() - t0;
    }
    MaxOverRanks(times);
    const double forward_s = UpperMedian({times.begin(), times.begin() + o.repeats});
    const double backward_s = UpperMedian({times.begin() + o.repeats, times.end()});
    const double ring_flops = 4.0 * static_cast<double>(size) * static_cast<double>(o.batch) *
                              static_cast<double>(local) * static_cast<double>(local) *
                              static_cast<double>(qrow);
    rates.forward_flop_per_s = ring_flops / forward_s;
    rates.backward_flop_per_s = 2 * ring_flops / backward_s;
  }
  const int64_t kv_block_bytes =
      2 * static_cast<int64_t>(k.size()) * 4 + local * 4;  // K, V and positions
  if (size > 1) {
    rates.p2p_latency_s = ExchangeSeconds(8, 20);
    const double exchange_s = ExchangeSeconds(kv_block_bytes, 9);
    const double bandwidth_s =
        exchange_s > rates.p2p_latency_s ? exchange_s - rates.p2p_latency_s : exchange_s;
    rates.p2p_bytes_per_s = static_cast<double>(kv_block_bytes) / bandwidth_s;
  }

  // The ring passes: per repeat each half alone, then the real pass, forward then backward. The
  // halves write into the same outputs (their numbers mean nothing); the real passes run last,
  // so the outputs checked are theirs.
  const RingPass transfers_only{RingWork::kTransfersOnly, {}, &workspace};
  const RingPass real{RingWork::kComputeAndTransfers, {}, &workspace};
  enum { kFwdBoth, kFwdCompute, kFwdTransfers, kBwdBoth, kBwdCompute, kBwdTransfers, kKinds };
  std::vector<double> samples(static_cast<size_t>(
      kSampleFields * kKinds * o.repeats));  // PassSample's fields per repeat and kind
  RingAttentionStats fwd, bwd, fwd_transfers, bwd_transfers;
  for (int64_t r = 0; r < o.repeats; ++r) {
    auto timed = [&](int kind, auto&& pass) {
      MPI_Barrier(MPI_COMM_WORLD);
      const PassSample start = Usage();
      const RingAttentionStats stats = pass();
      const PassSample end = Usage();
      double* at = &samples[static_cast<size_t>(kSampleFields * (kKinds * r + kind))];
      at[0] = end.wall_s - start.wall_s, at[1] = end.system_s - start.system_s,
      at[2] = end.minor_faults - start.minor_faults;
      at[3] = stats.compute_s, at[4] = stats.progress_s, at[5] = stats.comm_wait_s;
      return stats;
    };
    auto forward = [&](const RingPass& pass) {
      return RingAttentionForward(out.data(), lse.data(), q.data(), k.data(), v.data(),
                                  positions.data(), shape, o.causal, scale, comms, pass);
    };
    auto backward = [&](const RingPass& pass) {
      return RingAttentionBackward(dq.data(), dk.data(), dv.data(), q.data(), k.data(), v.data(),
                                   out.data(), d_o.data(), lse.data(), positions.data(), shape,
                                   o.causal, scale, comms, pass);
    };
    timed(kFwdCompute, [&] { return forward(compute_only); });
    fwd_transfers = timed(kFwdTransfers, [&] { return forward(transfers_only); });
    fwd = timed(kFwdBoth, [&] { return forward(real); });
    timed(kBwdCompute, [&] { return backward(compute_only); });
    bwd_transfers = timed(kBwdTransfers, [&] { return backward(transfers_only); });
    std::fill(dq.begin(), dq.end(), 0.0f), std::fill(dk.begin(), dk.end(), 0.0f),
        std::fill(dv.begin(), dv.end(), 0.0f);
    bwd = timed(kBwdBoth, [&] { return backward(real); });
  }
  MaxOverRanks(samples);
  auto series = [&](int kind) {
    std::vector<PassSample> runs;
    for (int64_t r = 0; r < o.repeats; ++r) {
      const double* at = &samples[static_cast<size_t>(kSampleFields * (kKinds * r + kind))];
      runs.push_back({at[0], at[1], at[2], at[3], at[4], at[5]});
    }
    return runs;
  };
  const int64_t accumulator_bytes = 2 * static_cast<int64_t>(k.size()) * 4;
  const PassOverlap forward_overlap{series(kFwdBoth),         series(kFwdCompute),
                                    series(kFwdTransfers),    size,
                                    fwd_transfers.bytes_sent, kv_block_bytes};
  const PassOverlap backward_overlap{series(kBwdBoth),         series(kBwdCompute),
                                     series(kBwdTransfers),    size,
                                     bwd_transfers.bytes_sent, kv_block_bytes + accumulator_bytes};

  double max_error[2] = {0, 0};
  if (o.check) {
    // Full attention of this rank's queries over every key, and the full backward.
    std::vector<int32_t> all(static_cast<size_t>(seq_len));
    for (int64_t i = 0; i < seq_len; ++i) all[static_cast<size_t>(i)] = static_cast<int32_t>(i);
    const Inputs full_inputs = MakeInputs(o, all, seq_len);
    const std::vector<float>&qa = full_inputs.q, &ka = full_inputs.k, &va = full_inputs.v, &da = full_inputs.d_o;
    const AttentionShape full{static_cast<int>(o.batch),    static_cast<int>(seq_len),
                              static_cast<int>(seq_len),    static_cast<int>(o.heads),
                              static_cast<int>(o.kv_heads), static_cast<int>(o.head_dim)};
    std::vector<float> of(qa.size()), lf(static_cast<size_t>(o.batch * o.heads * seq_len)),
        dqf(qa.size()), dkf(ka.size()), dvf(va.size());
    AttentionForward(of.data(), lf.data(), qa.data(), ka.data(), va.data(), full, o.causal, scale);
    AttentionBackward(dqf.data(), dkf.data(), dvf.data(), qa.data(), ka.data(), va.data(),
                      of.data(), da.data(), lf.data(), full, o.causal, scale);
    auto compare = [&](const std::vector<float>& mine, const std::vector<float>& whole, int64_t row,
                       double& worst) {
      for (int64_t b = 0; b < o.batch; ++b) {
        for (size_t i = 0; i < positions.size(); ++i) {
          for (int64_t col = 0; col < row; ++col) {
            const double a =
                mine[(static_cast<size_t>(b) * positions.size() + i) * static_cast<size_t>(row) +
                     static_cast<size_t>(col)];
            const double w = whole[static_cast<size_t>((b * seq_len + positions[i]) * row + col)];
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

  // Balance, waits and memory over the ranks (the last real passes).
  std::vector<double> extremes = {fwd.compute_s + bwd.compute_s, -(fwd.compute_s + bwd.compute_s),
                                  fwd.comm_wait_s, bwd.comm_wait_s, PeakRssBytes()};
  MaxOverRanks(extremes);
  const double slowest = extremes[0], fastest = -extremes[1];

  const RingPrediction prediction = PredictRingAttention(o.batch, seq_len, o.heads, o.kv_heads,
                                                         o.head_dim, o.causal, size, rates);
  const double formula_forward =
      rates.p2p_bytes_per_s > 0
          ? FormulaCrossoverBlockTokens(o.batch, o.heads, o.kv_heads, o.head_dim, o.causal, false,
                                        rates.forward_flop_per_s, rates.p2p_bytes_per_s)
          : 0.0;
  const double formula_backward =
      rates.p2p_bytes_per_s > 0
          ? FormulaCrossoverBlockTokens(o.batch, o.heads, o.kv_heads, o.head_dim, o.causal, true,
                                        rates.backward_flop_per_s, rates.p2p_bytes_per_s)
          : 0.0;
  // The old wait-based figure: transfer time at the measured p2p rate, less the time blocked in
  // waits. A neighbour that arrives late counts as exposed transfer here, so it is kept only as
  // a diagnostic beside the standard measure.
  const double transfer_at_p2p_s =
      rates.p2p_bytes_per_s > 0
          ? static_cast<double>(fwd.bytes_sent + bwd.bytes_sent) / rates.p2p_bytes_per_s
          : 0.0;
  const double waits = extremes[2] + extremes[3];

  ShapeResult result;
  json& j = result.report;
  j["shape"] = {{"batch", o.batch},       {"seq", seq_len},         {"heads", o.heads},
                {"kv_heads", o.kv_heads}, {"head_dim", o.head_dim}, {"causal", o.causal},
                {"layout", o.layout}};
  j["block_tokens"] = local;
  j["forward_s"] = forward_overlap.both_s();
  j["backward_s"] = backward_overlap.both_s();
  j["predicted_forward_s"] = prediction.forward.time_s;
  j["predicted_backward_s"] = prediction.backward.time_s;
  j["prediction"] = {{"source", prediction.source},
                     {"forward", PredictionJson(prediction.forward)},
                     {"backward", PredictionJson(prediction.backward)}};
  j["overlap"] = {{"method", kOverlapMethod},
                  {"forward", OverlapJson(forward_overlap)},
                  {"backward", OverlapJson(backward_overlap)}};
  j["crossover"] = {
      {"block_tokens", local},
      {"formula_block_tokens", {{"forward", formula_forward}, {"backward", formula_backward}}},
      {"formula",
       "Liu et al. 2023: per step compute 4·B·c²·H·K (x1/2 causal) FLOPs / F >= transfer "
       "(2·B·G·K·4 + 4)·c bytes / B_p2p (fp32 K and V of "
       "G heads plus int32 positions; backward: 2x the FLOPs at the backward rate, plus a dK/dV "
       "accumulator); F and B_p2p from "
       "measured_rates"}};
  j["comm_wait"] = {
      {"note",
       "seconds blocked in waits during the real passes (slowest rank); includes waiting for a "
       "late neighbour, so "
       "hidden_fraction_from_waits is a diagnostic; overlap.*.hidden_fraction is the standard "
       "measure"},
      {"forward_s", extremes[2]},
      {"backward_s", extremes[3]},
      {"transfer_at_p2p_rate_s", transfer_at_p2p_s},
      {"hidden_fraction_from_waits",
       transfer_at_p2p_s > 0 ? std::clamp(1.0 - waits / transfer_at_p2p_s, 0.0, 1.0) : 0.0}};
  j["compute_s"] = {{"slowest_rank", slowest},
                    {"fastest_rank", fastest},
                    {"imbalance", fastest > 0 ? slowest / fastest - 1 : 0.0}};
  j["measured_rates"] = {{"attention_forward_flop_per_s", rates.forward_flop_per_s},
                         {"attention_backward_flop_per_s", rates.backward_flop_per_s},
                         {"p2p_bytes_per_s", rates.p2p_bytes_per_s},
                         {"p2p_latency_s", rates.p2p_latency_s},
                         {"kv_block_bytes", kv_block_bytes}};
  j["peak_memory_bytes_per_rank"] = extremes[4];
  if (o.check) j["max_abs_error"] = {{"output", max_error[0]}, {"gradients", max_error[1]}};
  // fp32 ring attention equals full attention within 1e-5, or the check fails.
  result.check_failed = o.check && std::max(max_error[0], max_error[1]) > 1e-5;
  return result;
}

// The sweep's crossover for one pass ("forward" or "backward"): the smallest swept block size
// from which on every larger one computes at least as long per step as it transfers, its
// log-linear interpolation from the bracketing pair, and the formula's from the rates measured at
// the largest block (the kernel nearest its peak rate, the largest messages).
json SweepCrossover(const json& points, const std::string& pass) {
  json j;
  const size_t n = points.size();
  size_t first = n;  // first index of the suffix where compute >= transfer
  for (size_t i = n; i-- > 0;) {
    if (!points[i]["overlap"][pass]["compute_per_step_exceeds_transfer"].get<bool>()) break;
    first = i;
  }
  auto ratio = [&](size_t i) {
    const json& p = points[i]["overlap"][pass];
    return p["compute_per_step_s"].get<double>() /
           std::max(p["transfer_per_step_s"].get<double>(), 1e-30);
  };
  j["measured_block_tokens"] = first < n ? points[first]["block_tokens"] : json(nullptr);
  if (first < n && first > 0) {
    const double b0 = points[first - 1]["block_tokens"].get<double>(),
                 b1 = points[first]["block_tokens"].get<double>();
    const double r0 = std::log(std::max(ratio(first - 1), 1e-30)),
                 r1 = std::log(std::max(ratio(first), 1e-30));
    const double t = r1 > r0 ? -r0 / (r1 - r0) : 1.0;
    j["measured_interpolated_block_tokens"] =
        std::exp(std::log(b0) + t * (std::log(b1) - std::log(b0)));
  } else {
    j["measured_interpolated_block_tokens"] =
        nullptr;  // none crosses, or already the smallest does
  }
  j["hidden_fraction_at_measured_crossover"] =
      first < n ? points[first]["overlap"][pass]["hidden_fraction"] : json(nullptr);
  if (n > 0) {
    j["formula_block_tokens"] = points[n - 1]["crossover"]["formula_block_tokens"][pass];
    j["formula_rates_from_block_tokens"] = points[n - 1]["block_tokens"];
    j["hidden_fraction_at_largest_block"] = points[n - 1]["overlap"][pass]["hidden_fraction"];
  }
  return j;
}

}  // namespace

json RingAttentionBenchReport(const RingAttentionBenchOptions& o) {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  for (const auto& [name, value] :
       std::vector<std::pair<std::string, int64_t>>{{"--seq", o.seq_len},
                                                    {"--heads", o.heads},
                                                    {"--kv-heads", o.kv_heads},
                                                    {"--head-dim", o.head_dim},
                                                    {"--batch", o.batch},
                                                    {"--repeats", o.repeats}}) {
    if (value < 1) throw InputError(name, std::to_string(value), "1 or more");
  }
  if (o.heads % o.kv_heads != 0) {
    throw InputError("--kv-heads",
                     std::to_string(o.kv_heads) + " must divide --heads " + std::to_string(o.heads),
                     "a divisor of the heads");
  }
  const SequenceLayout layout = ParseSequenceLayout(o.layout);
  std::vector<int64_t> blocks = o.sweep_block_tokens;
  std::sort(blocks.begin(), blocks.end());
  blocks.erase(std::unique(blocks.begin(), blocks.end()), blocks.end());
  const int64_t unit =
      layout == SequenceLayout::kZigzag ? 2 : 1;  // tokens per rank must split in two chunks
  for (int64_t b : blocks) {
    if (b < 1 || b % unit != 0 || b > (int64_t{1} << 30) / size) {
      throw InputError("--sweep", "block size " + std::to_string(b) + " (tokens per rank)",
                       unit == 2 ? "positive even numbers (zigzag holds two chunks per rank)"
                                 : "positive numbers",
                       "e.g. --sweep 64,128,256,512");
    }
  }
  PlanSpec plan;
  plan.mesh.context = size;
  MeshComms comms(MPI_COMM_WORLD, plan);
  if (blocks.empty()) {
    ShapeResult one = MeasureShape(o, o.seq_len, comms);
    json report = {{"ranks", size}};
    report.update(one.report);
    report["check_failed"] = one.check_failed;
    return report;
  }
  json report = {{"ranks", size},
                 {"shape",
                  {{"batch", o.batch},
                   {"heads", o.heads},
                   {"kv_heads", o.kv_heads},
                   {"head_dim", o.head_dim},
                   {"causal", o.causal},
                   {"layout", o.layout}}},
                 {"sweep", json::array()}};
  bool check_failed = false;
  for (int64_t b : blocks) {
    ShapeResult point = MeasureShape(o, b * size, comms);
    check_failed = check_failed || point.check_failed;
    report["sweep"].push_back(std::move(point.report));
  }
  report["crossover"] = {{"definition",
                          "measured: the smallest swept block size (tokens per rank) from which on "
                          "every larger one a ring step computes at "
                          "least as long as it transfers (overlap.*.compute_per_step_s >= "
                          "transfer_per_step_s); formula: "
                          "crossover.formula_block_tokens of the largest block's run"},
                         {"forward", SweepCrossover(report["sweep"], "forward")},
                         {"backward", SweepCrossover(report["sweep"], "backward")}};
  report["check_failed"] = check_failed;
  return report;
}

int RunRingAttentionBench(const RingAttentionBenchOptions& options) {
  const json report = RingAttentionBenchReport(options);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) {
    if (options.json) {
      std::cout << report.dump(2) << "\n";
    } else if (report.contains("sweep")) {
      PrintSweepText(report);
    } else {
      PrintShapeText(report, report["ranks"].get<int>());
    }
  }
  return report["check_failed"].get<bool>() ? 1 : 0;
}

}  // namespace shardsim::validation
