#!/usr/bin/env bash
# bench/proxies.sh: what each proxy costs in front of the same backends under the same load.
#
# Runs the proxy-overhead scenario's c200 closed loop (`proxybench run proxy-overhead --proxy
# nginx,haproxy,caddy`, one comparison run: the proxies one after another, each with the same
# emulated backends and the same load) on the cases in CASES, then prints one row per proxy:
# req/s, p99 and the proxy's CPU microseconds per request (its processes' CPU time over the case,
# sampled once a second, over the responses), from the comparison.json the run writes; plus the
# direct case (the load against a backend, no proxy) as the baseline.
#
# A kind this proxybench does not know (its driver is not built in: `proxybench capabilities`
# lists the known ones) or whose binary is not installed is skipped with a message.
#
# Knobs (environment): KINDS="nginx haproxy caddy" CASE=keepalive-cheap DIRECT=direct-cheap
# (empty: no baseline) QUICK= (1: the 4-second quick form instead of 30 s per case)
# RESULTS=<tmp dir> PROXYBENCH=target/release/proxybench
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=${PROXYBENCH:-target/release/proxybench}
KINDS=${KINDS:-nginx haproxy caddy}
CASE=${CASE:-keepalive-cheap}
DIRECT=${DIRECT-direct-cheap}
QUICK=${QUICK:-}
command -v python3 >/dev/null || { echo "proxies: python3 is needed to read comparison.json" >&2; exit 2; }
if [ ! -x "$BIN" ] || [ -n "$(find crates -newer "$BIN" -name '*.rs' -print -quit)" ]; then
  echo "building proxybench (release)..." >&2
  cargo build --release -q -p proxybench
fi

# The kinds this proxybench knows: the columns of its capability table.
known=$("$BIN" capabilities | head -1 | tr -d '|' | tr -s ' ' '\n' | grep -v -e '^$' -e '^Feature$' || true)
run=()
for k in $KINDS; do
  if ! grep -qx "$k" <<<"$known"; then
    echo "proxies: skipping $k: this proxybench has no $k driver (it knows: $(echo $known))" >&2
  elif ! command -v "$k" >/dev/null && [ ! -x "/usr/sbin/$k" ] && [ ! -x "/usr/bin/$k" ]; then
    echo "proxies: skipping $k: $k is not installed (apt-get install $k)" >&2
  else
    run+=("$k")
  fi
done
[ ${#run[@]} -gt 0 ] || { echo "proxies: no proxy to run" >&2; exit 2; }

RESULTS=${RESULTS:-$(mktemp -d /tmp/pb-proxies.XXXXXX)}
mkdir -p "$RESULTS"
args=(run proxy-overhead --no-progress --results "$RESULTS" --case "$CASE")
[ -n "$DIRECT" ] && args+=(--case "$DIRECT")
[ -n "$QUICK" ] && args+=(--quick)
list=$(IFS=,; echo "${run[*]}")
# A list of two or more kinds is a comparison; one kind is compared alone only as `all` (every
# kind this proxybench knows), so a lone kind must be the only one known.
if [ ${#run[@]} -eq 1 ]; then
  if [ "$known" = "${run[0]}" ]; then
    list=all
  else
    echo "proxies: only ${run[0]} can run here; install another proxy to compare" >&2
    exit 2
  fi
fi
echo "proxybench ${args[*]} --proxy $list" >&2
set +e
"$BIN" "${args[@]}" --proxy "$list" >"$RESULTS/run.log" 2>&1
code=$?
set -e
cmp=$(ls -d "$RESULTS"/proxy-overhead/*/ 2>/dev/null | tail -1)
cmp=${cmp%/}
if [ -z "$cmp" ] || [ ! -f "$cmp/comparison.json" ]; then
  cat "$RESULTS/run.log" >&2
  echo "proxies: the run wrote no comparison (exit $code)" >&2
  exit 1
fi
[ "$code" -eq 0 ] || echo "proxies: the run exited $code (see $RESULTS/run.log)" >&2

python3 - "$cmp/comparison.json" "$CASE" "$DIRECT" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
case, direct = sys.argv[2], sys.argv[3]
cases = {x["name"]: x for x in c["cases"]}
def fmt_ms(us):
    return "-" if us is None else f"{us / 1000:.3f}"
print(f"proxy-overhead, case {case}{' (quick)' if c['quick'] else ''}: "
      f"the same backends and load for every proxy")
print(f"{'proxy':<10} {'version':<28} {'req/s':>10} {'p99 ms':>9} {'cpu us/req':>11} {'failures':>9}")
x = cases.get(case)
for p in c["proxies"]:
    k = p["kind"]
    load = next((m for l in (x or {}).get("loads", []) for m in l["by_proxy"] if m["kind"] == k), None)
    prox = next((m for m in (x or {}).get("proxy", []) if m["kind"] == k), None)
    if load is None:
        print(f"{k:<10} {p['status']}: {p.get('detail') or ''}")
        continue
    cpu = prox and prox.get("cpu_us_per_request")
    print(f"{k:<10} {p['version'][:28]:<28} {load['req_per_sec']:>10.0f} {fmt_ms(load['p99_us']):>9} "
          f"{'-' if cpu is None else f'{cpu:.1f}':>11} {load['failures']:>9}")
d = cases.get(direct) if direct else None
if d:
    for m in d["loads"][0]["by_proxy"]:
        print(f"{'(direct)':<10} {'run with ' + m['kind']:<28} {m['req_per_sec']:>10.0f} "
              f"{fmt_ms(m['p99_us']):>9} {'-':>11} {m['failures']:>9}")
print(f"\ncomparison: {sys.argv[1].rsplit('/', 1)[0]}/comparison.md")
PY
