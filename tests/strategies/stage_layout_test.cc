// The stage layout decided once (strategies/stage_layout.h): the default split, the schedules'
// placements, and Megatron-core's pipeline_layout syntax with its errors.
#include "strategies/stage_layout.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "core/model_presets.h"
#include "strategies/plan_rules.h"

namespace shardsim::strategies {
namespace {

ModelSpec Model(const std::string& name) { return FindModelPreset(name)->spec; }

PlanSpec Pipelined(int64_t stages, const std::string& schedule, int64_t virtual_stages,
                   const std::string& layout = "") {
  PlanSpec p;
  p.mesh.pipeline = stages;
  p.global_batch_size = 64 * stages;
  p.seq_len = 4096;
  p.pipeline_schedule = schedule;
  p.virtual_stages = virtual_stages;
  p.pipeline_layout = layout;
  return p;
}

TEST(DefaultPartLayersTest, EvenOrShorterAtTheEnds) {
  EXPECT_EQ(DefaultPartLayers(32, 4), (std::vector<int64_t>{8, 8, 8, 8}));
  // Llama 3 405B: one layer fewer on the first and the last of 16 stages.
  std::vector<int64_t> llama(16, 8);
  llama.front() = llama.back() = 7;
  EXPECT_EQ(DefaultPartLayers(126, 16), llama);
  // DeepSeek-V3's 61 layers on 16 stages: three shorter stages, the ends first.
  std::vector<int64_t> deepseek(16, 4);
  deepseek[0] = deepseek[15] = deepseek[1] = 3;
  EXPECT_EQ(DefaultPartLayers(61, 16), deepseek);
  EXPECT_EQ(DefaultPartLayers(32, 3), (std::vector<int64_t>{10, 11, 11}));
  EXPECT_EQ(DefaultPartLayers(5, 5), (std::vector<int64_t>{1, 1, 1, 1, 1}));
  for (int64_t layers : {7, 61, 80, 126}) {
    for (int64_t parts = 1; parts <= layers; ++parts) {
      const std::vector<int64_t> split = DefaultPartLayers(layers, parts);
      int64_t sum = 0;
      for (int64_t n : split) sum += n;
      EXPECT_EQ(sum, layers);
      EXPECT_LE(*std::max_element(split.begin(), split.end()) -
                    *std::min_element(split.begin(), split.end()),
                1);
    }
  }
}

TEST(StageLayoutTest, EveryLayerOnceEmbeddingFirstLossLast) {
  const ModelSpec m = Model("llama3-405b");
  for (const auto& [schedule, v] : std::vector<std::pair<std::string, int64_t>>{
           {"1f1b", 1}, {"interleaved-1f1b", 3}, {"zbv", 1}, {"dualpipe", 1}}) {
    const PlanSpec p = Pipelined(16, schedule, v);
    ASSERT_FALSE(CheckLayout(m, p)) << schedule;
    const StageLayout layout = LayOut(m, p);
    for (const auto& path : layout.paths) {
      int64_t next_layer = 0;
      for (size_t i = 0; i < path.size(); ++i) {
        const ChunkLayout& c = layout.Chunk(path[i].first, path[i].second);
        EXPECT_EQ(c.position, static_cast<int64_t>(i));
        EXPECT_EQ(c.first_layer, next_layer) << schedule;
        EXPECT_EQ(c.embedding, i == 0);
        EXPECT_EQ(c.head, i + 1 == path.size());
        next_layer += c.layers;
      }
      EXPECT_EQ(next_layer, m.num_layers) << schedule;
    }
  }
}

TEST(StageLayoutTest, ZeroBubbleVPutsEmbeddingAndLossOnTheFirstStage) {
  const StageLayout layout = LayOut(Model("llama3-8b"), Pipelined(4, "zbv", 1));
  EXPECT_EQ(layout.chunks, 2);
  EXPECT_TRUE(layout.Chunk(0, 0).embedding);
  EXPECT_TRUE(layout.Chunk(0, 1).head);
  EXPECT_EQ(layout.Chunk(3, 0).position, 3);
  EXPECT_EQ(layout.Chunk(3, 1).position, 4);  // the V turns on the last stage
  EXPECT_EQ(layout.Chunk(1, 1).position, 6);
}

TEST(StageLayoutTest, MegatronLayoutWithTheEmbeddingAndLossAlone) {
  // Llama 3 405B's 126 layers on 16 stages x 8 chunks: 128 chunks, the first holding only the
  // embedding and the last only the loss.
  const ModelSpec m = Model("llama3-405b");
  const PlanSpec p = Pipelined(16, "interleaved-1f1b", 8, "E|(t|)*126L");
  ASSERT_FALSE(CheckLayout(m, p)) << CheckLayout(m, p)->what;
  const StageLayout layout = LayOut(m, p);
  EXPECT_EQ(layout.Chunk(0, 0).layers, 0);
  EXPECT_TRUE(layout.Chunk(0, 0).embedding);
  EXPECT_EQ(layout.Chunk(1, 0).first_layer, 0);
  EXPECT_EQ(layout.Chunk(15, 7).layers, 0);
  EXPECT_TRUE(layout.Chunk(15, 7).head);
  EXPECT_EQ(DescribePartLayers(layout), "0, 1 x 126, 0");
  EXPECT_EQ(LayoutText(layout), "E|(t|)*126L");
}

TEST(StageLayoutTest, LayoutTextParsesBackToTheSameLayout) {
  const ModelSpec m = Model("llama3-405b");
  for (const auto& [schedule, v] : std::vector<std::pair<std::string, int64_t>>{
           {"1f1b", 1}, {"interleaved-1f1b", 3}, {"zbv", 1}}) {
    const StageLayout layout = LayOut(m, Pipelined(16, schedule, v));
    const PlanSpec written = Pipelined(16, schedule, v, LayoutText(layout));
    ASSERT_FALSE(CheckLayout(m, written))
        << LayoutText(layout) << ": " << CheckLayout(m, written)->what;
    const StageLayout again = LayOut(m, written);
    for (int64_t s = 0; s < 16; ++s) {
      for (int64_t c = 0; c < layout.chunks; ++c) {
        EXPECT_EQ(again.Chunk(s, c).first_layer, layout.Chunk(s, c).first_layer);
        EXPECT_EQ(again.Chunk(s, c).layers, layout.Chunk(s, c).layers);
      }
    }
  }
  EXPECT_EQ(LayoutText(LayOut(Model("llama3-405b"), Pipelined(16, "1f1b", 1))),
            "Et*7|(t*8|)*14t*7L");
}

// Per-part layer counts as layout text: the embedding first, the loss last, runs collapsed;
// it lays out as written.
TEST(StageLayoutTest, PartLayersText) {
  EXPECT_EQ(PartLayersText({16, 16, 16, 15}), "Et*16|(t*16|)*2t*15L");
  EXPECT_EQ(PartLayersText({14, 14, 13, 13, 13, 13}), "Et*14|t*14|(t*13|)*3t*13L");
  EXPECT_EQ(PartLayersText({1}), "EtL");
  EXPECT_EQ(PartLayersText({16, 16, 16, 15}, 1), "Et*16|(t*16|)*2t*15mL");
  EXPECT_EQ(PartLayersText({2, 1}, 2), "Et*2|tm*2L");
  const ModelSpec m = Model("llama3-405b");  // 126 layers
  const PlanSpec written = Pipelined(8, "1f1b", 1, PartLayersText({16, 16, 16, 16, 16, 16, 15, 15}));
  ASSERT_FALSE(CheckLayout(m, written)) << CheckLayout(m, written)->what;
  EXPECT_EQ(DescribePartLayers(LayOut(m, written)), "16 x 6, 15 x 2");
}

TEST(StageLayoutTest, BadLayoutsSayWhatIsWrong) {
  const ModelSpec m = Model("llama3-8b");  // 32 layers
  auto what = [&](const std::string& layout, int64_t stages = 4) {
    const auto bad = CheckLayout(m, Pipelined(stages, "1f1b", 1, layout));
    return bad ? bad->field + ": " + bad->what : std::string();
  };
  EXPECT_EQ(what("Et*8|t*8|t*8|t*8L"), "");
  EXPECT_NE(what("Et*8|t*8|t*16L").find("has 3 chunks but the plan's pipeline has 4"),
            std::string::npos);
  EXPECT_NE(what("Et*8|t*8|t*8|t*7L").find("places 31 decoder layers (t) but 'llama3-8b' has 32"),
            std::string::npos);
  EXPECT_NE(
      what("Et*8|t*8|t*8|t*7mL").find("multi-token-prediction layer (m) but 'llama3-8b' has none"),
      std::string::npos);
  // A model with multi-token-prediction modules places them with the loss, as LayoutText writes.
  ModelSpec mtp = m;
  mtp.mtp_layers = 2;
  auto what_mtp = [&](const std::string& layout, int64_t stages = 4) {
    const auto bad = CheckLayout(mtp, Pipelined(stages, "1f1b", 1, layout));
    return bad ? bad->what : std::string();
  };
  EXPECT_EQ(what_mtp("Et*8|t*8|t*8|t*8m*2L"), "");
  EXPECT_EQ(LayoutText(LayOut(mtp, Pipelined(4, "1f1b", 1))), "Et*8|(t*8|)*2t*8m*2L");
  EXPECT_NE(what_mtp("Et*8|t*8|t*8|t*8mL").find("places 1 multi-token-prediction layer (m) but 'llama3-8b' has 2"), std::string::npos);
  EXPECT_NE(what_mtp("Et*8|t*8m|t*8|t*8mL").find("places a decoder layer (t) after a multi-token-prediction layer (m)"), std::string::npos);
  EXPECT_NE(what_mtp("Et*8|t*8|t*8|t*7mtmL").find("places a decoder layer (t) after"), std::string::npos);
  EXPECT_NE(what_mtp("Et*8|t*8|t*8|t*8m|mL", 5).find("spreads the multi-token-prediction layers (m) over 2 chunks"), std::string::npos);
  // Megatron-core's own example: the modules in a chunk of their own before the loss's.
  EXPECT_EQ(what_mtp("Et*8|t*8|t*8|t*8|m*2L", 5), "");
  const StageLayout own = LayOut(mtp, Pipelined(5, "1f1b", 1, "Et*8|t*8|t*8|t*8|m*2L"));
  EXPECT_EQ(own.Chunk(4, 0).mtp, 2);
  EXPECT_EQ(own.Chunk(3, 0).mtp, 0);
  EXPECT_EQ(LayoutText(own), "Et*8|(t*8|)*3m*2L");
  // In the last chunk of its stage (Megatron-core's last virtual stage of a rank), and with the
  // loss under DualPipe.
  const auto placed = [&](const std::string& schedule, int64_t v, const std::string& layout) {
    const auto bad = CheckLayout(mtp, Pipelined(2, schedule, v, layout));
    return bad ? bad->what : std::string();
  };
  EXPECT_NE(placed("interleaved-1f1b", 2, "Et*32|m*2||L").find("in chunk 1 of stage 1's 2"), std::string::npos) << placed("interleaved-1f1b", 2, "Et*32|m*2||L");
  EXPECT_EQ(placed("interleaved-1f1b", 2, "Et*8|t*8|t*8|t*8m*2L"), "");
  EXPECT_NE(placed("dualpipe", 1, "Et*32m*2|L").find("apart from the loss under dualpipe"), std::string::npos) << placed("dualpipe", 1, "Et*32m*2|L");
  EXPECT_EQ(placed("dualpipe", 1, "Et*16|t*16m*2L"), "");
  EXPECT_NE(what("tEt*7|t*8|t*8|t*8L").find("one E, first in the first chunk"), std::string::npos);
  EXPECT_NE(what("Et*8|t*8|t*8|t*7Lt").find("one L, last in the last chunk"), std::string::npos);
  EXPECT_NE(what("Et*8|(t*8|*2t*8L").find("unclosed '('"), std::string::npos);
  EXPECT_NE(what("Et*8|(t*8|)*2t*8L)").find("unexpected ')'"), std::string::npos);
  EXPECT_NE(what("Ex*8|t*8|t*8|t*8L").find("unknown symbol 'x' at character 2"), std::string::npos);
  EXPECT_NE(what("E(t|)*99999999999L").find("expands to more than"), std::string::npos);
  // Deep nesting is refused before it can exhaust the stack; the error quotes only the start.
  const std::string deep = std::string(30000, '(') + "t" + std::string(30000, ')');
  const std::string nested = what(deep);
  EXPECT_NE(nested.find("more than 64 nested parentheses"), std::string::npos) << nested.substr(0, 200);
  EXPECT_LT(nested.size(), 300u);
  // Commas are cosmetic, as in Megatron-core's own example.
  EXPECT_EQ(what("Et*8,|t*8|t*8,|t*8L"), "");
  EXPECT_NE(what(std::string("Et*8|t*8|t*8|t*8L\x01")).find("byte 0x01"), std::string::npos);
}

}  // namespace
}  // namespace shardsim::strategies
