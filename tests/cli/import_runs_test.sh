#!/usr/bin/env bash
# The importer (scripts/import_measured_runs.py) on rows in the collected format that a newer set
# may hold (tests/data/import_fixture_rows.json: one published row as collected, and copies of it
# and of a torchtitan row changed the ways a new row could differ): what it can express imports,
# the rest is skipped with its reason, none stops the import; shardsim then predicts the imports.
# Usage: import_runs_test.sh SHARDSIM SOURCE_DIR OUT_DIR
set -euo pipefail
shardsim=$1 root=$2 out=$3
mkdir -p "$out"
python3 "$root/scripts/import_measured_runs.py" "$root/tests/data/import_fixture_rows.json" "$out/runs.json"
python3 - "$out/runs.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
runs, why = {r["id"]: r for r in d["runs"]}, {s["id"]: s["why"] for s in d["skipped"]}
def check(ok, what):
    if not ok:
        sys.exit("FAIL: " + what)
row = runs.get("fixture-as-collected")
check(row is not None and row["cluster"] == "dgx-h100:64", "the row as collected imports on dgx-h100:64")
check(abs(row["measured"]["step_time_s"] - 2048 * 2048 / (23406 * 64)) < 1e-9, "its step time from its tokens/s per device")
check("fixture-other-source" in runs, "a row of a source the importer has no rule of its own for imports")
check(runs.get("fixture-torchtitan-on-b300", {}).get("cluster", "").startswith("dgx-b300:"), "a B300 row maps to dgx-b300")
for rid, reason in {"fixture-unknown-chip": "no preset for chip 'AMD Instinct MI300X'", "fixture-no-hardware": "malformed row: KeyError 'hardware'",
                    "fixture-null-batch": "malformed row: TypeError", "fixture-text-tp": "malformed row: TypeError",
                    "fixture-negative-throughput": "a negative, infinite, NaN or non-numeric step time or throughput",
                    "fixture-no-throughput": "no throughput or step time published"}.items():
    check(reason in why.get(rid, ""), f"{rid} skipped for '{reason}', got {why.get(rid)!r}")
PY
"$shardsim" calibrate --from-runs "$out/runs.json" --no-fit > "$out/report.txt"
grep -q "fixture-as-collected" "$out/report.txt"
grep -q "fixture-torchtitan-on-b300" "$out/report.txt"
echo "import_runs_test: ok"
