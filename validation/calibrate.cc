#include "validation/calibrate.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/cluster_json.h"
#include "core/error.h"
#include "core/inputs.h"
#include "core/output_file.h"
#include "core/stats.h"
#include "runtime/gemm.h"
#include "validation/calibrate_comm.h"
#include "validation/calibrate_compute.h"
#include "validation/calibrate_text.h"

namespace shardsim::validation {
namespace {

// One whole measurement, identical on every rank (compute figures: the slowest rank's).
struct Measurement {
  GemmTable gemm;
  std::map<std::string, KernelRate> kernels;
  double triad_bytes_per_s = 0;
  CollectiveCurve shm_p2p, tcp_p2p;  // tcp: empty over one host
  std::vector<CollectiveCurve> collectives;
  double collective_hidden = -1;  // one rank: not measured
};


// The lowest over ranks of each element of `values` (the same length on every rank): each the
// slowest rank's rate on that figure. A synchronous step goes at its slowest rank's pace (the
// others wait for it in every collective), and the cores of one machine need not be equally fast:
// on this project's 2-core machines the second core ran the same training ops 3-6% (matrix
// products) to 25% (memory-bound ops) slower than the first, step after step.
std::vector<double> SlowestOverRanks(const std::vector<double>& values) {
  std::vector<double> out(values.size());
  MPI_Allreduce(values.data(), out.data(), static_cast<int>(values.size()), MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
  return out;
}

Measurement MeasureOnce(int64_t hosts) {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int per_host = static_cast<int>(size / hosts);
  Measurement m;
  MPI_Barrier(MPI_COMM_WORLD);
  m.gemm = MeasureGemm(0.01);
  m.gemm.flop_per_s = SlowestOverRanks(m.gemm.flop_per_s);
  MPI_Barrier(MPI_COMM_WORLD);
  m.kernels = MeasureKernels({64, 256, 1024});
  std::vector<double> flat;
  for (const auto& [name, k] : m.kernels) {
    for (const RatePoint& p : k.points) flat.push_back(p.rate);
  }
  flat = SlowestOverRanks(flat);
  size_t i = 0;
  for (auto& [name, k] : m.kernels) {
    for (RatePoint& p : k.points) p.rate = flat[i++];
  }
  MPI_Barrier(MPI_COMM_WORLD);
  m.triad_bytes_per_s = SlowestOverRanks({MeasureTriad(int64_t{1} << 22, 0.05)})[0];
  const std::vector<double> p2p_sizes = {8, 64, 512, 4096, 32768, 262144, 2097152, 16777216};
  const std::vector<double> sizes = {4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864};
  // Across hosts up to 16 MiB (a 64 MiB collective over a 1 Gbit/s link takes seconds a call, and
  // past its last point a curve goes on at its last segment's bandwidth: CurveSeconds), at every
  // power of two from 64 KiB: TCP's cost is not linear between the shared-memory grid's points
  // (two namespaced hosts at 1 Gbit/s took 2x the slope of their neighbours at 1 MiB, so a 512 KiB
  // all-to-all interpolated between 256 KiB and 1 MiB came out 35% over its measured time).
  std::vector<double> tcp_sizes = {4096, 16384};
  for (double bytes = 65536; bytes <= 16777216; bytes *= 2) tcp_sizes.push_back(bytes);
  if (per_host >= 2) m.shm_p2p = MeasurePointToPoint(MPI_COMM_WORLD, 0, 1, p2p_sizes, 0.02);
  if (hosts >= 2) {
    m.tcp_p2p = MeasurePointToPoint(MPI_COMM_WORLD, 0, per_host, p2p_sizes, 0.02);
    m.tcp_p2p.link = "tcp";
  }
  // Inside a host: consecutive groups dividing the host's cores. Across hosts: one rank per
  // host (every group at once), and the whole job.
  auto add = [&m](std::vector<CollectiveCurve> curves, const char* link) {
    for (CollectiveCurve& c : curves) {
      c.link = link;
      m.collectives.push_back(std::move(c));
    }
  };
  for (int g = 2; g <= per_host; ++g) {
    if (per_host % g == 0) add(MeasureCollectives(MPI_COMM_WORLD, g, 1, sizes, 0.02), "shm");
  }
  for (int g = 2; g <= hosts; ++g) {
    if (hosts % g == 0) add(MeasureCollectives(MPI_COMM_WORLD, g, per_host, tcp_sizes, 0.02), "tcp");
  }
  if (hosts >= 2 && per_host >= 2) add(MeasureCollectives(MPI_COMM_WORLD, size, 1, tcp_sizes, 0.02), "tcp");
  // Overlap: groups of a host's ranks (one host's cores busy computing), or the whole job.
  if (size >= 2) m.collective_hidden = MeasureCollectiveHidden(MPI_COMM_WORLD, per_host >= 2 ? per_host : size, 4.0 * (1 << 20), 0.02);
  return m;
}

// Each figure: the median over repeats; the spread: (max - min) / median.
struct Folded {
  Measurement median;
  SpreadSummary spread;
};

double Spread(const std::vector<double>& v) {
  const double med = UpperMedian(v);
  return med > 0 ? (*std::max_element(v.begin(), v.end()) - *std::min_element(v.begin(), v.end())) / med : 0;
}

// Folds repeated measurements: applies `get` to each, sets the median into `into`.
template <typename Get>
double Fold(std::vector<Measurement>& runs, Measurement& into, Get get) {
  std::vector<double> values;
  for (Measurement& r : runs) values.push_back(*get(r));
  *get(into) = UpperMedian(values);
  return Spread(values);
}

Folded FoldRuns(std::vector<Measurement> runs) {
  Folded f;
  f.median = runs.front();
  Measurement& m = f.median;
  for (size_t i = 0; i < m.gemm.flop_per_s.size(); ++i) {
    f.spread.gemm.push_back(Fold(runs, m, [i](Measurement& r) { return &r.gemm.flop_per_s[i]; }));
  }
  for (auto& [name, k] : m.kernels) {
    for (size_t i = 0; i < k.points.size(); ++i) {
      const std::string key = name;
      f.spread.kernels.push_back(Fold(runs, m, [&key, i](Measurement& r) { return &r.kernels.at(key).points[i].rate; }));
    }
  }
  f.spread.triad = Fold(runs, m, [](Measurement& r) { return &r.triad_bytes_per_s; });
  for (size_t i = 0; i < m.shm_p2p.points.size(); ++i) f.spread.p2p.push_back(Fold(runs, m, [i](Measurement& r) { return &r.shm_p2p.points[i].seconds; }));
  for (size_t i = 0; i < m.tcp_p2p.points.size(); ++i) f.spread.p2p.push_back(Fold(runs, m, [i](Measurement& r) { return &r.tcp_p2p.points[i].seconds; }));
  for (size_t c = 0; c < m.collectives.size(); ++c) {
    for (size_t i = 0; i < m.collectives[c].points.size(); ++i) {
      f.spread.collectives.push_back(Fold(runs, m, [c, i](Measurement& r) { return &r.collectives[c].points[i].seconds; }));
    }
  }
  // A share near zero: its median only (a spread relative to it would mean nothing).
  Fold(runs, m, [](Measurement& r) { return &r.collective_hidden; });
  return f;
}

// Latency: the smallest message's one-way time. Bandwidth: the slope between the two largest.
LinkSpec FitLink(const CollectiveCurve& p2p, double latency_below, const std::string& source) {
  const auto& p = p2p.points;
  const CurvePoint& a = p[p.size() - 2];
  const CurvePoint& b = p.back();
  const double slope = (b.seconds - a.seconds) / (b.bytes - a.bytes);
  const double bandwidth = slope > 0 ? 1 / slope : b.bytes / b.seconds;
  return LinkSpec{bandwidth, std::max(0.0, p.front().seconds - latency_below), 1, 1.0, source};
}

std::string ProcessorName() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  }
  return "unknown processor";
}

int64_t MemoryPerCore(int64_t cores) {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t kib = 0;
  while (in >> key >> kib) {
    if (key == "MemTotal:") return kib * 1024 / std::max<int64_t>(1, cores);
    in.ignore(1 << 10, '\n');
  }
  return int64_t{4} << 30;
}

std::string Today() {
  const std::time_t now = std::time(nullptr);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return text;
}

ClusterSpec MakeCluster(const Folded& f, int64_t devices, int64_t hosts, int64_t repeats) {
  const Measurement& m = f.median;
  const std::string when = Today();
  const std::string how = "measured by shardsim calibrate on " + when;
  ClusterSpec c;
  c.system = "calibrated";
  c.name = "calibrated " + std::to_string(hosts) + "x" + std::to_string(devices / hosts) + " cores";
  c.chip.name = "CPU core: " + ProcessorName() + " (fp32, OpenBLAS)";
  c.chip.peak_flop_per_s["fp32"] = *std::max_element(m.gemm.flop_per_s.begin(), m.gemm.flop_per_s.end());
  c.chip.hbm_bytes = MemoryPerCore(devices / hosts);
  c.chip.hbm_bandwidth_bytes_per_s = m.triad_bytes_per_s;
  c.chip.source = how + ": peak = the best sgemm of the grid; memory = MemTotal / cores; bandwidth = a triad on every core at once";
  c.topology.kind = TopologyKind::kLocal;
  c.topology.local_devices = devices;
  c.topology.local_hosts = hosts;
  c.topology.source = "the calibration job's ranks, filling hosts in order";
  const ClusterSpec preset = LoadCluster("local:1");
  c.links["shm"] = m.shm_p2p.points.empty()
                       ? LinkSpec{preset.links.at("shm").bandwidth_bytes_per_s, preset.links.at("shm").latency_s, 1, 1.0,
                                  "not measured (one core per host): " + preset.links.at("shm").source}
                       : FitLink(m.shm_p2p, 0, how + ": MPI ping-pong, shared memory");
  if (hosts >= 2) c.links["tcp"] = FitLink(m.tcp_p2p, c.links["shm"].latency_s, how + ": MPI ping-pong across hosts, TCP");
  c.efficiency = EfficiencySpec{};
  c.efficiency.source = "rates are measured on this cluster (the calibration's tables): efficiency 1";
  CalibrationSpec& cal = c.calibration;
  cal.dtype = "fp32";
  cal.gemm = m.gemm;
  cal.kernels = m.kernels;
  cal.collectives = m.collectives;
  if (!m.shm_p2p.points.empty()) cal.collectives.push_back(m.shm_p2p);
  if (!m.tcp_p2p.points.empty()) cal.collectives.push_back(m.tcp_p2p);
  cal.processor = ProcessorName();
  cal.blas = runtime::BlasConfig();
  cal.cores_per_host = devices / hosts;
  cal.hosts = hosts;
  cal.measured_at = when;
  cal.method = "shardsim-runtime calibrate, " + std::to_string(repeats) +
               " repeats (medians): sgemm over a 4x4x4 grid of shapes; the runtime's kernels from traced one-rank steps of tiny-dense and "
               "tiny-moe at 64, 256 and 1024 tokens; a triad; MPI ping-pong and collectives (the runtime's non-blocking calls) with every group at once; the share of a collective hidden "
               "under matrix products issued after it; compute figures "
               "are the slowest rank's, all ranks measuring at once";
  cal.spread = f.spread.Largest();
  cal.collective_hidden = m.collective_hidden;
  ValidateCluster(c, "calibration");
  return c;
}

}  // namespace

