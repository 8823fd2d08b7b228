// Each published, measured run of tests/data/published_runs.json (Narayanan et al. 2021 Table 1;
// Korthikanti et al. 2022 Table 5 and section 6) against the analytic estimate of the same
// configuration: each within 10% of the measured throughput (the accuracy bar for these rows, which
// the first estimator was built on; the farthest, Narayanan's 76.1B, is about +9%), the median
// under 6% (about 4%).
// What the papers leave out is filled the same way for every row: Megatron's GPT (learned
// positions, LayerNorm, GELU MLP of 4h, biases, dropout, vocabulary 51200, tied embeddings);
// the unfused attention of 2021-22 (no flash attention); DGX A100 nodes; Narayanan's runs use
// full recomputation and the interleaved schedule with the fewest chunks (2 to 4) that divide
// the layers, micro-batches of 1 with pipelining and up to 8 sequences without (Table 1 does not
// give them); Korthikanti's use selective recomputation with sequence parallelism and the stated
// micro-batch size. The single-layer microbenchmark row (Table 4) is not a step and is skipped.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>

#include <nlohmann/json.hpp>

#include "strategies/plan_rules.h"
#include "core/cluster_presets.h"
#include "sim/estimate.h"
#include "strategies/build_step.h"
#include "tests/sim/published_runs_util.h"

namespace shardsim::sim {
namespace {

using nlohmann::json;

std::vector<json> Rows() { return published::StepRows(); }

struct Comparison {
  double predicted = 0, measured = 0;
  double ThroughputError() const { return predicted / measured - 1; }
};

// Predicted and measured throughput for one row (Narayanan: TFLOP/s per GPU by their equation 3,
// which counts recomputation; Korthikanti: steps per second).
Comparison Compare(const json& row) {
  const ModelSpec model = published::ModelOf(row);
  const PlanSpec plan = published::PlanOf(row);
  const bool narayanan = published::IsNarayanan(row);
  const ClusterSpec cluster = ParseClusterPreset(published::ClusterOf(row), "--cluster");
  strategies::ValidatePlan(plan, model, DeviceCount(cluster), cluster.name, "plan:");
  const topologies::Cluster graph(cluster);
  AxisCollectives collectives(graph, plan);
  const StepReport r = Estimate(strategies::BuildStep(model, plan), cluster, collectives);
  if (narayanan) {
    const double b = static_cast<double>(plan.global_batch_size), s = static_cast<double>(plan.seq_len);
    const double l = static_cast<double>(model.num_layers), h = static_cast<double>(model.hidden_size), v = static_cast<double>(model.vocab_size);
    const double flops = 96 * b * s * l * h * h * (1 + s / (6 * h) + v / (16 * l * h));  // Narayanan et al. 2021, eq. (3)
    return {flops / r.step_time_s / static_cast<double>(DeviceCount(cluster)) / 1e12, row["measured"]["tflops_per_device"].get<double>()};
  }
  return {1 / r.step_time_s, 1 / row["measured"]["step_time_s"].get<double>()};
}

class PublishedRunTest : public ::testing::TestWithParam<json> {};

TEST_P(PublishedRunTest, WithinTenPercent) {
  const Comparison c = Compare(GetParam());
  EXPECT_LT(std::abs(c.ThroughputError()), 0.10) << GetParam()["id"] << ": predicted " << c.predicted << ", measured " << c.measured;
}

INSTANTIATE_TEST_SUITE_P(Rows, PublishedRunTest, ::testing::ValuesIn(Rows()),
                         [](const ::testing::TestParamInfo<json>& param_info) {
                           std::string id = param_info.param["id"];
                           for (char& ch : id) ch = std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
                           return id;
                         });

TEST(PublishedRunsTest, MedianErrorUnderSixPercent) {
  std::vector<double> errors;
  for (const json& row : Rows()) errors.push_back(std::abs(Compare(row).ThroughputError()));
  ASSERT_GE(errors.size(), 14u);
  std::sort(errors.begin(), errors.end());
  EXPECT_LT(errors[errors.size() / 2], 0.06);
}

}  // namespace
}  // namespace shardsim::sim
