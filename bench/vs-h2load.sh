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
# shellcheck source=bench/common.sh
. "$ROOT/bench/common.sh"
PB_BASE=${PB_BASE:-}
pb_prio

pb_need h2load "h2load is not installed (apt-get install nghttp2-client)"
pb_need_nginx
pb_need python3 "python3 is needed for getrusage"
pb_need openssl "openssl is needed for the test certificate"
pb_need taskset "taskset is needed to pin the processes (apt-get install util-linux)"
[ -z "$PB_BASE" ] || [ -x "$PB_BASE" ] || { echo "vs-h2load: PB_BASE=$PB_BASE is not an executable" >&2; exit 2; }
pb_ensure_built

pb_workdir vs-h2load
pb_peer_nginx http2

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
        proxybench) read -r rps reqs cpu rss srv ng cl mach sreqs load1 < <(pb_measure "$PB" load --http2 "${PB_TLS[@]}" -t1 -c"$CONNS" -m"$STREAMS" -d"${DURATION}s" "$URL") ;;
        base) read -r rps reqs cpu rss srv ng cl mach sreqs load1 < <(pb_measure "$PB_BASE" load --http2 "${PB_TLS[@]}" -t1 -c"$CONNS" -m"$STREAMS" -d"${DURATION}s" "$URL") ;;
        h2load) read -r rps reqs cpu rss srv ng cl mach sreqs load1 < <(pb_measure h2load -t1 -c"$CONNS" -m"$STREAMS" -D"$DURATION" "$URL") ;;
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
