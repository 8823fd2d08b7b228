#!/usr/bin/env bash
# Ring attention's communication overlap on this machine: a block-size sweep (tokens per rank,
# S/c) on 2 ranks, one per core, printing per block and pass the compute and transfer time of one
# ring step, the hidden fraction (compute alone + transfers alone - both, over transfers alone)
# and the measured and predicted pass times, then the crossover block size, measured and by the
# Ring Attention formula from the rates measured in the same run. Blocks 512, 2048 and 4096 are
# S = 1024, 4096 and 8192. Run it on an otherwise idle machine: the script prints the load first.
# Usage: bench/ring_overlap.sh [build-dir]
#   env: RANKS (2), HEADS (8), KV_HEADS (HEADS), HEAD_DIM (64), LAYOUT (zigzag), REPEATS (3),
#        BLOCKS (32,64,...,4096), CAUSAL (1), JSON=FILE (write the JSON report there instead)
set -euo pipefail
build=${1:-build}
ranks=${RANKS:-2}
heads=${HEADS:-8}
export OPENBLAS_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
args=(ring-attention --heads "$heads" --kv-heads "${KV_HEADS:-$heads}" --head-dim "${HEAD_DIM:-64}"
      --layout "${LAYOUT:-zigzag}" --repeats "${REPEATS:-3}" --sweep "${BLOCKS:-32,64,128,256,512,1024,2048,4096}")
[ "${CAUSAL:-1}" = 1 ] && args+=(--causal)
echo "load before: $(uptime)"
if [ -n "${JSON:-}" ]; then
  mpiexec -n "$ranks" --oversubscribe "$build/bin/shardsim-runtime" "${args[@]}" --json > "$JSON"
  echo "wrote $JSON"
else
  mpiexec -n "$ranks" --oversubscribe "$build/bin/shardsim-runtime" "${args[@]}"
fi
echo "load after: $(uptime)"
