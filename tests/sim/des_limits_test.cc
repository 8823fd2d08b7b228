// The limits of the SimGrid engines (sim/des_budget.h, sim/child_process.h): a request too big is
// refused before anything is built, in milliseconds; the counts behind the estimate match what
// the engines run; and the running guard stops a simulation at its deadline or memory ceiling,
// ending cleanly with the limit named and no child process left.
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <thread>

#include "core/error.h"
#include "core/inputs.h"
#include "core/model_presets.h"
#include "sim/child_process.h"
#include "sim/des_budget.h"
#include "sim/des_collective.h"
#include "sim/simulate.h"
#include "strategies/build_step.h"
#include "tests/sim/collective_test_util.h"

namespace shardsim::sim {
namespace {

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// True when this process has no child left (every simulation was reaped).
bool NoChildLeft() {
  int status = 0;
  return waitpid(-1, &status, WNOHANG) < 0 && errno == ECHILD;
}

// Runs `body`, expecting an InputError naming `flag` whose message contains `words`.
template <typename Body>
void ExpectLimit(Body body, const std::string& flag, const std::vector<std::string>& words) {
  try {
    body();
    ADD_FAILURE() << "no limit was hit";
  } catch (const InputError& e) {
    EXPECT_EQ(e.where(), flag) << e.what();
    for (const std::string& w : words) EXPECT_NE(std::string(e.what()).find(w), std::string::npos) << "'" << w << "' not in: " << e.what();
  }
}

TEST(DesBudgetTest, CostModelFollowsItsMeasuredPoints) {
  EXPECT_NEAR(CollectiveSecondsPerFlow(4096), 10e-6, 1e-9);
  EXPECT_NEAR(CollectiveSecondsPerFlow(262144), 160e-6, 1e-9);
  double previous = 0;
  for (int64_t c = 1; c <= (int64_t{1} << 24); c *= 4) {
    EXPECT_GT(CollectiveSecondsPerFlow(c), previous) << c;
    previous = CollectiveSecondsPerFlow(c);
  }
  // The step engine's measured point: launches of 4,096 flows on a 4,096-chip torus, 17 us each.
  EXPECT_NEAR(StepSecondsPerFlow(4096), 17e-6, 1.5e-6);
  EXPECT_LT(StepSecondsPerFlow(64), 2.5e-6);
  // SimGrid's full zone keeps a route slot per pair of hosts: 65,536 hosts alone pass 32 GiB.
  DesLoad load;
  load.hosts = 65536;
  EXPECT_GT(EstimateDesCost(load).bytes, 32.0 * (int64_t{1} << 30));
}

TEST(DesBudgetTest, HostMemoryLimitIsAFractionOrASize) {
  EXPECT_DOUBLE_EQ(ParseHostMemoryLimit("8GiB", "--max-host-memory"), 8.0 * (int64_t{1} << 30));
  const double available = MemAvailableBytes();
  ASSERT_GT(available, 0);
  EXPECT_NEAR(ParseHostMemoryLimit("0.25", "--max-host-memory") / available, 0.25, 0.05);
  EXPECT_THROW(ParseHostMemoryLimit("1.5", "--max-host-memory"), InputError);
  EXPECT_THROW(ParseHostMemoryLimit("0", "--max-host-memory"), InputError);
  EXPECT_THROW(ParseHostMemoryLimit("lots", "--max-host-memory"), InputError);
  DesLimits limits;
  EXPECT_NEAR(MemoryLimitBytes(limits) / available, kDefaultHostMemoryFraction, 0.05);
  limits.max_memory_bytes = 1e9;
  EXPECT_DOUBLE_EQ(MemoryLimitBytes(limits), 1e9);
}

// The tester's case: an all-to-all over 4,096 chips ran 34 minutes and took 24 GiB. Refused from
// the group sizes alone, before any schedule exists.
TEST(DesLimitsTest, HugeAllToAllIsRefusedInMilliseconds) {
  DeviceGroup group;
  for (int64_t d = 0; d < 4096; ++d) group.devices.push_back(d);
  const auto start = std::chrono::steady_clock::now();
  ExpectLimit([&] { CheckCollectivesFit({group}, CollectiveOp::kAllToAll, 1, DesLimits{}); }, "--max-host-memory",
              {"16773120 flows", "refused before starting", "analytic engine"});
  EXPECT_LT(SecondsSince(start), 0.5);
  // A ring over the same chips fits.
  CheckCollectivesFit({group}, CollectiveOp::kAllReduce, 1, DesLimits{});
}

TEST(DesLimitsTest, CollectiveOverTheTimeLimitIsRefusedBeforeStarting) {
  const auto cluster = MakeCluster("dgx-h100:64");
  const DeviceGroup group = FirstDevices(64);
  const CollectiveModel model = Model(cluster, group, CollectiveOp::kAllToAll, Algorithm::kDirect);
  DesLimits limits;
  limits.max_seconds = 1e-3;
  const auto start = std::chrono::steady_clock::now();
  ExpectLimit([&] { SimulateCollectives(cluster, {group}, {{{&model.schedule()}, 1e9, 1}}, limits); }, "--max-seconds",
              {"would take about", "4032 flows", "refused before starting", "1 ms"});
  EXPECT_LT(SecondsSince(start), 0.5);
  EXPECT_TRUE(NoChildLeft());
}

TEST(DesLimitsTest, CollectiveEstimateCountsWhatRuns) {
  const auto cluster = MakeCluster("tpu-v5p:4x4x4");
  const DeviceGroup group = FirstDevices(64);
  const CollectiveModel model = Model(cluster, group, CollectiveOp::kAllReduce, Algorithm::kTorus);
  const DesReport des = SimulateCollectives(cluster, {group}, {{{&model.schedule()}, 1e6, 1}, {{&model.schedule()}, 1e9, 1}});
  EXPECT_EQ(des.load.flows, des.messages);
  EXPECT_EQ(des.load.hosts, 64);
  EXPECT_EQ(des.load.routes, 64 * 6);  // each chip's six torus neighbours
  EXPECT_GT(des.estimate.seconds, 0);
  EXPECT_GT(des.estimate.bytes, 0);
  EXPECT_TRUE(NoChildLeft());
}

TEST(ChildGuardTest, OutputsComeBackInOrder) {
  std::vector<Child> children;
  children.push_back(StartChild([](int fd) { WriteAll(fd, std::string(200000, 'a')); }));
  children.push_back(StartChild([](int fd) { WriteAll(fd, "second"); }));
  ChildGuard guard;
  guard.limits.max_seconds = 30;
  const std::vector<std::string> out = FinishChildren(std::move(children), guard);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0], std::string(200000, 'a'));
  EXPECT_EQ(out[1], "second");
  EXPECT_TRUE(NoChildLeft());
}

