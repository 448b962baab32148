#!/usr/bin/env bash
# k8s/cluster.sh up|down|status|node2 lose|restore: a real two-node Kubernetes on a host-only network for proxybench's
# tests.
#
# etcd, kube-apiserver, kube-controller-manager and kube-scheduler run on this host. Node 1
# ($K8S_NODE, "proxybench") is this host: its containerd, kubelet and kube-proxy run in the host's
# namespaces, with node IP 198.18.0.1 on the host-only bridge pbbr0 and its pods on 198.18.0.0/24
# on that bridge. Node 2 ($K8S_NODE2, "proxybench-2") has its own network and mount namespaces,
# held by one process: its eth0 (198.18.0.2) is a veth into pbbr0, its pods are on 198.18.1.0/24
# behind a bridge of its own, and its containerd, kubelet and kube-proxy run inside those
# namespaces, with tmpfs mounts over the paths the kubelet, containerd and libcni hard-code.
# kube-proxy (iptables mode) routes ClusterIP (198.18.128.0/24) and NodePort Services on both
# nodes, and LoadBalancer Services at the addresses k8s/lb-controller.sh gives them from
# 198.18.129.0/24; metrics-server serves the metrics API. Nothing is routed outside 198.18.0.0/16.
# Everything the cluster writes lives under one state directory ($PROXYBENCH_K8S_DIR, default
# ~/.cache/proxybench/k8s-run), the admin kubeconfig included. `up` prints
# `export KUBECONFIG=<path>` as its last line. `down` stops every process the cluster started and
# waits until each has exited (bounded; it fails loudly, naming any survivor), and removes every
# mount, cgroup, link, namespace, route, routing rule, iptables/nft chain, sysctl change and file
# the cluster made (the hard-coded paths only when they did not exist before); it is safe to run
# twice or after a half-failed `up`. The facts behind each setting: docs/test-cluster.md.
#
# Env: PROXYBENCH_K8S_DIR (state dir), K8S_VERSION (v1.34.4), METRICS_SERVER_VERSION (v0.8.0),
# K8S_CACHE (~/.cache/proxybench/k8s), PROXYBENCH_IMAGE_DIR (target/image: the *.tar OCI images
# `up` imports), ETCD_PORT (2379), ETCD_PEER_PORT (2380), API_PORT (6443), KCM_PORT (10257),
# SCHED_PORT (10259), KUBELET_PORT (10250), KUBELET_HEALTHZ_PORT (10248), PROXY_HEALTHZ_PORT
# (10256), PROXY_METRICS_PORT (10249), K8S_BRIDGE (pbbr0), K8S_NODE (proxybench), K8S_NODE2
# ($K8S_NODE-2), K8S_DOWN_WAIT (20: seconds `down` waits for the processes to be gone).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
K8S_VERSION=${K8S_VERSION:-v1.34.4}
METRICS_SERVER_VERSION=${METRICS_SERVER_VERSION:-v0.8.0}
GATEWAY_API_VERSION=${GATEWAY_API_VERSION:-v1.6.3}
K8S_CACHE=${K8S_CACHE:-$HOME/.cache/proxybench/k8s}
BIN=$K8S_CACHE/$K8S_VERSION
D=${PROXYBENCH_K8S_DIR:-$HOME/.cache/proxybench/k8s-run}
IMAGE_DIR=${PROXYBENCH_IMAGE_DIR:-$repo/target/image}
ETCD_PORT=${ETCD_PORT:-2379}
ETCD_PEER_PORT=${ETCD_PEER_PORT:-2380}
API_PORT=${API_PORT:-6443}
KCM_PORT=${KCM_PORT:-10257}
SCHED_PORT=${SCHED_PORT:-10259}
KUBELET_PORT=${KUBELET_PORT:-10250}
KUBELET_HEALTHZ_PORT=${KUBELET_HEALTHZ_PORT:-10248}
PROXY_HEALTHZ_PORT=${PROXY_HEALTHZ_PORT:-10256}
PROXY_METRICS_PORT=${PROXY_METRICS_PORT:-10249}
BRIDGE=${K8S_BRIDGE:-pbbr0}
NODE=${K8S_NODE:-proxybench}
NODE2=${K8S_NODE2:-$NODE-2}
DOWN_WAIT=${K8S_DOWN_WAIT:-20}

# The addresses. Everything is inside 198.18.0.0/16 (RFC 2544's benchmarking range).
TEST_NET=198.18.0.0/16
NODE1_IP=198.18.0.1 # node 1 = this host, on the bridge; also its pods' gateway
NODE2_IP=198.18.0.2 # node 2's eth0, a veth into the bridge
POD1_SUBNET=198.18.0.0/24
POD1_RANGE=(198.18.0.10 198.18.0.250)
POD2_SUBNET=198.18.1.0/24
POD2_GW=198.18.1.1 # node 2's pod bridge
POD2_RANGE=(198.18.1.10 198.18.1.250)
CLUSTER_CIDR=198.18.0.0/23 # both nodes' pod subnets
SERVICE_RANGE=198.18.128.0/24
API_SERVICE_IP=198.18.128.1 # the `kubernetes` Service: the first address of the range
LB_POOL=198.18.129           # load balancer addresses (k8s/lb-controller.sh): $LB_POOL.10-250
BRIDGE2=pbbr1         # node 2's pod bridge, inside its network namespace
BRIDGE_MAC=02:70:62:12:00:01  # fixed (locally administered) MACs of the two bridges: see net_up
BRIDGE2_MAC=02:70:62:12:01:01
VETH2=${BRIDGE}-n2    # the host's end of node 2's eth0
RULE_PREF=1818        # the routing rules that keep forwarded traffic inside $TEST_NET: pref and pref+1
CGROUP2=/$NODE2       # node 2's cgroup root (node 1's kubelet keeps the default /kubepods)
N2=$D/node2

# Paths the kubelet, containerd and libcni use whatever the flags say; `up` records which existed.
HARDCODED=(/var/lib/kubelet /var/lib/kubelet/device-plugins /run/containerd /run/containerd/s
    /run/containerd/fifo /var/lib/cni /var/lib/cni/results /var/lib/containerd /opt/containerd
    /var/log/pods /var/log/containers /run/netns /etc/kubernetes /run/xtables.lock)
# Node 2 gets a tmpfs over each of these in its mount namespace (they must exist to be mounted on).
NODE2_TMPFS=(/var/lib/kubelet /run/containerd /var/lib/cni /var/log/containers)
# Kernel tunables the kubelet sets at start (protectKernelDefaults: false), and those kube-proxy
# could set; `down` restores them.
SYSCTLS=(vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops
    kernel.keys.root_maxkeys kernel.keys.root_maxbytes net.ipv4.ip_forward
    net.ipv4.conf.all.forwarding net.ipv4.conf.default.forwarding net.ipv4.conf.all.route_localnet
    net.bridge.bridge-nf-call-iptables net.bridge.bridge-nf-call-ip6tables
    net.netfilter.nf_conntrack_max net.netfilter.nf_conntrack_tcp_timeout_established
    net.netfilter.nf_conntrack_tcp_timeout_close_wait net.netfilter.nf_conntrack_tcp_be_liberal)
# The daemons, in the order `down` stops them (the holder of node 2's namespaces last).
DAEMONS=(lb-controller kubelet-2 kubelet kube-proxy-2 kube-proxy containerd-2 containerd kube-scheduler
    kube-controller-manager kube-apiserver etcd node2-ns)

PKI=$D/pki
SOCK=$D/containerd/containerd.sock
SOCK2=$N2/containerd/containerd.sock
RUNC_ROOT=$D/containerd/runc
KUBECONFIG_ADMIN=$D/admin.kubeconfig

