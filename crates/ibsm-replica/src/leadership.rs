//! Moving Raft leadership to a chosen voter: [`Replica::request_leadership`].
//!
//! Why: the SM election's second opinion on a busy master (the leader's heartbeat,
//! [`crate::LeaderContact`]) only speaks for the SM master while that master's member
//! is also the Raft leader. After a failover Raft's own election picks any leader, so
//! the daemon asks for leadership once its new mastership epoch is applied.
//!
//! # How (openraft 0.9 has no leadership transfer)
//!
//! A follower that simply triggers an election (`Raft::trigger().elect()`) while the
//! leader is healthy loses it: every voter still inside its *leader lease* (openraft
//! sets it to `election_timeout_max` after the leader's last AppendEntries) refuses the
//! vote, and the candidate's higher term then deposes the leader anyway, so the
//! cluster is leaderless for an election and the winner is chance. Instead:
//!
//! 1. the member forwards [`ForwardRequest::YieldLeadership`] to the leader
//!    (the `Forward` RPC, cluster-authenticated);
//! 2. the leader stops its *idle* heartbeats (`runtime_config().heartbeat(false)`) for
//!    at most one lease plus `election_timeout_min`, and turns them back on as soon as
//!    it is no longer leader, or when that pause ends. Nothing is stepped down, no
//!    log entry or membership changes: writes still replicate (and renew the leases)
//!    meanwhile, and every committed entry stays committed, because the usual Raft
//!    vote rule (a candidate's log must be at least as up to date as the voter's)
//!    still decides who wins;
//! 3. the member waits until the leader's last contact is one lease (+ a margin) old,
//!    so the other voters' leases have expired too, and triggers its election. It
//!    fires well before the other followers' own timers (`lease +
//!    election_timeout`), so it is the only candidate; with a log as up to date as
//!    theirs it wins in one round trip.
//!
//! A request that finds traffic renewing the leases, or loses the vote (its log was
//! behind), reports [`Leadership::Lost`]; the caller decides whether to retry (ibsmd
//! does a bounded number of times per mastership, never in a loop).

use std::time::{Duration, Instant};

use crate::forward::{ForwardReply, ForwardRequest};
use crate::metrics::Role;
use crate::replica::{Replica, ReplicaError};

/// What [`Replica::request_leadership`] found or did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Leadership {
    /// This member already leads: nothing was asked.
    AlreadyLeader,
    /// This member won the election it triggered.
    Elected,
    /// This member is not a voter (a learner catching up cannot lead).
    NotVoter,
    /// No leader is known right now (an election is under way): nothing was asked;
    /// try again after it.
    NoLeader,
    /// The leader paused, but this member did not become leader: why.
    Lost(String),
}

/// How much quieter than one lease the leader's contact must be before the election:
/// covers the clock reads of two hosts' timers being a few ms apart.
const MARGIN: Duration = Duration::from_millis(25);

impl Replica {
    /// Become the Raft leader with the current leader's cooperation (module doc).
    /// Takes about one leader lease (`election_max`, 500 ms by default) plus an RTT;
    /// bounded by `write_timeout` for the request and one lease plus two election
    /// timeouts for the election. Never forces a leader out: at worst (the leader
    /// paused but this member's vote failed) the cluster holds an ordinary election.
    pub async fn request_leadership(&self) -> Result<Leadership, ReplicaError> {
        let m = self.metrics();
        if m.role == Role::Leader {
            return Ok(Leadership::AlreadyLeader);
        }
        if !m.voters.contains_key(&self.node_id()) {
            return Ok(Leadership::NotVoter);
        }
        if m.leader.is_none() {
            return Ok(Leadership::NoLeader);
        }
        let lease_ms = match self
            .execute(ForwardRequest::YieldLeadership { to: self.node_id() })
            .await?
        {
            ForwardReply::Yielding { lease_ms } => lease_ms,
            other => {
                return Err(ReplicaError::Raft(format!(
                    "unexpected reply to a leadership request: {other:?}"
                )))
            }
        };
        let election_min = self.timers.election_min;
        let election_max = self.timers.election_max;
        let lease = Duration::from_millis(lease_ms).max(election_max);
        tracing::info!(
            node_id = self.node_id(),
            lease_ms = lease.as_millis() as u64,
            "Raft leadership: the leader paused its heartbeats; waiting out its lease"
        );
        let started = Instant::now();
        let pause = lease + election_min;
        loop {
            if self.metrics().role == Role::Leader {
                return Ok(Leadership::Elected);
            }
            // No contact noted yet: count from the leader's answer (it paused then).
            let last = self.leader_contact().map_or(started, |(at, _)| at);
            let quiet = last.elapsed() >= lease + MARGIN;
            if quiet {
                break;
            }
            if started.elapsed() >= pause {
                return Ok(Leadership::Lost(
                    "the leader's AppendEntries kept renewing the voters' lease (writes in flight)"
                        .into(),
                ));
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        self.raft()
            .trigger()
            .elect()
            .await
            .map_err(|e| ReplicaError::Raft(e.to_string()))?;
        match self
            .wait_metrics(election_min + election_max, |m| m.role == Role::Leader)
            .await
        {
            Ok(_) => {
                tracing::info!(
                    node_id = self.node_id(),
                    "Raft leadership: elected at the SM master's request"
                );
                Ok(Leadership::Elected)
            }
            Err(ReplicaError::Timeout(_)) => {
                let m = self.metrics();
                Ok(Leadership::Lost(format!(
                    "the election did not make this member leader (role {:?}, leader {:?}, term {}): \
                     its log may have been behind a voter's",
                    m.role, m.leader, m.term
                )))
            }
            Err(e) => Err(e),
        }
    }
}

impl Replica {
    /// The Raft timers this member runs with (election timeouts bound how long a
    /// caller of [`Replica::request_leadership`] waits between tries).
    pub fn timers(&self) -> &crate::RaftTimers {
        &self.timers
    }
}
