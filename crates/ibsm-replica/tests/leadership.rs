//! Raft leadership moved to a chosen voter (`Replica::request_leadership`, the SM
//! master's member asking for it) on a real 3-node cluster over loopback: the voter
//! becomes leader, and every committed entry is kept.

mod common;

use std::time::Duration;

use common::*;
use ibsm_replica::{Leadership, ReplicaError, Role};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_follower_that_asks_becomes_leader_and_keeps_committed_entries(
) -> Result<(), ReplicaError> {
    let nodes = cluster(&[1, 2, 3], timers()).await;
    let refs: Vec<&Node> = nodes.iter().collect();
    let li = leader(&refs).await?;
    let old_leader = nodes[li].replica.node_id();
    // Committed before the move, through the old leader.
    let epoch = nodes[li].replica.claim_mastership(0x11).await?;
    let mut last = 0;
    for i in 0..20u16 {
        last = nodes[li]
            .replica
            .write(set_lid(epoch, 0x100 + u64::from(i), 1 + i))
            .await?
            .log_index;
    }
    let b = &nodes[(li + 1) % 3];
    wait_applied(b, last).await?;
    let term_before = b.replica.metrics().term;

    let outcome = b.replica.request_leadership().await?;
    assert_eq!(outcome, Leadership::Elected, "node {}", b.replica.node_id());
    let m = b.replica.metrics();
    assert_eq!(m.role, Role::Leader);
    assert!(m.term > term_before, "a new term: {m:?}");
    // Every member follows the new leader, and the old one resumes as a follower.
    for n in &nodes {
        n.replica
            .wait_metrics(WAIT, |m| m.leader == Some(b.replica.node_id()))
            .await?;
    }
    assert_ne!(
        nodes[li].replica.metrics().role,
        Role::Leader,
        "old leader {old_leader} stepped aside"
    );
    // Asking again is a no-op.
    assert_eq!(
        b.replica.request_leadership().await?,
        Leadership::AlreadyLeader
    );
    // Committed entries are kept, and the new leader commits more (the old leader's
    // epoch still holds: leadership moved, mastership did not).
    let after = b.replica.write(set_lid(epoch, 0x999, 999)).await?;
    assert!(after.log_index > last);
    for n in &nodes {
        wait_applied(n, after.log_index).await?;
        n.replica.with_state(|s| {
            for i in 0..20u16 {
                assert_eq!(
                    s.guid2lid.get(&(0x100 + u64::from(i))).map(|r| r.min_lid),
                    Some(1 + i),
                    "node {}: entry {i} lost",
                    n.replica.node_id()
                );
            }
            assert!(s.guid2lid.contains_key(&0x999));
        });
    }
    // The old leader's heartbeats were resumed: the cluster stays stable under the
    // new leader for several election timeouts (no spurious election).
    let term = b.replica.metrics().term;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let m = b.replica.metrics();
    assert_eq!((m.role, m.term), (Role::Leader, term), "leadership held");
    shutdown_all(&nodes).await;
    Ok(())
}

/// The contrast that makes the request cooperative: a follower that only triggers an
/// election while the leader is healthy does not become leader (the voters' leader
/// lease refuses it). If openraft ever changes that, the cooperative pause may no
/// longer be needed.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_bare_election_trigger_does_not_take_leadership_from_a_healthy_leader(
) -> Result<(), ReplicaError> {
    let nodes = cluster(&[1, 2, 3], timers()).await;
    let refs: Vec<&Node> = nodes.iter().collect();
    let li = leader(&refs).await?;
    let b = &nodes[(li + 1) % 3];
    b.replica
        .raft()
        .trigger()
        .elect()
        .await
        .map_err(|e| ReplicaError::Raft(e.to_string()))?;
    // The candidate is refused; an election follows and someone leads again.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_ne!(
        b.replica.metrics().role,
        Role::Leader,
        "refused by the lease"
    );
    shutdown_all(&nodes).await;
    Ok(())
}
