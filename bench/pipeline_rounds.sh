#!/usr/bin/env bash
# A step in pipeline schedule rounds (pipeline_rounds, docs/cli.md), timed as CLI runs: the
# estimate and the SimGrid simulation of llama3-70b on dgx-h100:128 (pipeline 8 x tensor 8 x data
# 2, 1F1B, 1,024 micro-batches per replica) in 1, 8, 64 and 512 rounds, with each one's step time
# and how far the two engines are apart. Rounds of more than 4 p v micro-batches (8: 128 each)
# are simulated whole, twice and once (sim/schedule_player.h).
# Usage: bench/pipeline_rounds.sh [path/to/shardsim]   (default build/bin/shardsim)
set -euo pipefail
S=${1:-build/bin/shardsim}
plan=$(mktemp)
trap 'rm -f "$plan"' EXIT
cat > "$plan" <<'JSON'
{"mesh": {"pipeline": 8, "tensor": 8, "data": 2}, "global_batch_size": 2048, "seq_len": 4096,
 "micro_batch_size": 1, "pipeline_schedule": "1f1b", "recompute": "full", "sequence_parallel": true}
JSON
for rounds in 1 8 64 512; do
  for command in estimate simulate; do
    start=$(date +%s.%N)
    step=$("$S" "$command" --model llama3-70b --cluster dgx-h100:128 --plan "$plan" --set pipeline_rounds=$rounds | grep -m1 '^  step')
    end=$(date +%s.%N)
    printf 'rounds %-4s %-8s %6.2f s wall |%s\n' "$rounds" "$command" "$(awk "BEGIN{print $end - $start}")" "${step#  step}"
  done
done
