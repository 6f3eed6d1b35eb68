//! Replication at the daemon level, on the in-process demo (three SM instances on an
//! embedded fabric, three replicas forming one Raft cluster on their gRPC ports):
//!
//! - one instance cut off from the others' gRPC (its replica's fault switch: no Raft
//!   RPC in or out) cannot commit; when it is the SM master it keeps running the
//!   fabric (the SMInfo election is on the fabric, not on gRPC), shows "degraded" in
//!   GetStatus, and when the cut heals its replica catches up, the flag clears and what
//!   it swept meanwhile is replicated (reconciled);
//! - the other two keep committing while it is cut off;
//! - `ibsm.v1.Cluster`: list, remove and add a member at run time; the re-added
//!   member catches up from a snapshot (the log it missed was purged).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use ibsm_demo::demo::Demo;
use ibsm_proto::v1::cluster_client::ClusterClient;
use ibsm_proto::v1::control_client::ControlClient;
use ibsm_proto::v1::{
    AddMemberRequest, GetStatusRequest, ListMembersRequest, RemoveMemberRequest, SmState, Status,
    SweepRequest,
};
use ibsm_replica::{Command, ConfigChange, ReplicaError};
use ibsm_transport::FabricSpec;

async fn status(ep: SocketAddr) -> Status {
    let mut c = ControlClient::connect(format!("http://{ep}"))
        .await
        .expect("connect");
    c.get_status(GetStatusRequest {})
        .await
        .expect("GetStatus")
        .into_inner()
}

