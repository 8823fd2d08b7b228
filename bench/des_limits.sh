#!/usr/bin/env bash
# The stated limits, timed as CLI runs (docs/cli.md "Limits"): how long each refusal takes, and the
# wall time and peak memory (the whole command, simulation children included) of the largest
# accepted cases next to the estimate the command made beforehand.
# Usage: bench/des_limits.sh [path/to/shardsim] [--long]   (default build/bin/shardsim; --long adds
# the SimGrid all-to-alls over 512 and 1,024 GPUs: about 40 s and 6 minutes)
set -uo pipefail
S=${1:-build/bin/shardsim}
long=${2:-}
json=$(mktemp)
trap 'rm -f "$json"' EXIT

# label, then shardsim arguments. Prints the exit status, wall seconds, peak RSS and, for a
# SimGrid run, its estimate and what it measured; for a refusal, the error's first words.
run() {
  local label=$1; shift
  /usr/bin/time -o "$json.time" -f "%e %M" "$S" "$@" > "$json" 2> "$json.err"
  python3 - "$label" "$json.time" "$json" "$json.err" <<'PY'
import json, sys
label, timing, out, err = sys.argv[1:5]
wall, rss_kib = open(timing).read().split()[-2:]
line = f"{label:56s} wall {float(wall):7.2f} s  max RSS {int(rss_kib) / 1024:8.1f} MiB"
error = open(err).read().strip()
if error.startswith("shardsim: error"):
    print(f"{line}  REFUSED: {error[len('shardsim: error: '):][:150]}")
else:
    try:
        j = json.loads(open(out).read())
        sim = j.get("des") or j.get("simulation")
        if sim:
            print(f"{line}  engine {sim['wall_s']:7.2f} s (estimated {sim['estimated_wall_s']:7.2f} s), "
                  f"{sim['peak_rss_bytes'] / 2**20:7.1f} MiB (estimated {sim['estimated_peak_bytes'] / 2**20:7.1f} MiB)")
        else:
            print(f"{line}  ok")
    except ValueError:
        print(f"{line}  FAILED: {error[:150]}")
PY
  rm -f "$json.err" "$json.time"
}

echo "== cluster size bound: at most 262,144 devices"
run "refused: dgx-h100:10000000" collective --cluster dgx-h100:10000000 --op all-reduce --bytes 1GiB --devices 8 --json
run "refused: tpu-v5p:16x16x16,slices=128 (524,288 chips)" describe --cluster tpu-v5p:16x16x16,slices=128 --json
run "largest: dgx-h100:262144, all-reduce over 8 GPUs" collective --cluster dgx-h100:262144 --op all-reduce --bytes 1GiB --devices 8 --json
run "largest: dgx-h100:262144, every tensor group of 8" collective --cluster dgx-h100:262144 --op all-reduce --bytes 1GiB \
  --mesh data=32768,tensor=8 --axes tensor --json
run "largest: dgx-h100:262144, 8 data groups of 32,768" collective --cluster dgx-h100:262144 --op all-reduce --bytes 1GiB \
  --mesh data=32768,tensor=8 --axes data --json
run "largest: tpu-v5p:16x16x16,slices=64, 4,096-chip slice" collective --cluster tpu-v5p:16x16x16,slices=64 --op all-reduce --bytes 1GiB \
  --devices 4096 --json
run "largest: estimate llama3-405b on dgx-h100:262144" estimate --model llama3-405b --cluster dgx-h100:262144 --set mesh.tensor=8 \
  --set mesh.pipeline=16 --set mesh.data=2048 --set global_batch_size=32768 --set seq_len=8192 --json

echo "== all-to-all group bound: at most 4,096 devices (16.8M flows)"
run "refused: all-to-all over 8,192 GPUs" collective --cluster dgx-h100:8192 --op all-to-all --bytes 1GiB --devices 8192 --json
run "largest: all-to-all over 4,096 chips (analytic)" collective --cluster tpu-v5p:16x16x16 --op all-to-all --bytes 1GiB --devices 4096 --json

echo "== SimGrid refused before starting (default limits: 600 s, half of MemAvailable)"
run "refused: all-to-all over 4,096 chips (the 34-minute run)" collective --cluster tpu-v5p:16x16x16 --op all-to-all --bytes 1GiB \
  --devices 4096 --engine des --json
run "refused: 8,192 tensor groups (65,536 hosts)" collective --cluster dgx-h100:65536 --op all-reduce --bytes 1GiB \
  --mesh data=8192,tensor=8 --axes tensor --engine des --json
run "refused: all-to-all over 512 chips, --max-seconds 10" collective --cluster tpu-v5p:8x8x8 --op all-to-all --bytes 1GiB --devices 512 \
  --engine des --max-seconds 10 --json
run "refused: gpt3-175b unfolded on 1,024, --max-seconds 0.5" simulate --model gpt3-175b --cluster dgx-a100:1024 --set mesh.tensor=8 \
  --set mesh.pipeline=16 --set mesh.data=8 --set global_batch_size=1536 --set seq_len=2048 --no-fold --max-seconds 0.5 --json

echo "== SimGrid accepted: measured against the estimate"
run "all-to-all over 256 GPUs (65,280 flows)" collective --cluster dgx-h100:256 --op all-to-all --bytes 1GiB --devices 256 --engine des --json
run "torus all-reduce over 4,096 chips" collective --cluster tpu-v5p:16x16x16 --op all-reduce --bytes 1GiB --devices 4096 --engine des --json
run "2,048 tensor groups of 8 (16,384 hosts)" collective --cluster dgx-h100:16384 --op all-reduce --bytes 1GiB \
  --mesh data=2048,tensor=8 --axes tensor --engine des --json
run "gpt3-175b dgx-a100:1024 t8 p16 d8, folded" simulate --model gpt3-175b --cluster dgx-a100:1024 --set mesh.tensor=8 --set mesh.pipeline=16 \
  --set mesh.data=8 --set global_batch_size=1536 --set micro_batch_size=1 --set recompute=selective --set seq_len=2048 --json
run "llama3-405b dgx-h100:16384 t8 p16 fsdp128 (16,384 hosts)" simulate --model llama3-405b --cluster dgx-h100:16384 --set mesh.tensor=8 \
  --set mesh.pipeline=16 --set mesh.fsdp=128 --set global_batch_size=2048 --set micro_batch_size=1 --set seq_len=8192 --json
if [[ $long == --long ]]; then
  run "all-to-all over 512 chips (261,632 flows)" collective --cluster tpu-v5p:8x8x8 --op all-to-all --bytes 1GiB --devices 512 --engine des --json
  run "all-to-all over 1,024 GPUs (1,047,552 flows)" collective --cluster dgx-h100:1024 --op all-to-all --bytes 1GiB --devices 1024 \
    --engine des --json
  run "llama3-70b tpu-v5p:16x16x16 fsdp512 t8" simulate --model llama3-70b --cluster tpu-v5p:16x16x16 --set mesh.tensor=8 \
    --set mesh.fsdp=512 --set global_batch_size=512 --set micro_batch_size=1 --set seq_len=8192 --json
fi
