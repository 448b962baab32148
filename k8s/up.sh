#!/usr/bin/env bash
# k8s/up.sh: k8s/cluster.sh up (the local test cluster; see that script and docs/test-cluster.md).
exec "$(dirname "$0")/cluster.sh" up "$@"
