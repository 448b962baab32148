#!/usr/bin/env bash
# k8s/cluster.sh up|down|status: a real single-node Kubernetes on loopback for proxybench's tests.
#
# etcd, kube-apiserver, kube-controller-manager, kube-scheduler, containerd and the kubelet run as
# detached processes; everything they write lives under one state directory ($PROXYBENCH_K8S_DIR,
# default ~/.cache/proxybench/k8s-run), the admin kubeconfig included. Ordinary pods get addresses
# on a host-only bridge (198.18.0.1/24, no forwarding, no NAT); hostNetwork pods use 127.0.0.1.
# `up` prints `export KUBECONFIG=<path>` as its last line. `down` removes every process, mount,
# cgroup, link and file the cluster made (including the few paths the kubelet and containerd
# hard-code outside the state directory, when they did not exist before) and is safe to run twice
# or after a half-failed `up`. The facts behind each setting: docs/kubernetes.md.
#
# Env: PROXYBENCH_K8S_DIR (state dir), K8S_VERSION (v1.34.4), K8S_CACHE (~/.cache/proxybench/k8s),
# PROXYBENCH_IMAGE_DIR (target/image: the *.tar OCI images `up` imports), ETCD_PORT (2379),
# ETCD_PEER_PORT (2380), API_PORT (6443), KCM_PORT (10257), SCHED_PORT (10259),
# KUBELET_PORT (10250), KUBELET_HEALTHZ_PORT (10248), K8S_BRIDGE (pbbr0), K8S_NODE (proxybench).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
K8S_VERSION=${K8S_VERSION:-v1.34.4}
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
BRIDGE=${K8S_BRIDGE:-pbbr0}
NODE=${K8S_NODE:-proxybench}
SUBNET=198.18.0.0/24
BRIDGE_IP=198.18.0.1/24
SERVICE_RANGE=198.18.128.0/24 # allocated only: there is no kube-proxy, nothing routes it

# Paths the kubelet, containerd and libcni use whatever the flags say; `up` records which existed.
HARDCODED=(/var/lib/kubelet /var/lib/kubelet/device-plugins /run/containerd /run/containerd/s
    /run/containerd/fifo /var/lib/cni /var/lib/cni/results /var/lib/containerd /opt/containerd
    /var/log/pods /var/log/containers /run/netns /etc/kubernetes)
# Kernel tunables the kubelet sets at start (protectKernelDefaults: false); `down` restores them.
SYSCTLS=(vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops
    kernel.keys.root_maxkeys kernel.keys.root_maxbytes)
DAEMONS=(kubelet kube-scheduler kube-controller-manager kube-apiserver containerd etcd)

PKI=$D/pki
SOCK=$D/containerd/containerd.sock
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
# would call a zombie alive).
alive() {
    local st
    st=$(sed -n 's/^[0-9]* (.*) \([A-Za-z]\) .*/\1/p' "/proc/$1/stat" 2>/dev/null) || return 1
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

# kubeconfig FILE CERTNAME: a kubeconfig with the certificates embedded.
kubeconfig() {
    local b64="base64 -w0"
    cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: proxybench
  cluster:
    server: https://127.0.0.1:$API_PORT
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
EOF
    chmod 600 "$1"
}

make_pki() {
    mkdir -p "$PKI"
    chmod 700 "$PKI"
    new_key "$PKI/ca.key"
    openssl req -x509 -new -key "$PKI/ca.key" -subj "/CN=proxybench-test-ca" -days 3650 -sha256 \
        -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" \
        -out "$PKI/ca.crt" 2>/dev/null
    local api_sans="IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default"
    api_sans+=",DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
    cert apiserver kube-apiserver "" serverAuth "$api_sans"
    cert apiserver-kubelet-client kube-apiserver-kubelet-client system:masters clientAuth ""
    cert front-proxy-client front-proxy-client "" clientAuth ""
    cert admin proxybench-admin system:masters clientAuth ""
    cert controller-manager system:kube-controller-manager "" clientAuth ""
    cert scheduler system:kube-scheduler "" clientAuth ""
    cert kubelet-client "system:node:$NODE" system:nodes clientAuth ""
    cert kubelet-server "system:node:$NODE" system:nodes serverAuth "IP:127.0.0.1,DNS:$NODE,DNS:localhost"
    openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$PKI/sa.key" 2>/dev/null
    openssl pkey -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
    kubeconfig "$KUBECONFIG_ADMIN" admin
    kubeconfig "$D/controller-manager.kubeconfig" controller-manager
    kubeconfig "$D/scheduler.kubeconfig" scheduler
    kubeconfig "$D/kubelet.kubeconfig" kubelet-client
}

# --- configuration files -----------------------------------------------------------------------
write_containerd_config() {
    mkdir -p "$D/containerd" "$D/cni/net.d" "$D/cni/ipam"
    cat >"$D/containerd/config.toml" <<EOF
version = 2
root = "$D/containerd/root"
state = "$D/containerd/state"
oom_score = 0
# opt would create /opt/containerd; the others are snapshotters and exporters nothing here uses
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.tracing.processor.v1.otlp"]

[grpc]
  address = "$SOCK"
[ttrpc]
  address = "$SOCK.ttrpc"
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
        Root = "$RUNC_ROOT"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$D/cni/net.d"
    max_conf_num = 1
EOF
    # Bridge mode: ordinary pods get 198.18.0.x on a host-only bridge. No gateway, no default
    # route, no masquerade: pod traffic reaches the host and the other pods, nothing else.
    cat >"$D/cni/net.d/10-proxybench.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "proxybench",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$BRIDGE",
      "isGateway": false,
      "isDefaultGateway": false,
      "ipMasq": false,
      "hairpinMode": false,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "$SUBNET", "rangeStart": "198.18.0.10", "rangeEnd": "198.18.0.250"}]],
        "dataDir": "$D/cni/ipam"
      }
    }
  ]
}
EOF
}

