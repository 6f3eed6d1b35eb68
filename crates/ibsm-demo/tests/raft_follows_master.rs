//! Raft leadership follows the SM master (`ibsmd::replication` module doc): on the
//! demo's three replicated members (priorities 10, 8, 6; Raft node ids 1, 2, 3), with
//! the Raft leader moved to the third member first, a planned handover and a killed
//! master both end with the new SM master's member leading Raft, so the standbys'
//! leader-heartbeat second opinion speaks for it. Without the new master's request
//! the healthy third member would lead on indefinitely.
//!
//! Bounds are generous deadline loops expressed in Raft election timeouts, never
//! asserted timings.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ibsm_demo::demo::{Demo, Selector};
use ibsm_proto::v1::control_client::ControlClient;
use ibsm_proto::v1::{GetStatusRequest, HandoverRequest, SmState, Status};
use ibsm_replica::{Leadership, Role};
use ibsm_transport::FabricSpec;
use ibsmd::replication::Replication;

async fn status(ep: SocketAddr) -> Option<Status> {
    let mut c = ControlClient::connect(format!("http://{ep}")).await.ok()?;
    Some(c.get_status(GetStatusRequest {}).await.ok()?.into_inner())
}

/// The one MASTER among `eps` (by index) once its epoch is claimed, within `within`.
async fn master(eps: &[SocketAddr], not: Option<usize>, within: Duration) -> usize {
    let deadline = Instant::now() + within;
    loop {
        let mut masters = Vec::new();
        for (i, ep) in eps.iter().enumerate() {
            if let Some(s) = status(*ep).await {
                if s.state == SmState::Master as i32 && s.epoch > 0 && Some(i) != not {
                    masters.push(i);
                }
            }
        }
        if let [m] = masters.as_slice() {
            return *m;
        }
        assert!(
            Instant::now() < deadline,
            "no single new master: {masters:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// One Raft election timeout of the daemon's timers (the bound's unit).
fn election() -> Duration {
    ibsmd::replication::ClusterConfig::timers_for_daemon().election_max
}

/// Until every member's replica names `replicas[want]` leader (and it says so itself).
async fn wait_leader(replicas: &[Arc<Replication>], want: usize, timeouts: u32) {
    let node = replicas[want].replica().node_id();
    let deadline = Instant::now() + election() * timeouts;
    loop {
        let views: Vec<_> = replicas
            .iter()
            .map(|r| {
                let m = r.replica().metrics();
                (m.node_id, m.role, m.term, m.leader)
            })
            .collect();
        if replicas[want].replica().metrics().role == Role::Leader
            && views.iter().all(|v| v.3 == Some(node))
        {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "node {node} is not the Raft leader within {timeouts} election timeouts: {views:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Make `replicas[to]` the Raft leader (as an operator's test drill would), retrying
/// a lost vote a few times.
async fn move_leadership(replicas: &[Arc<Replication>], to: usize) {
    for _ in 0..5 {
        match replicas[to].replica().request_leadership().await {
            Ok(Leadership::Elected | Leadership::AlreadyLeader) => break,
            other => {
                eprintln!("moving leadership to member {to}: {other:?}");
                tokio::time::sleep(election()).await;
            }
        }
    }
    wait_leader(replicas, to, 10).await;
}

/// The settled start: member 0 (priority 10) is MASTER, its epoch applied on every
/// member; then Raft leadership moves to member 2 and stays there while member 0 is
/// master (the master asked once per mastership: it does not fight the cluster).
async fn start_with_leader_on_third() -> (Demo, Vec<SocketAddr>) {
    let spec = FabricSpec::parse("gen:fat-tree:4").expect("spec");
    let demo = Demo::start(&spec, 0).await.expect("demo starts");
    let eps: Vec<SocketAddr> = demo.members().iter().map(|m| m.endpoint).collect();
    assert_eq!(master(&eps, None, Duration::from_secs(30)).await, 0);
    let replicas = demo.replicas().to_vec();
    // The master's own request (or the bootstrap) made it leader.
    wait_leader(&replicas, 0, 40).await;
    move_leadership(&replicas, 2).await;
    let term = replicas[2].replica().metrics().term;
    tokio::time::sleep(election() * 4).await;
    let m = replicas[2].replica().metrics();
    assert_eq!(
        (m.role, m.term),
        (Role::Leader, term),
        "the SM master (member 0) left Raft leadership where the operator put it"
    );
    (demo, eps)
}

fn requests(demo: &Demo, i: usize) -> u64 {
    let text = ibsmd::metrics::render(&demo.metrics_instances()[i..=i]);
    text.lines()
        .find(|l| l.starts_with("ibsm_raft_leadership_requests_total{"))
        .and_then(|l| l.rsplit_once(' '))
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_handover_the_new_master_leads_raft() {
    let (mut demo, eps) = start_with_leader_on_third().await;
    let replicas = demo.replicas().to_vec();
    let before = requests(&demo, 1);
    // Planned handover from member 0 to the best standby (member 1, priority 8).
    let mut c = ControlClient::connect(format!("http://{}", eps[0]))
        .await
        .expect("connect");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match c.handover(HandoverRequest { to_guid: 0 }).await {
            Ok(_) => break,
            Err(e) if Instant::now() < deadline => {
                eprintln!("handover not yet possible: {e}");
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
            Err(e) => panic!("Handover RPC: {e}"),
        }
    }
    assert_eq!(master(&eps, Some(0), Duration::from_secs(30)).await, 1);
    wait_leader(&replicas, 1, 20).await;
    let s = status(eps[1]).await.expect("status");
    assert_eq!(s.raft_role, "leader", "GetStatus of the new master: {s:?}");
    assert_eq!(s.raft_leader, replicas[1].replica().node_id());
    assert!(
        requests(&demo, 1) > before,
        "the new master counted its request (ibsm_raft_leadership_requests_total)"
    );
    demo.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_the_master_is_killed_the_new_master_leads_raft() {
    let (mut demo, eps) = start_with_leader_on_third().await;
    let replicas = demo.replicas().to_vec();
    // The SM instance of member 0 dies (its replica lives on as a follower).
    demo.kill(&Selector::Name("sm1".into()))
        .await
        .expect("kill sm1");
    let eps_alive = [eps[1], eps[2]];
    let m = master(&eps_alive, None, Duration::from_secs(30)).await;
    assert_eq!(m, 0, "member 1 (priority 8) takes over");
    wait_leader(&replicas, 1, 20).await;
    demo.stop().await;
}