log() { printf '[k8s %s] %s\n' "$(date +%T.%3N)" "$*" >&2; }
die() { printf 'k8s/cluster.sh: %s\n' "$*" >&2; exit 1; }
now_ms() { date +%s%3N; }
phase_start=0
phase() { phase_start=$(now_ms); log "$*"; }
phase_done() {
    local ms=$(($(now_ms) - phase_start))
    printf '%-34s %5d.%03d s\n' "$1" $((ms / 1000)) $((ms % 1000)) >>"$D/timings"
    log "$1: $((ms / 1000)).$(printf %03d $((ms % 1000))) s"
}

# alive PID: the process exists and is not a zombie (PID 1 here reaps orphans late, so `kill -0`
# would call a zombie alive). Bash builtins only: `down` calls it for every process on a busy
# machine.
alive() {
    local line st
    { read -r line <"/proc/$1/stat"; } 2>/dev/null || return 1
    st=${line##*) }
    st=${st%% *}
    [ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]
}

gone() { ! alive "$1"; }

# wait_until SECONDS WHAT CMD...: poll CMD every 100 ms; on timeout name WHAT and the log to read.
wait_until() {
    local limit=$1 what=$2
    shift 2
    local deadline=$(($(now_ms) + limit * 1000))
    until "$@" >/dev/null 2>&1; do
        [ "$(now_ms)" -lt "$deadline" ] || { log "timed out after $limit s waiting for $what"; return 1; }
        sleep 0.1
    done
}

# start NAME CMD...: a detached daemon (own session, stdin closed), its log and pid file in $D.
start() {
    local name=$1
    shift
    setsid "$@" </dev/null >>"$D/logs/$name.log" 2>&1 &
    echo $! >"$D/run/$name.pid"
}

need_alive() {
    local name=$1 pid
    pid=$(cat "$D/run/$name.pid" 2>/dev/null) || return 1
    alive "$pid" || die "$name exited; its log: $D/logs/$name.log
$(tail -n 15 "$D/logs/$name.log" 2>/dev/null)"
}

# kubectl: the one built with the cluster (k8s/build.sh), else the one on PATH.
kc() {
    local k=$BIN/kubectl
    [ -x "$k" ] || k=kubectl
    "$k" --kubeconfig "$KUBECONFIG_ADMIN" "$@"
}

# node 2's namespaces are those of the process that holds them
node2_pid() { cat "$D/run/node2-ns.pid" 2>/dev/null; }
in_node2_net() { nsenter -t "$(node2_pid)" -n -- "$@"; }

# --- certificates and kubeconfigs --------------------------------------------------------------
# Keys are PKCS#8 P-256 (rustls/kube-rs, Go and OpenSSL all read them); the service-account
# signing key is RSA-2048.
new_key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }

# cert NAME CN O USAGE SANS: a leaf certificate signed by the cluster CA.
cert() {
    local name=$1 cn=$2 o=$3 usage=$4 sans=$5 subj="/CN=$2"
    [ -n "$o" ] && subj="/O=$o/CN=$cn"
    new_key "$PKI/$name.key"
    openssl req -new -key "$PKI/$name.key" -subj "$subj" -out "$PKI/$name.csr" 2>/dev/null
    {
        echo "basicConstraints=critical,CA:FALSE"
        echo "keyUsage=critical,digitalSignature,keyEncipherment"
        echo "extendedKeyUsage=$usage"
        [ -n "$sans" ] && echo "subjectAltName=$sans"
    } >"$PKI/$name.ext"
    openssl x509 -req -in "$PKI/$name.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" \
        -set_serial "0x$(openssl rand -hex 16)" -days 825 -sha256 -extfile "$PKI/$name.ext" \
        -out "$PKI/$name.crt" 2>/dev/null
    rm -f "$PKI/$name.csr" "$PKI/$name.ext"
}

# kubeconfig FILE CERTNAME: a kubeconfig with the certificates embedded. The API server is on node
# 1's bridge address, which the host and both nodes reach.
kubeconfig() {
    local b64="base64 -w0"
    cat >"$1" <<EOC
apiVersion: v1
kind: Config
clusters:
- name: proxybench
  cluster:
    server: https://$NODE1_IP:$API_PORT
    certificate-authority-data: $($b64 "$PKI/ca.crt")
users:
- name: $2
  user:
    client-certificate-data: $($b64 "$PKI/$2.crt")
    client-key-data: $($b64 "$PKI/$2.key")
contexts:
- name: proxybench
  context:
    cluster: proxybench
    user: $2
current-context: proxybench
EOC
    chmod 600 "$1"
}

make_pki() {
    mkdir -p "$PKI"
    chmod 700 "$PKI"
    new_key "$PKI/ca.key"
    openssl req -x509 -new -key "$PKI/ca.key" -subj "/CN=proxybench-test-ca" -days 3650 -sha256 \
        -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" \
        -out "$PKI/ca.crt" 2>/dev/null
    # The API server is reached on node 1's address, on the `kubernetes` Service's ClusterIP (pods),
    # and by name.
    local api_sans="IP:$NODE1_IP,IP:$API_SERVICE_IP,IP:127.0.0.1,DNS:localhost,DNS:kubernetes"
    api_sans+=",DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
    local ms_sans="DNS:metrics-server.kube-system.svc,DNS:metrics-server.kube-system.svc.cluster.local"
    # the leaf certificates are independent of each other: made in parallel
    local pids=() p
    cert apiserver kube-apiserver "" serverAuth "$api_sans" & pids+=($!)
    cert apiserver-kubelet-client kube-apiserver-kubelet-client system:masters clientAuth "" & pids+=($!)
    cert front-proxy-client front-proxy-client "" clientAuth "" & pids+=($!)
    cert admin proxybench-admin system:masters clientAuth "" & pids+=($!)
    cert controller-manager system:kube-controller-manager "" clientAuth "" & pids+=($!)
    cert scheduler system:kube-scheduler "" clientAuth "" & pids+=($!)
    # the default ClusterRoleBinding system:node-proxier names the user system:kube-proxy
    cert kube-proxy system:kube-proxy "" clientAuth "" & pids+=($!)
    # each kubelet's serving certificate carries its node's IP, so the API server verifies it
    cert kubelet-client "system:node:$NODE" system:nodes clientAuth "" & pids+=($!)
    cert kubelet-server "system:node:$NODE" system:nodes serverAuth "IP:$NODE1_IP,DNS:$NODE" & pids+=($!)
    cert kubelet2-client "system:node:$NODE2" system:nodes clientAuth "" & pids+=($!)
    cert kubelet2-server "system:node:$NODE2" system:nodes serverAuth "IP:$NODE2_IP,DNS:$NODE2" & pids+=($!)
    cert metrics-server metrics-server "" serverAuth "$ms_sans" & pids+=($!)
    { openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$PKI/sa.key" 2>/dev/null \
        && openssl pkey -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null; } & pids+=($!)
    for p in "${pids[@]}"; do wait "$p" || die "certificate generation failed (openssl)"; done
    kubeconfig "$KUBECONFIG_ADMIN" admin
    kubeconfig "$D/controller-manager.kubeconfig" controller-manager
    kubeconfig "$D/scheduler.kubeconfig" scheduler
    kubeconfig "$D/kube-proxy.kubeconfig" kube-proxy
    kubeconfig "$D/kubelet.kubeconfig" kubelet-client
    kubeconfig "$N2/kubelet.kubeconfig" kubelet2-client
}

# --- configuration files -----------------------------------------------------------------------
# write_containerd_config DIR BRIDGE SUBNET FIRST LAST GATEWAY: containerd's config with its root,
# state, socket and runc root under DIR/containerd, and its CNI config under DIR/cni.
write_containerd_config() {
    local dir=$1 bridge=$2 subnet=$3 first=$4 last=$5 gw=$6
    mkdir -p "$dir/containerd" "$dir/cni/net.d" "$dir/cni/ipam"
    cat >"$dir/containerd/config.toml" <<EOC
version = 2
root = "$dir/containerd/root"
state = "$dir/containerd/state"
oom_score = 0
# opt would create /opt/containerd; the others are snapshotters and exporters nothing here uses
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.tracing.processor.v1.otlp"]

[grpc]
  address = "$dir/containerd/containerd.sock"
[ttrpc]
  address = "$dir/containerd/containerd.sock.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "localhost/pause:1"
  # no CAP_SYS_RESOURCE here: runc cannot write the negative oom_score_adj the kubelet asks
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  disable_apparmor = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        Root = "$dir/containerd/runc"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$dir/cni/net.d"
    max_conf_num = 1
EOC
    # Pods get an address on the node's bridge and one route: the test network through the
    # node's bridge address. No default route, no masquerade: pod traffic reaches the nodes, the
    # other pods and the Services, nothing else. The bridge and its address are made by `up`
    # (isGateway would turn on the node's ip_forward). Hairpin lets a pod reach itself through
    # its Service.
    cat >"$dir/cni/net.d/10-proxybench.conflist" <<EOC
{
  "cniVersion": "0.4.0",
  "name": "proxybench",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$bridge",
      "isGateway": false,
      "isDefaultGateway": false,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "$subnet", "rangeStart": "$first", "rangeEnd": "$last", "gateway": "$gw"}]],
        "routes": [{"dst": "$TEST_NET", "gw": "$gw"}],
        "dataDir": "$dir/cni/ipam"
      }
    }
  ]
}
EOC
}

