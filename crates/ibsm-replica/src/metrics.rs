//! What a member reports about its Raft core ([`ReplicaMetrics`], its [`Role`]), read
//! from openraft's metrics.
//!
//! Why a file of its own: it is a plain translation of `openraft::RaftMetrics` into this
//! crate's types (membership split into voters and learners, why a stopped core
//! stopped), with no part in running the core; [`crate::Replica`] only calls
//! [`to_metrics`] on what its core publishes.

use std::collections::{BTreeMap, BTreeSet};

use openraft::{BasicNode, ServerState};

use crate::NodeId;

/// Raft role of this instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Leader,
    Follower,
    Candidate,
    Learner,
    Shutdown,
}

/// A snapshot of this instance's Raft view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaMetrics {
    pub node_id: NodeId,
    pub role: Role,
    pub term: u64,
    pub leader: Option<NodeId>,
    pub last_log_index: Option<u64>,
    pub last_applied: Option<u64>,
    /// Index covered by the last snapshot.
    pub snapshot_index: Option<u64>,
    /// Highest purged log index.
    pub purged_index: Option<u64>,
    /// Voters, with the address each was added with.
    pub voters: BTreeMap<NodeId, String>,
    /// Non-voting members (catching up).
    pub learners: BTreeMap<NodeId, String>,
    /// On the leader: milliseconds since a quorum last acknowledged it (openraft keeps
    /// a leader without quorum in the Leader role; this tells it apart). `None`
    /// elsewhere.
    pub millis_since_quorum_ack: Option<u64>,
    /// On the leader: the highest log index each member (the leader itself included)
    /// is known to hold, `None` for a member nothing was replicated to yet. Empty
    /// elsewhere. A follower's lag is the leader's last log index minus its entry.
    pub matched: BTreeMap<NodeId, Option<u64>>,
    /// Why the Raft core stopped, when it stopped on an error (a storage error such as a
    /// full disk is fatal to openraft's core: it stops rather than acknowledge what it
    /// could not persist). `None` while it runs and after an orderly shutdown.
    pub stopped: Option<String>,
}

/// This crate's view of `m`.
pub(crate) fn to_metrics(m: &openraft::RaftMetrics<NodeId, BasicNode>) -> ReplicaMetrics {
    let membership = m.membership_config.membership();
    let voter_ids: BTreeSet<NodeId> = membership.voter_ids().collect();
    let mut voters = BTreeMap::new();
    let mut learners = BTreeMap::new();
    for (id, node) in membership.nodes() {
        if voter_ids.contains(id) {
            voters.insert(*id, node.addr.clone());
        } else {
            learners.insert(*id, node.addr.clone());
        }
    }
    ReplicaMetrics {
        node_id: m.id,
        role: match m.state {
            ServerState::Leader => Role::Leader,
            ServerState::Follower => Role::Follower,
            ServerState::Candidate => Role::Candidate,
            ServerState::Learner => Role::Learner,
            ServerState::Shutdown => Role::Shutdown,
        },
        term: m.current_term,
        leader: m.current_leader,
        last_log_index: m.last_log_index,
        last_applied: m.last_applied.map(|l| l.index),
        snapshot_index: m.snapshot.map(|l| l.index),
        purged_index: m.purged.map(|l| l.index),
        voters,
        learners,
        millis_since_quorum_ack: m.millis_since_quorum_ack,
        matched: m
            .replication
            .as_ref()
            .map(|r| {
                r.iter()
                    .map(|(id, log)| (*id, log.map(|l| l.index)))
                    .collect()
            })
            .unwrap_or_default(),
        stopped: match &m.running_state {
            Ok(()) | Err(openraft::error::Fatal::Stopped) => None,
            Err(e) => Some(e.to_string()),
        },
    }
}
