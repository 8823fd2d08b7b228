#!/usr/bin/env bash
# Refits data/fitted_presets.json, the presets' default efficiencies: `calibrate --from-runs` over
# tests/data/measured_runs.json from the catalogue's figures (--catalogue, data/hardware.json),
# kept for each group named after a catalogue system whose fit converged on at least twice as many
# fit runs as efficiencies fitted (the report's `determined`), each efficiency on its own (not
# `tied`: a scale of the catalogue's figures fitted on a few runs does not replace them). Run it
# after a change to the cost model moves the fit (tests/cli/fitted_presets_cli_test.cc fails
# then), and rebuild.
# Usage: scripts/refit_presets.sh [build-dir]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(realpath "${1:-$root/build}")
cd "$root"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$build/bin/shardsim" calibrate --from-runs tests/data/measured_runs.json --catalogue --json --out-dir "$tmp" > "$tmp/report.json"
"$build/bin/shardsim" presets --json > "$tmp/presets.json"
python3 - "$tmp" data/fitted_presets.json <<'PY'
import json, sys
tmp, out = sys.argv[1], sys.argv[2]
report = json.load(open(f"{tmp}/report.json"))
systems = {c["name"] for c in json.load(open(f"{tmp}/presets.json"))["clusters"]}
kept = {}
for g in report["groups"]:
    if g["group"] not in systems or not g["determined"] or g["tied"]:
        continue
    tests = sum(1 for r in g["runs"] if r["split"] == "test")
    cluster = json.load(open(f"{tmp}/{g['group']}.cluster.json"))
    kept[g["group"]] = {"runs": f"{g['fit_runs']} fit runs of tests/data/measured_runs.json (group '{g['group']}'); its {tests} test runs not fitted on",
                        "efficiency": cluster["efficiency"]}
data = json.load(open(out))
data["systems"] = kept
with open(out, "w") as f:
    f.write(json.dumps(data, indent=2) + "\n")
print(f"wrote {out}: " + ", ".join(kept))
PY