TEST(ChildGuardTest, DeadlineKillsEveryChildAndReapsIt) {
  std::vector<Child> children;
  for (int i = 0; i < 2; ++i) children.push_back(StartChild([](int) { std::this_thread::sleep_for(std::chrono::seconds(60)); }));
  const pid_t first = children.front().pid;
  ChildGuard guard;
  guard.limits.max_seconds = 0.2;
  guard.what = "the sleeping child";
  guard.hint = "wake it";
  const auto start = std::chrono::steady_clock::now();
  ExpectLimit([&] { FinishChildren(std::move(children), guard); }, "--max-seconds", {"the sleeping child was stopped after", "200 ms", "wake it"});
  EXPECT_LT(SecondsSince(start), 2.0);
  EXPECT_TRUE(NoChildLeft());
  EXPECT_NE(kill(first, 0), 0);
}

TEST(ChildGuardTest, MemoryCeilingKillsTheChild) {
  // The child grows by 16 MiB every 10 ms, to 2 GiB; the ceiling is 256 MiB of its own (what it
  // shares with this process at the fork does not count).
  Child child = StartChild([](int) {
    std::vector<std::vector<char>> blocks;
    for (int i = 0; i < 128; ++i) {
      blocks.emplace_back(16 << 20, 1);
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  });
  ChildGuard guard;
  guard.limits.max_seconds = 60;
  guard.limits.max_memory_bytes = 256.0 * (1 << 20);
  guard.what = "the growing child";
  // The child stops itself only after its last block (2 GiB); a guard that let it finish would
  // throw nothing, so the limit's error is what shows it was stopped on the way (no wall-time
  // bound: page faults are several times slower on some machines than on others).
  ExpectLimit([&] { FinishChildren({child}, guard); }, "--max-host-memory",
              {"the growing child was stopped at", "of its own resident memory", "at most 256 MiB (--max-host-memory)"});
  EXPECT_TRUE(NoChildLeft());
}

TEST(ChildGuardTest, AFailingChildIsReportedAndTheOthersReaped) {
  std::vector<Child> children;
  children.push_back(StartChild([](int) { throw std::runtime_error("broken"); }));
  children.push_back(StartChild([](int) { std::this_thread::sleep_for(std::chrono::seconds(60)); }));
  ChildGuard guard;
  guard.limits.max_seconds = 30;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(FinishChildren(std::move(children), guard), std::runtime_error);
  EXPECT_LT(SecondsSince(start), 30.0);
  EXPECT_TRUE(NoChildLeft());
}

struct StepCase {
  ClusterSpec cluster;
  PlanSpec plan;
  strategies::StepProgram program;
};

// gpt3-175b on 1,024 A100s, t8 p16 d8, 1,536 sequences: about 1M flows, 2 s of simulation.
StepCase Gpt3() {
  StepCase c{LoadCluster("dgx-a100:1024"),
             LoadPlan("", {"mesh.tensor=8", "mesh.pipeline=16", "mesh.data=8", "global_batch_size=1536", "micro_batch_size=1",
                           "recompute=selective", "seq_len=2048"}),
             {}};
  c.program = strategies::BuildStep(FindModelPreset("gpt3-175b")->spec, c.plan);
  return c;
}

TEST(SimulateLimitsTest, StepEstimateCountsTheFlowsTheEngineRuns) {
  const ClusterSpec cluster = LoadCluster("tpu-v5p:4x4x1");
  for (const std::vector<std::string>& sets :
       {std::vector<std::string>{"mesh.pipeline=4", "mesh.tensor=4", "global_batch_size=16", "micro_batch_size=1", "seq_len=2048"},
        std::vector<std::string>{"mesh.fsdp=4", "mesh.tensor=4", "zero_stage=3", "global_batch_size=16", "micro_batch_size=1", "seq_len=2048"}}) {
    const PlanSpec plan = LoadPlan("", sets);
    const strategies::StepProgram program = strategies::BuildStep(FindModelPreset("llama3-8b")->spec, plan);
    const topologies::Cluster graph(cluster);
    AxisCollectives collectives(graph, plan);
    const SimReport r = Simulate(program, cluster, graph, collectives);
    EXPECT_NEAR(static_cast<double>(r.engine_load.flows) / static_cast<double>(r.flows), 1.0, 0.02) << sets.front();
    EXPECT_GT(r.engine_estimate.seconds, 0);
    EXPECT_GT(r.engine_estimate.bytes, 0);
  }
}

TEST(SimulateLimitsTest, OverTheLimitsIsRefusedBeforeStarting) {
  const StepCase c = Gpt3();
  const topologies::Cluster graph(c.cluster);
  AxisCollectives collectives(graph, c.plan);
  SimulateOptions options;
  options.limits.max_seconds = 0.01;
  const auto start = std::chrono::steady_clock::now();
  ExpectLimit([&] { Simulate(c.program, c.cluster, graph, collectives, options); }, "--max-seconds",
              {"the SimGrid step simulation", "would take about", "refused before starting", "leave folding on"});
  options.limits.max_seconds = 600;
  options.limits.max_memory_bytes = 1 << 20;
  ExpectLimit([&] { Simulate(c.program, c.cluster, graph, collectives, options); }, "--max-host-memory",
              {"would need about", "1 MiB (--max-host-memory)"});
  EXPECT_LT(SecondsSince(start), 5.0);  // the analytic estimate and the setup, no engine
  EXPECT_TRUE(NoChildLeft());
}

// A run the estimate lets through is still stopped at its deadline: both plays killed and
// reaped, one InputError naming --max-seconds.
TEST(SimulateLimitsTest, DeadlineStopsARunningSimulationCleanly) {
  const StepCase c = Gpt3();
  const topologies::Cluster graph(c.cluster);
  AxisCollectives collectives(graph, c.plan);
  SimulateOptions options;
  options.limits.max_seconds = 0.3;
  options.limits.refuse_beforehand = false;
  const auto start = std::chrono::steady_clock::now();
  ExpectLimit([&] { Simulate(c.program, c.cluster, graph, collectives, options); }, "--max-seconds",
              {"the SimGrid step simulation", "was stopped after", "estimated beforehand"});
  EXPECT_LT(SecondsSince(start), 10.0);
  EXPECT_TRUE(NoChildLeft());
}

TEST(DesLimitsTest, DeadlineStopsARunningCollectiveCleanly) {
  const auto cluster = MakeCluster("dgx-h100:256");
  const DeviceGroup group = FirstDevices(256);
  const CollectiveModel model = Model(cluster, group, CollectiveOp::kAllToAll, Algorithm::kDirect);  // 65,280 flows, seconds
  DesLimits limits;
  limits.max_seconds = 0.3;
  limits.refuse_beforehand = false;
  const auto start = std::chrono::steady_clock::now();
  ExpectLimit([&] { SimulateCollectives(cluster, {group}, {{{&model.schedule()}, 1e9, 1}}, limits); }, "--max-seconds",
              {"the SimGrid all-to-all over 1 group of 256 devices was stopped after"});
  EXPECT_LT(SecondsSince(start), 10.0);
  EXPECT_TRUE(NoChildLeft());
}

}  // namespace
}  // namespace shardsim::sim
