#!/usr/bin/env bash
# bench/soak.sh: does anything leak over a long run? Open-loop load at a steady rate through a
# real nginx (1 worker, upstream keepalive) to a `proxybench backend`, with an nginx reload
# (SIGHUP) every RELOAD_EVERY seconds.
#
# Every second it samples VmRSS (/proc/PID/status) and the open fd count (/proc/PID/fd) of the
# load generator and of the backend. At the end it prints, per process, RSS first / after
# warm-up / last / max and fds first / last / max, the ratio last RSS / RSS after warm-up, and
# the exact counts:
#   - load: sent == responses + errors (every attempt ends one way or the other; a reload closes
#     idle keep-alive connections, so a few read_idle_closed errors are expected);
#   - backend's counted requests (read through its control port) == load's 200 responses ==
#     200 lines in nginx's access log; no other status.
# It fails (exit 1) if a count is off, a reload did not happen, or an RSS ratio exceeds
# SOAK_RSS_BOUND. Bad setup: exit 2. The last lines are machine-readable, `soak: key=value ...`.
#
# Knobs (environment): SOAK_SECONDS=1800 SOAK_RATE=2000 RELOAD_EVERY=60
# SOAK_WARMUP=min(60, SOAK_SECONDS/4) SOAK_RSS_BOUND=1.10 SOAK_CONNS=50 SOAK_KEEP= (set: keep the
# work directory with nginx.conf, logs, samples and load.json)
# PROXYBENCH=target/release/proxybench NGINX=$(command -v nginx)
# 60-second form (what `make test` runs, through crates/cli/tests/soak.rs):
#   SOAK_SECONDS=60 RELOAD_EVERY=10 bash bench/soak.sh
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)

SECONDS_TOTAL=${SOAK_SECONDS:-1800}
RATE=${SOAK_RATE:-2000}
RELOAD_EVERY=${RELOAD_EVERY:-60}
CONNS=${SOAK_CONNS:-50}
BOUND=${SOAK_RSS_BOUND:-1.10}
BIN=${PROXYBENCH:-$ROOT/target/release/proxybench}
NGINX=${NGINX:-$(command -v nginx || echo /usr/sbin/nginx)}

die() { echo "soak: $*" >&2; exit 2; }
whole() { [[ $2 =~ ^[1-9][0-9]*$ ]] || die "$1 must be a positive whole number, not '$2'"; }
whole SOAK_SECONDS "$SECONDS_TOTAL"
whole SOAK_RATE "$RATE"
whole RELOAD_EVERY "$RELOAD_EVERY"
whole SOAK_CONNS "$CONNS"
WARMUP=${SOAK_WARMUP:-$((SECONDS_TOTAL / 4 < 60 ? SECONDS_TOTAL / 4 : 60))}
[[ $WARMUP =~ ^[0-9]+$ ]] && [ "$WARMUP" -lt "$SECONDS_TOTAL" ] ||
    die "SOAK_WARMUP must be a whole number of seconds below SOAK_SECONDS, not '$WARMUP'"
