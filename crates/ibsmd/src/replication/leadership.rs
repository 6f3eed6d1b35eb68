//! Raft leadership follows the SM master (module doc, "Raft leadership follows the SM
//! master"): once per mastership, after its epoch claim is applied locally, a master
//! whose member is a voter but not the leader asks for leadership
//! ([`Replica::request_leadership`]), a bounded number of times.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ibsm_replica::{Leadership, Replica, Role};

use super::shared::{lock, Shared};

/// Requests per mastership at most (one, plus retries after a lost vote).
pub const LEADERSHIP_TRIES: u32 = 3;

/// Whether the mastership `generation` is still this instance's, and no newer epoch
/// than its claim's has been applied here (another master claimed: deposed).
fn current(replica: &Replica, shared: &Mutex<Shared>, generation: u64, epoch: u64) -> bool {
    let ours = {
        let s = lock(shared);
        !s.stop && s.generation == generation && s.master_guid.is_some()
    };
    ours && replica.with_state(|s| s.epoch) <= epoch
}

/// Spawn [`follow_master`] for the mastership `generation`'s claim of `epoch`, unless
/// one already ran for that claim (a deposed master that claims again gets one more).
pub(super) fn spawn_for(
    replica: &Arc<Replica>,
    shared: &Arc<Mutex<Shared>>,
    generation: u64,
    epoch: u64,
) {
    {
        let mut s = lock(shared);
        if s.leadership_for == Some((generation, epoch)) {
            return;
        }
        s.leadership_for = Some((generation, epoch));
    }
    tokio::spawn(follow_master(
        Arc::clone(replica),
        Arc::clone(shared),
        generation,
        epoch,
    ));
}

/// The task (see the module doc). Never fights the cluster: it asks only while this
/// mastership lasts, at most [`LEADERSHIP_TRIES`] times, each try after the previous
/// one's election settled.
pub(super) async fn follow_master(
    replica: Arc<Replica>,
    shared: Arc<Mutex<Shared>>,
    generation: u64,
    epoch: u64,
) {
    let timers = replica.timers().clone();
    let settle = timers.election_min + timers.election_max;
    // The claim committed on the leader; wait for it here, so this member's log is as
    // up to date as the claim (a vote needs that).
    while replica.with_state(|s| s.epoch) < epoch {
        if !current(&replica, &shared, generation, epoch) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let mut tries = 0;
    while tries < LEADERSHIP_TRIES {
        if !current(&replica, &shared, generation, epoch) {
            return;
        }
        let m = replica.metrics();
        if m.role == Role::Leader {
            return;
        }
        if !m.voters.contains_key(&replica.node_id()) {
            tracing::info!(
                node_id = replica.node_id(),
                "Raft leadership: this MASTER's member is not a voter; leadership stays where it is"
            );
            return;
        }
        tries += 1;
        if m.leader.is_none() {
            // An election is under way: let it finish, then look again.
            tokio::time::sleep(settle).await;
            continue;
        }
        // The master's own record write renews the voters' leases while the leader
        // pauses: let the pending one commit first (bounded).
        let idle_by = tokio::time::Instant::now() + settle;
        while lock(&shared).desired.is_some() && tokio::time::Instant::now() < idle_by {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        lock(&shared).leadership_requests += 1;
        let applied = m.last_applied;
        match replica.request_leadership().await {
            Ok(Leadership::Elected | Leadership::AlreadyLeader) => return,
            Ok(Leadership::NotVoter) => return,
            Ok(Leadership::NoLeader) => tokio::time::sleep(settle).await,
            Ok(Leadership::Lost(why)) => {
                tracing::info!(
                    try_ = tries,
                    reason = %why,
                    "Raft leadership: not elected; trying again after the next apply"
                );
                // A vote lost because this log was behind: wait for it to move (or
                // for an election timeout to pass), then ask again.
                let _ = replica
                    .wait_metrics(settle, |m| m.last_applied > applied)
                    .await;
            }
            Err(e) => {
                tracing::warn!(try_ = tries, error = %e, "Raft leadership request failed");
                tokio::time::sleep(settle).await;
            }
        }
    }
    if current(&replica, &shared, generation, epoch) && replica.metrics().role != Role::Leader {
        tracing::warn!(
            node_id = replica.node_id(),
            tries,
            "Raft leadership: this MASTER's member is still not the Raft leader; the leader-heartbeat second opinion is unavailable to its standbys until it is"
        );
    }
}
