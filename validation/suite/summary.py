#!/usr/bin/env python3
"""The validation suite's summary: one row per plan (step time measured, estimated, simulated and
their errors), the accuracy figures over the time-faithful plans, and memory per category.
Usage: summary.py OUT_DIR CALIBRATE_SECONDS SUITE_SECONDS"""
import json
import pathlib
import statistics
import sys


def pct(x):
    return f"{100 * x:+.1f}%"


def main():
    out = pathlib.Path(sys.argv[1])
    calibrate_s, suite_s = float(sys.argv[2]), float(sys.argv[3])
    rows, est_errors, sim_errors = [], [], []
    memory, balanced = {}, []
    for path in sorted(out.glob("*.json")):
        if path.name == "cluster.json" or path.stat().st_size == 0:
            continue  # the calibration, or a plan that failed (its .err says why)
        r = json.loads(path.read_text())
        step = next(c for c in r["categories"] if c["category"] == "step")
        e, s = step["estimated_s"] / step["measured_s"] - 1, step["simulated_s"] / step["measured_s"] - 1
        worst = r["ops"][0] if r["ops"] else None
        faithful = r["time_faithful"]
        if faithful:
            est_errors.append(abs(e))
            sim_errors.append(abs(s))
        mesh = " ".join(f"{k}={v}" for k, v in r["plan"]["mesh"].items() if v > 1)
        rows.append((path.stem, mesh, r["ranks"], "yes" if faithful else "no (kept out)", step["measured_s"], step["estimated_s"], e,
                     step["simulated_s"], s, f"{worst['op']} {1e3 * worst['difference_s']:+.2f} ms" if worst else "-"))
        for m in r["memory"]:
            if m["comparable"] and m["error"] is not None:
                memory.setdefault(m["category"], []).append(abs(m["error"]))
                if m.get("balanced_error") is not None:
                    balanced.append(abs(m["balanced_error"]))
    print("| plan | mesh | ranks | time-faithful | measured | estimated | error | simulated | error | worst op (predicted - measured) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, mesh, ranks, faithful, m, e, ee, s, se, worst in rows:
        print(f"| {name} | {mesh} | {ranks} | {faithful} | {1e3 * m:.1f} ms | {1e3 * e:.1f} ms | {pct(ee)} | {1e3 * s:.1f} ms | {pct(se)} | {worst} |")
    print()
    if est_errors:
        print(f"Step time over {len(est_errors)} time-faithful plans: estimate |error| median {100 * statistics.median(est_errors):.1f}%, "
              f"max {100 * max(est_errors):.1f}%; simulation |error| median {100 * statistics.median(sim_errors):.1f}%, max {100 * max(sim_errors):.1f}%")
    for category, errors in sorted(memory.items()):
        print(f"Memory {category}: |error| median {100 * statistics.median(errors):.1f}%, max {100 * max(errors):.1f}% over {len(errors)} ranks")
    if balanced:
        print(f"  (the activations of {len(balanced)} expert-parallel ranks are set beside the memory model at the routing they reported; "
              f"at balanced routing, the model's own assumption, their |error| is median {100 * statistics.median(balanced):.1f}%, "
              f"max {100 * max(balanced):.1f}%)")
    print(f"Calibration {calibrate_s:.0f} s; {len(rows)} plans validated in {suite_s:.0f} s")


if __name__ == "__main__":
    main()
