# Sourced by the headless-Chromium page tests: checks the two arguments (SHARDSIM_BIN WORK_DIR),
# sets $shardsim, $work and $chromium, and exits 77 (skipped) when chromium or python3 is missing.
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
