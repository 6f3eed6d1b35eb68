//! What server reflection lists: a production endpoint only the `ibsm.v1` services
//! (no demo service, no FaultInjection without the flag), a demo endpoint the demo's
//! `ibsm.demo.v1.Demo` besides them, resolvable down to the file that defines it.

use std::net::SocketAddr;

use ibsm_demo::demo::Demo;
use ibsm_transport::{FabricSpec, SharedSim};
use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;
use tonic_reflection::pb::v1::ServerReflectionRequest;

async fn ask(ep: SocketAddr, req: MessageRequest) -> MessageResponse {
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{ep}"))
        .expect("endpoint")
        .connect()
        .await
        .expect("connect");
    let mut c = ServerReflectionClient::new(channel);
    let out = tokio_stream::iter(vec![ServerReflectionRequest {
        host: String::new(),
        message_request: Some(req),
    }]);
    let mut answers = c
        .server_reflection_info(out)
        .await
        .expect("reflection")
        .into_inner();
    answers
        .message()
        .await
        .expect("answer")
        .and_then(|r| r.message_response)
        .expect("a response")
}

async fn services(ep: SocketAddr) -> Vec<String> {
    match ask(ep, MessageRequest::ListServices(String::new())).await {
        MessageResponse::ListServicesResponse(l) => l.service.into_iter().map(|s| s.name).collect(),
        other => panic!("not a service list: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_production_endpoint_lists_no_demo_service_and_a_demo_endpoint_does() {
    // Production: one instance served by ibsmd's own server, nothing added.
    let topo = FabricSpec::parse("gen:fat-tree:4")
        .expect("spec")
        .topology()
        .expect("topology")
        .expect("embedded");
    let sim = SharedSim::new(&topo);
    let (node, port, _) = ibsmd::embedded::pick_ca_ports(&topo, 1)
        .into_iter()
        .next()
        .expect("a CA port");
    let inst = ibsmd::embedded::spawn_on_sim(&sim, node, port, ibsmd::InstanceConfig::new("p", 1))
        .expect("instance");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let (addr, serve) = ibsmd::server::bind(
        std::sync::Arc::new(inst),
        "127.0.0.1:0".parse().expect("addr"),
        async {
            let _ = stopped.await;
        },
    )
    .await
    .expect("bind");
    let server = tokio::spawn(serve);
    let listed = services(addr).await;
    assert!(listed.iter().any(|s| s == "ibsm.v1.Control"), "{listed:?}");
    assert!(
        !listed
            .iter()
            .any(|s| s.contains("Demo") || s.contains("FaultInjection")),
        "a production endpoint must not offer drills: {listed:?}"
    );
    let _ = stop.send(());
    let _ = server.await;

    // The demo: the same services plus its drills, and the file defining them resolves
    // (it imports ibsm/v1/control.proto, registered by both sets).
    let spec = FabricSpec::parse("gen:fat-tree:4").expect("spec");
    let mut demo = Demo::start(&spec, 0).await.expect("demo starts");
    let ep = demo.members()[0].endpoint;
    let listed = services(ep).await;
    assert!(listed.iter().any(|s| s == "ibsm.v1.Control"), "{listed:?}");
    assert!(
        listed.iter().any(|s| s == "ibsm.demo.v1.Demo"),
        "{listed:?}"
    );
    match ask(
        ep,
        MessageRequest::FileContainingSymbol("ibsm.demo.v1.Demo".into()),
    )
    .await
    {
        MessageResponse::FileDescriptorResponse(f) => {
            assert!(!f.file_descriptor_proto.is_empty())
        }
        other => panic!("ibsm.demo.v1.Demo does not resolve: {other:?}"),
    }
    demo.stop().await;
}
