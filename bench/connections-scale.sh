#!/usr/bin/env bash
# What a connection costs the client, from 100 to 15,000 connections: proxybench and wrk,
# alternated, in closed loop against one nginx worker answering `return 200` (no proxy hop: a
# proxied connection costs nginx two descriptors, and the open-files limit here is 20000, which
# cannot be raised; straight at nginx 15,000 connections need 15,000 of nginx's and 15,000 of
# the client's, each process under its own limit).
#
# For each count in COUNTS, ROUNDS rounds of each tool (`-t$THREADS -c COUNT -d$DURATION`, the
# tools in turn, each round starting with the other one), and per run: req/s, the client's CPU
# per request (user+sys from getrusage over the requests it completed), the client's peak RSS
# (VmHWM) and its RSS per connection: the peak less the same tool's peak with 1 connection
# (measured once per tool first), over the connections. Then the medians per count, each
# tool's CPU per request at each count over its own at the first count (goal: <= 1.2 at
# 15,000), proxybench's over wrk's (goal: <= 1 at every count), and proxybench's RSS per
# connection (goal: < 8 KB). The 1-minute load average is printed with every run. A run that
# got no response at all is named and left out of the medians.
#
# The CPU per request covers the whole run, opening the connections included: at 15,000 against
# one nginx worker that takes seconds, so give DURATION enough to make it a small part (20s).
#
# nginx gets worker_connections and worker_rlimit_nofile up to the open-files limit; each client
# opens its connections at the start (closed loop), so the peak RSS is with all of them open.
#
# Usage: bench/connections-scale.sh   (env: COUNTS="100 1000 5000 15000" ROUNDS=3 DURATION=20s
#                                       THREADS=1 PIN=1 SERVER_CPU=0 CLIENT_CPU=1 PB=... PB_ARGS=)
set -euo pipefail

COUNTS=${COUNTS:-100 1000 5000 15000}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-20s}
THREADS=${THREADS:-1}
PIN=${PIN-1}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/common.sh
. "$ROOT/bench/common.sh"

pb_need wrk "wrk is not installed (apt-get install wrk)"
pb_need_nginx
pb_need python3 "python3 is needed for getrusage"
[ -z "$PIN" ] || pb_need taskset "taskset is needed to pin the processes (apt-get install util-linux)"
MAX=0
for n in $COUNTS; do [ "$n" -gt "$MAX" ] && MAX=$n; done
LIMIT=$(ulimit -Hn)
if [ "$LIMIT" != unlimited ] && [ $((MAX + 200)) -gt "$LIMIT" ]; then
  echo "connections-scale: $MAX connections need $((MAX + 200)) open files, the hard limit is $LIMIT" >&2
  exit 2
fi
ulimit -n "$LIMIT"
pb_ensure_built

pb_workdir conn-scale

pin() { if [ -n "$PIN" ]; then echo taskset -c "$1"; fi; }
read -r -a pin_server <<<"$(pin "$SERVER_CPU")"
read -r -a pin_client <<<"$(pin "$CLIENT_CPU")"
PORT=${PORT:-$(pb_free_port)}
# nginx gets all the descriptors it may have: with worker_connections just above the count
# (15,090 for 15,000) it warned "worker_connections are not enough, reusing connections" and
# answered none of 15,000 connections here; with 19,900 it answered them all.
if [ "$LIMIT" = unlimited ]; then NOFILE=$((MAX + 5000)); else NOFILE=$LIMIT; fi
pb_hello_nginx_conf "$PORT" "worker_connections $((NOFILE - 100)); multi_accept on;" \
  "worker_rlimit_nofile $NOFILE;" "backlog=65535"
pb_start_nginx "${pin_server[@]}"
URL="http://127.0.0.1:$PORT/"

# One client run under getrusage; prints "rps client_cpu_s requests hwm_kb load1 errors".
measure() {
  python3 - "${pin_client[@]}" "$@" <<'PY'
import re, resource, subprocess, sys, time
def hwm(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0
p = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
peak = 0
while p.poll() is None:
    peak = max(peak, hwm(p.pid))
    time.sleep(0.05)
out = p.stdout.read()
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
rps = float(re.search(r"^Requests/sec:\s+([\d.]+)", out, re.M).group(1))
reqs = int(re.search(r"^\s+(\d+) requests in", out, re.M).group(1))
# wrk: "Socket errors: connect N, read N, write N, timeout N"; proxybench: its Failures line.
m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
errs = sum(int(x) for x in m.groups()) if m else 0
m = re.search(r"Failures: (\d+) of", out)
errs += int(m.group(1)) if m else 0
load1 = open("/proc/loadavg").read().split()[0]
print(f"{rps:.0f} {ru.ru_utime + ru.ru_stime:.3f} {reqs} {peak} {load1} {errs}")
PY
}
# PB_ARGS is split on spaces on purpose (extra flags for proxybench).
# shellcheck disable=SC2086
run_tool() { # tool conns duration
  case $1 in
    proxybench) measure "$PB" load ${PB_ARGS:-} -t"$THREADS" -c"$2" -d"$3" --timeout 10s "$URL" ;;
    wrk) measure wrk -t"$THREADS" -c"$2" -d"$3" --timeout 10s "$URL" ;;
  esac
}

