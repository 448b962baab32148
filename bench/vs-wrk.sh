#!/usr/bin/env bash
# proxybench load vs wrk, side by side against the same nginx (1 worker, `return 200`), over
# plain HTTP and over HTTPS (keep-alive; TLS 1.2, the highest that Debian's nginx 1.22 offers by default).
#
# nginx is pinned to one core (SERVER_CPU) and the client to the other (CLIENT_CPU). The tools
# run ALTERNATELY (so drift on a noisy machine hits both alike), ROUNDS rounds each of
# `-t1 -c50 -d10s` per mode, and each run prints: requests/s, the client's CPU seconds per
# million requests (user+sys from getrusage of the client process), its peak RSS (VmHWM), the
# server's CPU per request (the nginx worker's time on CPU from /proc/PID/schedstat over the
# requests the client completed), nginx's CPU use (100% means the server, not the client,
# set the rate), the machine's whole CPU per request (every CPU's busy time from /proc/stat over
# the run, divided by the requests nginx counted in stub_status: on loopback the kernel's work
# for a request falls on either side, and this figure does not care which; it also holds
# whatever else ran on the machine meanwhile, so it needs the alternation and a quiet machine)
# and the 1-minute load average; then the medians, their spread (min..max) and the ratios
# proxybench/wrk.
#
# Goals (issue 27): client CPU per request <= 0.75x wrk's; req/s >= 1.2x wrk's over HTTPS.
# proxybench records every latency in an HDR histogram; wrk keeps its own fixed array.
#
# proxybench drives plain HTTP with io_uring when the kernel allows (`--io auto`); measure the
# epoll path with PB_ARGS="--io epoll".
# PB_BASE=path/to/another/proxybench adds that binary as a tool in every round (a build from
# before a change), with the ratios proxybench/base: before and after in one run.
# FLOOR=1 adds bench/http1-floor.c (compiled with cc) on plain HTTP: an epoll client that only
# writes the request and reads the answer, the least a request can cost a client.
# PRIO=auto (the default) runs nginx and the clients under SCHED_RR 10 when root, so unrelated
# work on a shared machine does not preempt them; PRIO= runs them as they are.
#
# Usage: bench/vs-wrk.sh   (env: ROUNDS=3 DURATION=10s CONNS=50 THREADS=1 MODES="http https"
#                           SERVER_CPU=0 CLIENT_CPU=1 PRIO=auto PB_ARGS= PB_BASE= FLOOR=)
set -euo pipefail

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10s}
CONNS=${CONNS:-50}
THREADS=${THREADS:-1}
MODES=${MODES:-http https}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/common.sh
. "$ROOT/bench/common.sh"
PB_BASE=${PB_BASE:-}
FLOOR=${FLOOR:-}
pb_prio

pb_need wrk "wrk is not installed (apt-get install wrk)"
pb_need_nginx
pb_need python3 "python3 is needed for getrusage"
pb_need openssl "openssl is needed for the test certificate"
pb_need taskset "taskset is needed to pin the processes (apt-get install util-linux)"
[ -z "$PB_BASE" ] || [ -x "$PB_BASE" ] || { echo "vs-wrk: PB_BASE=$PB_BASE is not an executable" >&2; exit 2; }
[ -z "$FLOOR" ] || pb_need cc "FLOOR=1 needs a C compiler (apt-get install gcc)"
pb_ensure_built

pb_workdir vs-wrk
if [ -n "$FLOOR" ]; then
  cc -O2 -o "$WORK/http1-floor" "$ROOT/bench/http1-floor.c"
fi
pb_peer_nginx ""

