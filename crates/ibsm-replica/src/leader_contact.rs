//! When the Raft leader last reached this member, and which node it was: the
//! follower's side of the leader's heartbeat (an AppendEntries, empty or not, that
//! this member accepted as coming from the current leader).
//!
//! The SM election uses it as a second opinion on the master it polls: a master whose
//! SMInfo answers are late (its instance thread busy, its host loaded) but whose Raft
//! heartbeats still arrive is alive, so a standby holds off declaring it lost for a
//! bounded while (`ibsm_core::election::ElectionConfig::leader_heartbeat_grace`).
//! openraft's metrics do not carry a follower's time of last contact, so the service
//! records it as the calls arrive.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::NodeId;

/// Shared between the Raft service (writer) and [`crate::Replica::leader_contact`].
#[derive(Debug, Clone, Default)]
pub struct LeaderContact(Arc<Mutex<Option<(Instant, NodeId)>>>);

impl LeaderContact {
    /// The leader `node` reached us now.
    pub(crate) fn note(&self, node: NodeId) {
        if let Ok(mut last) = self.0.lock() {
            *last = Some((Instant::now(), node));
        }
    }

    /// We answered `resp` to an AppendEntries from `leader`: anything but "your vote is
    /// stale" means it came from the current leader (a log conflict included: its
    /// heartbeat still proves it alive).
    pub(crate) fn note_answer(
        &self,
        leader: Option<NodeId>,
        resp: &openraft::raft::AppendEntriesResponse<NodeId>,
    ) {
        if let (false, Some(leader)) = (
            matches!(resp, openraft::raft::AppendEntriesResponse::HigherVote(_)),
            leader,
        ) {
            self.note(leader);
        }
    }

    /// When the leader last reached us, and its node id (`None`: never since start).
    pub fn last(&self) -> Option<(Instant, NodeId)> {
        self.0.lock().ok().and_then(|l| *l)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stale_leader_is_no_contact() {
        use openraft::raft::AppendEntriesResponse;
        let c = LeaderContact::default();
        let stale = openraft::Vote::new_committed(9, 4);
        c.note_answer(Some(2), &AppendEntriesResponse::HigherVote(stale));
        assert_eq!(c.last(), None, "refused as stale: not the current leader");
        c.note_answer(None, &AppendEntriesResponse::Success);
        assert_eq!(c.last(), None, "no leader named");
        c.note_answer(Some(2), &AppendEntriesResponse::Conflict);
        assert_eq!(
            c.last().map(|(_, n)| n),
            Some(2),
            "a conflict still proves it alive"
        );
    }

    #[test]
    fn the_newest_contact_is_kept_with_its_node() {
        let c = LeaderContact::default();
        assert_eq!(c.last(), None);
        c.note(2);
        let (t1, n1) = c.last().expect("noted");
        assert_eq!(n1, 2);
        c.clone().note(3);
        let (t2, n2) = c.last().expect("noted");
        assert_eq!(n2, 3, "a clone writes the same cell");
        assert!(t2 >= t1);
    }
}
