#!/usr/bin/env bash
# bench/backend-vs-nginx.sh: is `proxybench backend` faster than the proxy it stands behind?
#
# 1. Throughput per core: a one-thread `proxybench backend` (no latency configured) and an nginx
#    with one worker answering `return 200` (access_log off, keepalive_requests unlimited), each
#    pinned to one core, are loaded by wrk pinned to the other core, alternately, ROUNDS rounds
#    each. Two load shapes: plain keep-alive, and 16-deep pipelining (which saturates the server
#    core, so req/s is the server's capacity). For each run the server's own CPU time is read
#    from /proc, so "req/s per core" = requests / server CPU-seconds is comparable even when
#    wrk, not the server, is the limit. Prints every run, medians, spread (min..max) and ratios
#    (target: backend/nginx >= 1.0).
# 2. Latency under 5k connections: `proxybench backend --profile latency=10ms` with 5000
#    connections open, paced open-loop by `proxybench load -c5000 -R LAT_RATE` (so the load
#    generator is not itself saturated), ROUNDS rounds; prints the overshoot over 10 ms at
#    p50/p90/p99 (target: p99 < 1 ms). Then, for reference, wrk -c5000 closed loop, which asks
#    for 500k req/s and so mostly measures wrk's own queueing.
#
# Knobs (environment): ROUNDS=3 DURATION=10s CONNS=100 LOAD_CPU=0 SERVER_CPU=1 LAT_RATE=20000
# LAT_DURATION=10s PROXYBENCH=target/release/proxybench NGINX=/usr/sbin/nginx
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=${PROXYBENCH:-target/release/proxybench}
NGINX=${NGINX:-$(command -v nginx || echo /usr/sbin/nginx)}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10s}
CONNS=${CONNS:-100}
LOAD_CPU=${LOAD_CPU:-0}
SERVER_CPU=${SERVER_CPU:-1}
LAT_RATE=${LAT_RATE:-20000}
# On a shared machine other processes preempt the measured ones for milliseconds at a time.
# PRIO=auto runs every measured process (nginx, backend, wrk, load) under SCHED_RR 10 when
# root, so they are not preempted by unrelated work (round robin, not FIFO: wrk's timer thread
# shares its core with its busy worker); PRIO= (empty) runs them as they are.
LAT_DURATION=${LAT_DURATION:-10s}
TCK=$(getconf CLK_TCK)

command -v wrk >/dev/null || { echo "backend-vs-nginx: wrk is not installed (apt-get install -y wrk)" >&2; exit 2; }
[ -x "$NGINX" ] || { echo "backend-vs-nginx: nginx is not installed (apt-get install -y nginx)" >&2; exit 2; }
[ -x "$BIN" ] || cargo build --release --locked -p proxybench >&2

ROOT=$(pwd)
# shellcheck source=bench/common.sh
. bench/common.sh
pb_workdir backend-vs-nginx
pb_prio
tmp=$WORK

# --- servers --------------------------------------------------------------------------------
NG_PORT=$(pb_port_from 18180)
pb_hello_nginx_conf "$NG_PORT" "worker_connections 16384;" "" ""
PORT=$NG_PORT pb_start_nginx "${prio[@]}" taskset -c "$SERVER_CPU"
pb_wait_port "$NG_PORT"
ng_worker=$(pgrep -P "$NGINX_PID" | head -1)

PB_PORT=$(pb_port_from $((NG_PORT + 1)))
"${prio[@]}" taskset -c "$SERVER_CPU" "$BIN" backend --listen "127.0.0.1:$PB_PORT" --threads 1 >"$tmp/pb.out" 2>"$tmp/pb.err" &
pb_pid=$!
PB_PIDS+=("$pb_pid")
pb_wait_port "$PB_PORT"

cat >"$tmp/pipeline.lua" <<'EOF'
init = function(args)
    local r = {}
    for i = 1, 16 do r[i] = wrk.format("GET", "/") end
    req = table.concat(r)
end
request = function() return req end
EOF

# run NAME PORT PID MODE -> appends "name mode rps cpu_pct per_core p50 p99" to $tmp/results
run() {
    local name=$1 port=$2 pid=$3 mode=$4 script=()
    [ "$mode" = pipelined ] && script=(-s "$tmp/pipeline.lua")
    local t0 c0 c1 t1 out
    c0=$(pb_cpu_ticks "$pid")
    t0=$(date +%s.%N)
    out=$("${prio[@]}" taskset -c "$LOAD_CPU" wrk -t1 -c"$CONNS" -d"$DURATION" --latency "${script[@]}" "http://127.0.0.1:$port/")
    t1=$(date +%s.%N)
    c1=$(pb_cpu_ticks "$pid")
    local rps p50 p99 errs
    rps=$(awk '/^Requests\/sec:/ {print $2}' <<<"$out")
    p50=$(awk '$1 == "50%" {print $2}' <<<"$out")
    p99=$(awk '$1 == "99%" {print $2}' <<<"$out")
    errs=$(awk '/Socket errors|Non-2xx/ {printf "%s ", $0}' <<<"$out")
    awk -v n="$name" -v m="$mode" -v r="$rps" -v c0="$c0" -v c1="$c1" -v t0="$t0" -v t1="$t1" \
        -v tck="$TCK" -v p50="$p50" -v p99="$p99" -v e="$errs" 'BEGIN {
            cpu = (c1 - c0) / tck; wall = t1 - t0; pct = 100 * cpu / wall;
            per = (cpu > 0) ? r * wall / cpu : 0;
            lat = (m == "pipelined") ? "" : sprintf("p50 %-8s p99 %-8s", p50, p99);
            printf "%-8s %-10s %10.0f req/s  server cpu %5.1f%%  %10.0f req/s per core  %s %s\n",
                n, m, r, pct, per, lat, e;
            printf "%s %s %f %f %f\n", n, m, r, pct, per >> "'"$tmp/results"'";
        }'
}

