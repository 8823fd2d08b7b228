#include "planner/search.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <numeric>
#include <thread>
#include <tuple>

#include "core/error.h"
#include "planner/explain.h"
#include "strategies/build_step.h"
#include "strategies/data_parallel.h"
#include "strategies/plan_rules.h"
#include "strategies/schedule.h"
#include "topologies/cluster.h"

namespace shardsim::planner {
namespace {

// Every mesh of the cluster's devices: each axis takes the degrees the table's search rule gives
// (core/mesh_axes.h: powers of two as the frameworks run them, pipeline stages also dividing the
// layers, data what is left), within the limits the model and cluster set here. Tensor
// parallelism stays inside the fastest domain: an NVSwitch node, or up to 16 chips of a torus
// (one axis).
std::vector<MeshShape> Meshes(const ModelSpec& m, const ClusterSpec& c, int64_t sequences, int64_t seq_len) {
  const int64_t n = DeviceCount(c);
  const int64_t tensor_max = c.topology.kind == TopologyKind::kSwitched ? c.topology.devices_per_node : 16;
  // The plan rules decide what a mesh may be (strategies::CheckPlan on a one-micro-batch 1F1B
  // probe); here only the factorisations of the devices and the search's own bounds.
  PlanSpec probe;
  probe.global_batch_size = sequences;
  probe.seq_len = seq_len;
  std::vector<MeshShape> meshes;
  for (int64_t t : SearchedDegrees(MeshAxis::kTensor, std::min(tensor_max, n))) {
    if (n % t != 0) continue;
    for (int64_t p : SearchedDegrees(MeshAxis::kPipeline, m.num_layers, m.num_layers)) {
      if ((n / t) % p != 0) continue;
      for (int64_t cp : SearchedDegrees(MeshAxis::kContext, n / t / p)) {
        // Context parallelism only where each rank keeps at least 1024 tokens of a sequence.
        if ((n / t / p) % cp != 0 || (cp > 1 && seq_len / cp < 1024)) continue;
        for (int64_t e : SearchedDegrees(MeshAxis::kExpert, m.moe ? m.moe->num_experts : 1)) {
          const int64_t rest = n / t / p / cp;
          if (rest % e != 0) continue;
          for (int64_t f : SearchedDegrees(MeshAxis::kFsdp, rest / e)) {
            if ((rest / e) % f != 0) continue;
            for (int64_t data : SearchedDegrees(MeshAxis::kData, rest / e / f)) {
              probe.mesh.tensor = t, probe.mesh.pipeline = p, probe.mesh.context = cp, probe.mesh.expert = e, probe.mesh.fsdp = f, probe.mesh.data = data;
              if (!strategies::CheckPlan(probe, m, n, c.name)) meshes.push_back(probe.mesh);
            }
          }
        }
      }
    }
  }
  return meshes;
}

// A lower bound on a plan's memory per device: parameters, gradients and optimizer state.
double StateBytesLowerBound(const ModelSpec& m, const PlanSpec& p) {
  const ParamCounts counts = CountParams(m);
  const double expert = static_cast<double>(counts.routed_experts);
  const double dense = static_cast<double>(counts.total) - expert;
  const double split = static_cast<double>(p.mesh.tensor * p.mesh.pipeline);
  const strategies::ShardDegrees d = strategies::Sharding(p, strategies::ParamKind::kDense);
  const strategies::ShardDegrees x = strategies::Sharding(p, strategies::ParamKind::kExpert);
  const double dense_local = dense / split, expert_local = expert / split / static_cast<double>(p.mesh.expert);
  return dense_local * (2 / d.params + 2 / d.grads + 12 / d.optimizer) + expert_local * (2 / x.params + 2 / x.grads + 12 / x.optimizer);
}

struct Worker {
  std::vector<RankedPlan> plans;  // every feasible plan, pruned to the best per family and overall
  std::vector<RankedPlan> pareto;  // not beaten on both throughput and memory
  std::vector<Miss> misses;
  int64_t candidates = 0, pruned = 0, dominated = 0, evaluated = 0;
};

int AxesUsed(const MeshShape& mesh) {
  int n = 0;
  for (const std::string& axis : MeshAxisNames()) n += mesh.Size(axis) > 1 ? 1 : 0;
  return n;
}

// Faster first; ties (within a part in a million) go to more memory headroom, then to the plan
// with fewer parallel axes (the simpler one to run).
// Every field that tells two plans apart, for a deterministic order among equals.
auto PlanKey(const PlanSpec& p) {
  std::array<int64_t, kMeshAxisCount> sizes{};  // in the table's order
  for (size_t i = 0; i < kMeshAxisCount; ++i) sizes[i] = p.mesh.Size(kMeshAxes[i].axis);
  return std::make_tuple(sizes, p.zero_stage, p.micro_batch_size, p.pipeline_schedule, p.virtual_stages, static_cast<int>(p.recompute),
                         p.mesh_order);
}

bool IsDefaultOrder(const PlanSpec& p) { return UsesDefaultMeshOrder(p); }

// A strict, deterministic order (whatever the threads' merge order): faster first; equal
// throughput goes to more memory headroom, then to fewer parallel axes (the simpler plan), then
// to the plan fields.
bool Better(const RankedPlan& a, const RankedPlan& b) {
  const double ta = a.report.tokens_per_s, tb = b.report.tokens_per_s;
  if (ta != tb) return ta > tb;
  const double ma = a.report.memory.peak.total(), mb = b.report.memory.peak.total();
  if (ma != mb) return ma < mb;
  if (AxesUsed(a.plan.mesh) != AxesUsed(b.plan.mesh)) return AxesUsed(a.plan.mesh) < AxesUsed(b.plan.mesh);
  if (IsDefaultOrder(a.plan) != IsDefaultOrder(b.plan)) return IsDefaultOrder(a.plan);
  return PlanKey(a.plan) < PlanKey(b.plan);
}

// Plans that predict the same step exactly (ZeRO-3 over data and ZeRO-0 over fsdp, say).
bool SameOutcome(const RankedPlan& a, const RankedPlan& b) {
  return a.report.tokens_per_s == b.report.tokens_per_s && a.report.memory.peak.total() == b.report.memory.peak.total();
}

bool Dominates(const RankedPlan& a, const RankedPlan& b) {
  const double ta = a.report.tokens_per_s, tb = b.report.tokens_per_s;
  const double ma = a.report.memory.peak.total(), mb = b.report.memory.peak.total();
  return ta >= tb && ma <= mb && (ta > tb || ma < mb);
}

void AddToFrontier(std::vector<RankedPlan>& frontier, const RankedPlan& plan) {
  for (const RankedPlan& other : frontier) {
    if (Dominates(other, plan) || (other.report.tokens_per_s == plan.report.tokens_per_s &&
                                   other.report.memory.peak.total() == plan.report.memory.peak.total())) {
      return;
    }
  }
  frontier.erase(std::remove_if(frontier.begin(), frontier.end(), [&](const RankedPlan& other) { return Dominates(plan, other); }),
                 frontier.end());
  frontier.push_back(plan);
}

void Keep(Worker& w, RankedPlan plan, size_t top) {
  AddToFrontier(w.pareto, plan);
  w.plans.push_back(std::move(plan));
  if (w.plans.size() < 4 * top + 64) return;
  // Keep the best `top` distinct outcomes (with every plan that shares them, so the final
  // order does not depend on how plans were split among threads) and the best of each family.
  std::sort(w.plans.begin(), w.plans.end(), Better);
  std::vector<RankedPlan> kept;
  std::map<std::string, bool> seen;
  size_t outcomes = 0;  // distinct outcomes met so far, in sorted order
  double last_rate = -1, last_memory = -1;
  for (RankedPlan& p : w.plans) {
    const double rate = p.report.tokens_per_s, memory = p.report.memory.peak.total();
    if (rate != last_rate || memory != last_memory) ++outcomes;
    last_rate = rate, last_memory = memory;
    if (outcomes <= top || !seen[p.family]) {
      seen[p.family] = true;
      kept.push_back(std::move(p));
    }
  }
  w.plans = std::move(kept);
}

// One mesh laid out in one order: every plan on it.
struct Job {
  MeshShape mesh;
  std::vector<std::string> order;
};

void SearchMesh(const ModelSpec& m, const ClusterSpec& c, const topologies::Cluster& graph, const SearchOptions& o, const Job& job, Worker& w) {
  const MeshShape& mesh = job.mesh;
  PlanSpec base;
  base.mesh = mesh;
  base.mesh_order = job.order;
  base.seq_len = o.seq_len;
  base.global_batch_size = o.global_batch_tokens / o.seq_len;
  base.sequence_parallel = mesh.tensor > 1;
  base.flash_attention = o.flash_attention;
  // bf16 where the chip has it (mixed-precision training), else its first listed dtype.
  base.dtype = c.chip.peak_flop_per_s.count("bf16") ? "bf16" : c.chip.peak_flop_per_s.begin()->first;
  const int64_t per_replica = base.global_batch_size / BatchReplicas(mesh);
  const double hbm = static_cast<double>(c.chip.hbm_bytes);
  // Groups of one axis are alike on regular fabrics: cost the first, the middle and the last.
  sim::AxisCollectives collectives(graph, base, 3);
  strategies::TaskLists task_lists;  // one pipeline shape's schedules, shared by this mesh's plans
  // ZeRO shards over the replica axes: without any, every stage is ZeRO-0.
  std::vector<int64_t> zero_stages = {0};
  if (!strategies::ReplicaAxes(base, strategies::ParamKind::kDense).empty()) zero_stages = {0, 1, 2, 3};
  for (int64_t zero : zero_stages) {
    PlanSpec z = base;
    z.zero_stage = zero;
    const double bound = StateBytesLowerBound(m, z);
    if (bound > hbm) {
      ++w.candidates;  // the whole (mesh, ZeRO stage) family, pruned at once
      ++w.pruned;
      w.misses.push_back({z, "parameters, gradients and optimizer state alone need more than HBM", bound / hbm});
      continue;
    }
    // Micro-batches of 1 to 8 sequences; larger when a replica would otherwise run more than
    // 4096 micro-batches a step (the schedule's event simulation grows with them).
    int64_t smallest = 1;
    while (per_replica / smallest > 4096) smallest *= 2;
    for (int64_t mbs = smallest; mbs <= std::max<int64_t>(8, smallest) && mbs <= per_replica; mbs *= 2) {
      if (per_replica % mbs != 0) continue;
      // The default schedule (on one stage every schedule is plain gradient accumulation), and
      // with stages every other schedule with each chunk count it offers the planner.
      const std::string base_schedule = PlanSpec{}.pipeline_schedule;
      std::vector<std::pair<std::string, int64_t>> schedules = {{base_schedule, 1}};
      if (mesh.pipeline > 1) {
        for (const strategies::Schedule* schedule : strategies::AllSchedules()) {
          if (schedule->name() == base_schedule) continue;
          for (int64_t v : schedule->SearchedVirtualStages(mesh.pipeline)) schedules.push_back({std::string(schedule->name()), v});
        }
      }
      for (const auto& [schedule, v] : schedules) {
        // Recomputation only adds work: once a lighter one fits, the heavier ones are slower and
        // only smaller, so they are dropped as dominated.
        bool fitted = false;
        for (Recompute recompute : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
          if (fitted) {
            ++w.candidates;
            ++w.dominated;
            continue;
          }
          PlanSpec plan = z;
          plan.micro_batch_size = mbs;
          plan.pipeline_schedule = schedule;
          plan.virtual_stages = v;
          plan.recompute = recompute;
          ++w.candidates;
          if (strategies::CheckPlan(plan, m, DeviceCount(c), c.name)) {
            ++w.pruned;
            continue;
          }
          const strategies::StepProgram program = strategies::BuildStep(m, plan, &task_lists);
          sim::StepReport report = sim::Estimate(program, c, collectives, false, &task_lists);
          ++w.evaluated;
          if (!report.fits) {
            w.misses.push_back({plan, "needs " + std::to_string(report.memory.peak.total() / 1073741824.0).substr(0, 6) + " GiB per device",
                                report.memory.peak.total() / hbm});
            continue;
          }
          Keep(w, {plan, std::move(report), Family(mesh), ""}, o.top);
          fitted = true;
        }
      }
    }
  }
  // Only the closest misses matter.
  std::sort(w.misses.begin(), w.misses.end(), [](const Miss& a, const Miss& b) { return a.overshoot < b.overshoot; });
  if (w.misses.size() > 16) w.misses.resize(16);
}

// Other layouts of a mesh's axes worth trying: which axes take the fastest links (NVLink, the
// first torus dimensions) and which cross nodes or slices. Pipeline stays outermost; the axes of
// size one do not matter (the table's search_reorders says which move). Every permutation of up
// to three axes; beyond, each axis moved innermost and each moved outermost.
std::vector<std::vector<std::string>> OtherOrders(const MeshShape& mesh) {
  const std::vector<std::string> base = DefaultMeshOrder();
  std::vector<size_t> slots;  // positions of the movable axes in the default order
  std::vector<std::string> axes;
  for (size_t i = 0; i < base.size(); ++i) {
    if (AxisFacts(base[i]).search_reorders && mesh.Size(base[i]) > 1) slots.push_back(i), axes.push_back(base[i]);
  }
  std::vector<std::vector<std::string>> arrangements;
  if (axes.size() <= 3) {
    std::vector<std::string> perm = axes;
    std::sort(perm.begin(), perm.end());
    do {
      if (perm != axes) arrangements.push_back(perm);
    } while (std::next_permutation(perm.begin(), perm.end()));
  } else {
    for (size_t i = 0; i < axes.size(); ++i) {
      std::vector<std::string> inner = axes, outer = axes;
      inner.erase(inner.begin() + static_cast<std::ptrdiff_t>(i));
      inner.push_back(axes[i]);
      outer.erase(outer.begin() + static_cast<std::ptrdiff_t>(i));
      outer.insert(outer.begin(), axes[i]);
      for (auto* a : {&inner, &outer}) {
        if (*a != axes && std::find(arrangements.begin(), arrangements.end(), *a) == arrangements.end()) arrangements.push_back(*a);
      }
    }
  }
  std::vector<std::vector<std::string>> orders;
  for (const auto& arrangement : arrangements) {
    std::vector<std::string> order = base;
    for (size_t k = 0; k < slots.size(); ++k) order[slots[k]] = arrangement[k];
    orders.push_back(order);
  }
  return orders;
}

// Runs the jobs on `workers.size()` threads (the calling one included, which reports progress
// as (done + jobs finished, total)).
void RunJobs(const ModelSpec& m, const ClusterSpec& c, const topologies::Cluster& graph, const SearchOptions& o, const std::vector<Job>& jobs,
             std::vector<Worker>& workers, int64_t done_before, int64_t total) {
  std::atomic<size_t> next{0};
  std::atomic<int64_t> done{0};
  std::mutex failure_mutex;
  std::exception_ptr failure;
  auto work = [&](Worker& w, bool report) {
    try {
      for (size_t i = next++; i < jobs.size(); i = next++) {
        SearchMesh(m, c, graph, o, jobs[i], w);
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

std::string Family(const MeshShape& mesh) {
  const std::string d = DescribeMesh(mesh);
  if (d == "(all axes 1)") return "single device";
  std::string family;
  for (const std::string& axis : MeshAxisNames()) {
    if (mesh.Size(axis) > 1) family += (family.empty() ? "" : " x ") + axis;
  }
  return family;
}

SearchResult Search(const ModelSpec& m, const ClusterSpec& c, const SearchOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  if (o.seq_len <= 0 || o.global_batch_tokens <= 0) throw InputError("plan", "needs --global-batch-tokens and --seq-len", "positive whole numbers");
  if (o.global_batch_tokens % o.seq_len != 0) {
    throw InputError("--global-batch-tokens", std::to_string(o.global_batch_tokens) + " is not a whole number of " + std::to_string(o.seq_len) + "-token sequences",
                     "a multiple of --seq-len", "e.g. " + std::to_string((o.global_batch_tokens / o.seq_len + 1) * o.seq_len));
  }
  if (m.position == PositionKind::kLearned && o.seq_len > m.max_seq_len) {
    throw InputError("--seq-len", std::to_string(o.seq_len) + " exceeds the model's " + std::to_string(m.max_seq_len) + " learned positions",
                     "1 to " + std::to_string(m.max_seq_len));
  }
  const int64_t sequences = o.global_batch_tokens / o.seq_len;
  const std::vector<MeshShape> meshes = Meshes(m, c, sequences, o.seq_len);
  if (meshes.empty()) {
    throw InputError("--global-batch-tokens", "no mesh of the " + std::to_string(DeviceCount(c)) + " devices of " + c.name +
                                                  " splits the " + std::to_string(sequences) + " sequences over its data x fsdp x expert replicas",
                     "a sequence count that the replicas divide, e.g. a multiple of " + std::to_string(DeviceCount(c)),
                     "the tensor, pipeline and context axes (powers of two, pipeline dividing the layers) take the rest of the devices");
  }
  const topologies::Cluster graph(c);
  const int threads = std::max(1, o.threads > 0 ? o.threads : static_cast<int>(std::thread::hardware_concurrency()));
  std::vector<Worker> workers(static_cast<size_t>(threads));
  std::vector<Job> jobs;
  for (const MeshShape& mesh : meshes) jobs.push_back({mesh, DefaultMeshOrder()});
  RunJobs(m, c, graph, o, jobs, workers, 0, static_cast<int64_t>(jobs.size()));

  // Then the other layouts of the leading meshes: the best distinct outcomes' and each family's.
  auto ranked = [&workers]() {
    std::vector<RankedPlan> all;
    for (Worker& w : workers) all.insert(all.end(), w.plans.begin(), w.plans.end());
    std::sort(all.begin(), all.end(), Better);
    return all;
  };
  std::vector<Job> reorders;
  {
    const std::vector<RankedPlan> leading = ranked();
    std::vector<MeshShape> chosen;
    std::map<std::string, bool> family_seen;
    size_t outcomes = 0;
    for (size_t i = 0; i < leading.size() && chosen.size() < 8; ++i) {
      const bool new_outcome = i == 0 || !SameOutcome(leading[i - 1], leading[i]);
      outcomes += new_outcome ? 1 : 0;
      if (outcomes > o.top && family_seen[leading[i].family]) continue;
      family_seen[leading[i].family] = true;
      if (std::find(chosen.begin(), chosen.end(), leading[i].plan.mesh) == chosen.end()) chosen.push_back(leading[i].plan.mesh);
    }
    for (const MeshShape& mesh : chosen) {
      for (const auto& order : OtherOrders(mesh)) reorders.push_back({mesh, order});
    }
  }
  RunJobs(m, c, graph, o, reorders, workers, static_cast<int64_t>(jobs.size()), static_cast<int64_t>(jobs.size() + reorders.size()));

  SearchResult result;
  result.meshes = static_cast<int64_t>(meshes.size());
  result.layouts = static_cast<int64_t>(reorders.size());
  for (Worker& w : workers) {
    result.candidates += w.candidates;
    result.pruned += w.pruned;
    result.dominated += w.dominated;
    result.evaluated += w.evaluated;
    for (const RankedPlan& p : w.pareto) AddToFrontier(result.pareto, p);
    for (Miss& miss : w.misses) result.nearest_misses.push_back(std::move(miss));
  }
  std::vector<RankedPlan> all = ranked();
  for (size_t i = 0; i < all.size() && result.best.size() < o.top; ++i) {
    if (!result.best.empty() && SameOutcome(result.best.back(), all[i])) continue;  // show distinct outcomes
    result.best.push_back(all[i]);
  }
  // The best plan of each family other than the winner's.
  std::map<std::string, bool> seen;
  if (!all.empty()) seen[all.front().family] = true;
  for (RankedPlan& p : all) {
    if (seen[p.family]) continue;
    seen[p.family] = true;
    result.family_best.push_back(p);
    result.family_best.back().why_lost = WhyLost(all.front(), p);
    if (result.family_best.size() == 8) break;
  }
  std::sort(result.pareto.begin(), result.pareto.end(), [](const RankedPlan& a, const RankedPlan& b) {
    return a.report.memory.peak.total() < b.report.memory.peak.total();
  });
  std::sort(result.nearest_misses.begin(), result.nearest_misses.end(), [](const Miss& a, const Miss& b) { return a.overshoot < b.overshoot; });
  if (result.nearest_misses.size() > 5) result.nearest_misses.resize(5);
  result.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace shardsim::planner
