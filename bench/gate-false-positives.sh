#!/usr/bin/env bash
# The regression gate's false-positive rate and power, measured on this machine with real runs
# of `proxybench run default`: the whole scenario (30 s of load a run), or with FORM=quick its
# quick form (6 s).
#
# False positives: PAIRS pairs (default 20) of identical sets of RUNS runs a side (default 3),
# made as the gate is meant to be fed: `run --repeat RUNS --interleave` (A B A B ...), each set
# compared with `proxybench compare SET --gate ...`. Nothing differs between A and B but chance
# and the machine, so every failed gate is a false positive. Two sets of gates, each on both
# loads (coffee and tea):
#   zero bound   p50 <= +0%,  p99 <= +0%,  mean <= +0%,  rps >= -0%   (any significant worsening)
#   bounded      p50 <= +10%, p99 <= +10%, mean <= +10%, rps >= -5%
#
# Power: TRIALS trials (default 10) of RUNS runs of the default scenario interleaved with RUNS
# runs of it with backends 2 ms slower: latency lognormal(median=4ms, sigma=0.32) for the
# default's lognormal(median=2ms, sigma=0.5), whose p50, p99 and mean are each about 2 ms higher
# (2.00 -> 4.00, 6.39 -> 8.42, 2.27 -> 4.21 ms). A trial counts when `coffee.p99 <= +0%` is
# called a regression.
#
# The load average is printed as the runs go: the goals are for a machine where another build
# runs (load average above 4). BUSY='command' runs that command in the background meanwhile
# (stopped at the end, and again each time it ends), e.g. a rebuild of another checkout:
#   BUSY='cd /tmp/busy && touch crates/model/src/lib.rs && \
#         CARGO_TARGET_DIR=/tmp/busy-target cargo build --release -j 4 --workspace'
#
# Each is also read at --confidence 0.90 (its lower end is a one-sided 5% test), to show what a
# looser confidence level buys in power and costs in false positives.
#
# FORM=full (the default) runs the scenario whole, as `make run` and a CI job would: a set of 3
# runs a side takes about 3 minutes, so 20 pairs and 10 trials take about 100. FORM=quick runs
# `run default --quick`, 6 s of load a run, in about a third of that: its coffee p99 is mostly
# the tail of the kill, restart and reload squeezed into 6 s, and moves less under a slower
# backend (see docs/gates-and-reports.md).
#
# Usage: [FORM=quick|full] [BUSY='command'] bash bench/gate-false-positives.sh [PAIRS] [TRIALS]
#        [RUNS]   (0 pairs or 0 trials skips that part)
set -euo pipefail
cd "$(dirname "$0")/.."
PAIRS=${1:-20}
TRIALS=${2:-10}
RUNS=${3:-3}
FORM=${FORM:-full}
case "$FORM" in
  quick) FORM_FLAG=(--quick) ;;
  full) FORM_FLAG=() ;;
  *) echo "gate-false-positives.sh: FORM is quick or full, not '$FORM'" >&2; exit 2 ;;
