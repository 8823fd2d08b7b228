// The compute half of `shardsim calibrate`, run on every rank at once (as training keeps every
// core busy): sgemm throughput over a grid of shapes, each runtime kernel's rate from a traced
// single-rank training step of the tiny models at several sequence lengths, and the memory
// bandwidth one core gets (a STREAM-style triad).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/calibration.h"

namespace shardsim::validation {

// The sizes measured on each GEMM axis (m, n and k alike).
std::vector<int64_t> GemmGridSizes();

// This rank's sgemm FLOP/s over the grid (GemmTable layout). Each shape runs until `min_s`
// seconds have passed (at least twice); the median repetition counts.
GemmTable MeasureGemm(double min_s);

// Kernel rates of the runtime's non-matmul ops, by op name: one traced step of each tiny model
// (tiny-dense, tiny-moe) on this rank alone at each of `seq_lens`, each op's FLOPs (attention) or
// bytes (the rest) as the step program counts them over the time its spans took.
std::map<std::string, KernelRate> MeasureKernels(const std::vector<int64_t>& seq_lens);

// Bytes per second of a triad a = b + s c over arrays far larger than the caches (3 arrays of
// `elements` floats, 3 x 4 bytes per element counted).
double MeasureTriad(int64_t elements, double min_s);

}  // namespace shardsim::validation
