#!/usr/bin/env bash
# k8s/image.sh [proxybench|nginx|haproxy|caddy|pause|metrics-server]...: OCI image tarballs built
# without Docker.
#
# Each image is one hand-made layer (a reproducible tar of a small root filesystem) in an OCI
# image layout, packed as a tarball that `ctr -n k8s.io images import`, `kind load image-archive`
# and `skopeo copy oci-archive:...` all read. Output: target/image/<name>.tar, and
# target/image/names (`<name> <image reference>` per line). With no argument it builds all but
# metrics-server:
#
#  - proxybench: target/release/proxybench (stripped) with its `ldd` libraries, entrypoint
#    /proxybench, named localhost/proxybench:<crate version> (the git revision is in the image's
#    org.opencontainers.image.revision label). PROXYBENCH_IMAGE_BIN picks another binary (a
#    static musl binary goes in without libraries: `make image-musl`), PROXYBENCH_IMAGE_TAG
#    another tag.
#  - nginx: Debian's /usr/sbin/nginx with its libraries and mime.types, plus busybox-static
#    (/bin/sh, sed, cat, wget, kill, sleep and the other applets) so that the platform code can exec
#    into the pod, write a config and run `nginx -s reload`. Config /etc/nginx/nginx.conf, entrypoint
#    /usr/sbin/nginx -g 'daemon off;', stop signal SIGQUIT (nginx's graceful stop). Named
#    localhost/proxybench-nginx:<nginx version>.
#  - haproxy: Debian's /usr/sbin/haproxy with its libraries, plus busybox-static as above (the
#    platform's reload script waits for the master and sends it SIGUSR2). Entrypoint
#    /usr/sbin/haproxy -W -db -f /etc/haproxy/haproxy.cfg, stop signal SIGUSR1 (HAProxy's soft
#    stop). Named localhost/proxybench-haproxy:<haproxy version>.
#  - caddy: Debian's /usr/bin/caddy with its libraries, plus busybox-static as above (the reload
#    runs `caddy reload` against the admin API). Entrypoint /usr/bin/caddy run --config
#    /etc/caddy/caddy.json, stop signal SIGTERM (Caddy's graceful stop). Named
#    localhost/proxybench-caddy:<caddy version>.
#  - pause: a static pause binary (the pod sandbox), localhost/pause:1.
#  - metrics-server (not in the default set; k8s/cluster.sh up makes it when absent): the static
#    metrics-server binary k8s/build.sh built from its Go module, entrypoint /metrics-server,
#    named localhost/metrics-server:<version> (METRICS_SERVER_VERSION, v0.8.0).
#
# Env: PROXYBENCH_IMAGE_DIR (target/image), PROXYBENCH_IMAGE_BIN, PROXYBENCH_IMAGE_TAG,
# CARGO_TARGET_DIR, METRICS_SERVER_VERSION, K8S_CACHE.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
OUT=${PROXYBENCH_IMAGE_DIR:-$repo/target/image}
TARGET=${CARGO_TARGET_DIR:-$repo/target}
WORK=$OUT/build
DL_CACHE=${PROXYBENCH_DL_CACHE:-$HOME/.cache/proxybench/debs}
EPOCH=1970-01-01T00:00:00Z

log() { printf '[image %s] %s\n' "$(date +%T)" "$*" >&2; }
die() { printf 'k8s/image.sh: %s\n' "$*" >&2; exit 1; }

sha() { sha256sum "$1" | cut -d' ' -f1; }
size() { stat -c %s "$1"; }

# copy_with_libs ROOTFS FILE [DEST]: FILE into ROOTFS (at DEST, default its own path) plus every
# shared library `ldd` names, at the paths the dynamic loader looks them up.
copy_with_libs() {
    local root=$1 file=$2 dest=${3:-$2} lib
    install -D -m 0755 "$file" "$root$dest"
    if ldd "$file" >/dev/null 2>&1; then
        for lib in $(ldd "$file" | awk '/=> \// { print $3 } /^[[:space:]]*\// { print $1 }'); do
            [ -e "$root$lib" ] || install -D -m 0755 "$(readlink -f "$lib")" "$root$lib"
        done
    fi
}

# base ROOTFS: the few files every image needs (users for nginx's workers, /tmp).
base() {
    local root=$1
    rm -rf "$root"
    mkdir -p "$root"/{etc,tmp,dev,proc,sys,run}
    chmod 1777 "$root/tmp"
    cat >"$root/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/bin/sh
www-data:x:33:33:www-data:/var/www:/usr/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin
EOF
    cat >"$root/etc/group" <<'EOF'
root:x:0:
www-data:x:33:
nogroup:x:65534:
EOF
    printf 'passwd: files\ngroup: files\nhosts: files dns\n' >"$root/etc/nsswitch.conf"
}