echo "== throughput: wrk -t1 -c$CONNS -d$DURATION on cpu $LOAD_CPU; servers on cpu $SERVER_CPU; $ROUNDS rounds, alternating"
echo "   nginx $("$NGINX" -v 2>&1 | sed 's/.*nginx\///'), 1 worker, return 200; proxybench backend, 1 thread, no latency"
echo "   scheduling: ${PRIO:-default} (PRIO=auto uses SCHED_RR as root); load average now: $(cut -d' ' -f1-3 /proc/loadavg)"
for mode in keepalive pipelined; do
    for r in $(seq "$ROUNDS"); do
        run nginx "$NG_PORT" "$ng_worker" "$mode"
        run backend "$PB_PORT" "$pb_pid" "$mode"
    done
done

# median and spread of column $3 (req/s) and $5 (per core) for NAME MODE
stat() {
    awk -v n="$1" -v m="$2" -v col="$3" '$1 == n && $2 == m {print $col}' "$tmp/results" | sort -g |
        awk '{v[NR] = $1} END {
            med = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2;
            printf "%.0f %.0f %.0f\n", med, v[1], v[NR] }'
}

echo
echo "== summary (median, spread min..max over $ROUNDS rounds)"
printf "%-10s %-8s %24s %30s\n" mode server "req/s" "req/s per core (server CPU)"
for mode in keepalive pipelined; do
    for name in nginx backend; do
        read -r m lo hi < <(stat "$name" "$mode" 3)
        read -r pm plo phi < <(stat "$name" "$mode" 5)
        printf "%-10s %-8s %8s (%s..%s) %14s (%s..%s)\n" "$mode" "$name" "$m" "$lo" "$hi" "$pm" "$plo" "$phi"
    done
    read -r nm _ _ < <(stat nginx "$mode" 3)
    read -r bm _ _ < <(stat backend "$mode" 3)
    read -r npm _ _ < <(stat nginx "$mode" 5)
    read -r bpm _ _ < <(stat backend "$mode" 5)
    awk -v b="$bm" -v n="$nm" -v bp="$bpm" -v np="$npm" -v m="$mode" 'BEGIN {
        printf "%-10s ratio backend/nginx: req/s %.2f, req/s per core %.2f (target >= 1.0)\n", m, b / n, bp / np }'
done

# --- latency at 5k connections -----------------------------------------------------------------
kill -TERM "$NGINX_PID" "$pb_pid" 2>/dev/null || true
wait "$NGINX_PID" "$pb_pid" 2>/dev/null || true
LAT_PORT=$(pb_port_from $((PB_PORT + 1)))
CTL_PORT=$(pb_port_from $((LAT_PORT + 1)))
"${prio[@]}" taskset -c "$SERVER_CPU" "$BIN" backend --listen "127.0.0.1:$LAT_PORT" --threads 1 --profile "latency=10ms" \
    --control "127.0.0.1:$CTL_PORT" --token-file "$tmp/ctl.token" >"$tmp/lat.out" 2>"$tmp/lat.err" &
lat_pid=$!
PB_PIDS+=("$lat_pid")
pb_wait_port "$LAT_PORT"
pb_wait_port "$CTL_PORT"

to_us() {
    awk '{v = $1; if (v ~ /us$/) {sub(/us$/, "", v); print v} else if (v ~ /ms$/) {sub(/ms$/, "", v); print v * 1000}
          else if (v ~ /m$/) {sub(/m$/, "", v); print v * 6e7} else if (v ~ /s$/) {sub(/s$/, "", v); print v * 1e6}}' <<<"$1"
}
connections() {
    (exec 3<>"/dev/tcp/127.0.0.1/$CTL_PORT" &&
        printf 'GET /counters HTTP/1.1\r\nAuthorization: Bearer %s\r\nConnection: close\r\n\r\n' "$(cat "$tmp/ctl.token")" >&3 &&
        cat <&3) | sed -n 's/.*"connections":\([0-9]*\).*/\1/p'
}
# overshoot LABEL P50 P90 P99 (wrk-style values) -> one line
overshoot() {
    awk -v l="$1" -v a="$(to_us "$2")" -v b="$(to_us "$3")" -v c="$(to_us "$4")" 'BEGIN {
        printf "   %-48s p50 %6.0f us  p90 %6.0f us  p99 %7.0f us  (p99 target < 1000 us: %s)\n",
            l, a - 10000, b - 10000, c - 10000, (c - 10000 < 1000) ? "met" : "missed" }'
}

