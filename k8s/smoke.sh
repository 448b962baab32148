#!/usr/bin/env bash
# k8s/smoke.sh: proves the local test cluster does what proxybench's Kubernetes mode needs.
#
# In namespace cluster-smoke: a Deployment of 2 proxybench backends in bridge mode (ordinary pods,
# 198.18.0.x), a headless Service whose EndpointSlice must list those pod IPs, and an nginx
# hostNetwork pod on 127.0.0.1:$SMOKE_PORT (reuseport) proxying to the pod IPs, with a busybox exec
# readiness probe. curl from the host must get 200s from both backends; an exec into the nginx pod
# must rewrite its config and reload it; the pod logs must carry nginx's access log; the pods must
# have no route but 198.18.0.0/24 and the host must not forward; a port-forward to a backend pod
# must answer 200. Then the
# namespace is deleted. Each phase is timed.
# Env: KUBECONFIG (default: the admin kubeconfig of k8s/cluster.sh), SMOKE_PORT (18180; the
# port-forward uses SMOKE_PORT+1),
# PROXYBENCH_IMAGE_DIR (target/image: its `names` file gives the image names).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
D=${PROXYBENCH_K8S_DIR:-$HOME/.cache/proxybench/k8s-run}
export KUBECONFIG=${KUBECONFIG:-$D/admin.kubeconfig}
IMAGE_DIR=${PROXYBENCH_IMAGE_DIR:-$here/../target/image}
PORT=${SMOKE_PORT:-18180}
NS=cluster-smoke
K8S_VERSION=${K8S_VERSION:-v1.34.4}
KUBECTL=${K8S_CACHE:-$HOME/.cache/proxybench/k8s}/$K8S_VERSION/kubectl
[ -x "$KUBECTL" ] || KUBECTL=kubectl
k() { "$KUBECTL" -n "$NS" "$@"; }
image() { awk -v n="$1" '$1 == n { print $2 }' "$IMAGE_DIR/names"; }
PB_IMAGE=$(image proxybench)
NGINX_IMAGE=$(image nginx)
[ -n "$PB_IMAGE" ] && [ -n "$NGINX_IMAGE" ] || { echo "k8s/smoke.sh: no image names in $IMAGE_DIR/names (make image)" >&2; exit 1; }

now_ms() { date +%s%3N; }
secs() { local ms=$1; printf '%d.%03d' $((ms / 1000)) $((ms % 1000)); }
t=$(now_ms)
T0=$t
lap() { local n; n=$(now_ms); printf '%-44s %8s s\n' "$1" "$(secs $((n - t)))"; t=$n; }
fail() {
    echo "SMOKE FAILED: $*" >&2
    k get pods -o wide >&2 || true
    k get events --sort-by=.lastTimestamp 2>/dev/null | tail -20 >&2 || true
    exit 1
}
cleanup() { "$KUBECTL" delete namespace "$NS" --ignore-not-found --wait=false >/dev/null 2>&1 || true; }
trap cleanup EXIT

"$KUBECTL" delete namespace "$NS" --ignore-not-found --wait=true >/dev/null
"$KUBECTL" create namespace "$NS" >/dev/null
k apply -f - >/dev/null <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: backend}
spec:
  replicas: 2
  selector: {matchLabels: {app: backend}}
  template:
    metadata: {labels: {app: backend}}
    spec:
      terminationGracePeriodSeconds: 2
      containers:
      - name: backend
        image: $PB_IMAGE
        imagePullPolicy: Never
        args: [backend, --listen, "0.0.0.0:8080"]
        ports: [{containerPort: 8080, name: http}]
        readinessProbe:
          tcpSocket: {port: 8080}
          periodSeconds: 1
---
apiVersion: v1
kind: Service
metadata: {name: backend}
spec:
  clusterIP: None
  selector: {app: backend}
  ports: [{name: http, port: 8080}]
YAML
k rollout status deployment/backend --timeout=120s >/dev/null || fail "backends not Ready"
lap "2 bridge-mode backend pods Ready"

ips=""
for _ in $(seq 1 100); do
    ips=$(k get endpointslices -l kubernetes.io/service-name=backend \
        -o jsonpath='{range .items[*].endpoints[?(@.conditions.ready==true)]}{.addresses[0]}{"\n"}{end}' | sort)
    [ "$(grep -c '^198\.18\.0\.' <<<"$ips")" = 2 ] && break
    sleep 0.1
done
[ "$(grep -c '^198\.18\.0\.' <<<"$ips")" = 2 ] || fail "EndpointSlice lists '$ips', not 2 pod IPs in 198.18.0.0/24"
pod_ips=$(k get pods -l app=backend -o jsonpath='{range .items[*]}{.status.podIP}{"\n"}{end}' | sort)
[ "$ips" = "$pod_ips" ] || fail "EndpointSlice IPs ($ips) differ from the pod IPs ($pod_ips)"
lap "EndpointSlice lists both pod IPs"
echo "backend pod IPs: $(tr '\n' ' ' <<<"$ips")"

