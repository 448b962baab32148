#!/usr/bin/env bash
# k8s/check-clean.sh [save] [BASELINE]: proves the local test cluster left nothing on the host.
#
#   k8s/check-clean.sh save BASELINE   records the host before `up` (links, routes, routing rules,
#                                      iptables rules, nft tables, network namespaces, hard-coded
#                                      paths, kernel tunables)
#   k8s/check-clean.sh [BASELINE]      after `down`: lists every leftover and exits 1 if any
#
# It looks for cluster processes (etcd, kube-*, kubelet, kube-proxy, containerd and its shims,
# metrics-server, node 2's namespace holder), zombies included; mounts under the state dir, of
# overlay or nsfs type, or node 2's tmpfs mounts; cgroups named kubepods* or node 2's cgroup root;
# the bridge, node 2's veth and any veth; any network namespace (of a process, or named) with an
# address in 198.18.0.0/16; routes to 198.18.0.0/16 and the routing rules of the bridge;
# iptables/ip6tables rules and chains naming KUBE or CNI; the nft table of kube-proxy's nftables
# mode; the paths the kubelet, containerd, libcni and iptables hard-code; the state dir itself;
# and, given a baseline, any change in links, routes, rules, iptables rules, nft tables, named
# network namespaces, paths or tunables (forwarding, route_localnet, bridge netfilter, conntrack,
# and those the kubelet sets).
# Env: PROXYBENCH_K8S_DIR, K8S_BRIDGE, K8S_NODE, K8S_NODE2 (as k8s/cluster.sh).
set -uo pipefail
D=${PROXYBENCH_K8S_DIR:-$HOME/.cache/proxybench/k8s-run}
BRIDGE=${K8S_BRIDGE:-pbbr0}
NODE=${K8S_NODE:-proxybench}
NODE2=${K8S_NODE2:-$NODE-2}
RULE_PREF=1818
PATHS=(/var/lib/kubelet /run/containerd /var/lib/cni /var/lib/containerd /opt/containerd
    /var/log/pods /var/log/containers /run/netns /etc/kubernetes /etc/cni /run/xtables.lock)
SYSCTLS=(vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops
    kernel.keys.root_maxkeys kernel.keys.root_maxbytes net.ipv4.ip_forward
    net.ipv4.conf.all.forwarding net.ipv4.conf.default.forwarding net.ipv4.conf.all.route_localnet
    net.bridge.bridge-nf-call-iptables net.bridge.bridge-nf-call-ip6tables
    net.netfilter.nf_conntrack_max net.netfilter.nf_conntrack_tcp_timeout_established
    net.netfilter.nf_conntrack_tcp_timeout_close_wait net.netfilter.nf_conntrack_tcp_be_liberal)

snapshot() {
    echo "## links"
    ip -o link show | awk -F': ' '{ print $2 }' | cut -d@ -f1 | sort
    echo "## routes"
    ip -4 route show table all 2>/dev/null | grep -v '^local \|^broadcast ' | sort
    echo "## rules"
    ip -4 rule show | sort
    echo "## iptables"
    { iptables-save 2>/dev/null; ip6tables-save 2>/dev/null; } | grep -v '^#' | sed 's/\[[0-9]*:[0-9]*\]//' | sort
    echo "## nft tables"
    nft list tables 2>/dev/null | sort
    echo "## named network namespaces"
    ip netns list 2>/dev/null | sort
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

# processes, zombies included: `down` waits until each is reaped
host_ns=$(readlink /proc/self/ns/net)
declare -A other_ns=()
for f in /proc/[0-9]*/comm; do
    c=$(cat "$f" 2>/dev/null) || continue
    p=${f#/proc/}; p=${p%/comm}
    n=$(readlink "/proc/$p/ns/net" 2>/dev/null) || n=""
    [ -n "$n" ] && [ "$n" != "$host_ns" ] && [ -z "${other_ns[$n]:-}" ] && other_ns[$n]=$p
    case "$c" in
    etcd | kube-* | kubelet | containerd | containerd-shim* | metrics-server | "$NODE2-ns")
        st=$(sed -n 's/^[0-9]* (.*) \([A-Za-z]\) .*/\1/p' "/proc/$p/stat" 2>/dev/null)
        report "process $p $c (state $st): $(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | cut -c1-150)"
        ;;
    kubectl | bash)
        # the load balancer (k8s/lb-controller.sh, run by bash) and its watch, not a user's own
        if tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -qE -- "$D/|lb-controller\.sh"; then
            report "process $p $c: $(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | cut -c1-150)"
        fi
        ;;
    esac