echo
echo "== latency: proxybench backend --profile latency=10ms (1 thread, cpu $SERVER_CPU) behind 5000 open connections"
echo "   overshoot = latency - 10 ms; whole-run numbers include the first seconds, while the load generator"
echo "   opens its 5000 connections; the steady-state line is each later second's p99 (median and worst)"
if "$BIN" load --help >/dev/null 2>&1; then
    for r in $(seq "$ROUNDS"); do
        c0=$(pb_cpu_ticks "$lat_pid")
        t0=$(date +%s.%N)
        out=$("${prio[@]}" taskset -c "$LOAD_CPU" "$BIN" load -t1 -c5000 -R "$LAT_RATE" -d"$LAT_DURATION" --timeout 5s --latency \
            --u-latency --timeline "$tmp/timeline.csv" "http://127.0.0.1:$LAT_PORT/" 2>&1)
        t1=$(date +%s.%N)
        c1=$(pb_cpu_ticks "$lat_pid")
        p50=$(awk '$1 == "50%" {print $2}' <<<"$out")
        p90=$(awk '$1 == "90%" {print $2}' <<<"$out")
        p99=$(awk '$1 == "99%" {print $2}' <<<"$out")
        u=$(grep 'Uncorrected latency' <<<"$out" || true)
        up50=$(sed -n 's/.* p50=\([^ ]*\).*/\1/p' <<<"$u")
        up90=$(sed -n 's/.* p90=\([^ ]*\).*/\1/p' <<<"$u")
        up99=$(sed -n 's/.* p99=\([^ ]*\).*/\1/p' <<<"$u")
        fails=$(sed -n 's/.*Failures: \([0-9]*\) of \([0-9]*\).*/\1 of \2/p' <<<"$out")
        late=$(sed -n 's/.*Late sends (> 1.00ms): \([0-9]*\) of.*max=\([^ ]*\) .*/\1 late sends, max \2/p' <<<"$out")
        echo "   round $r: proxybench load -t1 -c5000 -R $LAT_RATE -d$LAT_DURATION (open loop, even arrivals); failures $fails;" \
            "load generator: ${late:-no late sends}; backend CPU $(awk -v t=$((c1 - c0)) -v k="$TCK" -v a="$t0" -v b="$t1" \
            'BEGIN {printf "%.0f%% of a core", 100 * t / k / (b - a)}')"
        overshoot "whole run, from each request's intended send:" "$p50" "$p90" "$p99"
        overshoot "whole run, from each request's actual send:" "$up50" "$up90" "$up99"
        # Steady state: each second's p99 after the first two (5000 connects happen at the start).
        awk -F, 'NR > 1 && $1 >= 2 && $2 > 1000 {print $20 - 10000}' "$tmp/timeline.csv" | sort -g | awk '
            {v[NR] = $1} END { if (NR == 0) exit;
                printf "   %-48s median %6.0f us  worst %7.0f us  over %d one-second windows\n",
                    "steady state (after the 5000 connects), p99:", v[int((NR + 1) / 2)], v[NR], NR }'
    done
    echo "   connections accepted by the backend: $(connections)"
else
    echo "   ($BIN has no 'load' command yet: open-loop runs skipped)"
fi

echo
echo "== for reference, wrk -t1 -c5000 --latency (closed loop): 5000 connections each re-sending at once ask for"
echo "   500k req/s, far beyond one wrk thread, so this measures wrk's own queueing as much as the backend"
c0=$(pb_cpu_ticks "$lat_pid")
t0=$(date +%s.%N)
out=$("${prio[@]}" taskset -c "$LOAD_CPU" wrk -t1 -c5000 -d"$LAT_DURATION" --timeout 5s --latency "http://127.0.0.1:$LAT_PORT/")
t1=$(date +%s.%N)
c1=$(pb_cpu_ticks "$lat_pid")
echo "$out" | sed 's/^/   /'
p50=$(awk '$1 == "50%" {print $2}' <<<"$out")
p90=$(awk '$1 == "90%" {print $2}' <<<"$out")
p99=$(awk '$1 == "99%" {print $2}' <<<"$out")
overshoot "over 10 ms (wrk, closed loop):" "$p50" "$p90" "$p99"
awk -v t=$((c1 - c0)) -v k="$TCK" -v a="$t0" -v b="$t1" 'BEGIN {
    p = 100 * t / k / (b - a);
    printf "   backend CPU during the wrk run: %.0f%% of a core (%s)\n", p,
        (p < 90) ? "not saturated: the queueing is in wrk" : "saturated" }'
