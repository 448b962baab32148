#!/usr/bin/env bash
# k8s/status.sh: k8s/cluster.sh status (the local test cluster; see that script and docs/test-cluster.md).
exec "$(dirname "$0")/cluster.sh" status "$@"
