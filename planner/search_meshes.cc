#include "planner/search_meshes.h"

#include <algorithm>
#include <string>

#include "core/error.h"
#include "strategies/plan_rules.h"

namespace shardsim::planner {
namespace {

// The degrees tried along `axis` with `left` devices to share: the fixed one when the
// constraints fix it (if it divides), else the table's rule within `bound`.
std::vector<int64_t> Degrees(const PlanConstraints& fixed, MeshAxis axis, int64_t left, int64_t bound = 0) {
  if (fixed.FixesAxis(axis)) {
    const int64_t d = fixed.values.mesh.Size(axis);
    return left % d == 0 ? std::vector<int64_t>{d} : std::vector<int64_t>{};
  }
  return SearchedDegrees(axis, left, bound);
}

}  // namespace

std::vector<MeshShape> Meshes(const ModelSpec& m, const ClusterSpec& c, const PlanConstraints& fixed, int64_t sequences, int64_t seq_len) {
  const int64_t n = DeviceCount(c);
  const int64_t tensor_max = c.topology.kind == TopologyKind::kSwitched ? c.topology.devices_per_node : 16;
  // The plan rules decide what a mesh may be (strategies::CheckPlan on a one-micro-batch 1F1B
  // probe); here only the factorisations of the devices and the search's own bounds.
  PlanSpec probe;
  probe.global_batch_size = sequences;
  probe.seq_len = seq_len;
  // A fixed expert folding is checked with each mesh (it needs its axes, and sequence
  // parallelism to fold over tensor).
  if (fixed.Fixes("expert_axes")) probe.expert_axes = fixed.values.expert_axes;
  if (fixed.Fixes("sequence_parallel")) {
    probe.sequence_parallel = fixed.values.sequence_parallel;
  } else if (fixed.Fixes("expert_axes")) {
    probe.sequence_parallel = true;  // a fold over tensor needs it; the search sets it with tensor > 1
  }
  // Context parallelism only where each rank keeps at least 1024 tokens of a sequence.
  const int64_t context_max = std::max<int64_t>(1, seq_len / 1024);
  // A fixed pipeline schedule asks for pipeline stages (unless the pipeline degree is fixed too).
  const bool staged = (fixed.Fixes("pipeline_schedule") || fixed.Fixes("virtual_stages")) && !fixed.FixesAxis(MeshAxis::kPipeline);
  std::vector<MeshShape> meshes;
  for (int64_t t : Degrees(fixed, MeshAxis::kTensor, n, tensor_max)) {
    for (int64_t p : Degrees(fixed, MeshAxis::kPipeline, n / t, m.num_layers)) {
      if (staged && p == 1) continue;
      for (int64_t cp : Degrees(fixed, MeshAxis::kContext, n / t / p, context_max)) {
        const int64_t rest = n / t / p / cp;
        for (int64_t e : Degrees(fixed, MeshAxis::kExpert, rest, m.moe ? m.moe->num_experts : 1)) {
          for (int64_t f : Degrees(fixed, MeshAxis::kFsdp, rest / e)) {
            for (int64_t data : Degrees(fixed, MeshAxis::kData, rest / e / f)) {
              if (data != rest / e / f) continue;  // a fixed data degree must take what is left
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

void ThrowNoMesh(const ModelSpec& m, const ClusterSpec& c, const PlanConstraints& fixed, int64_t sequences, int64_t seq_len) {
  // The fields as the user gave them: `--set` flags, or the plan file's (and its --set) keys.
  const bool from_flags = fixed.source.empty() || fixed.source == "plan (from --set)";
  auto where = [&](const std::string& fields, const std::string& key) { return from_flags ? "--set " + fields : fixed.source + ":/" + key; };
  std::string fixed_axes;
  for (const MeshAxisFacts& axis : kMeshAxes) {
    if (fixed.FixesAxis(axis.axis)) fixed_axes += std::string(fixed_axes.empty() ? "" : ", ") + "mesh." + std::string(axis.name) + "=" + std::to_string(fixed.values.mesh.Size(axis.axis));
  }
  // A fixed schedule asks for pipeline stages (Meshes): name it beside the axes that leave none.
  std::string staging;
  for (const char* field : {"pipeline_schedule", "virtual_stages"}) {
    if (fixed.Fixes(field) && !fixed.FixesAxis(MeshAxis::kPipeline)) {
      staging += std::string(staging.empty() ? "" : ", ") + field + "=" +
                 (std::string(field) == "pipeline_schedule" ? fixed.values.pipeline_schedule : std::to_string(fixed.values.virtual_stages));
    }
  }
  // Blamed only where the fixed axes alone leave meshes.
  PlanConstraints unstaged = fixed;
  std::erase_if(unstaged.fixed, [](const std::string& key) { return key == "pipeline_schedule" || key == "virtual_stages"; });
  if (!staging.empty() && !fixed_axes.empty() && !Meshes(m, c, unstaged, sequences, seq_len).empty()) {
    throw InputError(where(staging, fixed.Fixes("pipeline_schedule") ? "pipeline_schedule" : "virtual_stages"), staging + " needs pipeline stages (mesh.pipeline > 1), and no mesh of the " + std::to_string(DeviceCount(c)) + " devices of " +
                                             c.name + " with " + fixed_axes + " and pipeline stages runs " + m.name + " with " + std::to_string(sequences) +
                                             " sequences of " + std::to_string(seq_len),
                     "a pipeline degree that divides what the fixed axes leave of the devices",
                     "leave " + staging + " out, or fix smaller axes so that pipeline stages fit");
  }
  if (!fixed_axes.empty()) {
    throw InputError(where(fixed_axes, "mesh"), "no mesh of the " + std::to_string(DeviceCount(c)) + " devices of " + c.name + " with " + fixed_axes +
                                                " runs " + m.name + " with " + std::to_string(sequences) + " sequences of " + std::to_string(seq_len),
                     "fixed degrees whose product divides the devices and that the model divides",
                     "try 'shardsim estimate' with the full mesh to see which rule it breaks");
  }
  throw InputError("--global-batch-tokens", "no mesh of the " + std::to_string(DeviceCount(c)) + " devices of " + c.name +
                                                " splits the " + std::to_string(sequences) + " sequences over its data x fsdp x expert replicas",
                   "a sequence count that the replicas divide, e.g. a multiple of " + std::to_string(DeviceCount(c)),
                   "the tensor, pipeline and context axes take the rest of the devices");
}

}  // namespace shardsim::planner
