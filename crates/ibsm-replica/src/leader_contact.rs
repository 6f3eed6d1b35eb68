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

    /// When the leader last reached us, and its node id (`None`: never since start).
    pub fn last(&self) -> Option<(Instant, NodeId)> {
        self.0.lock().ok().and_then(|l| *l)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
