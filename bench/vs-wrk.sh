#!/usr/bin/env bash
# proxybench load vs wrk, side by side against the same nginx (1 worker, `return 200`).
#
# Runs the two tools ALTERNATELY (so drift on a noisy machine hits both alike), ROUNDS rounds
# each of `-t1 -c50 -d10s`, and prints per tool: requests/s, client CPU seconds per million
# requests (user+sys from getrusage of the client process), peak RSS (VmHWM), and nginx's CPU use
# during the run (100% means the server, not the client, was the limit); then the medians,
# their spread (min..max), and the ratios proxybench/wrk.
#
# Targets: req/s ratio >= 1.0, CPU per request ratio <= 1.0 (proxybench records every latency
# in an HDR histogram; wrk keeps its own fixed array).
#
# proxybench drives plain HTTP with io_uring when the kernel allows (`--io auto`); measure the
# epoll path with PB_ARGS="--io epoll".
#
# Usage: bench/vs-wrk.sh   (env: ROUNDS=3 DURATION=10s CONNS=50 THREADS=1 PORT=auto PB_ARGS=)
set -euo pipefail

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10s}
CONNS=${CONNS:-50}
THREADS=${THREADS:-1}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PB=${PB:-$ROOT/target/release/proxybench}
NGINX=${NGINX:-/usr/sbin/nginx}

command -v wrk >/dev/null || { echo "vs-wrk: wrk is not installed (apt-get install wrk)" >&2; exit 2; }
[ -x "$NGINX" ] || { echo "vs-wrk: nginx is not installed (apt-get install nginx)" >&2; exit 2; }
command -v python3 >/dev/null || { echo "vs-wrk: python3 is needed for getrusage" >&2; exit 2; }
if [ ! -x "$PB" ] || [ -n "$(find "$ROOT/crates" -newer "$PB" -name '*.rs' -print -quit)" ]; then
  echo "building proxybench (release)..." >&2
  (cd "$ROOT" && cargo build --release -q -p proxybench)
fi

WORK=$(mktemp -d /tmp/pb-vs-wrk.XXXXXX)
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
WORKER=$(pgrep -P "$NGINX_PID" | head -1)
URL="http://127.0.0.1:$PORT/"

# Runs one client under getrusage; prints "rps cpu_s maxrss_kb nginx_cpu_pct requests".
measure() {
  python3 - "$WORKER" "$@" <<'PY'
import os, re, resource, subprocess, sys, time
worker, cmd = sys.argv[1], sys.argv[2:]
hz = os.sysconf("SC_CLK_TCK")
def ticks():
    with open(f"/proc/{worker}/stat") as f:
        parts = f.read().rsplit(")", 1)[1].split()
    return int(parts[11]) + int(parts[12])
def hwm(pid):
    # Peak RSS (VmHWM) of the client itself; getrusage's maxrss would include the python
    # interpreter that forked it.
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None
t0, n0 = time.monotonic(), ticks()
p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
peak = 0
while p.poll() is None:
    peak = max(peak, hwm(p.pid) or 0)
    time.sleep(0.05)
stdout = p.stdout.read()
wall, nginx = time.monotonic() - t0, (ticks() - n0) / hz
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
rps = float(re.search(r"^Requests/sec:\s+([\d.]+)", stdout, re.M).group(1))
reqs = int(re.search(r"^\s+(\d+) requests in", stdout, re.M).group(1))
print(f"{rps:.0f} {ru.ru_utime + ru.ru_stime:.3f} {peak} {100 * nginx / wall:.0f} {reqs}")
PY
}

echo "proxybench load ${PB_ARGS:+$PB_ARGS }-t$THREADS -c$CONNS -d$DURATION  vs  wrk -t$THREADS -c$CONNS -d$DURATION  (nginx, 1 worker, $URL)"
printf '%-11s %5s %10s %11s %13s %9s %7s\n' tool round req/s requests "cpu s/Mreq" "rss MB" "nginx%"
declare -a PB_R PB_C PB_M WRK_R WRK_C WRK_M
for r in $(seq "$ROUNDS"); do
  for tool in proxybench wrk; do
    if [ "$tool" = proxybench ]; then
      # shellcheck disable=SC2086
      read -r rps cpu rss ng reqs < <(measure "$PB" load ${PB_ARGS:-} -t"$THREADS" -c"$CONNS" -d"$DURATION" "$URL")
    else
      read -r rps cpu rss ng reqs < <(measure wrk -t"$THREADS" -c"$CONNS" -d"$DURATION" "$URL")
    fi
    per_m=$(python3 -c "print(f'{$cpu * 1e6 / $reqs:.2f}')")
    mb=$(python3 -c "print(f'{$rss / 1024:.1f}')")
    printf '%-11s %5s %10s %11s %13s %9s %7s\n' "$tool" "$r" "$rps" "$reqs" "$per_m" "$mb" "$ng"
    if [ "$tool" = proxybench ]; then PB_R+=("$rps"); PB_C+=("$per_m"); PB_M+=("$mb")
    else WRK_R+=("$rps"); WRK_C+=("$per_m"); WRK_M+=("$mb"); fi
  done
done

python3 - "${PB_R[*]}" "${PB_C[*]}" "${PB_M[*]}" "${WRK_R[*]}" "${WRK_C[*]}" "${WRK_M[*]}" <<'PY'
import statistics as st, sys
pr, pc, pm, wr, wc, wm = ([float(x) for x in a.split()] for a in sys.argv[1:7])
def line(name, r, c, m):
    print(f"{name:<11} req/s {st.median(r):>9.0f} ({min(r):.0f}..{max(r):.0f})   "
          f"cpu s/Mreq {st.median(c):>6.2f} ({min(c):.2f}..{max(c):.2f})   peak RSS {st.median(m):.1f} MB")
print("\nmedians (spread min..max):")
line("proxybench", pr, pc, pm)
line("wrk", wr, wc, wm)
rr = st.median(pr) / st.median(wr)
cr = st.median(pc) / st.median(wc)
print(f"\nratios proxybench/wrk: req/s {rr:.3f} (target >= 1.0), "
      f"CPU per request {cr:.3f} (target <= 1.0; efficiency {1 / cr:.2f}x wrk)")
PY
