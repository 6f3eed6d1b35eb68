//! Who may use the gRPC API: a bearer token, mutual TLS, both, or (only when asked
//! for) nobody checks at all.
//!
//! Why both: a bearer token is the easy path for ibsmctl on the SM host (a file only
//! root can read); mTLS is what a cluster of SMs and orchestration tools want (each
//! side proves itself, and the Raft traffic of `ibsm-replica` can reuse the same
//! certificates). The server refuses to start with neither unless
//! `--insecure-plaintext` is given, and then it warns loudly.
//!
//! # Roles
//!
//! Two roles: **admin** can call everything; **read-only** can call the methods in
//! [`READ_ONLY_METHODS`] (every Get/List/Watch, health, reflection) and nothing that
//! changes the fabric or the cluster. The admin credential is `--auth-token-file` or a
//! client certificate signed by `--tls-client-ca`; the read-only credential is
//! `--read-only-token-file`, or a client certificate whose subject CN or a DNS name is
//! listed in `--read-only-client-name`. The check is a tower layer ([`AuthLayer`])
//! around the whole gRPC server, so it sees the method's path and runs before any
//! handler: a request without valid credentials gets `UNAUTHENTICATED`, a read-only
//! caller of a mutating method `PERMISSION_DENIED`, and nothing changes. The
//! allow-list is deny-by-default: a method added later is admin-only until listed.
//! Comparisons are constant-time in the token's content.
//!
//! The Raft service (`/ibsm.v1.Raft/`) is not under these credentials: it checks the
//! members' own (cluster secret, member certificates) itself, see
//! `ibsm_replica::network`. `grpc.health.v1` is open: probes from kubelet/systemd
//! carry no credentials and it reveals nothing.
//!
//! A token equal to [`PLACEHOLDER_TOKEN`] (the one deploy/k8s ships) is refused at
//! start, so a copied example never runs with a known secret.
//!
//! Client side ([`client`]): the metadata key is `authorization`, the value
//! `Bearer <token>`; [`client::BearerInterceptor`] adds it, [`client::tls_config`]
//! builds the client's mTLS settings.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tonic::transport::{Certificate, Identity, ServerTlsConfig};

/// The metadata key carrying the token.
pub const AUTHORIZATION: &str = "authorization";
/// Shortest token accepted (bytes).
pub const MIN_TOKEN_LEN: usize = 16;
/// The token the example manifests in deploy/ carry: refused at start.
pub const PLACEHOLDER_TOKEN: &str = "CHANGE-ME-to-a-long-random-string";

/// gRPC methods a read-only credential may call (full paths; a trailing `/` allows a
/// whole service). Everything else needs the admin credential.
pub const READ_ONLY_METHODS: &[&str] = &[
    "/grpc.health.v1.Health/",
    "/grpc.reflection.v1.ServerReflection/",
    "/grpc.reflection.v1alpha.ServerReflection/",
    "/ibsm.v1.Control/GetStatus",
    "/ibsm.v1.Control/ListSms",
    "/ibsm.v1.Control/Watch",
    "/ibsm.v1.Fabric/GetTopology",
    "/ibsm.v1.Fabric/GetLids",
    "/ibsm.v1.Fabric/GetRoute",
    "/ibsm.v1.Fabric/ListPartitions",
    "/ibsm.v1.Fabric/ListMulticastGroups",
    "/ibsm.v1.Fabric/ListServiceRecords",
    "/ibsm.v1.Fabric/ListSubscriptions",
    "/ibsm.v1.Cluster/ListMembers",
];

/// Path prefix of the Raft service, which authenticates its callers itself.
pub const RAFT_SERVICE: &str = "/ibsm.v1.Raft/";

/// Whether a read-only caller may call `path` of the production services.
pub fn read_only_allows(path: &str) -> bool {
    method_listed(READ_ONLY_METHODS, path)
}

/// Whether `path` is in `methods` (full paths; a trailing `/` names a whole service).
fn method_listed(methods: &[&str], path: &str) -> bool {
    methods.iter().any(|m| {
        if m.ends_with('/') {
            path.starts_with(m)
        } else {
            path == *m
        }
    })
}

/// What a caller may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Everything.
    Admin,
    /// Only [`READ_ONLY_METHODS`].
    ReadOnly,
}

