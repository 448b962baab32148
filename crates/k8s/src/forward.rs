//! Port-forward: a local address on 127.0.0.1 whose every connection reaches one port of one
//! pod through the API server (`pods/portforward`, as `kubectl port-forward`), so that a
//! blocking client made for a TCP address (the backend control client) talks to a pod's
//! loopback-only port on any cluster, pod network reachable from here or not.

use crate::cluster::Cluster;
use crate::error::{split, Error};
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long opening one forwarded connection's stream through the API server may take.
const OPEN_BOUND: Duration = Duration::from_secs(10);

/// How long a forwarded connection's other side may take to end once one side has ended (the
/// client closed, or the pod's end did): a pod on a lost node never answers the close, and the
/// connection would otherwise stay open for good.
const CLOSE_BOUND: Duration = Duration::from_secs(5);

/// A running port-forward: connect to [`PortForward::addr`]; dropping it closes the listener
/// and every forwarded connection.
pub struct PortForward {
    addr: SocketAddr,
    last_error: Arc<Mutex<Option<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for PortForward {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PortForward")
            .field("addr", &self.addr)
            .finish()
    }
}

impl PortForward {
    /// The local address (127.0.0.1, a port the OS picked) that reaches the pod's port.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Ends the forward: the listener closes and so does every connection through it, so a
    /// client reading one sees its end (the agents' coordinator closes a gone pod's forward).
    pub fn close(&self) {
        self.task.abort();
    }

    /// Why the last connection could not be forwarded (the pod is gone, the port is closed,
    /// portforward is forbidden), for a message when the client saw only a closed connection.
    pub fn last_error(&self) -> Option<String> {
        self.last_error
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl Drop for PortForward {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Cluster {
    /// Forwards a new local port on 127.0.0.1 to `port` of pod `name` (its network namespace's
    /// loopback included): each accepted connection opens its own port-forward stream through
    /// the API server and lives until either side closes.
    pub fn port_forward(
        &self,
        namespace: &str,
        name: &str,
        port: u16,
    ) -> Result<PortForward, Error> {
        let what = format!("port-forward to pod {name} port {port} in {namespace}");
        let listener = self
            .block_on(tokio::net::TcpListener::bind(("127.0.0.1", 0)))
            .map_err(|e| Error::io(&what, e))?;
        let addr = listener.local_addr().map_err(|e| Error::io(&what, e))?;
        let api: Api<Pod> = Api::namespaced(self.client(), namespace);
        let last_error: Arc<Mutex<Option<String>>> = Arc::default();
        let (pod, errors) = (name.to_string(), last_error.clone());
        let task = self.handle().spawn(async move {
            let mut conns = tokio::task::JoinSet::new();
            loop {
                let Ok((mut tcp, _)) = listener.accept().await else {
                    break;
                };
                let _ = tcp.set_nodelay(true);
                let (api, pod, errors, what) =
                    (api.clone(), pod.clone(), errors.clone(), what.clone());
                conns.spawn(async move {
                    let fail = |m: String| {
                        *errors.lock().unwrap_or_else(|e| e.into_inner()) =
                            Some(format!("{what}: {}", crate::error::one_line(m.trim())));
                    };
                    // A forward that cannot be opened is tried once more (the API server's
                    // stream can drop under load); then the connection is closed and the
                    // reason kept, so the client fails at once instead of hanging.
                    let mut last = String::new();
                    let mut opened = None;
                    for _ in 0..2 {
                        match tokio::time::timeout(OPEN_BOUND, api.portforward(&pod, &[port])).await
                        {
                            Ok(Ok(pf)) => {
                                opened = Some(pf);
                                break;
                            }
                            Ok(Err(e)) => last = split(e).0,
                            Err(_) => last = format!("not opened within {OPEN_BOUND:?}"),
                        }
                    }
                    let Some(mut pf) = opened else {
                        return fail(format!("{last} (tried twice)"));
                    };
                    let Some(mut stream) = pf.take_stream(port) else {
                        return fail("the API server gave no stream".into());
                    };
                    let error = pf.take_error(port);
                    let copied = copy_bounded(&mut tcp, &mut stream).await;
                    drop(stream);
                    // The pod side's own reason (nothing listens on the port...) comes on the
                    // error channel, whether or not the copy saw a failure.
                    let said = match error {
                        Some(f) => tokio::time::timeout(Duration::from_millis(200), f)
                            .await
                            .ok()
                            .flatten(),
                        None => None,
                    };
                    match (said, copied) {
                        (Some(m), _) => fail(m),
                        (None, Err(e)) => fail(e.to_string()),
                        (None, Ok(_)) => {}
                    }
                    let _ = pf.join().await;
                });
                // Reap the finished ones so a long-lived forward does not grow.
                while conns.try_join_next().is_some() {}
            }
        });
        Ok(PortForward {
            addr,
            last_error,
            task,
        })
    }
}

/// Copies both ways between a forwarded client connection and its stream to the pod until
/// both have ended; once either side has ended, the other gets [`CLOSE_BOUND`] to end too,
/// then the connection is closed with that said (every forwarded connection is bounded once
/// one side is done, whatever happened to the pod's node).
async fn copy_bounded<S>(tcp: &mut tokio::net::TcpStream, stream: &mut S) -> std::io::Result<()>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    use tokio::io::AsyncWriteExt;
    let (mut cr, mut cw) = tcp.split();
    let (mut sr, mut sw) = tokio::io::split(stream);
    let up = async {
        tokio::io::copy(&mut cr, &mut sw).await?;
        sw.shutdown().await
    };
    let down = async {
        tokio::io::copy(&mut sr, &mut cw).await?;
        cw.shutdown().await
    };
    tokio::pin!(up, down);
    let (first, rest, which) = tokio::select! {
        r = &mut up => (r, tokio::time::timeout(CLOSE_BOUND, &mut down).await, "the pod's side"),
        r = &mut down => (r, tokio::time::timeout(CLOSE_BOUND, &mut up).await, "the client's side"),
    };
    first?;
    match rest {
        Ok(r) => r,
        Err(_) => Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!("{which} did not end within {CLOSE_BOUND:?} of the other's end"),
        )),
    }
}
