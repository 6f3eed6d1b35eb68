//! The daemon's small HTTP/1 servers (metrics, web console) share one accept loop:
//! at most `max_connections` at a time (more wait in the listen backlog), each closed
//! when its request head takes longer than `header_read_timeout` or the connection
//! lives longer than `lifetime`, so a client cannot pin the daemon. With a TLS
//! acceptor the handshake must also finish within `header_read_timeout`, and the
//! client certificates it verified reach every request as [`PeerCerts`].

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// The bounds of one server, and its name in log lines.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HttpLimits {
    /// `metrics`, `web console`.
    pub(crate) what: &'static str,
    pub(crate) max_connections: usize,
    pub(crate) header_read_timeout: Duration,
    pub(crate) lifetime: Duration,
}

/// The client certificates a TLS handshake verified (leaf first), in the extensions of
/// each request of that connection; absent on plain HTTP or when none was presented.
#[derive(Debug, Clone)]
pub(crate) struct PeerCerts(pub(crate) Arc<Vec<Vec<u8>>>);

/// Serve `app` on `listener` under `limits` until `shutdown` resolves; HTTPS when
/// `tls` is given.
pub(crate) fn serve_bounded(
    app: axum::Router,
    listener: tokio::net::TcpListener,
    limits: HttpLimits,
    tls: Option<tokio_rustls::TlsAcceptor>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> impl Future<Output = ()> + Send + 'static {
    let slots = Arc::new(tokio::sync::Semaphore::new(limits.max_connections));
    let what = limits.what;
    async move {
        tokio::pin!(shutdown);
        loop {
            let permit = tokio::select! {
                _ = &mut shutdown => return,
                p = Arc::clone(&slots).acquire_owned() => match p {
                    Ok(p) => p,
                    Err(_) => return,
                },
            };
            let (stream, peer) = tokio::select! {
                _ = &mut shutdown => return,
                accepted = listener.accept() => match accepted {
                    Ok(a) => a,
                    Err(err) => {
                        tracing::warn!(%err, "{what}: accept failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                },
            };
            let app = app.clone();
            let tls = tls.clone();
            tokio::spawn(async move {
                let served = match tls {
                    None => serve_connection(app, stream, None, limits).await,
                    Some(acceptor) => {
                        let shake = tokio::time::timeout(
                            limits.header_read_timeout,
                            acceptor.accept(stream),
                        );
                        match shake.await {
                            Ok(Ok(tls)) => {
                                let certs = tls.get_ref().1.peer_certificates().map(|c| {
                                    PeerCerts(Arc::new(c.iter().map(|d| d.to_vec()).collect()))
                                });
                                serve_connection(app, tls, certs, limits).await
                            }
                            Ok(Err(err)) => Err(format!("TLS handshake failed: {err}")),
                            Err(_) => Err("TLS handshake timed out".into()),
                        }
                    }
                };
                if let Err(err) = served {
                    tracing::debug!(%peer, %err, "{what}: connection failed");
                }
                drop(permit);
            });
        }
    }
}

/// One HTTP/1 connection on `io`, every request carrying `certs`, within the limits.
async fn serve_connection<IO>(
    app: axum::Router,
    io: IO,
    certs: Option<PeerCerts>,
    limits: HttpLimits,
) -> Result<(), String>
where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let service =
        hyper::service::service_fn(move |mut req: hyper::Request<hyper::body::Incoming>| {
            if let Some(c) = &certs {
                req.extensions_mut().insert(c.clone());
            }
            let mut app = app.clone();
            async move { tower_service::Service::call(&mut app, req).await }
        });
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .serve_connection(hyper_util::rt::TokioIo::new(io), service);
    match tokio::time::timeout(limits.lifetime, conn).await {
        Ok(r) => r.map_err(|e| e.to_string()),
        Err(_) => Err("closed at its lifetime".into()),
    }
}