write_kubelet_config() {
    mkdir -p "$D/kubelet" "$D/pod-logs"
    cat >"$D/kubelet-config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: $KUBELET_PORT
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $KUBELET_HEALTHZ_PORT
tlsCertFile: $PKI/kubelet-server.crt
tlsPrivateKeyFile: $PKI/kubelet-server.key
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: $PKI/ca.crt
authorization:
  mode: Webhook
containerRuntimeEndpoint: unix://$SOCK
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
# the defaults would add KUBE-FIREWALL & co. to the host's iptables and ip6tables
makeIPTablesUtilChains: false
podLogsDir: $D/pod-logs
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
EOF
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
}

import_images() {
    [ -e "$IMAGE_DIR/pause.tar" ] || bash "$here/image.sh" pause >&2
    local imported=()
    for t in "$IMAGE_DIR"/*.tar; do
        [ -e "$t" ] || continue
        ctr --address "$SOCK" -n k8s.io images import "$t" >/dev/null \
            || die "ctr images import $t failed"
        imported+=("$(basename "$t")")
    done
    log "imported ${imported[*]}"
}

api_ready() { curl -sf --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" "https://127.0.0.1:$API_PORT/readyz" >/dev/null; }

cmd_up() {
    [ "$(id -u)" = 0 ] || die "needs root (mounts, cgroups, a bridge): run it as root"
    for b in kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl; do
        [ -x "$BIN/$b" ] || die "$BIN/$b is missing: run k8s/build.sh (make k8s-build) first"
    done
    for c in etcd containerd runc ctr openssl curl ip; do
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
    ls -d /sys/fs/cgroup/*/kubepods* >/dev/null 2>&1 && die "kubepods cgroups exist already (another cluster?): $(ls -d /sys/fs/cgroup/*/kubepods* | head -3 | tr '\n' ' ')"
    check_free_port "$ETCD_PORT" etcd
    check_free_port "$ETCD_PEER_PORT" "etcd peer"
    check_free_port "$API_PORT" kube-apiserver
    check_free_port "$KCM_PORT" kube-controller-manager
    check_free_port "$SCHED_PORT" kube-scheduler
    check_free_port "$KUBELET_PORT" kubelet
    check_free_port "$KUBELET_HEALTHZ_PORT" "kubelet healthz"

    local t0
    t0=$(now_ms)
    mkdir -p "$D" "$D/run" "$D/logs"
    : >"$D/timings"
    record_host_state
    # a half-failed up leaves a state that down removes
    trap 'log "up failed; the logs are in $D/logs; k8s/cluster.sh down removes what started"' ERR

    phase "certificates and kubeconfigs"
    make_pki
    write_containerd_config
    write_kubelet_config
    phase_done "certs + kubeconfigs + configs"

    phase "host-only bridge $BRIDGE $BRIDGE_IP"
    ip link add "$BRIDGE" type bridge
    ip addr add "$BRIDGE_IP" dev "$BRIDGE"
    ip link set "$BRIDGE" up
    phase_done "bridge"

    phase "etcd on 127.0.0.1:$ETCD_PORT"
    start etcd etcd --name proxybench --data-dir "$D/etcd" \
        --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
        --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
        --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
        --initial-cluster "proxybench=http://127.0.0.1:$ETCD_PEER_PORT" --initial-cluster-state new \
        --log-level warn --logger zap --enable-v2=false
    wait_until 30 etcd curl -sf "http://127.0.0.1:$ETCD_PORT/health" || { need_alive etcd; die "etcd not healthy after 30 s; $D/logs/etcd.log"; }
    phase_done "etcd healthy"

    phase "containerd ($SOCK)"
    start containerd containerd --config "$D/containerd/config.toml"
    wait_until 30 containerd ctr --address "$SOCK" version || { need_alive containerd; die "containerd not up after 30 s; $D/logs/containerd.log"; }
    phase_done "containerd up"

    phase "images from $IMAGE_DIR"
    import_images
    phase_done "image import"

    phase "kube-apiserver on 127.0.0.1:$API_PORT"
    start kube-apiserver "$BIN/kube-apiserver" \
        --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
        --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$API_PORT" \
        --service-cluster-ip-range "$SERVICE_RANGE" \
        --endpoint-reconciler-type none \
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
    wait_until 60 kube-apiserver api_ready || { need_alive kube-apiserver; die "kube-apiserver not ready after 60 s; $D/logs/kube-apiserver.log"; }
    phase_done "kube-apiserver /readyz"

    phase "kube-controller-manager and kube-scheduler"
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
    wait_until 60 kube-controller-manager curl -skf "https://127.0.0.1:$KCM_PORT/healthz" || { need_alive kube-controller-manager; die "kube-controller-manager not healthy after 60 s"; }
    wait_until 60 kube-scheduler curl -skf "https://127.0.0.1:$SCHED_PORT/healthz" || { need_alive kube-scheduler; die "kube-scheduler not healthy after 60 s"; }
    phase_done "controller-manager + scheduler"

    phase "kubelet (node $NODE)"
    start kubelet "$BIN/kubelet" --config "$D/kubelet-config.yaml" --kubeconfig "$D/kubelet.kubeconfig" \
        --root-dir "$D/kubelet" --cert-dir "$D/kubelet/pki" --hostname-override "$NODE" \
        --cloud-provider external --v=1
    wait_until 60 node kc get node "$NODE" || { need_alive kubelet; die "node $NODE did not register in 60 s; $D/logs/kubelet.log"; }
    # The kubelet refuses a loopback --node-ip; with --cloud-provider=external it keeps the
    # addresses already on the Node, so this script plays the cloud-controller-manager.
    kc patch node "$NODE" --subresource=status --type=merge \
        -p "{\"status\":{\"addresses\":[{\"type\":\"InternalIP\",\"address\":\"127.0.0.1\"},{\"type\":\"Hostname\",\"address\":\"$NODE\"}]}}" >/dev/null
    kc taint node "$NODE" node.cloudprovider.kubernetes.io/uninitialized- >/dev/null 2>&1 || true
    wait_until 60 "node Ready" kc wait --for=condition=Ready "node/$NODE" --timeout=1s || { need_alive kubelet; die "node $NODE not Ready in 60 s; $D/logs/kubelet.log"; }
    phase_done "kubelet: node registered + Ready"

    phase "default ServiceAccount"
    wait_until 60 "default ServiceAccount" kc -n default get serviceaccount default || die "no default ServiceAccount after 60 s; $D/logs/kube-controller-manager.log"
    wait_until 60 "kube-root-ca.crt" kc -n default get configmap kube-root-ca.crt || die "no kube-root-ca.crt ConfigMap after 60 s"
    phase_done "default ServiceAccount + root CA"

    local ms=$(($(now_ms) - t0))
    printf '%-34s %5d.%03d s\n' "cluster up, total" $((ms / 1000)) $((ms % 1000)) >>"$D/timings"
    trap - ERR
    cat "$D/timings" >&2
    log "cluster up in $((ms / 1000)).$(printf %03d $((ms % 1000))) s; state in $D; images: $(list_images | tr '\n' ' ')"
    echo "export KUBECONFIG=$KUBECONFIG_ADMIN"
}

