//! Port-forwarding through the API server: a listener on 127.0.0.1 whose every connection is
//! bridged to a port of one pod (kube-rs `portforward`, a WebSocket through the API server and
//! the kubelet). Plain socket code then reaches the pod from anywhere the API server is
//! reachable: no route to the pod network, no Service, no open node port.

use crate::cluster::Cluster;
use crate::error::Error;
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use tokio::sync::watch;

/// A running forward to one pod's port. Dropping it (or [`Forward::close`]) stops it: the
/// listener closes and so does every connection bridged through it, so a client reading one
/// sees its end.
pub struct Forward {
    addr: SocketAddr,
    stop: watch::Sender<bool>,
    error: Arc<Mutex<Option<String>>>,
}

impl Forward {
    /// The local address (127.0.0.1, a port the OS picked) whose connections reach the pod.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Ends the forward and every connection through it.
    pub fn close(&self) {
        let _ = self.stop.send(true);
    }

    /// The last error a bridged connection met (the API server refused the forward, or the
    /// pod's port did not answer), for messages.
    pub fn last_error(&self) -> Option<String> {
        self.error.lock().map(|e| e.clone()).unwrap_or_default()
    }
}

impl Drop for Forward {
    fn drop(&mut self) {
        self.close();
    }
}

impl Cluster {
    /// Forwards a local port to `port` of pod `name` in `namespace`: every connection to
    /// [`Forward::addr`] opens its own port-forward stream, and bytes are copied both ways
    /// until either side ends.
    pub fn forward(&self, namespace: &str, name: &str, port: u16) -> Result<Forward, Error> {
        let what = format!("port-forward to pod {name} port {port} in {namespace}");
        let listener = self
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .map_err(|e| Error::io(&what, e))?;
        let addr = listener.local_addr().map_err(|e| Error::io(&what, e))?;
        let (stop, mut stopped) = watch::channel(false);
        let error = Arc::new(Mutex::new(None));
        let api: Api<Pod> = Api::namespaced(self.client(), namespace);
        let (pod, errors) = (name.to_string(), error.clone());
        let rx = stop.subscribe();
        self.handle().spawn(async move {
            loop {
                tokio::select! {
                    accepted = listener.accept() => {
                        let Ok((conn, _)) = accepted else { continue };
                        let (api, pod, errors, rx) = (api.clone(), pod.clone(), errors.clone(), rx.clone());
                        tokio::spawn(bridge(conn, api, pod, port, errors, rx));
                    }
                    _ = stopped.changed() => return,
                }
            }
        });
        Ok(Forward { addr, stop, error })
    }
}

/// Copies one local connection to and from a new port-forward stream of the pod, until either
/// side ends or the forward is stopped; a failure is kept for [`Forward::last_error`].
async fn bridge(
    mut conn: tokio::net::TcpStream,
    api: Api<Pod>,
    pod: String,
    port: u16,
    errors: Arc<Mutex<Option<String>>>,
    mut stop: watch::Receiver<bool>,
) {
    let note = |m: String| {
        if let Ok(mut e) = errors.lock() {
            *e = Some(m);
        }
    };
    let _ = conn.set_nodelay(true);
    let mut pf = match api.portforward(&pod, &[port]).await {
        Ok(pf) => pf,
        Err(e) => return note(crate::error::split(e).0),
    };
    let Some(mut upstream) = pf.take_stream(port) else {
        return note(format!("no stream for port {port}"));
    };
    let failed = pf.take_error(port);
    tokio::select! {
        r = tokio::io::copy_bidirectional(&mut conn, &mut upstream) => {
            if let Err(e) = r {
                note(e.to_string());
            }
        }
        Some(Some(m)) = async move { match failed { Some(f) => Some(f.await), None => None } } => note(m),
        _ = stop.changed() => {}
    }
    pf.abort();
}
