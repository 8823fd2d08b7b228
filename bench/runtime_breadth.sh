#!/usr/bin/env bash
# The runtime-breadth targets, timed from the CLI on this machine's cores: (1) the peak memory per
# rank of fsdp 4 ZeRO-3 against data 4 ZeRO-0 for the same model (the runtime's accounting and the
# process's resident set, from `train --json`), (2) DualPipe's step time against 1F1B's on the same
# 4 stages and micro-batches (both directions run; the two copies' gradients summed once a step).
# Usage: bench/runtime_breadth.sh [build/bin]   (4 ranks, oversubscribed where fewer cores)
set -euo pipefail
bin=$(realpath "${1:-build/bin}")
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
# A deep, narrow model: one layer is a small part of the whole (as in runtime.mpi.memory.ranks4).
"$bin/shardsim" describe --model tiny-dense --write-model "$dir/m.json" >/dev/null
python3 - "$dir/m.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
m.update(name="deep-narrow", num_layers=64, hidden_size=128, num_heads=4, num_kv_heads=4, head_dim=32, ffn_hidden_size=512)
json.dump(m, open(sys.argv[1], "w"))
PY
train() {  # plan JSON, steps -> the report
  echo "$1" >"$dir/p.json"
  mpiexec -n 4 --oversubscribe "$bin/shardsim-runtime" train --model "${MODEL:-$dir/m.json}" --plan "$dir/p.json" --steps "$2" --json
}
memory() {  # name, plan
  train "$2" 2 | python3 -c '
import json, sys
r = json.load(sys.stdin)["memory_bytes"]
acc = max(x["peak_total"] for x in r) / 2**20
rss = max(x["resident_peak"] - x["resident_base"] for x in r) / 2**20
print(f"%-22s peak per rank: accounting %7.1f MiB, resident-set growth %7.1f MiB" % (sys.argv[1], acc, rss))' "$1"
}
memory "data 4, ZeRO-0" '{"mesh": {"data": 4}, "global_batch_size": 4, "seq_len": 32, "dtype": "fp32"}'
memory "fsdp 4, ZeRO-3" '{"mesh": {"fsdp": 4}, "zero_stage": 3, "global_batch_size": 4, "seq_len": 32, "dtype": "fp32"}'
step() {  # name, schedule
  MODEL=tiny-dense train "{\"mesh\": {\"pipeline\": 4}, \"pipeline_schedule\": \"$2\", \"global_batch_size\": 16, \"seq_len\": 128}" 6 | python3 -c '
import json, sys
r = json.load(sys.stdin)
print("%-22s median step %7.1f ms over 5 steps after the first (tiny-dense, pipeline 4, 16 micro-batches)" % (sys.argv[1], 1e3 * r["step_time_s"]))' "$1"
}
step "1f1b" 1f1b
step "dualpipe" dualpipe
