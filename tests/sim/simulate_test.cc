// sim::Simulate: agreement with the estimate where no link is shared, folded against unfolded,
// bubbles of the simulated timeline against each schedule's known fraction, and contention
// attributed to the links and ops that share them.
#include "sim/simulate.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "core/inputs.h"
#include "core/model_presets.h"
#include "strategies/build_step.h"
#include "strategies/plan_rules.h"

namespace shardsim::sim {
namespace {

struct Both {
  SimReport simulated;
  StepReport estimated;
};

Both RunPlan(const ModelSpec& model, const std::string& cluster_arg, const std::vector<std::string>& sets, SimulateOptions options = {}) {
  const ClusterSpec cluster = LoadCluster(cluster_arg);
  const PlanSpec plan = LoadPlan("", sets);
  strategies::ValidatePlan(plan, model, DeviceCount(cluster), cluster.name, "plan:");
  const strategies::StepProgram program = strategies::BuildStep(model, plan);
  const topologies::Cluster graph(cluster);
  AxisCollectives collectives(graph, plan);
  Both both{Simulate(program, cluster, graph, collectives, options), {}};
  both.estimated = Estimate(program, cluster, collectives, options.every_microbatch);
  return both;
}

ModelSpec Preset(const std::string& name) { return FindModelPreset(name)->spec; }

// A model whose stages are alike (tiny vocabulary: embedding and head weigh nothing).
ModelSpec UniformModel() {
  ModelSpec m = Preset("llama3-8b");
  m.vocab_size = 256;
  return m;
}

// Every strategy and schedule on a torus whose axes map to their own links (tensor along the
// first torus axis, the others along the rest): no two kinds of traffic share a link.
TEST(Simulate, AgreesWithTheEstimateWhereNoLinkIsShared) {
  struct Case {
    std::string name, model;
    std::vector<std::string> sets;
  };
  const std::vector<std::string> base = {"seq_len=2048", "micro_batch_size=1"};
  const std::vector<Case> cases = {
      {"data", "llama3-8b", {"mesh.data=4", "mesh.tensor=4", "global_batch_size=16"}},
      {"fsdp zero-3", "llama3-8b", {"mesh.fsdp=4", "mesh.tensor=4", "zero_stage=3", "global_batch_size=16"}},
      {"tensor + sequence parallel", "llama3-8b", {"mesh.data=4", "mesh.tensor=4", "sequence_parallel=true", "global_batch_size=16"}},
      {"context", "llama3-8b", {"mesh.context=4", "mesh.tensor=4", "global_batch_size=4", "seq_len=8192"}},
      {"expert", "mixtral-8x7b", {"mesh.expert=4", "mesh.tensor=4", "global_batch_size=16"}},
      {"gpipe", "llama3-8b", {"mesh.pipeline=4", "mesh.tensor=4", "pipeline_schedule=gpipe", "global_batch_size=16"}},
      {"1f1b + selective recompute", "llama3-8b", {"mesh.pipeline=4", "mesh.tensor=4", "recompute=selective", "global_batch_size=16"}},
      {"interleaved", "llama3-8b", {"mesh.pipeline=4", "mesh.tensor=4", "pipeline_schedule=interleaved-1f1b", "virtual_stages=2", "global_batch_size=16"}},
      {"zb-h1", "llama3-8b", {"mesh.pipeline=4", "mesh.tensor=4", "pipeline_schedule=zb-h1", "global_batch_size=16"}},
      {"zbv", "llama3-8b", {"mesh.pipeline=4", "mesh.tensor=4", "pipeline_schedule=zbv", "global_batch_size=16"}},
      {"dualpipe", "llama3-8b", {"mesh.pipeline=4", "mesh.tensor=4", "pipeline_schedule=dualpipe", "global_batch_size=16"}},
  };
  for (const Case& c : cases) {
    std::vector<std::string> sets = base;
    sets.insert(sets.end(), c.sets.begin(), c.sets.end());
    const Both both = RunPlan(Preset(c.model), "tpu-v5p:4x4x1", sets);
    const double ratio = both.simulated.step.step_time_s / both.estimated.step_time_s;
    EXPECT_NEAR(ratio, 1.0, 0.05) << c.name << ": simulated " << both.simulated.step.step_time_s << " s, estimated " << both.estimated.step_time_s
                                  << " s";
    EXPECT_GT(both.simulated.flows, 0) << c.name;
  }
}

// On a GPU cluster every collective pays NCCL's base latency once (Schedule::launch_s): a model so
// small that its tensor collectives' fixed costs are most of the step simulates as it estimates
// (a latency dropped or paid twice in the engine would move the ratio by a third or more).
TEST(Simulate, PaysEachCollectivesFixedCostOnceAsTheEstimateDoes) {
  const Both both = RunPlan(Preset("tiny-dense"), "dgx-h100:4", {"mesh.tensor=4", "seq_len=256", "micro_batch_size=1", "global_batch_size=1"});
  double exposed = 0;
  for (const auto& [kind, seconds] : both.estimated.exposed_comm_s) exposed += seconds;
  EXPECT_GT(exposed, 0.5 * both.estimated.step_time_s) << "the step is not latency-bound";
  EXPECT_NEAR(both.simulated.step.step_time_s / both.estimated.step_time_s, 1.0, 0.05)
      << "simulated " << both.simulated.step.step_time_s << " s, estimated " << both.estimated.step_time_s << " s";
}

TEST(Simulate, FoldedAndUnfoldedAgree) {
  for (const char* cluster : {"dgx-h100:8", "tpu-v5p:4x4x1"}) {
    const std::vector<std::string> sets = {"mesh.tensor=2", "mesh.pipeline=2", "mesh.data=2", "global_batch_size=8", "micro_batch_size=1",
                                           "seq_len=2048"};
    std::vector<std::string> torus_sets = {"mesh.tensor=4", "mesh.data=4", "global_batch_size=8", "micro_batch_size=1", "seq_len=2048"};
    const auto& chosen = std::string(cluster).rfind("tpu", 0) == 0 ? torus_sets : sets;
    SimulateOptions unfolded;
    unfolded.fold = false;
    const Both folded = RunPlan(Preset("llama3-8b"), cluster, chosen);
    const Both every = RunPlan(Preset("llama3-8b"), cluster, chosen, unfolded);
    EXPECT_NEAR(folded.simulated.step.step_time_s, every.simulated.step.step_time_s, 0.01 * every.simulated.step.step_time_s) << cluster;
    EXPECT_LT(folded.simulated.simulated_devices, every.simulated.simulated_devices) << cluster;
    EXPECT_EQ(every.simulated.simulated_devices, every.simulated.represented_devices) << cluster;
    EXPECT_FALSE(folded.simulated.folded.empty());
  }
}

// The flow ports (sim/flow_ports.h) put the same flows as sendto: every launch through couriers
// and drains (direct_flows 0) and every launch direct give the same step, unfolded, where flows
// of all groups share links and end at different times.
TEST(Simulate, FlowPortsAndSendtoPutTheSameFlows) {
  for (const char* cluster : {"dgx-h100:16", "tpu-v5p:4x4x1"}) {
    SimulateOptions couriers, direct;
    couriers.fold = direct.fold = false;
    couriers.direct_flows = 0;
    direct.direct_flows = int64_t{1} << 40;
    const std::vector<std::string> sets = {"mesh.tensor=4", "mesh.fsdp=4", "global_batch_size=8", "micro_batch_size=1", "seq_len=2048"};
    const Both a = RunPlan(Preset("llama3-8b"), cluster, sets, couriers);
    const Both b = RunPlan(Preset("llama3-8b"), cluster, sets, direct);
    EXPECT_GT(a.simulated.flows, 1000) << cluster;
    EXPECT_EQ(a.simulated.flows, b.simulated.flows) << cluster;
    EXPECT_NEAR(a.simulated.step.step_time_s, b.simulated.step.step_time_s, 1e-9 * b.simulated.step.step_time_s) << cluster;
  }
}

// Uniform stages, transfers of no consequence: the bubble is the schedule's (p - 1) / (m + p - 1)
// for GPipe and 1F1B, (p - 1) / (v m + p - 1) interleaved.
TEST(Simulate, BubblesMatchTheSchedulesKnownFractions) {
  struct Case {
    std::string schedule;
    int64_t chunks;
  };
  const int64_t p = 4, m = 8;
  for (const Case& c : std::vector<Case>{{"gpipe", 1}, {"1f1b", 1}, {"interleaved-1f1b", 2}}) {
    SimulateOptions every;
    every.every_microbatch = true;
    const Both both = RunPlan(UniformModel(), "tpu-v5p:2x2x1",
                          {"mesh.pipeline=4", "seq_len=2048", "micro_batch_size=1", "global_batch_size=" + std::to_string(m), "pipeline_schedule=" + c.schedule,
                           "virtual_stages=" + std::to_string(c.chunks)},
                          every);
    const double expected = static_cast<double>(p - 1) / static_cast<double>(c.chunks * m + p - 1);
    // Idle time of stage 1 (a middle stage) over the step.
    const DeviceUse& middle = *std::find_if(both.simulated.devices.begin(), both.simulated.devices.end(), [](const DeviceUse& d) { return d.stage == 1; });
    const double measured = middle.bubble_s / both.simulated.step.step_time_s;
    EXPECT_NEAR(measured, expected, 0.1 * expected) << c.schedule << ": bubble " << measured << " of the step, expected " << expected;
  }
}

// FSDP gathers over the nodes run under every micro-batch while pipeline transfers cross the same
// NICs: the simulation is slower there than alone and names the links and the ops sharing them.
TEST(Simulate, AttributesContentionToSharedLinksAndOps) {
  const Both both = RunPlan(Preset("llama3-8b"), std::string(SHARDSIM_EXAMPLES) + "/a100-32-oversubscribed.cluster.json",
                        {"mesh.tensor=8", "mesh.pipeline=2", "mesh.fsdp=2", "zero_stage=3", "fsdp_reshard_after_forward=true", "global_batch_size=16",
                         "micro_batch_size=1", "seq_len=2048"});
  const auto& contention = both.simulated.contention;
  const auto pipeline = std::find_if(contention.begin(), contention.end(), [](const Contention& c) { return c.kind == "pipeline transfers"; });
  ASSERT_NE(pipeline, contention.end());
  EXPECT_GT(pipeline->simulated_s, 1.1 * pipeline->uncontended_s);
  EXPECT_FALSE(pipeline->links.empty());
  EXPECT_NE(std::find(pipeline->with.begin(), pipeline->with.end(), "fsdp"), pipeline->with.end());
  ASSERT_FALSE(both.simulated.links.empty());
  const LinkUse& busiest = both.simulated.links.front();
  EXPECT_GE(busiest.kinds.size(), 1u);
  EXPECT_GT(busiest.utilisation, 0);
}

TEST(Simulate, KeepsEveryOpOnTheTimeline) {
  SimulateOptions options;
  options.timeline = true;
  const Both both = RunPlan(Preset("llama3-8b"), "dgx-h100:8",
                        {"mesh.tensor=2", "mesh.pipeline=2", "mesh.data=2", "global_batch_size=4", "micro_batch_size=1", "seq_len=2048"}, options);
  const auto& events = both.simulated.events;
  ASSERT_FALSE(events.empty());
  int64_t sends = 0, receives = 0;
  for (const TimelineEvent& e : events) {
    EXPECT_LE(e.start_s, e.end_s);
    EXPECT_EQ(std::count(e.key.begin(), e.key.end(), '/'), 3) << e.key;
    if (e.flow_id >= 0) (e.flow_start ? sends : receives) += 1;
  }
  EXPECT_GT(sends, 0);
  EXPECT_EQ(sends, receives);
}

}  // namespace
}  // namespace shardsim::sim
