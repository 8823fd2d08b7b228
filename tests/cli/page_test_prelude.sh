# Sourced by the headless-Chromium page tests: checks the two arguments (SHARDSIM_BIN WORK_DIR),
# sets $shardsim, $work and $chromium, and exits 77 (skipped) when chromium or python3 is missing;
# defines fail, browse and console_lines, and control_page_reports_errors (the console check's control).
# Usage: . page_test_prelude.sh NAME "$@"
name=$1
shift
if [[ $# -ne 2 ]]; then
  echo "usage: $name SHARDSIM_BIN WORK_DIR" >&2
  exit 2
fi
shardsim=$1
work=$2
chromium=$(command -v chromium || command -v chromium-browser || true)
if [[ -z $chromium ]]; then
  echo "SKIP: chromium is not installed (scripts/setup.sh installs it)"
  exit 77
fi
if ! command -v python3 >/dev/null; then
  echo "SKIP: python3 is not installed"
  exit 77
fi

fail() {
  echo "$name: $*" >&2
  exit 1
}

# Headless Chromium with its own profile, console messages on stderr ("INFO:CONSOLE:1] ..." in
# recent versions, "INFO:CONSOLE(1)] ..." in older ones).
browse() {
  timeout 120 "$chromium" --headless --no-sandbox --disable-gpu --no-first-run --user-data-dir="$work/profile" \
    --enable-logging=stderr --v=0 "$@"
}
console_lines() { grep -E 'CONSOLE[:(]' "$1" || true; }

# The control: an uncaught error must show in the log, or a page's console check proves nothing.
control_page_reports_errors() {
  mkdir -p "$work"
  printf '<!DOCTYPE html><html><body><script>undefined_function()</script></body></html>\n' >"$work/control.html"
  browse --dump-dom "file://$work/control.html" >/dev/null 2>"$work/control.log" || fail "chromium failed on the control page: $(tail -n 3 "$work/control.log")"
  console_lines "$work/control.log" | grep -q "Uncaught" || fail "chromium did not report the control page's uncaught error; its log: $(tail -n 3 "$work/control.log")"
}
