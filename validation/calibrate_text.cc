#include "validation/calibrate_text.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <utility>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/stats.h"
#include "core/units.h"

namespace shardsim::validation {
namespace {

using nlohmann::json;

double MaxOf(const std::vector<double>& v) { return v.empty() ? 0 : *std::max_element(v.begin(), v.end()); }

std::string SpreadText(const std::vector<double>& v) {
  return "spread over repeats: median " + FormatPercent(UpperMedian(v)) + ", max " + FormatPercent(MaxOf(v));
}

// The summary's sections: their JSON key and the name the text's lines give them, in that order.
constexpr std::pair<const char*, const char*> kSections[] = {{"gemm", "sgemm"}, {"kernels", "kernels"}, {"triad", "memory"}, {"p2p", "point to point"},
                                                             {"collectives", "collectives"}};

// A section's median spread over repeats (the triad's own; 0 for a section with no figure).
double SectionMedian(const SpreadSummary& s, const std::string& key) {
  if (key == "triad") return s.triad;
  const std::vector<double>& v = key == "gemm" ? s.gemm : key == "kernels" ? s.kernels : key == "p2p" ? s.p2p : s.collectives;
  return v.empty() ? 0 : UpperMedian(v);
}

json SpreadJson(const std::vector<double>& v) { return {{"median", UpperMedian(v)}, {"max", MaxOf(v)}, {"figures", v.size()}}; }

}  // namespace

double SpreadSummary::Largest() const {
  return std::max({MaxOf(gemm), MaxOf(kernels), MaxOf(p2p), MaxOf(collectives), triad});
}

std::map<std::string, double> SpreadSummary::Noisy() const {
  std::map<std::string, double> noisy;
  for (const auto& [key, name] : kSections) {
    const double median = SectionMedian(*this, key);
    if (median > kNoisySpread) noisy[key] = median;
  }
  return noisy;
}

std::string CalibrationSummaryText(const ClusterSpec& c, const SpreadSummary& s, const std::string& out, double seconds) {
  const CalibrationSpec& cal = c.calibration;
  std::ostringstream o;
  o << "Calibrated " << cal.hosts << (cal.hosts == 1 ? " host" : " hosts") << " x " << cal.cores_per_host << " cores (" << cal.processor << "; "
    << cal.blas << ") in " << FormatSeconds(seconds) << "; wrote " << out << "\n";
  const GemmTable& g = cal.gemm;
  const auto [lo, hi] = std::minmax_element(g.flop_per_s.begin(), g.flop_per_s.end());
  o << "  sgemm        " << g.m.size() << "x" << g.n.size() << "x" << g.k.size() << " shapes, " << g.m.front() << " to " << g.m.back() << " per side: "
    << FormatSI(*lo, "FLOP/s") << " to " << FormatSI(*hi, "FLOP/s") << " per core; " << SpreadText(s.gemm) << "\n";
  o << "  kernels      " << cal.kernels.size() << " of the runtime's, at " << cal.kernels.begin()->second.points.size() << " sizes";
  for (const char* name : {"attention", "attention_grad", "mlp_norm"}) {
    const auto k = cal.kernels.find(name);
    if (k == cal.kernels.end()) continue;
    const RatePoint& p = k->second.points[k->second.points.size() / 2];
    o << "; " << name << " " << FormatSI(p.rate, k->second.per_flop ? "FLOP/s" : "B/s") << " at " << p.tokens << " tokens";
  }
  o << "; " << SpreadText(s.kernels) << "\n";
  o << "  memory       triad " << FormatSI(c.chip.hbm_bandwidth_bytes_per_s, "B/s") << " per core with every core at once; spread over repeats "
    << FormatPercent(s.triad) << "\n";
  for (const auto& [name, link] : c.links) {
    o << "  " << name << (name == "shm" ? "          " : "          ") << "latency " << FormatSeconds(link.latency_s) << ", bandwidth "
      << FormatSI(link.bandwidth_bytes_per_s, "B/s") << " (" << link.source << ")\n";
  }
  if (!s.p2p.empty()) o << "               point to point " << SpreadText(s.p2p) << "\n";
  for (const CollectiveCurve& curve : cal.collectives) {
    if (curve.op != "all-reduce") continue;
    o << "  all-reduce   " << curve.group << " ranks over " << curve.link << ":";
    for (const CurvePoint& p : curve.points) {
      if (p.bytes == 65536 || p.bytes == 4194304 || p.bytes == curve.points.back().bytes) o << " " << FormatBinaryBytes(p.bytes) << " " << FormatSeconds(p.seconds);
    }
    o << "\n";
  }
  o << "  collectives  " << cal.collectives.size() << " curves (all-reduce, all-gather, reduce-scatter, all-to-all per group; point to point); "
    << SpreadText(s.collectives) << "\n";
  if (cal.collective_hidden >= 0) {
    o << "  overlap      compute hides " << FormatPercent(cal.collective_hidden)
      << " of a non-blocking 4 MiB collective's time (the median over all-gather, reduce-scatter, all-reduce): "
      << (CollectivesOverlapCompute(cal) ? "predictions overlap collectives with compute where the plan does"
                                         : "predictions run collectives as blocking (at most half hides; point to point keeps its overlap)")
      << "\n";
  }
  const std::map<std::string, double> noisy = s.Noisy();
  if (!noisy.empty()) {
    std::string list;
    for (const auto& [key, name] : kSections) {
      if (noisy.count(key) > 0) list += (list.empty() ? "" : ", ") + std::string(name) + " " + FormatPercent(noisy.at(key));
    }
    double load[1] = {0};
    const bool known = getloadavg(load, 1) == 1;
    char busy[96] = "";
    if (known) std::snprintf(busy, sizeof busy, " (load average %.1f over the last minute on %d cores)", load[0], static_cast<int>(cal.cores_per_host));
    o << "  warning      the repeats disagree: median spread " << list << ", above " << FormatPercent(kNoisySpread)
      << "; the machine was likely busy" << busy << ": calibrate again when it is idle, or with more --repeats\n";
  }
  o << "Use it: shardsim estimate --cluster " << out << " --model tiny-dense --set dtype=fp32 ...; shardsim validate --cluster " << out << " ...\n";
  return o.str();
}

json CalibrationSummaryJson(const ClusterSpec& c, const SpreadSummary& s, const std::string& out, double seconds) {
  return {{"out", out},
          {"seconds", seconds},
          {"devices", DeviceCount(c)},
          {"hosts", c.calibration.hosts},
          {"peak_flop_per_s", c.chip.peak_flop_per_s.at("fp32")},
          {"memory_bytes_per_s", c.chip.hbm_bandwidth_bytes_per_s},
          {"links", {{"shm", {{"latency_s", c.links.at("shm").latency_s}, {"bandwidth_bytes_per_s", c.links.at("shm").bandwidth_bytes_per_s}}}}},
          {"spread",
           {{"gemm", SpreadJson(s.gemm)},
            {"kernels", SpreadJson(s.kernels)},
            {"triad", s.triad},
            {"p2p", SpreadJson(s.p2p)},
            {"collectives", SpreadJson(s.collectives)},
            {"largest", s.Largest()},
            {"noisy", s.Noisy()}}},
          {"collective_hidden", c.calibration.collective_hidden},
          {"kernels", c.calibration.kernels.size()},
          {"curves", c.calibration.collectives.size()}};
}

}  // namespace shardsim::validation