[[ $BOUND =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "SOAK_RSS_BOUND must be a number like 1.10, not '$BOUND'"
[ -x "$NGINX" ] || die "nginx is not installed (apt-get install -y nginx)"
command -v setsid >/dev/null || die "setsid is needed (util-linux)"
command -v python3 >/dev/null || die "python3 is needed"
if [ -z "${PROXYBENCH:-}" ] && [ ! -x "$BIN" ]; then
    (cd "$ROOT" && cargo build --release --locked -q -p proxybench) >&2
fi
[ -x "$BIN" ] || die "no proxybench binary at $BIN"

WORK=$(mktemp -d /tmp/pb-soak.XXXXXX)
LOAD_PID= BACKEND_PID= NGINX_PID=
WORKERS=()
# Stops what this run started, by pid: load, nginx (master, then any worker left), backend.
cleanup() {
    local p
    set +e # a process already gone must not stop the cleanup half-way
    [ -n "$LOAD_PID" ] && kill -TERM "$LOAD_PID" 2>/dev/null
    # Workers a reload started since the last sample must be known before the master goes.
    declare -F note_workers >/dev/null && note_workers
    if [ -n "$NGINX_PID" ] && kill -0 "$NGINX_PID" 2>/dev/null; then
        kill -QUIT "$NGINX_PID" 2>/dev/null
        for _ in $(seq 50); do kill -0 "$NGINX_PID" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$NGINX_PID" 2>/dev/null
    fi
    for p in "${WORKERS[@]}"; do
        # Only if it is still an nginx process (the pid may have been reused).
        grep -qs '^nginx' "/proc/$p/cmdline" && kill -KILL "$p" 2>/dev/null
    done
    [ -n "$BACKEND_PID" ] && kill -TERM "$BACKEND_PID" 2>/dev/null
    for p in $LOAD_PID $NGINX_PID $BACKEND_PID; do wait "$p" 2>/dev/null; done
    if [ -n "${SOAK_KEEP:-}" ]; then echo "soak: files kept in $WORK" >&2; else rm -rf "$WORK"; fi
    return 0
}
trap cleanup EXIT
trap 'exit 130' INT TERM
trap 'exit 129' HUP
trap 'exit 141' PIPE

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() {
    for _ in $(seq 200); do
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        sleep 0.05
    done
    echo "soak: nothing listens on 127.0.0.1:$1" >&2
    exit 1
}

# --- backend ---------------------------------------------------------------------------------
# Every process this script starts runs in a session of its own (setsid execs in place, so $! is
# the process itself): a Ctrl-C reaches only this script, whose trap then stops them all, in
# order, instead of each one reacting on its own (the load would end early and be analysed).
setsid "$BIN" backend --listen 127.0.0.1:0 --control 127.0.0.1:0 --token-file "$WORK/control.token" \
    >"$WORK/backend.out" 2>"$WORK/backend.err" &
BACKEND_PID=$!
for _ in $(seq 200); do
    grep -q '^control ' "$WORK/backend.out" 2>/dev/null && break
    kill -0 "$BACKEND_PID" 2>/dev/null || { cat "$WORK/backend.err" >&2; exit 1; }
    sleep 0.05
done
BACKEND_ADDR=$(awk '$1 == "backend-0" {print $2}' "$WORK/backend.out")
CONTROL_ADDR=$(awk '$1 == "control" {print $2}' "$WORK/backend.out")
[ -n "$BACKEND_ADDR" ] && [ -n "$CONTROL_ADDR" ] || { echo "soak: the backend did not start" >&2; exit 1; }

# --- nginx -----------------------------------------------------------------------------------
PORT=$(free_port)
USER_LINE=""
[ "$(id -u)" = 0 ] && USER_LINE="user root;"
cat >"$WORK/nginx.conf" <<EOF
$USER_LINE
worker_processes 1;
pid $WORK/nginx.pid;
error_log $WORK/error.log notice;
events { worker_connections 4096; }
http {
  log_format st '\$status';
  access_log $WORK/access.log st;
  keepalive_requests 1000000000;
  keepalive_timeout 300s;
  client_body_temp_path $WORK/body;
  proxy_temp_path $WORK/proxy;
  upstream backend {
    server $BACKEND_ADDR;
    keepalive 32;
    keepalive_requests 1000000000;
  }
  server {
    listen 127.0.0.1:$PORT;
    location / {
      proxy_pass http://backend;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }
  }
}
EOF
setsid "$NGINX" -p "$WORK" -c "$WORK/nginx.conf" -e "$WORK/error.log" -g "daemon off;" 2>"$WORK/nginx.err" &
NGINX_PID=$!
wait_port "$PORT"

# --- load, sampled every second, nginx reloaded every RELOAD_EVERY s ---------------------------
rss_kb() { awk '$1 == "VmRSS:" {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }
fds() { local f=(/proc/"$1"/fd/*); [ -e "${f[0]}" ] && echo "${#f[@]}" || echo 0; }
note_workers() {
    local w
    for w in $(pgrep -P "$NGINX_PID" 2>/dev/null || true); do
        [[ " ${WORKERS[*]} " == *" $w "* ]] || WORKERS+=("$w")
    done
}

echo "soak: ${SECONDS_TOTAL}s of open-loop load at ${RATE} r/s (-c$CONNS) through nginx (1 worker)," \
    "reload every ${RELOAD_EVERY}s, warm-up ${WARMUP}s, RSS bound ${BOUND}" >&2
setsid "$BIN" load -t1 -c"$CONNS" -R "$RATE" -d"${SECONDS_TOTAL}s" --timeout 10s --format json \
    "http://127.0.0.1:$PORT/" >"$WORK/load.json" 2>"$WORK/load.err" &
LOAD_PID=$!
note_workers
echo "soak: started load=$LOAD_PID backend=$BACKEND_PID nginx=$NGINX_PID workers=$(IFS=,; echo "${WORKERS[*]}")" >&2
t0=$(date +%s%N)
reloads=0
next_reload=$RELOAD_EVERY
echo "t load_rss_kb load_fds backend_rss_kb backend_fds" >"$WORK/samples"
while kill -0 "$LOAD_PID" 2>/dev/null; do
    t=$((($(date +%s%N) - t0) / 1000000000))
    lr=$(rss_kb "$LOAD_PID") lf=$(fds "$LOAD_PID")
    kill -0 "$LOAD_PID" 2>/dev/null || break # exited mid-sample: the sample is partial
    echo "$t $lr $lf $(rss_kb "$BACKEND_PID") $(fds "$BACKEND_PID")" >>"$WORK/samples"
    note_workers
    if [ "$t" -ge "$next_reload" ] && [ "$t" -lt "$SECONDS_TOTAL" ]; then
        kill -HUP "$NGINX_PID"
        reloads=$((reloads + 1))
        next_reload=$((next_reload + RELOAD_EVERY))
        [ $((reloads % 5)) = 0 ] && echo "soak: ${t}s, $reloads reloads" >&2
    fi
    sleep 1
done
set +e
wait "$LOAD_PID"
load_rc=$?
set -e
LOAD_PID_DONE=$LOAD_PID
LOAD_PID=
note_workers
[ "$load_rc" = 0 ] || { echo "soak: proxybench load exited $load_rc: $(cat "$WORK/load.err")" >&2; exit 1; }

# Counters after the last response: nginx is idle, so the backend has counted everything.
TOKEN=$(cat "$WORK/control.token")
python3 - "$CONTROL_ADDR" "$TOKEN" >"$WORK/counters.json" <<'PY'
import http.client, sys
host, port = sys.argv[1].rsplit(":", 1)
c = http.client.HTTPConnection(host, int(port), timeout=10)
c.request("GET", "/counters", headers={"Authorization": "Bearer " + sys.argv[2]})
r = c.getresponse()
body = r.read().decode()
if r.status != 200:
    sys.exit(f"soak: control answered {r.status}: {body}")
print(body)
PY
# A graceful stop, so every access log line is written, then nothing of nginx may be left.
kill -QUIT "$NGINX_PID"
wait "$NGINX_PID" 2>/dev/null || true
NGINX_PID_DONE=$NGINX_PID
NGINX_PID=
reconfigured=$(grep -cE '#[0-9]+: reconfiguring$' "$WORK/error.log" || true)
kill -TERM "$BACKEND_PID"
wait "$BACKEND_PID" 2>/dev/null || true
BACKEND_PID_DONE=$BACKEND_PID
BACKEND_PID=

set +e
python3 - "$WORK" "$WARMUP" "$BOUND" "$RATE" "$SECONDS_TOTAL" "$reloads" "$reconfigured" <<'PY'
import collections, json, sys
work, warmup, bound = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
rate, seconds, reloads, reconfigured = map(int, sys.argv[4:8])
load = json.load(open(f"{work}/load.json"))
backend = json.load(open(f"{work}/counters.json"))
logged = collections.Counter(l.strip() for l in open(f"{work}/access.log"))
rows = [list(map(int, l.split())) for l in open(f"{work}/samples").read().splitlines()[1:]]
fail = []
if len(rows) < 3:
    sys.exit("soak: fewer than 3 samples")
after = next((r for r in rows if r[0] >= warmup), rows[-1])

def proc(name, ri, fi):
    rss = [r[ri] for r in rows]
    fd = [r[fi] for r in rows]
    ratio = rss[-1] / after[ri] if after[ri] else float("inf")
    print(f"{name:8} RSS first {rss[0] / 1024:7.1f} MiB, after warm-up ({after[0]}s) {after[ri] / 1024:7.1f},"
          f" last {rss[-1] / 1024:7.1f}, max {max(rss) / 1024:7.1f}; last/after-warm-up {ratio:.3f};"
          f" fds first {fd[0]}, last {fd[-1]}, max {max(fd)}")
    if ratio > bound:
        fail.append(f"{name} RSS grew {ratio:.3f}x after warm-up (bound {bound})")
    return ratio, rss, fd

rl, lrss, lfd = proc("load", 1, 2)
rb, brss, bfd = proc("backend", 3, 4)

errors = sum(load["errors"].values())
sent, intended = load["schedule"]["sent"], load["schedule"]["intended"]
status = {int(k): v for k, v in load["status"].items()}
ok200 = status.get(200, 0)
other = sum(v for k, v in status.items() if k != 200)
b_requests = sum(c["requests"] for c in backend)
n_logged = sum(logged.values())
print(f"load: intended {intended}, sent {sent}, responses {load['requests']} (200: {ok200}, other: {other}),"
      f" errors {errors} {dict(load['errors'])}; achieved {load['schedule']['achieved_rate']:.1f}/s")
print(f"backend counted {b_requests}; nginx logged {n_logged} {dict(logged)}; reloads sent {reloads},"
      f" nginx reconfigured {reconfigured} times")
if sent != load["requests"] + errors:
    fail.append(f"sent {sent} != responses {load['requests']} + errors {errors}")
if other:
    fail.append(f"{other} responses were not 200")
if not (b_requests == ok200 == logged.get("200", 0) == n_logged):
    fail.append(f"counts differ: backend {b_requests}, load 200s {ok200}, nginx log {dict(logged)}")
if reloads == 0 or reconfigured != reloads:
    fail.append(f"reloads: sent {reloads}, nginx reconfigured {reconfigured}")
exact = "yes" if not any(f.startswith(("sent", "counts")) for f in fail) else "no"
print(f"soak: seconds={seconds} rate={rate} samples={len(rows)} warmup_s={after[0]} reloads={reloads}"
      f" reconfigured={reconfigured}")
print(f"soak: rss_kb_load first={lrss[0]} warm={after[1]} last={lrss[-1]} max={max(lrss)}"
      f" fds_load first={lfd[0]} last={lfd[-1]} max={max(lfd)}")
print(f"soak: rss_kb_backend first={brss[0]} warm={after[3]} last={brss[-1]} max={max(brss)}"
      f" fds_backend first={bfd[0]} last={bfd[-1]} max={max(bfd)}")
print(f"soak: counts sent={sent} responses={load['requests']} errors={errors} status_200={ok200}"
      f" status_other={other} backend={b_requests} nginx_logged={n_logged} exact={exact}")
print(f"soak: rss_ratio_load={rl:.3f} rss_ratio_backend={rb:.3f} bound={bound}")
for f in fail:
    print(f"soak: FAIL {f}", file=sys.stderr)
sys.exit(1 if fail else 0)
PY
rc=$?
echo "soak: pids load=$LOAD_PID_DONE backend=$BACKEND_PID_DONE nginx=$NGINX_PID_DONE workers=$(IFS=,; echo "${WORKERS[*]}")"
exit $rc