int RunCalibrate(const CalibrateOptions& o) {
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (o.hosts < 1 || size % o.hosts != 0) {
    throw InputError("--hosts", std::to_string(o.hosts) + " does not divide the job's " + std::to_string(size) + " ranks",
                     "a divisor of the ranks (equal slots per host)");
  }
  if (o.repeats < 1) throw InputError("--repeats", std::to_string(o.repeats), "1 or more");
  // Rank 0 checks that it can write the result; every rank learns the answer, so all stop
  // together rather than the others waiting in a barrier for rank 0.
  std::optional<InputError> unwritable;
  if (rank == 0) {
    try {
      CheckOutputWritable(o.out, "--out");
    } catch (const InputError& e) {
      unwritable = e;
    }
  }
  int writable = unwritable ? 0 : 1;
  MPI_Bcast(&writable, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (!writable) throw unwritable ? *unwritable : InputError("--out " + o.out, "cannot be written");
  const auto start = std::chrono::steady_clock::now();
  std::vector<Measurement> runs;
  for (int64_t r = 0; r < o.repeats; ++r) runs.push_back(MeasureOnce(o.hosts));
  const Folded folded = FoldRuns(std::move(runs));
  if (rank != 0) return 0;
  const ClusterSpec cluster = MakeCluster(folded, size, o.hosts, o.repeats);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  WriteOutputFile(o.out, ClusterToJson(cluster).dump(1) + "\n", "--out");
  if (o.json) {
    std::cout << CalibrationSummaryJson(cluster, folded.spread, o.out, seconds).dump(2) << "\n";
  } else {
    std::cout << CalibrationSummaryText(cluster, folded.spread, o.out, seconds);
  }
  return 0;
}

}  // namespace shardsim::validation
