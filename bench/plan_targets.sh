#!/usr/bin/env bash
# Wall time of `shardsim plan` on the planner's target spaces, with plans evaluated per second,
# and of one estimate of a very deep pipeline (the per-plan work a plan's schedule costs).
# Usage: bench/plan_targets.sh [shardsim]
set -euo pipefail
bin=${1:-build/bin/shardsim}
run() {
  local start end json
  start=$(date +%s.%N)
  json=$("$bin" plan "$@" --top 1 --json) || { local rc=$?; [ "$rc" -eq 3 ] || exit "$rc"; }  # 3: nothing fits
  end=$(date +%s.%N)
  local evaluated rate
  evaluated=$(grep -m1 '"evaluated"' <<<"$json" | sed 's/[^0-9]//g')
  rate=$(grep -m1 '"plans_per_s"' <<<"$json" | sed 's/.*: *\([0-9.eE+-]*\).*/\1/')
  printf '%-70s wall %6.2f s  %8s plans  %10.0f plans/s\n' "$*" "$(awk -v a="$start" -v b="$end" 'BEGIN { print b - a }')" "$evaluated" "$rate"
}
run --model llama3-405b --cluster dgx-h100:16384 --global-batch-tokens 16M --seq-len 8192
run --model llama3-70b --cluster tpu-v5p:16x16x24 --global-batch-tokens 24M --seq-len 8192
run --model llama3-70b --cluster tpu-v5p:16x16x24 --global-batch-tokens 4M --seq-len 8192
run --model deepseek-v3 --cluster hgx-h800:2048 --global-batch-tokens 60M --seq-len 4096
# The same spaces for one framework each (only the plans it runs are estimated).
run --model llama3-405b --cluster dgx-h100:16384 --global-batch-tokens 16M --seq-len 8192 --framework megatron-core
run --model deepseek-v3 --cluster hgx-h800:2048 --global-batch-tokens 60M --seq-len 4096 --framework torchtitan
run --model llama3-70b --cluster tpu-v5p:16x16x24 --global-batch-tokens 24M --seq-len 8192 --framework maxtext
# A hybrid (Mamba-2) model over long sequences: context parallelism over its mixers searched too.
run --model nemotron-3-nano-30b-a3b --cluster dgx-h100:1024 --global-batch-tokens 32M --seq-len 131072 --framework megatron-core
# Nothing fits: the search, then larger sizes of the system until one fits.
run --model llama3-405b --cluster dgx-h100:8 --global-batch-tokens 4M --seq-len 8192
# A fixed micro-batch of one over 2^30 sequences (64M micro-batches per replica): no plan's cost
# grows with the count (DualPipe's directions are counted, not visited).
run --model llama3-8b --cluster dgx-h100:16 --global-batch-tokens 1G --seq-len 1 --set micro_batch_size=1
# Two schedule rounds, each walked whole (pipeline_rounds): plans whose rounds exceed 65,536
# micro-batches are refused, the rest estimated (was 18.7 s and 3.7 GB before the bound).
run --model llama3-8b --cluster dgx-h100:16 --global-batch-tokens 1M --seq-len 1 --set micro_batch_size=1 --set pipeline_rounds=2
# One estimate of a very deep interleaved pipeline (256 stages x 8 chunks, 2,048 layers) over
# 32,768 micro-batches: the memory model's in-flight peaks over 16,384 of them per stage (was 83 s).
folder=$(mktemp -d)
trap 'rm -rf "$folder"' EXIT
model=$folder/deep-2048.json
cat > "$model" <<'JSON'
{"name": "deep-2048", "num_layers": 2048, "hidden_size": 1024, "num_heads": 8, "num_kv_heads": 8, "head_dim": 128,
 "ffn_hidden_size": 4096, "mlp": "swiglu", "norm": "rmsnorm", "position": "rope", "vocab_size": 32000, "max_seq_len": 4096}
JSON
start=$(date +%s.%N)
"$bin" estimate --model "$model" --cluster dgx-h100:256 --set mesh.pipeline=256 --set pipeline_schedule=interleaved-1f1b \
  --set virtual_stages=8 --set global_batch_size=32768 --seq-len 4096 --set micro_batch_size=1 > /dev/null
end=$(date +%s.%N)
printf '%-70s wall %6.2f s\n' "estimate: interleaved-1f1b, 256 stages x 8 chunks, 32,768 micro-batches" "$(awk -v a="$start" -v b="$end" 'BEGIN { print b - a }')"
