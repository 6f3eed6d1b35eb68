//! The demo's three instances in-process, checked over gRPC like ibsmctl would.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use ibsm_demo::demo::Demo;
use ibsm_proto::demo::v1::demo_client::DemoClient;
use ibsm_proto::demo::v1::{KillInstanceRequest, ListInstancesRequest, RestartInstanceRequest};
use ibsm_proto::v1::control_client::ControlClient;
use ibsm_proto::v1::{GetStatusRequest, ListSmsRequest, SetPriorityRequest, SmState, Status};
use ibsm_transport::FabricSpec;

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
    let eps: Vec<SocketAddr> = demo.members().iter().map(|m| m.endpoint).collect();

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

    // Drill over gRPC, as `ibsmctl drill kill-master` does: kill the master through a
    // standby's endpoint; the priority-8 instance takes over, the last follows it.
    let mut drill = DemoClient::connect(format!("http://{}", eps[2]))
        .await
        .expect("connect");
    let killed = drill
        .kill_instance(KillInstanceRequest {
            master: true,
            ..Default::default()
        })
        .await
        .expect("KillInstance")
        .into_inner();
    assert_eq!(killed.name, "sm1");
    assert_eq!(killed.guid, guid);
    assert_eq!(
        killed.state,
        SmState::Master as i32,
        "state before the kill"
    );
    assert!(!killed.running);
    // The killed endpoint stays up but its SM is gone.
    let e = ControlClient::connect(format!("http://{}", eps[0]))
        .await
        .expect("endpoint stays up")
        .get_status(GetStatusRequest {})
        .await
        .expect_err("killed instance answers UNAVAILABLE");
    assert_eq!(e.code(), tonic::Code::Unavailable, "{e}");
    let (m2, guid2) = one_master(&eps[1..]).await;
    assert_eq!(m2, 0, "the priority-8 instance must take over");
    assert_ne!(guid2, guid);

    // Killing it twice, or an unknown name, is refused precisely.
    let e = drill
        .kill_instance(KillInstanceRequest {
            name: "sm1".into(),
            ..Default::default()
        })
        .await
        .expect_err("already stopped");
    assert_eq!(e.code(), tonic::Code::FailedPrecondition, "{e}");
    let e = drill
        .kill_instance(KillInstanceRequest {
            name: "sm9".into(),
            ..Default::default()
        })
        .await
        .expect_err("unknown");
    assert_eq!(e.code(), tonic::Code::NotFound, "{e}");
    let e = drill
        .kill_instance(KillInstanceRequest::default())
        .await
        .expect_err("no selector");
    assert_eq!(e.code(), tonic::Code::InvalidArgument, "{e}");

    // Restart sm1: it comes back on the same GUID and, with priority 10, is master again.
    let back = drill
        .restart_instance(RestartInstanceRequest { name: "sm1".into() })
        .await
        .expect("RestartInstance")
        .into_inner();
    assert_eq!(back.endpoint, eps[0].to_string());
    // It first joins as STANDBY; the master's next sweep reads its SMInfo and, being
    // outranked, hands over to it. (sm3 may keep polling sm2, now a higher-priority
    // STANDBY: the election counts that as alive, as OpenSM does; so only sm1 and sm2
    // are checked here.)
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let s1 = status(eps[0]).await;
        let s2 = status(eps[1]).await;
        let sm1_master = s1
            .as_ref()
            .is_some_and(|s| s.state == SmState::Master as i32 && s.guid == guid);
        let sm2_follows = s2
            .as_ref()
            .is_some_and(|s| s.state == SmState::Standby as i32 && s.master_guid == guid);
        if sm1_master && sm2_follows {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "restarted sm1 never won again: {s1:?} {s2:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let list = drill
        .list_instances(ListInstancesRequest {})
        .await
        .expect("ListInstances")
        .into_inner()
        .instances;
    assert_eq!(list.len(), 3);
    assert!(list.iter().all(|i| i.running), "{list:?}");
    demo.stop().await;
}