# write_kubelet_config DIR ADDRESS SOCKET CERT [CGROUP_ROOT]: a kubelet serving on ADDRESS with
# the certificate PKI/CERT.{crt,key}, its pod logs in DIR/pod-logs.
write_kubelet_config() {
    local dir=$1 addr=$2 sock=$3 crt=$4 cgroot=${5:-}
    mkdir -p "$dir/kubelet" "$dir/pod-logs"
    cat >"$dir/kubelet-config.yaml" <<EOC
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $addr
port: $KUBELET_PORT
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $KUBELET_HEALTHZ_PORT
tlsCertFile: $PKI/$crt.crt
tlsPrivateKeyFile: $PKI/$crt.key
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: $PKI/ca.crt
authorization:
  mode: Webhook
containerRuntimeEndpoint: unix://$sock
cgroupDriver: cgroupfs
${cgroot:+# two kubelets must not share the kubepods cgroups: each deletes pod cgroups it does not know
cgroupRoot: $cgroot}
failCgroupV1: false
failSwapOn: false
# the defaults would add KUBE-FIREWALL & co. to the host's iptables and ip6tables
makeIPTablesUtilChains: false
podLogsDir: $dir/pod-logs
# images come from tarballs (imagePullPolicy: Never): never garbage-collect them
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
# a fairly full disk must not taint the node
evictionHard:
  memory.available: "100Mi"
  nodefs.available: "1%"
  nodefs.inodesFree: "1%"
  imagefs.available: "1%"
  imagefs.inodesFree: "1%"
rotateCertificates: false
serverTLSBootstrap: false
registerNode: true
maxPods: 110
resolvConf: /etc/resolv.conf
EOC
}

# write_kube_proxy_config FILE NODE IP: kube-proxy in iptables mode for NODE. NodePorts answer
# only on the test network's addresses (not on loopback, so route_localnet stays 0), and the
# conntrack tunables are left as they are.
write_kube_proxy_config() {
    cat >"$1" <<EOC
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: $D/kube-proxy.kubeconfig
hostnameOverride: $2
bindAddress: $3
mode: iptables
clusterCIDR: $CLUSTER_CIDR
detectLocalMode: ClusterCIDR
nodePortAddresses: ["$TEST_NET"]
healthzBindAddress: 127.0.0.1:$PROXY_HEALTHZ_PORT
metricsBindAddress: 127.0.0.1:$PROXY_METRICS_PORT
oomScoreAdj: 0
iptables:
  localhostNodePorts: false
  masqueradeAll: false
  syncPeriod: 30s
  minSyncPeriod: 1s
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
EOC
}

# The metrics API: metrics-server in kube-system (the upstream manifests' objects, with the
# image from k8s/image.sh), serving with a certificate of the cluster CA that the APIService
# trusts, and verifying the kubelets' serving certificates with the same CA.
write_metrics_server_manifest() {
    local image=$1 b64="base64 -w0"
    cat >"$D/metrics-server.yaml" <<EOC
apiVersion: v1
kind: ServiceAccount
metadata: {name: metrics-server, namespace: kube-system, labels: {k8s-app: metrics-server}}
---
apiVersion: v1
kind: Secret
metadata: {name: metrics-server-tls, namespace: kube-system, labels: {k8s-app: metrics-server}}
type: kubernetes.io/tls
data:
  tls.crt: $($b64 "$PKI/metrics-server.crt")
  tls.key: $($b64 "$PKI/metrics-server.key")
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: system:aggregated-metrics-reader
  labels:
    k8s-app: metrics-server
    rbac.authorization.k8s.io/aggregate-to-view: "true"
    rbac.authorization.k8s.io/aggregate-to-edit: "true"
    rbac.authorization.k8s.io/aggregate-to-admin: "true"
rules:
- apiGroups: ["metrics.k8s.io"]
  resources: ["pods", "nodes"]
  verbs: ["get", "list", "watch"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "system:metrics-server", labels: {k8s-app: metrics-server}}
rules:
- apiGroups: [""]
  resources: ["nodes/metrics"]
  verbs: ["get"]
- apiGroups: [""]
  resources: ["pods", "nodes"]
  verbs: ["get", "list", "watch"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: metrics-server-auth-reader, namespace: kube-system, labels: {k8s-app: metrics-server}}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: extension-apiserver-authentication-reader}
subjects: [{kind: ServiceAccount, name: metrics-server, namespace: kube-system}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "metrics-server:system:auth-delegator", labels: {k8s-app: metrics-server}}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:auth-delegator"}
subjects: [{kind: ServiceAccount, name: metrics-server, namespace: kube-system}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "system:metrics-server", labels: {k8s-app: metrics-server}}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:metrics-server"}
subjects: [{kind: ServiceAccount, name: metrics-server, namespace: kube-system}]
---
apiVersion: v1
kind: Service
metadata: {name: metrics-server, namespace: kube-system, labels: {k8s-app: metrics-server}}
spec:
  selector: {k8s-app: metrics-server}
  ports: [{name: https, port: 443, protocol: TCP, targetPort: https, appProtocol: https}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: metrics-server, namespace: kube-system, labels: {k8s-app: metrics-server}}
