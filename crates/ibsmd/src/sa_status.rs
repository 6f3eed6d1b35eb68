//! The Subnet Administrator's part of `Control/GetStatus` ([`pb::SaSummary`]): its
//! size, from the tables the instance publishes, and the freshness of the replica's
//! copy: whether it is current with the SA (the instance's [`SaReplica`]), when it
//! last applied an SA write, and on a follower the Raft leader's applied index next
//! to its own (asked over the member channel, bounded by [`LEADER_ASK`]).

use std::time::Duration;

use ibsm_core::sa::SaTableKind;
use ibsm_proto::v1 as pb;

use crate::instance::{SaReplica, Snapshot};
use crate::replication::Replication;

/// How long GetStatus waits for the leader's applied index.
pub const LEADER_ASK: Duration = Duration::from_millis(300);

/// The leader's applied index, if this member follows one that answers within
/// [`LEADER_ASK`] (0 otherwise, and on the leader itself).
pub async fn leader_applied(repl: &Replication) -> u64 {
    let m = repl.replica().metrics();
    let Some(leader) = m.leader.filter(|l| *l != m.node_id) else {
        return 0;
    };
    let Some(addr) = m.voters.get(&leader).or_else(|| m.learners.get(&leader)) else {
        return 0;
    };
    match tokio::time::timeout(LEADER_ASK, repl.replica().peer_applied(leader, addr)).await {
        Ok(Ok(i)) => i,
        Ok(Err(e)) => {
            tracing::debug!(leader, error = %e, "status: the leader's applied index");
            0
        }
        Err(_) => 0,
    }
}

/// The summary for a status answer.
pub fn sa_summary(s: &Snapshot, applied_index: u64, leader_applied_index: u64) -> pb::SaSummary {
    let count = |k: SaTableKind| {
        s.sa.as_ref()
            .and_then(|t| t.get(&k))
            .map_or(0, |t| u32::try_from(t.len()).unwrap_or(u32::MAX))
    };
    let SaReplica {
        current,
        holds_state,
        changed_unix_ms,
        changed_index,
    } = s.sa_replica;
    pb::SaSummary {
        groups: count(SaTableKind::McGroups),
        members: count(SaTableKind::McMembers),
        services: count(SaTableKind::Services),
        subscriptions: count(SaTableKind::Informs),
        replica_holds_state: holds_state,
        replica_current: current,
        applied_index,
        leader_applied_index,
        last_sa_write_unix_ms: changed_unix_ms,
        last_sa_write_index: changed_index,
    }
}
