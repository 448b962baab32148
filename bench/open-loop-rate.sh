#!/usr/bin/env bash
# Does open loop hold its rate, and up to what rate? Runs `proxybench load -R RATE` against
# nginx (1 worker, `return 200`) for each rate in RATES, ROUNDS times each, and prints per run:
# the target, the achieved send rate and its error, the completed responses per second, the
# late sends (more than 1 ms after their intended time) with the lateness p99 and max, the worst
# whole second of the timeline, the latency p50 and p99 (from the intended send times), the
# client's CPU use and nginx's. A rate is held when, in the median of its rounds, the achieved
# send rate is within 1% of the target AND at most 1% of the sends left late (more than 1 ms
# after their intended time): a schedule kept only by sending a backlog late is not held, even
# though its latency, counted from the intended times, shows it. The last lines name the
# highest rate held and, for the others, what ran out: the client's core or nginx's (a side at
# 95% or more of its core; under SCHED_RR that is also the kernel's real-time throttle, which
# stops real-time tasks for the rest of each second once they used sched_rt_runtime_us of it,
# named when the late sends waited about that long and the client used 85% or more).
#
# nginx is pinned to one core (SERVER_CPU) and the client to the other (CLIENT_CPU), under
# SCHED_RR when root (PRIO=auto; PRIO= runs them as they are), as in bench/vs-wrk.sh.
#
# Usage: bench/open-loop-rate.sh   (env: RATES="20000 50000 80000 100000" ROUNDS=3 DURATION=10s
#                                    CONNS=100 THREADS=1 ARRIVALS=even|poisson SERVER_CPU=0
#                                    CLIENT_CPU=1 PRIO=auto PB=target/release/proxybench)
set -euo pipefail

RATES=${RATES:-${RATE:-20000 30000 40000 50000 80000 100000}}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10s}
CONNS=${CONNS:-100}
THREADS=${THREADS:-1}
ARRIVALS=${ARRIVALS:-even}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/common.sh
. "$ROOT/bench/common.sh"
PRIO=${PRIO-auto}
if [ "$PRIO" = auto ]; then
  PRIO=""
  [ "$(id -u)" = 0 ] && command -v chrt >/dev/null && PRIO="chrt -r 10"
fi
read -r -a prio <<<"$PRIO"

pb_need_nginx
pb_need python3 "python3 is needed"
pb_need taskset "taskset is needed to pin the processes (apt-get install util-linux)"
pb_ensure_built

pb_workdir open-loop

PORT=${PORT:-$(pb_free_port)}
pb_hello_nginx_conf "$PORT"
pb_start_nginx taskset -c "$SERVER_CPU" "${prio[@]}"
WORKER=$(pgrep -P "$NGINX_PID" | head -1)

echo "proxybench load -R RATE --arrivals $ARRIVALS -t$THREADS -c$CONNS -d$DURATION (nginx, 1 worker)"
echo "nginx on cpu $SERVER_CPU, client on cpu $CLIENT_CPU${PRIO:+, under $PRIO (real-time throttle: $(cat /proc/sys/kernel/sched_rt_runtime_us 2>/dev/null || echo '?') us per $(cat /proc/sys/kernel/sched_rt_period_us 2>/dev/null || echo '?') us)}; rates: $RATES"
echo "uptime: $(uptime)"
for rate in $RATES; do
  for r in $(seq "$ROUNDS"); do
    # The client's CPU (getrusage) and the nginx worker's (schedstat) over the run.
    python3 - "$WORKER" "$WORK/r$rate.$r" taskset -c "$CLIENT_CPU" "${prio[@]}" "$PB" load -R "$rate" \
      --arrivals "$ARRIVALS" -t"$THREADS" -c"$CONNS" -d"$DURATION" --format json \
      "http://127.0.0.1:$PORT/" <<'PY'
import json, resource, subprocess, sys, time
worker, out, cmd = sys.argv[1], sys.argv[2], sys.argv[3:]
def ns():
    with open(f"/proc/{worker}/schedstat") as f:
        return int(f.read().split()[0])
t0, n0 = time.monotonic(), ns()
p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
wall, nginx = time.monotonic() - t0, (ns() - n0) / 1e9
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
s = json.loads(p.stdout)
s["_client_pct"] = 100 * (ru.ru_utime + ru.ru_stime) / wall
s["_nginx_pct"] = 100 * nginx / wall
json.dump(s, open(out + ".json", "w"))
PY
  done