echo "proxybench load ${PB_ARGS:+$PB_ARGS }-t$THREADS -c$CONNS -d$DURATION  vs  wrk -t$THREADS -c$CONNS -d$DURATION"
echo "nginx (1 worker) on cpu $SERVER_CPU, clients on cpu $CLIENT_CPU${PRIO:+, under $PRIO}${PB_BASE:+; base = $PB_BASE}"
echo "uptime: $(uptime)"
SUMMARY=()
for mode in $MODES; do
  if [ "$mode" = https ]; then URL="https://127.0.0.1:$TLS_PORT/"; PB_TLS=(-k); else URL="http://127.0.0.1:$PORT/"; PB_TLS=(); fi
  TOOLS=(proxybench)
  [ -n "$PB_BASE" ] && TOOLS+=(base)
  TOOLS+=(wrk)
  [ -n "$FLOOR" ] && [ "$mode" = http ] && TOOLS+=(floor)
  echo
  echo "== $mode: $URL"
  if [ "$mode" = https ]; then
    # What each client negotiated (nginx follows the client's order unless SSL_CIPHERS is set).
    for tool in "${TOOLS[@]}"; do
      : >"$WORK/cipher.log"
      case $tool in
        proxybench) "$PB" load -k -n 1 -c 1 "${URL}cipher" >/dev/null 2>&1 || true ;;
        base) "$PB_BASE" load -k -n 1 -c 1 "${URL}cipher" >/dev/null 2>&1 || true ;;
        wrk) wrk -t1 -c1 -d1s "${URL}cipher" >/dev/null 2>&1 || true ;;
      esac
      echo "   $tool negotiates: $(head -1 "$WORK/cipher.log")"
    done
  fi
  printf '%-11s %5s %10s %11s %13s %9s %14s %7s %15s %6s\n' tool round req/s requests "cpu s/Mreq" "rss MB" "server us/req" "nginx%" "machine us/req" load1
  : >"$WORK/rows"
  for r in $(seq "$ROUNDS"); do
    # Each round starts with the next tool in turn, so no tool always runs first.
    n=${#TOOLS[@]}
    for k in $(seq 0 $((n - 1))); do
      tool=${TOOLS[$(((k + r - 1) % n))]}
      case $tool in
        # shellcheck disable=SC2086
        proxybench) read -r rps reqs cpu rss srv ng cl mach sreqs load1 < <(pb_measure "$PB" load ${PB_ARGS:-} "${PB_TLS[@]}" -t"$THREADS" -c"$CONNS" -d"$DURATION" "$URL") ;;
        # shellcheck disable=SC2086
        base) read -r rps reqs cpu rss srv ng cl mach sreqs load1 < <(pb_measure "$PB_BASE" load ${PB_ARGS:-} "${PB_TLS[@]}" -t"$THREADS" -c"$CONNS" -d"$DURATION" "$URL") ;;
        wrk) read -r rps reqs cpu rss srv ng cl mach sreqs load1 < <(pb_measure wrk -t"$THREADS" -c"$CONNS" -d"$DURATION" "$URL") ;;
        floor) read -r rps reqs cpu rss srv ng cl mach sreqs load1 < <(pb_measure "$WORK/http1-floor" -c "$CONNS" -d "${DURATION%s}" "$URL") ;;
      esac
      read -r per_m mb sper mper < <(python3 -c "n=max($reqs,1); print(f'{$cpu*1e6/n:.2f} {$rss/1024:.1f} {$srv*1e6/n:.2f} {$mach*1e6/max($sreqs,1):.2f}')")
      printf '%-11s %5s %10s %11s %13s %9s %14s %7s %15s %6s\n' "$tool" "$r" "$rps" "$reqs" "$per_m" "$mb" "$sper" "$ng" "$mper" "$load1"
      echo "$tool $rps $per_m $mb $sper $mper" >>"$WORK/rows"
    done
  done
  SUMMARY+=("$(python3 - "$mode" "$WORK/rows" <<'PY'
import statistics as st, sys
mode, rows = sys.argv[1], [l.split() for l in open(sys.argv[2])]
cols = {}
for tool in dict.fromkeys(r[0] for r in rows):
    mine = [r for r in rows if r[0] == tool]
    cols[tool] = [[float(r[k]) for r in mine] for k in (1, 2, 3, 4, 5)]
out = []
for tool, (r, c, m, s, w) in cols.items():
    out.append(f"{mode:<5} {tool:<10} req/s {st.median(r):>9.0f} ({min(r):.0f}..{max(r):.0f})   "
               f"cpu s/Mreq {st.median(c):>6.2f} ({min(c):.2f}..{max(c):.2f})   "
               f"server us/req {st.median(s):>5.2f}   machine us/req {st.median(w):>5.2f}   "
               f"peak RSS {st.median(m):.1f} MB")
def ratios(a, b, goals):
    ra = st.median(cols[a][0]) / st.median(cols[b][0])
    ca = st.median(cols[a][1]) / st.median(cols[b][1])
    sa = st.median(cols[a][3]) / st.median(cols[b][3])
    wa = st.median(cols[a][4]) / st.median(cols[b][4])
    rg = (" (goal >= 1.2)" if mode == "https" else " (goal >= 1.0)") if goals else ""
    cg = " (goal <= 0.75)" if goals else ""
    return (f"{mode:<5} {a}/{b}: req/s {ra:.3f}{rg}, client CPU/req {ca:.3f}{cg} "
            f"(efficiency {1 / ca:.2f}x), server CPU/req {sa:.3f}, machine CPU/req {wa:.3f}")
out.append(ratios("proxybench", "wrk", True))
if "base" in cols:
    out.append(ratios("base", "wrk", True))
    out.append(ratios("proxybench", "base", False))
if "floor" in cols:
    out.append(ratios("proxybench", "floor", False))
    out.append(ratios("wrk", "floor", False))
print("\n".join(out))
PY
)")
done
echo
echo "medians (spread min..max):"
printf '%s\n' "${SUMMARY[@]}"
echo "uptime: $(uptime)"
