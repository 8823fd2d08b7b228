#!/usr/bin/env bash
# Installs shardsim's build and test dependencies from Debian's packages. Idempotent: when every
# package is already installed it only checks and returns (well under a second).
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  libsimgrid-dev libboost-graph-dev nlohmann-json3-dev libcli11-dev
  libgtest-dev libbenchmark-dev libopenmpi-dev openmpi-bin libopenblas-dev
  chromium  # headless: the tests that load `simulate --report` and `validate --report` pages
  python3 iproute2  # the validation suite's summary and page checks; network namespaces (scripts/netns_cluster.sh)
)

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

echo "setup: installing ${missing[*]}"
sudo=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "setup: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q
$sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
