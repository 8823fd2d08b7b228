#!/usr/bin/env bash
# The simulate issue's targets and scaling, timed as CLI runs (wall seconds and peak memory of the
# whole command, simulation children included via the report's own figures).
# Usage: bench/simulate_targets.sh [path/to/shardsim]   (default build/bin/shardsim)
set -euo pipefail
S=${1:-build/bin/shardsim}

run() {  # label, then shardsim simulate arguments
  local label=$1; shift
  local out
  out=$( { /usr/bin/time -f "TIME %e %M" "$S" simulate "$@" --json > /tmp/simulate_bench.json; } 2>&1 | grep TIME || true)
  python3 - "$label" "$out" <<'PY'
import json, sys
label, timing = sys.argv[1], sys.argv[2].split()
j = json.load(open('/tmp/simulate_bench.json'))
s = j['simulation']
print(f"{label:58s} step {j['step_time_s']:8.3f} s (estimate {s['estimate_step_time_s']:8.3f} s)  "
      f"wall {float(timing[1]):6.1f} s  max RSS {int(timing[2])/1024:7.0f} MiB  engine RSS {s['peak_rss_bytes']/2**20:7.0f} MiB  "
      f"flows {s['flows']:>9}  micro-batches {s['microbatches_simulated']}/{s['microbatches']}")
PY
}

echo "== targets"
run "gpt3-175b dgx-a100:1024 t8 p16 d8 gbs1536 1f1b selective" --model gpt3-175b --cluster dgx-a100:1024 --set mesh.tensor=8 \
  --set mesh.pipeline=16 --set mesh.data=8 --set global_batch_size=1536 --set micro_batch_size=1 --set recompute=selective --set seq_len=2048
run "llama3-405b dgx-h100:16384 t8 p16 fsdp128 16M tokens" --model llama3-405b --cluster dgx-h100:16384 --set mesh.tensor=8 \
  --set mesh.pipeline=16 --set mesh.fsdp=128 --set global_batch_size=2048 --set micro_batch_size=1 --set seq_len=8192
run "llama3-70b tpu-v5p:16x16x16 fsdp512 x t8 4M tokens" --model llama3-70b --cluster tpu-v5p:16x16x16 --set mesh.tensor=8 \
  --set mesh.fsdp=512 --set global_batch_size=512 --set micro_batch_size=1 --set seq_len=8192

echo "== devices (gpt3-175b, t8 p16, data grows, 8 micro-batches per replica)"
for d in 1 2 4 8 16; do
  run "dgx-a100:$((128 * d)) data=$d" --model gpt3-175b --cluster dgx-a100:$((128 * d)) --set mesh.tensor=8 --set mesh.pipeline=16 \
    --set mesh.data=$d --set global_batch_size=$((8 * d)) --set micro_batch_size=1 --set seq_len=2048
done

echo "== micro-batches (gpt3-175b on dgx-a100:1024, t8 p16 d8)"
for m in 16 32 64 128 192 384 768; do
  run "micro-batches per replica $m" --model gpt3-175b --cluster dgx-a100:1024 --set mesh.tensor=8 --set mesh.pipeline=16 \
    --set mesh.data=8 --set global_batch_size=$((8 * m)) --set micro_batch_size=1 --set seq_len=2048
done
