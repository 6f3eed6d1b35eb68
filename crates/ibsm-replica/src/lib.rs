//! Replicated fabric state for ibsm: what a new master needs to take over without
//! renumbering the fabric, kept on every ibsmd instance by Raft.
//!
//! # What is replicated ([`FabricState`])
//!
//! guid2lid (port GUID -> LID range), partitions, the SM roster (GUID, priority, last
//! SMState, last ActCount), the mastership epoch and its holder, the last topology
//! summary, a digest of every switch's LFT ([`lft_digest`]), runtime configuration
//! changed through the control API, and the Subnet Administrator's tables (multicast
//! groups and members, services, subscriptions; [`sa`]). Changes are [`Command`]s, one Raft log entry each:
//!
//! - [`Command::ClaimMastership`] `{ epoch, sm_guid }`: accepted only if `epoch` is
//!   exactly the current epoch plus one (lower: [`Refusal::StaleEpoch`], the local copy
//!   lagged; higher: [`Refusal::EpochNotNext`]), so epochs advance one per claim and no
//!   writer can wedge them at `u64::MAX`;
//! - [`Command::Update`] `{ epoch, ops }`: a master's write, accepted only if `epoch` is
//!   exactly the current epoch (lower: [`Refusal::StaleEpoch`], a deposed master; higher:
//!   [`Refusal::UnclaimedEpoch`]); its [`Op`]s apply all or none and are validated
//!   (unicast LID ranges, 15-bit P_Keys, priority <= 15);
//! - [`Command::Config`]: runtime configuration, from any instance, no epoch; checked
//!   against the limits and value formats of [`config_keys`] (partition count, members
//!   per partition, name length, value size) on every replica.
//!
//! A refused command stays in the log and applies as a no-op on every replica, so the
//! decision is the same everywhere; the writer gets `Err(ReplicaError::Refused(..))`.
//!
//! # How the daemon uses it
//!
//! ```ignore
//! let replica = Replica::start(ReplicaConfig {
//!     node_id,                                   // --node-id N
//!     grpc_addr: grpc.clone(),                   // --grpc ADDR (what peers dial)
//!     listen: Listen::External,                  // ibsmd serves Raft on its control port
//!     initial_members,                           // --peer ID=ADDR ... (PeerArg: FromStr), incl. self
//!     data_dir,                                  // --data-dir DIR
//!     timers: RaftTimers::default(),
//!     peer_tls: None,
//!     peer_auth,                                 // cluster secret and/or member certificates
//! }).await?;
//! // TCP_NODELAY matters: without it Nagle + delayed ACK add ~40 ms to each commit.
//! Server::builder().tcp_nodelay(true)
//!     .add_service(control).add_service(replica.grpc_service()).serve(addr);
//!
//! // On becoming MASTER (the SM election said so):
//! let epoch = replica.claim_mastership(my_port_guid).await?;   // new epoch
//! let lids = replica.with_state(|s| s.guid2lid_file());        // LidManager::import_guid2lid
//! // Once the claim applied here, move Raft leadership to this member (cooperative:
//! // the leader pauses its heartbeats, this voter is elected; see `leadership`):
//! let outcome = replica.request_leadership().await?;          // Leadership::Elected ...
//! // Every write of this master carries `epoch`:
//! replica.write(Command::Update { epoch, ops: vec![Op::ReplaceGuid2Lid(map), ...] }).await?;
//! // Err(ReplicaError::Refused(Refusal::StaleEpoch{..})): another master took over: step down.
//! // Err(ReplicaError::Timeout(_)): no quorum reachable; the write may still commit later.
//!
//! replica.state();  replica.with_state(|s| ..);   // local, possibly lagging reads
//! replica.metrics();                              // role, term, leader, applied, voters, learners
//! replica.add_member(id, addr).await?; replica.remove_member(id).await?;  // control API
//! replica.shutdown().await?;
//! ```
//!
//! `write`, `add_member` and `remove_member` work on any instance: a follower forwards
//! to the Raft leader over the `Forward` RPC (the Raft leader need not be the SM master,
//! though the daemon moves it there: [`Replica::request_leadership`]).
//! They retry across leader changes until `timers.write_timeout`.
//!
//! # Bootstrap and membership
//!
//! `initial_members` describes the first cluster. Its lowest id initializes Raft once:
//! only if its store has never held a vote or a log entry, so restarting with the same
//! command line never re-bootstraps ([`Replica::bootstrapped`] tells). An instance with
//! empty `initial_members` is a joiner: it waits until a member calls
//! [`Replica::add_member`], which adds it as a learner, streams it a snapshot if the log
//! was compacted, then makes it a voter. If the lowest id never starts, nobody
//! bootstraps (deliberate: two bootstraps would be two clusters).
//!
//! # Storage and durability ([`store`])
//!
//! openraft 0.9 (storage v2) over one redb file per instance. Votes and appended entries
//! are committed (fsync, redb's default durability) before Raft is told they are
//! stored, so an acknowledged write survives SIGKILL (tests/sigkill.rs). The state
//! machine is in memory and persisted as snapshots; after a crash it is rebuilt from the
//! last snapshot plus the log up to the saved committed index. Snapshots are taken
//! every `snapshot_after_logs` entries, then the log is purged behind them. The store
//! passes `openraft::testing::Suite` (tests/storage_suite.rs).
//!
//! A write that fails (a full disk) is fatal to openraft's core: it stops rather than
//! acknowledge what is not on disk ([`ReplicaMetrics::stopped`] says why). The core is
//! therefore swappable: [`Replica::restart_core`] opens the store again and starts a
//! new core on it, keeping the in-memory state machine (everything it applied was
//! committed, so it is in the log), and the gRPC service follows the new core.
//!
//! # Transport ([`network`], proto/ibsm/v1/raft.proto)
//!
//! tonic, one lazily connected channel per peer reused by every RPC. Bodies are bincode
//! v1 of openraft's own serde types inside a bytes field with a format tag: both ends
//! are always this crate, and mirroring openraft's types in protobuf would double them
//! for no interoperability gain. Snapshots are streamed in 1 MiB chunks on one
//! client-streaming call and installed whole. [`FaultSwitch`] cuts an instance off in
//! both directions for partition tests. [`payload`] runs the service's decoders on
//! plain bytes (every body a peer can send), for unit tests and the fuzz target.
//!
//! # Timers ([`RaftTimers`]) and the SM polling defaults
//!
//! The SM side (ibsmd / ibsm-core election) polls the master every 100 ms and declares
//! it dead after 3 unanswered polls: a dead master is noticed 300-400 ms after its last
//! answer and a successor is MASTER 300 ms later, i.e. ~600-700 ms after the crash. The
//! SM master and the Raft leader are often the same host, so the successor's first act,
//! `claim_mastership`, needs a Raft leader by then. Hence Raft on a LAN control network:
//!
//! - heartbeat 50 ms: loopback/LAN round trips are < 1 ms and an fsync is 1-10 ms, so a
//!   heartbeat costs nothing; 50 ms lets followers notice a dead leader quickly;
//! - election timeout 250-500 ms (5-10 heartbeats): a new leader exists 250-500 ms after
//!   the old one died (plus one vote round, a few ms), before the SM failover completes,
//!   so the new master's claim commits at once. A false election needs 5+ heartbeats in a
//!   row lost or late, i.e. a 250 ms stall: more than an fsync hiccup on a loaded host.
//!   The randomized window (2x) makes split votes rare with 3-5 voters;
//! - connect timeout 200 ms, write timeout 5 s (the daemon's writes block a sweep at
//!   most that long when there is no quorum), snapshot stream 10 s.
//!
//! Both sets scale the same way: on a slow or congested management network raise the
//! SM poll interval and the Raft heartbeat / election timeouts together, keeping the
//! Raft election well under the SM's detection + discovery time.
//!
//! # Measured (benches/replica.rs, `cargo bench -p ibsm-replica`, 2-core VM)
//!
//! One update committed on 3 nodes over loopback: p50 1.0 ms, p99 6.1 ms (fsync on
//! every append on leader and followers). The state of a fabric at the IBA unicast
//! limit (49,151 guid2lid entries, a 49,151-node / 142,502-cable topology, 4,205 LFT
//! digests: a k=58 fat tree with 44,946 HCAs) is a 4.8 MB snapshot; a new instance
//! added to the cluster received and installed it and became a voter in 232 ms (60 ms
//! on an idle host for the earlier 48k-LID state; 232 ms measured with the host's two
//! cores loaded by other work).
//!
//! # Not done here
//!
//! Linearizable reads (reads are local); a snapshot is spooled to disk while it is
//! received but installed (and sent) as one in-memory buffer (~5 MB at the unicast
//! limit).

pub mod config_keys;
pub mod forward;
pub mod identity;
mod leader_contact;
pub mod leadership;
mod metrics;
pub mod network;
mod partition;
pub mod payload;
mod peer_auth;
mod replica;
pub mod sa;
pub mod state;
pub mod store;

pub use leader_contact::LeaderContact;
pub use leadership::Leadership;
pub use metrics::{ReplicaMetrics, Role};
pub use network::{ClusterSecret, FaultSwitch, PeerAuth};
pub use replica::{
    Listen, PeerArg, RaftTimers, Replica, ReplicaConfig, ReplicaError, WriteReceipt,
};
pub use state::*;

/// Raft node id of an ibsmd instance.
pub type NodeId = u64;

openraft::declare_raft_types!(
    /// openraft types of the ibsm replica: [`Command`] in, [`Outcome`] out.
    pub TypeConfig: D = Command, R = Outcome, SnapshotData = std::io::Cursor<Vec<u8>>
);

/// Generated from `proto/ibsm/v1/raft.proto`.
pub mod pb {
    tonic::include_proto!("ibsm.v1");
}