spec:
  selector: {matchLabels: {k8s-app: metrics-server}}
  strategy: {rollingUpdate: {maxUnavailable: 0}}
  template:
    metadata: {labels: {k8s-app: metrics-server}}
    spec:
      serviceAccountName: metrics-server
      priorityClassName: system-cluster-critical
      terminationGracePeriodSeconds: 2
      volumes:
      - {name: tmp-dir, emptyDir: {}}
      - name: tls
        secret: {secretName: metrics-server-tls}
      containers:
      - name: metrics-server
        image: $image
        imagePullPolicy: Never
        args:
        - --cert-dir=/tmp
        - --secure-port=10250
        - --tls-cert-file=/tls/tls.crt
        - --tls-private-key-file=/tls/tls.key
        - --kubelet-preferred-address-types=InternalIP
        - --kubelet-use-node-status-port
        - --kubelet-certificate-authority=/var/run/secrets/kubernetes.io/serviceaccount/ca.crt
        # the shortest it accepts; the request timeout must stay under 90 % of it
        - --metric-resolution=10s
        - --kubelet-request-timeout=5s
        resources:
          requests: {cpu: 20m, memory: 32Mi}
        ports: [{name: https, containerPort: 10250, protocol: TCP}]
        readinessProbe:
          httpGet: {path: /readyz, port: https, scheme: HTTPS}
          periodSeconds: 2
          failureThreshold: 3
        livenessProbe:
          httpGet: {path: /livez, port: https, scheme: HTTPS}
          periodSeconds: 10
          failureThreshold: 3
        securityContext:
          readOnlyRootFilesystem: true
          runAsNonRoot: true
          runAsUser: 1000
          allowPrivilegeEscalation: false
          capabilities: {drop: [ALL]}
        volumeMounts:
        - {name: tmp-dir, mountPath: /tmp}
        - {name: tls, mountPath: /tls, readOnly: true}
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {name: v1beta1.metrics.k8s.io, labels: {k8s-app: metrics-server}}
spec:
  service: {name: metrics-server, namespace: kube-system}
  group: metrics.k8s.io
  version: v1beta1
  caBundle: $($b64 "$PKI/ca.crt")
  groupPriorityMinimum: 100
  versionPriority: 100
EOC
}

# --- the network -------------------------------------------------------------------------------
# Node 1 is the host: the bridge $BRIDGE carries its address and its pods. Node 2 is a network and
# mount namespace held by one process ($N2/$NODE2-ns, a sleep), its eth0 a veth into the bridge.
# Forwarding: node 2 forwards inside its own namespace (which has no route outside $TEST_NET). The
# host keeps net.ipv4.ip_forward as it is and forwards only what arrives on the bridge
# (net.ipv4.conf.$BRIDGE.forwarding, which dies with the bridge), and two routing rules send
# whatever arrives on the bridge for an address outside $TEST_NET to `unreachable`.
net_up() {
    # A bridge's MAC is by default its lowest port's, so it changes when a pod's veth comes or
    # goes, and the pods and node 2 keep sending to the old one (their ARP entries for the
    # bridge address) until those expire: tens of seconds of lost traffic. An address set once
    # is kept (the kernel stops recalculating it), so each bridge gets a fixed one.
    ip link add "$BRIDGE" type bridge
    ip link set "$BRIDGE" address "$BRIDGE_MAC"
    ip addr add "$NODE1_IP/24" dev "$BRIDGE"
    ip link set "$BRIDGE" up
    mkdir -p "$N2"
    ln -sf "$(command -v sleep)" "$N2/$NODE2-ns"
    start node2-ns unshare --net --mount --propagation slave -- "$N2/$NODE2-ns" infinity
    local h host_ns
    h=$(node2_pid)
    host_ns=$(readlink /proc/self/ns/net)
    wait_until 5 "node 2's namespaces" node2_ns_ready "$h" "$host_ns" || die "node 2's namespaces did not appear"
    # a reference to node 2's network namespace that `down` compares processes with
    touch "$N2/netns"
    mount --bind "/proc/$h/ns/net" "$N2/netns"
    ip link add "$VETH2" type veth peer name eth0 netns "$h"
    ip link set "$VETH2" master "$BRIDGE" up
    in_node2_net sh -ec "
        ip link set lo up
        ip addr add $NODE2_IP/24 dev eth0
        ip link set eth0 up
        ip link add $BRIDGE2 type bridge
        ip link set $BRIDGE2 address $BRIDGE2_MAC
        ip addr add $POD2_GW/24 dev $BRIDGE2
        ip link set $BRIDGE2 up
        ip route add $TEST_NET via $NODE1_IP dev eth0
        sysctl -qw net.ipv4.ip_forward=1
        [ ! -e /proc/sys/net/bridge/bridge-nf-call-iptables ] || sysctl -qw net.bridge.bridge-nf-call-iptables=1"
    ip route add "$POD2_SUBNET" via "$NODE2_IP" dev "$BRIDGE"
    # the host reaches ClusterIPs from its bridge address: never through its default route, even
    # before kube-proxy has programmed a Service
    ip route add "$SERVICE_RANGE" dev "$BRIDGE" src "$NODE1_IP"
    # and load balancer addresses the same way (kube-proxy catches them before they leave)
    ip route add "$LB_POOL.0/24" dev "$BRIDGE" src "$NODE1_IP"
    ip rule add iif "$BRIDGE" to "$TEST_NET" lookup main pref "$RULE_PREF"
    ip rule add iif "$BRIDGE" unreachable pref "$((RULE_PREF + 1))"
    sysctl -qw "net.ipv4.conf.$BRIDGE.forwarding=1"
    # node 2's private copies of the paths the kubelet, containerd and libcni hard-code
    local p
    for p in "${NODE2_TMPFS[@]}"; do
        mkdir -p "$p"
        nsenter -t "$h" -m -- mount -t tmpfs -o mode=0755,size=64m "$NODE2-tmpfs" "$p"
    done
}

node2_ns_ready() { [ -e "/proc/$1/ns/net" ] && [ "$(readlink "/proc/$1/ns/net")" != "$2" ]; }

