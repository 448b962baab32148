#!/usr/bin/env bash
# bench/backend-h2.sh: is `proxybench backend` fast enough over h2c not to be the bottleneck of
# an HTTP/2 test?
#
# A one-thread `proxybench backend` (no latency configured) and an nginx with one worker answering
# `return 200` over h2c (`listen ... http2`: HTTP/2 with prior knowledge; access_log off,
# keepalive_requests unlimited), each pinned to one core, are loaded by h2load (nghttp2) pinned to
# the other core, alternately, ROUNDS rounds each, in two shapes: `-c50 -m10` (h2load's usual) and
# `-c8 -m100` (many streams per connection). For each run the server's own CPU time is read from
# /proc, so "µs of server CPU per request" and "req/s per server core" compare the servers even
# when h2load, not the server, is the limit. Prints every run, the medians and spreads, and the
# ratios backend/nginx (target: req/s per core >= 1.0). At the end the backend's own count of
# HTTP/2 requests (its stderr summary) is set against h2load's: at least every request h2load saw
# succeed, at most every request it started (a timed h2load run abandons the streams still open
# when its time is up, which the backend has answered or not).
#
# Knobs (environment): ROUNDS=3 DURATION=10 SHAPES="50x10 8x100" LOAD_CPU=0 SERVER_CPU=1 PRIO=auto
# PROXYBENCH=target/release/proxybench NGINX=/usr/sbin/nginx
# Prerequisites: nginx, h2load (Debian: apt-get install nghttp2-client; `make bench-deps`).
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=${PROXYBENCH:-target/release/proxybench}
NGINX=${NGINX:-$(command -v nginx || echo /usr/sbin/nginx)}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10}
SHAPES=${SHAPES:-50x10 8x100}
LOAD_CPU=${LOAD_CPU:-0}
SERVER_CPU=${SERVER_CPU:-1}
# As in bench/backend-vs-nginx.sh: PRIO=auto runs the measured processes under SCHED_RR 10 when
# root, so unrelated work on a shared machine does not preempt them; PRIO= runs them as they are.
TCK=$(getconf CLK_TCK)

command -v h2load >/dev/null || { echo "backend-h2: h2load is not installed (apt-get install -y nghttp2-client)" >&2; exit 2; }
[ -x "$NGINX" ] || { echo "backend-h2: nginx is not installed (apt-get install -y nginx)" >&2; exit 2; }
[ -x "$BIN" ] || cargo build --release --locked -p proxybench >&2

ROOT=$(pwd)
# shellcheck source=bench/common.sh
. bench/common.sh
pb_workdir backend-h2
pb_prio
tmp=$WORK

# --- servers ----------------------------------------------------------------------------------
NG_PORT=$(pb_port_from 18280)
pb_hello_nginx_conf "$NG_PORT" "worker_connections 16384;" "" "http2"
PORT=$NG_PORT pb_start_nginx "${prio[@]}" taskset -c "$SERVER_CPU"
pb_wait_port "$NG_PORT"
ng_worker=$(pgrep -P "$NGINX_PID" | head -1)

PB_PORT=$(pb_port_from $((NG_PORT + 1)))
"${prio[@]}" taskset -c "$SERVER_CPU" "$BIN" backend --listen "127.0.0.1:$PB_PORT" --threads 1 >"$tmp/pb.out" 2>"$tmp/pb.err" &
pb_pid=$!
PB_PIDS+=("$pb_pid")
pb_wait_port "$PB_PORT"

# run NAME PORT PID CONNS STREAMS -> one line; appends "name shape rps us_per_req per_core succeeded started"
# to $tmp/results
run() {
    local name=$1 port=$2 pid=$3 conns=$4 streams=$5
    local c0 c1 t0 t1 out
    c0=$(pb_cpu_ticks "$pid")
    t0=$(date +%s.%N)
    out=$("${prio[@]}" taskset -c "$LOAD_CPU" h2load -t1 -c"$conns" -m"$streams" -D"$DURATION" "http://127.0.0.1:$port/" 2>&1)
    t1=$(date +%s.%N)
    c1=$(pb_cpu_ticks "$pid")
    local rps ok failed started
    rps=$(sed -n 's/^finished in [^,]*, \([0-9.]*\) req\/s.*/\1/p' <<<"$out")
    started=$(sed -n 's/^requests: [0-9]* total, \([0-9]*\) started.*/\1/p' <<<"$out")
    ok=$(sed -n 's/^requests: .* \([0-9]*\) succeeded.*/\1/p' <<<"$out")
    failed=$(sed -n 's/^requests: .* \([0-9]*\) failed.*/\1/p' <<<"$out")
    if [ -z "$rps" ] || [ -z "$ok" ]; then
        echo "backend-h2: h2load against $name gave no result:" >&2
        echo "$out" >&2
        exit 1
    fi
    awk -v n="$name" -v s="${conns}x${streams}" -v r="$rps" -v ok="$ok" -v f="$failed" -v st="$started" -v c0="$c0" -v c1="$c1" \
        -v t0="$t0" -v t1="$t1" -v tck="$TCK" 'BEGIN {
            cpu = (c1 - c0) / tck; wall = t1 - t0; pct = 100 * cpu / wall;
            us = (ok > 0) ? 1e6 * cpu / ok : 0;
            per = (cpu > 0) ? ok / cpu : 0;
            printf "%-8s -c%-3s -m%-4s %10.0f req/s  server cpu %5.1f%%  %6.2f us/req  %10.0f req/s per core  (%s ok, %s failed)\n",
                n, substr(s, 1, index(s, "x") - 1), substr(s, index(s, "x") + 1), r, pct, us, per, ok, f;
            printf "%s %s %f %f %f %d %d\n", n, s, r, us, per, ok, st >> "'"$tmp/results"'";
        }'
}

