#!/usr/bin/env bash
# The data-parallel gradient reduction overlapped with the backward or after it (the plan's
# overlap.data), on one NVIDIA GPU shared by two data-parallel ranks: examples/my-1b.model.json
# (1.24 B parameters) at sequence 4096 in bf16, two micro-batches of one sequence per rank, the
# gradients (4.9 GB of fp32 per rank) summed over MPI through host memory. Prints each run's
# per-step lines and median. Usage: scripts/gpu_overlap_bench.sh BIN_DIR OUT_DIR (BIN_DIR holds
# shardsim-runtime from `make build` where nvcc is found).
set -uo pipefail
bin=${1:?usage: scripts/gpu_overlap_bench.sh BIN_DIR OUT_DIR}
out=${2:?usage: scripts/gpu_overlap_bench.sh BIN_DIR OUT_DIR}
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for overlap in true false; do
  echo "== overlap.data=$overlap"
  /usr/bin/time -f "wall %e s" "${SHARDSIM_MPIEXEC:-mpiexec}" -n 2 --oversubscribe "$bin/shardsim-runtime" train --model examples/my-1b.model.json \
    --set seq_len=4096 --set micro_batch_size=1 --set global_batch_size=4 --set mesh.data=2 --set dtype=bf16 \
    --set overlap.data=$overlap --steps 4 --device cuda 2>&1 | tee "$out/overlap_$overlap.txt"
  echo "overlap.data=$overlap: exit $?"
done
