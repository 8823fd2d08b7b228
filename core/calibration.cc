#include "core/calibration.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace shardsim {
namespace {

// The cell of `x` on an increasing axis and the weight of its upper end, in log2 (clamped).
std::pair<size_t, double> Cell(const std::vector<int64_t>& axis, double x) {
  if (axis.size() == 1 || x <= static_cast<double>(axis.front())) return {0, 0.0};
  if (x >= static_cast<double>(axis.back())) return {axis.size() - 2, 1.0};
  size_t i = static_cast<size_t>(std::upper_bound(axis.begin(), axis.end(), static_cast<int64_t>(x)) - axis.begin()) - 1;
  i = std::min(i, axis.size() - 2);
  const double lo = std::log2(static_cast<double>(axis[i])), hi = std::log2(static_cast<double>(axis[i + 1]));
  return {i, (std::log2(x) - lo) / (hi - lo)};
}

void CheckIncreasing(const std::vector<int64_t>& axis, const std::string& where) {
  if (axis.empty()) throw InputError(where, "is empty", "one size or more, increasing");
  for (size_t i = 0; i < axis.size(); ++i) {
    if (axis[i] < 1 || (i > 0 && axis[i] <= axis[i - 1])) throw InputError(where, "is not increasing positive sizes", "e.g. [32, 128, 512]");
  }
}

}  // namespace

double GemmFlopPerS(const CalibrationSpec& calibration, int64_t m, int64_t n, int64_t k) {
  const GemmTable& g = calibration.gemm;
  SHARDSIM_CHECK(!g.empty(), "GemmFlopPerS without a GEMM table");
  const auto [im, wm] = Cell(g.m, static_cast<double>(std::max<int64_t>(m, 1)));
  const auto [in, wn] = Cell(g.n, static_cast<double>(std::max<int64_t>(n, 1)));
  const auto [ik, wk] = Cell(g.k, static_cast<double>(std::max<int64_t>(k, 1)));
  double rate = 0;
  for (int a = 0; a < 2; ++a) {
    for (int b = 0; b < 2; ++b) {
      for (int c = 0; c < 2; ++c) {
        const double w = (a ? wm : 1 - wm) * (b ? wn : 1 - wn) * (c ? wk : 1 - wk);
        if (w == 0) continue;
        rate += w * g.At(std::min(im + a, g.m.size() - 1), std::min(in + b, g.n.size() - 1), std::min(ik + c, g.k.size() - 1));
      }
    }
  }
  return rate;
}

double KernelRateAt(const KernelRate& kernel, double tokens) {
  const std::vector<RatePoint>& p = kernel.points;
  SHARDSIM_CHECK(!p.empty(), "a kernel rate without points");
  if (tokens <= p.front().tokens) return p.front().rate;
  if (tokens >= p.back().tokens) return p.back().rate;
  size_t i = 1;
  while (p[i].tokens < tokens) ++i;
  const double w = std::log2(tokens / p[i - 1].tokens) / std::log2(p[i].tokens / p[i - 1].tokens);
  return p[i - 1].rate + w * (p[i].rate - p[i - 1].rate);
}

double CurveSeconds(const CollectiveCurve& curve, double bytes) {
  const std::vector<CurvePoint>& p = curve.points;
  SHARDSIM_CHECK(!p.empty(), "a collective curve without points");
  if (bytes <= p.front().bytes || p.size() == 1) return p.front().seconds * std::max(1.0, bytes / std::max(p.front().bytes, 1.0));
  size_t i = 1;
  while (i + 1 < p.size() && p[i].bytes < bytes) ++i;
  const double slope = (p[i].seconds - p[i - 1].seconds) / (p[i].bytes - p[i - 1].bytes);
  return std::max(p[i - 1].seconds + slope * (bytes - p[i - 1].bytes), p.front().seconds);
}

bool CollectivesOverlapCompute(const CalibrationSpec& calibration) {
  return calibration.collective_hidden < 0 || calibration.collective_hidden > 0.5;
}

const CollectiveCurve* FindCurve(const CalibrationSpec& calibration, const std::string& op, int64_t group, const std::string& link) {
  for (const CollectiveCurve& c : calibration.collectives) {
    if (c.op == op && c.group == group && c.link == link) return &c;
  }
  return nullptr;
}

void ValidateCalibration(const CalibrationSpec& c, const std::string& where) {
  if (c.empty()) return;
  if (!c.gemm.empty()) {
    CheckIncreasing(c.gemm.m, where + "/gemm/m");
    CheckIncreasing(c.gemm.n, where + "/gemm/n");
    CheckIncreasing(c.gemm.k, where + "/gemm/k");
    if (c.gemm.flop_per_s.size() != c.gemm.m.size() * c.gemm.n.size() * c.gemm.k.size()) {
      throw InputError(where + "/gemm/flop_per_s", "does not cover the grid", "one rate per (m, n, k), m outermost");
    }
  }
  for (double r : c.gemm.flop_per_s) {
    if (!(r > 0) || !std::isfinite(r)) throw InputError(where + "/gemm/flop_per_s", "has a rate that is not positive", "FLOP/s > 0");
  }
  for (const auto& [name, k] : c.kernels) {
    const std::string at = where + "/kernels/" + name;
    if (k.points.empty()) throw InputError(at, "has no points", "[[tokens, rate], ...]");
    for (size_t i = 0; i < k.points.size(); ++i) {
      if (!(k.points[i].rate > 0) || !(k.points[i].tokens >= 1) || (i > 0 && k.points[i].tokens <= k.points[i - 1].tokens)) {
        throw InputError(at, "points are not increasing tokens with positive rates", "[[tokens, rate], ...]");
      }
    }
  }
  for (const CollectiveCurve& curve : c.collectives) {
    const std::string at = where + "/collectives/" + curve.op + "/" + std::to_string(curve.group);
    if (curve.group < 2 || curve.points.empty()) throw InputError(at, "needs a group of 2 or more and points", "[[bytes, seconds], ...]");
    for (size_t i = 0; i < curve.points.size(); ++i) {
      const CurvePoint& p = curve.points[i];
      if (!(p.seconds > 0) || !(p.bytes > 0) || (i > 0 && p.bytes <= curve.points[i - 1].bytes)) {
        throw InputError(at, "points are not increasing sizes with positive times", "[[bytes, seconds], ...]");
      }
    }
  }
}

}  // namespace shardsim