list_images() { ctr --address "$SOCK" -n k8s.io images ls -q 2>/dev/null | grep -v '^sha256:' || true; }

# --- down --------------------------------------------------------------------------------------
# stop NAME: SIGTERM, up to $2 s, then SIGKILL; waits until the process is gone (or a zombie).
stop_daemon() {
    local name=$1 grace=${2:-5} pid
    pid=$(cat "$D/run/$name.pid" 2>/dev/null) || return 0
    if alive "$pid"; then
        kill -TERM "$pid" 2>/dev/null || true
        wait_until "$grace" "$name exit" gone "$pid" || {
            kill -KILL "$pid" 2>/dev/null || true
            wait_until 5 "$name exit" gone "$pid" || log "warning: $name (pid $pid) survived SIGKILL"
        }
    fi
    rm -f "$D/run/$name.pid"
}

# pids in the pod cgroups (the containers) and every cluster process (containerd, its shims, etcd,
# kube-*) whose command line names $D: shims, and daemons whose pid file is gone.
stray_pids() {
    {
        find /sys/fs/cgroup/ -path '*/kubepods*' -name cgroup.procs -exec cat {} + 2>/dev/null
        for f in /proc/[0-9]*/cmdline; do
            p=${f#/proc/}
            p=${p%/cmdline}
            case "$(cat "/proc/$p/comm" 2>/dev/null)" in
            containerd* | etcd | kube-* | kubelet) ;;
            *) continue ;;
            esac
            tr '\0' ' ' <"$f" 2>/dev/null | grep -qF -- "$D/" && echo "$p"
        done
    } | sort -un | while read -r p; do alive "$p" && echo "$p"; done
}

