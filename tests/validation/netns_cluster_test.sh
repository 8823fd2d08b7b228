#!/usr/bin/env bash
# validation.netns_two_hosts: `shardsim run --hostfile` across two "hosts" made of network
# namespaces (scripts/netns_cluster.sh) joined by links shaped to 200 Mbit/s. Checks that the
# shaping holds (a timed TCP transfer between the hosts), that mpirun places one rank on each host,
# and that a data=2 run trains 2 steps; the cluster is always removed, and nothing of it may remain.
# Needs root; exits 77 (skipped) where network namespaces cannot be made.
#   bash tests/validation/netns_cluster_test.sh BUILD/bin
set -euo pipefail

BIN=$(cd "${1:?usage: netns_cluster_test.sh BUILD_BIN_DIR}" && pwd)
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CLUSTER="$ROOT/scripts/netns_cluster.sh"
RATE_MBIT=200
NAME="t$$"                  # namespaces ssim-t<pid>-*: unique to this run
PREFIX="ssim-$NAME-"

fail() { echo "FAIL: $*" >&2; exit 1; }

# Skip, not fail, where namespaces cannot be made (not root, no CAP_NET_ADMIN, no iproute2).
rc=0
bash "$CLUSTER" check || rc=$?
if [[ $rc -eq 77 ]]; then echo "SKIP: network namespaces cannot be made on this machine"; exit 77; fi
[[ $rc -eq 0 ]] || fail "netns_cluster.sh check exited $rc"
[[ -x "$BIN/shardsim" && -x "$BIN/shardsim-runtime" ]] || fail "no shardsim and shardsim-runtime in $BIN"
command -v mpirun >/dev/null || fail "mpirun is not on PATH"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/ssim-netns-test.XXXXXX")
DIR="$WORK/cluster"
SERVER_PID=""

# Always: stop our transfer server, remove the cluster, and fail if any namespace of it remains.
cleanup() {
  local status=$?
  [[ $status -ne 77 ]] || status=1   # past `check`, 77 is a failure, not a skip
  if [[ -n "$SERVER_PID" ]]; then kill "$SERVER_PID" 2>/dev/null || true; fi
  bash "$CLUSTER" down "$DIR" || status=1
  if ip netns list | awk '{print $1}' | grep -q -- "^$PREFIX"; then
    echo "FAIL: namespaces left after down: $(ip netns list | grep -- "^$PREFIX" | tr '\n' ' ')" >&2
    status=1
  fi
  rm -rf -- "$WORK"
  exit "$status"
}
trap cleanup EXIT

echo "== up: 2 hosts at ${RATE_MBIT}mbit"
timeout 60 bash "$CLUSTER" up --hosts 2 --rate "${RATE_MBIT}mbit" --name "$NAME" --dir "$DIR"
H0=$(cat "$DIR/first_host")
H1="${PREFIX}h1"
read -r ADDR1 _ < <(sed -n 2p "$DIR/hostfile")

# The shaping is real: a 25 MB TCP stream from host 0 to host 1, timed at the receiver, arrives at
# about the rate (an unshaped veth carries several Gbit/s). python3 is the only TCP tool here.
if command -v python3 >/dev/null; then
  echo "== transfer host 0 -> host 1"
  cat > "$WORK/xfer.py" <<'EOF'
import socket, sys, time
if sys.argv[1] == "serve":  # serve ADDR PORT: receive until EOF, print Mbit/s from the first byte
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((sys.argv[2], int(sys.argv[3]))); s.listen(1); s.settimeout(60)
    c, _ = s.accept(); c.settimeout(60)
    n, t0 = 0, None
    while True:
        b = c.recv(1 << 20)
        if not b: break
        if t0 is None: t0 = time.monotonic()
        n += len(b)
    dt = time.monotonic() - t0
    print(f"{n} bytes in {dt:.3f} s: {n * 8 / dt / 1e6:.1f} Mbit/s")
else:  # send ADDR PORT BYTES: connect (retrying while the server starts) and send
    for _ in range(100):
        try: c = socket.create_connection((sys.argv[2], int(sys.argv[3])), timeout=60); break
        except OSError: time.sleep(0.1)
    left, buf = int(sys.argv[4]), b"x" * (1 << 20)
    while left > 0:
        c.sendall(buf[:min(left, len(buf))]); left -= min(left, len(buf))
    c.close()
EOF
  ip netns exec "$H1" timeout 60 python3 "$WORK/xfer.py" serve "$ADDR1" 5201 > "$WORK/xfer.out" &
  SERVER_PID=$!
  timeout 60 ip netns exec "$H0" python3 "$WORK/xfer.py" send "$ADDR1" 5201 25000000
  wait "$SERVER_PID" || fail "the transfer's receiver failed"
  SERVER_PID=""
  cat "$WORK/xfer.out"
  mbit=$(sed -n 's/.*: \([0-9.]*\) Mbit\/s/\1/p' "$WORK/xfer.out")
  awk -v m="$mbit" -v r="$RATE_MBIT" 'BEGIN { exit !(m >= 0.25 * r && m <= 1.15 * r) }' ||
    fail "transfer at $mbit Mbit/s over a link shaped to $RATE_MBIT Mbit/s (expected 25% to 115% of it)"
else
  echo "== no python3: transfer rate not measured"
fi

# mpirun in host 0 places one rank on each host (slots=1 each).
echo "== mpirun -n 2 --hostfile: where the ranks run"
placed=$(timeout 60 bash "$CLUSTER" exec "$DIR" -- mpirun -n 2 --hostfile "$DIR/hostfile" ip netns identify | sort | tr '\n' ' ')
echo "$placed"
[[ "$placed" == "${PREFIX}h0 ${PREFIX}h1 " ]] || fail "ranks ran in '$placed', expected ${PREFIX}h0 and ${PREFIX}h1"

# shardsim run across the two hosts: data=2, 2 steps, 2 losses in the JSON. (The plan is a file:
# `shardsim run` with --set alone launches `shardsim-runtime train` without the --plan it requires.)
echo "== shardsim run --hostfile (data=2, 2 steps)"
cd "$WORK"
echo '{"mesh": {"data": 2}, "global_batch_size": 4, "seq_len": 64}' > "$WORK/plan.json"
timeout 150 bash "$CLUSTER" exec "$DIR" -- "$BIN/shardsim" run --model tiny-dense --plan "$WORK/plan.json" --steps 2 \
  --hostfile "$DIR/hostfile" --json > "$WORK/run.json"
cat "$WORK/run.json"
if command -v python3 >/dev/null; then
  python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); sys.exit(0 if len(d["losses"]) == 2 else 1)' "$WORK/run.json" ||
    fail "the run's JSON does not hold 2 losses"
else
  grep -Eq '"losses": *\[[^],]+,[^],]+\]' "$WORK/run.json" || fail "the run's JSON does not hold 2 losses"
fi
echo "== ok (the cluster is removed on exit)"
