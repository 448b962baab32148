#!/usr/bin/env bash
# bench/proxies-idiomatic.sh: is the proxy comparison fair? Each proxy runs twice in one run, with
# the same backends and the same load:
#   rendered   the config proxybench's driver renders from the neutral model (access log off)
#   idiomatic  a config written the way the proxy's own documentation recommends for a reverse
#              proxy with upstream keepalive (bench/idiomatic/: nginx.conf, haproxy.cfg,
#              Caddyfile), started by this script and attached as `kind = "external"`
# and twice more, so that what the rendered config adds has a measured cost:
#   idiomatic+stamps  the idiomatic config with the headers proxybench's measurements need (the
#                     lines ending in `# stamps`: a generation header, a request id...)
#   rendered+log      the rendered config with the JSON access log the scenarios keep for counts
#
# Equal resources: every proxy runs on the same core (PROXY_CPU, through `[proxy] cpus` for the
# rendered form and taskset for the idiomatic one), with one worker process (nginx), one thread
# (HAProxy's nbthread) or GOMAXPROCS=1 (Caddy); the load and the two backends share the other
# core (LOAD_CPU). The rendered form records this in env.json (proxy_resources).
#
# Throughput: a closed loop of CONNS keep-alive connections for DURATION, ROUNDS times, the forms
# alternated in each round; req/s from the run's exact count, CPU per request from the proxy's
# processes sampled once a second (the same sampler for both forms), medians over the rounds.
# The rendered form should come within 10% of the idiomatic one on both.
#
# Reload loss: the same load for RELOAD_DURATION with RELOADS reloads, once with plain
# keep-alive clients and once with --retry-idle-closed (a request lost to a reused connection the
# proxy closed is sent again, as Go's net/http does); failures counted by kind.
#
# Knobs (environment): KINDS="nginx haproxy caddy" DURATION=10s CONNS=50 ROUNDS=3
# RELOADS=5 (0: no reload runs) RELOAD_DURATION=12s PROXY_CPU=1 LOAD_CPU=0 PORT=18080 BACKEND_PORT=19101 (and the
# next) ADMIN_PORT=18019 (Caddy's admin API) RESULTS=<tmp dir> PROXYBENCH=target/release/proxybench
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

BIN=${PROXYBENCH:-$ROOT/target/release/proxybench}
KINDS=${KINDS:-nginx haproxy caddy}
DURATION=${DURATION:-10s}
CONNS=${CONNS:-50}
ROUNDS=${ROUNDS:-3}
RELOADS=${RELOADS:-5}
RELOAD_DURATION=${RELOAD_DURATION:-12s}
PROXY_CPU=${PROXY_CPU:-1}
LOAD_CPU=${LOAD_CPU:-0}
PORT=${PORT:-18080}
B1=${BACKEND_PORT:-19101}
B2=$((B1 + 1))
ADMIN=${ADMIN_PORT:-18019}
command -v python3 >/dev/null || { echo "proxies-idiomatic: python3 is needed to read data.json" >&2; exit 2; }
command -v taskset >/dev/null || { echo "proxies-idiomatic: taskset is needed to pin the processes (apt-get install util-linux)" >&2; exit 2; }
if [ ! -x "$BIN" ] || [ -n "$(find crates -newer "$BIN" -name '*.rs' -print -quit)" ]; then
  echo "building proxybench (release)..." >&2
  cargo build --release --workspace -q
fi

binary() {
  case $1 in
    nginx) command -v nginx || echo /usr/sbin/nginx ;;
    haproxy) command -v haproxy || echo /usr/sbin/haproxy ;;
    caddy) command -v caddy || echo /usr/bin/caddy ;;
  esac
}
run=()
for k in $KINDS; do
  case $k in nginx|haproxy|caddy) ;; *) echo "proxies-idiomatic: no idiomatic config for '$k' (nginx, haproxy, caddy)" >&2; exit 2 ;; esac
  if [ -x "$(binary "$k")" ]; then run+=("$k"); else echo "proxies-idiomatic: skipping $k: not installed (apt-get install $k)" >&2; fi
