//! What the daemon reports about its replication ([`ReplStatus`], the Raft metrics) and
//! the health checks behind "degraded" besides a failed write: a deleted data dir and a
//! Raft core stopped on a storage error (which is also restarted from here).

use std::sync::Arc;
use std::time::Duration;

use ibsm_replica::{ReplicaMetrics, Role};

use super::cluster::{CORE_RETRY, QUORUM_LOST};
use super::handle::Replication;
use super::shared::lock;

/// The replication part of `GetStatus`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplStatus {
    /// Mastership epoch of the local copy.
    pub epoch: u64,
    /// `leader`, `follower`, `candidate`, `learner`, `shutdown`.
    pub raft_role: String,
    /// Raft term.
    pub term: u64,
    /// Raft leader's node id (0: none).
    pub leader: u64,
    /// Last applied log index.
    pub applied_index: u64,
    /// MASTER without a committed claim/write or without a Raft leader.
    pub degraded: bool,
    /// The epoch this instance holds as master (committed claim).
    pub held_epoch: Option<u64>,
    /// Another master claimed a higher epoch while this one wrote.
    pub deposed: bool,
    /// Why `degraded` (empty when not).
    pub degraded_reason: String,
}

fn role_name(r: Role) -> &'static str {
    match r {
        Role::Leader => "leader",
        Role::Follower => "follower",
        Role::Candidate => "candidate",
        Role::Learner => "learner",
        Role::Shutdown => "shutdown",
    }
}

impl Replication {
    /// Epoch, Raft role/term/leader, applied index, degraded.
    pub fn status(&self) -> ReplStatus {
        let m = self.replica.metrics();
        let epoch = self.replica.with_state(|s| s.epoch);
        let s = lock(&self.shared);
        // No quorum: no known leader, or we lead but nobody acknowledged us lately
        // (openraft leaves a leader without quorum in the Leader role).
        let no_leader = m.leader.is_none()
            || (m.role == Role::Leader
                && m.millis_since_quorum_ack
                    .is_some_and(|ms| u128::from(ms) > QUORUM_LOST.as_millis()));
        // openraft stops its core on a storage error (a full disk, an I/O error) rather
        // than acknowledge what it could not persist; the process lives on, and the SM
        // keeps running on what it holds, but this member no longer replicates.
        let core_stopped = m.stopped.as_ref().map(|e| {
            format!(
                "the Raft core stopped on a storage error ({e}): this member does not \
                 replicate; it starts a new core every {} s until its store takes writes \
                 again (free the data dir's disk)",
                CORE_RETRY.as_secs()
            )
        });
        let degraded = s.data_dir_lost.is_some()
            || core_stopped.is_some()
            || (s.master_guid.is_some() && (s.degraded || no_leader));
        let degraded_reason = if !degraded {
            String::new()
        } else if let Some(why) = &s.data_dir_lost {
            why.clone()
        } else if let Some(why) = core_stopped {
            why
        } else if s.degraded {
            s.degraded_reason.clone()
        } else {
            "no Raft quorum: no leader has been acknowledged by a majority lately".to_string()
        };
        ReplStatus {
            epoch,
            raft_role: role_name(m.role).to_string(),
            term: m.term,
            leader: m.leader.unwrap_or(0),
            applied_index: m.last_applied.unwrap_or(0),
            degraded,
            held_epoch: s.held_epoch,
            deposed: s.deposed.is_some(),
            degraded_reason,
        }
    }

    /// Raft metrics.
    pub fn metrics(&self) -> ReplicaMetrics {
        self.replica.metrics()
    }

    /// Notice a data dir that was deleted under a running replica (its store file is
    /// gone): every later write would be lost at the next restart, so the instance says
    /// so (degraded, with the reason) until it is restarted on a real dir.
    pub(super) fn check_data_dir(&self) {
        let store = self.data_dir.join("replica.redb");
        let mut s = lock(&self.shared);
        if s.data_dir_lost.is_some() {
            return;
        }
        let now = std::time::Instant::now();
        if s.data_dir_checked
            .is_some_and(|t| now.duration_since(t) < Duration::from_secs(1))
        {
            return;
        }
        s.data_dir_checked = Some(now);
        if !store.exists() {
            let why = format!(
                "the replica's store {} is gone (data dir deleted?): restart ibsmd on its data dir",
                store.display()
            );
            tracing::error!(store = %store.display(), "replication: {why}");
            s.data_dir_lost = Some(why);
        }
    }

    /// A Raft core that openraft stopped on an error: log it (once per stop) and put a
    /// new core on the store every [`CORE_RETRY`] until one keeps running (see
    /// [`Self::status`]).
    pub(super) fn check_core(self: &Arc<Self>) {
        let Some(why) = self.replica.metrics().stopped else {
            return;
        };
        let now = std::time::Instant::now();
        {
            let mut s = lock(&self.shared);
            if !s.core_stop_logged {
                s.core_stop_logged = true;
                tracing::error!(error = %why, retry_s = CORE_RETRY.as_secs(), "replication: the Raft core stopped; this member does not replicate until a new core can write to its store");
            }
            // The first new core a retry period after the stop, too: a disk that just
            // filled up rarely has room a moment later.
            let retry_at = *s.core_retry_at.get_or_insert(now + CORE_RETRY);
            if s.core_restarting || now < retry_at {
                return;
            }
            s.core_restarting = true;
        }
        let me = Arc::clone(self);
        tokio::spawn(async move {
            let r = me.replica.restart_core().await;
            let mut s = lock(&me.shared);
            s.core_restarting = false;
            s.core_retry_at = Some(std::time::Instant::now() + CORE_RETRY);
            match r {
                Ok(_) => {
                    s.core_stop_logged = false;
                    s.core_retry_at = None;
                    tracing::info!("replication: a new Raft core runs on the store");
                }
                Err(e) => {
                    tracing::warn!(error = %e, "replication: the Raft core cannot be restarted yet")
                }
            }
        });
    }
}