esac
BIN=${PROXYBENCH:-target/release/proxybench}
[ -x "$BIN" ] || cargo build --release --locked -p proxybench
WORK=$(mktemp -d)
BUSY_PID=
cleanup() {
  if [ -n "$BUSY_PID" ]; then kill -- "-$BUSY_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT
if [ -n "${BUSY:-}" ]; then
  setsid bash -c "while :; do $BUSY; done" >/dev/null 2>&1 &
  BUSY_PID=$!
fi
load_now() { cut -d' ' -f1 /proc/loadavg; }

# The default scenario, and the same with its backends 2 ms slower (same name: runs of one
# scenario against backends that behave differently).
cp scenarios/default.toml "$WORK/default.toml"
sed 's/latency=lognormal(median=2ms,sigma=0.5)/latency=lognormal(median=4ms,sigma=0.32)/' \
  scenarios/default.toml >"$WORK/slow.toml"
grep -q 'median=4ms' "$WORK/slow.toml"

set_of() { # set NAME OTHER: RUNS runs of default interleaved with RUNS of OTHER; prints the set
  load_now >>"$WORK/loads"
  "$BIN" run "$WORK/default.toml" "${FORM_FLAG[@]}" --no-progress --results "$WORK/$1" \
    --repeat "$RUNS" --interleave "$2" >"$WORK/$1.log" 2>&1 || true
  load_now >>"$WORK/loads"
  ls -d "$WORK/$1"/default/*/ | head -1
}

rows() { grep -E '\| (pass|FAIL) \|$' "$1" || true; }
verdict() { awk -F'|' '{gsub(/^ +| +$/, "", $(NF-2)); print $(NF-2)}'; }

ZERO=(--gate "p50 <= +0%" --gate "p99 <= +0%" --gate "mean <= +0%" --gate "rps >= -0%")
BOUNDED=(--gate "p50 <= +10%" --gate "p99 <= +10%" --gate "mean <= +10%" --gate "rps >= -5%")

echo "form: $FORM"
echo "false positives: $PAIRS pairs of $RUNS runs a side, interleaved; load average $(load_now)"
zero_fail=0 zero_n=0 bounded_fail=0 bounded_n=0 sig=0 pairs_failed=0 z90_fail=0
for i in $(seq 1 "$PAIRS"); do
  set=$(set_of "same$i" "$WORK/default.toml")
  "$BIN" compare "$set" "${ZERO[@]}" >"$WORK/zero$i.md" 2>/dev/null || true
  "$BIN" compare "$set" "${ZERO[@]}" --confidence 0.90 >"$WORK/z90-$i.md" 2>/dev/null || true
  z90_fail=$((z90_fail + $(rows "$WORK/z90-$i.md" | grep -c '| FAIL |$' || true)))
  "$BIN" compare "$set" "${BOUNDED[@]}" >"$WORK/bounded$i.md" 2>/dev/null || true
  zf=$(rows "$WORK/zero$i.md" | grep -c '| FAIL |$' || true)
  zn=$(rows "$WORK/zero$i.md" | wc -l)
  bf=$(rows "$WORK/bounded$i.md" | grep -c '| FAIL |$' || true)
  bn=$(rows "$WORK/bounded$i.md" | wc -l)
  s=$(rows "$WORK/zero$i.md" | verdict | grep -vc '^no significant change$' || true)
  zero_fail=$((zero_fail + zf)); zero_n=$((zero_n + zn))
  bounded_fail=$((bounded_fail + bf)); bounded_n=$((bounded_n + bn)); sig=$((sig + s))
  [ "$zf" -eq 0 ] || pairs_failed=$((pairs_failed + 1))
  echo "pair $i (load $(load_now)): zero-bound gates failed $zf/$zn, bounded $bf/$bn, significant changes $s/$zn"
  rows "$WORK/zero$i.md" | sed 's/^/    /'
done

echo "power: $TRIALS trials of $RUNS runs a side, backends 2 ms slower in B; load average $(load_now)"
found=0 found90=0
for i in $(seq 1 "$TRIALS"); do
  set=$(set_of "slow$i" "$WORK/slow.toml")
  "$BIN" compare "$set" --gate "coffee.p99 <= +0%" >"$WORK/power$i.md" 2>/dev/null || true
  "$BIN" compare "$set" --gate "coffee.p99 <= +0%" --confidence 0.90 \
    >"$WORK/p90-$i.md" 2>/dev/null || true
  row=$(rows "$WORK/power$i.md")
  v=$(echo "$row" | verdict)
  v90=$(rows "$WORK/p90-$i.md" | verdict)
  [ "$v" != "regression" ] || found=$((found + 1))
  [ "$v90" != "regression" ] || found90=$((found90 + 1))
  echo "trial $i (load $(load_now)): $v (at 90%: $v90)"
  echo "    $row"
done

if [ -s "$WORK/loads" ]; then
  echo "load average (1 min) at the start and end of each set: $(sort -g "$WORK/loads" | head -1) to $(sort -g "$WORK/loads" | tail -1)"
fi
awk -v zf="$zero_fail" -v zn="$zero_n" -v bf="$bounded_fail" -v bn="$bounded_n" -v s="$sig" \
    -v pf="$pairs_failed" -v p="$PAIRS" -v f="$found" -v t="$TRIALS" -v r="$RUNS" \
    -v z90="$z90_fail" -v f90="$found90" 'BEGIN {
  if (zn > 0) {
    printf "false positives, zero bound (any significant worsening fails), %d runs a side: %d of %d gate results failed (%.1f%%); %d of %d pairs had a failed gate\n", r, zf, zn, 100*zf/zn, pf, p
    printf "false positives, zero bound at 90%% confidence: %d of %d gate results failed (%.1f%%)\n", z90, zn, 100*z90/zn
    printf "false positives, bounded (+10%% latency, -5%% rps): %d of %d gate results failed (%.1f%%)\n", bf, bn, 100*bf/bn
    printf "verdicts other than \"no significant change\" at the zero bound (95%% intervals): %d of %d (%.1f%%)\n", s, zn, 100*s/zn
  }
  if (t > 0) {
    printf "power, a backend 2 ms slower, coffee.p99 <= +0%%, %d runs a side: called a regression in %d of %d trials (%.0f%%); at 90%% confidence in %d of %d (%.0f%%)\n", r, f, t, 100*f/t, f90, t, 100*f90/t
  }
}'
