// The ring-attention command's report under mpiexec, the whole world as the context axis: its
// fields (overlap measure, prediction, crossover), --check against full attention, and its input
// errors.
#include "validation/ring_attention_bench.h"

#include <gtest/gtest.h>
#include <mpi.h>

#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"

namespace shardsim::validation {
namespace {

int WorldSize() {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

// The report's fields, not its timings: the standard overlap measure per pass, the prediction
// with its source, per-step figures, and on a sweep the crossover block sizes.
TEST(RingAttentionBench, ReportHasOverlapPredictionAndCrossover) {
  const int ranks = WorldSize();
  RingAttentionBenchOptions options;
  options.heads = 4;
  options.kv_heads = 2;
  options.head_dim = 16;
  options.causal = true;
  options.repeats = 1;
  options.seq_len = 2 * ranks * 16;
  options.check = true;
  const nlohmann::json one = RingAttentionBenchReport(options);
  EXPECT_FALSE(one["check_failed"].get<bool>());
  EXPECT_EQ(one["ranks"].get<int>(), ranks);
  EXPECT_GT(one["predicted_forward_s"].get<double>(), 0.0);
  EXPECT_GT(one["predicted_backward_s"].get<double>(), 0.0);
  EXPECT_FALSE(one["prediction"]["source"].get<std::string>().empty());
  EXPECT_FALSE(one["overlap"]["method"].get<std::string>().empty());
  for (const char* pass : {"forward", "backward"}) {
    const nlohmann::json& ov = one["overlap"][pass];
    EXPECT_GT(ov["both_s"].get<double>(), 0.0) << pass;
    EXPECT_GT(ov["compute_only_s"].get<double>(), 0.0) << pass;
    EXPECT_GE(ov["transfers_only_s"].get<double>(), 0.0) << pass;
    EXPECT_EQ(ov["steps"].get<int>(), ranks) << pass;
    EXPECT_GT(ov["compute_per_step_s"].get<double>(), 0.0) << pass;
    if (ranks == 1) {
      EXPECT_TRUE(ov["hidden_fraction"].is_null()) << "nothing moves over one rank";
    } else {
      const double hidden = ov["hidden_fraction"].get<double>();
      EXPECT_GE(hidden, 0.0) << pass;
      EXPECT_LE(hidden, 1.0) << pass;
      EXPECT_GT(ov["transfer_per_step_s"].get<double>(), 0.0) << pass;
      EXPECT_GT(one["crossover"]["formula_block_tokens"][pass].get<double>(), 0.0) << pass;
      EXPECT_GT(one["prediction"][pass]["transfers_s"].get<double>(), 0.0) << pass;
      const double timers = ov["ring_stats"]["hidden_fraction_from_timers"].get<double>();
      EXPECT_GE(timers, 0.0) << pass;
      EXPECT_LE(timers, 1.0) << pass;
    }
    EXPECT_EQ(ov["hidden_fraction_per_repeat"].size(), ranks == 1 ? 0u : 1u) << pass;
    EXPECT_GE(ov["ring_stats"]["compute_s"]["both"].get<double>(), 0.0) << pass;
  }
  EXPECT_TRUE(one.contains("comm_wait"));
  EXPECT_GT(one["measured_rates"]["attention_forward_flop_per_s"].get<double>(), 0.0);

  options.check = false;
  options.sweep_block_tokens = {16, 8};
  const nlohmann::json sweep = RingAttentionBenchReport(options);
  ASSERT_EQ(sweep["sweep"].size(), 2u);
  EXPECT_EQ(sweep["sweep"][0]["block_tokens"].get<int>(), 8);  // sorted
  EXPECT_EQ(sweep["sweep"][1]["shape"]["seq"].get<int>(), 16 * ranks);
  for (const char* pass : {"forward", "backward"}) {
    const nlohmann::json& c = sweep["crossover"][pass];
    for (const char* key :
         {"measured_block_tokens", "measured_interpolated_block_tokens", "formula_block_tokens",
          "formula_rates_from_block_tokens", "hidden_fraction_at_measured_crossover",
          "hidden_fraction_at_largest_block"}) {
      EXPECT_TRUE(c.contains(key)) << pass << " " << key;
    }
    if (!c["measured_block_tokens"].is_null()) {
      EXPECT_TRUE(c["measured_block_tokens"].get<int>() == 8 ||
                  c["measured_block_tokens"].get<int>() == 16);
    }
    EXPECT_EQ(c["formula_rates_from_block_tokens"].get<int>(), 16);
  }

  options.sweep_block_tokens = {7};  // zigzag needs two chunks per rank
  EXPECT_THROW(RingAttentionBenchReport(options), InputError);
}

}  // namespace
}  // namespace shardsim::validation
