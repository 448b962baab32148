#!/usr/bin/env bash
# The working tree against an earlier commit, side by side against the same nginx: what a
# change to crates/load, http1 or http2 did to the client's cost.
#
# BASE_REV is built once into a cache keyed by its full commit id
# ($CACHE/<sha>/src from `git archive`, $CACHE/<sha>/target; later runs reuse it), the working
# tree's proxybench is built as usual, and the two run ALTERNATELY, ROUNDS rounds of
# `proxybench load $LOAD_ARGS` each (each round starts with the other binary than the round
# before, so neither always runs first), against one nginx worker answering `return 200`.
# Each run prints the client's CPU per request (user+sys from getrusage over the requests it
# completed), its req/s and the 1-minute load average when it ended. Then, per round, the paired
# ratio work/base of CPU per request and of req/s, and their median, quartiles and min..max,
# with how many rounds the working tree was cheaper. A ratio below 1 on CPU is a gain.
#
# The ratio of one round compares two runs a few seconds apart, so drift on a shared machine
# (other builds) falls on both; the spread says how far a single round can be trusted.
#
# nginx and the client are pinned to one core each (SERVER_CPU, CLIENT_CPU; PIN= pins
# nothing); PRIO="chrt -r 10" runs both under SCHED_RR (off by default: under the real-time
# throttle a side that fills its core has its CPU per request set by the rate, not its cost).
#
# Usage: bench/vs-base.sh BASE_REV
#   env: ROUNDS=9 LOAD_ARGS="-t1 -c50 -d5s" PIN=1 SERVER_CPU=0 CLIENT_CPU=1 PRIO=
#        CACHE=~/.cache/proxybench/base PB=target/release/proxybench NGINX=/usr/sbin/nginx
set -euo pipefail

BASE_REV=${1:-}
[ -n "$BASE_REV" ] || { echo "usage: bench/vs-base.sh BASE_REV   (a commit, tag or branch)" >&2; exit 2; }
ROUNDS=${ROUNDS:-9}
LOAD_ARGS=${LOAD_ARGS:--t1 -c50 -d5s}
PIN=${PIN-1}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
PRIO=${PRIO:-}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/common.sh
. "$ROOT/bench/common.sh"
CACHE=${CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/proxybench/base}
read -r -a prio <<<"$PRIO"
read -r -a load_args <<<"$LOAD_ARGS"

pb_need_nginx
pb_need python3 "python3 is needed for getrusage"
pb_need flock "flock is needed (apt-get install util-linux)"
[ -z "$PIN" ] || pb_need taskset "taskset is needed to pin the processes (apt-get install util-linux)"
SHA=$(git -C "$ROOT" rev-parse --verify --quiet "$BASE_REV^{commit}") ||
  { echo "vs-base: '$BASE_REV' is not a commit of $ROOT" >&2; exit 2; }

# The base build, once per commit: a lock keeps two runs from building the same one at once,
# and the binary is moved into place only when the build succeeded.
BASE_DIR=$CACHE/$SHA
BASE=$BASE_DIR/proxybench
mkdir -p "$BASE_DIR"
(
  flock 9
  if [ ! -x "$BASE" ]; then
    echo "vs-base: building $BASE_REV (${SHA:0:12}) once into $BASE_DIR (later runs reuse it)..." >&2
    rm -rf "$BASE_DIR/src"
    mkdir -p "$BASE_DIR/src"
    git -C "$ROOT" archive "$SHA" | tar -x -C "$BASE_DIR/src"
    (cd "$BASE_DIR/src" && CARGO_TARGET_DIR=$BASE_DIR/target cargo build --release --locked -q -p proxybench) ||
      { echo "vs-base: the build of $BASE_REV failed" >&2; exit 1; }
    cp "$BASE_DIR/target/release/proxybench" "$BASE.tmp"
    mv "$BASE.tmp" "$BASE"
  fi
) 9>"$BASE_DIR/.lock"
pb_ensure_built

pb_workdir vs-base

pin() { if [ -n "$PIN" ]; then echo taskset -c "$1"; fi; }
read -r -a pin_server <<<"$(pin "$SERVER_CPU")"
read -r -a pin_client <<<"$(pin "$CLIENT_CPU")"
PORT=${PORT:-$(pb_free_port)}
pb_hello_nginx_conf "$PORT"
pb_start_nginx "${pin_server[@]}" "${prio[@]}"
URL="http://127.0.0.1:$PORT/"

# One run under getrusage: prints "rps client_cpu_s requests load1".
measure() {
  python3 - "${pin_client[@]}" "${prio[@]}" "$@" <<'PY'
import re, resource, subprocess, sys
p = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
rps = float(re.search(r"^Requests/sec:\s+([\d.]+)", p.stdout, re.M).group(1))
reqs = int(re.search(r"^\s+(\d+) requests in", p.stdout, re.M).group(1))
load1 = open("/proc/loadavg").read().split()[0]
print(f"{rps:.0f} {ru.ru_utime + ru.ru_stime:.3f} {reqs} {load1}")
PY
}

echo "proxybench load $LOAD_ARGS $URL: working tree ($(git -C "$ROOT" describe --always --dirty)) vs base $BASE_REV (${SHA:0:12})"
echo "nginx (1 worker)${PIN:+ on cpu $SERVER_CPU, clients on cpu $CLIENT_CPU}${PRIO:+, under $PRIO}; $ROUNDS rounds"
echo "uptime: $(uptime)"
printf '%5s %-5s %10s %11s %11s %6s\n' round side req/s requests "cpu us/req" load1
: >"$WORK/rows"
for r in $(seq "$ROUNDS"); do
  if [ $((r % 2)) = 1 ]; then order="base work"; else order="work base"; fi
  for side in $order; do
    bin=$PB; [ "$side" = base ] && bin=$BASE
    read -r rps cpu reqs load1 < <(measure "$bin" load "${load_args[@]}" "$URL")
    per=$(python3 -c "print(f'{$cpu * 1e6 / max($reqs, 1):.3f}')")
    printf '%5s %-5s %10s %11s %11s %6s\n' "$r" "$side" "$rps" "$reqs" "$per" "$load1"
    echo "$r $side $rps $per" >>"$WORK/rows"
  done
done
python3 - "$WORK/rows" <<'PY'
import statistics as st, sys
rows = [l.split() for l in open(sys.argv[1])]
by = {}
for r, side, rps, per in rows:
    by.setdefault(int(r), {})[side] = (float(rps), float(per))
rounds = [by[r] for r in sorted(by) if {"work", "base"} <= set(by[r])]
def show(name, vals, better):
    q = st.quantiles(vals, n=4) if len(vals) >= 2 else [vals[0]] * 3
    wins = sum(1 for v in vals if better(v))
    print(f"{name:<22} median {st.median(vals):.3f}  quartiles {q[0]:.3f}..{q[2]:.3f}  "
          f"min..max {min(vals):.3f}..{max(vals):.3f}  working tree better in {wins} of {len(vals)}")
cpu = [w["work"][1] / w["base"][1] for w in rounds]
rps = [w["work"][0] / w["base"][0] for w in rounds]
print()
for side in ("work", "base"):
    print(f"{side}: cpu us/req median {st.median(w[side][1] for w in rounds):.3f}, "
          f"req/s median {st.median(w[side][0] for w in rounds):.0f}")
print("paired ratios work/base, one per round:")
show("client CPU per request", cpu, lambda v: v < 1)
show("req/s", rps, lambda v: v > 1)
PY
echo "uptime: $(uptime)"
