#!/usr/bin/env bash
# An open loop at a fixed rate, two ways: `proxybench load --http2 -R RATE` and `h2load --rps`,
# alternated against one nginx worker answering h2c `return 200` (nginx pinned to SERVER_CPU,
# the clients to CLIENT_CPU). h2load's rate mode is per client: each client arms a timer of
# max(10 ms, 1/rps) and on each tick submits every request that fell due since the last one
# (a burst), measuring each request's latency from its own submission; proxybench sends each
# request at its intended time (sends due within --send-window leave together) and measures
# from that time. So the two latency figures are not the same measure, and the script prints
# what each tool reports: the rate achieved, the client's CPU per request (getrusage over the
# responses), and proxybench's p99 and late sends or h2load's mean and max.
#
# Usage: bench/rps-vs-h2load.sh   (env: RATES="40000 100000" ROUNDS=2 DURATION=10 CONNS=10
#                                   STREAMS=100 SERVER_CPU=0 CLIENT_CPU=1 PB=... PB_ARGS=)
set -euo pipefail

RATES=${RATES:-40000 100000}
ROUNDS=${ROUNDS:-2}
DURATION=${DURATION:-10}
CONNS=${CONNS:-10}
STREAMS=${STREAMS:-100}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/common.sh
. "$ROOT/bench/common.sh"

pb_need h2load "h2load is not installed (make bench-deps)"
pb_need_nginx
pb_need python3 "python3 is needed for getrusage"
pb_need taskset "taskset is needed to pin the processes (apt-get install util-linux)"
for r in $RATES; do
  [ $((r % CONNS)) = 0 ] || { echo "rps-vs-h2load: rate $r is not a multiple of CONNS=$CONNS (h2load's --rps is per client)" >&2; exit 2; }
done
pb_ensure_built
pb_workdir rps-h2load
PORT=${PORT:-$(pb_free_port)}
pb_hello_nginx_conf "$PORT" "worker_connections 4096;" "" "http2"
pb_start_nginx taskset -c "$SERVER_CPU"
URL="http://127.0.0.1:$PORT/"

# Runs the command under getrusage, pinned; prints its stdout and stderr, then "CPU <seconds>".
measure() {
  python3 - "$CLIENT_CPU" "$@" <<'PY'
import resource, subprocess, sys
cpu, cmd = sys.argv[1], sys.argv[2:]
p = subprocess.run(["taskset", "-c", cpu] + cmd, capture_output=True, text=True)
u = resource.getrusage(resource.RUSAGE_CHILDREN)
sys.stdout.write(p.stdout + p.stderr)
print(f"CPU {u.ru_utime + u.ru_stime:.3f}")
PY
}

echo "rps-vs-h2load: nginx h2c on $URL (core $SERVER_CPU), clients on core $CLIENT_CPU, $CONNS connections, ${DURATION}s, rates $RATES"
printf '%-10s %-10s %9s %12s %10s  %s\n' rate tool round "req/s" "µs CPU/req" latency
for rate in $RATES; do
  for round in $(seq "$ROUNDS"); do
    if [ $((round % 2)) = 1 ]; then order="proxybench h2load"; else order="h2load proxybench"; fi
    for tool in $order; do
      if [ "$tool" = proxybench ]; then
        # shellcheck disable=SC2086
        out=$(measure "$PB" load --http2 ${PB_ARGS:-} -t1 -c"$CONNS" -R "$rate" -d"${DURATION}s" --latency "$URL")
        rps=$(awk '/^Requests\/sec:/ {print $2}' <<<"$out")
        n=$(awk '/requests in/ {print $1}' <<<"$out")
        lat="p99 $(awk '$1 == "99%" {print $2}' <<<"$out"), late $(sed -n 's/.*Late sends (> 1.00ms): \([0-9]* of [0-9]*\).*/\1/p' <<<"$out")"
      else
        out=$(measure h2load -c "$CONNS" -m "$STREAMS" --rps $((rate / CONNS)) -D "$DURATION" "$URL")
        rps=$(sed -n 's/^finished in [^,]*, \([0-9.]*\) req\/s.*/\1/p' <<<"$out")
        n=$(sed -n 's/^requests: .* \([0-9]*\) succeeded.*/\1/p' <<<"$out")
        lat=$(awk '/^time for request:/ {print "mean " $6 ", max " $5}' <<<"$out")
      fi
      cpu=$(awk '/^CPU / {print $2}' <<<"$out")
      if [ -z "$rps" ] || [ -z "$n" ] || [ "$n" = 0 ]; then
        echo "rps-vs-h2load: $tool at $rate/s gave no result:" >&2
        echo "$out" | tail -5 >&2
        exit 1
      fi
      us=$(awk -v c="$cpu" -v n="$n" 'BEGIN { printf "%.2f", c * 1e6 / n }')
      printf '%-10s %-10s %9s %12s %10s  %s\n' "$rate" "$tool" "$round" "$rps" "$us" "$lat"
    done
  done
done
