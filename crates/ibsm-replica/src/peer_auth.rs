//! The credentials members of one cluster present to each other on the Raft service:
//! the shared [`ClusterSecret`], and the node id a member certificate names
//! ([`node_id_of_cert`]); [`PeerAuth`] says which of them a member requires.
//!
//! Why a file of its own: these are pure checks of a secret and of certificates, used
//! by both ends of the transport ([`crate::network`]: the client sends the secret, the
//! service checks it and the certificate before it decodes a body) and by the daemon
//! when it loads its configuration. `network` re-exports everything here, so the paths
//! (`ibsm_replica::network::ClusterSecret`, ...) are unchanged.

use std::sync::Arc;

use crate::NodeId;

/// Metadata key carrying the [`ClusterSecret`] on every Raft RPC.
pub const CLUSTER_SECRET_HEADER: &str = "ibsm-cluster-secret";
/// Prefix of the certificate name that binds a member's certificate to its node id.
pub const NODE_CERT_PREFIX: &str = "ibsm-node-";

/// The secret shared by the members of one cluster (never the control API's token).
/// `Debug` never prints it.
#[derive(Clone)]
pub struct ClusterSecret(Arc<str>);

impl std::fmt::Debug for ClusterSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ClusterSecret(<{} bytes>)", self.0.len())
    }
}

/// Shortest cluster secret accepted, in bytes.
pub const MIN_SECRET_LEN: usize = 16;

impl ClusterSecret {
    /// Validate a secret: at least [`MIN_SECRET_LEN`] bytes of visible ASCII (it
    /// travels in an HTTP/2 header).
    pub fn new(s: &str) -> Result<ClusterSecret, String> {
        if s.len() < MIN_SECRET_LEN {
            return Err(format!(
                "the cluster secret is {} bytes; at least {MIN_SECRET_LEN} are required",
                s.len()
            ));
        }
        if let Some((i, c)) = s.char_indices().find(|(_, c)| !c.is_ascii_graphic()) {
            return Err(format!(
                "byte {i} of the cluster secret is {c:?}: only visible ASCII is allowed"
            ));
        }
        Ok(ClusterSecret(Arc::from(s)))
    }

    /// The secret's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Constant-time (in the content) comparison with a presented value.
    pub fn matches(&self, presented: &[u8]) -> bool {
        subtle::ConstantTimeEq::ct_eq(self.0.as_bytes(), presented).into()
    }
}

/// How members authenticate each other on the Raft service (see the module doc). The
/// default authenticates nobody: only for in-process tests; ibsmd refuses to start a
/// replica without one of the two.
#[derive(Debug, Clone, Default)]
pub struct PeerAuth {
    /// Every Raft RPC carries this secret.
    pub secret: Option<ClusterSecret>,
    /// The server runs mutual TLS: the client certificate must name the node id.
    pub mtls: bool,
}

impl PeerAuth {
    /// Whether any credential is checked.
    pub fn authenticates(&self) -> bool {
        self.secret.is_some() || self.mtls
    }
}

/// The node id the first certificate of a PEM file names ([`node_id_of_cert`]).
pub fn node_id_of_pem(pem: &[u8]) -> Option<NodeId> {
    let (_, p) = x509_parser::pem::parse_x509_pem(pem).ok()?;
    node_id_of_cert(&p.contents)
}

/// The node id a member certificate (DER) names: a DNS subjectAltName or the subject
/// CN `ibsm-node-<id>`. `None` if it names none or does not parse.
pub fn node_id_of_cert(der: &[u8]) -> Option<NodeId> {
    use x509_parser::prelude::{FromDer, GeneralName, X509Certificate};
    let (_, cert) = X509Certificate::from_der(der).ok()?;
    let parse = |name: &str| -> Option<NodeId> {
        name.strip_prefix(NODE_CERT_PREFIX)?
            .parse::<NodeId>()
            .ok()
            .filter(|id| *id != 0)
    };
    if let Ok(Some(san)) = cert.subject_alternative_name() {
        for n in &san.value.general_names {
            if let GeneralName::DNSName(d) = n {
                if let Some(id) = parse(d) {
                    return Some(id);
                }
            }
        }
    }
    let id = cert
        .subject()
        .iter_common_name()
        .filter_map(|cn| cn.as_str().ok())
        .find_map(parse);
    id
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_secret_rules() {
        assert!(ClusterSecret::new("short").is_err());
        assert!(ClusterSecret::new("has a space in it!").is_err());
        let s = ClusterSecret::new("0123456789abcdef").expect("ok");
        assert!(s.matches(b"0123456789abcdef"));
        assert!(!s.matches(b"0123456789abcdeF"));
        assert!(!s.matches(b"0123456789abcdef0"));
        assert!(!format!("{s:?}").contains("0123"));
    }
}
