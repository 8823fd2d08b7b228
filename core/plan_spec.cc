#include "core/plan_spec.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "core/suggest.h"
#include "core/text.h"
#include "core/units.h"

namespace shardsim {
namespace {

std::vector<int64_t> Divisors(int64_t n) {
  std::vector<int64_t> out;
  for (int64_t d = 1; d * d <= n; ++d) {
    if (n % d) continue;
    out.push_back(d);
    if (d * d != n) out.push_back(n / d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string List(const std::vector<int64_t>& values, size_t max_items = 16) {
  std::string s;
  for (size_t i = 0; i < values.size() && i < max_items; ++i) s += (i ? ", " : "") + std::to_string(values[i]);
  if (values.size() > max_items) s += ", ...";
  return s;
}

std::string I(int64_t v) { return std::to_string(v); }

void RequireDivides(int64_t part, int64_t whole, const std::string& where, const std::string& part_name,
                    const std::string& whole_name, const std::string& hint) {
  if (whole % part == 0) return;
  throw InputError(where, part_name + "=" + I(part) + " must divide " + whole_name + "=" + I(whole), List(Divisors(whole)), hint);
}

}  // namespace

int64_t MeshShape::Size(std::string_view axis) const { return const_cast<MeshShape*>(this)->Size(axis); }

int64_t& MeshShape::Size(std::string_view axis) {
  if (axis == "data") return data;
  if (axis == "fsdp") return fsdp;
  if (axis == "tensor") return tensor;
  if (axis == "context") return context;
  if (axis == "pipeline") return pipeline;
  SHARDSIM_CHECK(axis == "expert", "unknown mesh axis " + std::string(axis));
  return expert;
}

int64_t MeshShape::Product() const {
  int64_t p = 1;
  for (const std::string& axis : MeshAxisNames()) {
    if (__builtin_mul_overflow(p, Size(axis), &p)) return -1;
  }
  return p;
}

const std::vector<std::string>& MeshAxisNames() {
  static const std::vector<std::string> kAxes = {"data", "fsdp", "tensor", "context", "pipeline", "expert"};
  return kAxes;
}

std::vector<std::string> UsedMeshOrder(const PlanSpec& p) {
  std::vector<std::string> used;
  for (const std::string& a : p.mesh_order) {
    if (p.mesh.Size(a) > 1) used.push_back(a);
  }
  return used;
}

bool UsesDefaultMeshOrder(const PlanSpec& p) {
  PlanSpec d = p;
  d.mesh_order = DefaultMeshOrder();
  return UsedMeshOrder(p) == UsedMeshOrder(d);
}

std::vector<int64_t> LayersPerPart(int64_t num_layers, int64_t parts) {
  SHARDSIM_CHECK(parts >= 1 && parts <= num_layers, "LayersPerPart needs 1 <= parts <= layers");
  std::vector<int64_t> layers(static_cast<size_t>(parts), num_layers / parts + 1);
  int64_t shorter = parts - num_layers % parts;  // parts holding num_layers / parts
  for (int64_t i = 0; shorter > 0; ++i) {
    // Ends first: 0, parts - 1, 1, parts - 2, ...
    const int64_t part = i % 2 == 0 ? i / 2 : parts - 1 - i / 2;
    --layers[static_cast<size_t>(part)];
    --shorter;
  }
  return layers;
}

std::vector<std::string> DefaultMeshOrder() { return {"pipeline", "data", "fsdp", "expert", "context", "tensor"}; }

PlanShape DerivePlanShape(const PlanSpec& p) {
  PlanShape s;
  s.devices = p.mesh.Product();
  s.batch_replicas = p.mesh.data * p.mesh.fsdp * p.mesh.expert;
  s.sequences_per_replica = s.batch_replicas > 0 ? p.global_batch_size / s.batch_replicas : 0;
  s.num_microbatches = p.micro_batch_size > 0 ? s.sequences_per_replica / p.micro_batch_size : 0;
  s.tokens_per_step = p.global_batch_size * p.seq_len;
  return s;
}

void ValidatePlan(const PlanSpec& p, const ModelSpec& m, int64_t devices, const std::string& devices_source,
                  const std::string& where) {
  const std::string w = where + "/";
  // mesh_order: a permutation of the axes.
  {
    std::vector<std::string> seen;
    for (const std::string& axis : p.mesh_order) {
      if (std::find(MeshAxisNames().begin(), MeshAxisNames().end(), axis) == MeshAxisNames().end()) {
        const std::string s = DidYouMean(axis, MeshAxisNames());
        throw InputError(w + "mesh_order", "unknown axis '" + axis + "'" + (s.empty() ? "" : "; " + s), JoinNames(MeshAxisNames()));
      }
      if (std::find(seen.begin(), seen.end(), axis) != seen.end()) {
        throw InputError(w + "mesh_order", "axis '" + axis + "' appears twice", "each of " + JoinNames(MeshAxisNames()) + " once");
      }
      seen.push_back(axis);
    }
    if (seen.size() != MeshAxisNames().size()) {
      throw InputError(w + "mesh_order", "must list all " + I(MeshAxisNames().size()) + " axes, got " + I(seen.size()),
                       JoinNames(DefaultMeshOrder()), "outermost (slowest links) first");
    }
  }
  const int64_t product = p.mesh.Product();
  if (product != devices) {
    throw InputError(w + "mesh",
                     "mesh " + DescribeMesh(p.mesh) + " has " + (product < 0 ? std::string("an overflowing number of") : I(product)) +
                         " devices but " + devices_source + " has " + I(devices),
                     "axis sizes whose product is " + I(devices), "change an axis (often data) so the product matches");
  }
  const MeshShape& mesh = p.mesh;
  if (m.num_heads % mesh.tensor != 0 || m.num_kv_heads % mesh.tensor != 0) {
    std::vector<int64_t> valid;
    for (int64_t d : Divisors(std::gcd(m.num_heads, m.num_kv_heads))) valid.push_back(d);
    throw InputError(w + "mesh/tensor",
                     "tensor=" + I(mesh.tensor) + " must divide heads=" + I(m.num_heads) + " and kv_heads=" + I(m.num_kv_heads),
                     List(valid), "Megatron splits attention heads across the tensor axis");
  }
  if (mesh.pipeline > m.num_layers) {
    throw InputError(w + "mesh/pipeline", "pipeline=" + I(mesh.pipeline) + " exceeds num_layers=" + I(m.num_layers),
                     "1 to " + I(m.num_layers), "each stage holds at least one layer");
  }
  if (p.virtual_stages > 1 && m.num_layers % (mesh.pipeline * p.virtual_stages) != 0) {
    std::vector<int64_t> valid;
    for (int64_t v : Divisors(m.num_layers / std::max<int64_t>(1, mesh.pipeline))) {
      if (m.num_layers % (mesh.pipeline * v) == 0) valid.push_back(v);
    }
    throw InputError(w + "virtual_stages",
                     "pipeline x virtual_stages = " + I(mesh.pipeline) + " x " + I(p.virtual_stages) + " must divide num_layers=" + I(m.num_layers),
                     "virtual_stages in " + List(valid), "interleaved chunks hold the same number of layers; uneven stages need virtual_stages 1");
  }
  if (mesh.expert > 1) {
    if (!m.moe) {
      throw InputError(w + "mesh/expert", "expert=" + I(mesh.expert) + " needs a mixture-of-experts model; '" + m.name + "' is dense",
                       "1", "use the data axis for data parallelism");
    }
    RequireDivides(mesh.expert, m.moe->num_experts, w + "mesh/expert", "expert", "num_experts", "each expert rank holds num_experts/expert experts");
  }
  if (m.position == PositionKind::kLearned && p.seq_len > m.max_seq_len) {
    throw InputError(w + "seq_len", "seq_len=" + I(p.seq_len) + " exceeds the " + I(m.max_seq_len) + " learned positions of '" + m.name + "'",
                     "1 to " + I(m.max_seq_len));
  }
  if (mesh.context > 1) {
    const int64_t chunks = 2 * mesh.context;  // causal load balancing gives each rank two chunks
    if (p.seq_len % chunks != 0) {
      throw InputError(w + "seq_len", "seq_len=" + I(p.seq_len) + " must be divisible by 2 x context = " + I(chunks),
                       "a multiple of " + I(chunks), "ring attention's load balancing gives each context rank two chunks");
    }
  }
  if (p.sequence_parallel && (p.seq_len / mesh.context) % mesh.tensor != 0) {
    throw InputError(w + "sequence_parallel",
                     "sequence parallelism splits seq_len/context=" + I(p.seq_len / mesh.context) + " over tensor=" + I(mesh.tensor) + ", which does not divide it",
                     "seq_len/context a multiple of tensor", "set sequence_parallel to false or change seq_len");
  }
  const int64_t replicas = mesh.data * mesh.fsdp * mesh.expert;
  if (p.global_batch_size % replicas != 0) {
    throw InputError(w + "global_batch_size",
                     "global_batch_size=" + I(p.global_batch_size) + " does not split over data x fsdp x expert = " + I(replicas) + " replicas",
                     "a multiple of " + I(replicas), "every replica must see the same number of sequences");
  }
  const int64_t per_replica = p.global_batch_size / replicas;
  if (per_replica % p.micro_batch_size != 0) {
    throw InputError(w + "micro_batch_size",
                     "micro_batch_size=" + I(p.micro_batch_size) + " must divide the " + I(per_replica) + " sequences per replica",
                     List(Divisors(per_replica)));
  }
  const int64_t microbatches = per_replica / p.micro_batch_size;
  switch (p.pipeline_schedule) {
    case PipelineSchedule::kInterleavedOneFOneB:
      if (mesh.pipeline > 1 && p.virtual_stages < 2) {
        throw InputError(w + "virtual_stages", "interleaved-1f1b needs virtual_stages >= 2, got " + I(p.virtual_stages),
                         List(Divisors(m.num_layers / mesh.pipeline)), "or use pipeline_schedule 1f1b");
      }
      if (mesh.pipeline > 1 && microbatches % mesh.pipeline != 0) {
        throw InputError(w + "global_batch_size",
                         "interleaved-1f1b needs the " + I(microbatches) + " micro-batches per replica to be a multiple of pipeline=" + I(mesh.pipeline),
                         "micro-batches a multiple of " + I(mesh.pipeline), "change global_batch_size or micro_batch_size");
      }
      break;
    case PipelineSchedule::kDualPipe:
      if (mesh.pipeline > 1 && (mesh.pipeline % 2 != 0 || microbatches % 2 != 0 || microbatches < 2 * mesh.pipeline)) {
        throw InputError(w + "pipeline_schedule",
                         "dualpipe needs an even pipeline (got " + I(mesh.pipeline) + ") and an even number of micro-batches >= 2 x pipeline (got " +
                             I(microbatches) + ")",
                         "", "DualPipe feeds micro-batches from both ends of the pipeline");
      }
      [[fallthrough]];
    default:
      if (p.virtual_stages != 1) {
        throw InputError(w + "virtual_stages", ToString(p.pipeline_schedule) + " runs one model chunk per stage, got virtual_stages=" + I(p.virtual_stages),
                         "1", "use pipeline_schedule interleaved-1f1b for virtual stages");
      }
  }
}

std::string ToString(PipelineSchedule s) {
  switch (s) {
    case PipelineSchedule::kGpipe: return "gpipe";
    case PipelineSchedule::kOneFOneB: return "1f1b";
    case PipelineSchedule::kInterleavedOneFOneB: return "interleaved-1f1b";
    case PipelineSchedule::kZbH1: return "zb-h1";
    case PipelineSchedule::kDualPipe: return "dualpipe";
  }
  return "1f1b";
}

std::string ToString(Recompute r) {
  switch (r) {
    case Recompute::kNone: return "none";
    case Recompute::kSelective: return "selective";
    case Recompute::kFull: return "full";
  }
  return "none";
}

std::vector<std::string> PipelineScheduleNames() { return {"gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "dualpipe"}; }
std::vector<std::string> RecomputeNames() { return {"none", "selective", "full"}; }

PipelineSchedule ParsePipelineSchedule(const std::string& name) {
  for (PipelineSchedule s : {PipelineSchedule::kGpipe, PipelineSchedule::kOneFOneB, PipelineSchedule::kInterleavedOneFOneB,
                             PipelineSchedule::kZbH1, PipelineSchedule::kDualPipe}) {
    if (ToString(s) == name) return s;
  }
  SHARDSIM_CHECK(false, "unknown pipeline schedule " + name);
}

Recompute ParseRecompute(const std::string& name) {
  for (Recompute r : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
    if (ToString(r) == name) return r;
  }
  SHARDSIM_CHECK(false, "unknown recompute " + name);
}

MeshShape ParseMeshSpec(const std::string& text, const std::string& where) {
  MeshShape mesh;
  std::vector<std::string> seen;
  for (const std::string& item : Split(text, ',')) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos) {
      throw InputError(where, "'" + item + "' is not axis=size", "axes " + JoinNames(MeshAxisNames()), "e.g. data=8,tensor=8");
    }
    const std::string axis = item.substr(0, eq);
    if (std::find(MeshAxisNames().begin(), MeshAxisNames().end(), axis) == MeshAxisNames().end()) {
      const std::string s = DidYouMean(axis, MeshAxisNames());
      throw InputError(where, "unknown mesh axis '" + axis + "'" + (s.empty() ? "" : "; " + s), JoinNames(MeshAxisNames()));
    }
    if (std::find(seen.begin(), seen.end(), axis) != seen.end()) {
      throw InputError(where, "axis '" + axis + "' given twice", "each axis once");
    }
    seen.push_back(axis);
    mesh.Size(axis) = ParseInteger(item.substr(eq + 1), where + " (" + axis + ")", 1, int64_t{1} << 24);
  }
  return mesh;
}

std::string DescribeMesh(const MeshShape& mesh) {
  std::string s;
  for (const std::string& axis : MeshAxisNames()) {
    if (mesh.Size(axis) == 1) continue;
    s += (s.empty() ? "" : " x ") + axis + "=" + I(mesh.Size(axis));
  }
  return s.empty() ? "(all axes 1)" : s;
}

}  // namespace shardsim