# host-only: the pods have the on-link route and nothing else, and the host does not forward
[ "$(sysctl -n net.ipv4.ip_forward)" = 0 ] || fail "net.ipv4.ip_forward is not 0"
netns=$(find "$D/containerd/state/io.containerd.grpc.v1.cri/netns" -type f 2>/dev/null || true)
[ -n "$netns" ] || fail "no pod network namespace under $D/containerd/state"
for n in $netns; do
    routes=$(nsenter --net="$n" ip -4 route show | grep -v '^198\.18\.0\.0/24 dev eth0 ' || true)
    [ -z "$routes" ] || fail "pod netns $n has routes besides 198.18.0.0/24: $routes"
done
lap "pods: only the on-link route, no forwarding"

servers=""
for ip in $ips; do servers+="        server $ip:8080;"$'\n'; done
k apply -f - >/dev/null <<YAML
apiVersion: v1
kind: ConfigMap
metadata: {name: nginx}
data:
  nginx.conf: |
    worker_processes 1;
    pid /tmp/nginx.pid;
    error_log stderr notice;
    events { worker_connections 256; }
    http {
      access_log /dev/stdout;
      upstream backends {
$servers      }
      server {
        listen 127.0.0.1:$PORT reuseport;
        location / {
          proxy_pass http://backends;
          add_header X-Upstream \$upstream_addr always;
        }
      }
    }
---
apiVersion: v1
kind: Pod
metadata: {name: nginx, labels: {app: nginx}}
spec:
  hostNetwork: true
  terminationGracePeriodSeconds: 5
  containers:
  - name: nginx
    image: $NGINX_IMAGE
    imagePullPolicy: Never
    args: [-c, /config/nginx.conf, -g, "daemon off;"]
    volumeMounts: [{name: config, mountPath: /config}]
    readinessProbe:
      exec: {command: [wget, -q, -O, /dev/null, "http://127.0.0.1:$PORT/"]}
      periodSeconds: 1
  volumes:
  - name: config
    configMap: {name: nginx}
YAML
k wait --for=condition=Ready pod/nginx --timeout=120s >/dev/null || fail "nginx pod not Ready"
lap "nginx hostNetwork pod Ready"

declare -A seen=()
for i in $(seq 1 20); do
    out=$(curl -s -o /dev/null -D - "http://127.0.0.1:$PORT/" | tr -d '\r' || true)
    code=$(head -1 <<<"$out" | awk '{ print $2 }')
    up=$(sed -n 's/^[Xx]-[Uu]pstream: //p' <<<"$out")
    [ "$code" = 200 ] || fail "request $i: status '$code' (want 200)"
    [ -n "$up" ] || fail "request $i: no X-Upstream header"
    seen[$up]=1
done
[ "${#seen[@]}" = 2 ] || fail "answers came from ${!seen[*]}, not from both backends"
lap "20 x 200 from the host, both backends"
echo "upstreams that answered: ${!seen[*]}"

# the platform's reload path: exec into the pod, rewrite the config with busybox sed, reload
out=$(k exec nginx -- sh -c "sed 's/worker_connections 256/worker_connections 512/' /config/nginx.conf >/tmp/nginx.conf && nginx -c /tmp/nginx.conf -s reload" 2>&1) \
    || fail "exec + reload failed: $out"
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/")
[ "$code" = 200 ] || fail "after the reload: status $code"
lap "exec: sed + nginx -s reload, then 200"

[ "$(k logs nginx | grep -c '"GET / HTTP/1.1" 200')" -ge 20 ] || fail "the pod logs lack nginx's 20 access-log lines"
lap "pod logs carry the access log"

# port-forward through the API server and the kubelet to a bridge-mode pod
pod=$(k get pods -l app=backend -o jsonpath='{.items[0].metadata.name}')
"$KUBECTL" -n "$NS" port-forward "pod/$pod" "$((PORT + 1)):8080" >/dev/null 2>&1 &
pf=$!
code=000
for _ in $(seq 1 50); do
    code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$((PORT + 1))/" || true)
    [ "$code" = 200 ] && break
    sleep 0.1
done
kill "$pf" 2>/dev/null || true
wait "$pf" 2>/dev/null || true
[ "$code" = 200 ] || fail "port-forward to $pod: status $code"
lap "port-forward to a backend pod, 200"

"$KUBECTL" delete namespace "$NS" --wait=true --timeout=120s >/dev/null
lap "namespace deleted (pods gone)"
trap - EXIT
printf '%-44s %8s s\n' "smoke total" "$(secs $(($(now_ms) - T0)))"
echo "SMOKE OK"