/// Why credentials could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// A file could not be read.
    #[error("{what} {}: {source}", path.display())]
    Read {
        /// Which option named the file.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The token file's content is not usable.
    #[error("--auth-token-file {}: {why}", path.display())]
    BadToken {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
    /// A combination of options that cannot work.
    #[error("{0}")]
    Options(String),
    /// tonic/rustls refused the certificate material.
    #[error("TLS configuration: {0}")]
    Tls(String),
}

/// A bearer token (never printed by `Debug`).
#[derive(Clone)]
pub struct Token(Arc<[u8]>);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Token(<{} bytes>)", self.0.len())
    }
}

impl Token {
    /// Validate a token: at least [`MIN_TOKEN_LEN`] bytes of visible ASCII (it travels
    /// in an HTTP/2 header).
    pub fn new(s: &str) -> Result<Token, String> {
        if s.len() < MIN_TOKEN_LEN {
            return Err(format!(
                "the token is {} bytes; at least {MIN_TOKEN_LEN} are required",
                s.len()
            ));
        }
        if let Some((i, c)) = s.char_indices().find(|(_, c)| !c.is_ascii_graphic()) {
            return Err(format!(
                "byte {i} of the token is {c:?}: only visible ASCII is allowed (no spaces)"
            ));
        }
        Ok(Token(Arc::from(s.as_bytes())))
    }

    /// Read a token file: its content with surrounding whitespace (the final newline)
    /// removed. Warns when group or others may read it.
    pub fn from_file(path: &Path) -> Result<Token, AuthError> {
        let text = std::fs::read_to_string(path).map_err(|source| AuthError::Read {
            what: "--auth-token-file",
            path: path.to_path_buf(),
            source,
        })?;
        #[cfg(unix)]
        if let Ok(md) = std::fs::metadata(path) {
            use std::os::unix::fs::PermissionsExt;
            if md.permissions().mode() & 0o077 != 0 {
                tracing::warn!(
                    path = %path.display(),
                    mode = format_args!("{:o}", md.permissions().mode() & 0o777),
                    "the token file is readable by group or others; chmod 600 it"
                );
            }
        }
        let text = text.trim();
        if text == PLACEHOLDER_TOKEN {
            return Err(AuthError::BadToken {
                path: path.to_path_buf(),
                why: "it holds the placeholder token shipped in deploy/: generate a real one (e.g. `openssl rand -hex 32`)".into(),
            });
        }
        Token::new(text).map_err(|why| AuthError::BadToken {
            path: path.to_path_buf(),
            why,
        })
    }

    /// The token text.
    pub fn as_str(&self) -> &str {
        std::str::from_utf8(&self.0).unwrap_or("")
    }

    /// Constant-time (in the content) comparison with a presented token.
    pub fn matches(&self, presented: &[u8]) -> bool {
        subtle::ConstantTimeEq::ct_eq(&self.0[..], presented).into()
    }
}

/// The server's security options, as given on the command line / in the config file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SecurityOptions {
    /// `--auth-token-file`.
    pub auth_token_file: Option<PathBuf>,
    /// `--read-only-token-file`: a second token that may only read.
    pub read_only_token_file: Option<PathBuf>,
    /// `--read-only-client-name`: client certificates naming one of these (CN or DNS
    /// name) are read-only.
    pub read_only_client_names: Vec<String>,
    /// `--tls-cert` (PEM, may hold the chain).
    pub tls_cert: Option<PathBuf>,
    /// `--tls-key` (PEM).
    pub tls_key: Option<PathBuf>,
    /// `--tls-client-ca` (PEM): clients must present a certificate signed by it.
    pub tls_client_ca: Option<PathBuf>,
    /// `--insecure-plaintext`: allow running with no authentication.
    pub insecure_plaintext: bool,
}

/// The server's TLS material as read from `--tls-cert`, `--tls-key`, `--tls-client-ca`.
#[derive(Clone)]
pub struct TlsPem {
    /// The certificate (and chain), PEM.
    pub cert: Vec<u8>,
    /// Its private key, PEM.
    pub key: Vec<u8>,
    /// The CA that signs client certificates, PEM (mutual TLS).
    pub client_ca: Option<Vec<u8>>,
}

impl std::fmt::Debug for TlsPem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsPem")
            .field("client_ca", &self.client_ca.is_some())
            .finish_non_exhaustive()
    }
}