# pack NAME REF ROOTFS CONFIG: ROOTFS as a one-layer OCI image REF in $OUT/NAME.tar. CONFIG is the
# JSON object of the image config's "config" field (entrypoint, env, stop signal, labels).
pack() {
    local name=$1 ref=$2 root=$3 config=$4
    local dir=$WORK/$name-oci
    rm -rf "$dir"
    mkdir -p "$dir/blobs/sha256"
    # a reproducible layer: sorted, owned by root, fixed times
    tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner --format=posix \
        --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
        -C "$root" -cf "$WORK/$name-layer.tar" .
    local diff_id
    diff_id=$(sha "$WORK/$name-layer.tar")
    gzip -n -1 -c "$WORK/$name-layer.tar" >"$WORK/$name-layer.tar.gz"
    rm -f "$WORK/$name-layer.tar"
    local layer layer_size
    layer=$(sha "$WORK/$name-layer.tar.gz")
    layer_size=$(size "$WORK/$name-layer.tar.gz")
    mv "$WORK/$name-layer.tar.gz" "$dir/blobs/sha256/$layer"

    printf '{"created":"%s","architecture":"amd64","os":"linux","config":%s,"rootfs":{"type":"layers","diff_ids":["sha256:%s"]},"history":[{"created":"%s","created_by":"k8s/image.sh"}]}' \
        "$EPOCH" "$config" "$diff_id" "$EPOCH" >"$WORK/$name-config.json"
    local cfg cfg_size
    cfg=$(sha "$WORK/$name-config.json")
    cfg_size=$(size "$WORK/$name-config.json")
    mv "$WORK/$name-config.json" "$dir/blobs/sha256/$cfg"

    printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"sha256:%s","size":%s}]}' \
        "$cfg" "$cfg_size" "$layer" "$layer_size" >"$WORK/$name-manifest.json"
    local man man_size
    man=$(sha "$WORK/$name-manifest.json")
    man_size=$(size "$WORK/$name-manifest.json")
    mv "$WORK/$name-manifest.json" "$dir/blobs/sha256/$man"

    printf '{"imageLayoutVersion":"1.0.0"}' >"$dir/oci-layout"
    printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"platform":{"architecture":"amd64","os":"linux"},"annotations":{"io.containerd.image.name":"%s","org.opencontainers.image.ref.name":"%s"}}]}' \
        "$man" "$man_size" "$ref" "${ref##*:}" >"$dir/index.json"
    tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$dir" -cf "$OUT/$name.tar.tmp" oci-layout index.json blobs
    mv "$OUT/$name.tar.tmp" "$OUT/$name.tar"
    rm -rf "$dir"
    # names: one line per image, the newest build wins
    touch "$OUT/names"
    { grep -v "^$name " "$OUT/names" || true; echo "$name $ref"; } >"$OUT/names.tmp"
    mv "$OUT/names.tmp" "$OUT/names"
    log "$ref -> $OUT/$name.tar ($(($(size "$OUT/$name.tar") / 1024)) KiB, manifest sha256:$man)"
}

PATH_ENV='"Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]'

image_proxybench() {
    local bin=${PROXYBENCH_IMAGE_BIN:-$TARGET/release/proxybench}
    [ -x "$bin" ] || die "$bin is missing: build it first (cargo build --release -p proxybench-cli, or make image)"
    local version rev root=$WORK/proxybench-rootfs
    version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$repo/Cargo.toml" | head -1)
    [ -n "$version" ] || die "no version in $repo/Cargo.toml"
    rev=$(git -C "$repo" describe --always --dirty 2>/dev/null || echo unknown)
    base "$root"
    copy_with_libs "$root" "$bin" /proxybench
    strip "$root/proxybench" 2>/dev/null || true
    pack proxybench "localhost/proxybench:${PROXYBENCH_IMAGE_TAG:-$version}" "$root" \
        "{\"Entrypoint\":[\"/proxybench\"],$PATH_ENV,\"WorkingDir\":\"/\",\"Labels\":{\"org.opencontainers.image.version\":\"$version\",\"org.opencontainers.image.revision\":\"$rev\"}}"
}