done
[ ${#run[@]} -gt 0 ] || { echo "proxies-idiomatic: no proxy to run" >&2; exit 2; }

RESULTS=${RESULTS:-$(mktemp -d /tmp/pb-idiomatic.XXXXXX)}
mkdir -p "$RESULTS"
PROXY_PID=
stop_proxy() {
  if [ -n "$PROXY_PID" ]; then
    kill -TERM "$PROXY_PID" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$PROXY_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$PROXY_PID" 2>/dev/null || true
    wait "$PROXY_PID" 2>/dev/null || true
    PROXY_PID=
  fi
}
trap 'stop_proxy' EXIT
trap 'exit 130' INT TERM

# The scenario's common part: two backends on fixed ports (the idiomatic configs point at them),
# one closed-loop load. $1: duration, $2: retry_idle_closed, $3: url.
common() {
  cat <<EOF

[[backends]]
name = "app"
count = 2
listen = "127.0.0.1:$B1"
profile = ""

[[loads]]
name = "ping"
url = "$3"
connections = $CONNS
duration = "$1"
timeout = "5s"
retry_idle_closed = $2
EOF
  local i
  for i in $(seq "$RELOADS_NOW"); do
    printf '\n[[actions]]\nat = "%ss"\nreload = true\n' $((i * 2))
  done
}

# One run of kind $1 in form $2 (rendered, rendered+log, idiomatic); $3 duration, $4 retry flag,
# $5 the results directory. Prints nothing; the results land in $5.
one() {
  local kind=$1 form=$2 dur=$3 retry=$4 out=$5 scn
  mkdir -p "$out"
  scn=$out/scenario.toml
  if [ "$form" = idiomatic ] || [ "$form" = idiomatic+stamps ]; then
    local p=$out/proxy reload
    mkdir -p "$p"
    local file=nginx.conf
    [ "$kind" = haproxy ] && file=haproxy.cfg
    [ "$kind" = caddy ] && file=Caddyfile
    local stamps='/# stamps$/d'
    [ "$form" = idiomatic+stamps ] && stamps='s/ *# stamps$//'
    sed -e "$stamps" -e "s|{PREFIX}|$p|g; s|{PORT}|$PORT|g; s|{B1}|$B1|g; s|{B2}|$B2|g; s|{WORKERS}|1|g; s|{ADMIN}|$ADMIN|g" \
      "bench/idiomatic/$file" >"$p/$file"
    case $kind in
      nginx)
        taskset -c "$PROXY_CPU" "$(binary nginx)" -p "$p" -c "$p/$file" -e "$p/error.log" -g "daemon off;" 2>"$p/stderr" &
        PROXY_PID=$!
        reload="[\"$(binary nginx)\", \"-p\", \"$p\", \"-c\", \"$p/$file\", \"-e\", \"$p/error.log\", \"-s\", \"reload\"]" ;;
      haproxy)
        taskset -c "$PROXY_CPU" "$(binary haproxy)" -W -db -f "$p/$file" 2>"$p/stderr" &
        PROXY_PID=$!
        reload="[\"kill\", \"-USR2\", \"$PROXY_PID\"]" ;;
      caddy)
        GOMAXPROCS=1 taskset -c "$PROXY_CPU" "$(binary caddy)" run --config "$p/$file" --adapter caddyfile 2>"$p/stderr" &
        PROXY_PID=$!
        reload="[\"$(binary caddy)\", \"reload\", \"--config\", \"$p/$file\", \"--adapter\", \"caddyfile\", \"--address\", \"127.0.0.1:$ADMIN\", \"--force\"]" ;;
    esac
    # The load starts once the proxy listens: a refused connect is then the proxy's doing.
    local up=0
    for _ in $(seq 100); do
      if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then up=1; break; fi
      kill -0 "$PROXY_PID" 2>/dev/null || break
      sleep 0.05
    done
    [ "$up" = 1 ] || { cat "$p/stderr" >&2; echo "proxies-idiomatic: $kind did not listen on $PORT" >&2; exit 1; }
    cat >"$scn" <<EOF
name = "idiomatic-$kind"
description = "$kind with bench/idiomatic/$file, attached as an external proxy"
backend_threads = 1

[proxy]
kind = "external"

[proxy.external]
resolve = "127.0.0.1"
reload = $reload
processes = "$kind"
EOF
    common "$dur" "$retry" "http://bench.example:$PORT/ping" >>"$scn"
  else
    local log=false
    [ "$form" = rendered+log ] && log=true
    cat >"$scn" <<EOF
name = "rendered-$kind"
description = "$kind with the config proxybench renders"
backend_threads = 1

[proxy]
kind = "$kind"
cpus = "$PROXY_CPU"
worker_processes = 1
access_log = $log
listeners = [{ name = "http", port = $PORT }]
upstreams = [{ name = "app", backends = "app", keepalive = 64 }]
routes = [{ path = "/", upstream = "app" }]
EOF
    common "$dur" "$retry" "http://bench.example/ping" >>"$scn"
  fi
  # The backends' and the proxy's listeners must be free before the next form starts.
  set +e
  taskset -c "$LOAD_CPU" "$BIN" run "$scn" --no-progress --results "$out/results" >"$out/run.log" 2>&1
  local code=$?
  set -e
  stop_proxy
  if ! ls "$out"/results/*/*/data.json >/dev/null 2>&1; then
    cat "$out/run.log" >&2
    echo "proxies-idiomatic: $kind $form wrote no results (exit $code)" >&2
    exit 1
  fi
  if [ "$code" -ne 0 ] && [ "$code" -ne 1 ]; then
    echo "proxies-idiomatic: $kind $form exited $code (see $out/run.log)" >&2
  fi
}

