#!/usr/bin/env bash
# Accuracy against published runs (docs/accuracy.md), timed: the catalogue's efficiencies'
# (data/hardware.json) predictions of every run in tests/data/measured_runs.json (--no-fit
# --catalogue), the presets' own, which default to data/fitted_presets.json's fitted figures
# (--no-fit), then the per-system fit from the catalogue's figures with its test-split report and
# the fitted clusters in OUT_DIR (what scripts/refit_presets.sh ships). Prints the wall time of each.
# Usage: bench/accuracy.sh [build-dir] [out-dir]
set -euo pipefail
build=${1:-build}
out=${2:-$build/accuracy}
runs="$(realpath --relative-to=. "$(dirname "$0")/../tests/data/measured_runs.json")"  # wherever it is run from
mkdir -p "$out"
timed() {  # timed FILE ARGS...: runs shardsim calibrate with ARGS into FILE, prints its seconds
  local file=$1 start end
  shift
  start=$(date +%s.%N)
  "$build/bin/shardsim" calibrate --from-runs "$runs" "$@" > "$file"
  end=$(date +%s.%N)
  awk "BEGIN{printf \"%.2f\", $end - $start}"
}
t=$(timed "$out/catalogue.txt" --no-fit --catalogue)
echo "== the catalogue's efficiencies (data/hardware.json; no fit): $t s"
sed -n '/^Accuracy on the test runs/,$p' "$out/catalogue.txt"
echo
t=$(timed "$out/presets.txt" --no-fit)
echo "== the presets' defaults (data/fitted_presets.json where a system has them; no fit): $t s"
sed -n '/^Accuracy on the test runs/,/^On the fit runs/p' "$out/presets.txt" | sed '$d'
echo
t=$(timed "$out/fitted.txt" --catalogue --out-dir "$out")
echo "== fitted per system on the fit runs, from the catalogue's figures: $t s; clusters in $out"
sed -n '/^Accuracy on the test runs/,$p' "$out/fitted.txt"
