//! gRPC security end to end: bearer token and mutual TLS on a real server in front of
//! a real SM instance on the embedded fabric. Requests without valid credentials must
//! get UNAUTHENTICATED and change nothing.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ibsm_proto::demo::v1::demo_client::DemoClient;
use ibsm_proto::demo::v1::KillInstanceRequest;
use ibsm_proto::v1::control_client::ControlClient;
use ibsm_proto::v1::fault_injection_client::FaultInjectionClient;
use ibsm_proto::v1::{GetStatusRequest, SetPriorityRequest, SetRaftIsolationRequest};
use ibsm_transport::SharedSim;
use ibsmd::auth::client::{tls_config, BearerInterceptor};
use ibsmd::auth::{Security, SecurityOptions, Token};
use ibsmd::server::{bind_with, slot, ServeOptions};
use ibsmd::Instance;
use tokio::sync::oneshot;
use tonic::transport::{Channel, Endpoint};

mod common;
use common::pki::Pki;

/// Set by the extra-services hook (where the Raft service will be added).
static HOOK_CALLED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

const TOKEN: &str = "s3cret-token-for-tests-0123456789";

/// One SM on a small embedded fabric, served with `security`; stops on drop.
struct Served {
    addr: SocketAddr,
    inst: Arc<Instance>,
    stop: Option<oneshot::Sender<()>>,
    _sim: SharedSim,
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        self.inst.shutdown();
    }
}

