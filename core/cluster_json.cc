#include "core/cluster_json.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "core/calibration_json.h"
#include "core/json_input.h"
#include "core/plan_spec.h"

namespace shardsim {
namespace {

using nlohmann::json;

constexpr double kMaxRate = 1e21;  // FLOP/s or bytes/s: a zettascale chip is a typo
constexpr int64_t kMaxCount = int64_t{1} << 24;

const std::vector<std::string>& LinkClasses() {
  static const std::vector<std::string> kClasses = {"ici", "dcn", "nvlink", "infiniband", "shm", "tcp", "host"};
  return kClasses;
}

json ChipToJson(const ChipSpec& c) {
  json j = {{"name", c.name},
            {"peak_flop_per_s", c.peak_flop_per_s},
            {"hbm_bytes", c.hbm_bytes},
            {"hbm_bandwidth_bytes_per_s", c.hbm_bandwidth_bytes_per_s},
            {"matmul_tile", c.matmul_tile},
            {"compute_units", c.compute_units},
            {"microscaling", c.microscaling},
            {"source", c.source}};
  if (c.fp8_any_layout) j["fp8_any_layout"] = true;
  const CollectiveUnits& u = c.collective_units;
  if (u != CollectiveUnits{}) {
    j["collective_units"] = {{"in_node", u.in_node}, {"across_nodes", u.across_nodes}, {"nvls", u.nvls}, {"source", u.source}};
  }
  return j;
}

json TopologyToJson(const TopologySpec& t) {
  json j = {{"kind", ToString(t.kind)}};
  switch (t.kind) {
    case TopologyKind::kTorus:
      j["dims"] = t.torus_dims;
      j["wraparound"] = t.wraparound;
      j["slices"] = t.slices;
      break;
    case TopologyKind::kSwitched:
      j["devices_per_node"] = t.devices_per_node;
      j["nodes"] = t.nodes;
      j["fabric"] = t.fabric;
      j["oversubscription"] = t.oversubscription;
      j["leaf_ports"] = t.leaf_ports;
      j["nvls"] = t.nvls;
      j["sharp"] = t.sharp;
      break;
    case TopologyKind::kLocal:
      j["local_devices"] = t.local_devices;
      j["local_hosts"] = t.local_hosts;
      break;
  }
  if (t.host_bytes_per_device > 0) j["host_bytes_per_device"] = t.host_bytes_per_device;
  j["source"] = t.source;
  return j;
}

TopologySpec TopologyFromJson(JsonReader& r) {
  TopologySpec t;
  const std::string kind = r.Enum("kind", {"torus", "switched", "local"});
  if (kind == "torus") {
    t.kind = TopologyKind::kTorus;
    t.torus_dims = r.IntList("dims", 1, kMaxCount);
    if (r.Has("wraparound")) {
      const json& wrap = r.Raw("wraparound");
      if (!wrap.is_array()) r.Fail("wraparound", "expected an array of booleans");
      for (size_t i = 0; i < wrap.size(); ++i) {
        if (!wrap[i].is_boolean()) r.Fail("wraparound/" + std::to_string(i), "expected true or false");
        t.wraparound.push_back(wrap[i].get<bool>());
      }
    } else {
      t.wraparound.assign(t.torus_dims.size(), true);
    }
    t.slices = r.IntOr("slices", 1, 1, kMaxCount);
  } else if (kind == "switched") {
    t.kind = TopologyKind::kSwitched;
    t.devices_per_node = r.Int("devices_per_node", 1, kMaxCount);
    t.nodes = r.Int("nodes", 1, kMaxCount);
    t.fabric = r.EnumOr("fabric", "fat-tree", {"fat-tree", "rail-optimized"});
    t.oversubscription = r.NumberOr("oversubscription", 1, 1, 1024);
    t.leaf_ports = r.IntOr("leaf_ports", 32, 1, 4096);
    t.nvls = r.BoolOr("nvls", false);
    t.sharp = r.BoolOr("sharp", false);
  } else {
    t.kind = TopologyKind::kLocal;
    t.local_devices = r.Int("local_devices", 1, kMaxCount);
    t.local_hosts = r.IntOr("local_hosts", 1, 1, kMaxCount);
  }
  t.host_bytes_per_device = r.IntOr("host_bytes_per_device", 0, 0, int64_t{1} << 50);
  t.source = r.StringOr("source", "");
  return t;
}

}  // namespace

ChipSpec ChipFromJson(JsonReader& r) {
  ChipSpec c;
  c.name = r.String("name");
  auto peaks = r.Object("peak_flop_per_s");
  if (!peaks) r.Fail("peak_flop_per_s", "missing required key 'peak_flop_per_s'", "an object such as {\"bf16\": 9.894e14}");
  const json& raw = r.Raw("peak_flop_per_s");
  for (const auto& item : raw.items()) c.peak_flop_per_s[item.key()] = peaks->Number(item.key(), 1, kMaxRate);
  if (c.peak_flop_per_s.empty()) r.Fail("peak_flop_per_s", "no peak given", "an object such as {\"bf16\": 9.894e14}");
  c.hbm_bytes = r.Int("hbm_bytes", 1, int64_t{1} << 50);
  c.hbm_bandwidth_bytes_per_s = r.Number("hbm_bandwidth_bytes_per_s", 1, kMaxRate);
  c.matmul_tile = r.IntOr("matmul_tile", 0, 0, 4096);
  c.compute_units = r.IntOr("compute_units", 0, 0, 1 << 20);
  c.microscaling = r.BoolOr("microscaling", false);
  c.fp8_any_layout = r.BoolOr("fp8_any_layout", false);
  if (auto units = r.Object("collective_units")) {
    if (c.compute_units == 0) {
      r.Fail("collective_units", "collective_units without compute_units", "a chip that gives compute_units (its SM count)",
             "add compute_units, or drop collective_units");
    }
    const int64_t most = c.compute_units - 1;  // some units must stay for compute
    c.collective_units.in_node = units->IntOr("in_node", 0, 0, most);
    c.collective_units.across_nodes = units->IntOr("across_nodes", 0, 0, most);
    c.collective_units.nvls = units->IntOr("nvls", 0, 0, most);
    c.collective_units.source = units->StringOr("source", "");
    units->Finish();
  }
  c.source = r.StringOr("source", "");
  return c;
}

std::map<std::string, LinkSpec> LinksFromJson(JsonReader& r) {
  std::map<std::string, LinkSpec> links;
  const json& raw = r.Raw("links");
  auto classes = r.Object("links");
  for (const auto& item : raw.items()) {
    const std::string& name = item.key();
    (void)classes->Has(name);  // known key if it is a valid class; checked below
    bool valid = false;
    for (const std::string& c : LinkClasses()) valid = valid || c == name;
    if (!valid) classes->Fail(name, "unknown link class '" + name + "'", "ici, dcn, nvlink, infiniband, shm, tcp, host");
    auto link = classes->Object(name);
    if (!link) classes->Fail(name, "expected an object, got null", "{\"bandwidth_bytes_per_s\": ..., \"latency_s\": ..., \"links_per_device\": ..., \"efficiency\": ...}");
    JsonReader& l = *link;
    LinkSpec s;
    s.bandwidth_bytes_per_s = l.Number("bandwidth_bytes_per_s", 1, kMaxRate);
    s.latency_s = l.Number("latency_s", 0, 1);
    s.links_per_device = l.Int("links_per_device", 1, 1024);
    s.efficiency = l.Number("efficiency", 1e-3, 1);
    s.source = l.StringOr("source", "");
    l.Finish();
    links[name] = s;
  }
  return links;
}

EfficiencySpec EfficiencyFromJson(JsonReader& r) {
  EfficiencySpec e;
  auto eff = r.Object("efficiency");
  if (!eff) r.Fail("efficiency", "missing required key 'efficiency'", "{\"matmul\": 0.8, \"hbm\": 0.85, \"source\": \"...\"}");
  e.matmul = eff->Number("matmul", 1e-3, 1);
  e.hbm = eff->Number("hbm", 1e-3, 1);
  e.attention = eff->NumberOr("attention", 0, 0, 1);
  e.fp8_matmul = eff->NumberOr("fp8_matmul", 0, 0, 1);
  e.backward = eff->NumberOr("backward", 1, 1e-3, 1);
  if (auto recipes = eff->Object("fp8_matmul_recipes")) {
    // Per-tensor scaling's figure is fp8_matmul itself: the other recipes only.
    for (const std::string& recipe : Fp8RecipeNames()) {
      if (recipe != "tensorwise" && recipes->Has(recipe)) e.fp8_matmul_recipes[recipe] = recipes->Number(recipe, 1e-3, 1);
    }
    recipes->Finish();
  }
  if (auto kernels = eff->Object("attention_kernels")) {
    // flash's figure is `attention` itself: the other kernels only.
    if (kernels->Has("flash")) {
      kernels->Fail("flash", "flash's figure is efficiency.attention itself", "triton or flex (a share of the 16-bit peak in (0, 1])",
                    "move it to efficiency.attention");
    }
    for (const std::string& kernel : AttentionKernelNames()) {
      if (kernel != "flash" && kernels->Has(kernel)) e.attention_kernels[kernel] = kernels->Number(kernel, 1e-3, 1);
    }
    kernels->Finish();
  }
  e.source = eff->StringOr("source", "");
  eff->Finish();
  return e;
}

json EfficiencyToJson(const EfficiencySpec& e) {
  json j = {{"matmul", e.matmul}, {"hbm", e.hbm}};
  if (e.attention > 0) j["attention"] = e.attention;
  if (e.fp8_matmul > 0) j["fp8_matmul"] = e.fp8_matmul;
  if (!e.fp8_matmul_recipes.empty()) j["fp8_matmul_recipes"] = e.fp8_matmul_recipes;
  if (!e.attention_kernels.empty()) j["attention_kernels"] = e.attention_kernels;
  if (e.backward != 1) j["backward"] = e.backward;
  j["source"] = e.source;
  return j;
}

json ClusterToJson(const ClusterSpec& c) {
  json links = json::object();
  for (const auto& [name, l] : c.links) {
    links[name] = {{"bandwidth_bytes_per_s", l.bandwidth_bytes_per_s},
                   {"latency_s", l.latency_s},
                   {"links_per_device", l.links_per_device},
                   {"efficiency", l.efficiency},
                   {"source", l.source}};
  }
  json j = {{"name", c.name},
            {"system", c.system},
            {"chip", ChipToJson(c.chip)},
            {"topology", TopologyToJson(c.topology)},
            {"links", links},
            {"efficiency", EfficiencyToJson(c.efficiency)}};
  if (!c.calibration.empty()) j["calibration"] = CalibrationToJson(c.calibration);
  return j;
}

ClusterSpec ClusterFromJson(const json& value, const std::string& where) {
  JsonReader r(value, where);
  r.SetFieldDocs("shardsim describe --cluster dgx-h100:8 --write-cluster F writes a cluster JSON to compare with");
  ClusterSpec c;
  c.name = r.StringOr("name", where);
  c.system = r.StringOr("system", "custom");
  auto chip = r.Object("chip");
  if (!chip) {
    // A model JSON or a Hugging Face config.json given where a cluster goes.
    const bool model = value.is_object() && (value.contains("num_layers") || value.contains("num_hidden_layers"));
    r.Fail("chip", model ? "missing required key 'chip': this is a model file, not a cluster" : "missing required key 'chip'",
           "a cluster JSON: name, system, chip, topology, links, efficiency", "shardsim describe --cluster dgx-h100:8 --write-cluster F writes one to start from");
  }
  c.chip = ChipFromJson(*chip);
  chip->Finish();
  auto topology = r.Object("topology");
  if (!topology) r.Fail("topology", "missing required key 'topology'", "{\"kind\": \"torus\" | \"switched\" | \"local\", ...}");
  c.topology = TopologyFromJson(*topology);
  topology->Finish();
  if (!r.Has("links")) r.Fail("links", "missing required key 'links'");
  c.links = LinksFromJson(r);
  c.efficiency = EfficiencyFromJson(r);
  if (auto calibration = r.Object("calibration")) c.calibration = CalibrationFromJson(*calibration);
  r.Finish();
  ValidateCluster(c, where + ":");
  return c;
}

}  // namespace shardsim