done

# Under SCHED_RR the kernel stops real-time tasks for (period - runtime) of each period once
# they used their runtime; sends held back by such a stop are that late.
RT_STOP_US=0
RT_RUNTIME=$(cat /proc/sys/kernel/sched_rt_runtime_us 2>/dev/null || echo -1)
if [ -n "$PRIO" ] && [ "$RT_RUNTIME" -ge 0 ]; then
  RT_STOP_US=$(( $(cat /proc/sys/kernel/sched_rt_period_us 2>/dev/null || echo 0) - RT_RUNTIME ))
fi
python3 - "$RATES" "$ROUNDS" "$WORK" "$RT_STOP_US" <<'PY'
import json, statistics as st, sys
rates, rounds, work = [float(r) for r in sys.argv[1].split()], int(sys.argv[2]), sys.argv[3]
rt_stop_us = int(sys.argv[4]) if len(sys.argv) > 4 and sys.argv[4].lstrip("-").isdigit() else 0
print(f"{'target/s':>9} {'round':>5} {'achieved/s':>11} {'err %':>7} {'resp/s':>9} {'late':>7} "
      f"{'late p99':>9} {'late max':>9} {'worst s':>8} {'p50':>8} {'p99':>9} {'client%':>7} {'nginx%':>6}")
held, verdicts = None, []
for rate in rates:
    achieved, late, cpu, ngx, late_max = [], [], [], [], []
    for r in range(1, rounds + 1):
        s = json.load(open(f"{work}/r{rate:.0f}.{r}.json"))
        sch = s["schedule"]
        start, end = s["start_s"], s["start_s"] + s["elapsed_s"]
        full = [row["requests"] for row in s["timeline"] if row["t"] >= start and row["t"] + 1 <= end]
        worst = min(full) if full else 0
        pct = {p["p"]: p["us"] for p in s["latency"]["percentiles"]}
        err = 100 * (sch["achieved_rate"] - rate) / rate
        achieved.append(sch["achieved_rate"]); cpu.append(s["_client_pct"]); ngx.append(s["_nginx_pct"])
        late.append(100 * sch["late"] / max(sch["intended"], 1))
        late_max.append(sch["late_max_us"])
        print(f"{rate:>9.0f} {r:>5} {sch['achieved_rate']:>11.1f} {err:>+7.3f} "
              f"{s['requests'] / s['elapsed_s']:>9.1f} {sch['late']:>7} {sch['late_p99_us']:>7}us "
              f"{sch['late_max_us']:>7}us {worst:>8} {pct[50.0]:>6}us {pct[99.0]:>7}us "
              f"{s['_client_pct']:>6.0f}% {s['_nginx_pct']:>5.0f}%")
    med, med_late = st.median(achieved), st.median(late)
    ok = abs(med - rate) / rate <= 0.01 and med_late <= 1.0
    limit = []
    if st.median(cpu) >= 95: limit.append(f"the client's core ({st.median(cpu):.0f}%)")
    if st.median(ngx) >= 95: limit.append(f"nginx's core ({st.median(ngx):.0f}%)")
    # Late sends that waited about as long as the real-time throttle stops a task: the client
    # used its share of the second (it needs more than that share of its core at this rate).
    if rt_stop_us > 0 and st.median(late_max) >= 0.8 * rt_stop_us and st.median(cpu) >= 85:
        limit.append(f"the real-time throttle (the client at {st.median(cpu):.0f}% of its core, "
                     f"sends up to {st.median(late_max) / 1000:.0f} ms late, the throttle stops "
                     f"{rt_stop_us / 1000:.0f} ms a second)")
    verdicts.append((rate, med, med_late, ok, limit))
    if ok and (held is None or rate > held):
        held = rate
print()
for rate, med, med_late, ok, limit in verdicts:
    why = "" if ok else ("; limit: " + " and ".join(limit) if limit else "; neither core was full")
    print(f"target {rate:>7.0f}/s: median achieved {med:.1f}/s ({100 * (med - rate) / rate:+.3f}%), "
          f"{med_late:.2f}% of sends late -> {'HELD' if ok else 'NOT HELD'} "
          f"(within 1%, at most 1% late){why}")
print(f"highest rate held: {held:.0f}/s" if held is not None else "no rate held")
sys.exit(0 if held is not None and held == max(rates) else 1)
PY
echo "uptime: $(uptime)"