done
# network namespaces in use by some process that carry an address of the test network
for n in "${!other_ns[@]}"; do
    p=${other_ns[$n]}
    a=$(nsenter -t "$p" -n ip -4 -o addr show 2>/dev/null | grep -o 'inet 198\.18\.[0-9.]*' | tr '\n' ' ')
    [ -n "$a" ] && report "network namespace $n (pid $p $(cat "/proc/$p/comm" 2>/dev/null)) with ${a% }"
done
while read -r m; do report "mount $m"; done < <(awk -v d="$D" -v t="$NODE2-tmpfs" '{ if (index($5, d) == 1 || $5 ~ /kubelet|containerd|netns|\/cni\//) { print $5; next } for (i = 7; i <= NF; i++) if ($i == "-") { if ($(i+1) == "overlay" || $(i+1) == "nsfs" || $(i+2) == t) print $5 " (" $(i+1) " " $(i+2) ")"; break } }' /proc/self/mountinfo)
for c in /sys/fs/cgroup/*/kubepods* /sys/fs/cgroup/*/"$NODE2"; do [ -e "$c" ] && report "cgroup $c"; done
ip link show "$BRIDGE" >/dev/null 2>&1 && report "link $BRIDGE"
for l in $(ip -o link show type veth 2>/dev/null | awk -F': ' '{ print $2 }' | cut -d@ -f1); do report "veth link $l"; done
while read -r r; do [ -n "$r" ] && report "route $r"; done < <(ip -4 route show table all 2>/dev/null | grep -E '(^| )198\.18\.' | grep -v '^local \|^broadcast ')
while read -r r; do [ -n "$r" ] && report "routing rule $r"; done < <(ip -4 rule show | grep -E "iif $BRIDGE|^($RULE_PREF|$((RULE_PREF + 1))):")
rules=$({ iptables-save 2>/dev/null; ip6tables-save 2>/dev/null; } | grep -iE 'kube|cni' || true)
[ -n "$rules" ] && report "iptables rules/chains: $(echo "$rules" | head -5 | tr '\n' ' ')"
nft list tables 2>/dev/null | grep -q ' kube-proxy$' && report "nft table: $(nft list tables | grep ' kube-proxy$' | tr '\n' ' ')"
[ -e "$D" ] && report "state dir $D"

if [ -n "$baseline" ]; then
    # a netfilter sysctl reads empty for a moment while the last tables are deleted: a leftover
    # is what is still different after a few tries
    for _ in 1 2 3 4 5; do
        diffs=$(diff <(sed -n '/^## links/,$p' "$baseline") <(snapshot) | grep '^[<>]')
        [ -z "$diffs" ] && break
        sleep 0.5
    done
    [ -n "$diffs" ] && while read -r l; do report "changed since the baseline ($l)"; done <<<"$diffs"
else
    for p in "${PATHS[@]}"; do [ -e "$p" ] && echo "note: $p exists (no baseline to say whether it existed before)"; done
fi

if [ $found = 0 ]; then
    echo "clean: no cluster processes or zombies, network namespaces, mounts, kubepods/$NODE2 cgroups, $BRIDGE/veth links, 198.18 routes or bridge rules, KUBE/CNI iptables rules, kube-proxy nft table${baseline:+, and nothing changed since $baseline}"
    exit 0
fi
exit 1