# node 2's cgroup root in every hierarchy (cpuset needs its cpus and mems before any child).
cgroups_up() {
    local h
    for h in /sys/fs/cgroup/*/; do
        [ -L "${h%/}" ] && continue
        mkdir -p "$h${CGROUP2#/}"
    done
    if [ -e "/sys/fs/cgroup/cpuset/cpuset.cpus" ]; then
        cat /sys/fs/cgroup/cpuset/cpuset.cpus >"/sys/fs/cgroup/cpuset$CGROUP2/cpuset.cpus"
        cat /sys/fs/cgroup/cpuset/cpuset.mems >"/sys/fs/cgroup/cpuset$CGROUP2/cpuset.mems"
    fi
}

# --- up ----------------------------------------------------------------------------------------
check_free_port() {
    if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then
        die "127.0.0.1:$1 is already in use ($2); another cluster running? (k8s/cluster.sh status)"
    fi
}

record_host_state() {
    : >"$D/preexisting"
    for p in "${HARDCODED[@]}"; do
        [ -e "$p" ] && echo "$p" >>"$D/preexisting"
    done
    echo recorded >"$D/preexisting.done"
    : >"$D/sysctl.before"
    for s in "${SYSCTLS[@]}"; do
        v=$(sysctl -n "$s" 2>/dev/null) && printf '%s\t%s\n' "$s" "$v" >>"$D/sysctl.before"
    done
    # the netfilter tables that exist now: `down` deletes the ones the cluster's iptables made
    nft list tables 2>/dev/null | sort >"$D/nft-tables.before" || true
}

# images_into SOCKET: every tarball of $IMAGE_DIR imported into the containerd at SOCKET.
images_into() {
    local t
    for t in "$IMAGE_DIR"/*.tar; do
        [ -e "$t" ] || continue
        ctr --address "$1" -n k8s.io images import "$t" >/dev/null || { echo "ctr images import $t into $1 failed" >&2; return 1; }
    done
}

# The images both nodes need: pause and metrics-server (made here when absent), and whatever
# `make image` left in $IMAGE_DIR.
ensure_images() {
    [ -e "$IMAGE_DIR/pause.tar" ] || bash "$here/image.sh" pause >&2
    grep -qx "metrics-server localhost/metrics-server:$METRICS_SERVER_VERSION" "$IMAGE_DIR/names" 2>/dev/null \
        && [ -e "$IMAGE_DIR/metrics-server.tar" ] || bash "$here/image.sh" metrics-server >&2
}

api_ready() { curl -sf --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" "https://$NODE1_IP:$API_PORT/readyz" >/dev/null; }

cmd_up() {
    [ "$(id -u)" = 0 ] || die "needs root (mounts, cgroups, namespaces, a bridge): run it as root"
    for b in kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl; do
        [ -x "$BIN/$b" ] || die "$BIN/$b is missing: run k8s/build.sh (make k8s-build) first"
    done
    [ -x "$K8S_CACHE/metrics-server-$METRICS_SERVER_VERSION/metrics-server" ] \
        || die "metrics-server $METRICS_SERVER_VERSION is not built: run k8s/build.sh (make k8s-build) first"
    for c in etcd containerd runc ctr openssl curl ip iptables-save iptables-restore nft unshare nsenter; do
        command -v "$c" >/dev/null 2>&1 || die "$c is not installed: run k8s/build.sh (make k8s-build) first"
    done
    if [ -d "$D/run" ]; then
        for n in "${DAEMONS[@]}"; do
            pid=$(cat "$D/run/$n.pid" 2>/dev/null) || continue
            alive "$pid" && die "a cluster is already running from $D ($n pid $pid); k8s/cluster.sh down first"
        done
        die "$D holds the state of a cluster that was not torn down; run k8s/cluster.sh down first"
    fi
    ip link show "$BRIDGE" >/dev/null 2>&1 && die "link $BRIDGE exists already; run k8s/cluster.sh down first"
    ip link show "$VETH2" >/dev/null 2>&1 && die "link $VETH2 exists already; run k8s/cluster.sh down first"
    ip rule show pref "$RULE_PREF" | grep -q . && die "a routing rule with pref $RULE_PREF exists already: $(ip rule show pref "$RULE_PREF")"
    ls -d /sys/fs/cgroup/*/kubepods* /sys/fs/cgroup/*"$CGROUP2" >/dev/null 2>&1 \
        && die "kubepods or $CGROUP2 cgroups exist already (another cluster?): $(ls -d /sys/fs/cgroup/*/kubepods* /sys/fs/cgroup/*"$CGROUP2" 2>/dev/null | head -3 | tr '\n' ' ')"
    check_free_port "$ETCD_PORT" etcd
    check_free_port "$ETCD_PEER_PORT" "etcd peer"
    check_free_port "$KCM_PORT" kube-controller-manager
    check_free_port "$SCHED_PORT" kube-scheduler
    check_free_port "$KUBELET_HEALTHZ_PORT" "kubelet healthz"
    check_free_port "$PROXY_HEALTHZ_PORT" "kube-proxy healthz"
    check_free_port "$PROXY_METRICS_PORT" "kube-proxy metrics"

    local t0
    t0=$(now_ms)
    mkdir -p "$D" "$D/run" "$D/logs" "$N2"
    : >"$D/timings"
    record_host_state
    # a half-failed up leaves a state that down removes
    trap 'log "up failed; the logs are in $D/logs; k8s/cluster.sh down removes what started"' ERR

    phase "certificates, kubeconfigs, configs, images"
    ensure_images
    make_pki
    write_containerd_config "$D" "$BRIDGE" "$POD1_SUBNET" "${POD1_RANGE[0]}" "${POD1_RANGE[1]}" "$NODE1_IP"
    write_containerd_config "$N2" "$BRIDGE2" "$POD2_SUBNET" "${POD2_RANGE[0]}" "${POD2_RANGE[1]}" "$POD2_GW"
    write_kubelet_config "$D" "$NODE1_IP" "$SOCK" kubelet-server
    write_kubelet_config "$N2" "$NODE2_IP" "$SOCK2" kubelet2-server "$CGROUP2"
    write_kube_proxy_config "$D/kube-proxy.yaml" "$NODE" "$NODE1_IP"
    write_kube_proxy_config "$N2/kube-proxy.yaml" "$NODE2" "$NODE2_IP"
    write_metrics_server_manifest "localhost/metrics-server:$METRICS_SERVER_VERSION"
    phase_done "certs + kubeconfigs + configs"

    phase "network: bridge $BRIDGE ($NODE1_IP), node 2's namespaces ($NODE2_IP, pods $POD2_SUBNET), routes"
    net_up
    cgroups_up
    phase_done "network + node 2 namespaces + cgroups"

    phase "etcd on 127.0.0.1:$ETCD_PORT, containerd on both nodes"
    start etcd etcd --name proxybench --data-dir "$D/etcd" \
        --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
        --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
        --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
        --initial-cluster "proxybench=http://127.0.0.1:$ETCD_PEER_PORT" --initial-cluster-state new \
        --log-level warn --logger zap --enable-v2=false
    start containerd containerd --config "$D/containerd/config.toml"
    start containerd-2 nsenter -t "$(node2_pid)" -n -m -- containerd --config "$N2/containerd/config.toml"
    wait_until 30 etcd curl -sf "http://127.0.0.1:$ETCD_PORT/health" || { need_alive etcd; die "etcd not healthy after 30 s; $D/logs/etcd.log"; }
    phase_done "etcd healthy"

    phase "kube-apiserver on $NODE1_IP:$API_PORT"
    start kube-apiserver "$BIN/kube-apiserver" \
        --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
        --bind-address "$NODE1_IP" --advertise-address "$NODE1_IP" --secure-port "$API_PORT" \
        --service-cluster-ip-range "$SERVICE_RANGE" \
        --client-ca-file "$PKI/ca.crt" \
        --tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" \
        --kubelet-client-certificate "$PKI/apiserver-kubelet-client.crt" \
        --kubelet-client-key "$PKI/apiserver-kubelet-client.key" \
        --kubelet-certificate-authority "$PKI/ca.crt" \
        --kubelet-preferred-address-types InternalIP,Hostname \
        --service-account-key-file "$PKI/sa.pub" --service-account-signing-key-file "$PKI/sa.key" \
        --service-account-issuer https://kubernetes.default.svc.cluster.local \
        --authorization-mode Node,RBAC --allow-privileged=true \
        --requestheader-client-ca-file "$PKI/ca.crt" --requestheader-allowed-names front-proxy-client \
        --requestheader-username-headers X-Remote-User --requestheader-group-headers X-Remote-Group \
        --requestheader-extra-headers-prefix X-Remote-Extra- \
        --proxy-client-cert-file "$PKI/front-proxy-client.crt" --proxy-client-key-file "$PKI/front-proxy-client.key" \
        --profiling=false --v=0
    # meanwhile: both containerds up, then the images into each (in parallel)
    wait_until 30 containerd ctr --address "$SOCK" version || { need_alive containerd; die "containerd not up after 30 s; $D/logs/containerd.log"; }
    wait_until 30 containerd-2 ctr --address "$SOCK2" version || { need_alive containerd-2; die "node 2's containerd not up after 30 s; $D/logs/containerd-2.log"; }
    local imp1 imp2
    images_into "$SOCK" >>"$D/logs/images.log" 2>&1 &
    imp1=$!
    images_into "$SOCK2" >>"$D/logs/images.log" 2>&1 &
    imp2=$!
    wait_until 60 kube-apiserver api_ready || { need_alive kube-apiserver; die "kube-apiserver not ready after 60 s; $D/logs/kube-apiserver.log"; }
    phase_done "kube-apiserver /readyz"

    phase "kube-controller-manager, kube-scheduler, both kubelets"
    # (the controller-manager exits when it starts before the API server has its RBAC roles)
    start kube-controller-manager "$BIN/kube-controller-manager" \
        --kubeconfig "$D/controller-manager.kubeconfig" \
        --authentication-kubeconfig "$D/controller-manager.kubeconfig" \
        --authorization-kubeconfig "$D/controller-manager.kubeconfig" \
        --bind-address 127.0.0.1 --secure-port "$KCM_PORT" --cert-dir "$D/controller-manager-certs" \
        --cluster-signing-cert-file "$PKI/ca.crt" --cluster-signing-key-file "$PKI/ca.key" \
        --root-ca-file "$PKI/ca.crt" --service-account-private-key-file "$PKI/sa.key" \
        --use-service-account-credentials=true --leader-elect=false \
        --allocate-node-cidrs=false --service-cluster-ip-range "$SERVICE_RANGE" \
        --profiling=false --v=0
    start kube-scheduler "$BIN/kube-scheduler" \
        --kubeconfig "$D/scheduler.kubeconfig" \
        --authentication-kubeconfig "$D/scheduler.kubeconfig" \
        --authorization-kubeconfig "$D/scheduler.kubeconfig" \
        --bind-address 127.0.0.1 --secure-port "$SCHED_PORT" --cert-dir "$D/scheduler-certs" \
        --leader-elect=false --profiling=false --v=0
    start kubelet "$BIN/kubelet" --config "$D/kubelet-config.yaml" --kubeconfig "$D/kubelet.kubeconfig" \
        --root-dir "$D/kubelet" --cert-dir "$D/kubelet/pki" --hostname-override "$NODE" \
        --node-ip "$NODE1_IP" --v=1
    start kubelet-2 nsenter -t "$(node2_pid)" -n -m -- "$BIN/kubelet" --config "$N2/kubelet-config.yaml" \
        --kubeconfig "$N2/kubelet.kubeconfig" --root-dir "$N2/kubelet" --cert-dir "$N2/kubelet/pki" \
        --hostname-override "$NODE2" --node-ip "$NODE2_IP" --v=1
    wait "$imp1" || die "importing the images into node 1's containerd failed; $D/logs/images.log"
    wait "$imp2" || die "importing the images into node 2's containerd failed; $D/logs/images.log"
    wait_until 60 "node $NODE" kc get node "$NODE" || { need_alive kubelet; die "node $NODE did not register in 60 s; $D/logs/kubelet.log"; }
    wait_until 60 "node $NODE2" kc get node "$NODE2" || { need_alive kubelet-2; die "node $NODE2 did not register in 60 s; $D/logs/kubelet-2.log"; }
    # Neither node can reach a registry (host-only network): proxybench refuses an image they
    # would have to pull, with one line, instead of a pod stuck in ErrImagePull.
    kc annotate --overwrite node "$NODE" "$NODE2" proxybench.dev/registry=none >/dev/null || die "kubectl annotate of the nodes failed"
    phase_done "control plane + nodes registered"

    phase "kube-proxy on both nodes, metrics-server"
    start kube-proxy "$BIN/kube-proxy" --config "$D/kube-proxy.yaml"
    start kube-proxy-2 nsenter -t "$(node2_pid)" -n -m -- "$BIN/kube-proxy" --config "$N2/kube-proxy.yaml"
    kc apply -f "$D/metrics-server.yaml" >/dev/null || die "kubectl apply of metrics-server failed"
    # Services of type LoadBalancer get an address of $LB_POOL.0/24, as a cloud would give one.
    local k=$BIN/kubectl
    [ -x "$k" ] || k=$(command -v kubectl)
    start lb-controller "$here/lb-controller.sh" "$k" "$KUBECONFIG_ADMIN" "$LB_POOL"
    # The Gateway API's kinds (k8s/build.sh fetched their CRDs), for gateways under test.
    local gw=$K8S_CACHE/gateway-api-$GATEWAY_API_VERSION/standard.yaml
    [ -s "$gw" ] || die "$gw is missing: run k8s/build.sh (make k8s-build)"
    kc apply --server-side -f "$gw" >/dev/null || die "kubectl apply of the Gateway API CRDs failed"
    wait_until 60 kube-controller-manager curl -skf "https://127.0.0.1:$KCM_PORT/healthz" || { need_alive kube-controller-manager; die "kube-controller-manager not healthy after 60 s"; }
    wait_until 60 kube-scheduler curl -skf "https://127.0.0.1:$SCHED_PORT/healthz" || { need_alive kube-scheduler; die "kube-scheduler not healthy after 60 s"; }
    wait_until 60 "node $NODE Ready" kc wait --for=condition=Ready "node/$NODE" --timeout=1s || { need_alive kubelet; die "node $NODE not Ready in 60 s; $D/logs/kubelet.log"; }
    wait_until 60 "node $NODE2 Ready" kc wait --for=condition=Ready "node/$NODE2" --timeout=1s || { need_alive kubelet-2; die "node $NODE2 not Ready in 60 s; $D/logs/kubelet-2.log"; }
    wait_until 30 kube-proxy curl -sf "http://127.0.0.1:$PROXY_HEALTHZ_PORT/healthz" || { need_alive kube-proxy; die "kube-proxy not healthy after 30 s; $D/logs/kube-proxy.log"; }
    wait_until 30 kube-proxy-2 in_node2_net curl -sf "http://127.0.0.1:$PROXY_HEALTHZ_PORT/healthz" || { need_alive kube-proxy-2; die "node 2's kube-proxy not healthy after 30 s; $D/logs/kube-proxy-2.log"; }
    phase_done "both nodes Ready, kube-proxy healthy"

    wait_until 30 "the Gateway API CRDs" kc wait --for condition=Established --timeout=1s crd/gateways.gateway.networking.k8s.io crd/httproutes.gateway.networking.k8s.io || die "the Gateway API CRDs were not Established in 30 s"
    phase "default ServiceAccount"
    wait_until 60 "default ServiceAccount" kc -n default get serviceaccount default || die "no default ServiceAccount after 60 s; $D/logs/kube-controller-manager.log"
    wait_until 60 "kube-root-ca.crt" kc -n default get configmap kube-root-ca.crt || die "no kube-root-ca.crt ConfigMap after 60 s"
    phase_done "default ServiceAccount + root CA"

    local ms=$(($(now_ms) - t0))
    printf '%-34s %5d.%03d s\n' "cluster up, total" $((ms / 1000)) $((ms % 1000)) >>"$D/timings"
    trap - ERR
    cat "$D/timings" >&2
    log "cluster up in $((ms / 1000)).$(printf %03d $((ms % 1000))) s; state in $D; nodes $NODE ($NODE1_IP) and $NODE2 ($NODE2_IP); the metrics API answers about 12 s from now (two scrapes, 10 s apart); images: $(list_images | tr '\n' ' ')"
    echo "export KUBECONFIG=$KUBECONFIG_ADMIN"
}

list_images() { ctr --address "$SOCK" -n k8s.io images ls -q 2>/dev/null | grep -v '^sha256:' || true; }

# --- down ----------------------------------------------------------------------------------------
# stop_daemons GRACE NAME...: SIGTERM to each, up to GRACE s for all of them, then SIGKILL to
# those left. Each pid goes into $D/down.pids, which `down` waits on at its end.
stop_daemons() {
    local grace=$1 name pid pids=()
    shift
    for name in "$@"; do
        pid=$(cat "$D/run/$name.pid" 2>/dev/null) || continue
        echo "$pid $name" >>"$D/down.pids"
        rm -f "$D/run/$name.pid"
        alive "$pid" || continue
        kill -TERM "$pid" 2>/dev/null || true
        pids+=("$pid")
    done
    [ ${#pids[@]} = 0 ] && return 0
    wait_until "$grace" "$* to exit" none_alive "${pids[@]}" && return 0
    for pid in "${pids[@]}"; do
        if alive "$pid"; then kill -KILL "$pid" 2>/dev/null || true; fi
    done
    wait_until 5 "$* to exit after SIGKILL" none_alive "${pids[@]}" || log "warning: some of $* survived SIGKILL"
}

none_alive() {
    local p
    for p in "$@"; do alive "$p" && return 1; done
    return 0
}

# stray_pids [all]: every process of the cluster that is still there: those in the pod cgroups
# (the containers), those in node 2's network namespace, containerd's shims, and with `all` every
# cluster daemon (containerd, etcd, kube-*, node 2's holder), each when its command line names
# $D. Builtins only in the loop over /proc.
stray_pids() {
    local f p c n2ns="" cmd
    [ -e "$N2/netns" ] && mountpoint -q "$N2/netns" 2>/dev/null && n2ns=$N2/netns
    {
        local g
        for g in /sys/fs/cgroup/*/kubepods* /sys/fs/cgroup/*"$CGROUP2"; do
            if [ -d "$g" ]; then find "$g" -name cgroup.procs -exec cat {} + 2>/dev/null || true; fi
        done
        for f in /proc/[0-9]*; do
            p=${f#/proc/}
            if [ -n "$n2ns" ] && [ "$f/ns/net" -ef "$n2ns" ]; then
                echo "$p"
                continue
            fi
            { read -r c <"$f/comm"; } 2>/dev/null || continue
            case "$c" in
            containerd-shim*) ;;
            # the load balancer's watch loop runs as bash (its command line names its script)
            containerd | etcd | kube-* | kubectl | kubelet | bash | "$NODE2-ns") [ "${1:-}" = all ] || continue ;;
            *) continue ;;
            esac
            cmd=$(tr '\0' ' ' <"$f/cmdline" 2>/dev/null) || continue
            # `if`, not `&&`: a process that does not match (a killed daemon not yet reaped has an
            # empty command line) must not become the loop's status, which pipefail and set -e
            # would turn into a silent exit of `down` in the middle of its work.
            if [[ "$cmd" == *"$D/"* ]]; then echo "$p"; fi
        done
    } | sort -un | while read -r p; do
        if [ "$p" != $$ ] && alive "$p"; then echo "$p"; fi
    done
}

# kill_strays [all]: SIGKILL to stray_pids until there is none (5 s at most).
kill_strays() {
    local pids p
    for _ in $(seq 1 20); do
        pids=$(stray_pids "$@") || true
        [ -z "$pids" ] && return 0
        for p in $pids; do echo "$p stray:$(cat "/proc/$p/comm" 2>/dev/null)" >>"$D/down.pids"; done
        # shellcheck disable=SC2086
        kill -KILL $pids 2>/dev/null || true
        sleep 0.25
    done
    log "warning: processes survive SIGKILL: $(stray_pids "$@" | tr '\n' ' ')"
}

# exited PID: no such process any more, not even a zombie waiting for its parent.
exited() { [ ! -e "/proc/$1" ]; }

# Every process `down` stopped or killed must be gone, zombies included (PID 1 here reaps orphans
# about 2 s late), within $DOWN_WAIT s; otherwise `down` names each one and fails.
wait_all_exited() {
    [ -e "$D/down.pids" ] || return 0
    local deadline=$(($(now_ms) + DOWN_WAIT * 1000)) left pid name st line i=0
    while :; do
        left=""
        while read -r pid name; do
            exited "$pid" && continue
            { read -r line <"/proc/$pid/stat"; } 2>/dev/null && st=${line##*) } && st=${st%% *}
            left+="$name (pid $pid, state ${st:-?}); "
        done < <(sort -u "$D/down.pids")
        # anything of the cluster that was not stopped by name (checked once a second)
        if [ -z "$left" ] || [ $((i % 10)) = 0 ]; then
            left+=$(stray_pids all | while read -r p; do printf '%s (pid %s, found late); ' "$(cat "/proc/$p/comm" 2>/dev/null)" "$p"; done)
        fi
        [ -z "$left" ] && return 0
        [ "$(now_ms)" -lt "$deadline" ] || { log "processes still there $DOWN_WAIT s after down stopped them: $left"; return 1; }
        i=$((i + 1))
        sleep 0.1
    done
}

unmount_all() {
    local m left
    for _ in 1 2 3 4 5; do
        # mount points under $D, deepest first (mountinfo field 5, octal escapes decoded)
        left=$(awk -v d="$D/" '{ p = $5; gsub(/\\040/, " ", p); if (index(p, d) == 1) print p }' /proc/self/mountinfo | sort -r)
        [ -z "$left" ] && return 0
        while IFS= read -r m; do
            umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
        done <<<"$left"
    done
    log "warning: mounts left under $D: $left"
    return 1
}

remove_cgroups() {
    local dirs
    for _ in $(seq 1 40); do
        dirs=$(ls -d /sys/fs/cgroup/*/kubepods* /sys/fs/cgroup/*"$CGROUP2" 2>/dev/null || true)
        [ -z "$dirs" ] && return 0
        for d in $dirs; do
            find "$d" -depth -type d -exec rmdir {} + 2>>"$D/logs/down.log" || true
        done
        sleep 0.25
    done
    log "warning: cgroups left: $(ls -d /sys/fs/cgroup/*/kubepods* /sys/fs/cgroup/*"$CGROUP2" 2>/dev/null | tr '\n' ' ')"
    return 1
}

remove_links() {
    ip link del "$VETH2" 2>/dev/null || true
    ip link show "$BRIDGE" >/dev/null 2>&1 || return 0
    for l in $(ip -o link show master "$BRIDGE" 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1); do
        ip link del "$l" 2>/dev/null || true
    done
    ip link del "$BRIDGE" 2>/dev/null || true
}

# the two routing rules of net_up (the routes went with the bridge)
remove_rules() {
    local pref
    for pref in "$RULE_PREF" "$((RULE_PREF + 1))"; do
        while ip rule show pref "$pref" | grep -q "iif $BRIDGE"; do
            ip rule del pref "$pref" || break
        done
    done
}

# kube-proxy's chains in the host's iptables and ip6tables (node 2's died with its namespace):
# the jumps to them from the built-in chains, then the chains themselves; then the tables
# iptables-nft made for them, when they did not exist before `up` and hold nothing else now.
remove_kube_chains() {
    local save restore fam table all rules chains cmds c
    for fam in ip ip6; do
        save=iptables-save restore=iptables-restore
        [ $fam = ip6 ] && save=ip6tables-save restore=ip6tables-restore
        command -v $save >/dev/null 2>&1 || continue
        all=$($save 2>/dev/null) || continue
        grep -q KUBE- <<<"$all" || continue
        for table in $(sed -n 's/^\*//p' <<<"$all"); do
            rules=$(awk -v t="*$table" '$0 == t { on = 1; next } /^COMMIT/ { on = 0 } on' <<<"$all")
            chains=$(sed -n 's/^:\(KUBE-[^ ]*\) .*/\1/p' <<<"$rules")
            cmds=$(
                grep -E '^-A [A-Z]+ .*-j KUBE-' <<<"$rules" | grep -Ev '^-A KUBE-' | sed 's/^-A /-D /' || true
                for c in $chains; do echo "-F $c"; done
                for c in $chains; do echo "-X $c"; done
            )
            # nothing of kube-proxy's here: no restore, which would make the table if absent
            [ -n "$cmds" ] || continue
            printf '*%s\n%s\nCOMMIT\n' "$table" "$cmds" | $restore --noflush 2>>"$D/logs/down.log" \
                || log "warning: $restore could not remove the KUBE chains of $fam $table"
        done
    done
    command -v nft >/dev/null 2>&1 && [ -e "$D/nft-tables.before" ] || return 0
    local fam table
    while read -r _ fam table; do
        [ -n "$table" ] || continue
        grep -qx "table $fam $table" "$D/nft-tables.before" && continue
        nft_table_empty "$fam" "$table" || continue
        nft delete table "$fam" "$table" 2>>"$D/logs/down.log" || log "warning: could not delete nft table $fam $table"
    done < <(nft list tables 2>/dev/null)
}

