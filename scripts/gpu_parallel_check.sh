#!/usr/bin/env bash
# The GPU path's parallel runs against the CPU runtime (docs/gpu.md), on a machine with one NVIDIA
# GPU: the CUDA tests (kernels, the model, and `shardsim-runtime train --device cuda` against the
# CPU runtime on one rank and on data, tensor, pipeline and context ranks sharing the GPU), then
# bf16 runs of tensor x pipeline and tensor x context ranks. Usage:
# scripts/gpu_parallel_check.sh BIN_DIR OUT_DIR (BIN_DIR holds shardsim-runtime and
# cuda_kernels_test from `make build` where nvcc is found).
set -uo pipefail
bin=${1:?usage: scripts/gpu_parallel_check.sh BIN_DIR OUT_DIR}
out=${2:?usage: scripts/gpu_parallel_check.sh BIN_DIR OUT_DIR}
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
export SHARDSIM_RUNTIME_BIN="$bin/shardsim-runtime" SHARDSIM_MPIEXEC=${SHARDSIM_MPIEXEC:-mpiexec}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 | tee "$out/nvidia-smi.txt"
"$bin/cuda_kernels_test" 2>&1 | tee "$out/cuda_tests.txt"
echo "cuda_kernels_test: exit ${PIPESTATUS[0]}"
"$SHARDSIM_MPIEXEC" -n 4 --oversubscribe "$bin/shardsim-runtime" train --model tiny-dense --set global_batch_size=8 --set micro_batch_size=2 \
  --set seq_len=512 --set dtype=bf16 --set mesh.tensor=2 --set mesh.pipeline=2 --steps 6 --device cuda 2>&1 | tee "$out/bf16_tensor_pipeline.txt"
echo "bf16 tensor x pipeline: exit $?"
"$SHARDSIM_MPIEXEC" -n 4 --oversubscribe "$bin/shardsim-runtime" train --model tiny-dense --set global_batch_size=8 --set micro_batch_size=2 \
  --set seq_len=512 --set dtype=bf16 --set mesh.tensor=2 --set mesh.context=2 --set context_kv=all-gather --steps 6 --device cuda 2>&1 |
  tee "$out/bf16_tensor_context.txt"
echo "bf16 tensor x context: exit $?"
