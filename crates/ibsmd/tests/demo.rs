//! The demo's three instances in-process, checked over gRPC like ibsmctl would.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use ibsm_proto::v1::control_client::ControlClient;
use ibsm_proto::v1::{GetStatusRequest, ListSmsRequest, SetPriorityRequest, SmState, Status};
use ibsm_transport::FabricSpec;
use ibsmd::demo::Demo;

async fn status(ep: SocketAddr) -> Option<Status> {
    let mut c = ControlClient::connect(format!("http://{ep}")).await.ok()?;
    Some(c.get_status(GetStatusRequest {}).await.ok()?.into_inner())
}

/// Waits (generously) until exactly one of `eps` is MASTER and the others STANDBY
/// behind it; returns the master's endpoint index and GUID.
async fn one_master(eps: &[SocketAddr]) -> (usize, u64) {
    let deadline = Instant::now() + Duration::from_secs(30);
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
            let others_follow = all.iter().enumerate().all(|(i, s)| {
                i == *m
                    || s.as_ref().is_some_and(|s| {
                        s.state == SmState::Standby as i32 && s.master_guid == guid
                    })
            });
            if others_follow && all[*m].as_ref().is_some_and(|s| s.master_guid == guid) {
                return (*m, guid);
            }
        }
        last = all;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no single master with everyone following it: {last:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_elects_one_master_and_fails_over() {
    let spec = FabricSpec::parse("gen:fat-tree:4").expect("spec");
    let mut demo = Demo::start(&spec, 0).await.expect("demo starts");
    let eps: Vec<SocketAddr> = demo.members.iter().map(|m| m.endpoint).collect();

    let (m, guid) = one_master(&eps).await;
    // Priorities 10, 8, 6: the first is the one to win.
    assert_eq!(m, 0, "the priority-10 instance must be master");

    // ListSms on a standby sees all three SMs and the master as MASTER.
    let mut c = ControlClient::connect(format!("http://{}", eps[1]))
        .await
        .expect("connect");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let sms = c
            .list_sms(ListSmsRequest {})
            .await
            .expect("ListSms")
            .into_inner()
            .sms;
        let master_seen = sms
            .iter()
            .any(|e| e.guid == guid && e.state == SmState::Master as i32);
        if sms.len() == 3 && master_seen && sms.iter().filter(|e| e.is_self).count() == 1 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "ListSms never showed 3 SMs: {sms:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // Invalid input is refused precisely.
    let err = c
        .set_priority(SetPriorityRequest { priority: 16 })
        .await
        .expect_err("priority 16 refused");
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    assert!(err.message().contains("16"), "{}", err.message());

    // The master configured its own port: it has a LID and its CA port is Active.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let s = status(eps[0]).await.expect("status");
        if s.lid != 0 && s.master_lid == s.lid {
            break;
        }
        assert!(Instant::now() < deadline, "master never got a LID: {s:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Every CA port of the fabric is Active with a unique LID and MasterSMLID = master.
    let topo = spec.topology().expect("topology").expect("embedded");
    let master_lid = status(eps[0]).await.expect("status").lid as u16;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let ports: Vec<(u16, u16, bool)> = topo
            .iter()
            .filter(|(_, n)| !n.is_switch())
            .filter_map(|(idx, _)| {
                demo.sim
                    .with_sim(|s| s.port_info(idx, 1).ok())
                    .ok()
                    .flatten()
                    .map(|pi| {
                        (
                            pi.lid,
                            pi.master_sm_lid,
                            pi.port_state == ibsm_mad::PortState::Active,
                        )
                    })
            })
            .collect();
        let lids: std::collections::BTreeSet<u16> = ports.iter().map(|p| p.0).collect();
        let done = !ports.is_empty()
            && ports
                .iter()
                .all(|&(lid, m, active)| lid != 0 && m == master_lid && active)
            && lids.len() == ports.len();
        if done {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "CA ports not configured: {ports:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Kill the master: the priority-8 instance takes over, the last follows it.
    demo.members[0].kill().await;
    let (m2, guid2) = one_master(&eps[1..]).await;
    assert_eq!(m2, 0, "the priority-8 instance must take over");
    assert_ne!(guid2, guid);
    demo.stop().await;
}
