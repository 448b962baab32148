#!/usr/bin/env bash
# proxybench load --http2 vs h2load (nghttp2), side by side against the same nginx (1 worker,
# `return 200`), over h2c (prior knowledge) and over TLS (h2 by ALPN).
#
# nginx is pinned to one core (SERVER_CPU) and the client to the other (CLIENT_CPU), so the two
# never share a core. The tools run ALTERNATELY (so drift on a noisy machine hits both alike),
# ROUNDS rounds each of `-t1 -c50 -m10` for DURATION seconds per mode, and each run prints:
# requests/s, the client's CPU per request (user+sys from getrusage of the client process), the
# SERVER's CPU per request (the nginx worker's time on CPU from /proc/PID/schedstat, over the
# requests the client completed: what one request of this client costs the server), and nginx's
# CPU use during the run (100% means the server, not the client, was the limit), the
# client's, the machine's whole CPU per request (every CPU's busy time from /proc/stat over the
# run, divided by the requests nginx counted in stub_status: on loopback the kernel's work for a
# request falls on either side, and this figure does not care which; it also holds whatever
# else ran on the machine meanwhile) and the 1-minute load average. Then the medians and the
# ratios proxybench/h2load, with a note when both sides filled their cores (then client CPU
# per request is the core over the rate, not a cost).
#
# Goals (issue 27): req/s >= 1.0x h2load's, server CPU per request <= 1.0x, client CPU per
# request <= 0.8x.
#
# PB_BASE=path/to/another/proxybench adds that binary as a third tool in every round (a build
# from before a change), with the ratios proxybench/base: before and after in one run.
#
# PRIO=auto (the default) runs nginx and the clients under SCHED_RR 10 when root, so unrelated
# work on a shared machine does not preempt them; PRIO= runs them as they are.
#
# Prerequisites: nginx, python3, openssl, taskset, h2load (Debian: apt-get install
# nghttp2-client; `make bench-deps`).
# Usage: bench/vs-h2load.sh   (env: ROUNDS=3 DURATION=10 CONNS=50 STREAMS=10 MODES="h2c h2"
#                               SERVER_CPU=0 CLIENT_CPU=1 PRIO=auto PB_BASE=)
set -euo pipefail

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10}
CONNS=${CONNS:-50}
STREAMS=${STREAMS:-10}
MODES=${MODES:-h2c h2}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PB_DEFAULT=$ROOT/target/release/proxybench
PB=${PB:-$PB_DEFAULT}
PB_BASE=${PB_BASE:-}
NGINX=${NGINX:-/usr/sbin/nginx}
PRIO=${PRIO-auto}
if [ "$PRIO" = auto ]; then
  PRIO=""
  [ "$(id -u)" = 0 ] && command -v chrt >/dev/null && PRIO="chrt -r 10"
fi
read -r -a prio <<<"$PRIO"

command -v h2load >/dev/null || { echo "vs-h2load: h2load is not installed (apt-get install nghttp2-client)" >&2; exit 2; }
[ -x "$NGINX" ] || { echo "vs-h2load: nginx is not installed (apt-get install nginx)" >&2; exit 2; }
command -v python3 >/dev/null || { echo "vs-h2load: python3 is needed for getrusage" >&2; exit 2; }
command -v openssl >/dev/null || { echo "vs-h2load: openssl is needed for the test certificate" >&2; exit 2; }
command -v taskset >/dev/null || { echo "vs-h2load: taskset is needed to pin the processes (apt-get install util-linux)" >&2; exit 2; }
[ -z "$PB_BASE" ] || [ -x "$PB_BASE" ] || { echo "vs-h2load: PB_BASE=$PB_BASE is not an executable" >&2; exit 2; }
# The default binary is rebuilt when a source is newer; a PB given by path is used as it is.
if [ ! -x "$PB" ] || { [ "$PB" = "$PB_DEFAULT" ] && [ -n "$(find "$ROOT/crates" -newer "$PB" -name '*.rs' -print -quit)" ]; }; then
  echo "building proxybench (release)..." >&2
  (cd "$ROOT" && cargo build --release -q -p proxybench)
fi