# nft_table_empty FAMILY TABLE: the table holds only built-in chains, and no rule.
nft_table_empty() {
    ! nft list table "$1" "$2" 2>/dev/null | grep -Ev '^\s*(table .*\{|type .*;|\}|)$' \
        | grep -Ev '^\s*chain (PREROUTING|INPUT|FORWARD|OUTPUT|POSTROUTING) \{$' | grep -q .
}

remove_created_paths() {
    [ -e "$D/preexisting.done" ] || { log "no record of the host paths from before up; hard-coded paths left as they are"; return 0; }
    # deepest first, only the ones that were absent before `up`
    local p
    for p in $(printf '%s\n' "${HARDCODED[@]}" | awk '{ print length, $0 }' | sort -rn | cut -d' ' -f2-); do
        grep -qxF "$p" "$D/preexisting" && continue
        [ -e "$p" ] && rm -rf "$p"
    done
    return 0
}

restore_sysctls() {
    [ -e "$D/sysctl.before" ] || return 0
    local s v cur
    while IFS=$'\t' read -r s v; do
        cur=$(sysctl -n "$s" 2>/dev/null) || continue
        [ "$cur" = "$v" ] || sysctl -qw "$s=$v" >/dev/null 2>&1 || log "warning: could not restore $s=$v (now $cur)"
    done <"$D/sysctl.before"
}

