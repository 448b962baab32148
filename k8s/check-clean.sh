#!/usr/bin/env bash
# k8s/check-clean.sh [save] [BASELINE]: proves the local test cluster left nothing on the host.
#
#   k8s/check-clean.sh save BASELINE   records the host before `up` (links, iptables rules,
#                                      hard-coded paths, kernel tunables)
#   k8s/check-clean.sh [BASELINE]      after `down`: lists every leftover and exits 1 if any
#
# It looks for cluster processes (etcd, kube-*, kubelet, containerd and its shims), mounts under
# the state dir or of overlay/nsfs type, cgroups named kubepods*, the bridge and veth links,
# iptables/ip6tables rules naming KUBE or CNI, the paths the kubelet/containerd/libcni hard-code,
# the state dir itself, and, given a baseline, any change in links, rules, paths or tunables.
# Env: PROXYBENCH_K8S_DIR, K8S_BRIDGE (as k8s/cluster.sh).
set -uo pipefail
D=${PROXYBENCH_K8S_DIR:-$HOME/.cache/proxybench/k8s-run}
BRIDGE=${K8S_BRIDGE:-pbbr0}
PATHS=(/var/lib/kubelet /run/containerd /var/lib/cni /var/lib/containerd /opt/containerd
    /var/log/pods /var/log/containers /run/netns /etc/kubernetes /etc/cni)
SYSCTLS=(vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops
    kernel.keys.root_maxkeys kernel.keys.root_maxbytes net.ipv4.ip_forward)

snapshot() {
    echo "## links"
    ip -o link show | awk -F': ' '{ print $2 }' | cut -d@ -f1 | sort
    echo "## iptables"
    { iptables-save 2>/dev/null; ip6tables-save 2>/dev/null; } | grep -v '^#' | sed 's/\[[0-9]*:[0-9]*\]//' | sort
    echo "## paths"
    for p in "${PATHS[@]}"; do [ -e "$p" ] && find "$p" -maxdepth 3 2>/dev/null; done | sort
    echo "## sysctls"
    for s in "${SYSCTLS[@]}"; do echo "$s=$(sysctl -n "$s" 2>/dev/null)"; done
}

if [ "${1:-}" = save ]; then
    [ -n "${2:-}" ] || { echo "usage: k8s/check-clean.sh save BASELINE" >&2; exit 2; }
    snapshot >"$2"
    echo "baseline saved to $2"
    exit 0
fi
baseline=${1:-}

found=0
report() { found=1; printf 'LEFTOVER %s\n' "$*"; }

for f in /proc/[0-9]*/comm; do
    c=$(cat "$f" 2>/dev/null) || continue
    p=${f#/proc/}; p=${p%/comm}
    case "$c" in
    etcd | kube-* | kubelet | containerd | containerd-shim*)
        st=$(sed -n 's/^[0-9]* (.*) \([A-Za-z]\) .*/\1/p' "/proc/$p/stat" 2>/dev/null)
        [ "$st" = Z ] || report "process $p $c: $(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | cut -c1-150)"
        ;;
    esac
done
while read -r m; do report "mount $m"; done < <(awk -v d="$D" '{ if (index($5, d) == 1 || $5 ~ /kubelet|containerd|netns|\/cni\//) print $5; else for (i = 7; i <= NF; i++) if ($i == "-") { if ($(i+1) == "overlay" || $(i+1) == "nsfs") print $5 " (" $(i+1) ")"; break } }' /proc/self/mountinfo)
for c in /sys/fs/cgroup/*/kubepods*; do [ -e "$c" ] && report "cgroup $c"; done
ip link show "$BRIDGE" >/dev/null 2>&1 && report "link $BRIDGE"
for l in $(ip -o link show type veth 2>/dev/null | awk -F': ' '{ print $2 }' | cut -d@ -f1); do report "veth link $l"; done
rules=$({ iptables-save 2>/dev/null; ip6tables-save 2>/dev/null; } | grep -iE 'kube|cni' || true)
[ -n "$rules" ] && report "iptables rules: $(echo "$rules" | head -5 | tr '\n' ' ')"
[ -e "$D" ] && report "state dir $D"

if [ -n "$baseline" ]; then
    diffs=$(diff <(sed -n '/^## links/,$p' "$baseline") <(snapshot) | grep '^[<>]')
    [ -n "$diffs" ] && while read -r l; do report "changed since the baseline ($l)"; done <<<"$diffs"
else
    for p in "${PATHS[@]}"; do [ -e "$p" ] && echo "note: $p exists (no baseline to say whether it existed before)"; done
fi

if [ $found = 0 ]; then
    echo "clean: no cluster processes, mounts, kubepods cgroups, $BRIDGE/veth links, KUBE/CNI iptables rules${baseline:+, and nothing changed since $baseline}"
    exit 0
fi
exit 1