busybox_deb() {
    mkdir -p "$DL_CACHE"
    local deb
    deb=$(ls "$DL_CACHE"/busybox-static_*.deb 2>/dev/null | tail -1 || true)
    if [ -z "$deb" ]; then
        log "apt-get download busybox-static (not installed, only unpacked into the image)"
        (cd "$DL_CACHE" && { apt-get download -q busybox-static >/dev/null 2>&1 \
            || { apt-get update -qq && apt-get download -q busybox-static >/dev/null; }; }) \
            || die "apt-get download busybox-static failed"
        deb=$(ls "$DL_CACHE"/busybox-static_*.deb | tail -1)
    fi
    echo "$deb"
}

# with_busybox ROOTFS: busybox-static, unpacked (not installed): a shell and the tools an exec
# needs (sh, sed, cat, wget, kill, sleep, usleep, tr, grep), linked where the image has no file.
with_busybox() {
    local root=$1 deb bb a t
    deb=$(busybox_deb)
    bb=$WORK/busybox-deb
    rm -rf "$bb"
    dpkg-deb -x "$deb" "$bb"
    install -D -m 0755 "$bb/bin/busybox" "$root/bin/busybox"
    for a in $("$bb/bin/busybox" --list); do
        [ -e "$root/bin/$a" ] || [ -e "$root/usr/sbin/$a" ] || [ -e "$root/usr/bin/$a" ] || ln -s busybox "$root/bin/$a"
    done
    rm -rf "$bb"
    for t in sh sed cat wget kill sleep usleep tr grep; do [ -e "$root/bin/$t" ] || die "busybox has no $t applet"; done
}

image_nginx() {
    local nginx=/usr/sbin/nginx root=$WORK/nginx-rootfs version
    [ -x "$nginx" ] || die "$nginx is missing (apt-get install nginx)"
    version=$("$nginx" -v 2>&1 | sed -n 's|.*nginx/\([0-9.]*\).*|\1|p')
    [ -n "$version" ] || die "cannot read the version of $nginx"
    base "$root"
    copy_with_libs "$root" "$nginx"
    # dynamic modules, when the build has any (Debian's nginx 1.22 core has none)
    if [ -d /usr/lib/nginx/modules ]; then
        mkdir -p "$root/usr/lib/nginx"
        cp -a /usr/lib/nginx/modules "$root/usr/lib/nginx/"
        for m in /usr/lib/nginx/modules/*.so; do [ -e "$m" ] && copy_with_libs "$root" "$m"; done
    fi
    install -D -m 0644 /etc/nginx/mime.types "$root/etc/nginx/mime.types"
    mkdir -p "$root/var/lib/nginx" "$root/var/log/nginx" "$root/usr/share/nginx/html" "$root/run"
    # A config that starts: the platform replaces it (exec, then `nginx -s reload`).
    cat >"$root/etc/nginx/nginx.conf" <<'EOF'
# proxybench-nginx default: the platform writes its own config here and reloads
worker_processes 1;
pid /run/nginx.pid;
error_log stderr notice;
events { worker_connections 1024; }
http {
    include /etc/nginx/mime.types;
    access_log /dev/stdout;
    server {
        listen 127.0.0.1:8080 reuseport;
        location / { return 200 "proxybench-nginx\n"; }
    }
}
EOF
    with_busybox "$root"
    pack nginx "localhost/proxybench-nginx:$version" "$root" \
        "{\"Entrypoint\":[\"/usr/sbin/nginx\"],\"Cmd\":[\"-g\",\"daemon off;\"],$PATH_ENV,\"WorkingDir\":\"/\",\"StopSignal\":\"SIGQUIT\",\"Labels\":{\"org.opencontainers.image.version\":\"$version\"}}"
}

image_haproxy() {
    local haproxy=/usr/sbin/haproxy root=$WORK/haproxy-rootfs version
    [ -x "$haproxy" ] || die "$haproxy is missing (apt-get install haproxy)"
    version=$("$haproxy" -v 2>&1 | sed -n 's/^HAProxy version \([0-9.]*\).*/\1/p')
    [ -n "$version" ] || die "cannot read the version of $haproxy"
    base "$root"
    copy_with_libs "$root" "$haproxy"
    mkdir -p "$root/etc/haproxy" "$root/run/haproxy" "$root/var/lib/haproxy"
    # A config that starts: the platform runs its own (and reloads with SIGUSR2).
    cat >"$root/etc/haproxy/haproxy.cfg" <<'EOF'
# proxybench-haproxy default: the platform runs its own config
defaults
    mode http
    timeout connect 5s
    timeout client 30s
    timeout server 30s
frontend default
    bind 127.0.0.1:8080
    http-request return status 200 content-type text/plain string "proxybench-haproxy\n"
EOF
    with_busybox "$root"
    pack haproxy "localhost/proxybench-haproxy:$version" "$root" \
        "{\"Entrypoint\":[\"/usr/sbin/haproxy\"],\"Cmd\":[\"-W\",\"-db\",\"-f\",\"/etc/haproxy/haproxy.cfg\"],$PATH_ENV,\"WorkingDir\":\"/\",\"StopSignal\":\"SIGUSR1\",\"Labels\":{\"org.opencontainers.image.version\":\"$version\"}}"
}

