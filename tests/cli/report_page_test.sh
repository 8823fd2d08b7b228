#!/usr/bin/env bash
# The report page of `shardsim simulate --report` in headless Chromium: it loads without writing
# anything to the console (a page with an uncaught error checks first that this Chromium reports
# one), its timeline draws a rect.op for every X event that the same run's --trace has for the
# drawn devices, and its screenshot is not blank (tests/cli/report_page_check.py).
# Usage: report_page_test.sh SHARDSIM_BIN WORK_DIR. Exits 77 (skipped) without chromium or python3.
set -euo pipefail

. "$(dirname "${BASH_SOURCE[0]}")/page_test_prelude.sh" report_page_test.sh "$@"
check="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/report_page_check.py"
mkdir -p "$work"
rm -f "$work"/{page.html,trace.json,page.dom,console.log,shot.png,control.html,control.log}

# The console check below proves something only if Chromium reports a control page's error.
control_page_reports_errors

"$shardsim" simulate --model llama3-8b --cluster dgx-h100:8 --set mesh.tensor=2 --set mesh.pipeline=2 --set mesh.data=2 \
  --set global_batch_size=16 --set micro_batch_size=1 --set seq_len=2048 --report "$work/page.html" --trace "$work/trace.json" \
  >"$work/simulate.out" || fail "shardsim simulate failed (exit $?)"
[[ -s $work/page.html ]] || fail "shardsim simulate wrote no page"
[[ -s $work/trace.json ]] || fail "shardsim simulate wrote no trace"

browse --dump-dom "file://$work/page.html" >"$work/page.dom" 2>"$work/console.log" || fail "chromium failed to load the page: $(tail -n 3 "$work/console.log")"
messages=$(console_lines "$work/console.log")
[[ -z $messages ]] || fail "the page wrote to the console: $messages"
grep -q "<svg" "$work/page.dom" || fail "the dumped DOM has no <svg>"
python3 "$check" dom "$work/page.dom" "$work/trace.json"

browse --screenshot="$work/shot.png" --window-size=1400,2000 "file://$work/page.html" >/dev/null 2>&1 || fail "chromium failed to take a screenshot"
[[ -s $work/shot.png ]] || fail "chromium wrote no screenshot"
python3 "$check" png "$work/shot.png"
echo "report_page_test: passed ($work)"