echo "connections: $COUNTS; proxybench load ${PB_ARGS:+$PB_ARGS }-t$THREADS -cN -d$DURATION vs wrk -t$THREADS -cN -d$DURATION"
echo "nginx (1 worker, worker_connections $((NOFILE - 100)))${PIN:+ on cpu $SERVER_CPU, clients on cpu $CLIENT_CPU}; open-files limit $LIMIT"
echo "uptime: $(uptime)"
declare -A BASE_KB
for tool in proxybench wrk; do
  read -r _ _ _ kb _ _ < <(run_tool "$tool" 1 2s)
  BASE_KB[$tool]=$kb
  echo "$tool with 1 connection: peak RSS $kb KB (the base of RSS per connection)"
done
printf '%7s %-10s %5s %10s %11s %11s %9s %11s %6s %6s\n' conns tool round req/s requests "cpu us/req" "rss MB" "KB/conn" errors load1
: >"$WORK/rows"
: >"$WORK/failed"
for n in $COUNTS; do
  for r in $(seq "$ROUNDS"); do
    if [ $((r % 2)) = 1 ]; then order="proxybench wrk"; else order="wrk proxybench"; fi
    for tool in $order; do
      read -r rps cpu reqs kb load1 errs < <(run_tool "$tool" "$n" "$DURATION")
      read -r per mb per_conn < <(python3 -c "print(f'{$cpu*1e6/max($reqs,1):.3f} {$kb/1024:.1f} {($kb-${BASE_KB[$tool]})/$n:.2f}')")
      printf '%7s %-10s %5s %10s %11s %11s %9s %11s %6s %6s\n' "$n" "$tool" "$r" "$rps" "$reqs" "$per" "$mb" "$per_conn" "$errs" "$load1"
      # A run that got no answer has no cost per request: it is named, not averaged in.
      if [ "$reqs" -gt 0 ]; then
        echo "$n $tool $rps $per $per_conn" >>"$WORK/rows"
      else
        echo "$n $tool" >>"$WORK/failed"
      fi
    done
  done
done
python3 - "$WORK/rows" "$WORK/failed" <<'PY'
import statistics as st, sys
rows = [l.split() for l in open(sys.argv[1])]
for l in open(sys.argv[2]):
    n, tool = l.split()
    print(f"{tool} at {n} connections: a run got no response at all (left out of the medians)")
if not rows:
    sys.exit(0)
counts = list(dict.fromkeys(int(r[0]) for r in rows))
med = {}
for n in counts:
    for tool in ("proxybench", "wrk"):
        mine = [r for r in rows if int(r[0]) == n and r[1] == tool]
        if mine:
            med[(n, tool)] = [st.median(float(r[k]) for r in mine) for k in (2, 3, 4)]
print()
print(f"{'conns':>7} {'tool':<10} {'req/s':>9} {'cpu us/req':>11} {'vs own at ' + str(counts[0]):>14} {'pb/wrk cpu':>11} {'KB/conn':>8}")
for n in counts:
    for tool in ("proxybench", "wrk"):
        if (n, tool) not in med:
            continue
        rps, cpu, kb = med[(n, tool)]
        own = cpu / med[(counts[0], tool)][1] if (counts[0], tool) in med else float("nan")
        vs = f"{cpu / med[(n, 'wrk')][1]:.3f}" if tool == "proxybench" and (n, "wrk") in med else ""
        print(f"{n:>7} {tool:<10} {rps:>9.0f} {cpu:>11.3f} {own:>14.3f} {vs:>11} {kb:>8.2f}")
last = counts[-1]
if (last, "proxybench") in med and (counts[0], "proxybench") in med:
    g = med[(last, "proxybench")][1] / med[(counts[0], "proxybench")][1]
    print(f"proxybench CPU/req at {last} over at {counts[0]}: {g:.3f} (goal <= 1.2)")
worse = [n for n in counts if (n, "wrk") in med and (n, "proxybench") in med
         and med[(n, "proxybench")][1] > med[(n, "wrk")][1]]
print("proxybench CPU/req no worse than wrk's at every count both answered (goal)" if not worse
      else f"proxybench CPU/req above wrk's at: {', '.join(map(str, worse))}")
if (last, "proxybench") in med:
    kb = med[(last, "proxybench")][2]
    print(f"proxybench RSS per connection at {last}: {kb:.2f} KB (goal < 8 KB)")
PY
echo "uptime: $(uptime)"