/// What the gRPC server enforces, ready to use.
#[derive(Debug, Clone, Default)]
pub struct Security {
    /// Required bearer token.
    pub token: Option<Token>,
    /// The read-only token.
    pub read_only_token: Option<Token>,
    /// Client certificate names that are read-only.
    pub read_only_client_names: Vec<String>,
    /// TLS (with client verification when a client CA was given).
    pub tls: Option<ServerTlsConfig>,
    /// Whether clients must present a certificate.
    pub mtls: bool,
    /// The PEM files behind `tls`, for servers that are not tonic's (the web console
    /// serves HTTPS with the same certificate and client CA).
    pub tls_pem: Option<TlsPem>,
    /// Read-only methods of services added through
    /// [`crate::server::ServeOptions::extra_services`] (same form as
    /// [`READ_ONLY_METHODS`]), so this crate names none of them.
    pub extra_read_only_methods: &'static [&'static str],
}

impl Security {
    /// No TLS, no token (the caller must have been told to run insecure).
    pub fn plaintext() -> Security {
        Security::default()
    }

    /// Only a bearer token.
    pub fn token(token: Token) -> Security {
        Security {
            token: Some(token),
            ..Security::default()
        }
    }

    /// Whether any credential is checked.
    pub fn authenticates(&self) -> bool {
        self.token.is_some() || self.mtls
    }

    /// The interceptor enforcing the token (a no-op without one).
    pub fn interceptor(&self) -> TokenInterceptor {
        TokenInterceptor {
            token: self.token.clone(),
        }
    }

    /// The tower layer that enforces credentials and roles on the whole server.
    pub fn layer(&self) -> AuthLayer {
        AuthLayer {
            sec: Arc::new(self.clone()),
        }
    }

    /// The role of a call with these headers and (TLS) peer certificates; an error
    /// says why it is refused. See the module doc.
    pub fn role_of(
        &self,
        headers: &tonic::codegen::http::HeaderMap,
        peer_certs: Option<&[Vec<u8>]>,
    ) -> Result<Role, tonic::Status> {
        if !self.authenticates() {
            return Ok(Role::Admin);
        }
        // With mutual TLS the handshake already verified the chain against
        // --tls-client-ca; the certificate's names may make it read-only.
        let cert_role = match peer_certs.and_then(|c| c.first()) {
            Some(leaf) if self.mtls => {
                let names = cert_names(leaf);
                if names
                    .iter()
                    .any(|n| self.read_only_client_names.iter().any(|r| r == n))
                {
                    Some(Role::ReadOnly)
                } else {
                    Some(Role::Admin)
                }
            }
            _ => None,
        };
        let Some(admin) = &self.token else {
            // mTLS only: the certificate decides.
            return cert_role.ok_or_else(|| {
                tonic::Status::unauthenticated(
                    "missing credentials: a client certificate is required",
                )
            });
        };
        let Some(v) = headers.get(AUTHORIZATION) else {
            return Err(tonic::Status::unauthenticated(
                "missing credentials: send metadata `authorization: Bearer <token>`",
            ));
        };
        let presented = v.as_bytes();
        let presented = presented
            .strip_prefix(b"Bearer ")
            .or_else(|| presented.strip_prefix(b"bearer "))
            .unwrap_or(&[]);
        let token_role = if admin.matches(presented) {
            Role::Admin
        } else if self
            .read_only_token
            .as_ref()
            .is_some_and(|t| t.matches(presented))
        {
            Role::ReadOnly
        } else {
            return Err(tonic::Status::unauthenticated(
                "invalid credentials: the bearer token does not match",
            ));
        };
        // Token and certificate both given: the lesser of the two roles.
        Ok(match cert_role {
            Some(Role::ReadOnly) => Role::ReadOnly,
            _ => token_role,
        })
    }
}

/// The subject CNs and DNS names of a DER certificate (empty if it does not parse).
pub fn cert_names(der: &[u8]) -> Vec<String> {
    use x509_parser::prelude::{FromDer, GeneralName, X509Certificate};
    let Ok((_, cert)) = X509Certificate::from_der(der) else {
        return Vec::new();
    };
    let mut out: Vec<String> = cert
        .subject()
        .iter_common_name()
        .filter_map(|cn| cn.as_str().ok().map(str::to_string))
        .collect();
    if let Ok(Some(san)) = cert.subject_alternative_name() {
        for n in &san.value.general_names {
            if let GeneralName::DNSName(d) = n {
                out.push((*d).to_string());
            }
        }
    }
    out
}

