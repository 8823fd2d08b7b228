// The replica and shard axes of strategies/data_parallel.h read from the mesh axes table
// (core/mesh_axes.h), and the table's streams are the step program's.
#include "strategies/data_parallel.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "core/mesh_axes.h"
#include "strategies/step_program.h"

namespace shardsim::strategies {
namespace {

using Axes = std::vector<std::string>;

PlanSpec EveryAxis(int64_t zero_stage) {
  PlanSpec p;
  for (const MeshAxisFacts& axis : kMeshAxes) p.mesh.Size(axis.axis) = 2;
  p.zero_stage = zero_stage;
  return p;
}

TEST(DataParallelAxesTest, ReplicaAxesFollowTheDocumentedRules) {
  // Data and context replicate every parameter; expert only the dense ones.
  EXPECT_EQ(ReplicaAxes(EveryAxis(0), ParamKind::kDense), (Axes{"data", "context", "expert"}));
  EXPECT_EQ(ReplicaAxes(EveryAxis(0), ParamKind::kExpert), (Axes{"data", "context"}));
  PlanSpec one = EveryAxis(0);
  one.mesh.data = 1, one.mesh.context = 1;
  EXPECT_EQ(ReplicaAxes(one, ParamKind::kDense), (Axes{"expert"}));
  EXPECT_TRUE(ReplicaAxes(one, ParamKind::kExpert).empty());
  // fsdp shards always; the replica axes too at ZeRO-3 (parameters) and from ZeRO-2 (gradients).
  EXPECT_EQ(ParamShardAxes(EveryAxis(2), ParamKind::kDense), (Axes{"fsdp"}));
  EXPECT_EQ(ParamShardAxes(EveryAxis(3), ParamKind::kDense),
            (Axes{"fsdp", "data", "context", "expert"}));
  EXPECT_EQ(GradShardAxes(EveryAxis(1), ParamKind::kExpert), (Axes{"fsdp"}));
  EXPECT_EQ(GradShardAxes(EveryAxis(2), ParamKind::kExpert), (Axes{"fsdp", "data", "context"}));
  const ShardDegrees d = Sharding(EveryAxis(1), ParamKind::kDense);
  EXPECT_EQ(d.params, 2);
  EXPECT_EQ(d.grads, 2);
  EXPECT_EQ(d.optimizer, 16);  // fsdp x data x context x expert
}

TEST(DataParallelAxesTest, TableStreamsAreStepProgramStreams) {
  std::set<std::string> streams;
  for (Stream s :
       {Stream::kTensor, Stream::kData, Stream::kPipeline, Stream::kExpert, Stream::kContext})
    streams.insert(ToString(s));
  for (const MeshAxisFacts& axis : kMeshAxes)
    EXPECT_EQ(streams.count(std::string(axis.stream)), 1u) << axis.name;
}

}  // namespace
}  // namespace shardsim::strategies
