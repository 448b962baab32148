//! What every test against the shared test cluster needs: a connection from
//! `PROXYBENCH_TEST_KUBECONFIG` (a clear failure when unset, never a silent pass), a namespace of
//! its own that is deleted when the test ends, pass or fail, and the cluster's images.

#![allow(dead_code)]

use proxybench_k8s::{namespace_name, Cluster};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The nginx image of the test cluster (busybox sh in /bin).
pub const NGINX_IMAGE: &str = "localhost/proxybench-nginx:1.22.1";

/// The kubeconfig of the test cluster.
pub fn kubeconfig() -> PathBuf {
    match std::env::var_os("PROXYBENCH_TEST_KUBECONFIG") {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => panic!(
            "PROXYBENCH_TEST_KUBECONFIG is unset: these tests need the test cluster \
             (make test-k8s sets it; or point it at the kubeconfig make k8s-up printed)"
        ),
    }
}

/// A connection to the test cluster.
pub fn cluster() -> Cluster {
    let p = kubeconfig();
    Cluster::connect(Some(&p), None).unwrap_or_else(|e| panic!("{e}"))
}

/// A namespace of the test's own (`kube-TAG-...`), deleted on drop.
pub struct Ns {
    pub cluster: Cluster,
    pub name: String,
}

impl Ns {
    pub fn new(tag: &str) -> Ns {
        let cluster = cluster();
        let name = namespace_name(&format!("kube-{tag}"));
        cluster
            .create_namespace(&name, &[("proxybench/test", tag)])
            .unwrap_or_else(|e| panic!("{e}"));
        Ns { cluster, name }
    }
}

impl Drop for Ns {
    fn drop(&mut self) {
        if let Err(e) = self
            .cluster
            .delete_namespace(&self.name, Duration::from_secs(120))
        {
            eprintln!("cleanup: {e}");
        }
    }
}

/// Writes `text` to `dir/name` and returns the path.
pub fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// A Deployment manifest of `replicas` busybox pods (bridge mode) labelled `app=NAME`, running
/// `script` under /bin/sh, Ready when `ready_cmd` succeeds (checked every second).
pub fn shell_deployment(
    name: &str,
    replicas: u32,
    script: &str,
    ready_cmd: &str,
    grace_s: u32,
) -> String {
    let script: String = script.lines().map(|l| format!("          {l}\n")).collect();
    let ready = ready_cmd.replace('\'', "''");
    format!(
        "apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
spec:
  replicas: {replicas}
  selector:
    matchLabels: {{app: {name}}}
  template:
    metadata:
      labels: {{app: {name}}}
    spec:
      terminationGracePeriodSeconds: {grace_s}
      automountServiceAccountToken: false
      containers:
      - name: main
        image: {NGINX_IMAGE}
        imagePullPolicy: Never
        command:
        - /bin/sh
        - -c
        - |
{script}        readinessProbe:
          exec:
            command: ['/bin/sh', '-c', '{ready}']
          periodSeconds: 1
          failureThreshold: 1
"
    )
}