cmd_down() {
    [ "$(id -u)" = 0 ] || die "needs root (mounts, cgroups, namespaces, a bridge): run it as root"
    local t0
    t0=$(now_ms)
    if [ ! -d "$D" ]; then
        # Nothing recorded. Sweep the links, rules and cgroups (names only this script uses)
        # unless some cluster still runs: those would be another state dir's.
        if pgrep -x kubelet >/dev/null 2>&1 || pgrep -x containerd >/dev/null 2>&1; then
            log "no cluster state in $D, and a kubelet or containerd runs (another state dir?): nothing touched"
            return 0
        fi
        remove_links
        remove_rules
        remove_cgroups || true
        log "no cluster state in $D: nothing to tear down"
        return 0
    fi
    log "tearing down the cluster in $D"
    trap 'log "down failed at line $LINENO of k8s/cluster.sh; run k8s/cluster.sh down again"' ERR
    : >>"$D/down.pids"
    step() { log "down: $1 at $(( $(now_ms) - t0 )) ms"; }
    # a lost node 2 (`node2 lose`) first gets its kubelet back: a stopped process takes no SIGTERM
    node2_continue
    # the kubelets first, so nothing restarts the containers; then the containers and their shims
    stop_daemons 5 kubelet-2 kubelet kube-proxy-2 kube-proxy
    step "kubelets and kube-proxies stopped"
    local root
    for root in "$RUNC_ROOT" "$N2/containerd/runc"; do
        if [ -d "$root/k8s.io" ] && command -v runc >/dev/null; then
            for id in $(runc --root "$root/k8s.io" list -q 2>/dev/null); do
                runc --root "$root/k8s.io" kill --all "$id" KILL 2>/dev/null || true
            done
        fi
    done
    stop_daemons 5 containerd-2 containerd
    kill_strays
    step "containers, containerds and shims stopped"
    # their state is deleted next: no need to wait for a graceful shutdown
    stop_daemons 1 kube-scheduler kube-controller-manager kube-apiserver etcd node2-ns
    kill_strays all
    step "control plane, etcd and node 2's namespaces stopped"
    local ok=1
    wait_all_exited || ok=0
    step "waited for every process to leave /proc"
    unmount_all || ok=0
    remove_kube_chains
    remove_links
    remove_rules
    remove_cgroups || ok=0
    remove_created_paths
    restore_sysctls
    step "mounts, chains, links, rules, cgroups, paths, tunables removed"
    if [ $ok = 1 ]; then
        rm -rf "$D"
    else
        die "teardown incomplete (see above); $D kept; run k8s/cluster.sh down again"
    fi
    local ms=$(($(now_ms) - t0))
    log "cluster down in $((ms / 1000)).$(printf %03d $((ms % 1000))) s"
}

