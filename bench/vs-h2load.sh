#!/usr/bin/env bash
# proxybench load --http2 vs h2load (nghttp2), side by side against the same nginx (1 worker,
# `return 200`), over h2c (prior knowledge) and over TLS (h2 by ALPN).
#
# Runs the two tools ALTERNATELY (so drift on a noisy machine hits both alike), ROUNDS rounds
# each of `-t1 -c50 -m10 -d10s` per mode, and prints per tool: requests/s, client CPU
# microseconds per request (user+sys from getrusage of the client process) and nginx's CPU use
# during the run (100% means the server, not the client, was the limit); then the medians and
# the ratios proxybench/h2load.
#
# Targets: req/s ratio >= 1.0, CPU per request ratio <= 1.0.
#
# Prerequisites: nginx, python3, openssl, h2load (Debian: apt-get install nghttp2-client).
# Usage: bench/vs-h2load.sh   (env: ROUNDS=3 DURATION=10 CONNS=50 STREAMS=10 MODES="h2c h2")
set -euo pipefail

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10}
CONNS=${CONNS:-50}
STREAMS=${STREAMS:-10}
MODES=${MODES:-h2c h2}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PB=${PB:-$ROOT/target/release/proxybench}
NGINX=${NGINX:-/usr/sbin/nginx}

command -v h2load >/dev/null || { echo "vs-h2load: h2load is not installed (apt-get install nghttp2-client)" >&2; exit 2; }
[ -x "$NGINX" ] || { echo "vs-h2load: nginx is not installed (apt-get install nginx)" >&2; exit 2; }
command -v python3 >/dev/null || { echo "vs-h2load: python3 is needed for getrusage" >&2; exit 2; }
command -v openssl >/dev/null || { echo "vs-h2load: openssl is needed for the test certificate" >&2; exit 2; }
if [ ! -x "$PB" ] || [ -n "$(find "$ROOT/crates" -newer "$PB" -name '*.rs' -print -quit)" ]; then
  echo "building proxybench (release)..." >&2
  (cd "$ROOT" && cargo build --release -q -p proxybench)
fi

WORK=$(mktemp -d /tmp/pb-vs-h2load.XXXXXX)
NGINX_PID=
cleanup() {
  if [ -n "$NGINX_PID" ]; then kill -TERM "$NGINX_PID" 2>/dev/null || true; wait "$NGINX_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
PORT=$(free_port)
TLS_PORT=$(free_port)
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$WORK/key.pem" -out "$WORK/cert.pem" -days 2 \
  -subj /CN=127.0.0.1 -addext "subjectAltName=IP:127.0.0.1" 2>/dev/null
USER_LINE=""; [ "$(id -u)" = 0 ] && USER_LINE="user root;"
cat >"$WORK/nginx.conf" <<CONF
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
    listen 127.0.0.1:$PORT http2;
    listen 127.0.0.1:$TLS_PORT ssl http2;
    ssl_certificate $WORK/cert.pem;
    ssl_certificate_key $WORK/key.pem;
    location / { return 200 "hello\n"; }
  }
}
CONF
"$NGINX" -p "$WORK" -c "$WORK/nginx.conf" -e "$WORK/error.log" -g "daemon off;" &
NGINX_PID=$!
for _ in $(seq 100); do
  if (exec 3<>/dev/tcp/127.0.0.1/"$PORT") 2>/dev/null; then break; fi
  sleep 0.05
done
WORKER=$(pgrep -P "$NGINX_PID" | head -1)

# Runs one client under getrusage; prints "rps cpu_s nginx_cpu_pct requests".
measure() {
  python3 - "$WORKER" "$@" <<'PY'
import os, re, resource, subprocess, sys, time
worker, cmd = sys.argv[1], sys.argv[2:]
hz = os.sysconf("SC_CLK_TCK")
def ticks():
    with open(f"/proc/{worker}/stat") as f:
        parts = f.read().rsplit(")", 1)[1].split()
    return int(parts[11]) + int(parts[12])
t0, n0 = time.monotonic(), ticks()
p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
out = p.stdout
wall, nginx = time.monotonic() - t0, (ticks() - n0) / hz
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
m = re.search(r"^Requests/sec:\s+([\d.]+)", out, re.M)
if m:  # proxybench (wrk's block)
    rps = float(m.group(1))
    reqs = int(re.search(r"^\s+(\d+) requests in", out, re.M).group(1))
else:  # h2load
    rps = float(re.search(r"^finished in [\d.]+\w*, ([\d.]+) req/s", out, re.M).group(1))
    reqs = int(re.search(r"^requests: \d+ total, \d+ started, (\d+) done", out, re.M).group(1))
print(f"{rps:.0f} {ru.ru_utime + ru.ru_stime:.3f} {100 * nginx / wall:.0f} {reqs}")
PY
}

echo "proxybench load --http2 -t1 -c$CONNS -m$STREAMS -d${DURATION}s  vs  h2load -t1 -c$CONNS -m$STREAMS -D$DURATION  (nginx, 1 worker)"
SUMMARY=()
for mode in $MODES; do
  if [ "$mode" = h2 ]; then URL="https://127.0.0.1:$TLS_PORT/"; PB_TLS=(-k); else URL="http://127.0.0.1:$PORT/"; PB_TLS=(); fi
  echo
  echo "== $mode: $URL"
  printf '%-11s %5s %10s %11s %12s %7s\n' tool round req/s requests "cpu us/req" "nginx%"
  PB_R=(); PB_C=(); H_R=(); H_C=()
  for r in $(seq "$ROUNDS"); do
    for tool in proxybench h2load; do
      if [ "$tool" = proxybench ]; then
        read -r rps cpu ng reqs < <(measure "$PB" load --http2 "${PB_TLS[@]}" -t1 -c"$CONNS" -m"$STREAMS" -d"${DURATION}s" "$URL")
      else
        read -r rps cpu ng reqs < <(measure h2load -t1 -c"$CONNS" -m"$STREAMS" -D"$DURATION" "$URL")
      fi
      per=$(python3 -c "print(f'{$cpu * 1e6 / max($reqs, 1):.2f}')")
      printf '%-11s %5s %10s %11s %12s %7s\n' "$tool" "$r" "$rps" "$reqs" "$per" "$ng"
      if [ "$tool" = proxybench ]; then PB_R+=("$rps"); PB_C+=("$per"); else H_R+=("$rps"); H_C+=("$per"); fi
    done
  done
  SUMMARY+=("$(python3 - "$mode" "${PB_R[*]}" "${PB_C[*]}" "${H_R[*]}" "${H_C[*]}" <<'PY'
import statistics as st, sys
mode = sys.argv[1]
pr, pc, hr, hc = ([float(x) for x in a.split()] for a in sys.argv[2:6])
rr = st.median(pr) / st.median(hr)
cr = st.median(pc) / st.median(hc)
print(f"{mode:<4} proxybench {st.median(pr):>8.0f} req/s {st.median(pc):>6.2f} us/req | "
      f"h2load {st.median(hr):>8.0f} req/s {st.median(hc):>6.2f} us/req | "
      f"ratios: req/s {rr:.3f} (target >= 1.0), CPU/req {cr:.3f} (target <= 1.0)")
PY
)")
done
echo
echo "medians:"
printf '%s\n' "${SUMMARY[@]}"
