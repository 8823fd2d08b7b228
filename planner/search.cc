#include "planner/search.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <numeric>
#include <optional>
#include <thread>
#include <tuple>

#include "core/error.h"
#include "core/units.h"
#include "planner/balanced_layout.h"
#include "planner/explain.h"
#include "planner/framework_facts.h"
#include "planner/mesh_orders.h"
#include "planner/offload_rung.h"
#include "planner/ranking.h"
#include "planner/search_meshes.h"
#include "strategies/build_step.h"
#include "strategies/data_parallel.h"
#include "strategies/memory_model.h"
#include "strategies/plan_rules.h"
#include "strategies/schedule.h"
#include "strategies/state_bytes.h"
#include "topologies/cluster.h"

namespace shardsim::planner {
namespace {

// A lower bound on a plan's memory per device: parameters, gradients and optimizer state.
double StateBytesLowerBound(const ModelSpec& m, const PlanSpec& p) {
  const ParamCounts counts = CountParams(m);
  const double expert = static_cast<double>(counts.routed_experts);
  const double dense = static_cast<double>(counts.total) - expert;
  const double split = static_cast<double>(p.mesh.tensor * p.mesh.pipeline);
  const strategies::ShardDegrees d = strategies::Sharding(p, strategies::ParamKind::kDense);
  const strategies::ShardDegrees x = strategies::Sharding(p, strategies::ParamKind::kExpert);
  const double dense_local = dense / split, expert_local =
      expert / static_cast<double>(p.mesh.pipeline * ExpertTensorDegree(p) * ExpertDegree(p));
  const strategies::StateBytes b = strategies::StateBytesOf(p);
  return dense_local * (b.params / d.params + b.grads / d.grads + b.optimizer / d.optimizer) +
         expert_local * (b.params / x.params + b.grads / x.grads + b.optimizer / x.optimizer);
}

struct Worker {
  std::vector<RankedPlan> plans;  // every feasible plan, pruned to the best per family and overall
  // After a pruning: the last plan of the `top`-th distinct outcome (when there are that many)
  // and each family's best, as indices into `plans`. A plan whose outcome is worse than the
  // cutoff's (Better orders by tokens/s, then memory, first) and that also loses to its family's
  // best would be pruned by every later pruning, so it is not kept at all.
  std::optional<size_t> cutoff;
  std::map<std::string, size_t> family_best;
  std::vector<RankedPlan> pareto;  // not beaten on both throughput and memory
  std::vector<Miss> misses;
  int64_t candidates = 0, pruned = 0, dominated = 0, evaluated = 0, over_limit = 0, unsupported = 0;
  int64_t capped_microbatch = 0;  // SearchResult's
  std::map<std::string, int64_t> gaps;  // why the framework could not run a plan -> how often
  RuleRefusalTally refusals;  // the plan rules' refusals
};

void Keep(Worker& w, RankedPlan plan, size_t top) {
  AddToFrontier(w.pareto, plan);
  if (w.cutoff && Better(w.plans[*w.cutoff], plan) && !SameOutcome(w.plans[*w.cutoff], plan)) {
    const auto family = w.family_best.find(plan.family);
    if (family != w.family_best.end() && Better(w.plans[family->second], plan)) return;
  }
  w.plans.push_back(std::move(plan));
  if (w.plans.size() < 4 * top + 64) return;
  // Keep the best `top` distinct outcomes (with every plan that shares them, so the final
  // order does not depend on how plans were split among threads) and the best of each family.
  std::sort(w.plans.begin(), w.plans.end(), Better);
  std::vector<RankedPlan> kept;
  w.cutoff.reset();
  w.family_best.clear();
  size_t outcomes = 0;  // distinct outcomes met so far, in sorted order
  double last_rate = -1, last_memory = -1;
  for (RankedPlan& p : w.plans) {
    const double rate = p.report.tokens_per_s, memory = p.report.memory.peak.total();
    if (rate != last_rate || memory != last_memory) ++outcomes;
    last_rate = rate, last_memory = memory;
    const bool first_of_family = w.family_best.emplace(p.family, kept.size()).second;  // the first of each family is its best
    if (outcomes <= top || first_of_family) {
      if (outcomes == top) w.cutoff = kept.size();
      kept.push_back(std::move(p));
    }
  }
  w.plans = std::move(kept);
}

// One mesh laid out in one order: every plan on it.
struct Job {
  MeshShape mesh;
  std::vector<std::string> order;
  // The last rung: this mesh, layout and expert fold again with each plan's stages balanced
  // (BalancedLayout) instead of the default split.
  bool balanced = false;
  std::vector<std::string> fold;
};

// The values of an enumerated field the search tries: the fixed one, or `searched`.
template <typename T>
std::vector<T> Tried(const PlanConstraints& fixed, std::string_view key, const T& value, std::vector<T> searched) {
  return fixed.Fixes(key) ? std::vector<T>{value} : searched;
}

// The plan every plan of a mesh starts from: the fixed fields, else the search's defaults.
PlanSpec BasePlan(const ClusterSpec& c, const SearchOptions& o, const Job& job) {
  const PlanConstraints& fixed = o.constraints;
  PlanSpec base = fixed.values;
  base.mesh = job.mesh;
  base.mesh_order = job.order;
  base.seq_len = o.seq_len;
  base.global_batch_size = o.global_batch_tokens / o.seq_len;
  // Sequence parallelism with tensor parallelism, unless the framework runs it off only
  // (DeepSpeed's AutoTP has none).
  if (!fixed.Fixes("sequence_parallel")) base.sequence_parallel = job.mesh.tensor > 1 && (!o.framework || FactsOf(*o.framework).sequence_parallel_on);
  if (!fixed.Fixes("flash_attention")) base.flash_attention = o.flash_attention;
  // bf16 where the chip has it (mixed-precision training), else its first listed dtype.
  if (!fixed.Fixes("dtype")) base.dtype = c.chip.peak_flop_per_s.count("bf16") ? "bf16" : c.chip.peak_flop_per_s.begin()->first;
  return base;
}

std::string GiB(double bytes) { return FormatBinaryBytes(bytes); }

// The schedules tried on a mesh: the default (on one stage every schedule is plain gradient
// accumulation), and with stages every other schedule with each chunk count it offers the
// planner; only the fixed one when the constraints fix it.
std::vector<std::pair<std::string, int64_t>> Schedules(const MeshShape& mesh, const PlanConstraints& fixed, const PlanSpec& base) {
  std::vector<std::pair<std::string, int64_t>> schedules = {{PlanSpec{}.pipeline_schedule, 1}};
  if (mesh.pipeline > 1) {
    for (const strategies::Schedule* schedule : strategies::AllSchedules()) {
      if (schedule->name() == schedules.front().first) continue;
      for (int64_t v : schedule->SearchedVirtualStages(mesh.pipeline)) schedules.push_back({std::string(schedule->name()), v});
    }
  }
  if (!fixed.Fixes("pipeline_schedule") && !fixed.Fixes("virtual_stages")) return schedules;
  // The fixed schedule (with each chunk count it offers, or the fixed one) and no other.
  std::vector<std::pair<std::string, int64_t>> kept;
  const std::string name = fixed.Fixes("pipeline_schedule") ? base.pipeline_schedule : "";
  for (const auto& [schedule, v] : schedules) {
    if ((name.empty() || schedule == name) && (!fixed.Fixes("virtual_stages") || v == base.virtual_stages)) kept.push_back({schedule, v});
  }
  if (kept.empty()) kept.push_back({name.empty() ? schedules.front().first : name, base.virtual_stages});  // CheckPlan says why not
  return kept;
}

// Whether the framework (if any) runs `plan` with one of `schedules`: a (mesh, ZeRO stage)
// pruned by memory is a near miss only for a framework that could run it.
bool FrameworkCouldRun(const ModelSpec& m, const ClusterSpec& c, const SearchOptions& o, const PlanSpec& plan,
                       const std::vector<std::pair<std::string, int64_t>>& schedules) {
  if (!o.framework) return true;
  for (const auto& [schedule, v] : schedules) {
    PlanSpec p = plan;
    p.pipeline_schedule = schedule, p.virtual_stages = v;
    p = AsFrameworkRuns(*o.framework, m, p);
    if (!strategies::CheckPlan(p, m, DeviceCount(c), c.name) && FrameworkGaps(*o.framework, m, p).empty()) return true;
  }
  return false;
}


void SearchFold(const ModelSpec& m, const ClusterSpec& c, const topologies::Cluster& graph, sim::SharedGroupCollectives& shared, const SearchOptions& o,
                const PlanSpec& base, Worker& w, bool balanced);

// How far `plan` is from running: a broken plan rule counts more than all framework gaps, then
// the framework's gaps (none without a framework).
size_t Refusals(const ModelSpec& m, const ClusterSpec& c, const SearchOptions& o, const PlanSpec& plan) {
  if (strategies::CheckPlan(plan, m, DeviceCount(c), c.name)) return 1000;
  return o.framework ? FrameworkGaps(*o.framework, m, AsFrameworkRuns(*o.framework, m, plan)).size() : 0;
}

// The expert folds tried on a mesh (expert_axes; MoE models only): unset, and the widest fold
// of the mesh's expert axis (where it has one) with its tensor and context ranks, as
// Megatron-core's MoE parallel folding lays expert parallelism over them: over tensor x context,
// else tensor, else context, among those whose degree divides the experts the first that the
// plan rules and the framework (if any) accept, else the first no worse than no fold (a fold
// of its own refused: over tensor without sequence parallelism, Megatron-core's experts
// leaving out the context ranks). A fold over data is the mesh's expert axis under another name,
// not tried. Only the fixed fold when the constraints fix it; none for a framework that does not
// fold.
std::vector<std::vector<std::string>> Folds(const ModelSpec& m, const ClusterSpec& c, const SearchOptions& o, const PlanSpec& base) {
  if (o.constraints.Fixes("expert_axes")) return {o.constraints.values.expert_axes};
  std::vector<std::vector<std::string>> folds = {{}};
  if (!m.moe || (o.framework && !FactsOf(*o.framework).moe_folding)) return folds;
  const MeshShape& mesh = base.mesh;
  const size_t unfolded = Refusals(m, c, o, base);
  std::optional<std::vector<std::string>> fallback;
  for (const std::vector<std::string>& over : {std::vector<std::string>{"tensor", "context"}, {"tensor"}, {"context"}}) {
    if (std::any_of(over.begin(), over.end(), [&](const std::string& axis) { return mesh.Size(axis) == 1; })) continue;
    std::vector<std::string> axes = over;
    if (mesh.expert > 1) axes.push_back("expert");
    PlanSpec folded = base;
    folded.expert_axes = axes;
    if (m.moe->num_experts % ExpertDegree(folded) != 0) continue;
    const size_t refusals = Refusals(m, c, o, folded);
    if (refusals == 0) {
      folds.push_back(axes);
      return folds;
    }
    if (!fallback && refusals <= unfolded) fallback = axes;
  }
  if (fallback) folds.push_back(*fallback);
  return folds;
}

void SearchMesh(const ModelSpec& m, const ClusterSpec& c, const topologies::Cluster& graph, sim::SharedGroupCollectives& shared, const SearchOptions& o,
                const Job& job, Worker& w) {
  const PlanSpec base = BasePlan(c, o, job);
  const std::vector<std::vector<std::string>> folds = job.balanced ? std::vector<std::vector<std::string>>{job.fold} : Folds(m, c, o, base);
  for (const std::vector<std::string>& fold : folds) {
    PlanSpec folded = base;
    folded.expert_axes = fold;
    SearchFold(m, c, graph, shared, o, folded, w, job.balanced);
  }
}

// Every plan of one mesh, layout and expert fold (`base`).
void SearchFold(const ModelSpec& m, const ClusterSpec& c, const topologies::Cluster& graph, sim::SharedGroupCollectives& shared, const SearchOptions& o,
                const PlanSpec& base, Worker& w, bool balanced) {
  const PlanConstraints& fixed = o.constraints;
  const MeshShape& mesh = base.mesh;
  const std::string family = Family(base);
  const int64_t per_replica = base.global_batch_size / BatchReplicas(mesh);
  const double limit = o.max_memory_bytes;
  // Groups of one axis are alike on regular fabrics: cost the first, the middle and the last.
  sim::AxisCollectives collectives(graph, base, 3, &shared);
  strategies::TaskLists task_lists;  // one pipeline shape's schedules, shared by this mesh's plans
  strategies::LayerCache layers;      // what plans of other schedules share (layer programs, step ops)
  // ZeRO shards over the replica axes: without any, every stage is ZeRO-0.
  const std::vector<std::pair<std::string, int64_t>> schedules = Schedules(mesh, fixed, base);
  std::vector<int64_t> zero_stages = {0};
  if (!strategies::ReplicaAxes(base, strategies::ParamKind::kDense).empty()) zero_stages = {0, 1, 2, 3};
  for (int64_t zero : Tried(fixed, "zero_stage", base.zero_stage, zero_stages)) {
    PlanSpec z = base;
    z.zero_stage = zero;
    const double bound = StateBytesLowerBound(m, z);
    if (bound > limit) {
      ++w.candidates;  // the whole (mesh, ZeRO stage) family, pruned at once
      ++w.pruned;
      if (FrameworkCouldRun(m, c, o, z, schedules)) {
        w.misses.push_back({z, "parameters, gradients and optimizer state alone need at least " + GiB(bound), bound, bound / limit, false});
      }
      continue;
    }
    // Micro-batches of 1 to 8 sequences; larger when a replica would otherwise run more than
    // kMaxSearchedMicrobatches a step.
    int64_t smallest = 1;
    while (per_replica / smallest > kMaxSearchedMicrobatches) smallest *= 2;
    if (smallest > 1 && !fixed.Fixes("micro_batch_size")) w.capped_microbatch = w.capped_microbatch > 0 ? std::min(w.capped_microbatch, smallest) : smallest;
    std::vector<int64_t> sizes;
    for (int64_t mbs = smallest; mbs <= std::max<int64_t>(8, smallest) && mbs <= per_replica; mbs *= 2) {
      if (per_replica % mbs == 0) sizes.push_back(mbs);
    }
    // With pipeline stages, sharded parameters stay gathered from the forward to the backward by
    // default (less traffic); re-gathering them (less memory) is tried, without recomputation,
    // where keeping them does not fit. A bound of the search: where keeping fits, re-gathering
    // can still be faster (keeping gathers the whole stage before the first forward, which
    // lengthens the pipeline's fill), by a little; trying it everywhere costs half again the
    // estimates (docs/plan.md).
    std::vector<std::optional<bool>> reshards = {z.fsdp_reshard_after_forward};
    if (!fixed.Fixes("fsdp_reshard_after_forward") && mesh.pipeline > 1 && !ReshardAfterForward(z) &&
        !strategies::ParamShardAxes(z, strategies::ParamKind::kDense).empty()) {
      reshards.push_back(true);
    }
    // Megatron-core's three unless a framework names its own policies (most memory kept first).
    const std::vector<Recompute> recomputes = Tried(fixed, "recompute", base.recompute,
                                                    o.framework ? FrameworkRecomputes(*o.framework)
                                                                : std::vector<Recompute>{Recompute::kNone, Recompute::kSelective, Recompute::kFull});
    for (int64_t mbs : Tried(fixed, "micro_batch_size", base.micro_batch_size, sizes)) {
      // Recomputation only adds work: once a plan of a schedule fits, the plans of that schedule
      // and resharding with more recomputation are slower and only smaller, so they are dropped
      // as dominated; re-gathering is dropped where keeping fits (the bound above).
      // fitted[k][r]: the lightest recomputation (index) at which schedule k fitted with
      // reshards[r]. The schedules run innermost: their plans share the layers' programs.
      std::vector<std::vector<size_t>> fitted(schedules.size(), std::vector<size_t>(reshards.size(), recomputes.size()));
      for (size_t rc = 0; rc < recomputes.size(); ++rc) {
        for (size_t r = 0; r < reshards.size(); ++r) {
          for (size_t k = 0; k < schedules.size(); ++k) {
            const auto& [schedule, v] = schedules[k];
            ++w.candidates;
            if (fitted[k][0] <= rc || fitted[k][r] <= rc) {
              ++w.dominated;
              continue;
            }
            if (r > 0 && recomputes[rc] != Recompute::kNone) {
              ++w.pruned;  // re-gathering is tried without recomputation only (the search's bound)
              continue;
            }
            PlanSpec plan = z;
            plan.fsdp_reshard_after_forward = reshards[r];
            plan.micro_batch_size = mbs;
            plan.pipeline_schedule = schedule;
            plan.virtual_stages = v;
            plan.recompute = recomputes[rc];
            double missed_peak = 0, missed_activations = 0;  // of the last plan over the memory limit
            // Estimates `candidate` and keeps it where it fits: 1 kept, 0 over the memory limit, -2
            // over the host memory (offloaded activations), -1 not evaluated (refused by a rule,
            // a constraint or the framework, or offloading without a host link).
            auto evaluate = [&](PlanSpec candidate) -> int {
              const std::optional<Infeasibility> refused = strategies::CheckPlan(candidate, m, DeviceCount(c), c.name);
              if (refused) w.refusals.Add(candidate, *refused);
              if (refused || !fixed.Allows(candidate) || (candidate.offload_layers > 0 && HostCopyBytesPerS(c) <= 0)) {
                ++w.pruned;
                return -1;
              }
              if (o.framework) {
                // A fused loss keeps less than an eager one for the same time: where the framework
                // computes both (torchtitan compiles its loss on request), the search asks for it.
                if (candidate.cross_entropy.empty() && FactsOf(*o.framework).fused_cross_entropy) candidate.cross_entropy = "fused";
                // Likewise fused elementwise kernels (torchtitan compiles its model on request).
                if (candidate.elementwise_kernels.empty() && FactsOf(*o.framework).fused_elementwise) candidate.elementwise_kernels = "fused";
                // As the framework runs it (the overlaps and FSDP behaviour it fixes), or not at all.
                candidate = AsFrameworkRuns(*o.framework, m, candidate);
                candidate.framework = std::string(FrameworkName(*o.framework));
                if (r > 0 && ReshardAfterForward(AsFrameworkRuns(*o.framework, m, z))) {
                  ++w.pruned;  // the framework re-gathers anyway: the first rung's plan already
                  return -1;
                }
                const std::vector<std::string> gaps = FrameworkGaps(*o.framework, m, candidate);
                if (!gaps.empty() || !fixed.Allows(candidate)) {
                  ++w.unsupported;
                  for (const std::string& gap : gaps) ++w.gaps[gap];
                  return -1;
                }
              }
              // The balanced rung: the plan again with its stages balanced, where that differs from
              // the default split (its twin, which the first rung estimated).
              std::optional<strategies::StepProgram> twin;
              if (balanced) {
                twin = strategies::BuildStep(m, candidate, &task_lists, &layers);
                candidate.pipeline_layout = BalancedLayout(m, *twin, c, collectives);
                if (candidate.pipeline_layout.empty()) {
                  layers.Recycle(std::move(*twin));
                  ++w.pruned;
                  return -1;
                }
              }
              strategies::StepProgram program = strategies::BuildStep(m, candidate, &task_lists, &layers);
              ++w.evaluated;
              // Memory first: it needs the program only, and a plan that does not fit is a near
              // miss whatever its time (the estimate's memory is this same model).
              const strategies::MemoryReport memory = strategies::EstimateMemory(program, &task_lists, c.chip.fp8_any_layout);
              const double peak = memory.peak.total();
              if (peak > limit) {
                ++w.over_limit;
                w.misses.push_back({candidate, "needs " + GiB(peak) + " per device", peak, peak / limit, true});
                missed_peak = peak, missed_activations = memory.peak.activations;
                layers.Recycle(std::move(program));
                return 0;
              }
              // Offloaded activations beyond the host memory the cluster spec gives.
              double host = 0;
              for (const strategies::MemoryBreakdown& b : memory.stages) host = std::max(host, b.host);
              const double host_limit = static_cast<double>(c.topology.host_bytes_per_device);
              if (host_limit > 0 && host > host_limit) {
                ++w.over_limit;
                w.misses.push_back({candidate, "its offloaded activations need " + GiB(host) + " of host memory per device", host, host / host_limit, true, host_limit});
                layers.Recycle(std::move(program));
                return -2;
              }
              sim::StepReport report = sim::Estimate(program, c, collectives, false, &task_lists, &memory);
              layers.Recycle(std::move(program));
              if (balanced) {
                // Kept only where faster than its twin (balanced by the layers' work, it can lose
                // to the schedule's own fill and drain).
                const double twin_s = sim::Estimate(*twin, c, collectives, false, &task_lists).step_time_s;
                layers.Recycle(std::move(*twin));
                if (report.step_time_s >= twin_s) return 1;  // estimated, fits, not kept
              }
              Keep(w, {candidate, std::move(report), family, "", {}}, o.top);
              return 1;
            };
            const int kept = evaluate(plan);
            if (kept == 1) fitted[k][r] = std::min(fitted[k][r], rc);
            // Activation offloading, where the cluster has a host link: a plan that does not fit
            // is tried again with activations offloaded (OffloadRung), the fewest that fit kept
            // (its copies may cost less than recomputation, whose rungs are tried all the same);
            // more offloading needs more host memory, so a host-memory miss ends the rung. A value
            // whose share of the activations cannot bring the peak under the limit is not built.
            if (kept == 0 && plan.offload_layers == 0 && !fixed.Fixes("offload_layers") && HostCopyBytesPerS(c) > 0) {
              for (const OffloadStep& step : OffloadRung(o.framework, m, plan)) {
                ++w.candidates;
                if (missed_peak - missed_activations * step.share > limit) {
                  ++w.pruned;
                  continue;
                }
                PlanSpec offloaded = plan;
                offloaded.offload_layers = step.layers;
                const int result = evaluate(offloaded);
                if (result == 1 || result == -2) break;
              }
            }
          }
        }
      }
    }
  }
  // Only the closest misses matter.
  std::sort(w.misses.begin(), w.misses.end(), Closer);
  if (w.misses.size() > 16) w.misses.resize(16);
}

// Runs the jobs on `workers.size()` threads (the calling one included, which reports progress
// as (done + jobs finished, total)).
void RunJobs(const ModelSpec& m, const ClusterSpec& c, const topologies::Cluster& graph, sim::SharedGroupCollectives& shared, const SearchOptions& o,
             const std::vector<Job>& jobs,
             std::vector<Worker>& workers, int64_t done_before, int64_t total) {
  std::atomic<size_t> next{0};
  std::atomic<int64_t> done{0};
  std::mutex failure_mutex;
  std::exception_ptr failure;
  auto work = [&](Worker& w, bool report) {
    try {
      for (size_t i = next++; i < jobs.size(); i = next++) {
        SearchMesh(m, c, graph, shared, o, jobs[i], w);
        ++done;
        if (report && o.progress) o.progress(done_before + done.load(), total);
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(failure_mutex);
      if (!failure) failure = std::current_exception();
      next = jobs.size();  // stop the others
    }
  };
  std::vector<std::thread> pool;
  for (size_t t = 1; t < workers.size(); ++t) pool.emplace_back(work, std::ref(workers[t]), false);
  work(workers[0], true);
  for (std::thread& t : pool) t.join();
  if (failure) std::rethrow_exception(failure);
}

}  // namespace

std::string Family(const PlanSpec& plan) {
  const MeshShape& mesh = plan.mesh;
  const std::string d = DescribeMesh(mesh);
  if (d == "(all axes 1)") return "single device";
  std::string family;
  for (const std::string& axis : MeshAxisNames()) {
    if (mesh.Size(axis) > 1) family += (family.empty() ? "" : " x ") + axis;
  }
  return family + ExpertAxesNote(plan);
}

// The leading plans of `ranked` (best first) that `wanted` keeps: those of the best `top` distinct
// outcomes, then the best of each other family. The later rungs (other mesh layouts, balanced
// stages) take their meshes from these.
namespace {
std::vector<const RankedPlan*> Leading(const std::vector<RankedPlan>& ranked, size_t top, const std::function<bool(const PlanSpec&)>& wanted) {
  std::vector<const RankedPlan*> out;
  std::map<std::string, bool> family_seen;
  size_t outcomes = 0;
  for (size_t i = 0; i < ranked.size(); ++i) {
    outcomes += i == 0 || !SameOutcome(ranked[i - 1], ranked[i]) ? 1 : 0;
    if (!wanted(ranked[i].plan) || (outcomes > top && family_seen[ranked[i].family])) continue;
    family_seen[ranked[i].family] = true;
    out.push_back(&ranked[i]);
  }
  return out;
}
}  // namespace

SearchResult Search(const ModelSpec& m, const ClusterSpec& c, const SearchOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  SearchOptions o = options;
  if (o.max_memory_bytes <= 0) o.max_memory_bytes = kDefaultMemoryFraction * static_cast<double>(c.chip.hbm_bytes);
  if (o.seq_len <= 0 || o.global_batch_tokens <= 0) throw InputError("plan", "needs --global-batch-tokens and --seq-len", "positive whole numbers");
  if (o.global_batch_tokens % o.seq_len != 0) {
    throw InputError("--global-batch-tokens", std::to_string(o.global_batch_tokens) + " is not a whole number of " + std::to_string(o.seq_len) + "-token sequences",
                     "a multiple of --seq-len", "e.g. " + std::to_string((o.global_batch_tokens / o.seq_len + 1) * o.seq_len));
  }
  if (m.position == PositionKind::kLearned && ExtendsContext(m, o.seq_len)) {
    throw InputError("--seq-len", std::to_string(o.seq_len) + " exceeds the model's " + std::to_string(m.max_seq_len) + " learned positions",
                     "1 to " + std::to_string(m.max_seq_len));
  }
  const int64_t sequences = o.global_batch_tokens / o.seq_len;
  const std::vector<MeshShape> meshes = Meshes(m, c, o.constraints, sequences, o.seq_len);
  if (meshes.empty()) ThrowNoMesh(m, c, o.constraints, sequences, o.seq_len);
  const topologies::Cluster graph(c);
  // Meshes whose sampled groups are the same devices share their collective models.
  sim::SharedGroupCollectives shared(graph);
  const int threads = std::max(1, o.threads > 0 ? o.threads : static_cast<int>(std::thread::hardware_concurrency()));
  std::vector<Worker> workers(static_cast<size_t>(threads));
  // A fixed mesh_order lays every mesh out that way, and no other layout is tried.
  const bool order_fixed = o.constraints.Fixes("mesh_order");
  const std::vector<std::string> order = order_fixed ? o.constraints.values.mesh_order : DefaultMeshOrder();
  std::vector<Job> jobs;
  for (const MeshShape& mesh : meshes) jobs.push_back({mesh, order});
  RunJobs(m, c, graph, shared, o, jobs, workers, 0, static_cast<int64_t>(jobs.size()));

  // Then the other layouts of the leading meshes: the best distinct outcomes' and each family's.
  auto ranked = [&workers]() {
    std::vector<RankedPlan> all;
    for (Worker& w : workers) all.insert(all.end(), w.plans.begin(), w.plans.end());
    std::sort(all.begin(), all.end(), Better);
    return all;
  };
  std::vector<Job> reorders;
  if (!order_fixed) {
    const std::vector<RankedPlan> leading = ranked();
    std::vector<MeshShape> chosen;
    for (const RankedPlan* p : Leading(leading, o.top, [](const PlanSpec&) { return true; })) {
      if (chosen.size() < 8 && std::find(chosen.begin(), chosen.end(), p->plan.mesh) == chosen.end()) chosen.push_back(p->plan.mesh);
    }
    for (const MeshShape& mesh : chosen) {
      for (const auto& other : OtherOrders(mesh)) reorders.push_back({mesh, other});
    }
  }
  RunJobs(m, c, graph, shared, o, reorders, workers, static_cast<int64_t>(jobs.size()), static_cast<int64_t>(jobs.size() + reorders.size()));

  // Last, the leading pipelined plans' meshes (in their layouts and folds) with balanced stages,
  // where the layout is free: not fixed, and the framework (if named) runs any layout.
  std::vector<Job> balanced;
  if (!o.constraints.Fixes("pipeline_layout") && (!o.framework || FactsOf(*o.framework).layout == LayoutRule::kAny)) {
    const auto pipelined = [](const PlanSpec& plan) { return plan.mesh.pipeline > 1 && plan.pipeline_layout.empty(); };
    const std::vector<RankedPlan> leading = ranked();
    for (const RankedPlan* p : Leading(leading, o.top, pipelined)) {
      const Job job{p->plan.mesh, p->plan.mesh_order, true, p->plan.expert_axes};
      const bool seen = std::any_of(balanced.begin(), balanced.end(),
                                    [&](const Job& b) { return b.mesh == job.mesh && b.order == job.order && b.fold == job.fold; });
      if (!seen && balanced.size() < 8) balanced.push_back(job);
    }
  }
  const int64_t before = static_cast<int64_t>(jobs.size() + reorders.size());
  RunJobs(m, c, graph, shared, o, balanced, workers, before, before + static_cast<int64_t>(balanced.size()));

  SearchResult result;
  result.meshes = static_cast<int64_t>(meshes.size());
  result.layouts = static_cast<int64_t>(reorders.size());
  result.balanced = static_cast<int64_t>(balanced.size());
  result.max_memory_bytes = o.max_memory_bytes;
  std::map<std::string, int64_t> gap_counts;
  RuleRefusalTally refusals;
  for (Worker& w : workers) {
    refusals.Merge(std::move(w.refusals));  // in job order
    result.candidates += w.candidates;
    result.pruned += w.pruned;
    result.dominated += w.dominated;
    result.evaluated += w.evaluated;
    result.over_limit += w.over_limit;
    result.unsupported += w.unsupported;
    if (w.capped_microbatch > 0) result.capped_microbatch = result.capped_microbatch > 0 ? std::min(result.capped_microbatch, w.capped_microbatch) : w.capped_microbatch;
    for (const auto& [gap, count] : w.gaps) gap_counts[gap] += count;
    for (const RankedPlan& p : w.pareto) AddToFrontier(result.pareto, p);
    for (Miss& miss : w.misses) result.nearest_misses.push_back(std::move(miss));
  }
  for (const auto& [gap, count] : gap_counts) result.framework_gaps.push_back({gap, count});
  result.rule_refusals = std::move(refusals).Ranked();
  std::sort(result.framework_gaps.begin(), result.framework_gaps.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  if (result.framework_gaps.size() > 3) result.framework_gaps.resize(3);
  std::vector<RankedPlan> all = ranked();
  for (size_t i = 0; i < all.size() && result.best.size() < o.top; ++i) {
    if (!result.best.empty() && SameOutcome(result.best.back(), all[i])) continue;  // show distinct outcomes
    result.best.push_back(all[i]);
  }
  // The best plan of each family other than the winner's, one entry per distinct outcome: a family
  // whose best predicts exactly the step of an entry already listed joins it.
  std::map<std::string, bool> seen;
  if (!all.empty()) seen[all.front().family] = true;
  for (RankedPlan& p : all) {
    if (seen[p.family]) continue;
    seen[p.family] = true;
    if (SameOutcome(p, all.front())) continue;  // as good as the winner: one of `best`
    auto same = std::find_if(result.family_best.begin(), result.family_best.end(), [&](const RankedPlan& q) { return SameOutcome(p, q); });
    if (same != result.family_best.end()) {
      same->same_as.push_back(p.family);
      continue;
    }
    if (result.family_best.size() == 8) continue;
    result.family_best.push_back(p);
    result.family_best.back().why_lost = WhyLost(all.front(), p);
  }
  std::sort(result.pareto.begin(), result.pareto.end(), [](const RankedPlan& a, const RankedPlan& b) {
    return a.report.memory.peak.total() < b.report.memory.peak.total();
  });
  std::sort(result.nearest_misses.begin(), result.nearest_misses.end(), Closer);
  if (result.nearest_misses.size() > 5) result.nearest_misses.resize(5);
  result.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

const RuleRefusal* FixedFieldRefusal(const SearchResult& r, const PlanConstraints& constraints) {
  return r.best.empty() && r.evaluated == 0 && r.unsupported == 0 ? CommonestFixed(r.rule_refusals, constraints) : nullptr;
}

}  // namespace shardsim::planner
