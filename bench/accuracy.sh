#!/usr/bin/env bash
# Accuracy against published runs (docs/accuracy.md), timed: the catalogue's predictions of every
# run in tests/data/measured_runs.json (--no-fit), then the per-system fit with its test-split
# report and the fitted clusters in OUT_DIR. Prints the wall time of each.
# Usage: bench/accuracy.sh [build-dir] [out-dir]
set -euo pipefail
build=${1:-build}
out=${2:-$build/accuracy}
runs="$(realpath --relative-to=. "$(dirname "$0")/../tests/data/measured_runs.json")"  # wherever it is run from
mkdir -p "$out"
start=$(date +%s.%N)
"$build/bin/shardsim" calibrate --from-runs "$runs" --no-fit > "$out/catalogue.txt"
mid=$(date +%s.%N)
"$build/bin/shardsim" calibrate --from-runs "$runs" --out-dir "$out" > "$out/fitted.txt"
end=$(date +%s.%N)
echo "== the catalogue's efficiencies (no fit): $(awk "BEGIN{printf \"%.2f\", $mid - $start}") s"
sed -n '/^Accuracy on the test runs/,$p' "$out/catalogue.txt"
echo
echo "== fitted per system on the fit runs: $(awk "BEGIN{printf \"%.2f\", $end - $mid}") s; clusters in $out"
sed -n '/^Accuracy on the test runs/,$p' "$out/fitted.txt"
