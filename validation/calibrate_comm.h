// The communication half of `shardsim calibrate`: point-to-point and collective cost curves
// measured with MPI over the ranks of this job, per transport (shared memory inside a host, TCP
// across hosts). Ranks fill hosts in order (what mpirun does with equal slots per host).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <vector>

#include "core/calibration.h"

namespace shardsim::validation {

// Ping-pong between world ranks `a` and `b` (half the round trip per size); other ranks wait.
// Collective over `world`; the curve is valid on every rank. Its op is "permute", group 2.
CollectiveCurve MeasurePointToPoint(MPI_Comm world, int a, int b, const std::vector<double>& sizes, double min_s);

// Every collective kind over groups of `group` ranks, measured with all groups of the world
// running at once: consecutive ranks (`stride` 1) or every `stride`-th rank (one per host).
// Seconds are the slowest rank's mean. Collective over `world`.
std::vector<CollectiveCurve> MeasureCollectives(MPI_Comm world, int group, int stride, const std::vector<double>& sizes, double min_s);

// The share of a non-blocking collective's time that compute issued after it hides, over groups
// of `group` consecutive ranks all at once: for an all-gather, a reduce-scatter and an all-reduce
// of `bytes` (the runtime's calls), (alone + compute alone - both) / alone with matrix products
// taking about as long as the collective, clamped to [0, 1]; the median of the three. Collective
// over `world`, whose size `group` divides.
double MeasureCollectiveHidden(MPI_Comm world, int group, double bytes, double min_s);

}  // namespace shardsim::validation
