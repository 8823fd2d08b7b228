#!/usr/bin/env bash
# Wall time and peak memory of the SimGrid engine for a 1 GiB all-reduce over every device, from
# 64 to 4096 devices, on TPU v5p tori and DGX H100 clusters. Usage: bench/des_scaling.sh [shardsim]
set -euo pipefail
bin=${1:-build/bin/shardsim}
printf '%-22s %8s %-14s %12s %14s %12s %12s\n' cluster devices algorithm simulated_s transfers wall_s peak_MiB
run() {
  local cluster=$1 devices=$2 algorithm=${3:-auto}
  local start end json
  start=$(date +%s.%N)
  json=$("$bin" collective --cluster "$cluster" --op all-reduce --bytes 1G --devices "$devices" --algorithm "$algorithm" --engine des --json)
  end=$(date +%s.%N)
  local time alg messages wall rss
  time=$(grep -m1 '"time_s"' <<<"$json" | sed 's/.*: *\([0-9.eE+-]*\).*/\1/')
  alg=$(grep -m1 '"algorithm"' <<<"$json" | sed 's/.*: "\(.*\)".*/\1/')
  messages=$(grep -m1 '"messages"' <<<"$json" | sed 's/[^0-9]//g')
  wall=$(awk -v a="$start" -v b="$end" 'BEGIN { print b - a }')
  rss=$(grep -m1 '"peak_rss_bytes"' <<<"$json" | sed 's/[^0-9]//g')
  printf '%-22s %8s %-14s %12.6f %14s %12.3f %12.1f\n' "$cluster" "$devices" "$alg" "$time" "$messages" "$wall" "$(awk -v r="$rss" 'BEGIN { print r / 1048576 }')"
}
run tpu-v5p:4x4x4 64
run tpu-v5p:8x8x8 512
run tpu-v5p:8x16x16 2048
run tpu-v5p:16x16x16 4096
run tpu-v5p:16x16x16 4096 ring
run dgx-h100:64 64
run dgx-h100:512 512
run dgx-h100:1024 1024
run dgx-h100:4096 4096
run dgx-h100:4096 4096 ring