WORK=$(mktemp -d /tmp/pb-vs-h2load.XXXXXX)
NGINX_PID=
cleanup() {
  if [ -n "$NGINX_PID" ]; then kill -TERM "$NGINX_PID" 2>/dev/null || true; wait "$NGINX_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
PORT=$(free_port)
TLS_PORT=$(free_port)
STUB_PORT=$(free_port)
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$WORK/key.pem" -out "$WORK/cert.pem" -days 2 \
  -subj /CN=127.0.0.1 -addext "subjectAltName=IP:127.0.0.1" 2>/dev/null
USER_LINE=""; [ "$(id -u)" = 0 ] && USER_LINE="user root;"
# SSL_CIPHERS=... makes nginx choose the cipher (the same for every client) instead of following
# the client's order (nginx's default), to compare the clients' engines alone.
CIPHER_LINES=""
[ -n "${SSL_CIPHERS:-}" ] && CIPHER_LINES="ssl_ciphers $SSL_CIPHERS; ssl_prefer_server_ciphers on;"
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
  log_format cipher '\$ssl_protocol \$ssl_cipher';
  client_body_temp_path $WORK/body;
  server {
    listen 127.0.0.1:$PORT http2;
    listen 127.0.0.1:$TLS_PORT ssl http2;
    ssl_certificate $WORK/cert.pem;
    ssl_certificate_key $WORK/key.pem;
    $CIPHER_LINES
    location / { return 200 "hello\n"; }
    location = /cipher { access_log $WORK/cipher.log cipher; return 200 "hello\n"; }
  }
  # The server's own count of requests (stub_status), read before and after each run.
  server {
    listen 127.0.0.1:$STUB_PORT;
    location = /stub { stub_status; }
  }
}
CONF
taskset -c "$SERVER_CPU" "${prio[@]}" "$NGINX" -p "$WORK" -c "$WORK/nginx.conf" -e "$WORK/error.log" -g "daemon off;" &
NGINX_PID=$!
for _ in $(seq 100); do
  if (exec 3<>/dev/tcp/127.0.0.1/"$PORT") 2>/dev/null; then break; fi
  sleep 0.05
done
WORKER=$(pgrep -P "$NGINX_PID" | head -1)

# Runs one client pinned to CLIENT_CPU under getrusage; prints
# "rps client_cpu_s server_cpu_s nginx_cpu_pct requests client_cpu_pct machine_cpu_s server_requests load1".
measure() {
  python3 - "$WORKER" "$STUB_PORT" taskset -c "$CLIENT_CPU" "${prio[@]}" "$@" <<'PY'
import re, resource, subprocess, sys, time, urllib.request
worker, stub, cmd = sys.argv[1], sys.argv[2], sys.argv[3:]
def machine_s():
    # Every CPU's busy time (all but idle and iowait) from /proc/stat, in seconds: the client,
    # nginx, the kernel's work for both on loopback, and whatever else ran meanwhile.
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (sum(v[:8]) - v[3] - v[4]) / 100.0
def served():
    # nginx's own count of requests (stub_status); each read counts itself once.
    with urllib.request.urlopen(f"http://127.0.0.1:{stub}/stub", timeout=5) as r:
        return int(r.read().decode().splitlines()[2].split()[2])
def server_ns():
    # Time on CPU in ns (schedstat's first field): exact, where /proc/PID/stat has 10 ms ticks.
    with open(f"/proc/{worker}/schedstat") as f:
        return int(f.read().split()[0])
s0 = served()
t0, n0, m0 = time.monotonic(), server_ns(), machine_s()
p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
out = p.stdout
wall, nginx, machine = time.monotonic() - t0, (server_ns() - n0) / 1e9, machine_s() - m0
server_reqs = served() - s0 - 1
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
m = re.search(r"^Requests/sec:\s+([\d.]+)", out, re.M)
if m:  # proxybench (wrk's block)
    rps = float(m.group(1))
    reqs = int(re.search(r"^\s+(\d+) requests in", out, re.M).group(1))
else:  # h2load
    rps = float(re.search(r"^finished in [\d.]+\w*, ([\d.]+) req/s", out, re.M).group(1))
    reqs = int(re.search(r"^requests: \d+ total, \d+ started, (\d+) done", out, re.M).group(1))
cpu = ru.ru_utime + ru.ru_stime
load1 = open("/proc/loadavg").read().split()[0]
print(f"{rps:.0f} {cpu:.3f} {nginx:.4f} {100 * nginx / wall:.0f} {reqs} {100 * cpu / wall:.0f} "
      f"{machine:.2f} {server_reqs} {load1}")
PY
}

