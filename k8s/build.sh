#!/usr/bin/env bash
# k8s/build.sh: what the local test cluster needs, built or installed once.
#
#  - Debian packages, when absent: etcd-server, containerd (+runc), containernetworking-plugins,
#    iptables (kube-proxy's mode), nftables (`nft`: `down` removes the netfilter tables the
#    cluster made, and k8s/check-clean.sh proves it), util-linux (unshare, nsenter: the second
#    node's namespaces), openssl, curl, iproute2, gcc + libc6-dev (k8s/image.sh's static pause binary).
#  - kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kube-proxy and kubectl
#    $K8S_VERSION, built from the Go module k8s.io/kubernetes and cached under $K8S_CACHE/$K8S_VERSION
#    (a warm run only checks the cache; a cache that lacks some binaries gets only those built).
#    The module cannot be built with `go install` (its `replace` directives point into a staging/
#    tree that the module zip does not carry), so the build copies the module out of the module
#    cache, drops go.work and the replace block, and pins every staging module to its published
#    v0.X.Y tag (docs/test-cluster.md, "Building").
#  - metrics-server $METRICS_SERVER_VERSION, built from its Go module sigs.k8s.io/metrics-server
#    (`go install`, it has no replace directives) the same way, cached under
#    $K8S_CACHE/metrics-server-$METRICS_SERVER_VERSION. k8s/image.sh packs it as an image.
#
#  - the Gateway API CRDs (standard channel) of sigs.k8s.io/gateway-api $GATEWAY_API_VERSION, from
#    its Go module, into $K8S_CACHE/gateway-api-$GATEWAY_API_VERSION/standard.yaml.
# Env: K8S_VERSION (v1.34.4), METRICS_SERVER_VERSION (v0.8.0), GATEWAY_API_VERSION (v1.6.3),
# K8S_CACHE (~/.cache/proxybench/k8s),
# K8S_SKIP_APT=1 skips the package check. Go: `go` on PATH, else /usr/local/go/bin/go (only needed
# when the cache is cold).
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-v1.34.4}
K8S_CACHE=${K8S_CACHE:-$HOME/.cache/proxybench/k8s}
OUT=$K8S_CACHE/$K8S_VERSION
BINARIES=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl)
METRICS_SERVER_VERSION=${METRICS_SERVER_VERSION:-v0.8.0}
MS_OUT=$K8S_CACHE/metrics-server-$METRICS_SERVER_VERSION
GATEWAY_API_VERSION=${GATEWAY_API_VERSION:-v1.6.3}
GW_OUT=$K8S_CACHE/gateway-api-$GATEWAY_API_VERSION
work="" # the build's scratch directory, removed on exit

log() { printf '[k8s-build %s] %s\n' "$(date +%T)" "$*" >&2; }
die() { printf 'k8s/build.sh: %s\n' "$*" >&2; exit 1; }

SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo

# --- Debian packages ---------------------------------------------------------------------------
apt_install() {
    local need=()
    command -v etcd >/dev/null 2>&1 || need+=(etcd-server)
    command -v containerd >/dev/null 2>&1 || need+=(containerd)
    command -v runc >/dev/null 2>&1 || need+=(runc)
    [ -x /usr/lib/cni/bridge ] && [ -x /usr/lib/cni/host-local ] && [ -x /usr/lib/cni/loopback ] \
        || need+=(containernetworking-plugins)
    command -v openssl >/dev/null 2>&1 || need+=(openssl)
    command -v curl >/dev/null 2>&1 || need+=(curl ca-certificates)
    # k8s/image.sh compiles a static pause binary
    command -v gcc >/dev/null 2>&1 || need+=(gcc)
    [ -n "$(ls /usr/lib/*/libc.a 2>/dev/null)" ] || need+=(libc6-dev)
    command -v ip >/dev/null 2>&1 || need+=(iproute2)
    command -v iptables-restore >/dev/null 2>&1 || need+=(iptables)
    command -v nft >/dev/null 2>&1 || need+=(nftables)
    command -v unshare >/dev/null 2>&1 && command -v nsenter >/dev/null 2>&1 || need+=(util-linux)
    [ ${#need[@]} = 0 ] && return 0
    log "installing from Debian packages: ${need[*]}"
    # A package's postinst must not start a daemon (etcd would take the host's port 2379): a
    # policy-rc.d that refuses every start, present only for the install, unless one exists.
    local policy=/usr/sbin/policy-rc.d made_policy=""
    if [ ! -e $policy ]; then
        printf '#!/bin/sh\nexit 101\n' | $SUDO tee $policy >/dev/null
        $SUDO chmod +x $policy
        made_policy=1
    fi
    local apt=(env DEBIAN_FRONTEND=noninteractive apt-get)
    [ -n "$SUDO" ] && apt=("$SUDO" "${apt[@]}")
    local rc=0
    "${apt[@]}" install -y -qq --no-install-recommends "${need[@]}" >/dev/null 2>&1 \
        || { "${apt[@]}" update -qq && "${apt[@]}" install -y -qq --no-install-recommends "${need[@]}"; } \
        || rc=$?
    [ -n "$made_policy" ] && $SUDO rm -f $policy
    [ $rc = 0 ] || die "apt-get install ${need[*]} failed"
    # Packages that ship a daemon must not leave one running.
    for d in etcd containerd; do
        if pgrep -x "$d" >/dev/null 2>&1 && [ -n "$made_policy" ]; then
            log "warning: a $d process is running after the install (not started by k8s/build.sh?)"
        fi
    done
}

# --- the Kubernetes binaries -------------------------------------------------------------------
# missing: the binaries the cache lacks (all of them without the .complete marker)
missing() {
    local b
    for b in "${BINARIES[@]}"; do
        [ -e "$OUT/.complete" ] && [ -x "$OUT/$b" ] || echo "$b"
    done
}

find_go() {
    if command -v go >/dev/null 2>&1; then command -v go
    elif [ -x /usr/local/go/bin/go ]; then echo /usr/local/go/bin/go
    else die "go is not installed (needs Go >= 1.24 at /usr/local/go/bin or on PATH) to build $1 once"
    fi
}

scratch() {
    [ -n "$work" ] && return 0
    work=$(mktemp -d "${TMPDIR:-/tmp}/proxybench-k8s-build.XXXXXX")
    trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
}

# build_kube BINARY...: the named binaries of k8s.io/kubernetes, into $OUT.
build_kube() {
    local go
    go=$(find_go "Kubernetes $K8S_VERSION")
    local cores
    cores=$(nproc)
    export GOFLAGS="${GOFLAGS:+$GOFLAGS }-p=$cores" CGO_ENABLED=0
    local t0=$SECONDS
    scratch

    log "downloading k8s.io/kubernetes@$K8S_VERSION (module proxy)"
    local dir
    dir=$(cd "$work" && GOFLAGS=-mod=mod "$go" mod download -json "k8s.io/kubernetes@$K8S_VERSION" \
        | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
    [ -n "$dir" ] && [ -d "$dir" ] || die "go mod download k8s.io/kubernetes@$K8S_VERSION gave no module directory"
    cp -r "$dir" "$work/src"
    chmod -R u+w "$work/src"
    cd "$work/src"
    # The surgery: no workspace, no replace block, staging modules at their published tag.
    local staging=v0.${K8S_VERSION#v1.}
    rm -f go.work go.work.sum
    sed -i '/^replace (/,/^)/d; /^replace k8s.io\//d' go.mod
    sed -i -E "s#^(\s*k8s\.io/[A-Za-z0-9._-]+) v0\.0\.0\$#\1 $staging#; s#^(\s*k8s\.io/[A-Za-z0-9._-]+) v0\.0\.0 // indirect\$#\1 $staging // indirect#" go.mod
    grep -Eq ' v0\.0\.0( |$)' go.mod && die "go.mod still requires a v0.0.0 module after the rewrite: $(grep ' v0\.0\.0' go.mod | head -3)"
    log "module prepared ($((SECONDS - t0)) s); compiling $* (about 6 min cold on 2 cores, 20 s warm)"

    local major minor date ldf=""
    major=${K8S_VERSION#v}; major=${major%%.*}
    minor=${K8S_VERSION#v*.}; minor=${minor%%.*}
    date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
    for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
        ldf+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
        ldf+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$date"
    done
    mkdir -p "$work/bin"
    local pkgs=() b
    for b in "$@"; do pkgs+=("./cmd/$b"); done
    "$go" build -mod=mod -trimpath -ldflags="-s -w$ldf" -o "$work/bin/" "${pkgs[@]}"
    mkdir -p "$OUT"
    for b in "$@"; do
        mv "$work/bin/$b" "$OUT/$b.tmp" && mv "$OUT/$b.tmp" "$OUT/$b"
    done
    for b in "${BINARIES[@]}"; do [ -x "$OUT/$b" ] || die "$OUT/$b is missing after the build"; done
    date -u +%FT%TZ >"$OUT/.complete"
    cd /
    log "built $* in $((SECONDS - t0)) s into $OUT"
}

# metrics-server from its own module: no replace directives, so `go install module@version`
# works; the version goes where its Makefile puts it (client-go's version package).
build_metrics_server() {
    local go t0=$SECONDS
    go=$(find_go "metrics-server $METRICS_SERVER_VERSION")
    scratch
    log "building sigs.k8s.io/metrics-server@$METRICS_SERVER_VERSION (about 2 min cold on 2 cores)"
    local pkg=k8s.io/client-go/pkg/version date
    date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
    mkdir -p "$work/ms-bin" "$MS_OUT"
    (cd "$work" && GOBIN="$work/ms-bin" CGO_ENABLED=0 GOFLAGS="${GOFLAGS:+$GOFLAGS }-p=$(nproc)" \
        "$go" install -trimpath \
        -ldflags="-s -w -X $pkg.gitVersion=$METRICS_SERVER_VERSION -X $pkg.gitTreeState=clean -X $pkg.buildDate=$date" \
        "sigs.k8s.io/metrics-server/cmd/metrics-server@$METRICS_SERVER_VERSION") \
        || die "go install sigs.k8s.io/metrics-server/cmd/metrics-server@$METRICS_SERVER_VERSION failed"
    mv "$work/ms-bin/metrics-server" "$MS_OUT/metrics-server.tmp"
    mv "$MS_OUT/metrics-server.tmp" "$MS_OUT/metrics-server"
    date -u +%FT%TZ >"$MS_OUT/.complete"
    log "built metrics-server in $((SECONDS - t0)) s into $MS_OUT"
}

# The Gateway API CRDs (standard channel) from the sigs.k8s.io/gateway-api module's own
# config/crd/standard, one file that `cluster.sh up` applies.
fetch_gateway_api() {
    local go dir
    go=$(find_go "gateway-api $GATEWAY_API_VERSION")
    scratch
    dir=$(cd "$work" && "$go" mod download -json "sigs.k8s.io/gateway-api@$GATEWAY_API_VERSION" |
        sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p') || true
    [ -n "$dir" ] && [ -d "$dir/config/crd/standard" ] ||
        die "go mod download sigs.k8s.io/gateway-api@$GATEWAY_API_VERSION gave no config/crd/standard"
    mkdir -p "$GW_OUT"
    local f
    for f in "$dir"/config/crd/standard/*.yaml; do
        printf -- '---\n'
        cat "$f"
    done >"$GW_OUT/standard.yaml.tmp"
    mv "$GW_OUT/standard.yaml.tmp" "$GW_OUT/standard.yaml"
    date -u +%FT%TZ >"$GW_OUT/.complete"
    log "Gateway API $GATEWAY_API_VERSION CRDs into $GW_OUT/standard.yaml"
}

[ "${K8S_SKIP_APT:-}" = 1 ] || apt_install
todo=$(missing | tr '\n' ' ')
if [ -z "${todo// /}" ]; then
    log "cached: $OUT (${BINARIES[*]})"
else
    # shellcheck disable=SC2086
    build_kube $todo
fi
if [ -e "$MS_OUT/.complete" ] && [ -x "$MS_OUT/metrics-server" ]; then
    log "cached: $MS_OUT/metrics-server"
else
    build_metrics_server
fi
if [ -e "$GW_OUT/.complete" ] && [ -s "$GW_OUT/standard.yaml" ]; then
    log "cached: $GW_OUT/standard.yaml"
else
    fetch_gateway_api
fi
"$OUT/kubelet" --version >&2
