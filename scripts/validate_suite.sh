#!/usr/bin/env bash
# make validate: calibrates this machine (or the hosts of HOSTFILE), then runs `shardsim validate`
# on every plan of validation/suite/plans.txt and writes a summary table (validation/suite's
# summary script): step-time errors of the estimate and the simulation over the time-faithful
# plans, and memory per rank by category.
#   scripts/validate_suite.sh BUILD_DIR OUT_DIR [HOSTFILE]
set -euo pipefail

build=${1:?usage: validate_suite.sh BUILD_DIR OUT_DIR [HOSTFILE]}
out=${2:?usage: validate_suite.sh BUILD_DIR OUT_DIR [HOSTFILE]}
hostfile=${3:-}
root=$(cd "$(dirname "$0")/.." && pwd)
shardsim="$(cd "$build" && pwd)/bin/shardsim"
[[ -x "$shardsim" ]] || { echo "validate_suite: $shardsim not built (make build)" >&2; exit 2; }
mkdir -p "$out"
out=$(cd "$out" && pwd)
host_args=()
[[ -n "$hostfile" ]] && host_args=(--hostfile "$hostfile")

start=$(date +%s)
echo "validate_suite: calibrating${hostfile:+ the hosts of $hostfile}"
"$shardsim" calibrate --out "$out/cluster.json" "${host_args[@]}" | tee "$out/calibrate.txt"
calibrated=$(date +%s)

failed=0
while read -r name model sets; do
  [[ -z "$name" || "$name" == \#* ]] && continue
  set_args=()
  for s in $sets; do set_args+=(--set "$s"); done
  echo "validate_suite: $name ($model $sets)"
  if ! "$shardsim" validate --model "$model" "${set_args[@]}" --cluster "$out/cluster.json" "${host_args[@]}" --json \
      < /dev/null > "$out/$name.json" 2> "$out/$name.err"; then
    if grep -qE "has [0-9]+ slots for [0-9]+ ranks" "$out/$name.err"; then  # cli/mpi_launch.cc: too few slots
      echo "validate_suite: $name skipped: $(tail -1 "$out/$name.err")"
      rm -f "$out/$name.json"
    else
      echo "validate_suite: $name failed: $(tail -1 "$out/$name.err")" >&2
      failed=$((failed + 1))
    fi
  fi
done < "$root/validation/suite/plans.txt"
end=$(date +%s)

python3 "$root/validation/suite/summary.py" "$out" "$((calibrated - start))" "$((end - calibrated))" | tee "$out/summary.md"
[[ $failed -eq 0 ]] || { echo "validate_suite: $failed plans failed (see $out/*.err)" >&2; exit 1; }
