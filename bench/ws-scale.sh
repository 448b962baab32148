#!/usr/bin/env bash
# 5,000 WebSockets through nginx: what proxybench's client costs per connection and per message.
#
# One `proxybench backend` (WebSocket echo) behind one nginx worker with a websocket location
# (Upgrade and Connection passed on, as the model's `routes.websocket` renders them). Each round,
# `proxybench load` opens CONNS WebSockets over RAMP seconds, holds them DURATION seconds with
# RATE messages of SIZE bytes a second on each (every one echoed and its round trip timed), then
# closes them with a close handshake. Each round prints what the load measured of itself:
#   - client memory per open connection: the load process's RSS when the most connections were
#     open, less its RSS before the first connect, over those connections (kernel socket buffers
#     are not in RSS);
#   - client CPU per message: the CPU time of the load's threads (user + system) over the
#     messages sent and received (echoes and the server's pushes);
# and the counts (opened, dropped, sent, echoed), the round trip's p50 and p99, and nginx's
# worker RSS with the connections open (from /proc), over the same connections. Then the medians.
#
# A peer: k6 (which has a WebSocket client) is not used here: the package lists this machine
# reaches mark it not to be used (AGPL). Debian's tsung and npm's artillery can hold WebSockets;
# neither is driven by this script, so there is no side-by-side ratio yet.
#
# The open-files limit here is 20000: nginx needs two descriptors per proxied connection
# (10,000 for 5,000), the client and the backend one each, in processes of their own.
#
# Prerequisites: nginx, python3.
# Usage: bench/ws-scale.sh   (env: ROUNDS=3 CONNS=5000 RAMP=5 DURATION=20 RATE=1 SIZE=64 PB=...)
set -euo pipefail

ROUNDS=${ROUNDS:-3}
CONNS=${CONNS:-5000}
RAMP=${RAMP:-5}
DURATION=${DURATION:-20}
RATE=${RATE:-1}
SIZE=${SIZE:-64}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PB_DEFAULT=$ROOT/target/release/proxybench
PB=${PB:-$PB_DEFAULT}
NGINX=${NGINX:-/usr/sbin/nginx}

[ -x "$NGINX" ] || { echo "ws-scale: nginx is not installed (apt-get install nginx)" >&2; exit 2; }
command -v python3 >/dev/null || { echo "ws-scale: python3 is needed to read the results" >&2; exit 2; }
if [ ! -x "$PB" ] || { [ "$PB" = "$PB_DEFAULT" ] && [ -n "$(find "$ROOT/crates" -newer "$PB" -name '*.rs' -print -quit)" ]; }; then
  echo "building proxybench (release)..." >&2
  (cd "$ROOT" && cargo build --release -q -p proxybench)
fi

WORK=$(mktemp -d /tmp/pb-ws-scale.XXXXXX)
NGINX_PID=
BACKEND_PID=
cleanup() {
  [ -z "$NGINX_PID" ] || { kill -TERM "$NGINX_PID" 2>/dev/null || true; wait "$NGINX_PID" 2>/dev/null || true; }
  [ -z "$BACKEND_PID" ] || { kill -TERM "$BACKEND_PID" 2>/dev/null || true; wait "$BACKEND_PID" 2>/dev/null || true; }
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
BACKEND_PORT=$(free_port)
PORT=$(free_port)

"$PB" backend --listen "127.0.0.1:$BACKEND_PORT" >"$WORK/backend.out" 2>"$WORK/backend.err" &
BACKEND_PID=$!

USER_LINE=""; [ "$(id -u)" = 0 ] && USER_LINE="user root;"
mkdir -p "$WORK/nginx"
cat >"$WORK/nginx/nginx.conf" <<CONF
$USER_LINE
worker_processes 1;
worker_rlimit_nofile 20000;
pid $WORK/nginx/nginx.pid;
error_log $WORK/nginx/error.log warn;
daemon off;
events { worker_connections 19000; }
http {
    access_log off;
    client_body_temp_path $WORK/nginx/body;
    proxy_temp_path $WORK/nginx/proxy;
    map \$http_upgrade \$pb_connection_upgrade { default upgrade; "" ""; }
    upstream app { server 127.0.0.1:$BACKEND_PORT; }
    server {
        listen 127.0.0.1:$PORT;
        location / {
            proxy_pass http://app;
            proxy_http_version 1.1;
            proxy_set_header Upgrade \$http_upgrade;
            proxy_set_header Connection \$pb_connection_upgrade;
            proxy_read_timeout 300s;
        }
    }
}
CONF
"$NGINX" -p "$WORK/nginx" -c "$WORK/nginx/nginx.conf" &
NGINX_PID=$!
for _ in $(seq 50); do
  (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break
  sleep 0.1
done

worker_pid() { pgrep -P "$NGINX_PID" | head -n 1; }
rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }

echo "ws-scale: $CONNS WebSockets through nginx 1 worker, ramp ${RAMP}s, ${DURATION}s at $RATE msg/s of $SIZE B each, $ROUNDS rounds"
printf '%-5s %8s %8s %9s %9s %12s %12s %10s %10s %14s\n' round opened dropped sent echoed 'B/conn' 'us/msg' 'rtt p50' 'rtt p99' 'nginx B/conn'
for r in $(seq "$ROUNDS"); do
  W=$(worker_pid)
  NGINX_BASE=$(rss_kib "$W")
  "$PB" load -c "$CONNS" --ramp "${RAMP}s" -d "${DURATION}s" --message-rate "$RATE" \
    --message-size "$SIZE" --timeout 10s --format json "ws://127.0.0.1:$PORT/ws" >"$WORK/round-$r.json" &
  LOAD=$!
  # nginx's memory once the ramp is over and the connections are held.
  sleep $((RAMP + DURATION / 2))
  NGINX_OPEN=$(rss_kib "$W")
  wait "$LOAD"
  python3 - "$WORK/round-$r.json" "$r" "$NGINX_BASE" "$NGINX_OPEN" >>"$WORK/rows" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
r, base, held = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
c = s["cost"]
p = {x["p"]: x["us"] for x in s["rtt"]["percentiles"]}
nginx = (held - base) * 1024 // max(s["open_max"], 1)
row = [r, s["opened"], s["dropped"], s["messages"]["sent"], s["messages"]["answered"],
       c.get("bytes_per_connection", 0), round(c.get("cpu_per_message_us", 0.0), 2),
       p.get(50.0, 0), p.get(99.0, 0), nginx]
print(" ".join(str(x) for x in row))
PY
  tail -n 1 "$WORK/rows" | awk '{printf "%-5s %8s %8s %9s %9s %12s %12s %9sus %9sus %14s\n", $1,$2,$3,$4,$5,$6,$7,$8,$9,$10}'
done
python3 - "$WORK/rows" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
med = lambda k: statistics.median(float(r[k]) for r in rows)
print(f"median: client {med(5):.0f} B per open connection, {med(6):.2f} us CPU per message; "
      f"round trip p50 {med(7):.0f} us, p99 {med(8):.0f} us; nginx {med(9):.0f} B per connection")
PY
