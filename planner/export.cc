#include "planner/export.h"

#include <cstdlib>
#include <sstream>

#include "core/error.h"
#include "core/suggest.h"
#include "planner/export_settings.h"
#include "strategies/stage_layout.h"

namespace shardsim::planner {
namespace {

// JAX: a device mesh with shardsim's axis names, outermost first. Not a framework: the training
// code applies schedules, recomputation and ZeRO, so there are no settings to read back.
Export Jax(const PlanSpec& p) {
  Export e;
  std::ostringstream py;
  py << "import jax\nfrom jax.experimental import mesh_utils\nfrom jax.sharding import Mesh\n\n";
  py << "axis_names = (";
  for (size_t i = 0; i < p.mesh_order.size(); ++i)
    py << (i ? ", " : "") << "\"" << p.mesh_order[i] << "\"";
  py << ")\nshape = (";
  for (size_t i = 0; i < p.mesh_order.size(); ++i)
    py << (i ? ", " : "") << p.mesh.Size(p.mesh_order[i]);
  py << ")\ndevices = mesh_utils.create_device_mesh(shape)\nmesh = Mesh(devices, axis_names)\n";
  e.text = py.str();
  e.not_expressed.push_back(
      "the mesh only: schedules, recomputation and ZeRO are the training code's to apply");
  return e;
}

}  // namespace

std::string StageLayers(const ModelSpec& m, const PlanSpec& p) {
  return strategies::DescribePartLayers(strategies::LayOut(m, p));
}

std::vector<std::string> ExportTargetNames() {
  return {"megatron-core", "maxtext", "torchtitan", "jax", "deepspeed"};
}

ExportTarget ParseExportTarget(const std::string& name, const std::string& where) {
  const std::vector<std::string> names = ExportTargetNames();
  const std::string wanted = name == "megatron" ? "megatron-core" : name;  // the old name
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == wanted) return static_cast<ExportTarget>(i);
  }
  const std::string s = DidYouMean(name, names);
  throw InputError(where, "unknown export '" + name + "'" + (s.empty() ? "" : "; " + s),
                   JoinNames(names), "\"megatron\" also names megatron-core");
}

std::optional<Framework> FrameworkOf(ExportTarget target) {
  switch (target) {
    case ExportTarget::kMegatron:
      return Framework::kMegatronCore;
    case ExportTarget::kMaxText:
      return Framework::kMaxText;
    case ExportTarget::kTorchtitan:
      return Framework::kTorchtitan;
    case ExportTarget::kDeepSpeed:
      return Framework::kDeepSpeed;
    case ExportTarget::kJax:
      return std::nullopt;
  }
  return std::nullopt;
}

Export ExportPlan(const ModelSpec& model, const ClusterSpec& cluster, const PlanSpec& plan,
                  ExportTarget target) {
  const std::optional<Framework> framework = FrameworkOf(target);
  if (!framework) return Jax(plan);
  // The loss and recipe as the plan was estimated (CrossEntropyOf, Fp8RecipeOf), whatever the
  // framework's own defaults.
  PlanSpec estimated = plan;
  estimated.cross_entropy = CrossEntropyOf(plan);
  estimated.elementwise_kernels = ElementwiseKernelsOf(plan);
  estimated.fp8_recipe = Fp8RecipeOf(plan);  // likewise the recipe
  const PlanSpec p = CanonicalSharding(estimated);
  Export e;
  e.not_expressed = FrameworkGaps(*framework, model, estimated);
  switch (*framework) {
    case Framework::kMegatronCore:
      e.settings = MegatronSettings(model, p);
      e.text = MegatronText(e.settings);
      break;
    case Framework::kTorchtitan:
      e.settings = TorchtitanSettings(model, p);
      e.text = TorchtitanText(e.settings);
      break;
    case Framework::kMaxText:
      if (std::optional<std::string> gap = MaxTextDcnGap(cluster, estimated))
        e.not_expressed.push_back(*gap);
      e.settings = MaxTextSettings(model, cluster, p);
      e.text = MaxTextText(e.settings);
      break;
    case Framework::kDeepSpeed:
      e.settings = DeepSpeedSettings(model, p);
      e.text = DeepSpeedText(e.settings);
      if (const std::string note = DeepSpeedBatchOf(p).note; !note.empty()) e.not_expressed.push_back(note);
      for (const Setting& s : e.settings) {
        if (s.name.rfind("launch.", 0) == 0) e.beside.push_back({s.name.substr(7), s.value});
      }
      break;
  }
  return e;
}

