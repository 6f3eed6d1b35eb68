//! The daemon's small HTTP/1 servers (metrics, web console) share one accept loop:
//! at most `max_connections` at a time (more wait in the listen backlog), each closed
//! when its request head takes longer than `header_read_timeout` or the connection
//! lives longer than `lifetime`, so a client cannot pin the daemon.

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

/// Serve `app` on `listener` under `limits` until `shutdown` resolves.
pub(crate) fn serve_bounded(
    app: axum::Router,
    listener: tokio::net::TcpListener,
    limits: HttpLimits,
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
            let service = hyper_util::service::TowerToHyperService::new(app.clone());
            tokio::spawn(async move {
                let conn = hyper::server::conn::http1::Builder::new()
                    .timer(hyper_util::rt::TokioTimer::new())
                    .header_read_timeout(limits.header_read_timeout)
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
                match tokio::time::timeout(limits.lifetime, conn).await {
                    Ok(Ok(())) => {}
                    Ok(Err(err)) => tracing::debug!(%peer, %err, "{what}: connection failed"),
                    Err(_) => tracing::debug!(%peer, "{what}: connection closed at its lifetime"),
                }
                drop(permit);
            });
        }
    }
}
