//! 3-node clusters in one process on 127.0.0.1: replication, epochs, partitions,
//! bootstrap-once, membership changes, snapshot catch-up.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::*;
use ibsm_replica::{
    Command, ConfigChange, LidRange, Listen, Refusal, Replica, ReplicaConfig, ReplicaError, Role,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_nodes_replicate_and_refuse_stale_epochs() -> Result<(), ReplicaError> {
    let nodes = cluster(&[1, 2, 3], timers()).await;
    let refs: Vec<&Node> = nodes.iter().collect();
    let li = leader(&refs).await?;
    let follower = &nodes[(li + 1) % 3];
    // A follower's write is forwarded to the leader.
    let epoch = follower.replica.claim_mastership(0x11).await?;
    assert_eq!(epoch, 1);
    let r = follower.replica.write(set_lid(epoch, 0xA, 7)).await?;
    nodes[li]
        .replica
        .write(Command::Config(ConfigChange::Set {
            key: "sweep_interval".into(),
            value: "10".into(),
        }))
        .await?;
    // A second master takes over: epoch 2; the first master's writes are now refused.
    let e2 = nodes[li].replica.claim_mastership(0x22).await?;
    assert_eq!(e2, 2);
    match follower.replica.write(set_lid(epoch, 0xB, 8)).await {
        Err(ReplicaError::Refused(Refusal::StaleEpoch {
            carried: 1,
            current: 2,
        })) => {}
        other => panic!("stale write was not refused: {other:?}"),
    }
    match follower
        .replica
        .write(Command::ClaimMastership {
            epoch: 2,
            sm_guid: 0x11,
        })
        .await
    {
        Err(ReplicaError::Refused(Refusal::StaleEpoch { .. })) => {}
        other => panic!("claim of a taken epoch was not refused: {other:?}"),
    }
    match follower.replica.write(set_lid(9, 0xB, 8)).await {
        Err(ReplicaError::Refused(Refusal::UnclaimedEpoch {
            carried: 9,
            current: 2,
        })) => {}
        other => panic!("write with an unclaimed epoch was not refused: {other:?}"),
    }
    let last = nodes[li].replica.write(set_lid(e2, 0xC, 9)).await?;
    assert!(last.log_index > r.log_index);
    for n in &nodes {
        wait_applied(n, last.log_index).await?;
        let s = n.replica.state();
        assert_eq!(s.epoch, 2);
        assert_eq!(s.master_guid, Some(0x22));
        assert_eq!(
            s.guid2lid.get(&0xA),
            Some(&LidRange {
                min_lid: 7,
                max_lid: 7
            })
        );
        assert_eq!(
            s.guid2lid.get(&0xB),
            None,
            "a refused write must not change state"
        );
        assert_eq!(
            s.guid2lid.get(&0xC),
            Some(&LidRange {
                min_lid: 9,
                max_lid: 9
            })
        );
        assert_eq!(
            s.config.get("sweep_interval").map(String::as_str),
            Some("10")
        );
    }
    // Each follower heard the leader's AppendEntries (the SM election's second
    // opinion on its master).
    let leader_id = nodes[li].replica.node_id();
    for (i, n) in nodes.iter().enumerate().filter(|(i, _)| *i != li) {
        let (_, from) = n
            .replica
            .leader_contact()
            .expect("a follower hears the leader");
        assert_eq!(from, leader_id, "node {i} names the leader");
    }
    shutdown_all(&nodes).await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn isolated_leader_cannot_commit_and_cluster_heals() -> Result<(), ReplicaError> {
    let nodes = cluster(&[1, 2, 3], timers()).await;
    let refs: Vec<&Node> = nodes.iter().collect();
    let li = leader(&refs).await?;
    let epoch = nodes[li].replica.claim_mastership(0x1).await?;
    nodes[li].replica.write(set_lid(epoch, 1, 1)).await?;

    let old = &nodes[li];
    old.replica.fault_switch().set_isolated(true);
    // The cut-off instance cannot commit.
    match old.replica.write(set_lid(epoch, 2, 2)).await {
        Err(ReplicaError::Timeout(_)) => {}
        other => panic!("isolated instance committed: {other:?}"),
    }
    // The two others elect a leader among themselves and keep committing.
    let rest: Vec<&Node> = nodes
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != li)
        .map(|(_, n)| n)
        .collect();
    let old_id = old.replica.node_id();
    rest[0]
        .replica
        .wait_metrics(WAIT, |m| m.leader.is_some() && m.leader != Some(old_id))
        .await?;
    let w = rest[0].replica.write(set_lid(epoch, 3, 3)).await?;
    assert!(!old.replica.state().guid2lid.contains_key(&3));

    // Heal: the old leader rejoins, follows, and gets what was committed without it.
    old.replica.fault_switch().set_isolated(false);
    wait_applied(old, w.log_index).await?;
    let s = old.replica.state();
    assert!(s.guid2lid.contains_key(&3));
    let w2 = old.replica.write(set_lid(epoch, 4, 4)).await?;
    for n in &nodes {
        wait_applied(n, w2.log_index).await?;
        let s = n.replica.state();
        assert!(
            s.guid2lid.contains_key(&1)
                && s.guid2lid.contains_key(&3)
                && s.guid2lid.contains_key(&4)
        );
    }
    shutdown_all(&nodes).await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cluster_bootstraps_once() -> Result<(), ReplicaError> {
    let dir = tempfile::tempdir().expect("tempdir");
    let start = |listen: Listen, addr: String| {
        let members = BTreeMap::from([(1u64, addr.clone())]);
        Replica::start(ReplicaConfig {
            node_id: 1,
            grpc_addr: addr,
            listen,
            initial_members: members,
            data_dir: dir.path().to_path_buf(),
            timers: timers(),
            peer_tls: None,
            peer_auth: common::test_auth(),
            force_bootstrap: false,
        })
    };
    let (l, a) = bind().await;
    let r = start(Listen::Listener(l), a.clone()).await?;
    assert!(r.bootstrapped(), "first start must bootstrap");
    r.wait_metrics(WAIT, |m| m.role == Role::Leader).await?;
    let e = r.claim_mastership(7).await?;
    let w = r.write(set_lid(e, 5, 5)).await?;
    r.shutdown().await?;
    drop(r);
    // Same command line again: no second bootstrap, the state is still there.
    let (l, a2) = bind().await;
    let r = start(Listen::Listener(l), a2).await;
    // Address changed: the membership keeps the old address, still one voter.
    let r = r?;
    assert!(!r.bootstrapped(), "a restart must not bootstrap again");
    assert!(r
        .raft()
        .is_initialized()
        .await
        .map_err(|e| ReplicaError::Raft(e.to_string()))?);
    // The state machine is rebuilt from the log once the committed entries re-apply.
    r.wait_metrics(WAIT, |m| m.last_applied.is_some_and(|a| a >= w.log_index))
        .await?;
    let s = r.state();
    assert_eq!(
        s.guid2lid.get(&5),
        Some(&LidRange {
            min_lid: 5,
            max_lid: 5
        })
    );
    assert_eq!((s.epoch, s.master_guid), (1, Some(7)));
    assert_eq!(r.metrics().voters.len(), 1);
    // A non-lowest member never bootstraps.
    let (l3, a3) = bind().await;
    let d3 = tempfile::tempdir().expect("tempdir");
    let r3 = Replica::start(ReplicaConfig {
        node_id: 3,
        grpc_addr: a3.clone(),
        listen: Listen::Listener(l3),
        initial_members: BTreeMap::from([(2, "127.0.0.1:1".to_string()), (3, a3)]),
        data_dir: d3.path().to_path_buf(),
        timers: timers(),
        peer_tls: None,
        peer_auth: common::test_auth(),
        force_bootstrap: false,
    })
    .await?;
    assert!(!r3.bootstrapped());
    assert!(!r3
        .raft()
        .is_initialized()
        .await
        .map_err(|e| ReplicaError::Raft(e.to_string()))?);
    r3.shutdown().await?;
    r.shutdown().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn new_member_catches_up_from_snapshot_and_members_are_removed() -> Result<(), ReplicaError> {
    let mut t = timers();
    t.logs_kept_after_snapshot = 0;
    let mut nodes = cluster(&[1, 2, 3], t.clone()).await;
    let refs: Vec<&Node> = nodes.iter().collect();
    let li = leader(&refs).await?;
    let epoch = nodes[li].replica.claim_mastership(0x1).await?;
    let mut last = 0;
    for g in 1..=50u64 {
        last = nodes[li]
            .replica
            .write(set_lid(epoch, g, g as u16))
            .await?
            .log_index;
    }
    // Snapshot then purge the log on every node: a newcomer can only catch up from a snapshot.
    for n in &nodes {
        wait_applied(n, last).await?;
        n.replica.trigger_snapshot().await?;
        n.replica
            .wait_metrics(WAIT, |m| m.snapshot_index.is_some_and(|s| s >= last))
            .await?;
        n.replica.purge_log(last).await?;
        n.replica
            .wait_metrics(WAIT, |m| m.purged_index.is_some_and(|p| p >= last))
            .await?;
    }
    let new = joiner(4, t.clone()).await;
    // A follower does not forward membership changes: it names the leader.
    let follower = (li + 1) % 3;
    match nodes[follower]
        .replica
        .add_member(4, new.addr.clone())
        .await
    {
        Err(ReplicaError::NotLeader {
            leader: Some((id, _)),
        }) => assert_eq!(id, nodes[li].replica.node_id()),
        other => panic!("a follower ran or forwarded a membership change: {other:?}"),
    }
    nodes[li].replica.add_member(4, new.addr.clone()).await?;
    let m = new
        .replica
        .wait_metrics(WAIT, |m| m.last_applied.is_some_and(|a| a >= last))
        .await?;
    assert!(
        m.snapshot_index.is_some_and(|s| s >= last),
        "caught up without a snapshot: {m:?}"
    );
    assert_eq!(new.replica.state().guid2lid.len(), 50);
    assert_eq!(new.replica.state(), nodes[li].replica.state());
    let m = nodes[li].replica.metrics();
    assert!(m.voters.contains_key(&4), "node 4 is not a voter: {m:?}");
    // The newcomer is a voter: a write after it joined reaches it.
    let w = nodes[li].replica.write(set_lid(epoch, 51, 51)).await?;
    wait_applied(&new, w.log_index).await?;

    // Remove a member at run time (from another node), then the newcomer.
    let victim = (li + 2) % 3;
    let victim_id = nodes[victim].replica.node_id();
    nodes[li].replica.remove_member(victim_id).await?;
    nodes[li].replica.remove_member(4).await?;
    let m = nodes[li]
        .replica
        .wait_metrics(WAIT, |m| {
            !m.voters.contains_key(&victim_id) && !m.voters.contains_key(&4)
        })
        .await?;
    assert_eq!(m.voters.len(), 2, "{m:?}");
    assert!(m.learners.is_empty(), "{m:?}");
    // The two remaining voters still commit.
    let removed = nodes.remove(victim);
    removed.replica.shutdown().await?;
    new.replica.shutdown().await?;
    let refs: Vec<&Node> = nodes.iter().collect();
    let li = leader(&refs).await?;
    nodes[li].replica.write(set_lid(epoch, 52, 52)).await?;
    shutdown_all(&nodes).await;
    tokio::time::sleep(Duration::from_millis(10)).await;
    Ok(())
}
