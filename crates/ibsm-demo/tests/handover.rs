//! The Handover RPC on the demo's three instances (priorities 10, 8, 6): the master
//! hands over to the best standby at once, the move sticks (the old master advertises a
//! priority below the new one and does not take mastership back), and SetPriority on
//! the old master ends that.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use ibsm_demo::demo::Demo;
use ibsm_proto::v1::control_client::ControlClient;
use ibsm_proto::v1::{GetStatusRequest, HandoverRequest, SetPriorityRequest, SmState, Status};
use ibsm_transport::FabricSpec;

async fn status(ep: SocketAddr) -> Option<Status> {
    let mut c = ControlClient::connect(format!("http://{ep}")).await.ok()?;
    Some(c.get_status(GetStatusRequest {}).await.ok()?.into_inner())
}

/// Waits until exactly one of `eps` is MASTER with the others STANDBY behind it.
async fn one_master(eps: &[SocketAddr], within: Duration) -> (usize, u64, Vec<Status>) {
    let deadline = Instant::now() + within;
    let mut last = Vec::new();
    while Instant::now() < deadline {
        let mut all = Vec::new();
        for ep in eps {
            all.push(status(*ep).await);
        }
        let masters: Vec<usize> = all
            .iter()
            .enumerate()
            .filter(|(_, s)| {
                s.as_ref()
                    .is_some_and(|s| s.state == SmState::Master as i32)
            })
            .map(|(i, _)| i)
            .collect();
        if let [m] = masters.as_slice() {
            let guid = all[*m].as_ref().map(|s| s.guid).unwrap_or(0);
            let follow = all.iter().enumerate().all(|(i, s)| {
                i == *m
                    || s.as_ref().is_some_and(|s| {
                        s.state == SmState::Standby as i32 && s.master_guid == guid
                    })
            });
            if follow {
                let all: Vec<Status> = all.into_iter().flatten().collect();
                return (*m, guid, all);
            }
        }
        last = all;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no single master with everyone following it: {last:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handover_rpc_moves_mastership_to_the_best_standby_and_it_sticks() {
    let spec = FabricSpec::parse("gen:fat-tree:4").expect("spec");
    let mut demo = Demo::start(&spec, 0).await.expect("demo starts");
    let eps: Vec<SocketAddr> = demo.members().iter().map(|m| m.endpoint).collect();

    let (m, _, _) = one_master(&eps, Duration::from_secs(30)).await;
    assert_eq!(m, 0, "the priority-10 instance is master");
    let best_guid = status(eps[1]).await.expect("status").guid;

    let mut c = ControlClient::connect(format!("http://{}", eps[0]))
        .await
        .expect("connect");
    // The master's periodic SMInfo queries (1 s) must have read the standbys.
    let deadline = Instant::now() + Duration::from_secs(20);
    let resp = loop {
        match c.handover(HandoverRequest { to_guid: 0 }).await {
            Ok(r) => break r.into_inner(),
            Err(e) if Instant::now() < deadline => {
                eprintln!("handover not yet possible: {e}");
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
            Err(e) => panic!("Handover RPC: {e}"),
        }
    };
    assert_eq!(resp.target_guid, best_guid, "the best standby (priority 8)");
    eprintln!("handover outcome: {}", resp.outcome);

    let (m, guid, all) = one_master(&eps, Duration::from_secs(30)).await;
    assert_eq!((m, guid), (1, best_guid), "the target is master");
    assert!(
        all.first().is_some_and(|s| s.priority < 8),
        "the old master advertises a priority below the target's 8: {all:#?}"
    );

    // It sticks: several master-poll intervals later, still the same.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let (m, _, _) = one_master(&eps, Duration::from_secs(10)).await;
    assert_eq!(m, 1, "mastership must not move back on its own");

    // The operator sets the old master's priority again: it takes mastership back.
    c.set_priority(SetPriorityRequest { priority: 10 })
        .await
        .expect("SetPriority");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (m, _, _) = one_master(&eps, Duration::from_secs(30)).await;
        if m == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "priority 10 did not win back");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    demo.stop().await;
}
