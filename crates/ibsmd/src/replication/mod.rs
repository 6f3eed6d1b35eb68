//! The daemon side of the replicated fabric state ([`ibsm_replica`]): what a master
//! writes, what a new master reads, and when the daemon calls itself "degraded".
//!
//! # Who does what
//!
//! [`Replication`] wraps one [`Replica`] (Raft over the daemon's own gRPC port) and a
//! background *writer* task. The SM instance thread never waits for Raft: every call it
//! makes here ([`Replication::become_master`], [`Replication::publish`],
//! [`Replication::register_sm`], [`Replication::status`]) is a local, non-blocking operation,
//! so a failover is never slower because of replication, and a master without quorum
//! keeps sweeping and programming the fabric from its local copy.
//!
//! The writer task:
//!
//! 1. on mastership, claims a new epoch ([`Command::ClaimMastership`], local epoch + 1;
//!    a `StaleEpoch` refusal only means the local copy lagged: it retries);
//! 2. then writes what the master last [`published`](Replication::publish) (guid2lid,
//!    topology summary, LFT digests, the M_Key programmed) as the *difference* from the replicated state,
//!    in one [`Command::Update`] carrying the epoch;
//! 3. retries every [`RETRY`] while a write times out (no quorum): the master is then
//!    **degraded**, keeps every assignment it makes in the pending record, and the
//!    first write that commits after quorum returns reconciles them all (the record is
//!    the whole desired state, not a queue of deltas, so nothing is lost or replayed
//!    out of order);
//! 4. a `StaleEpoch` refusal of an update means another master claimed a higher epoch
//!    meanwhile: this one is **deposed**, stops writing, and its pending record is
//!    dropped. Usually the SMInfo election demotes it too; if the election keeps it
//!    MASTER (the newer epoch's holder was the one demoted), it is degraded and claims
//!    again after [`DEPOSED_RECLAIM`].
//!
//! Degraded = this instance wants to write (it is MASTER) and either its last claim or
//! write did not commit, or its Raft view has no leader. It is cleared by the next
//! committed write.
//!
//! # What a new master takes over ([`replicated_fabric`])
//!
//! guid2lid (fed to `LidManager::import_guid2lid`, so a port that lost its LID gets the
//! replicated one back and no replicated LID is handed to another port), the last
//! topology summary, the LFT digest of every switch, and the M_Key the fabric was
//! programmed with (`SubnetManager::set_fabric_m_key`: tried after the configured key,
//! so ports protected by the previous master are reachable and, when the configured
//! key differs, reprogrammed with it; the configured key wins).
//!
//! # Raft leadership follows the SM master
//!
//! Mastership is decided by the SMInfo election, never by Raft; but a standby's second
//! opinion on a busy master (the Raft leader's heartbeat, `ibsm_replica::LeaderContact`)
//! speaks for the master only while the master's member is the Raft leader. So, once
//! per mastership (a failover, a planned HANDOVER's new master, a restart that wins),
//! after the epoch claim has been applied on this member, a master whose member is a
//! voter but not the leader asks for leadership (`leadership`,
//! [`ibsm_replica::Replica::request_leadership`]): the leader pauses its heartbeats for
//! one lease plus an election timeout, and this member, its log holding the claim,
//! wins the election it then triggers. The rule:
//!
//! - only the SM MASTER asks, at most [`LEADERSHIP_TRIES`] times per mastership, a
//!   retry only after a lost vote (its log was behind: after the next apply) or a
//!   failed request; it never asks again while it stays master (only a deposed master
//!   that claims a new epoch asks once more), so leadership moved elsewhere (Raft's own
//!   election after a partition) is left alone; it stops asking once a newer epoch
//!   than its claim's is applied here (another master claimed);
//! - a leader that is not the SM master is never stepped down by force: it only
//!   pauses its idle heartbeats when asked, and resumes them when it loses leadership
//!   or the pause ends. Writes keep replicating meanwhile, no log entry or membership
//!   changes, and Raft's vote rule (the candidate's log at least as up to date as a
//!   quorum's) keeps every committed write; at worst the cluster holds an ordinary
//!   election;
//! - a learner does not ask (it cannot lead), and an old member that cannot decode the
//!   request refuses it: leadership stays where it is.
//!
//! Counted in `ibsm_raft_leadership_requests_total`; `ibsmctl status` on the master
//! shows `state MASTER` beside `raft leader` (or `follower ... leader N`).
//!
//! # Partitions set through the API
//!
//! `Fabric/SetPartition` commits a partition to the replicated config as
//! `partition/<pkey>` = `name|guid:full,guid:limited` ([`encode_partition`]), on any
//! member. The MASTER programs its start-up partitions (`--partition`, config file)
//! plus the replicated ones ([`effective_partitions`]: the replicated one wins on the
//! same P_Key or name). The instance thread hands the SM node the replicated state
//! ([`replicated_fabric`], a local read, no Raft round trip) whenever this replica's
//! applied index moves, so a commit made through any member reaches the fabric once
//! this replica applies it; a MASTER node hands a changed set to
//! `SubnetManager::set_partitions`, whose heavy sweep reprograms the P_Key tables. A
//! new master applies them before its first heavy sweep, which is how a partition set
//! through the API survives a failover.
//!
//! # Planned handover
//!
//! [`Replication::wait_caught_up`]: before a HANDOVER goes out, the target's replica
//! must have applied everything this instance has in its log. Each instance registers
//! its SM port GUID -> Raft node id in the replicated config (`sm.<guid>.node`); the
//! target's applied index is read over the Raft service's `Applied` RPC.
//! A target outside the cluster (OpenSM, an ibsmd without --node-id) is not waited for.
//!
//! # Security
//!
//! The Raft service is served next to the control API, on the same port, but not
//! under the control API's credentials: members prove themselves with the cluster
//! secret (`--cluster-secret-file`, carried on every Raft RPC, never the control
//! token) and/or, with TLS, with member certificates (`--tls-client-ca`; a member's
//! certificate names `ibsm-node-<id>`, checked against the node each RPC speaks for).
//! `--node-id` with neither is refused at start. The planned handover's catch-up check
//! asks the target's applied index over that member channel
//! (`Replica::peer_applied`), so no bearer token is ever sent to an address learned
//! from the replicated membership. See `ibsm_replica::network`.
//!
//! [`Replica`]: ibsm_replica::Replica
//! [`Command::ClaimMastership`]: ibsm_replica::Command::ClaimMastership
//! [`Command::Update`]: ibsm_replica::Command::Update

mod cluster;
mod handle;
mod inherit;
mod keys;
mod leadership;
mod record;
mod sa;
mod shared;
mod status;
mod writer;

pub use cluster::{
    random_cluster_secret, ClusterConfig, CORE_RETRY, DEPOSED_RECLAIM, QUORUM_LOST, RETRY,
    WRITE_TIMEOUT,
};
pub use handle::{Replication, ReplicationError};
pub use inherit::{inherited_of, replicated_fabric, replicated_fabric_cached, ReplicatedCache};
pub use keys::{
    decode_partition, effective_partitions, encode_partition, partition_key, partitions_in,
    sm_node_key, SkippedPartition, PARTITION_KEY,
};
pub use leadership::LEADERSHIP_TRIES;
pub use record::{diff_ops, record_of, roster_of, FabricRecord};
pub use sa::{core_tables, replica_tables, ReplicaSaTables};
pub use status::ReplStatus;