/// GET /metrics over a raw TCP connection; returns the body.
async fn scrape(addr: SocketAddr) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut c = tokio::net::TcpStream::connect(addr).await.expect("connect");
    c.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .expect("write");
    let mut resp = String::new();
    c.read_to_string(&mut resp).await.expect("read");
    let (head, body) = resp.split_once("\r\n\r\n").expect("http response");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(head.contains(ibsmd::metrics::CONTENT_TYPE), "{head}");
    body.to_string()
}

fn sample(body: &str, series: &str) -> f64 {
    body.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no sample {series} in\n{body}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_metrics_move() {
    let spec = FabricSpec::parse("gen:fat-tree:4").expect("spec");
    let mut demo = Demo::start(&spec, 0).await.expect("demo starts");
    let members = demo.members();
    let eps: Vec<SocketAddr> = members.iter().map(|m| m.endpoint).collect();
    let (addr, serve) = ibsmd::metrics::bind(
        demo.metrics_instances(),
        SocketAddr::from(([127, 0, 0, 1], 0)),
        std::future::pending(),
    )
    .await
    .expect("metrics bind");
    let server = tokio::spawn(serve);
    let (m, _) = one_master(&eps).await;
    assert_eq!(m, 0);
    // Let the published snapshot catch up with the state seen over gRPC.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let first = scrape(addr).await;
    assert_eq!(sample(&first, "ibsm_sm_state{sm=\"sm1\"}"), 3.0);
    assert_eq!(sample(&first, "ibsm_sm_state{sm=\"sm2\"}"), 2.0);
    assert_eq!(sample(&first, "ibsm_failovers_total{sm=\"sm1\"}"), 1.0);
    assert_eq!(sample(&first, "ibsm_failovers_total{sm=\"sm2\"}"), 0.0);
    assert_eq!(sample(&first, "ibsm_up{sm=\"sm3\"}"), 1.0);
    assert!(sample(&first, "ibsm_sweeps_total{sm=\"sm1\",kind=\"heavy\"}") >= 1.0);
    assert!(sample(&first, "ibsm_mads_sent_total{sm=\"sm1\"}") > 0.0);
    assert!(
        sample(
            &first,
            "ibsm_sweep_phase_seconds{sm=\"sm1\",phase=\"discover\"}"
        ) >= 0.0
    );
    let act1 = sample(&first, "ibsm_act_count{sm=\"sm1\"}");
    let sent1 = sample(&first, "ibsm_mads_sent_total{sm=\"sm1\"}");
    // The master's light sweeps (every 2 s) keep ActCount moving.
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = scrape(addr).await;
        let act = sample(&now, "ibsm_act_count{sm=\"sm1\"}");
        let sent = sample(&now, "ibsm_mads_sent_total{sm=\"sm1\"}");
        let light = sample(&now, "ibsm_sweeps_total{sm=\"sm1\",kind=\"light\"}");
        if act > act1 && sent > sent1 && light >= 1.0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "ActCount stuck at {act1}:\n{now}"
        );
    }
    // Kill the master: sm2 counts a failover, sm1 reports down.
    demo.kill(&ibsm_demo::demo::Selector::Master)
        .await
        .expect("kill");
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let now = scrape(addr).await;
        if sample(&now, "ibsm_sm_state{sm=\"sm2\"}") == 3.0 {
            assert_eq!(sample(&now, "ibsm_failovers_total{sm=\"sm2\"}"), 1.0);
            assert_eq!(sample(&now, "ibsm_up{sm=\"sm1\"}"), 0.0);
            assert_eq!(sample(&now, "ibsm_sm_state{sm=\"sm1\"}"), 0.0);
            break;
        }
        assert!(Instant::now() < deadline, "sm2 never became master:\n{now}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    server.abort();
    demo.stop().await;
}