async fn wait_for<F: Fn(&[Status]) -> bool>(
    eps: &[SocketAddr],
    what: &str,
    pred: F,
) -> Vec<Status> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let mut all = Vec::new();
        for ep in eps {
            all.push(status(*ep).await);
        }
        if pred(&all) {
            return all;
        }
        if Instant::now() > deadline {
            panic!("{what}: not within 30 s: {all:#?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A replicated probe entry. Members forward only the daemon's own config families
/// (the Raft service refuses the rest), so the probes are SM registration keys:
/// `name` picks the key, `value` (a node-id-shaped number) is what is written.
fn config(name: &str, value: &str) -> Command {
    Command::Config(ConfigChange::Set {
        key: probe_key(name),
        value: probe_value(value).into(),
    })
}

fn probe_key(name: &str) -> String {
    let g = name.bytes().fold(0x1b5_u64, |h, b| {
        h.wrapping_mul(31).wrapping_add(u64::from(b))
    });
    ibsm_replica::config_keys::sm_node_key(g)
}

fn probe_value(v: &str) -> &'static str {
    match v {
        "isolated" => "101",
        "majority" => "102",
        "yes" => "103",
        _ => "104",
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_master_cut_off_from_the_cluster_runs_degraded_and_reconciles_after() {
    let spec = FabricSpec::parse("gen:fat-tree:4").expect("spec");
    let mut demo = Demo::start(&spec, 0).await.expect("demo starts");
    let eps: Vec<SocketAddr> = demo.members().iter().map(|m| m.endpoint).collect();
    // One master holding a committed epoch, everyone on it.
    let all = wait_for(&eps, "a settled master", |all| {
        let masters: Vec<&Status> = all
            .iter()
            .filter(|s| s.state == SmState::Master as i32)
            .collect();
        masters.len() == 1
            && masters[0].epoch > 0
            && !masters[0].degraded
            && all
                .iter()
                .all(|s| s.epoch == masters[0].epoch && s.raft_leader != 0)
    })
    .await;
    let m = all
        .iter()
        .position(|s| s.state == SmState::Master as i32)
        .expect("master");
    let epoch = all[m].epoch;
    let repl = demo.replicas()[m].clone();
    // The epoch is claimed before the sweep's record is written: wait for the record.
    let deadline = Instant::now() + Duration::from_secs(30);
    let links_before = loop {
        let n = repl
            .replica()
            .with_state(|s| s.topology.as_ref().map_or(0, |t| t.links.len()));
        if n > 0 {
            break n;
        }
        assert!(
            Instant::now() < deadline,
            "the master replicated its topology"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };

    // Cut the master's replica off.
    repl.replica().fault_switch().set_isolated(true);
    // It cannot commit...
    match repl.replica().write(config("probe", "isolated")).await {
        Err(ReplicaError::Timeout(_)) => {}
        other => panic!("an isolated replica committed or failed oddly: {other:?}"),
    }
    // ...while the other two still can.
    let other = demo.replicas()[(m + 1) % 3].clone();
    other
        .replica()
        .write(config("probe", "majority"))
        .await
        .expect("the majority side commits");
    // The fabric changes while the master is cut off (the cable of hca-1 goes
    // down): it sweeps, keeps running the fabric, keeps what it found to reconcile
    // later, and says it is degraded.
    let topo = spec.topology().expect("topology").expect("embedded");
    let (hca, _) = topo
        .iter()
        .find(|(_, n)| n.name == "hca-1")
        .expect("hca-1 in a k=4 fat tree");
    demo.sim
        .with_sim(|s| s.link_down(hca, 1))
        .expect("sim")
        .expect("link down");
    let mut ctl = ControlClient::connect(format!("http://{}", eps[m]))
        .await
        .expect("connect");
    ctl.sweep(SweepRequest { heavy: true })
        .await
        .expect("sweep");
    let all = wait_for(&eps, "the cut-off master shows degraded", |all| {
        all[m].state == SmState::Master as i32 && all[m].degraded
    })
    .await;
    assert!(
        all.iter()
            .enumerate()
            .all(|(i, s)| i == m || s.state == SmState::Standby as i32),
        "the fabric keeps its master: {all:#?}"
    );
    assert_eq!(
        repl.replica()
            .with_state(|s| s.config.get(&probe_key("probe")).cloned()),
        None,
        "the isolated write must not have applied on the isolated replica"
    );

    // Heal: the replica catches up, the flag clears and the sweep made while cut off
    // is replicated everywhere.
    repl.replica().fault_switch().set_isolated(false);
    wait_for(&eps, "degraded clears after the heal", |all| {
        !all[m].degraded && all[m].state == SmState::Master as i32 && all[m].epoch >= epoch
    })
    .await;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let links: Vec<usize> = demo
            .replicas()
            .iter()
            .map(|r| {
                r.replica()
                    .with_state(|s| s.topology.as_ref().map_or(0, |t| t.links.len()))
            })
            .collect();
        let probe: Vec<Option<String>> = demo
            .replicas()
            .iter()
            .map(|r| {
                r.replica()
                    .with_state(|s| s.config.get(&probe_key("probe")).cloned())
            })
            .collect();
        if links.iter().all(|l| *l + 1 == links_before)
            && probe
                .iter()
                .all(|p| p.as_deref() == Some(probe_value("majority")))
        {
            break;
        }
        if Instant::now() > deadline {
            panic!("not reconciled after the heal: links {links:?} (before {links_before}), probe {probe:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    demo.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_are_listed_removed_and_added_at_run_time() {
    let spec = FabricSpec::parse("gen:fat-tree:4").expect("spec");
    let mut demo = Demo::start(&spec, 0).await.expect("demo starts");
    let eps: Vec<SocketAddr> = demo.members().iter().map(|m| m.endpoint).collect();
    let mut c = ClusterClient::connect(format!("http://{}", eps[0]))
        .await
        .expect("connect");
    let deadline = Instant::now() + Duration::from_secs(30);
    let list = loop {
        let l = c
            .list_members(ListMembersRequest {})
            .await
            .expect("ListMembers")
            .into_inner();
        if l.leader != 0 {
            break l;
        }
        assert!(Instant::now() < deadline, "no Raft leader: {l:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(list.members.len(), 3, "{list:?}");
    assert!(list.members.iter().all(|m| m.voter), "{list:?}");
    let addr3 = list
        .members
        .iter()
        .find(|m| m.node_id == 3)
        .expect("node 3")
        .addr
        .clone();
    // Bad requests are refused with a reason.
    let e = c
        .remove_member(RemoveMemberRequest { node_id: 9 })
        .await
        .expect_err("unknown node");
    assert_eq!(e.code(), tonic::Code::NotFound, "{e}");
    let e = c
        .add_member(AddMemberRequest {
            node_id: 4,
            addr: "nowhere".into(),
        })
        .await
        .expect_err("bad addr");
    assert_eq!(e.code(), tonic::Code::InvalidArgument, "{e}");

    // Membership changes run on the Raft leader: a follower refuses them and names it
    // (it never forwards them). Remove node 3 through the leader, write while it is
    // out, add it back: it catches up.
    let leader_ep = eps[usize::try_from(list.leader - 1).expect("leader index")];
    let follower_ep = *eps.iter().find(|e| **e != leader_ep).expect("a follower");
    let mut cf = ClusterClient::connect(format!("http://{follower_ep}"))
        .await
        .expect("connect");
    let e = cf
        .remove_member(RemoveMemberRequest { node_id: 3 })
        .await
        .expect_err("a follower ran a membership change");
    assert_eq!(e.code(), tonic::Code::FailedPrecondition, "{e}");
    assert!(e.message().contains("Raft leader"), "{e}");
    let mut c2 = ClusterClient::connect(format!("http://{leader_ep}"))
        .await
        .expect("connect");
    let l = c2
        .remove_member(RemoveMemberRequest { node_id: 3 })
        .await
        .expect("RemoveMember")
        .into_inner();
    assert!(l.members.iter().all(|m| m.node_id != 3), "{l:?}");
    let written = demo.replicas()[0]
        .replica()
        .write(config("while-out", "yes"))
        .await
        .expect("two voters commit")
        .log_index;
    // Compact the log behind a snapshot on the two members: node 3 can then only
    // catch up from the snapshot. The master keeps writing meanwhile, so the snapshot
    // need only cover the write above, not the last applied entry.
    for r in &demo.replicas()[..2] {
        r.replica()
            .wait_metrics(Duration::from_secs(10), |m| {
                m.last_applied.is_some_and(|a| a >= written)
            })
            .await
            .expect("the write applied");
        r.replica().trigger_snapshot().await.expect("snapshot");
        let m = r
            .replica()
            .wait_metrics(Duration::from_secs(10), |m| {
                m.snapshot_index.is_some_and(|i| i >= written)
            })
            .await
            .expect("snapshot built");
        r.replica()
            .purge_log(m.snapshot_index.unwrap_or(0))
            .await
            .expect("purge");
    }
    // Add it back through whichever of the two remaining members leads now.
    let deadline = Instant::now() + Duration::from_secs(20);
    let l = 'add: loop {
        for ep in &eps[..2] {
            let mut ci = ClusterClient::connect(format!("http://{ep}"))
                .await
                .expect("connect");
            match ci
                .add_member(AddMemberRequest {
                    node_id: 3,
                    addr: addr3.clone(),
                })
                .await
            {
                Ok(l) => break 'add l.into_inner(),
                Err(e) if e.code() == tonic::Code::FailedPrecondition => {}
                Err(e) => panic!("AddMember on {ep}: {e}"),
            }
        }
        assert!(Instant::now() < deadline, "no leader took AddMember");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(l.members.iter().any(|m| m.node_id == 3 && m.voter), "{l:?}");
    let deadline = Instant::now() + Duration::from_secs(30);
    while demo.replicas()[2]
        .replica()
        .with_state(|s| s.config.get(&probe_key("while-out")).cloned())
        .is_none()
    {
        assert!(Instant::now() < deadline, "node 3 never caught up");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let m3 = demo.replicas()[2].metrics();
    assert!(
        m3.snapshot_index.is_some(),
        "node 3 caught up without installing a snapshot: {m3:?}"
    );
    demo.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_planned_handover_waits_for_the_targets_replica() {
    let spec = FabricSpec::parse("gen:fat-tree:4").expect("spec");
    let mut demo = Demo::start(&spec, 0).await.expect("demo starts");
    let eps: Vec<SocketAddr> = demo.members().iter().map(|m| m.endpoint).collect();
    let all = wait_for(&eps, "a settled master, every SM registered", |all| {
        all.iter()
            .filter(|s| s.state == SmState::Master as i32)
            .count()
            == 1
            && all.iter().all(|s| s.epoch > 0 && s.raft_leader != 0)
    })
    .await;
    let m = all
        .iter()
        .position(|s| s.state == SmState::Master as i32)
        .expect("master");
    let t = (m + 1) % 3;
    let target_guid = all[t].guid;
    // Every SM's GUID -> node id is in the replicated config.
    let deadline = Instant::now() + Duration::from_secs(30);
    while demo.replicas()[m].replica().with_state(|s| {
        all.iter()
            .filter(|x| {
                s.config
                    .contains_key(&ibsmd::replication::sm_node_key(x.guid))
            })
            .count()
    }) < 3
    {
        assert!(Instant::now() < deadline, "SM GUIDs never registered");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The target's replica is cut off and misses a write: no handover to it.
    demo.replicas()[t]
        .replica()
        .fault_switch()
        .set_isolated(true);
    demo.replicas()[m]
        .replica()
        .write(config("before-handover", "1"))
        .await
        .expect("the two others commit");
    let mut ctl = ControlClient::connect(format!("http://{}", eps[m]))
        .await
        .expect("connect");
    let e = ctl
        .handover(ibsm_proto::v1::HandoverRequest {
            to_guid: target_guid,
        })
        .await
        .expect_err("handover to a lagging replica");
    assert_eq!(e.code(), tonic::Code::FailedPrecondition, "{e}");
    assert!(
        e.message().contains("caught up") || e.message().contains("applied"),
        "{e}"
    );
    assert_eq!(
        status(eps[m]).await.state,
        SmState::Master as i32,
        "still master after the refused handover"
    );
    // Healed, it catches up and the handover goes through.
    demo.replicas()[t]
        .replica()
        .fault_switch()
        .set_isolated(false);
    // Catching up takes as long as it takes on a loaded machine: the master refuses
    // (FailedPrecondition, "caught up") until then, and an operator retries.
    let deadline = Instant::now() + Duration::from_secs(30);
    let r = loop {
        match ctl
            .handover(ibsm_proto::v1::HandoverRequest {
                to_guid: target_guid,
            })
            .await
        {
            Ok(r) => break r.into_inner(),
            Err(e) if e.code() == tonic::Code::FailedPrecondition && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => panic!("handover once caught up: {e}"),
        }
    };
    assert_eq!(r.target_guid, target_guid);
    wait_for(&eps, "the target is master", |all| {
        all[t].state == SmState::Master as i32
    })
    .await;
    assert_eq!(
        demo.replicas()[t]
            .replica()
            .with_state(|s| s.config.get(&probe_key("before-handover")).cloned())
            .as_deref(),
        Some(probe_value("1"))
    );
    demo.stop().await;
}
