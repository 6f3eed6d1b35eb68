//! What a member forwards to the Raft leader over the `Forward` RPC, and how the
//! leader (or a member that is the leader itself) runs it on its core.
//!
//! Why a module of its own: both the Raft service ([`crate::network`], which runs what
//! a peer forwards) and [`crate::Replica`] (which runs its own writes) execute these
//! requests; here, neither has to import the other.

use std::collections::BTreeSet;
use std::time::Duration;

use openraft::error::{ChangeMembershipError, ClientWriteError, RaftError};
use openraft::{BasicNode, ChangeMembers};
use serde::{Deserialize, Serialize};

use crate::state::{Command, Outcome};
use crate::{NodeId, TypeConfig};

/// A request a follower forwards to the leader (or the leader runs itself).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum ForwardRequest {
    Write(Command),
    AddMember {
        node_id: NodeId,
        addr: String,
    },
    RemoveMember {
        node_id: NodeId,
    },
    /// The voter `to` (a new SM master) asks the leader to let it take Raft
    /// leadership: the leader pauses its heartbeats for one lease plus an election
    /// timeout (see [`crate::leadership`]; the leader side is [`yield_to`]). Added last: an older peer cannot decode it
    /// and the request fails, leaving leadership where it is.
    YieldLeadership {
        to: NodeId,
    },
}

/// The leader's answer to a [`ForwardRequest`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum ForwardReply {
    Written {
        log_index: u64,
        outcome: Outcome,
    },
    MembershipChanged {
        log_index: u64,
    },
    /// The leader paused its heartbeats; `lease_ms` is its voters' leader lease (its
    /// `election_timeout_max`): a vote is granted once it passed without contact.
    Yielding {
        lease_ms: u64,
    },
}

/// Why a forwarded request did not go through.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum ForwardError {
    /// Ask that node instead (or retry later if unknown).
    NotLeader { leader: Option<(NodeId, String)> },
    /// The peer could not be reached.
    Unreachable(String),
    /// A membership change is still in progress: retry shortly.
    Busy(String),
    /// Raft refused the request.
    Failed(String),
}

fn forward_err(e: RaftError<NodeId, ClientWriteError<NodeId, BasicNode>>) -> ForwardError {
    match e {
        RaftError::APIError(ClientWriteError::ForwardToLeader(f)) => ForwardError::NotLeader {
            leader: f.leader_id.zip(f.leader_node.map(|n| n.addr)),
        },
        RaftError::APIError(ClientWriteError::ChangeMembershipError(
            ChangeMembershipError::InProgress(p),
        )) => ForwardError::Busy(p.to_string()),
        other => ForwardError::Failed(other.to_string()),
    }
}

/// Run a request on this node's Raft (it must be the leader, else `NotLeader`).
pub(crate) async fn execute_local(
    raft: &openraft::Raft<TypeConfig>,
    req: ForwardRequest,
) -> Result<ForwardReply, ForwardError> {
    match req {
        ForwardRequest::Write(cmd) => {
            let r = raft.client_write(cmd).await.map_err(forward_err)?;
            Ok(ForwardReply::Written {
                log_index: r.log_id.index,
                outcome: r.data,
            })
        }
        ForwardRequest::AddMember { node_id, addr } => {
            raft.add_learner(node_id, BasicNode::new(addr), true)
                .await
                .map_err(forward_err)?;
            let r = raft
                .change_membership(ChangeMembers::AddVoterIds(BTreeSet::from([node_id])), false)
                .await
                .map_err(forward_err)?;
            Ok(ForwardReply::MembershipChanged {
                log_index: r.log_id.index,
            })
        }
        ForwardRequest::YieldLeadership { to } => yield_to(raft, to),
        ForwardRequest::RemoveMember { node_id } => {
            let m = raft.metrics().borrow().membership_config.clone();
            let is_voter = m.membership().voter_ids().any(|v| v == node_id);
            let change = if is_voter {
                ChangeMembers::RemoveVoters(BTreeSet::from([node_id]))
            } else {
                ChangeMembers::RemoveNodes(BTreeSet::from([node_id]))
            };
            let r = raft
                .change_membership(change, false)
                .await
                .map_err(forward_err)?;
            Ok(ForwardReply::MembershipChanged {
                log_index: r.log_id.index,
            })
        }
    }
}

/// The leader's side of [`ForwardRequest::YieldLeadership`]: pause the idle heartbeats
/// for one lease plus `election_timeout_min` (module doc), resuming them as soon as
/// this member is no longer leader.
pub(crate) fn yield_to(
    raft: &openraft::Raft<TypeConfig>,
    to: NodeId,
) -> Result<ForwardReply, ForwardError> {
    let m = raft.metrics().borrow().clone();
    let me = m.id;
    if m.current_leader != Some(me) {
        let leader = m.current_leader.and_then(|l| {
            m.membership_config
                .membership()
                .get_node(&l)
                .map(|n| (l, n.addr.clone()))
        });
        return Err(ForwardError::NotLeader { leader });
    }
    if to == me {
        return Err(ForwardError::Failed(format!(
            "node {to} asked the leader to yield to itself"
        )));
    }
    if !m
        .membership_config
        .membership()
        .voter_ids()
        .any(|v| v == to)
    {
        return Err(ForwardError::Failed(format!(
            "node {to} is not a voter: a learner cannot lead"
        )));
    }
    let config = raft.config();
    let lease_ms = config.election_timeout_max;
    let pause = Duration::from_millis(lease_ms + config.election_timeout_min);
    let term = m.current_term;
    raft.runtime_config().heartbeat(false);
    tracing::info!(
        node_id = me,
        to,
        pause_ms = pause.as_millis() as u64,
        "Raft leadership: pausing heartbeats so the SM master's member can be elected"
    );
    let raft = raft.clone();
    tokio::spawn(async move {
        let mut rx = raft.metrics();
        let deposed = async {
            loop {
                {
                    let m = rx.borrow_and_update();
                    if m.current_leader != Some(me) || m.current_term != term {
                        return;
                    }
                }
                if rx.changed().await.is_err() {
                    return;
                }
            }
        };
        let deposed = tokio::time::timeout(pause, deposed).await.is_ok();
        raft.runtime_config().heartbeat(true);
        tracing::info!(
            node_id = me,
            to,
            deposed,
            "Raft leadership: heartbeats resumed"
        );
    });
    Ok(ForwardReply::Yielding { lease_ms })
}
