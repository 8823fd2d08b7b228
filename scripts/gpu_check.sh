#!/usr/bin/env bash
# The GPU figures of docs/gpu.md, on a machine with one NVIDIA GPU: the CUDA path's tests, the
# GPU's calibration (cluster JSON) and the ~1B-parameter training step at sequence 4096 in bf16.
# Usage: scripts/gpu_check.sh BIN_DIR OUT_DIR   (BIN_DIR holds shardsim-gpu, shardsim-runtime and
# cuda_kernels_test, built with `make build` where nvcc is found; SHARDSIM_MPIEXEC and
# SHARDSIM_RUNTIME_BIN as for scripts/gpu_parallel_check.sh). CUDA_TESTS=all runs the equivalence
# tests too (a minute more).
set -u
bin=${1:?usage: scripts/gpu_check.sh BIN_DIR OUT_DIR}
out=${2:?usage: scripts/gpu_check.sh BIN_DIR OUT_DIR}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1 | tee "$out/nvidia-smi.txt"
"$bin/shardsim-gpu" info
filter='CudaKernelsTest.*:GpuModelTest.*'
[ "${CUDA_TESTS:-}" = all ] && filter='*'
"$bin/cuda_kernels_test" --gtest_brief=1 --gtest_filter="$filter" 2>&1 | tee "$out/cuda_tests.txt"
model=examples/my-1b.model.json
"$bin/shardsim-gpu" calibrate --model "$model" --seq 4096 --tokens 4096 --out "$out/gpu.cluster.json" --json > "$out/calibrate.json"
echo "calibrate: exit $?"; head -c 3000 "$out/calibrate.json" | grep -E '"(flop_per_s|hbm_bytes_per_s|matmul|attention|hbm|m|n|k|training_flop_per_s|forward_flop_per_s)"' | tr -d ' ' | paste -sd' ' | head -c 1500; echo
# The training runs' reports in one file (a GPU machine's tool brings back few files).
{
  "$bin/shardsim-gpu" train --model "$model" --seq 4096 --micro-batch 1 --steps 6 --dtype bf16
  "$bin/shardsim-gpu" train --model "$model" --seq 4096 --micro-batch 2 --steps 4 --dtype bf16
  "$bin/shardsim-gpu" train --model "$model" --seq 4096 --micro-batch 1 --steps 6 --dtype bf16 --attention tiled
  "$bin/shardsim-gpu" train --model tiny-dense --seq 512 --micro-batch 2 --steps 8 --dtype fp32
} 2>&1 | tee "$out/train.txt"
"$bin/shardsim-gpu" train --model "$model" --seq 4096 --micro-batch 1 --steps 6 --dtype bf16 --json > "$out/train_bf16.json"
# The runtime's GPU path on the same model (its initial values and corpus batches), 2 micro-batches.
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "$bin/shardsim-runtime" train --model "$model" --set global_batch_size=2 \
  --set micro_batch_size=1 --set seq_len=4096 --set dtype=bf16 --steps 4 --device cuda 2>&1 | tee "$out/runtime_1b.txt"
echo "runtime 1b: exit ${PIPESTATUS[0]}"
