#!/usr/bin/env bash
# k8s/load-images.sh [TAR]...: (re)imports OCI image tarballs into the containerd of each node of
# the running local test cluster (default: every target/image/*.tar), so that
# `make image && k8s/load-images.sh` puts a changed binary under the same image name on both
# nodes. Pods already running keep their old image; pods created afterwards (imagePullPolicy:
# Never) get the new one.
# Env: PROXYBENCH_K8S_DIR (the cluster's state dir), PROXYBENCH_IMAGE_DIR (target/image).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
D=${PROXYBENCH_K8S_DIR:-$HOME/.cache/proxybench/k8s-run}
IMAGE_DIR=${PROXYBENCH_IMAGE_DIR:-$here/../target/image}
SOCKS=("$D/containerd/containerd.sock" "$D/node2/containerd/containerd.sock")
for s in "${SOCKS[@]}"; do
    [ -S "$s" ] || { echo "k8s/load-images.sh: no cluster running ($s absent); k8s/up.sh first" >&2; exit 1; }
done
[ $# -gt 0 ] || set -- "$IMAGE_DIR"/*.tar
for t in "$@"; do
    [ -e "$t" ] || { echo "k8s/load-images.sh: $t: no such image tarball (make image)" >&2; exit 1; }
    for s in "${SOCKS[@]}"; do
        ctr --address "$s" -n k8s.io images import "$t" >/dev/null
    done
    echo "imported $t into both nodes"
done
ctr --address "${SOCKS[0]}" -n k8s.io images ls -q | grep -v '^sha256:'