echo "proxies-idiomatic: ${run[*]}; proxy on CPU $PROXY_CPU, load and backends on CPU $LOAD_CPU; results in $RESULTS" >&2
for k in "${run[@]}"; do
  RELOADS_NOW=0
  for r in $(seq "$ROUNDS"); do
    for form in rendered idiomatic idiomatic+stamps rendered+log; do
      echo "  $k $form round $r" >&2
      one "$k" "$form" "$DURATION" false "$RESULTS/tput/$k/$form/$r"
    done
  done
  RELOADS_NOW=$RELOADS
  [ "$RELOADS" -gt 0 ] || continue
  for retry in false true; do
    for form in rendered idiomatic; do
      echo "  $k $form: $RELOADS reloads, retry_idle_closed = $retry" >&2
      one "$k" "$form" "$RELOAD_DURATION" "$retry" "$RESULTS/reload/$k/$form/$retry"
    done
  done
done

python3 - "$RESULTS" "${run[@]}" <<'PY'
import glob, json, os, statistics, sys

root, kinds = sys.argv[1], sys.argv[2:]
NOT_PROXY = {"load", "backends", "proxybench"}

def data(d):
    return json.load(open(glob.glob(os.path.join(d, "results", "*", "*", "data.json"))[0]))

def measure(d):
    r = data(d)
    case = r["cases"][0]
    load = case["loads"][0]
    requests = load["requests"]
    secs = load["elapsed_s"]
    # The proxy's CPU: each sample's percentage covers the time since its group's previous one.
    groups = {}
    for s in case.get("proc_samples", []):
        if s["group"] in NOT_PROXY:
            continue
        groups.setdefault(s["group"], []).append((s["t_s"], s["cpu_pct"]))
    cpu_s = 0.0
    for v in groups.values():
        v.sort()
        cpu_s += sum(b[1] / 100.0 * max(b[0] - a[0], 0.0) for a, b in zip(v, v[1:]))
    failures = {k: n for k, n in load.get("errors", {}).items() if n}
    return {
        "rps": requests / secs if secs else 0.0,
        "cpu_us": cpu_s * 1e6 / requests if requests and groups else None,
        "requests": requests,
        "failures": failures,
        "retried": load.get("retried", 0),
        "resources": r["env"].get("proxy_resources", {}),
    }

def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None

def f(x, fmt):
    return "-" if x is None else format(x, fmt)

print("Throughput: closed loop, the same backends and load, medians over the rounds")
print(f"{'proxy':<8} {'form':<16} {'req/s':>9} {'cpu us/req':>11}  resources")
verdicts = []
for k in kinds:
    m = {}
    for form in ["rendered", "idiomatic", "idiomatic+stamps", "rendered+log"]:
        runs = [measure(d) for d in sorted(glob.glob(os.path.join(root, "tput", k, form, "*")))]
        m[form] = {"rps": med([x["rps"] for x in runs]), "cpu_us": med([x["cpu_us"] for x in runs])}
        res = "; ".join(sorted(set(v for x in runs for v in x["resources"].values()))) or \
            ("taskset -c, 1 worker/thread/GOMAXPROCS=1" if form.startswith("idiomatic") else "-")
        print(f"{k:<8} {form:<16} {f(m[form]['rps'], '.0f'):>9} {f(m[form]['cpu_us'], '.1f'):>11}  {res}")
    rr = m["rendered"]["rps"] / m["idiomatic"]["rps"] if m["idiomatic"]["rps"] else None
    cr = (m["rendered"]["cpu_us"] / m["idiomatic"]["cpu_us"]
          if m["rendered"]["cpu_us"] and m["idiomatic"]["cpu_us"] else None)
    lr = (m["rendered+log"]["cpu_us"] - m["rendered"]["cpu_us"]
          if m["rendered+log"]["cpu_us"] and m["rendered"]["cpu_us"] else None)
    sr = (m["idiomatic+stamps"]["cpu_us"] - m["idiomatic"]["cpu_us"]
          if m["idiomatic+stamps"]["cpu_us"] and m["idiomatic"]["cpu_us"] else None)
    ok = rr is not None and cr is not None and rr >= 0.9 and cr <= 1.1
    verdicts.append((k, rr, cr, lr, sr, ok))
print()
print("Rendered against idiomatic (goal: req/s >= 0.90x, cpu per request <= 1.10x)")
for k, rr, cr, lr, sr, ok in verdicts:
    print(f"{k:<8} req/s {f(rr, '.3f')}x  cpu/req {f(cr, '.3f')}x  {'within 10%' if ok else 'OUTSIDE 10%'}"
          f"  stamps cost {f(sr, '+.1f')} us/req, access log {f(lr, '+.1f')} us/req")
print()
print("Reload loss: the same load with reloads; failures by kind (retried requests in brackets)")
for k in kinds:
    for retry in ["false", "true"]:
        for form in ["rendered", "idiomatic"]:
            d = os.path.join(root, "reload", k, form, retry)
            if not os.path.isdir(d):
                continue
            x = measure(d)
            lost = sum(x["failures"].values())
            kinds_ = ", ".join(f"{n} {e}" for e, n in sorted(x["failures"].items())) or "none"
            print(f"{k:<8} {form:<10} retry_idle_closed={retry:<5} requests {x['requests']:>8}  "
                  f"lost {lost:>4} ({kinds_}) [{x['retried']} retried]")
print(f"\nresults: {root}")
PY