PlanSpec PlanFromExport(ExportTarget target, const std::vector<Setting>& settings,
                        const ModelSpec& model) {
  const std::optional<Framework> framework = FrameworkOf(target);
  SHARDSIM_CHECK(framework.has_value(), "a JAX mesh holds no plan to read back");
  const SettingReader reader(settings, std::string(FrameworkName(*framework)));
  switch (*framework) {
    case Framework::kMegatronCore:
      return MegatronPlan(reader, model);
    case Framework::kTorchtitan:
      return TorchtitanPlan(reader, model);
    case Framework::kMaxText:
      return MaxTextPlan(reader, model);
    case Framework::kDeepSpeed:
      return DeepSpeedPlan(reader, model);
  }
  return {};
}

SettingReader::SettingReader(const std::vector<Setting>& settings, std::string framework)
    : settings_(settings), framework_(std::move(framework)) {}

bool SettingReader::Has(const std::string& name) const {
  for (const Setting& s : settings_) {
    if (s.name == name) return true;
  }
  return false;
}

std::string SettingReader::Get(const std::string& name, const std::string& fallback) const {
  for (const Setting& s : settings_) {
    if (s.name == name) return s.value;
  }
  return fallback;
}

std::string SettingReader::Text(const std::string& name, const std::string& fallback) const {
  const std::string v = Get(name, fallback);
  return v.size() >= 2 && v.front() == '"' && v.back() == '"' ? v.substr(1, v.size() - 2) : v;
}

int64_t SettingReader::Int(const std::string& name, int64_t fallback) const {
  if (!Has(name)) return fallback;
  const std::string text = Get(name);
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0') Fail(name, "expected a whole number, got '" + text + "'");
  return v;
}

double SettingReader::Number(const std::string& name, double fallback) const {
  if (!Has(name)) return fallback;
  const std::string text = Get(name);
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0') Fail(name, "expected a number, got '" + text + "'");
  return v;
}

bool SettingReader::Bool(const std::string& name, bool fallback) const {
  if (!Has(name)) return fallback;
  const std::string text = Get(name);
  if (text == "true" || text == "True") return true;
  if (text == "false" || text == "False") return false;
  Fail(name, "expected true or false, got '" + text + "'");
}

void SettingReader::Fail(const std::string& name, const std::string& what) const {
  throw InputError(framework_ + " setting " + name, what);
}

PlanSpec EmptyPlan(const FrameworkFacts& facts) {
  PlanSpec p;
  p.mesh_order.clear();
  for (MeshAxis axis : facts.mesh_order) p.mesh_order.emplace_back(AxisFacts(axis).name);
  return p;
}

std::vector<ChunkParts> PathParts(const ModelSpec& model, const PlanSpec& plan) {
  const strategies::StageLayout layout = strategies::LayOut(model, plan);
  std::vector<ChunkParts> parts;
  for (const auto& [stage, chunk] : layout.paths.front()) {
    const strategies::ChunkLayout& c = layout.Chunk(stage, chunk);
    parts.push_back({c.embedding, c.head, c.first_layer, c.layers, c.mtp});
  }
  return parts;
}

std::string LayoutOrEmpty(const ModelSpec& model, const PlanSpec& plan,
                          const std::vector<ChunkParts>& parts) {
  std::string text;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) text += "|";
    if (parts[i].embedding) text += "E";
    text += std::string(static_cast<size_t>(parts[i].layers), 't') + std::string(static_cast<size_t>(parts[i].mtp), 'm');
    if (parts[i].head) text += "L";
  }
  PlanSpec by_default = plan;
  by_default.pipeline_layout.clear();
  if (strategies::CheckLayout(model, by_default)) return text;
  const std::vector<ChunkParts> default_parts = PathParts(model, by_default);
  bool same = default_parts.size() == parts.size();
  for (size_t i = 0; same && i < parts.size(); ++i) {
    same = default_parts[i].embedding == parts[i].embedding &&
           default_parts[i].head == parts[i].head && default_parts[i].layers == parts[i].layers && default_parts[i].mtp == parts[i].mtp;
  }
  return same ? "" : text;
}

int64_t Microbatches(const PlanSpec& plan) { return DerivePlanShape(plan).num_microbatches; }

}  // namespace shardsim::planner
