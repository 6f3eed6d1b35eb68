//! The web console over HTTPS when the API has TLS: the API's certificate, its client
//! CA, and its role mapping. A real TLS client (tokio-rustls) with an admin
//! certificate, a read-only one (`--read-only-client-name`), one from an unrelated CA,
//! and none; and, with a token but no client CA, token login over HTTPS.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ibsm_transport::SharedSim;
use ibsmd::auth::{Security, SecurityOptions};
use ibsmd::Instance;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

mod common;
use common::pki::Pki;

const TOKEN: &str = "web-tls-admin-token-0123456789";

/// One SM on an embedded fabric with its console served under `security`.
struct Console {
    addr: SocketAddr,
    inst: Arc<Instance>,
    _sim: SharedSim,
}

impl Drop for Console {
    fn drop(&mut self) {
        self.inst.shutdown();
    }
}

async fn console(security: Security) -> Console {
    let (sim, inst) = common::sm_on_small_fat_tree("web");
    let source = ibsmd::web::WebSource {
        name: "web".into(),
        slot: ibsmd::server::slot(Arc::clone(&inst)),
        repl: None,
    };
    let (addr, serve) = ibsmd::web::bind(
        vec![source],
        security,
        SocketAddr::from(([127, 0, 0, 1], 0)),
        std::future::pending(),
    )
    .await
    .expect("console binds");
    tokio::spawn(serve);
    let deadline = Instant::now() + Duration::from_secs(20);
    while inst.status().guid == 0 {
        assert!(Instant::now() < deadline, "instance never started");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Console {
        addr,
        inst,
        _sim: sim,
    }
}

/// `method path` over TLS trusting the test CA, as `who` (a client certificate) and
/// with `token`: the HTTP status and body, or why the connection failed.
async fn https(
    addr: SocketAddr,
    pki: &Pki,
    who: Option<&str>,
    token: Option<&str>,
    method: &str,
    path: &str,
    body: &str,
) -> Result<(u16, String), String> {
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(pki.path("ca.pem")).expect("ca") {
        roots.add(c.expect("ca cert")).expect("root");
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let b = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots);
    let cfg = match who {
        Some(w) => {
            let certs = CertificateDer::pem_file_iter(pki.path(&format!("{w}.crt")))
                .expect("crt")
                .collect::<Result<Vec<_>, _>>()
                .expect("certs");
            let key = PrivateKeyDer::from_pem_file(pki.path(&format!("{w}.key"))).expect("key");
            b.with_client_auth_cert(certs, key).expect("client auth")
        }
        None => b.with_no_client_auth(),
    };
    let tcp = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| e.to_string())?;
    let name = ServerName::try_from("localhost").expect("name");
    let mut tls = tokio_rustls::TlsConnector::from(Arc::new(cfg))
        .connect(name, tcp)
        .await
        .map_err(|e| format!("handshake: {e}"))?;
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let io = async {
        tls.write_all(req.as_bytes()).await?;
        let mut out = Vec::new();
        tls.read_to_end(&mut out).await.map(|_| out)
    };
    // TLS 1.3: a refused client certificate shows as an alert on the first read.
    let out = tokio::time::timeout(Duration::from_secs(10), io)
        .await
        .map_err(|_| "no answer".to_string())?
        .map_err(|e| format!("read: {e}"))?;
    let text = String::from_utf8_lossy(&out).into_owned();
    let code = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("not an HTTP answer: {text:?}"))?;
    let body = text.split("\r\n\r\n").nth(1).unwrap_or("").to_string();
    Ok((code, body))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_certificates_log_in_with_the_apis_roles() {
    let pki = Pki::new(&["admin", "reader"]);
    let sec = SecurityOptions {
        tls_cert: Some(pki.path("server.crt")),
        tls_key: Some(pki.path("server.key")),
        tls_client_ca: Some(pki.path("ca.pem")),
        read_only_client_names: vec!["reader".into()],
        ..SecurityOptions::default()
    }
    .load()
    .expect("mTLS options load");
    assert_eq!(ibsmd::web::scheme(&sec), "https");
    let c = console(sec).await;
    let get = |who, path| https(c.addr, &pki, who, None, "GET", path, "");

    let (code, body) = get(Some("admin"), "/api/whoami").await.expect("admin");
    assert_eq!(code, 200, "{body}");
    let who: serde_json::Value = serde_json::from_str(&body).expect("json");
    assert_eq!(who["role"], "admin");
    assert_eq!(who["certificate"], true);

    let (code, body) = get(Some("reader"), "/api/whoami").await.expect("reader");
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("\"read-only\""), "{body}");
    let (code, _) = get(Some("reader"), "/api/cluster").await.expect("reader");
    assert_eq!(code, 200, "a read-only certificate may look");

    // An action: 403 for the reader (nothing changes), done for the admin.
    let act = r#"{"action":"priority","sm":"web","priority":3}"#;
    let (code, body) = https(
        c.addr,
        &pki,
        Some("reader"),
        None,
        "POST",
        "/api/action",
        act,
    )
    .await
    .expect("reader action");
    assert_eq!(code, 403, "{body}");
    assert_eq!(c.inst.status().priority, 10);
    let (code, body) = https(
        c.addr,
        &pki,
        Some("admin"),
        None,
        "POST",
        "/api/action",
        act,
    )
    .await
    .expect("admin action");
    assert_eq!(code, 200, "{body}");
    assert_eq!(c.inst.status().priority, 3);

    // No certificate: the page loads (no data in it), every /api/ path is 401.
    let (code, _) = get(None, "/").await.expect("page without a certificate");
    assert_eq!(code, 200);
    let (code, body) = get(None, "/api/whoami").await.expect("no certificate");
    assert_eq!(code, 401, "{body}");
    assert!(body.contains("client certificate"), "{body}");

    // A certificate from another CA: the handshake is refused.
    let r = get(Some("stranger"), "/api/whoami").await;
    assert!(r.is_err(), "a foreign certificate was served: {r:?}");

    // Plain HTTP to the HTTPS port: no answer it could read as one.
    let mut tcp = tokio::net::TcpStream::connect(c.addr).await.expect("tcp");
    tcp.write_all(b"GET /api/whoami HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .expect("write");
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), tcp.read_to_end(&mut out)).await;
    assert!(!out.starts_with(b"HTTP/1.1 200"), "plain HTTP was served");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_logs_in_over_https_without_a_client_ca() {
    let pki = Pki::new(&["admin", "reader"]);
    let dir = tempfile::tempdir().expect("tempdir");
    let token = dir.path().join("token");
    std::fs::write(&token, TOKEN).expect("token file");
    let sec = SecurityOptions {
        tls_cert: Some(pki.path("server.crt")),
        tls_key: Some(pki.path("server.key")),
        auth_token_file: Some(token),
        ..SecurityOptions::default()
    }
    .load()
    .expect("TLS + token options load");
    let c = console(sec).await;
    let (code, body) = https(c.addr, &pki, None, Some(TOKEN), "GET", "/api/whoami", "")
        .await
        .expect("token over HTTPS");
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("\"admin\""), "{body}");
    let (code, _) = https(c.addr, &pki, None, None, "GET", "/api/whoami", "")
        .await
        .expect("nothing over HTTPS");
    assert_eq!(code, 401);
    let (code, _) = https(
        c.addr,
        &pki,
        None,
        Some("wrong-token-wrong-token"),
        "GET",
        "/api/cluster",
        "",
    )
    .await
    .expect("a wrong token over HTTPS");
    assert_eq!(code, 401);
}

