#!/usr/bin/env bash
# data/gpu/h200-2026-11-30-sm-share: bf16 products timed alone and beside a kernel copying device
# memory on u SMs (`shardsim-gpu sm-share`, cuda/sm_share.h), four shapes, u = 8 .. 48.
# Usage: scripts/gpu_sm_share.sh BIN_DIR OUT_DIR   (BIN_DIR holds shardsim-gpu, built where nvcc is)
set -euo pipefail
bin=${1:?usage: scripts/gpu_sm_share.sh BIN_DIR OUT_DIR}
out=${2:?usage: scripts/gpu_sm_share.sh BIN_DIR OUT_DIR}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv > "$out/nvidia-smi.txt"
for shape in "8192 8192 8192 20" "8192 14336 4096 20" "16384 8192 8192 10" "4096 4096 4096 50"; do
  read -r m n k repeats <<< "$shape"
  "$bin/shardsim-gpu" sm-share --m "$m" --n "$n" --k "$k" --repeats "$repeats" --units 8,16,20,24,32,48 | tee -a "$out/sm_share.txt"
  "$bin/shardsim-gpu" sm-share --m "$m" --n "$n" --k "$k" --repeats "$repeats" --units 8,16,20,24,32,48 --json > "$out/sm_share_${m}x${n}x${k}.json"
done
