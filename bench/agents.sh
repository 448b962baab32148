#!/usr/bin/env bash
# bench/agents.sh: what does distributing a load cost per request?
#
# One nginx (one worker, `return 200`, access_log off) on loopback. The same open-loop load
# (RATE req/s for DURATION over CONNS connections) is run ROUNDS times each way: by one local
# `proxybench load`, and by 1, 2 and 4 `proxybench agent` processes on loopback driven by a
# `proxybench load --agent-hosts` coordinator. For each run it prints the merged counts (responses,
# failed attempts, the schedule's intended and sent, so a shortfall says where it went), req/s,
# the client CPU per request (user+system ticks of the local load, or of the coordinator plus
# every agent, over the requests counted) and the coordinator's (or local load's) peak RSS.
#
# Knobs (environment): ROUNDS=2 RATE=4000 DURATION=10s CONNS=16 AGENTS="1 2 4"
# PROXYBENCH=target/release/proxybench NGINX=/usr/sbin/nginx
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=${PROXYBENCH:-target/release/proxybench}
NGINX=${NGINX:-$(command -v nginx || echo /usr/sbin/nginx)}
ROUNDS=${ROUNDS:-2}
RATE=${RATE:-4000}
DURATION=${DURATION:-10s}
CONNS=${CONNS:-16}
AGENTS=${AGENTS:-1 2 4}
TCK=$(getconf CLK_TCK)

[ -x "$NGINX" ] || { echo "agents: nginx is not installed" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "agents: /usr/bin/time is not installed (apt-get install -y time)" >&2; exit 2; }
[ -x "$BIN" ] || cargo build --release -p proxybench >&2

ROOT=$(pwd)
# shellcheck source=bench/common.sh
. bench/common.sh
pb_workdir agents
tmp=$WORK
json_num() { sed -n "s/^  \"$1\": \([0-9.]*\),\{0,1\}$/\1/p" "$2" | head -1; }

NG_PORT=$(pb_port_from 18280)
pb_hello_nginx_conf "$NG_PORT" "worker_connections 16384;"
PORT=$NG_PORT pb_start_nginx
pb_wait_port "$NG_PORT"
URL="http://127.0.0.1:$NG_PORT/"
echo "tok-$$-$RANDOM" >"$tmp/token"

printf '%-8s %5s %10s %7s %10s %10s %10s %14s %12s\n' mode round requests errors intended sent \
    "req/s" "cpu_us/req" "peak_rss_kb"
report() { # mode round json cpu_ticks rss
    local req elapsed counts
    req=$(json_num requests "$3")
    elapsed=$(json_num elapsed_s "$3")
    # Failed attempts (every error kind) and the open-loop schedule's intended and sent.
    counts=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); s=d["schedule"]
print(sum(d["errors"].values()), s["intended"], s["sent"])' "$3")
    read -r errs intended sent <<<"$counts"
    awk -v m="$1" -v r="$2" -v n="$req" -v e="$elapsed" -v t="$4" -v k="$TCK" -v rss="$5" \
        -v f="$errs" -v i="$intended" -v s="$sent" \
        'BEGIN { printf "%-8s %5s %10d %7d %10d %10d %10.1f %14.2f %12d\n", m, r, n, f, i, s, n / e, t / k * 1e6 / n, rss }'
}

for round in $(seq "$ROUNDS"); do
    # Local: one process does it all.
    /usr/bin/time -f "%U %S %M" -o "$tmp/time" \
        "$BIN" load -R "$RATE" -d "$DURATION" -c "$CONNS" --format json "$URL" >"$tmp/local.json"
    read -r u s m <"$tmp/time"
    report local "$round" "$tmp/local.json" "$(awk -v u="$u" -v s="$s" -v k="$TCK" 'BEGIN{print (u+s)*k}')" "$m"
    for n in $AGENTS; do
        hosts=()
        apids=()
        for _ in $(seq "$n"); do
            p=$(pb_port_from $((NG_PORT + 1)))
            "$BIN" agent --listen "127.0.0.1:$p" --token-file "$tmp/token" >/dev/null 2>&1 &
            apids+=("$!")
            PB_PIDS+=("$!")
            pb_wait_port "$p"
            hosts+=("127.0.0.1:$p")
        done
        before=0
        for a in "${apids[@]}"; do before=$((before + $(pb_cpu_ticks "$a"))); done
        /usr/bin/time -f "%U %S %M" -o "$tmp/time" \
            "$BIN" load -R "$RATE" -d "$DURATION" -c "$CONNS" --format json \
            --agent-hosts "$(IFS=,; echo "${hosts[*]}")" --token-file "$tmp/token" "$URL" \
            >"$tmp/agents.json" 2>"$tmp/agents.err"
        after=0
        for a in "${apids[@]}"; do after=$((after + $(pb_cpu_ticks "$a"))); done
        read -r u s m <"$tmp/time"
        t=$(awk -v u="$u" -v s="$s" -v k="$TCK" -v a=$((after - before)) 'BEGIN{print (u+s)*k + a}')
        report "agents$n" "$round" "$tmp/agents.json" "$t" "$m"
        for a in "${apids[@]}"; do kill -TERM "$a" 2>/dev/null || true; wait "$a" 2>/dev/null || true; done
    done
done
