//! [`DaemonError`]: why the daemon's library could not open a fabric, start an SM
//! instance or serve an endpoint. A typed error (the binaries turn it into `anyhow` at
//! their edge) so an embedding tool can tell a busy port from a bad subnet
//! configuration, and every message says what failed, where and why.

use std::net::SocketAddr;

/// What went wrong, with where (the instance, the address) and why.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// A listening port could not be bound (`what`: gRPC or metrics). A port in use
    /// most likely belongs to another ibsmd on this host: the message says so.
    #[error("cannot listen for {what} on {addr}: {source}{}", in_use_hint(source))]
    Listen {
        /// Which endpoint.
        what: &'static str,
        /// The address asked for.
        addr: SocketAddr,
        /// The socket error.
        source: std::io::Error,
    },
    /// The bound socket's own address could not be read.
    #[error("cannot read the address of the {what} socket: {source}")]
    LocalAddr {
        /// Which endpoint.
        what: &'static str,
        /// The socket error.
        source: std::io::Error,
    },
    /// tonic refused the TLS settings.
    #[error("TLS configuration: {0}")]
    Tls(String),
    /// Server reflection could not be built from the descriptor sets.
    #[error("gRPC server reflection: {0}")]
    Reflection(String),
    /// The gRPC server ended with an error.
    #[error("gRPC server: {0}")]
    Serve(String),
    /// An OS thread of an instance could not be started.
    #[error("SM {name}: cannot start the {what} thread: {source}")]
    Thread {
        /// The instance.
        name: String,
        /// Which thread.
        what: &'static str,
        /// The OS error.
        source: std::io::Error,
    },
    /// The subnet settings (LMC, routing, partitions, ...) are not usable.
    #[error("SM {name}: subnet configuration: {why}")]
    SubnetConfig {
        /// The instance.
        name: String,
        /// What is wrong.
        why: String,
    },
    /// The node stopped (its local port never answered, ...).
    #[error("SM {name}: {why}")]
    Node {
        /// The instance.
        name: String,
        /// Why it stopped.
        why: String,
    },
    /// The umad device or the embedded simulator refused.
    #[error(transparent)]
    Transport(#[from] ibsm_transport::TransportError),
    /// The embedded fabric `--fabric` names cannot be built or has no port for an SM.
    #[error("--fabric: {0}")]
    Fabric(String),
    /// The embedded simulator refused to set IsSM on the SM's port.
    #[error("embedded fabric: set IsSM: {0}")]
    SetIsSm(String),
    /// `issmN` could not be opened, so the port would not advertise IsSM.
    #[error("{0}")]
    Issm(String),
    /// The web console cannot serve with these settings.
    #[error("--web: {0}")]
    Web(String),
}

/// What a busy port most likely means, for [`DaemonError::Listen`].
fn in_use_hint(e: &std::io::Error) -> &'static str {
    if e.kind() == std::io::ErrorKind::AddrInUse {
        " (is another ibsmd running on this host? give this one another address)"
    } else {
        ""
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_busy_port_is_a_listen_error_naming_the_endpoint_and_the_address() {
        let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = taken.local_addr().expect("addr");
        let e = crate::metrics::bind(Vec::new(), addr, async {})
            .await
            .err()
            .expect("the port is taken");
        assert!(
            matches!(&e, DaemonError::Listen { what: "metrics", addr: a, .. } if *a == addr),
            "{e:?}"
        );
        assert!(
            e.to_string()
                .starts_with(&format!("cannot listen for metrics on {addr}: ")),
            "{e}"
        );
    }
}