/// Tower layer enforcing [`Security`] on every request of a tonic server (module doc).
#[derive(Debug, Clone)]
pub struct AuthLayer {
    sec: Arc<Security>,
}

impl<S> tower_layer::Layer<S> for AuthLayer {
    type Service = AuthService<S>;
    fn layer(&self, inner: S) -> AuthService<S> {
        AuthService {
            inner,
            sec: Arc::clone(&self.sec),
        }
    }
}

/// The service [`AuthLayer`] wraps around the server's routes.
#[derive(Debug, Clone)]
pub struct AuthService<S> {
    inner: S,
    sec: Arc<Security>,
}

type HttpRequest<B> = tonic::codegen::http::Request<B>;
type HttpResponse = tonic::codegen::http::Response<tonic::body::Body>;

impl<S, B> tower_service::Service<HttpRequest<B>> for AuthService<S>
where
    S: tower_service::Service<HttpRequest<B>, Response = HttpResponse>,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
{
    type Response = HttpResponse;
    type Error = S::Error;
    type Future = std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<HttpResponse, S::Error>> + Send + 'static>,
    >;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: HttpRequest<B>) -> Self::Future {
        let path = req.uri().path().to_string();
        if path.starts_with(RAFT_SERVICE) || path.starts_with("/grpc.health.v1.Health/") {
            return Box::pin(self.inner.call(req));
        }
        let certs: Option<Vec<Vec<u8>>> = req
            .extensions()
            .get::<tonic::transport::server::TlsConnectInfo<tonic::transport::server::TcpConnectInfo>>()
            .and_then(|i| i.peer_certs())
            .map(|c| c.iter().map(|d| d.as_ref().to_vec()).collect());
        let verdict = match self.sec.role_of(req.headers(), certs.as_deref()) {
            Ok(Role::Admin) => Ok(()),
            Ok(Role::ReadOnly)
                if read_only_allows(&path)
                    || method_listed(self.sec.extra_read_only_methods, &path) =>
            {
                Ok(())
            }
            Ok(Role::ReadOnly) => Err(tonic::Status::permission_denied(format!(
                "{path}: the read-only credential may only call Get/List/Watch methods; this one needs the admin credential"
            ))),
            Err(s) => Err(s),
        };
        match verdict {
            Ok(()) => Box::pin(self.inner.call(req)),
            Err(status) => {
                tracing::debug!(path = %path, code = ?status.code(), "gRPC call refused");
                Box::pin(async move { Ok(status.into_http()) })
            }
        }
    }
}

fn read(what: &'static str, path: &Path) -> Result<Vec<u8>, AuthError> {
    std::fs::read(path).map_err(|source| AuthError::Read {
        what,
        path: path.to_path_buf(),
        source,
    })
}

impl SecurityOptions {
    /// The client side of mutual TLS towards the other replication members (Raft, and
    /// the handover catch-up check on their control API): this member's own
    /// certificate (`--tls-cert/--tls-key`, which must then be valid for client as
    /// well as server authentication, with the host of its `--peer` address among its
    /// names), trusting `--tls-client-ca`, the CA that signed every member's. `None`
    /// without TLS. TLS without a client CA is refused here: the Raft service takes no
    /// bearer token, so on a TLS port it is protected only by client certificates.
    pub fn peer_tls(&self) -> Result<Option<tonic::transport::ClientTlsConfig>, AuthError> {
        let (Some(cert), Some(key)) = (&self.tls_cert, &self.tls_key) else {
            return Ok(None);
        };
        let ca = self.tls_client_ca.as_ref().ok_or_else(|| {
            AuthError::Options(
                "replication (--node-id) over TLS needs --tls-client-ca: the members authenticate each other with certificates that CA signed (mutual TLS on the Raft traffic)".into(),
            )
        })?;
        client::tls_config(ca, Some((cert.as_path(), key.as_path())), None).map(Some)
    }

