//! Limits and honest health on a real server: Watch streams are capped per endpoint,
//! and grpc.health.v1 says NOT_SERVING while the endpoint's SM instance is not running
//! (a demo kill), SERVING again after the restart.

use std::time::{Duration, Instant};

use ibsm_demo::demo::Demo;
use ibsm_proto::demo::v1::demo_client::DemoClient;
use ibsm_proto::v1 as pb;
use ibsm_proto::v1::control_client::ControlClient;
use ibsm_transport::FabricSpec;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::HealthCheckRequest;

async fn health(ep: std::net::SocketAddr) -> i32 {
    let ch = tonic::transport::Endpoint::from_shared(format!("http://{ep}"))
        .expect("uri")
        .connect()
        .await
        .expect("connect");
    let mut h = HealthClient::new(ch);
    h.check(HealthCheckRequest {
        service: "ibsm.v1.Control".into(),
    })
    .await
    .expect("health answers")
    .into_inner()
    .status
}

async fn wait_health(ep: std::net::SocketAddr, want: ServingStatus) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let s = health(ep).await;
        if s == want as i32 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "health of {ep} stayed {s}, want {want:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_follows_the_instance_and_watch_streams_are_capped() {
    let spec = FabricSpec::parse("gen:fat-tree:4").expect("spec");
    let mut demo = Demo::start(&spec, 0).await.expect("demo starts");
    let m = demo.members()[0].clone();
    wait_health(m.endpoint, ServingStatus::Serving).await;
    let mut d = DemoClient::connect(format!("http://{}", m.endpoint))
        .await
        .expect("connect");
    d.kill_instance(ibsm_proto::demo::v1::KillInstanceRequest {
        name: m.name.clone(),
        ..Default::default()
    })
    .await
    .expect("kill");
    wait_health(m.endpoint, ServingStatus::NotServing).await;
    d.restart_instance(ibsm_proto::demo::v1::RestartInstanceRequest {
        name: m.name.clone(),
    })
    .await
    .expect("restart");
    wait_health(m.endpoint, ServingStatus::Serving).await;

    // Watch: MAX_WATCH_STREAMS open streams (over several connections: one
    // connection carries at most MAX_STREAMS_PER_CONNECTION calls), then the next is
    // refused; closing one frees its slot.
    let per_conn = usize::try_from(ibsmd::server::MAX_STREAMS_PER_CONNECTION).expect("fits") / 2;
    let mut open = Vec::new();
    let mut clients = Vec::new();
    while open.len() < ibsmd::server::MAX_WATCH_STREAMS {
        let mut w = ControlClient::connect(format!("http://{}", m.endpoint))
            .await
            .expect("connect");
        for _ in 0..per_conn.min(ibsmd::server::MAX_WATCH_STREAMS - open.len()) {
            open.push(
                w.watch(pb::WatchRequest {})
                    .await
                    .expect("a Watch under the cap")
                    .into_inner(),
            );
        }
        clients.push(w);
    }
    let mut c = ControlClient::connect(format!("http://{}", m.endpoint))
        .await
        .expect("connect");
    let e = c
        .watch(pb::WatchRequest {})
        .await
        .expect_err("a Watch over the cap");
    assert_eq!(e.code(), tonic::Code::ResourceExhausted, "{e}");
    drop(open.pop());
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match c.watch(pb::WatchRequest {}).await {
            Ok(s) => {
                open.push(s.into_inner());
                break;
            }
            Err(e) if e.code() == tonic::Code::ResourceExhausted => {
                assert!(
                    Instant::now() < deadline,
                    "a closed Watch never freed its slot"
                );
                // The slot is freed when the forwarding task notices the client left,
                // at its next event.
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("{e}"),
        }
    }
    drop(open);
    drop(clients);
    demo.stop().await;
}
