// Parameters held on two pipeline stages train exactly like one rank: DualPipe's two copies of
// every part (both directions, the copies' gradients summed once per step) and a tied embedding
// whose head sits on the last stage (runtime/stage_copies.h). Run under mpiexec with 2, 4 and 8
// ranks, each case whose mesh fits the job.
#include <gtest/gtest.h>

#include <vector>

#include "tests/runtime/equivalence_harness.h"

namespace shardsim::runtime {
namespace {

using namespace equivalence;  // NOLINT: the harness's names

// TestModel() with `layers` layers (DualPipe places one part per stage).
ModelSpec Layers(int64_t layers, bool tied = false) {
  ModelSpec m = TestModel();
  m.num_layers = layers;
  m.tied_embeddings = tied;
  return m;
}

Case DualPipe(std::string name, MeshShape mesh, int64_t microbatches, int64_t layers = 4) {
  Case c{std::move(name), mesh, "dualpipe"};
  c.global_batch_size = microbatches * mesh.data * mesh.fsdp;
  c.model = Layers(layers);
  return c;
}

Case Tied(std::string name, MeshShape mesh, std::string schedule = "1f1b") {
  Case c{std::move(name), mesh, std::move(schedule)};
  c.model = Layers(4, true);
  return c;
}

std::vector<Case> Cases() {
  std::vector<Case> cases = {
      DualPipe("dualpipe2", Mesh(1, 1, 2), 4),
      DualPipe("dualpipe4", Mesh(1, 1, 4), 8),
      DualPipe("dualpipe8", Mesh(1, 1, 8), 16, 8),
      DualPipe("dualpipe4_data2", Mesh(2, 1, 4), 8),
      DualPipe("dualpipe2_tensor_sequence", Mesh(1, 2, 2), 4),
      DualPipe("dualpipe2_data_zero1", Mesh(2, 1, 2), 4),
      DualPipe("dualpipe2_fsdp_zero3", Mesh(1, 1, 2, 1, 2), 4),
      DualPipe("dualpipe4_tied", Mesh(1, 1, 4), 8),
      Tied("tied_pipeline2", Mesh(1, 1, 2)),
      Tied("tied_pipeline2_interleaved", Mesh(1, 1, 2), "interleaved-1f1b"),
      Tied("tied_tensor_pipeline", Mesh(1, 2, 2)),
      Tied("tied_data_pipeline_zero1", Mesh(2, 1, 2)),
      Tied("tied_fsdp_pipeline", Mesh(1, 1, 2, 1, 2)),
  };
  cases[4].sequence_parallel = true;
  cases[5].zero_stage = 1;
  cases[6].zero_stage = 3;
  cases[7].model->tied_embeddings = true;
  cases[9].virtual_stages = 2;
  cases[11].zero_stage = 1;
  return cases;
}

INSTANTIATE_TEST_SUITE_P(PipelineCopies, EquivalenceTest, ::testing::ValuesIn(Cases()), CaseName);

}  // namespace
}  // namespace shardsim::runtime
