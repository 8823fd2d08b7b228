#!/usr/bin/env bash
# The report page of `shardsim validate --report` in headless Chromium, from a short real run:
# this machine is calibrated once (--repeats 1), tiny-dense runs 2 steps on 2 ranks with the trace
# kept, and the page must load without writing anything to the console (a page with an uncaught
# error checks first that this Chromium reports one), fetch nothing, have its sections, bars for
# every category, one timeline row per rank drawing every span of the drawn step, a simulated
# timeline on the same time axis, and a screenshot that is not blank
# (tests/cli/validate_page_check.py, tests/cli/report_page_check.py).
# Usage: validate_page_test.sh SHARDSIM_BIN WORK_DIR. Exits 77 (skipped) without chromium,
# python3 or mpirun.
set -euo pipefail

. "$(dirname "${BASH_SOURCE[0]}")/page_test_prelude.sh" validate_page_test.sh "$@"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if ! command -v mpirun >/dev/null; then
  echo "SKIP: mpirun is not installed (scripts/setup.sh installs OpenMPI)"
  exit 77
fi
mkdir -p "$work"
rm -rf "$work"/{page.html,validate.json,validate.err,page.dom,console.log,shot.png,control.html,control.log,run,calibrate.out}

# The console check below proves something only if Chromium reports a control page's error.
control_page_reports_errors

# A calibrated cluster of this machine: one repeat is enough for a page (about 20 s).
"$shardsim" calibrate --out "$work/cluster.json" --repeats 1 >"$work/calibrate.out" 2>&1 ||
  fail "shardsim calibrate failed (exit $?): $(tail -n 5 "$work/calibrate.out")"

# The run, kept (--keep) so the checker can count the trace's spans; --json for the figures.
"$shardsim" validate --model tiny-dense --set mesh.data=2 --set global_batch_size=4 --set seq_len=64 --steps 2 \
  --cluster "$work/cluster.json" --keep "$work/run" --json --report "$work/page.html" >"$work/validate.json" 2>"$work/validate.err" ||
  fail "shardsim validate failed (exit $?): $(tail -n 5 "$work/validate.err")"
[[ -s $work/page.html ]] || fail "shardsim validate wrote no page"
[[ -s $work/run/trace.json ]] || fail "shardsim validate kept no trace in $work/run"

python3 "$here/validate_page_check.py" html "$work/page.html"
browse --dump-dom "file://$work/page.html" >"$work/page.dom" 2>"$work/console.log" || fail "chromium failed to load the page: $(tail -n 3 "$work/console.log")"
messages=$(console_lines "$work/console.log")
[[ -z $messages ]] || fail "the page wrote to the console: $messages"
python3 "$here/validate_page_check.py" dom "$work/page.dom" "$work/validate.json" "$work/run/trace.json"

browse --screenshot="$work/shot.png" --window-size=1400,2400 "file://$work/page.html" >/dev/null 2>&1 || fail "chromium failed to take a screenshot"
[[ -s $work/shot.png ]] || fail "chromium wrote no screenshot"
python3 "$here/report_page_check.py" png "$work/shot.png"
echo "validate_page_test: passed ($work)"