image_caddy() {
    local caddy=/usr/bin/caddy root=$WORK/caddy-rootfs version
    [ -x "$caddy" ] || die "$caddy is missing (apt-get install caddy)"
    version=$("$caddy" version 2>/dev/null | sed -n 's/^v\{0,1\}\([0-9][0-9.]*\).*/\1/p' | head -1)
    [ -n "$version" ] || die "cannot read the version of $caddy"
    base "$root"
    copy_with_libs "$root" "$caddy"
    mkdir -p "$root/etc/caddy" "$root/root"
    printf '%s\n' '{"apps":{"http":{"servers":{"default":{"listen":["127.0.0.1:8080"],"routes":[{"handle":[{"handler":"static_response","body":"proxybench-caddy\n"}]}]}}}}}' \
        >"$root/etc/caddy/caddy.json"
    with_busybox "$root"
    pack caddy "localhost/proxybench-caddy:$version" "$root" \
        "{\"Entrypoint\":[\"/usr/bin/caddy\"],\"Cmd\":[\"run\",\"--config\",\"/etc/caddy/caddy.json\"],$PATH_ENV,\"WorkingDir\":\"/\",\"StopSignal\":\"SIGTERM\",\"Labels\":{\"org.opencontainers.image.version\":\"$version\"}}"
}

image_pause() {
    local root=$WORK/pause-rootfs
    command -v gcc >/dev/null 2>&1 || die "gcc is missing (apt-get install gcc libc6-dev)"
    base "$root"
    cat >"$WORK/pause.c" <<'EOF'
/* pause: the pod sandbox's process. It sleeps until SIGINT/SIGTERM and reaps children. */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
static void quit(int sig) { (void)sig; _exit(0); }
static void reap(int sig) { (void)sig; while (waitpid(-1, NULL, WNOHANG) > 0) {} }
int main(void) {
    struct sigaction q = {.sa_handler = quit}, r = {.sa_handler = reap, .sa_flags = SA_NOCLDSTOP};
    sigaction(SIGINT, &q, NULL);
    sigaction(SIGTERM, &q, NULL);
    sigaction(SIGCHLD, &r, NULL);
    for (;;) pause();
}
EOF
    gcc -Os -static -s -o "$root/pause" "$WORK/pause.c" || die "gcc -static failed (apt-get install libc6-dev)"
    rm -f "$WORK/pause.c"
    pack pause localhost/pause:1 "$root" "{\"Entrypoint\":[\"/pause\"],$PATH_ENV,\"WorkingDir\":\"/\"}"
}

image_metrics_server() {
    local version=${METRICS_SERVER_VERSION:-v0.8.0} root=$WORK/metrics-server-rootfs
    local bin=${K8S_CACHE:-$HOME/.cache/proxybench/k8s}/metrics-server-$version/metrics-server
    [ -x "$bin" ] || die "$bin is missing: run k8s/build.sh (make k8s-build) first"
    base "$root"
    install -m 0755 "$bin" "$root/metrics-server"
    pack metrics-server "localhost/metrics-server:$version" "$root" \
        "{\"Entrypoint\":[\"/metrics-server\"],$PATH_ENV,\"WorkingDir\":\"/\",\"User\":\"65534\",\"Labels\":{\"org.opencontainers.image.version\":\"$version\",\"org.opencontainers.image.source\":\"sigs.k8s.io/metrics-server\"}}"
}

mkdir -p "$OUT" "$WORK"
[ $# = 0 ] && set -- proxybench nginx haproxy caddy pause
for i in "$@"; do
    case "$i" in
    proxybench) image_proxybench ;;
    nginx) image_nginx ;;
    haproxy) image_haproxy ;;
    caddy) image_caddy ;;
    pause) image_pause ;;
    metrics-server) image_metrics_server ;;
    *) echo "usage: k8s/image.sh [proxybench|nginx|haproxy|caddy|pause|metrics-server]..." >&2; exit 2 ;;
    esac
done
rm -rf "$WORK"
cat "$OUT/names"