TOOLS=(proxybench h2load)
[ -n "$PB_BASE" ] && TOOLS=(proxybench base h2load)
echo "proxybench load --http2 -t1 -c$CONNS -m$STREAMS -d${DURATION}s  vs  h2load -t1 -c$CONNS -m$STREAMS -D$DURATION"
echo "nginx (1 worker) on cpu $SERVER_CPU, clients on cpu $CLIENT_CPU${PRIO:+, under $PRIO}${PB_BASE:+; base = $PB_BASE}"
echo "uptime: $(uptime)"
SUMMARY=()
for mode in $MODES; do
  if [ "$mode" = h2 ]; then URL="https://127.0.0.1:$TLS_PORT/"; PB_TLS=(-k); else URL="http://127.0.0.1:$PORT/"; PB_TLS=(); fi
  echo
  echo "== $mode: $URL"
  if [ "$mode" = h2 ]; then
    # What each client negotiated (nginx follows the client's order unless SSL_CIPHERS is set).
    for tool in "${TOOLS[@]}"; do
      : >"$WORK/cipher.log"
      case $tool in
        proxybench) "$PB" load --http2 -k -n 1 -c 1 "${URL}cipher" >/dev/null 2>&1 || true ;;
        base) "$PB_BASE" load --http2 -k -n 1 -c 1 "${URL}cipher" >/dev/null 2>&1 || true ;;
        h2load) h2load -n 1 -c 1 "${URL}cipher" >/dev/null 2>&1 || true ;;
      esac
      echo "   $tool negotiates: $(head -1 "$WORK/cipher.log")"
    done
  fi
  printf '%-11s %5s %10s %11s %14s %14s %7s %8s %15s %6s\n' tool round req/s requests "client us/req" "server us/req" "nginx%" "client%" "machine us/req" load1
  : >"$WORK/rows"
  for r in $(seq "$ROUNDS"); do
    # Each round starts with the next tool in turn, so no tool always runs first.
    n=${#TOOLS[@]}
    for k in $(seq 0 $((n - 1))); do
      tool=${TOOLS[$(((k + r - 1) % n))]}
      case $tool in
        proxybench) read -r rps cpu srv ng reqs cl mach sreqs load1 < <(measure "$PB" load --http2 "${PB_TLS[@]}" -t1 -c"$CONNS" -m"$STREAMS" -d"${DURATION}s" "$URL") ;;
        base) read -r rps cpu srv ng reqs cl mach sreqs load1 < <(measure "$PB_BASE" load --http2 "${PB_TLS[@]}" -t1 -c"$CONNS" -m"$STREAMS" -d"${DURATION}s" "$URL") ;;
        h2load) read -r rps cpu srv ng reqs cl mach sreqs load1 < <(measure h2load -t1 -c"$CONNS" -m"$STREAMS" -D"$DURATION" "$URL") ;;
      esac
      read -r per sper mper < <(python3 -c "n=max($reqs,1); print(f'{$cpu*1e6/n:.2f} {$srv*1e6/n:.2f} {$mach*1e6/max($sreqs,1):.2f}')")
      printf '%-11s %5s %10s %11s %14s %14s %7s %8s %15s %6s\n' "$tool" "$r" "$rps" "$reqs" "$per" "$sper" "$ng" "$cl" "$mper" "$load1"
      echo "$tool $rps $per $sper $ng $cl $mper" >>"$WORK/rows"
    done
  done
  SUMMARY+=("$(python3 - "$mode" "$WORK/rows" <<'PY'
import statistics as st, sys
mode, rows = sys.argv[1], [l.split() for l in open(sys.argv[2])]
med = {}
for tool in dict.fromkeys(r[0] for r in rows):
    mine = [r for r in rows if r[0] == tool]
    med[tool] = [st.median(float(r[k]) for r in mine) for k in (1, 2, 3, 6)]
out = []
for tool, (rps, cpu, srv, mach) in med.items():
    out.append(f"{mode:<4} {tool:<10} {rps:>8.0f} req/s  client {cpu:>6.2f} us/req  server {srv:>6.2f} us/req  "
               f"machine {mach:>6.2f} us/req")
def ratios(a, b, goals):
    (ar, ac, asv, am), (br, bc, bsv, bm) = med[a], med[b]
    g = (lambda s: f" (goal {s})") if goals else (lambda s: "")
    return (f"{mode:<4} {a}/{b}: req/s {ar / br:.3f}{g('>= 1.0')}, server CPU/req {asv / bsv:.3f}{g('<= 1.0')}, "
            f"client CPU/req {ac / bc:.3f}{g('<= 0.8')}, machine CPU/req {am / bm:.3f}")
out.append(ratios("proxybench", "h2load", True))
if "base" in med:
    out.append(ratios("base", "h2load", True))
    out.append(ratios("proxybench", "base", False))
# When the client and nginx both filled their cores (the real-time throttle lets a SCHED_RR
# task have 95%), each tool's CPU per request is its core over its rate: the client ratio is
# then the inverse of the req/s ratio and says nothing of what a request costs the client.
full = [r for r in rows if float(r[4]) >= 90 and float(r[5]) >= 90]
if 2 * len(full) > len(rows):
    out.append(f"{mode:<4} note: in {len(full)} of {len(rows)} runs nginx and the client both used >= 90% "
               "of their cores, so client CPU/req follows the rate, not the client's own cost")
print("\n".join(out))
PY
)")
done
echo
echo "medians:"
printf '%s\n' "${SUMMARY[@]}"
echo "uptime: $(uptime)"
