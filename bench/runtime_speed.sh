#!/usr/bin/env bash
# The runtime's single-rank speed against this machine's single-core sgemm: model FLOP/s of
# tiny-dense at sequence 512 (8 sequences a step in one micro-batch, 5 steps, median) over sgemm
# FLOP/s at n=1024. Run it on an idle machine: both are single-core rates.
# Usage: bench/runtime_speed.sh [build-dir]
set -euo pipefail
build=${1:-build}
export OPENBLAS_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
plan=$(mktemp --suffix=.json)
trap 'rm -f "$plan"' EXIT
printf '{"mesh": {"data": 1}, "global_batch_size": 8, "seq_len": 512, "micro_batch_size": %d}\n' "${MBS:-8}" > "$plan"
model=$(mpiexec -n 1 "$build/bin/shardsim-runtime" train --model tiny-dense --plan "$plan" --steps 5 --json |
        grep '"model_flop_per_s"' | sed 's/.*: *\([0-9.eE+-]*\).*/\1/')
sgemm=$("$build/bin/kernels_bench" --benchmark_filter='BM_Sgemm/1024' --benchmark_format=csv 2>/dev/null |
        tail -1 | awk -F, '{print $NF}')
awk -v m="$model" -v s="$sgemm" 'BEGIN { printf "tiny-dense, seq 512, 1 rank: %.1f GFLOP/s of model FLOPs; sgemm n=1024 one core: %.1f GFLOP/s; ratio %.0f%% (target >= 50%%)\n", m / 1e9, s / 1e9, 100 * m / s }'
