#include "core/calibration_json.h"

#include <cmath>

#include <nlohmann/json.hpp>

#include "core/json_input.h"

namespace shardsim {
namespace {

using nlohmann::json;

// [[x, y], ...] of finite numbers.
std::vector<std::pair<double, double>> Pairs(JsonReader& r, std::string_view key, const std::string& valid) {
  const json& raw = r.Raw(key);
  if (!raw.is_array()) r.Fail(key, "expected an array", valid);
  std::vector<std::pair<double, double>> out;
  for (size_t i = 0; i < raw.size(); ++i) {
    const json& p = raw[i];
    if (!p.is_array() || p.size() != 2 || !p[0].is_number() || !p[1].is_number() || !std::isfinite(p[0].get<double>()) ||
        !std::isfinite(p[1].get<double>())) {
      r.Fail(std::string(key) + "/" + std::to_string(i), "expected a pair of numbers", valid);
    }
    out.emplace_back(p[0].get<double>(), p[1].get<double>());
  }
  return out;
}

}  // namespace

json CalibrationToJson(const CalibrationSpec& c) {
  json kernels = json::object();
  for (const auto& [name, k] : c.kernels) {
    json points = json::array();
    for (const RatePoint& p : k.points) points.push_back({p.tokens, p.rate});
    kernels[name] = {{"per", k.per_flop ? "flop" : "byte"}, {"points", points}};
  }
  json curves = json::array();
  for (const CollectiveCurve& curve : c.collectives) {
    json points = json::array();
    for (const CurvePoint& p : curve.points) points.push_back({p.bytes, p.seconds});
    curves.push_back({{"op", curve.op}, {"group", curve.group}, {"link", curve.link}, {"points", points}});
  }
  return {{"dtype", c.dtype},
          {"gemm", {{"m", c.gemm.m}, {"n", c.gemm.n}, {"k", c.gemm.k}, {"flop_per_s", c.gemm.flop_per_s}}},
          {"kernels", kernels},
          {"collectives", curves},
          {"processor", c.processor},
          {"blas", c.blas},
          {"cores_per_host", c.cores_per_host},
          {"hosts", c.hosts},
          {"measured_at", c.measured_at},
          {"method", c.method},
          {"spread", c.spread},
          {"collective_hidden", c.collective_hidden}};
}

CalibrationSpec CalibrationFromJson(JsonReader& r) {
  CalibrationSpec c;
  c.dtype = r.String("dtype");
  // An empty dtype marks "no calibration" (CalibrationSpec::empty): every table would be ignored.
  if (c.dtype.empty()) r.Fail("dtype", "is empty", "the dtype the rates were measured in, e.g. \"fp32\"");
  if (auto gemm = r.Object("gemm")) {
    // A bound on each axis keeps the grid's size, their product, exact.
    constexpr size_t kMaxGridSizes = 1024;
    const auto axis = [&](const char* key) {
      std::vector<int64_t> sizes = gemm->IntList(key, 1, int64_t{1} << 30);
      if (sizes.size() > kMaxGridSizes) gemm->Fail(key, std::to_string(sizes.size()) + " sizes", "at most 1024 sizes per axis");
      return sizes;
    };
    c.gemm.m = axis("m");
    c.gemm.n = axis("n");
    c.gemm.k = axis("k");
    const json& rates = gemm->Raw("flop_per_s");
    if (!rates.is_array()) gemm->Fail("flop_per_s", "expected an array of FLOP/s", "one rate per (m, n, k), m outermost");
    for (size_t i = 0; i < rates.size(); ++i) {
      if (!rates[i].is_number()) gemm->Fail("flop_per_s/" + std::to_string(i), "expected a number", "FLOP/s > 0");
      c.gemm.flop_per_s.push_back(rates[i].get<double>());
    }
    gemm->Finish();
  }
  if (r.Has("kernels")) {
    const json& raw = r.Raw("kernels");
    auto kernels = r.Object("kernels");
    for (const auto& item : raw.items()) {
      auto k = kernels->Object(item.key());
      if (!k) kernels->Fail(item.key(), "expected an object", "{\"per\": \"flop\" | \"byte\", \"points\": [[tokens, rate], ...]}");
      KernelRate rate;
      rate.per_flop = k->Enum("per", {"flop", "byte"}) == "flop";
      for (const auto& [tokens, value] : Pairs(*k, "points", "[[tokens, rate], ...]")) rate.points.push_back({tokens, value});
      k->Finish();
      c.kernels[item.key()] = rate;
    }
    kernels->Finish();
  }
  if (r.Has("collectives")) {
    const json& raw = r.Raw("collectives");
    if (!raw.is_array()) r.Fail("collectives", "expected an array", "[{\"op\": ..., \"group\": ..., \"link\": ..., \"points\": ...}]");
    for (size_t i = 0; i < raw.size(); ++i) {
      JsonReader e(raw[i], r.Where("collectives/" + std::to_string(i)));
      CollectiveCurve curve;
      curve.op = e.Enum("op", {"all-reduce", "all-gather", "reduce-scatter", "all-to-all", "broadcast", "permute"});
      curve.group = e.Int("group", 2, int64_t{1} << 24);
      curve.link = e.Enum("link", {"shm", "tcp"});
      for (const auto& [bytes, seconds] : Pairs(e, "points", "[[bytes, seconds], ...]")) curve.points.push_back({bytes, seconds});
      e.Finish();
      c.collectives.push_back(std::move(curve));
    }
  }
  c.processor = r.StringOr("processor", "");
  c.blas = r.StringOr("blas", "");
  c.cores_per_host = r.IntOr("cores_per_host", 0, 0, int64_t{1} << 24);
  c.hosts = r.IntOr("hosts", 0, 0, int64_t{1} << 24);
  c.measured_at = r.StringOr("measured_at", "");
  c.method = r.StringOr("method", "");
  c.spread = r.NumberOr("spread", 0, 0, 1e9);
  c.collective_hidden = r.NumberOr("collective_hidden", -1, -1, 1);
  r.Finish();
  return c;
}

}  // namespace shardsim
