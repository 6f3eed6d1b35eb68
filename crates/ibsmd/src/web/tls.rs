//! HTTPS for the console when the API has TLS: the API's own certificate and key, and
//! with mutual TLS its client CA ([`crate::auth::TlsPem`]).
//!
//! Why a client certificate is optional at the handshake here (the gRPC port requires
//! one): a browser without one must still reach the page and be told why it is refused
//! (401 with the reason, from [`crate::auth::Security::role_of`] and the console's own
//! "a certificate is required" check), not a bare TLS alert. A certificate that is
//! presented must verify against the client CA, or the handshake fails, as on the API.

use std::sync::Arc;

use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::auth::TlsPem;
use crate::error::DaemonError;

fn web_err(what: &str, e: impl std::fmt::Display) -> DaemonError {
    DaemonError::Web(format!("web console HTTPS: {what}: {e}"))
}

/// The acceptor for `pem`: TLS 1.2/1.3 (ring), HTTP/1.1, client certificates verified
/// against `pem.client_ca` when there is one.
pub fn acceptor(pem: &TlsPem) -> Result<tokio_rustls::TlsAcceptor, DaemonError> {
    let certs = CertificateDer::pem_slice_iter(&pem.cert)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| web_err("--tls-cert is not PEM certificates", e))?;
    if certs.is_empty() {
        return Err(web_err("--tls-cert", "holds no certificate"));
    }
    let key = PrivateKeyDer::from_pem_slice(&pem.key)
        .map_err(|e| web_err("--tls-key is not a PEM private key", e))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| web_err("protocol versions", e))?;
    let builder = match &pem.client_ca {
        Some(ca) => {
            let mut roots = rustls::RootCertStore::empty();
            for c in CertificateDer::pem_slice_iter(ca) {
                let c = c.map_err(|e| web_err("--tls-client-ca is not PEM certificates", e))?;
                roots
                    .add(c)
                    .map_err(|e| web_err("--tls-client-ca holds an unusable certificate", e))?;
            }
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                Arc::new(roots),
                provider,
            )
            .allow_unauthenticated()
            .build()
            .map_err(|e| web_err("--tls-client-ca", e))?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let mut cfg = builder
        .with_single_cert(certs, key)
        .map_err(|e| web_err("--tls-cert/--tls-key", e))?;
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(cfg)))
}