echo "== h2c throughput: h2load -t1 -D$DURATION on cpu $LOAD_CPU; servers on cpu $SERVER_CPU; $ROUNDS rounds, alternating"
echo "   nginx $("$NGINX" -v 2>&1 | sed 's/.*nginx\///'), 1 worker, listen ... http2, return 200; proxybench backend, 1 thread, no latency"
echo "   $(h2load --version | head -1); scheduling: ${PRIO:-default} (PRIO=auto uses SCHED_RR as root); load average now: $(cut -d' ' -f1-3 /proc/loadavg)"
for shape in $SHAPES; do
    conns=${shape%x*}
    streams=${shape#*x}
    for r in $(seq "$ROUNDS"); do
        run nginx "$NG_PORT" "$ng_worker" "$conns" "$streams"
        run backend "$PB_PORT" "$pb_pid" "$conns" "$streams"
    done
done

# median and spread of column COL for NAME SHAPE
stat() {
    awk -v n="$1" -v s="$2" -v col="$3" '$1 == n && $2 == s {print $col}' "$tmp/results" | sort -g |
        awk '{v[NR] = $1} END {
            med = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2;
            printf "%.2f %.2f %.2f\n", med, v[1], v[NR] }'
}

echo
echo "== summary (median, spread min..max over $ROUNDS rounds)"
printf "%-9s %-8s %26s %24s %26s\n" shape server "req/s" "server us/req" "req/s per server core"
for shape in $SHAPES; do
    for name in nginx backend; do
        read -r m lo hi < <(stat "$name" "$shape" 3)
        read -r um ulo uhi < <(stat "$name" "$shape" 4)
        read -r pm plo phi < <(stat "$name" "$shape" 5)
        printf "%-9s %-8s %8.0f (%.0f..%.0f) %8.2f (%.2f..%.2f) %9.0f (%.0f..%.0f)\n" \
            "$shape" "$name" "$m" "$lo" "$hi" "$um" "$ulo" "$uhi" "$pm" "$plo" "$phi"
    done
    read -r nm _ _ < <(stat nginx "$shape" 3)
    read -r bm _ _ < <(stat backend "$shape" 3)
    read -r nu _ _ < <(stat nginx "$shape" 4)
    read -r bu _ _ < <(stat backend "$shape" 4)
    awk -v b="$bm" -v n="$nm" -v bu="$bu" -v nu="$nu" -v s="$shape" 'BEGIN {
        printf "%-9s ratio backend/nginx: req/s %.2f, server CPU per request %.2f, req/s per core %.2f (target >= 1.0)\n",
            s, b / n, bu / nu, nu / bu }'
done

# The backend's own count against h2load's: at least what succeeded, at most what was started.
kill -TERM "$pb_pid"
wait "$pb_pid" 2>/dev/null || true
ok=$(awk '$1 == "backend" {s += $6} END {print s + 0}' "$tmp/results")
started=$(awk '$1 == "backend" {s += $7} END {print s + 0}' "$tmp/results")
counted=$(sed -n 's/.*over h2c: \([0-9]*\) requests.*/\1/p' "$tmp/pb.err")
verdict=$(awk -v a="$ok" -v b="${counted:-0}" -v c="$started" 'BEGIN { print (a <= b && b <= c) ? "consistent" : "INCONSISTENT" }')
echo
echo "== counts: the backend counted ${counted:-none} requests over h2c; h2load saw $ok succeed and started $started" \
    "($verdict: succeeded <= counted <= started)"