kill_strays() {
    local pids
    for _ in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
        pids=$(stray_pids)
        [ -z "$pids" ] && return 0
        # shellcheck disable=SC2086
        kill -KILL $pids 2>/dev/null || true
        sleep 0.25
    done
    log "warning: processes survive SIGKILL: $(stray_pids | tr '\n' ' ')"
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
        dirs=$(ls -d /sys/fs/cgroup/*/kubepods* 2>/dev/null || true)
        [ -z "$dirs" ] && return 0
        for d in $dirs; do
            find "$d" -depth -type d -exec rmdir {} + 2>/dev/null || true
        done
        sleep 0.25
    done
    log "warning: cgroups left: $(ls -d /sys/fs/cgroup/*/kubepods* 2>/dev/null | tr '\n' ' ')"
    return 1
}

remove_links() {
    ip link show "$BRIDGE" >/dev/null 2>&1 || return 0
    for l in $(ip -o link show master "$BRIDGE" 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1); do
        ip link del "$l" 2>/dev/null || true
    done
    ip link del "$BRIDGE" 2>/dev/null || true
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
    [ "$(id -u)" = 0 ] || die "needs root (mounts, cgroups, a bridge): run it as root"
    local t0
    t0=$(now_ms)
    if [ ! -d "$D" ]; then
        # Nothing recorded. Sweep the bridge and kubepods cgroups (names only this script uses)
        # unless some cluster still runs: those would be another state dir's.
        if pgrep -x kubelet >/dev/null 2>&1 || pgrep -x containerd >/dev/null 2>&1; then
            log "no cluster state in $D, and a kubelet or containerd runs (another state dir?): nothing touched"
            return 0
        fi
        remove_links
        remove_cgroups || true
        log "no cluster state in $D: nothing to tear down"
        return 0
    fi
    log "tearing down the cluster in $D"
    # the kubelet first, so nothing restarts the containers; then the containers and their shims
    stop_daemon kubelet 5
    if [ -d "$RUNC_ROOT/k8s.io" ] && command -v runc >/dev/null; then
        for id in $(runc --root "$RUNC_ROOT/k8s.io" list -q 2>/dev/null); do
            runc --root "$RUNC_ROOT/k8s.io" kill --all "$id" KILL 2>/dev/null || true
        done
    fi
    stop_daemon containerd 5
    kill_strays
    for n in kube-scheduler kube-controller-manager kube-apiserver etcd; do stop_daemon "$n" 5; done
    kill_strays
    local ok=1
    unmount_all || ok=0
    remove_links
    remove_cgroups || ok=0
    remove_created_paths
    restore_sysctls
    if [ $ok = 1 ]; then
        rm -rf "$D"
    else
        die "teardown incomplete (see warnings above); $D kept; run k8s/cluster.sh down again"
    fi
    local ms=$(($(now_ms) - t0))
    log "cluster down in $((ms / 1000)).$(printf %03d $((ms % 1000))) s"
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
*) echo "usage: k8s/cluster.sh up|down|status" >&2; exit 2 ;;
esac
