#!/usr/bin/env bash
# Makes docs/grafana/prometheus-graphs.png: a real Prometheus scrapes `proxybench run default`
# (--metrics-listen, every second), then headless Chromium renders Prometheus' own graph page with
# the dashboard's main queries over the run. (Grafana cannot be installed from Debian's packages;
# the dashboard JSON beside this script is for a Grafana you have.)
#
# Needs: prometheus and chromium (Debian packages), nginx, a release build.
# Usage: docs/grafana/screenshot.sh   (env: SCENARIO=default PB=target/release/proxybench)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PB=${PB:-$ROOT/target/release/proxybench}
SCENARIO=${SCENARIO:-default}
OUT=${OUT:-$ROOT/docs/grafana/prometheus-graphs.png}
for t in prometheus chromium; do
  command -v "$t" >/dev/null || { echo "screenshot: $t is not installed (apt-get install $t)" >&2; exit 2; }
done
[ -x "$PB" ] || { echo "screenshot: build proxybench first (cargo build --release)" >&2; exit 2; }

WORK=$(mktemp -d /tmp/pb-screenshot.XXXXXX)
PROM_PID=
cleanup() {
  if [ -n "$PROM_PID" ]; then kill -TERM "$PROM_PID" 2>/dev/null || true; wait "$PROM_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
MPORT=$(free_port)
PPORT=$(free_port)
cat >"$WORK/prometheus.yml" <<CONF
global:
  scrape_interval: 1s
scrape_configs:
  - job_name: proxybench
    static_configs:
      - targets: ['127.0.0.1:$MPORT']
CONF
prometheus --config.file="$WORK/prometheus.yml" --storage.tsdb.path="$WORK/data" \
  --web.listen-address="127.0.0.1:$PPORT" --log.level=warn 2>"$WORK/prometheus.log" &
PROM_PID=$!
# The target is handed to the scrapers a few seconds after the start: wait for its first try.
for _ in $(seq 300); do
  if curl -s "http://127.0.0.1:$PPORT/api/v1/query?query=up" | grep -q '"result":\[{'; then break; fi
  sleep 0.1
done

START=$(date +%s)
"$PB" run "$SCENARIO" --no-progress --results "$WORK/results" --metrics-listen "$MPORT" --metrics-linger 10s >/dev/null || true
# The graphs end now, just after the run: their range covers it.
RANGE=$(( $(date +%s) - START + 2 ))

enc() { python3 -c 'import sys, urllib.parse as u; print(u.quote(sys.argv[1], safe=""))' "$1"; }
Q0=$(enc 'sum by (load, class) (rate(proxybench_load_responses_total[2s]))')
Q1=$(enc 'histogram_quantile(0.99, sum by (load, le) (rate(proxybench_load_latency_seconds_bucket[2s])))')
Q2=$(enc 'sum by (case, action) (proxybench_case_actions_total)')
URL="http://127.0.0.1:$PPORT/classic/graph?"
i=0
for q in "$Q0" "$Q1" "$Q2"; do
  URL+="g$i.expr=$q&g$i.tab=0&g$i.range_input=${RANGE}s&"
  i=$((i + 1))
done
chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1300,2450 \
  --virtual-time-budget=15000 --screenshot="$OUT" "$URL" 2>/dev/null
echo "$OUT"