# --- node2 lose|restore --------------------------------------------------------------------------
# Node 2 lost the way a real node is lost, and back. `lose` cuts node 2 off the network (the
# host's end of its eth0, $VETH2, down: its pods, its kubelet's API and its kube-proxy are
# unreachable from the host and node 1, and it reaches nothing) and stops its kubelet (SIGSTOP:
# no node status, no lease, no pod changes). The control plane notices on its own: after
# kube-controller-manager's node-monitor-grace-period (Kubernetes' default, 50 s since 1.32;
# this script leaves it) the node is NotReady, its pods' Ready conditions go False and the
# EndpointSlices drop them. `restore` brings the link up, continues the kubelet and waits until
# node 2 is Ready and carries no unreachable/not-ready taint (at most 120 s). The pods are not
# frozen: a frozen process takes no signal, and `down` must be able to stop everything.
node2_lost_file() { echo "$D/run/node2-lost"; }

node2_continue() {
    local pid
    pid=$(cat "$D/run/kubelet-2.pid" 2>/dev/null) || return 0
    if alive "$pid"; then kill -CONT "$pid" 2>/dev/null || true; fi
    if ip link show "$VETH2" >/dev/null 2>&1; then ip link set "$VETH2" up || true; fi
    rm -f "$(node2_lost_file)"
}

node2_ready() {
    [ "$(kc get node "$NODE2" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}')" = True ] \
        && ! kc get node "$NODE2" -o 'jsonpath={.spec.taints[*].key}' | grep -Eq 'unreachable|not-ready'
}

cmd_node2() {
    [ "$(id -u)" = 0 ] || die "needs root (a link, a signal to the kubelet): run it as root"
    local pid t0
    pid=$(cat "$D/run/kubelet-2.pid" 2>/dev/null) || die "no cluster in $D (no kubelet-2 pid file)"
    alive "$pid" || die "node 2's kubelet (pid $pid) is not running; $D/logs/kubelet-2.log"
    t0=$(now_ms)
    case "${1:-}" in
    lose)
        touch "$(node2_lost_file)"
        ip link set "$VETH2" down
        kill -STOP "$pid"
        log "node $NODE2 lost: its link $VETH2 down, its kubelet (pid $pid) stopped; NotReady after the node-monitor grace period"
        ;;
    restore)
        node2_continue
        wait_until 120 "node $NODE2 Ready without unreachable/not-ready taints" node2_ready \
            || die "node $NODE2 not Ready 120 s after restore; $D/logs/kubelet-2.log"
        local ms=$(($(now_ms) - t0))
        log "node $NODE2 restored: Ready, untainted, in $((ms / 1000)).$(printf %03d $((ms % 1000))) s"
        ;;
    *) echo "usage: k8s/cluster.sh node2 lose|restore" >&2; exit 2 ;;
    esac
}

# --- status ------------------------------------------------------------------------------------
cmd_status() {
    [ -d "$D/run" ] || { echo "no cluster (state dir $D absent)"; return 1; }
    local rc=0 pid
    for n in "${DAEMONS[@]}"; do
        pid=$(cat "$D/run/$n.pid" 2>/dev/null || echo -)
        if [ "$pid" != - ] && alive "$pid"; then echo "$n: running (pid $pid)"; else echo "$n: NOT running"; rc=1; fi
    done
    [ $rc = 0 ] && kc get node -o wide 2>&1 || true
    [ $rc = 0 ] && echo "images: $(list_images | tr '\n' ' ')"
    echo "export KUBECONFIG=$KUBECONFIG_ADMIN"
    return $rc
}

case "${1:-}" in
up) cmd_up ;;
down) cmd_down ;;
status) cmd_status ;;
node2) cmd_node2 "${2:-}" ;;
*) echo "usage: k8s/cluster.sh up|down|status|node2 lose|restore" >&2; exit 2 ;;
esac
