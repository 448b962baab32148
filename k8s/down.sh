#!/usr/bin/env bash
# k8s/down.sh: k8s/cluster.sh down (the local test cluster; see that script and docs/test-cluster.md).
exec "$(dirname "$0")/cluster.sh" down "$@"
