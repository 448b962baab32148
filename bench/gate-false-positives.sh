#!/usr/bin/env bash
# The regression gate's false-positive rate: PAIRS pairs (default 20) of identical runs of
# `proxybench run default --quick`, each pair compared with `proxybench compare A B --gate ...`.
# Nothing differs between A and B but chance and the machine, so every failed gate is a false
# positive, and every verdict other than "no significant change" a false significant change.
#
# Two sets of gates, each on every load (coffee and tea):
#   bounded      p50 <= +10%, p99 <= +10%, mean <= +10%, rps >= -5%   (what a CI job would use)
#   zero bound   p50 <= +0%,  p99 <= +0%,  mean <= +0%,  rps >= -0%   (significance alone)
# Prints one line per pair, then the rates. Usage: bash bench/gate-false-positives.sh [PAIRS]
set -euo pipefail
cd "$(dirname "$0")/.."
PAIRS=${1:-20}
BIN=${PROXYBENCH:-target/release/proxybench}
[ -x "$BIN" ] || cargo build --release --locked -p proxybench
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
echo "load: $(uptime)"

run() { # run N: one quick run of the default scenario into $WORK/N; prints its directory
  "$BIN" run default --quick --no-progress --results "$WORK/$1" >"$WORK/$1.log" 2>&1 || true
  ls -d "$WORK/$1"/default/*/ | head -1
}

BOUNDED=(--gate "p50 <= +10%" --gate "p99 <= +10%" --gate "mean <= +10%" --gate "rps >= -5%")
ZERO=(--gate "p50 <= +0%" --gate "p99 <= +0%" --gate "mean <= +0%" --gate "rps >= -0%")

bounded_fail=0 bounded_n=0 zero_fail=0 zero_n=0 sig=0 pairs_failed=0
for i in $(seq 1 "$PAIRS"); do
  a=$(run "a$i")
  b=$(run "b$i")
  "$BIN" compare "$a" "$b" "${BOUNDED[@]}" >"$WORK/bounded$i.md" 2>/dev/null || true
  "$BIN" compare "$a" "$b" "${ZERO[@]}" >"$WORK/zero$i.md" 2>/dev/null || true
  bf=$(grep -c '| FAIL |$' "$WORK/bounded$i.md" || true)
  bn=$(grep -cE '\| (pass|FAIL) \|$' "$WORK/bounded$i.md" || true)
  zf=$(grep -c '| FAIL |$' "$WORK/zero$i.md" || true)
  zn=$(grep -cE '\| (pass|FAIL) \|$' "$WORK/zero$i.md" || true)
  s=$(grep -E '\| (pass|FAIL) \|$' "$WORK/bounded$i.md" | grep -vc '| no significant change |' || true)
  bounded_fail=$((bounded_fail + bf)); bounded_n=$((bounded_n + bn))
  zero_fail=$((zero_fail + zf)); zero_n=$((zero_n + zn)); sig=$((sig + s))
  [ "$bf" -eq 0 ] || pairs_failed=$((pairs_failed + 1))
  echo "pair $i: bounded gates failed $bf/$bn, zero-bound gates failed $zf/$zn, significant changes $s/$bn"
  grep -E '\| (pass|FAIL) \|$' "$WORK/bounded$i.md" | sed 's/^/    /'
done
echo "load: $(uptime)"
awk -v bf="$bounded_fail" -v bn="$bounded_n" -v zf="$zero_fail" -v zn="$zero_n" -v s="$sig" \
    -v pf="$pairs_failed" -v p="$PAIRS" 'BEGIN {
  printf "bounded gates (+10%% latency, -5%% rps): %d of %d gate results failed (%.1f%%); %d of %d pairs had a failed gate (%.0f%%)\n", bf, bn, 100*bf/bn, pf, p, 100*pf/p
  printf "zero-bound gates (any significant worsening fails): %d of %d failed (%.1f%%)\n", zf, zn, 100*zf/zn
  printf "verdicts other than \"no significant change\" (95%% intervals): %d of %d (%.1f%%)\n", s, bn, 100*s/bn
}'