    /// Check the combination and load every file. Errors say which option is wrong.
    pub fn load(&self) -> Result<Security, AuthError> {
        let token = self
            .auth_token_file
            .as_deref()
            .map(Token::from_file)
            .transpose()?;
        let (tls, tls_pem) = match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => {
                let pem = TlsPem {
                    cert: read("--tls-cert", cert)?,
                    key: read("--tls-key", key)?,
                    client_ca: self
                        .tls_client_ca
                        .as_deref()
                        .map(|ca| read("--tls-client-ca", ca))
                        .transpose()?,
                };
                let identity = Identity::from_pem(&pem.cert, &pem.key);
                // A peer that opens TCP and never finishes the handshake is dropped.
                let mut cfg = ServerTlsConfig::new()
                    .identity(identity)
                    .timeout(std::time::Duration::from_secs(10));
                if let Some(ca) = &pem.client_ca {
                    cfg = cfg.client_ca_root(Certificate::from_pem(ca));
                }
                (Some(cfg), Some(pem))
            }
            (None, None) => {
                if self.tls_client_ca.is_some() {
                    return Err(AuthError::Options(
                        "--tls-client-ca needs --tls-cert and --tls-key (the server's own certificate)"
                            .into(),
                    ));
                }
                (None, None)
            }
            (Some(_), None) => {
                return Err(AuthError::Options(
                    "--tls-cert is given without --tls-key".into(),
                ))
            }
            (None, Some(_)) => {
                return Err(AuthError::Options(
                    "--tls-key is given without --tls-cert".into(),
                ))
            }
        };
        let mtls = tls.is_some() && self.tls_client_ca.is_some();
        let read_only_token = self
            .read_only_token_file
            .as_deref()
            .map(Token::from_file)
            .transpose()?;
        if let (Some(a), Some(r)) = (&token, &read_only_token) {
            if a.matches(r.as_str().as_bytes()) {
                return Err(AuthError::Options(
                    "--read-only-token-file holds the same token as --auth-token-file: give the read-only role its own token".into(),
                ));
            }
        }
        if read_only_token.is_some() && token.is_none() {
            return Err(AuthError::Options(
                "--read-only-token-file needs --auth-token-file (the admin token)".into(),
            ));
        }
        if !self.read_only_client_names.is_empty() && !mtls {
            return Err(AuthError::Options(
                "--read-only-client-name needs mutual TLS (--tls-cert/--tls-key/--tls-client-ca)"
                    .into(),
            ));
        }
        let sec = Security {
            token,
            read_only_token,
            read_only_client_names: self.read_only_client_names.clone(),
            tls,
            mtls,
            tls_pem,
            extra_read_only_methods: &[],
        };
        if !sec.authenticates() && !self.insecure_plaintext {
            let why = if sec.tls.is_some() {
                "TLS without --tls-client-ca encrypts but authenticates nobody"
            } else {
                "no credentials are configured"
            };
            return Err(AuthError::Options(format!(
                "{why}: give --auth-token-file FILE, or --tls-cert/--tls-key/--tls-client-ca (mutual TLS), \
                 or --insecure-plaintext to run the control API without authentication"
            )));
        }
        Ok(sec)
    }
}

/// tonic interceptor: `authorization: Bearer <token>` must match. The server itself
/// uses [`AuthLayer`]; this is for services added elsewhere.
#[derive(Debug, Clone)]
pub struct TokenInterceptor {
    token: Option<Token>,
}

impl TokenInterceptor {
    /// An interceptor that lets every request through (the server's [`AuthLayer`]
    /// already checked it).
    pub fn pass_through() -> TokenInterceptor {
        TokenInterceptor { token: None }
    }
}

impl tonic::service::Interceptor for TokenInterceptor {
    fn call(&mut self, req: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        let Some(token) = &self.token else {
            return Ok(req);
        };
        let Some(value) = req.metadata().get(AUTHORIZATION) else {
            return Err(tonic::Status::unauthenticated(
                "missing credentials: send metadata `authorization: Bearer <token>`",
            ));
        };
        let presented = value.as_bytes();
        let presented = presented
            .strip_prefix(b"Bearer ")
            .or_else(|| presented.strip_prefix(b"bearer "))
            .unwrap_or(&[]);
        if token.matches(presented) {
            Ok(req)
        } else {
            Err(tonic::Status::unauthenticated(
                "invalid credentials: the bearer token does not match",
            ))
        }
    }
}

/// Client-side pieces for ibsmctl and tests.
pub mod client {
    use std::path::Path;

    use tonic::metadata::{Ascii, MetadataValue};
    use tonic::transport::{Certificate, ClientTlsConfig, Identity};