async fn serve(security: Security) -> Served {
    let (sim, inst) = common::sm_on_small_fat_tree("sec");
    let (tx, rx) = oneshot::channel::<()>();
    let (addr, fut) = bind_with(
        slot(Arc::clone(&inst)),
        "sec",
        SocketAddr::from(([127, 0, 0, 1], 0)),
        async {
            let _ = rx.await;
        },
        ServeOptions {
            security,
            extra_services: Some(Arc::new(
                |router: ibsmd::server::SecuredRouter, _icpt: ibsmd::auth::TokenInterceptor| {
                    HOOK_CALLED.store(true, std::sync::atomic::Ordering::SeqCst);
                    router
                },
            )),
            ..ServeOptions::default()
        },
    )
    .await
    .expect("bind");
    tokio::spawn(fut);
    // Wait until the instance has bootstrapped (GUID known).
    let deadline = Instant::now() + Duration::from_secs(20);
    while inst.status().guid == 0 {
        assert!(Instant::now() < deadline, "instance never started");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Served {
        addr,
        inst,
        stop: Some(tx),
        _sim: sim,
    }
}

fn bearer(v: &str) -> impl tonic::service::Interceptor + Clone {
    let value: tonic::metadata::MetadataValue<tonic::metadata::Ascii> =
        v.parse().expect("ascii header");
    move |mut req: tonic::Request<()>| {
        req.metadata_mut().insert("authorization", value.clone());
        Ok(req)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bearer_token_is_required_and_checked() {
    let token = Token::new(TOKEN).expect("token");
    let s = serve(Security::token(token.clone())).await;
    assert!(HOOK_CALLED.load(std::sync::atomic::Ordering::SeqCst));
    let ch = Endpoint::from_shared(format!("http://{}", s.addr))
        .expect("uri")
        .connect()
        .await
        .expect("connect");

    // No token: refused, and SetPriority changes nothing.
    let mut anon = ControlClient::new(ch.clone());
    let e = anon
        .get_status(GetStatusRequest {})
        .await
        .expect_err("no token refused");
    assert_eq!(e.code(), tonic::Code::Unauthenticated, "{e}");
    let e = anon
        .set_priority(SetPriorityRequest { priority: 3 })
        .await
        .expect_err("no token refused");
    assert_eq!(e.code(), tonic::Code::Unauthenticated, "{e}");

    // Wrong token (same length, one byte off; and a prefix): refused likewise.
    let wrong = format!("Bearer {}X", &TOKEN[..TOKEN.len() - 1]);
    for bad in [wrong.as_str(), "Bearer s3cret", TOKEN] {
        let mut c = ControlClient::with_interceptor(ch.clone(), bearer(bad));
        let e = c
            .set_priority(SetPriorityRequest { priority: 2 })
            .await
            .expect_err("wrong token refused");
        assert_eq!(e.code(), tonic::Code::Unauthenticated, "{bad}: {e}");
    }
    // Demo drills are behind the token too.
    let mut d = DemoClient::new(ch.clone());
    let e = d
        .kill_instance(KillInstanceRequest {
            master: true,
            ..Default::default()
        })
        .await
        .expect_err("refused");
    assert_eq!(e.code(), tonic::Code::Unauthenticated);

    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        s.inst.status().priority,
        10,
        "refused calls must not change the priority"
    );

    // Right token (through the helper ibsmctl uses): works.
    let mut ok = ControlClient::with_interceptor(
        ch.clone(),
        BearerInterceptor::new(&token).expect("interceptor"),
    );
    let st = ok
        .set_priority(SetPriorityRequest { priority: 4 })
        .await
        .expect("authorised SetPriority")
        .into_inner();
    assert_eq!(st.priority, 4);
    assert_eq!(s.inst.status().priority, 4);

    // A daemon outside the demo serves no drills at all, even to a valid token; and
    // without --fault-injection no FaultInjection service either.
    let mut d = DemoClient::with_interceptor(ch.clone(), BearerInterceptor::new(&token).unwrap());
    let e = d
        .kill_instance(KillInstanceRequest {
            master: true,
            ..Default::default()
        })
        .await
        .expect_err("not a demo");
    assert_eq!(e.code(), tonic::Code::Unimplemented, "{e}");
    let mut f =
        FaultInjectionClient::with_interceptor(ch.clone(), BearerInterceptor::new(&token).unwrap());
    let e = f
        .set_raft_isolation(SetRaftIsolationRequest { isolated: true })
        .await
        .expect_err("no --fault-injection");
    assert_eq!(e.code(), tonic::Code::Unimplemented, "{e}");
    assert!(s.inst.is_running());

    // Health needs no credentials.
    let mut h = tonic_health::pb::health_client::HealthClient::new(ch);
    let r = h
        .check(tonic_health::pb::HealthCheckRequest {
            service: "ibsm.v1.Control".into(),
        })
        .await
        .expect("health is open")
        .into_inner();
    assert_eq!(
        r.status,
        tonic_health::pb::health_check_response::ServingStatus::Serving as i32
    );
}

async fn tls_channel(addr: SocketAddr, pki: &Pki, who: Option<&str>) -> Result<Channel, String> {
    let (c, k) = match who {
        Some(w) => (pki.path(&format!("{w}.crt")), pki.path(&format!("{w}.key"))),
        None => (PathBuf::new(), PathBuf::new()),
    };
    let cert_key = who.map(|_| (c.as_path(), k.as_path()));
    let cfg =
        tls_config(&pki.path("ca.pem"), cert_key, Some("localhost")).map_err(|e| e.to_string())?;
    Endpoint::from_shared(format!("https://{addr}"))
        .map_err(|e| e.to_string())?
        .tls_config(cfg)
        .map_err(|e| e.to_string())?
        .connect_timeout(Duration::from_secs(5))
        .connect()
        .await
        .map_err(|e| format!("{e:?}"))
}

async fn status_over(ch: Result<Channel, String>) -> Result<u32, String> {
    let ch = ch?;
    ControlClient::new(ch)
        .get_status(GetStatusRequest {})
        .await
        .map(|r| r.into_inner().priority)
        .map_err(|e| format!("{:?}: {}", e.code(), e.message()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_accepts_only_certified_clients() {
    let pki = Pki::new(&["client"]);
    let opts = SecurityOptions {
        tls_cert: Some(pki.path("server.crt")),
        tls_key: Some(pki.path("server.key")),
        tls_client_ca: Some(pki.path("ca.pem")),
        ..SecurityOptions::default()
    };
    let sec = opts.load().expect("TLS options load");
    assert!(sec.mtls && sec.authenticates());
    let s = serve(sec).await;

    // A client with a certificate from the CA: works.
    let p = status_over(tls_channel(s.addr, &pki, Some("client")).await).await;
    assert_eq!(p, Ok(10), "certified client must be served");

    // No client certificate: refused (handshake or first call fails).
    let r = status_over(tls_channel(s.addr, &pki, None).await).await;
    assert!(
        r.is_err(),
        "a client without a certificate was served: {r:?}"
    );

    // A certificate from another CA: refused.
    let r = status_over(tls_channel(s.addr, &pki, Some("stranger")).await).await;
    assert!(
        r.is_err(),
        "a client with a foreign certificate was served: {r:?}"
    );

    // Plaintext to a TLS port: refused.
    let r = async {
        let ch = Endpoint::from_shared(format!("http://{}", s.addr))
            .map_err(|e| e.to_string())?
            .connect_timeout(Duration::from_secs(5))
            .timeout(Duration::from_secs(5))
            .connect()
            .await
            .map_err(|e| e.to_string());
        status_over(ch).await
    }
    .await;
    assert!(r.is_err(), "plaintext was served on the TLS port: {r:?}");
    assert_eq!(s.inst.status().priority, 10);
}

/// A peer that opens TCP to the TLS port and never speaks is dropped by the server
/// after the handshake timeout (10 s), and while it hangs, others are served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_tls_peer_is_dropped_after_the_handshake_timeout() {
    use tokio::io::AsyncReadExt;
    let pki = Pki::new(&["client"]);
    let sec = SecurityOptions {
        tls_cert: Some(pki.path("server.crt")),
        tls_key: Some(pki.path("server.key")),
        tls_client_ca: Some(pki.path("ca.pem")),
        ..SecurityOptions::default()
    }
    .load()
    .expect("TLS options load");
    let s = serve(sec).await;
    let mut silent = tokio::net::TcpStream::connect(s.addr)
        .await
        .expect("TCP connect");
    let p = status_over(tls_channel(s.addr, &pki, Some("client")).await).await;
    assert_eq!(p, Ok(10), "served while a silent peer hangs");
    let mut buf = [0u8; 64];
    let read = tokio::time::timeout(Duration::from_secs(40), silent.read(&mut buf)).await;
    match read {
        Ok(Ok(0)) | Ok(Err(_)) => {}
        Ok(Ok(n)) => panic!("the server sent {n} bytes to a peer that never said hello"),
        Err(_) => panic!("a silent TLS peer was still connected after 40 s"),
    }
}

#[test]
fn tls_without_client_ca_or_token_is_refused_unless_insecure() {
    let pki = Pki::new(&["client"]);
    let mut opts = SecurityOptions {
        tls_cert: Some(pki.path("server.crt")),
        tls_key: Some(pki.path("server.key")),
        ..SecurityOptions::default()
    };
    let e = opts.load().expect_err("TLS alone authenticates nobody");
    assert!(e.to_string().contains("--tls-client-ca"), "{e}");
    opts.insecure_plaintext = true;
    assert!(opts.load().is_ok());
    // A missing file is named.
    let opts = SecurityOptions {
        auth_token_file: Some(Path::new("/nonexistent/token").into()),
        ..SecurityOptions::default()
    };
    let e = opts.load().expect_err("missing token file");
    assert!(e.to_string().contains("/nonexistent/token"), "{e}");
}