/// Client CA and token both configured: the API needs both (the certificate at its
/// handshake, the token on the call), and so does the console; neither alone will do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_client_ca_and_a_token_the_console_needs_both_as_the_api_does() {
    let pki = Pki::new(&["admin", "reader"]);
    let dir = tempfile::tempdir().expect("tempdir");
    let token = dir.path().join("token");
    std::fs::write(&token, TOKEN).expect("token file");
    let sec = SecurityOptions {
        tls_cert: Some(pki.path("server.crt")),
        tls_key: Some(pki.path("server.key")),
        tls_client_ca: Some(pki.path("ca.pem")),
        auth_token_file: Some(token),
        read_only_client_names: vec!["reader".into()],
        ..SecurityOptions::default()
    }
    .load()
    .expect("mTLS + token options load");
    let c = console(sec).await;
    let whoami = |who, token| https(c.addr, &pki, who, token, "GET", "/api/whoami", "");
    let (code, _) = whoami(Some("admin"), None).await.expect("certificate only");
    assert_eq!(code, 401, "a certificate without the token");
    let (code, _) = whoami(None, Some(TOKEN)).await.expect("token only");
    assert_eq!(code, 401, "a token without a certificate");
    let (code, body) = whoami(Some("admin"), Some(TOKEN)).await.expect("both");
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("\"admin\""), "{body}");
    // The lesser of the two roles: a read-only certificate with the admin token.
    let (code, body) = whoami(Some("reader"), Some(TOKEN))
        .await
        .expect("reader + token");
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("\"read-only\""), "{body}");
}
