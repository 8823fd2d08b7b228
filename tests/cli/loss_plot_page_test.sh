#!/usr/bin/env bash
# The loss plot of `shardsim run --plot` in headless Chromium, drawn from two hand-written run
# reports (no run: `--compare` without `--model`): the SVG loads without console messages, its
# DOM has a polyline per run with a point per step, and its screenshot is not blank.
# Usage: loss_plot_page_test.sh SHARDSIM_BIN WORK_DIR. Exits 77 (skipped) without chromium or python3.
set -euo pipefail

. "$(dirname "${BASH_SOURCE[0]}")/page_test_prelude.sh" loss_plot_page_test.sh "$@"
check="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/report_page_check.py"
mkdir -p "$work"
rm -f "$work"/{loss.svg,a.json,b.json,page.dom,console.log,shot.png}
control_page_reports_errors

echo '{"losses": [5.5, 4.9, 4.2, 3.9], "model": "tiny-dense", "plan": {"mesh": {"data": 2}}}' >"$work/a.json"
echo '{"losses": [5.5, 4.9, 4.3, 3.8], "model": "tiny-dense", "plan": {"mesh": {"data": 1}}}' >"$work/b.json"
"$shardsim" run --plot "$work/loss.svg" --compare "$work/a.json" --compare "$work/b.json" >"$work/run.out" || fail "shardsim run --plot failed (exit $?)"
[[ -s $work/loss.svg ]] || fail "shardsim run --plot wrote no SVG"

browse --dump-dom "file://$work/loss.svg" >"$work/page.dom" 2>"$work/console.log" || fail "chromium failed to load the SVG: $(tail -n 3 "$work/console.log")"
messages=$(console_lines "$work/console.log")
[[ -z $messages ]] || fail "the SVG wrote to the console: $messages"
python3 - "$work/page.dom" <<'PY' || fail "the dumped DOM is not the plot"
import re, sys
dom = open(sys.argv[1]).read()
lines = re.findall(r'<polyline[^>]*class="run"[^>]*points="([^"]*)"|<polyline[^>]*points="([^"]*)"[^>]*class="run"', dom)
points = [a or b for a, b in lines]
assert len(points) == 2, "%d run lines" % len(points)
assert all(len(p.split()) == 4 for p in points), points
assert "loss (nats)" in dom and "data=2" in dom and "one rank" in dom
PY
browse --screenshot="$work/shot.png" --window-size=760,520 "file://$work/loss.svg" >/dev/null 2>&1 || fail "chromium failed to take a screenshot"
[[ -s $work/shot.png ]] || fail "chromium wrote no screenshot"
python3 "$check" png "$work/shot.png"
echo "loss_plot_page_test: passed ($work)"
