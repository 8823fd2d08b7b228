#include "validation/calibrate_compute.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "core/model_presets.h"
#include "core/plan_spec.h"
#include "core/stats.h"
#include "runtime/corpus.h"
#include "runtime/gemm.h"
#include "runtime/trainer.h"
#include "strategies/op_keys.h"

namespace shardsim::validation {
namespace {

double Now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Median seconds of `run` repeated until `min_s` has passed (at least twice).
template <typename F>
double MedianSeconds(F run, double min_s) {
  std::vector<double> times;
  const double start = Now();
  while (times.size() < 2 || (Now() - start < min_s && times.size() < 1000)) {
    const double t0 = Now();
    run();
    times.push_back(Now() - t0);
  }
  return UpperMedian(std::move(times));
}

}  // namespace

std::vector<int64_t> GemmGridSizes() { return {32, 128, 512, 2048}; }

// Operands rotate through a pool larger than the caches, as training's weights and activations
// come from memory rather than from the last call's cache lines.
constexpr size_t kPoolBytes = size_t{96} << 20;

GemmTable MeasureGemm(double min_s) {
  GemmTable table;
  table.m = table.n = table.k = GemmGridSizes();
  std::vector<float> pool(kPoolBytes / sizeof(float), 0.5f);
  for (int64_t m : table.m) {
    for (int64_t n : table.n) {
      for (int64_t k : table.k) {
        const size_t a = static_cast<size_t>(m * k), b = static_cast<size_t>(k * n), c = static_cast<size_t>(m * n);
        const size_t copies = std::max<size_t>(1, pool.size() / (a + b + c));
        size_t next = 0;
        const double seconds = MedianSeconds(
            [&] {
              float* base = pool.data() + (next++ % copies) * (a + b + c);
              runtime::Gemm(base + a + b, base, base + a, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), runtime::Transpose::kNo,
                            runtime::Transpose::kNo, 1.0f, 0.0f);
            },
            min_s);
        table.flop_per_s.push_back(2.0 * static_cast<double>(m * n * k) / seconds);
      }
    }
  }
  return table;
}

std::map<std::string, KernelRate> MeasureKernels(const std::vector<int64_t>& seq_lens) {
  // Per op name and sequence length: the rate of each span (the program's FLOPs or bytes over
  // the span's seconds); the median counts (robust to a span that was descheduled).
  struct Rates {
    bool per_flop = false;
    std::vector<double> rates;
  };
  std::map<std::string, std::map<int64_t, Rates>> sums;
  for (const char* name : {"tiny-dense", "tiny-moe"}) {
    const ModelSpec model = FindModelPreset(name)->spec;
    for (int64_t seq : seq_lens) {
      PlanSpec plan;
      plan.global_batch_size = 1;
      plan.seq_len = seq;
      plan.dtype = "fp32";
      const runtime::Corpus corpus(std::string(runtime::ShippedCorpus()), seq);
      runtime::Trainer trainer(model, plan, runtime::TrainOptions{}, MPI_COMM_SELF, corpus);
      trainer.Step();  // warm the caches and the allocator
      trainer.EnableTrace(true);
      trainer.Step();
      trainer.Step();
      std::map<std::string, strategies::Op> ops;
      for (const strategies::KeyedOp& k : strategies::StageOps(trainer.program(), 0)) ops.emplace(k.key, k.op);
      for (const runtime::TraceEvent& e : trainer.trace_events()) {
        const auto op = ops.find(e.key);
        if (op == ops.end() || op->second.is_comm() || op->second.kind == strategies::ComputeKind::kMatmul) continue;
        Rates& r = sums[op->second.name][seq];
        r.per_flop = op->second.kind == strategies::ComputeKind::kAttention || op->second.kind == strategies::ComputeKind::kScan;
        const double work = r.per_flop ? op->second.flops : op->second.bytes;
        if (work > 0 && e.duration_s > 0) r.rates.push_back(work / e.duration_s);
      }
    }
  }
  std::map<std::string, KernelRate> kernels;
  for (const auto& [name, by_seq] : sums) {
    KernelRate rate;
    for (auto [seq, r] : by_seq) {
      if (r.rates.empty()) continue;
      rate.per_flop = r.per_flop;
      rate.points.push_back({static_cast<double>(seq), UpperMedian(r.rates)});
    }
    if (!rate.points.empty()) kernels[name] = rate;
  }
  return kernels;
}

double MeasureTriad(int64_t elements, double min_s) {
  std::vector<float> a(static_cast<size_t>(elements), 0.0f), b(a.size(), 1.0f), c(a.size(), 2.0f);
  const float s = 0.5f;
  const double seconds = MedianSeconds(
      [&] {
        float* pa = a.data();
        const float* pb = b.data();
        const float* pc = c.data();
        for (size_t i = 0; i < a.size(); ++i) pa[i] = pb[i] + s * pc[i];
      },
      min_s);
  // Keep the result observable so the loop is not optimised away.
  volatile float sink = a[a.size() / 2];
  (void)sink;
  return 3.0 * 4.0 * static_cast<double>(elements) / seconds;
}

}  // namespace shardsim::validation