    use super::{read, AuthError, Token, AUTHORIZATION};

    /// Adds `authorization: Bearer <token>` to every request:
    /// `ControlClient::with_interceptor(channel, BearerInterceptor::new(token))`.
    #[derive(Debug, Clone)]
    pub struct BearerInterceptor {
        value: MetadataValue<Ascii>,
    }

    impl BearerInterceptor {
        /// For a validated token.
        pub fn new(token: &Token) -> Result<BearerInterceptor, AuthError> {
            let value = format!("Bearer {}", token.as_str())
                .parse::<MetadataValue<Ascii>>()
                .map_err(|e| AuthError::Options(format!("token is not a valid header: {e}")))?;
            Ok(BearerInterceptor { value })
        }

        /// Read and validate a token file (same rules as the server's).
        pub fn from_file(path: &Path) -> Result<BearerInterceptor, AuthError> {
            BearerInterceptor::new(&Token::from_file(path)?)
        }
    }

    impl tonic::service::Interceptor for BearerInterceptor {
        fn call(
            &mut self,
            mut req: tonic::Request<()>,
        ) -> Result<tonic::Request<()>, tonic::Status> {
            req.metadata_mut().insert(AUTHORIZATION, self.value.clone());
            Ok(req)
        }
    }

    /// mTLS settings for a client: trust `ca` (the CA that signed the server's
    /// certificate), present `cert`/`key` when given, and expect the server to be
    /// `domain` (a DNS name in its certificate; default: the endpoint's host).
    /// Use with `Channel::from_shared("https://host:port")?.tls_config(cfg)?`.
    pub fn tls_config(
        ca: &Path,
        cert_key: Option<(&Path, &Path)>,
        domain: Option<&str>,
    ) -> Result<ClientTlsConfig, AuthError> {
        let mut cfg =
            ClientTlsConfig::new().ca_certificate(Certificate::from_pem(read("--tls-ca", ca)?));
        if let Some((cert, key)) = cert_key {
            cfg = cfg.identity(Identity::from_pem(
                read("--tls-cert", cert)?,
                read("--tls-key", key)?,
            ));
        }
        if let Some(d) = domain {
            cfg = cfg.domain_name(d);
        }
        Ok(cfg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic::service::Interceptor;

    fn req_with(v: Option<&str>) -> tonic::Request<()> {
        let mut r = tonic::Request::new(());
        if let Some(v) = v {
            r.metadata_mut()
                .insert(AUTHORIZATION, v.parse().expect("ascii"));
        }
        r
    }

    #[test]
    fn interceptor_checks_bearer() {
        let t = Token::new("0123456789abcdef-secret").expect("token");
        let mut i = Security::token(t).interceptor();
        assert!(i
            .call(req_with(Some("Bearer 0123456789abcdef-secret")))
            .is_ok());
        for bad in [
            None,
            Some("Bearer 0123456789abcdef-secreT"),
            Some("Bearer 0123456789abcdef-secret2"),
            Some("0123456789abcdef-secret"),
            Some("Basic 0123456789abcdef-secret"),
            Some("Bearer "),
        ] {
            let e = i.call(req_with(bad)).expect_err("refused");
            assert_eq!(e.code(), tonic::Code::Unauthenticated, "{bad:?}");
        }
    }

    #[test]
    fn token_rules() {
        assert!(Token::new("short").is_err());
        assert!(Token::new("sixteen bytes ok").is_err(), "space refused");
        assert!(Token::new("0123456789abcdef").is_ok());
    }

    #[test]
    fn options_need_credentials_unless_insecure() {
        let o = SecurityOptions::default();
        let e = o.load().expect_err("no credentials");
        assert!(e.to_string().contains("--insecure-plaintext"), "{e}");
        let o = SecurityOptions {
            insecure_plaintext: true,
            ..SecurityOptions::default()
        };
        assert!(!o.load().expect("insecure allowed").authenticates());
        let o = SecurityOptions {
            tls_client_ca: Some("/nonexistent".into()),
            ..SecurityOptions::default()
        };
        assert!(o.load().is_err());
        let o = SecurityOptions {
            tls_cert: Some("/nonexistent".into()),
            ..SecurityOptions::default()
        };
        assert!(o
            .load()
            .expect_err("half")
            .to_string()
            .contains("--tls-key"));
    }
}
