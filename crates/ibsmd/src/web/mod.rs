//! The web console (`--web ADDR`): a small page served by the daemon itself that shows
//! the cluster (every SM on the fabric, ours and foreign, live), the fabric (topology,
//! LIDs, routes, partitions, multicast groups) and a timeline of the last hour, and
//! offers an admin the API's actions (handover, sweep, priority).
//!
//! Why it reads what it reads: every answer comes from the same handlers the gRPC API
//! runs (`ControlService`, `FabricService`, called in-process), so the console cannot
//! show a state the API would not; the live view is fed by their `Watch` streams, the
//! ones `ibsmctl watch` reads ([`record`]).
//!
//! Credentials: the API's own ([`crate::auth::Security::role_of`]): the browser sends
//! `Authorization: Bearer <token>` on every `fetch` (the token typed into the login
//! form, kept in `sessionStorage`, so it dies with the tab and no cookie means no
//! cross-site request forgery). The live stream is a `fetch` whose body is read as it
//! arrives (server-sent-event framing, `text/event-stream`), because `EventSource`
//! cannot send a header. Pages and scripts load without credentials (they hold no
//! data); every `/api/` path answers 401 without a valid token, and an action is
//! refused (403) unless the API's allow-list lets the caller's role call the matching
//! gRPC method ([`crate::auth::read_only_allows`]): a read-only token may look only.
//! When the API has TLS the console serves HTTPS with its certificate ([`tls`]), and
//! with mutual TLS a verified client certificate is the credential (mapped by
//! `role_of`, as on the gRPC port; the page then needs no token). Without TLS it is
//! plain HTTP, and with a token over a non-loopback address it warns, as the API does.
//!
//! The fabric of a large fabric (past [`groups::FULL_MAX`] nodes) is served as an
//! overview of groups per tier; a group's members and the search are separate asks
//! ([`groups`]), so the first paint of a 10k-node fabric needs tens of kB, not MBs.
//!
//! Assets are built into the binary (`assets/`, plain JavaScript and CSS: no CDN, no
//! build step). Bounds: [`MAX_CONNECTIONS`] connections, [`MAX_STREAMS`] live
//! streams, a stream sends at most one message per [`STREAM_MIN_GAP`] (the newest
//! view only: a `watch` channel drops what a slow reader missed) and ends after
//! [`STREAM_LIFETIME`] (the page reconnects).

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use crate::auth::Security;
use crate::error::DaemonError;

mod api;
pub mod groups;
pub mod json;
pub mod record;
mod source;
mod tls;

pub use source::{WebSource, MAX_STREAMS, STREAM_LIFETIME, STREAM_MIN_GAP};

/// Most open connections.
pub const MAX_CONNECTIONS: usize = 64;
/// A connection is closed after this, whatever it does.
const CONNECTION_LIFETIME: Duration = Duration::from_secs(600);
/// A request head must arrive within this.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(5);

/// Whether the console can serve under `security` (checked before anything starts):
/// HTTPS needs the API's TLS files ([`crate::auth::TlsPem`], which
/// [`crate::auth::SecurityOptions::load`] keeps), and they must load.
pub fn check(security: &Security) -> Result<(), DaemonError> {
    acceptor(security).map(|_| ())
}

/// `https` when the console serves TLS under `security`, else `http`.
pub fn scheme(security: &Security) -> &'static str {
    if security.tls.is_some() {
        "https"
    } else {
        "http"
    }
}

fn acceptor(security: &Security) -> Result<Option<tokio_rustls::TlsAcceptor>, DaemonError> {
    match (&security.tls, &security.tls_pem) {
        (None, _) => Ok(None),
        (Some(_), Some(pem)) => tls::acceptor(pem).map(Some),
        (Some(_), None) => Err(DaemonError::Web(
            "the API has TLS but its certificate files were not kept (Security built without SecurityOptions::load): the console cannot serve HTTPS".into(),
        )),
    }
}

/// Bind `addr` now (a busy port fails the start), for [`serve_on`].
pub async fn listen(addr: SocketAddr) -> Result<tokio::net::TcpListener, DaemonError> {
    tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| DaemonError::Listen {
            what: "web console",
            addr,
            source,
        })
}

/// [`listen`] then [`serve_on`]: the bound address and the serving future.
pub async fn bind(
    sources: Vec<WebSource>,
    security: Security,
    addr: SocketAddr,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(SocketAddr, impl Future<Output = ()> + Send + 'static), DaemonError> {
    check(&security)?;
    serve_on(sources, security, listen(addr).await?, shutdown)
}

/// Serve the console for `sources` under `security` on `listener` until `shutdown`;
/// returns the bound address and the future to spawn. Starts the sampler at once
/// (needs a tokio runtime).
pub fn serve_on(
    sources: Vec<WebSource>,
    security: Security,
    listener: tokio::net::TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(SocketAddr, impl Future<Output = ()> + Send + 'static), DaemonError> {
    let tls = acceptor(&security)?;
    let local = listener
        .local_addr()
        .map_err(|source| DaemonError::LocalAddr {
            what: "web console",
            source,
        })?;
    if !security.authenticates() {
        tracing::warn!(addr = %local, "INSECURE: the web console, like the API, authenticates nobody (--insecure-plaintext): anyone who reaches it may act as admin");
    } else if tls.is_none() && !local.ip().is_loopback() {
        tracing::warn!(addr = %local, "web console: bearer token over plaintext HTTP; keep it on loopback or a trusted network (or behind a TLS proxy)");
    }
    let recorder = record::Recorder::new(&sources);
    recorder.spawn();
    let app = api::router(api::App::new(sources, security, recorder));
    Ok((local, serve(app, listener, tls, shutdown)))
}

fn serve(
    app: axum::Router,
    listener: tokio::net::TcpListener,
    tls: Option<tokio_rustls::TlsAcceptor>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> impl Future<Output = ()> + Send + 'static {
    let limits = crate::http_serve::HttpLimits {
        what: "web console",
        max_connections: MAX_CONNECTIONS,
        header_read_timeout: HEADER_READ_TIMEOUT,
        lifetime: CONNECTION_LIFETIME,
    };
    crate::http_serve::serve_bounded(app, listener, limits, tls, shutdown)
}
