#!/usr/bin/env bash
# Does open loop hold its rate? Runs `proxybench load -R RATE` against nginx (1 worker,
# `return 200`) ROUNDS times and prints, per round: the target, the achieved send rate, the
# completed responses per second, late sends (more than 1 ms after their intended time) with
# the lateness p99 and max, and the worst whole second of the timeline. Pass: achieved within
# 1% of the target.
#
# Usage: bench/open-loop-rate.sh   (env: RATE=20000 ROUNDS=3 DURATION=10s CONNS=50 THREADS=1
#                                    ARRIVALS=even|poisson)
set -euo pipefail

RATE=${RATE:-20000}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10s}
CONNS=${CONNS:-50}
THREADS=${THREADS:-1}
ARRIVALS=${ARRIVALS:-even}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PB_DEFAULT=$ROOT/target/release/proxybench
PB=${PB:-$PB_DEFAULT}
NGINX=${NGINX:-/usr/sbin/nginx}

[ -x "$NGINX" ] || { echo "open-loop-rate: nginx is not installed (apt-get install nginx)" >&2; exit 2; }
command -v python3 >/dev/null || { echo "open-loop-rate: python3 is needed" >&2; exit 2; }
# The default binary is rebuilt when a source is newer; a PB given by path is used as it is.
if [ ! -x "$PB" ] || { [ "$PB" = "$PB_DEFAULT" ] && [ -n "$(find "$ROOT/crates" -newer "$PB" -name '*.rs' -print -quit)" ]; }; then
  echo "building proxybench (release)..." >&2
  (cd "$ROOT" && cargo build --release -q -p proxybench)
fi

WORK=$(mktemp -d /tmp/pb-open-loop.XXXXXX)
NGINX_PID=
cleanup() {
  if [ -n "$NGINX_PID" ]; then kill -TERM "$NGINX_PID" 2>/dev/null || true; wait "$NGINX_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

PORT=${PORT:-$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')}
USER_LINE=""; [ "$(id -u)" = 0 ] && USER_LINE="user root;"
cat >"$WORK/nginx.conf" <<EOF
$USER_LINE
worker_processes 1;
pid $WORK/nginx.pid;
error_log $WORK/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 1000000000;
  keepalive_timeout 300s;
  client_body_temp_path $WORK/body;
  server {
    listen 127.0.0.1:$PORT;
    location / { return 200 "hello\n"; }
  }
}
EOF
"$NGINX" -p "$WORK" -c "$WORK/nginx.conf" -e "$WORK/error.log" -g "daemon off;" &
NGINX_PID=$!
for _ in $(seq 100); do
  if (exec 3<>/dev/tcp/127.0.0.1/"$PORT") 2>/dev/null; then break; fi
  sleep 0.05
done

echo "proxybench load -R $RATE --arrivals $ARRIVALS -t$THREADS -c$CONNS -d$DURATION (nginx, 1 worker)"
for r in $(seq "$ROUNDS"); do
  "$PB" load -R "$RATE" --arrivals "$ARRIVALS" -t"$THREADS" -c"$CONNS" -d"$DURATION" \
    --format json "http://127.0.0.1:$PORT/" >"$WORK/round$r.json"
done

python3 - "$RATE" "$WORK"/round*.json <<'PY'
import json, statistics as st, sys
target = float(sys.argv[1])
rows, achieved = [], []
print(f"{'round':>5} {'target/s':>9} {'achieved/s':>11} {'err %':>7} {'resp/s':>9} "
      f"{'intended':>9} {'sent':>9} {'late':>6} {'late p99':>9} {'late max':>9} {'worst s':>8} {'p99':>8}")
for i, path in enumerate(sys.argv[2:], 1):
    s = json.load(open(path))
    sch = s["schedule"]
    start, end = s["start_s"], s["start_s"] + s["elapsed_s"]
    full = [row["requests"] for row in s["timeline"] if row["t"] >= start and row["t"] + 1 <= end]
    worst = min(full) if full else 0
    p99 = next(p["us"] for p in s["latency"]["percentiles"] if p["p"] == 99.0)
    err = 100 * (sch["achieved_rate"] - target) / target
    achieved.append(sch["achieved_rate"])
    print(f"{i:>5} {target:>9.0f} {sch['achieved_rate']:>11.1f} {err:>+7.3f} "
          f"{s['requests'] / s['elapsed_s']:>9.1f} {sch['intended']:>9} {sch['sent']:>9} "
          f"{sch['late']:>6} {sch['late_p99_us']:>7}us {sch['late_max_us']:>7}us {worst:>8} {p99:>6}us")
med = st.median(achieved)
ok = abs(med - target) / target <= 0.01
print(f"\nmedian achieved {med:.1f}/s (spread {min(achieved):.1f}..{max(achieved):.1f}): "
      f"{100 * (med - target) / target:+.3f}% of target -> {'PASS' if ok else 'FAIL'} (within 1%)")
sys.exit(0 if ok else 1)
PY
