#!/usr/bin/env bash
# The test cluster's load balancer: what a cloud's controller (or MetalLB, or kind's
# cloud-provider-kind) does for a Service of type LoadBalancer, for a cluster on one host. It
# watches Services through the API and gives each LoadBalancer Service without an address one
# from POOL (a /24 inside 198.18.0.0/16 that `cluster.sh up` routes to the bridge), written to the
# Service's status as a cloud controller writes it. kube-proxy then routes that address to the
# Service's endpoints, on both nodes, as it does on a real cluster: nothing here carries traffic.
#
# Usage (started and stopped by k8s/cluster.sh): lb-controller.sh KUBECTL KUBECONFIG POOL_PREFIX
# (POOL_PREFIX: the pool's first three octets, e.g. 198.18.129). Addresses are handed out from
# .10 to .250 in order and not reused until the pool wraps; the log says which went where.
set -u
KUBECTL=$1 KCFG=$2 POOL=$3
kc() { "$KUBECTL" --kubeconfig "$KCFG" "$@"; }
log() { printf '[lb %s] %s\n' "$(date +%T.%3N)" "$*"; }

watcher=""
trap '[ -z "$watcher" ] || kill "$watcher" 2>/dev/null; exit 0' TERM INT
next=10
while :; do
    # One line per Service event: namespace, name, type, its first ingress address (if any).
    exec 3< <(exec "$KUBECTL" --kubeconfig "$KCFG" get services -A --watch \
        -o 'jsonpath={.metadata.namespace}{" "}{.metadata.name}{" "}{.spec.type}{" "}{.status.loadBalancer.ingress[0].ip}{"\n"}')
    watcher=$!
    while read -r ns name type ip <&3; do
        [ "$type" = LoadBalancer ] && [ -z "$ip" ] || continue
        addr=$POOL.$next
        next=$((next >= 250 ? 10 : next + 1))
        if kc -n "$ns" patch service "$name" --subresource=status --type=merge \
            -p "{\"status\":{\"loadBalancer\":{\"ingress\":[{\"ip\":\"$addr\"}]}}}" >/dev/null; then
            log "$ns/$name: $addr"
        else
            log "$ns/$name: could not write its status"
        fi
    done
    exec 3<&-
    wait "$watcher" 2>/dev/null
    watcher=""
    log "the watch ended; watching again"
    sleep 1
done
