#!/usr/bin/env bash
# How fast `shardsim run` ends, and how, when something goes wrong: a rank killed (SIGKILL), a rank
# stopped (SIGSTOP, under --timeout 2), shardsim sent SIGTERM, a rank that cannot allocate, and the
# checks before launch. Prints seconds from the fault to shardsim's exit, its exit status and its
# one line of stderr, and whether any process of the job was left.
# Usage: bench/fault_timings.sh [shardsim]   (tiny-dense, data=2, on this machine's cores)
set -uo pipefail
bin=$(realpath "${1:-build/bin/shardsim}")
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
echo '{"mesh": {"data": 2}, "global_batch_size": 4, "seq_len": 64}' >"$dir/p.json"
now() { date +%s.%N; }
seconds() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }
left() { pgrep -f -- "--seed $1" >/dev/null && echo "processes left" || echo "nothing left"; }
rank_pid() {  # the pid of world rank $2 of the job marked by seed $1
  for p in $(pgrep -f -- "shardsim-runtime train.*--seed $1"); do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2" && echo "$p"
  done
}
fault() {  # name, signal, target (rank1|shardsim), extra flags...
  local name=$1 sig=$2 target=$3 seed=$((RANDOM * 1000 + 7))
  shift 3
  "$bin" run --model tiny-dense --plan "$dir/p.json" --steps 100000 --seed "$seed" "$@" >"$dir/out" 2>"$dir/err" &
  local job=$!
  until grep -q "step   2" "$dir/out" 2>/dev/null; do sleep 0.05; done
  local victim=$job
  [ "$target" = rank1 ] && victim=$(rank_pid "$seed" 1)
  local start end rc
  start=$(now)
  kill -"$sig" "$victim"
  wait "$job"
  rc=$?
  end=$(now)
  sleep 0.5
  printf '%-34s %6s s  exit %3d  %-14s %s\n' "$name" "$(seconds "$start" "$end")" "$rc" "$(left "$seed")" "$(head -c 150 "$dir/err" | tr '\n' ' ')"
}
fault "rank 1 SIGKILL" KILL rank1
fault "rank 1 SIGSTOP, --timeout 2" STOP rank1 --timeout 2
fault "shardsim SIGTERM" TERM shardsim
fault "shardsim SIGINT" INT shardsim
python3 - "$dir/huge.json" <<'PY'
import json, sys
json.dump({"name": "huge", "num_layers": 8, "hidden_size": 16384, "num_heads": 128, "num_kv_heads": 8, "head_dim": 128,
           "ffn_hidden_size": 65536, "mlp": "swiglu", "norm": "rmsnorm", "position": "rope", "vocab_size": 256,
           "max_seq_len": 1024}, open(sys.argv[1], "w"))
PY
for flags in "" "--skip-memory-check"; do
  start=$(now)
  "$bin" run --model "$dir/huge.json" --set mesh.data=1 --global-batch-tokens 64 --seq-len 64 --steps 1 $flags >/dev/null 2>"$dir/err"
  rc=$?
  printf '%-34s %6s s  exit %3d  %s\n' "25 G params ${flags:-checked}" "$(seconds "$start" "$(now)")" "$rc" "$(head -c 150 "$dir/err")"
done
start=$(now)
"$bin" run --model tiny-dense --set mesh.data=100000 --global-batch-tokens 6400000 --seq-len 64 --steps 1 >/dev/null 2>"$dir/err"
rc=$?
printf '%-34s %6s s  exit %3d  %s\n' "100000 ranks" "$(seconds "$start" "$(now)")" "$rc" "$(head -c 150 "$dir/err")"
