"""One client run against the peer nginx of bench/common.sh (`pb_peer_nginx`), measured.

Usage: measure.py WORKER_PID STUB_PORT COMMAND...

Prints one line: "rps requests client_cpu_s peak_rss_kb server_cpu_s nginx_pct client_pct
machine_cpu_s server_requests load1". requests/s and the requests come from the client's own
report (wrk's block, which proxybench load prints too, or h2load's); the client's CPU is user+sys
from getrusage of the command; its peak RSS is VmHWM of the command itself (getrusage's maxrss
would include this interpreter); the server's CPU is the nginx worker's time on CPU
(/proc/PID/schedstat, exact where /proc/PID/stat has 10 ms ticks); the machine's is every CPU's
busy time from /proc/stat over the run (on loopback the kernel's work for a request falls on
either side, and this figure does not care which); the server's requests are the increase of
stub_status's count, less the read that counts itself.
"""
import re
import resource
import subprocess
import sys
import time
import urllib.request

worker, stub, cmd = sys.argv[1], sys.argv[2], sys.argv[3:]


def machine_s():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (sum(v[:8]) - v[3] - v[4]) / 100.0


def served():
    with urllib.request.urlopen(f"http://127.0.0.1:{stub}/stub", timeout=5) as r:
        return int(r.read().decode().splitlines()[2].split()[2])


def server_ns():
    with open(f"/proc/{worker}/schedstat") as f:
        return int(f.read().split()[0])


def hwm(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


s0 = served()
t0, n0, m0 = time.monotonic(), server_ns(), machine_s()
p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
peak = 0
while p.poll() is None:
    peak = max(peak, hwm(p.pid) or 0)
    time.sleep(0.05)
out = p.stdout.read()
wall, nginx, machine = time.monotonic() - t0, (server_ns() - n0) / 1e9, machine_s() - m0
server_reqs = served() - s0 - 1
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
m = re.search(r"^Requests/sec:\s+([\d.]+)", out, re.M)
if m:  # wrk, and proxybench load (wrk's block)
    rps = float(m.group(1))
    reqs = int(re.search(r"^\s+(\d+) requests in", out, re.M).group(1))
else:  # h2load
    rps = float(re.search(r"^finished in [\d.]+\w*, ([\d.]+) req/s", out, re.M).group(1))
    reqs = int(re.search(r"^requests: \d+ total, \d+ started, (\d+) done", out, re.M).group(1))
cpu = ru.ru_utime + ru.ru_stime
load1 = open("/proc/loadavg").read().split()[0]
print(f"{rps:.0f} {reqs} {cpu:.3f} {peak} {nginx:.4f} {100 * nginx / wall:.0f} {100 * cpu / wall:.0f} "
      f"{machine:.2f} {server_reqs} {load1}")
