#!/usr/bin/env bash
# The cost of --metrics-listen: proxybench load with and without it, side by side against the
# same nginx (1 worker, `return 200`), as bench/vs-wrk.sh measures proxybench against wrk.
#
# Runs the two ALTERNATELY (so drift on a noisy machine hits both alike), ROUNDS rounds each of
# `-t1 -c50 -d10s`, and prints per run: requests/s and client CPU seconds per million requests
# (user+sys from getrusage of the client process); then the medians, their spread (min..max)
# and the ratios with/without. With the flag, /metrics is scraped every SCRAPE seconds while
# the load runs (as Prometheus would), so the cost of rendering it is in the count; the
# linger is 0s (the run's CPU only).
#
# Target: the CPU-per-request ratio within the rounds' own spread (the flag feeds the metrics
# once a second from the engine's per-second rows; nothing is done per request).
#
# Usage: bench/metrics-cost.sh   (env: ROUNDS=5 DURATION=10s CONNS=50 THREADS=1 SCRAPE=0.5 PB_ARGS=)
set -euo pipefail

ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-10s}
CONNS=${CONNS:-50}
THREADS=${THREADS:-1}
SCRAPE=${SCRAPE:-0.5}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/common.sh
. "$ROOT/bench/common.sh"

pb_need_nginx
pb_need python3 "python3 is needed for getrusage"
pb_ensure_built

pb_workdir metrics-cost

PORT=${PORT:-$(pb_free_port)}
pb_hello_nginx_conf "$PORT"
pb_start_nginx
URL="http://127.0.0.1:$PORT/"

# Runs one client under getrusage, scraping METRICS_PORT (when not empty) every SCRAPE s from
# this (python) process; prints "rps cpu_s requests scrapes".
measure() {
  python3 - "$SCRAPE" "$@" <<'PY'
import re, resource, subprocess, sys, threading, time, urllib.request
every, port, cmd = float(sys.argv[1]), sys.argv[2], sys.argv[3:]
p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
scrapes = [0]
def scrape():
    while p.poll() is None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
                if b"# EOF" in r.read():
                    scrapes[0] += 1
        except OSError:
            pass
        time.sleep(every)
if port:
    t = threading.Thread(target=scrape, daemon=True)
    t.start()
stdout = p.stdout.read()
p.wait()
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
rps = float(re.search(r"^Requests/sec:\s+([\d.]+)", stdout, re.M).group(1))
reqs = int(re.search(r"^\s+(\d+) requests in", stdout, re.M).group(1))
print(f"{rps:.0f} {ru.ru_utime + ru.ru_stime:.3f} {reqs} {scrapes[0]}")
PY
}

echo "proxybench load ${PB_ARGS:+$PB_ARGS }-t$THREADS -c$CONNS -d$DURATION, without and with --metrics-listen (scraped every ${SCRAPE}s)  (nginx, 1 worker, $URL)"
printf '%-8s %5s %10s %11s %13s %8s\n' metrics round req/s requests "cpu s/Mreq" scrapes
declare -a OFF_R OFF_C ON_R ON_C
for r in $(seq "$ROUNDS"); do
  for mode in off on; do
    if [ "$mode" = off ]; then
      # shellcheck disable=SC2086
      read -r rps cpu reqs sc < <(measure "" "$PB" load ${PB_ARGS:-} -t"$THREADS" -c"$CONNS" -d"$DURATION" "$URL")
    else
      MP=$(pb_free_port)
      # shellcheck disable=SC2086
      read -r rps cpu reqs sc < <(measure "$MP" "$PB" load ${PB_ARGS:-} -t"$THREADS" -c"$CONNS" -d"$DURATION" \
        --metrics-listen "127.0.0.1:$MP" --metrics-linger 0s "$URL")
    fi
    per_m=$(python3 -c "print(f'{$cpu * 1e6 / $reqs:.3f}')")
    printf '%-8s %5s %10s %11s %13s %8s\n' "$mode" "$r" "$rps" "$reqs" "$per_m" "$sc"
    if [ "$mode" = off ]; then OFF_R+=("$rps"); OFF_C+=("$per_m"); else ON_R+=("$rps"); ON_C+=("$per_m"); fi
  done
done

python3 - "${OFF_R[*]}" "${OFF_C[*]}" "${ON_R[*]}" "${ON_C[*]}" <<'PY'
import statistics as st, sys
fr, fc, nr, nc = ([float(x) for x in a.split()] for a in sys.argv[1:5])
def line(name, r, c):
    print(f"{name:<16} req/s {st.median(r):>9.0f} ({min(r):.0f}..{max(r):.0f})   "
          f"cpu s/Mreq {st.median(c):>7.3f} ({min(c):.3f}..{max(c):.3f})")
print("\nmedians (spread min..max):")
line("without", fr, fc)
line("--metrics-listen", nr, nc)
spread = (max(fc) - min(fc)) / st.median(fc)
print(f"\nratios with/without: req/s {st.median(nr) / st.median(fr):.3f}, "
      f"CPU per request {st.median(nc) / st.median(fc):.3f} "
      f"(the runs without the flag spread by {100 * spread:.1f}% among themselves)")
PY
