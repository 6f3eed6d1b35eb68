//! The daemon side of the replicated fabric state ([`ibsm_replica`]): what a master
//! writes, what a new master reads, and when the daemon calls itself "degraded".
//!
//! # Who does what
//!
//! [`Replication`] wraps one [`Replica`] (Raft over the daemon's own gRPC port) and a
//! background *writer* task. The SM instance thread never waits for Raft: every call it
//! makes here ([`Replication::become_master`], [`Replication::publish`],
//! [`Replication::seed`], [`Replication::status`]) is a local, non-blocking operation,
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

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use ibsm_core::election::SmState;
use ibsm_core::node::ReplicatedFabric;
use ibsm_core::subnet::{
    lft_digest, links_of, Inherited, Link, Membership, Partition, PartitionMember, SubnetManager,
};
use ibsm_replica::{
    Command, ConfigChange, FabricState, LftDigest, LidRange, Listen, NodeId, Op, RaftTimers,
    Refusal, Replica, ReplicaConfig, ReplicaError, ReplicaMetrics, Role, TopoLink, TopoNode,
    TopologySummary,
};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

/// How often the writer retries a claim or write that did not commit.
pub const RETRY: Duration = Duration::from_millis(250);

/// How long a deposed master (a newer epoch was claimed while it was MASTER) waits
/// before it claims again, if the fabric election still has it MASTER. Two SMs that
/// became MASTER together at start-up both claim; the SMInfo election demotes one of
/// them within a few polls, and it may be either: the newer epoch's holder can be the
/// one that steps down. Without a second claim the remaining master would run the
/// fabric and never write its state again. Several polls long, so the election has
/// settled before the claim.
pub const DEPOSED_RECLAIM: Duration = Duration::from_millis(1000);
/// A Raft leader without a quorum acknowledgement for this long counts as without
/// quorum (10 heartbeats).
pub const QUORUM_LOST: Duration = Duration::from_millis(500);
/// How often a Raft core that stopped on a storage error is replaced by a new one on
/// the same store (which stops again at once while the disk stays full).
pub const CORE_RETRY: Duration = Duration::from_secs(5);
/// How long one claim or write may wait for a quorum before the master is degraded.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(1);

/// Config key prefix of replicated partitions (`partition/<pkey, 4 hex digits>`).
pub use ibsm_replica::config_keys::{partition_key, PARTITION_KEY};

/// `name|guid:full,guid:limited`: the replicated form of a partition
/// (`ibsm_replica::config_keys`, which every replica validates on apply, owns the
/// format; this converts from the configurator's type).
pub fn encode_partition(p: &Partition) -> String {
    ibsm_replica::config_keys::encode_partition(&ibsm_replica::Partition {
        p_key: p.p_key,
        name: p.name.clone(),
        members: p
            .members
            .iter()
            .map(|m| ibsm_replica::PartitionMember {
                port_guid: m.port_guid,
                full: m.membership == Membership::Full,
            })
            .collect(),
    })
}

/// The partition a replicated config entry holds; `None` for another key or an entry
/// that does not parse (the state machine refuses those, so only a store written
/// before its checks can hold one).
pub fn decode_partition(key: &str, value: &str) -> Option<Partition> {
    let p = ibsm_replica::config_keys::decode_partition(key, value).ok()?;
    Some(Partition {
        name: p.name,
        p_key: p.p_key,
        members: p
            .members
            .into_iter()
            .map(|m| PartitionMember {
                port_guid: m.port_guid,
                membership: if m.full {
                    Membership::Full
                } else {
                    Membership::Limited
                },
            })
            .collect(),
    })
}

/// The partitions in a replicated state, by P_Key.
pub fn partitions_in(state: &FabricState) -> Vec<Partition> {
    state
        .config
        .range(PARTITION_KEY.to_string()..)
        .take_while(|(k, _)| k.starts_with(PARTITION_KEY))
        .filter_map(|(k, v)| decode_partition(k, v))
        .collect()
}

pub use ibsm_core::node::{effective_partitions, SkippedPartition};

/// The replicated-config key that maps an SM port GUID to its Raft node id.
pub fn sm_node_key(guid: u64) -> String {
    ibsm_replica::config_keys::sm_node_key(guid)
}

/// How to start the replica of this daemon (`--node-id`, `--grpc`, `--peer`, `--data-dir`).
#[derive(Debug, Clone)]
pub struct ClusterConfig {
    /// This instance's Raft node id.
    pub node_id: NodeId,
    /// `host:port` the peers dial (the daemon's gRPC address).
    pub grpc_addr: String,
    /// The first cluster, this node included; empty: join later through AddMember.
    pub initial_members: BTreeMap<NodeId, String>,
    /// Where `replica.redb` lives.
    pub data_dir: PathBuf,
    /// Raft timers; [`ClusterConfig::timers_for_daemon`] by default.
    pub timers: RaftTimers,
    /// Mutual TLS towards the peers (Raft and the catch-up check); `None`: plaintext.
    /// See `SecurityOptions::peer_tls`.
    pub peer_tls: Option<tonic::transport::ClientTlsConfig>,
    /// How members authenticate each other on the Raft service (cluster secret and/or
    /// member certificates); the daemon refuses to start with neither.
    pub peer_auth: ibsm_replica::PeerAuth,
    /// Bootstrap even if the data dir was a member before (`--force-bootstrap`).
    pub force_bootstrap: bool,
}

/// A fresh random cluster secret (32 hex digits from the OS's random source), for the
/// demos, which make their own.
pub fn random_cluster_secret() -> std::io::Result<ibsm_replica::ClusterSecret> {
    use std::io::Read;
    let mut b = [0u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut b)?;
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    ibsm_replica::ClusterSecret::new(&hex).map_err(std::io::Error::other)
}

impl ClusterConfig {
    /// The replica's defaults with a [`WRITE_TIMEOUT`] write timeout (the writer retries
    /// by itself, so a short timeout only makes "degraded" show sooner).
    pub fn timers_for_daemon() -> RaftTimers {
        RaftTimers {
            write_timeout: WRITE_TIMEOUT,
            ..RaftTimers::default()
        }
    }
}

/// What a master publishes after a sweep: the whole desired replicated record.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FabricRecord {
    /// Port GUID -> LIDs as programmed.
    pub guid2lid: BTreeMap<u64, LidRange>,
    /// The discovered topology.
    pub topology: Option<TopologySummary>,
    /// Switch node GUID -> digest of the LFT it holds.
    pub lft_digests: BTreeMap<u64, LftDigest>,
    /// The M_Key the sweep programmed (None: leave the replicated one alone).
    pub m_key: Option<u64>,
    /// The partitions the sweep programmed (start-up plus replicated requests), by
    /// P_Key; None: leave the replicated ones alone.
    pub partitions: Option<BTreeMap<u16, ibsm_replica::Partition>>,
    /// The SM ports the master knows (itself included) with their last SMInfo; None:
    /// leave the replicated roster alone.
    pub sm_roster: Option<BTreeMap<u64, ibsm_replica::SmRosterEntry>>,
}

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

/// Errors of the cluster operations.
#[derive(Debug, thiserror::Error)]
pub enum ReplicationError {
    /// From the replica.
    #[error(transparent)]
    Replica(#[from] ReplicaError),
    /// The handover target has not caught up in time.
    #[error("the target's replica (node {node}) applied {applied} of {want} entries within {waited:?}: not handing over to a replica that would lose state")]
    Lagging {
        /// Target node.
        node: NodeId,
        /// What it applied.
        applied: u64,
        /// What it must apply.
        want: u64,
        /// How long we waited.
        waited: Duration,
    },
}

#[derive(Debug, Default)]
struct Shared {
    /// Bumped on every mastership change, so a writer result for an older mastership
    /// is ignored.
    generation: u64,
    /// SM port GUID while MASTER.
    master_guid: Option<u64>,
    held_epoch: Option<u64>,
    desired: Option<FabricRecord>,
    degraded: bool,
    /// What made it degraded.
    degraded_reason: String,
    /// Set once the data dir was found deleted.
    data_dir_lost: Option<String>,
    /// The Raft core's stop was logged (once per stop).
    core_stop_logged: bool,
    /// A restart of the core is under way.
    core_restarting: bool,
    /// When the next restart of a stopped core may be tried.
    core_retry_at: Option<std::time::Instant>,
    data_dir_checked: Option<std::time::Instant>,
    /// When a newer epoch deposed this master (see [`DEPOSED_RECLAIM`]).
    deposed: Option<std::time::Instant>,
    /// Our SM port GUID to register (`sm.<guid>.node`), until it committed.
    register: Option<u64>,
    registered: Option<u64>,
    stop: bool,
}

/// The daemon's replica plus its writer task. See the module doc.
pub struct Replication {
    replica: Arc<Replica>,
    shared: Arc<Mutex<Shared>>,
    wake: Arc<Notify>,
    data_dir: PathBuf,
    /// Where `ibsm_replication_degraded` is published (set by [`Replication::follow`]'s
    /// caller through [`Replication::set_metrics`]).
    metrics: Mutex<Option<Arc<crate::metrics::Metrics>>>,
    writer: Mutex<Option<JoinHandle<()>>>,
    watcher: Mutex<Option<JoinHandle<()>>>,
    /// The replicated partitions, decoded off the SM thread (see [`PartitionCache`]).
    partitions: Arc<Mutex<PartitionCache>>,
    refresher: Mutex<Option<JoinHandle<()>>>,
    /// Restarts a Raft core that stopped on an error (see [`Replication::check_core`]).
    core_watch: Mutex<Option<JoinHandle<()>>>,
}

/// The `partition/` keys of the replica, decoded. Decoding up to
/// `MAX_PARTITIONS` partitions of up to `MAX_PARTITION_MEMBERS` members each is too
/// much for a gRPC handler, so a task redoes it in the
/// blocking pool when the applied index moves, and bumps `generation` when the set
/// changed; the SM thread compares generations.
#[derive(Debug, Default)]
struct PartitionCache {
    /// The applied log index this was decoded at.
    applied: Option<u64>,
    /// Bumped on every change of `replicated`.
    generation: u64,
    replicated: Arc<Vec<Partition>>,
}

/// How often the partition cache looks at the applied index.
const PARTITION_REFRESH: Duration = Duration::from_millis(20);

/// Decode the replica's partitions again if its applied index moved.
async fn refresh_partitions(replica: &Arc<Replica>, cache: &Mutex<PartitionCache>) {
    let applied = replica.metrics().last_applied;
    if cache.lock().unwrap_or_else(|p| p.into_inner()).applied == applied && applied.is_some() {
        return;
    }
    let r = Arc::clone(replica);
    let Ok(decoded) = tokio::task::spawn_blocking(move || r.with_state(partitions_in)).await else {
        return;
    };
    let mut c = cache.lock().unwrap_or_else(|p| p.into_inner());
    c.applied = applied;
    if *c.replicated != decoded {
        c.generation += 1;
        c.replicated = Arc::new(decoded);
    }
}

impl std::fmt::Debug for Replication {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Replication")
            .field("node_id", &self.replica.node_id())
            .finish_non_exhaustive()
    }
}

fn lock(m: &Mutex<Shared>) -> MutexGuard<'_, Shared> {
    m.lock().unwrap_or_else(|p| p.into_inner())
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

/// The ops that turn `have` into `want` (sets only: a port GUID stays remembered after
/// its port leaves, like OpenSM's guid2lid; a digest is replaced, never dropped).
pub fn diff_ops(have: &FabricState, want: &FabricRecord) -> Vec<Op> {
    let mut ops = Vec::new();
    for (g, r) in &want.guid2lid {
        if have.guid2lid.get(g) != Some(r) {
            ops.push(Op::SetGuid2Lid {
                port_guid: *g,
                range: *r,
            });
        }
    }
    if let Some(t) = &want.topology {
        // The sweep counter alone does not make a new topology.
        let same = have
            .topology
            .as_ref()
            .is_some_and(|h| h.nodes == t.nodes && h.links == t.links);
        if !same {
            ops.push(Op::SetTopology(t.clone()));
        }
    }
    for (g, d) in &want.lft_digests {
        if have.lft_digests.get(g) != Some(d) {
            ops.push(Op::SetLftDigest {
                switch_guid: *g,
                digest: *d,
            });
        }
    }
    if let Some(k) = want.m_key.filter(|k| *k != have.m_key) {
        ops.push(Op::SetMKey { m_key: k });
    }
    if let Some(parts) = &want.partitions {
        for (k, p) in parts {
            if have.partitions.get(k) != Some(p) {
                ops.push(Op::SetPartition(p.clone()));
            }
        }
        for k in have.partitions.keys().filter(|k| !parts.contains_key(k)) {
            ops.push(Op::RemovePartition { p_key: *k });
        }
    }
    if let Some(roster) = &want.sm_roster {
        // ActCount moves all the time: an entry is rewritten when its priority or
        // state changed, not for its ActCount alone.
        for (g, e) in roster {
            let same = have
                .sm_roster
                .get(g)
                .is_some_and(|h| h.priority == e.priority && h.sm_state == e.sm_state);
            if !same {
                ops.push(Op::SetSm(*e));
            }
        }
        for g in have.sm_roster.keys().filter(|g| !roster.contains_key(g)) {
            ops.push(Op::RemoveSm { guid: *g });
        }
    }
    ops
}

impl Replication {
    /// Start the replica (serving nothing itself: add [`Replication::grpc_service`] to
    /// the daemon's server, see `server::ServeOptions::replication`) and the writer.
    pub async fn start(cfg: ClusterConfig) -> Result<Arc<Replication>, ReplicaError> {
        let replica = Replica::start(ReplicaConfig {
            node_id: cfg.node_id,
            grpc_addr: cfg.grpc_addr.clone(),
            listen: Listen::External,
            initial_members: cfg.initial_members.clone(),
            data_dir: cfg.data_dir.clone(),
            timers: cfg.timers.clone(),
            peer_tls: cfg.peer_tls.clone(),
            peer_auth: cfg.peer_auth.clone(),
            force_bootstrap: cfg.force_bootstrap,
        })
        .await?;
        if replica.bootstrapped() {
            tracing::info!(node_id = cfg.node_id, "replication cluster bootstrapped");
        }
        let replica = Arc::new(replica);
        let shared = Arc::new(Mutex::new(Shared::default()));
        let wake = Arc::new(Notify::new());
        let writer = tokio::spawn(writer(
            Arc::clone(&replica),
            Arc::clone(&shared),
            Arc::clone(&wake),
        ));
        let partitions = Arc::new(Mutex::new(PartitionCache::default()));
        // The first decode before anyone asks, so a takeover right after start sees
        // the replicated partitions.
        refresh_partitions(&replica, &partitions).await;
        let refresher = {
            let (replica, cache) = (Arc::clone(&replica), Arc::clone(&partitions));
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(PARTITION_REFRESH).await;
                    refresh_partitions(&replica, &cache).await;
                }
            })
        };
        let me = Arc::new(Replication {
            replica,
            shared,
            wake,
            data_dir: cfg.data_dir.clone(),
            metrics: Mutex::new(None),
            writer: Mutex::new(Some(writer)),
            watcher: Mutex::new(None),
            partitions,
            refresher: Mutex::new(Some(refresher)),
            core_watch: Mutex::new(None),
        });
        // Watches the Raft core whether or not an SM instance is followed.
        let watch = {
            let weak = Arc::downgrade(&me);
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    match weak.upgrade() {
                        Some(me) => me.check_core(),
                        None => return,
                    }
                }
            })
        };
        *me.core_watch.lock().unwrap_or_else(|p| p.into_inner()) = Some(watch);
        Ok(me)
    }

    /// The replicated partitions as last decoded, with the generation of that set
    /// (it changes whenever the set does).
    pub fn replicated_partitions(&self) -> (u64, Arc<Vec<Partition>>) {
        let c = self.partitions.lock().unwrap_or_else(|p| p.into_inner());
        (c.generation, Arc::clone(&c.replicated))
    }

    /// The replica (metrics, membership, raw state).
    pub fn replica(&self) -> &Arc<Replica> {
        &self.replica
    }

    /// The Raft gRPC service for the daemon's tonic server.
    pub fn grpc_service(
        &self,
    ) -> ibsm_replica::pb::raft_server::RaftServer<ibsm_replica::network::RaftGrpc> {
        self.replica.grpc_service()
    }

    /// This instance's SM became MASTER on port `sm_guid`: claim a new epoch and write
    /// from now on. Non-blocking.
    pub fn become_master(&self, sm_guid: u64) {
        {
            let mut s = lock(&self.shared);
            if s.master_guid == Some(sm_guid) {
                return;
            }
            s.generation += 1;
            s.master_guid = Some(sm_guid);
            s.held_epoch = None;
            s.desired = None;
            s.deposed = None;
            s.degraded = false;
        }
        tracing::info!(
            sm_guid = format_args!("{sm_guid:#018x}"),
            "replication: claiming mastership"
        );
        self.wake.notify_one();
    }

    /// No longer MASTER: no new claim; a record still pending is written once more
    /// with the epoch held (what the switches hold after our last sweep, e.g. just
    /// before a planned handover); if the next master claimed first, that write is
    /// refused as stale and dropped, which is right: the fabric is theirs.
    pub fn stop_master(&self) {
        {
            let mut s = lock(&self.shared);
            if s.master_guid.is_none() {
                return;
            }
            s.master_guid = None;
            s.degraded = false;
            if s.desired.is_none() {
                s.held_epoch = None;
            }
        }
        self.wake.notify_one();
    }

    /// A master's desired replicated record after a sweep (replaces an unwritten one).
    pub fn publish(&self, record: FabricRecord) {
        {
            let mut s = lock(&self.shared);
            if s.master_guid.is_none() {
                return;
            }
            s.desired = Some(record);
        }
        self.wake.notify_one();
    }

    /// Register this instance's SM port GUID (for handover catch-up checks).
    pub fn register_sm(&self, guid: u64) {
        {
            let mut s = lock(&self.shared);
            if s.registered == Some(guid) || s.register == Some(guid) {
                return;
            }
            s.register = Some(guid);
        }
        self.wake.notify_one();
    }

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
    fn check_data_dir(&self) {
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
    fn check_core(self: &Arc<Self>) {
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

    /// Publish the degraded state to `m` (`ibsm_replication_degraded`) while following.
    pub fn set_metrics(&self, m: Arc<crate::metrics::Metrics>) {
        *self.metrics.lock().unwrap_or_else(|p| p.into_inner()) = Some(m);
    }

    /// Follow an SM instance: `sm` tells, when asked, its port GUID and SMInfo state
    /// while it runs (`None` when it does not; see `server::followed_sm`, which reads an
    /// instance slot that a demo restart may refill). Registers its port GUID and
    /// becomes / stops being the writing master with its state. Replaces an earlier
    /// watcher.
    pub fn follow(self: &Arc<Self>, sm: impl Fn() -> Option<(u64, SmState)> + Send + 'static) {
        let me = Arc::clone(self);
        let task = tokio::spawn(async move {
            loop {
                match sm() {
                    Some((guid, state)) if guid != 0 => {
                        me.register_sm(guid);
                        if state == SmState::Master {
                            me.become_master(guid);
                        } else {
                            me.stop_master();
                        }
                    }
                    _ => me.stop_master(),
                }
                if lock(&me.shared).stop {
                    return;
                }
                me.check_data_dir();
                let m = me.metrics.lock().unwrap_or_else(|p| p.into_inner()).clone();
                if let Some(m) = m {
                    m.set_degraded(me.status().degraded);
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        });
        let old = self
            .watcher
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .replace(task);
        if let Some(old) = old {
            old.abort();
        }
    }

    /// Wait until the replica of the SM with port GUID `target` has applied every entry
    /// in this instance's log (a planned handover must not go to a lagging replica).
    /// Returns at once when the target is not a known cluster member.
    pub async fn wait_caught_up(
        &self,
        target: u64,
        limit: Duration,
    ) -> Result<(), ReplicationError> {
        let node = self.replica.with_state(|s| {
            s.config
                .get(&sm_node_key(target))
                .and_then(|v| v.parse::<NodeId>().ok())
        });
        let Some(node) = node else {
            tracing::info!(
                target = format_args!("{target:#018x}"),
                "handover target is not a replication member: not waiting for it"
            );
            return Ok(());
        };
        let m = self.replica.metrics();
        let Some(addr) = m
            .voters
            .get(&node)
            .or_else(|| m.learners.get(&node))
            .cloned()
        else {
            return Ok(());
        };
        let want = m.last_log_index.unwrap_or(0);
        let start = std::time::Instant::now();
        let mut applied = 0;
        loop {
            if node == self.replica.node_id() {
                return Ok(());
            }
            if let Ok(a) = self.replica.peer_applied(node, &addr).await {
                applied = a;
                if a >= want {
                    tracing::info!(
                        node,
                        applied = a,
                        want,
                        waited_ms = start.elapsed().as_millis() as u64,
                        "handover target's replica has caught up"
                    );
                    return Ok(());
                }
            }
            if start.elapsed() >= limit {
                return Err(ReplicationError::Lagging {
                    node,
                    applied,
                    want,
                    waited: limit,
                });
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Stop the writer and Raft (the store stays on disk).
    pub async fn shutdown(&self) {
        lock(&self.shared).stop = true;
        self.wake.notify_one();
        let tasks = [
            self.writer.lock().unwrap_or_else(|p| p.into_inner()).take(),
            self.watcher
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take(),
            self.refresher
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take(),
            self.core_watch
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take(),
        ];
        for t in tasks.into_iter().flatten() {
            t.abort();
            let _ = t.await;
        }
        if let Err(e) = self.replica.shutdown().await {
            tracing::debug!(%e, "replica shutdown");
        }
    }
}

enum Step {
    Claim(u64, u64),
    Write(u64, u64, FabricRecord),
    Register(u64),
    Idle,
}

/// What the writer does after a step.
enum Next {
    /// Progress: look for more work at once.
    Again,
    /// A claim or write did not commit: try again after [`RETRY`].
    Retry,
    /// Nothing to do: wait for news (or the retry tick).
    Wait,
}

/// The writer task (see the module doc).
async fn writer(replica: Arc<Replica>, shared: Arc<Mutex<Shared>>, wake: Arc<Notify>) {
    loop {
        let step = {
            let s = lock(&shared);
            if s.stop {
                return;
            }
            match (s.master_guid, s.held_epoch, &s.desired) {
                (Some(g), None, _)
                    if s.deposed.is_none_or(|at| at.elapsed() >= DEPOSED_RECLAIM) =>
                {
                    Step::Claim(s.generation, g)
                }
                (_, Some(e), Some(d)) => Step::Write(s.generation, e, d.clone()),
                _ => match s.register {
                    Some(g) => Step::Register(g),
                    None => Step::Idle,
                },
            }
        };
        let next = match step {
            Step::Idle => Next::Wait,
            Step::Claim(generation, guid) => claim(&replica, &shared, generation, guid).await,
            Step::Write(generation, epoch, want) => {
                write(&replica, &shared, generation, epoch, want).await
            }
            Step::Register(guid) => register(&replica, &shared, guid).await,
        };
        match next {
            Next::Again => tokio::task::yield_now().await,
            Next::Retry | Next::Wait => {
                tokio::select! {
                    _ = wake.notified() => {}
                    _ = tokio::time::sleep(RETRY) => {}
                }
            }
        }
    }
}

async fn claim(replica: &Replica, shared: &Mutex<Shared>, generation: u64, guid: u64) -> Next {
    match replica.claim_mastership(guid).await {
        Ok(epoch) => {
            let mut s = lock(shared);
            if s.generation == generation {
                s.held_epoch = Some(epoch);
                s.deposed = None;
                if s.degraded {
                    tracing::info!(epoch, "replication: quorum is back");
                }
                s.degraded = false;
                tracing::info!(epoch, "replication: mastership epoch claimed");
            }
            Next::Again
        }
        Err(ReplicaError::Refused(Refusal::StaleEpoch { current, .. })) => {
            // Our copy lagged behind a newer epoch; it is catching up: claim above it.
            tracing::debug!(current, "epoch claim raced a newer epoch; retrying");
            tokio::time::sleep(Duration::from_millis(20)).await;
            Next::Again
        }
        Err(ReplicaError::Refused(r)) => {
            let mut s = lock(shared);
            if s.generation == generation && !s.degraded {
                tracing::error!(refusal = %r, "replication: the mastership claim was refused: DEGRADED, running the fabric from the local replica");
                s.degraded = true;
                s.degraded_reason = format!("mastership claim refused: {r}");
            }
            Next::Retry
        }
        Err(e) => {
            let mut s = lock(shared);
            if s.generation == generation && !s.degraded {
                tracing::warn!(%e, "replication: cannot claim the mastership epoch (no quorum?): DEGRADED, running the fabric from the local replica");
                s.degraded = true;
                s.degraded_reason = format!("mastership claim did not commit: {e}");
            }
            Next::Retry
        }
    }
}

async fn write(
    replica: &Replica,
    shared: &Mutex<Shared>,
    generation: u64,
    epoch: u64,
    want: FabricRecord,
) -> Next {
    let ops = replica.with_state(|have| diff_ops(have, &want));
    let done = |s: &mut Shared| {
        if s.generation == generation && s.desired.as_ref() == Some(&want) {
            s.desired = None;
            if s.master_guid.is_none() {
                // The last write after stepping down (see stop_master).
                s.held_epoch = None;
            }
        }
    };
    if ops.is_empty() {
        done(&mut lock(shared));
        return Next::Again;
    }
    let n = ops.len();
    match replica.write(Command::Update { epoch, ops }).await {
        Ok(r) => {
            let mut s = lock(shared);
            if s.generation == generation {
                if s.degraded {
                    tracing::info!(
                        epoch,
                        ops = n,
                        "replication: quorum is back; the assignments made meanwhile are replicated"
                    );
                }
                s.degraded = false;
            }
            done(&mut s);
            tracing::debug!(epoch, ops = n, log_index = r.log_index, "replicated");
            Next::Again
        }
        Err(ReplicaError::Refused(Refusal::StaleEpoch { current, .. })) => {
            let mut s = lock(shared);
            if s.generation == generation {
                tracing::warn!(
                    epoch,
                    current,
                    "replication: another master holds a newer epoch: deposed, not writing"
                );
                s.deposed = Some(std::time::Instant::now());
                s.held_epoch = None;
                s.desired = None;
                if s.master_guid.is_some() {
                    s.degraded = true;
                    s.degraded_reason = format!(
                        "deposed by epoch {current}; claiming again in {} ms if still MASTER",
                        DEPOSED_RECLAIM.as_millis()
                    );
                }
            }
            Next::Again
        }
        Err(e) => {
            let mut s = lock(shared);
            if s.generation == generation && s.master_guid.is_none() {
                // Not master any more and no quorum: give the record up.
                s.desired = None;
                s.held_epoch = None;
                return Next::Again;
            }
            if s.generation == generation && !s.degraded {
                tracing::warn!(%e, "replication: write did not commit (no quorum?): DEGRADED, keeping the assignments to reconcile");
                s.degraded = true;
                s.degraded_reason = format!("fabric state write did not commit: {e}");
            }
            Next::Retry
        }
    }
}

async fn register(replica: &Replica, shared: &Mutex<Shared>, guid: u64) -> Next {
    let node = replica.node_id().to_string();
    let key = sm_node_key(guid);
    let already = replica.with_state(|s| s.config.get(&key) == Some(&node));
    let ok = already
        || replica
            .write(Command::Config(ConfigChange::Set { key, value: node }))
            .await
            .is_ok();
    if !ok {
        return Next::Retry;
    }
    let mut s = lock(shared);
    if s.register == Some(guid) {
        s.register = None;
        s.registered = Some(guid);
    }
    Next::Again
}

/// The replicated state as the SM node inherits it ([`ibsm_core::node::ReplicatedFabric`]): LIDs as
/// OpenSM's guid2lid text, LFT digests and cabling, the fabric's M_Key and the
/// replicated partitions, read from the local replica now.
pub fn replicated_fabric(r: &Replication) -> ReplicatedFabric {
    r.replica.with_state(|s| ReplicatedFabric {
        epoch: s.epoch,
        guid2lid_file: s.guid2lid_file(),
        guid2lid_ports: s.guid2lid.len(),
        inherited: inherited_of(s),
        m_key: s.m_key,
        partitions: partitions_in(s),
    })
}

/// The core's view of what the previous master left.
pub fn inherited_of(state: &FabricState) -> Inherited {
    Inherited {
        lft_digests: state
            .lft_digests
            .iter()
            .map(|(g, d)| (*g, (d.lft_top, d.digest)))
            .collect(),
        links: state.topology.as_ref().map(|t| {
            t.links
                .iter()
                .map(|l| {
                    let (a, b) = ((l.node_guid_a, l.port_a), (l.node_guid_b, l.port_b));
                    let (x, y) = if a < b { (a, b) } else { (b, a) };
                    (x.0, x.1, y.0, y.1)
                })
                .collect::<HashSet<Link>>()
        }),
    }
}

/// What a master publishes after a heavy sweep: LIDs as programmed (switches: port
/// 0; CAs and routers: every port with a LID, 2^LMC of them), the cabling, and the
/// digest of every LFT it programmed or verified.
pub fn record_of(subnet: &SubnetManager) -> FabricRecord {
    let mut rec = FabricRecord::default();
    let Some(res) = subnet.last_discovery() else {
        return rec;
    };
    // Published after a heavy sweep, which wrote the configured key into every
    // PortInfo it reached.
    rec.m_key = Some(subnet.m_key().key);
    let t = &res.topology;
    let mut nodes = Vec::new();
    for (_, node) in t.iter() {
        nodes.push(TopoNode {
            node_guid: node.node_guid,
            node_type: match node.node_type {
                ibsm_fabric::NodeType::Ca => 1,
                ibsm_fabric::NodeType::Switch => 2,
                ibsm_fabric::NodeType::Router => 3,
            },
            num_ports: u8::try_from(node.ports.len().saturating_sub(1)).unwrap_or(u8::MAX),
            description: node.description.clone(),
        });
        let ports: Vec<&ibsm_fabric::Port> = if node.is_switch() {
            node.port(0).into_iter().collect()
        } else {
            node.physical_ports().map(|(_, p)| p).collect()
        };
        for p in ports {
            if p.lid == 0 || p.port_guid == 0 {
                continue;
            }
            let max_lid = p
                .lid
                .saturating_add((1u16 << p.lmc.min(7)) - 1)
                .min(ibsm_replica::MAX_UNICAST_LID);
            rec.guid2lid.insert(
                p.port_guid,
                LidRange {
                    min_lid: p.lid,
                    max_lid,
                },
            );
        }
    }
    nodes.sort_by_key(|n| n.node_guid);
    let mut links: Vec<TopoLink> = links_of(t)
        .into_iter()
        .map(|(a, pa, b, pb)| TopoLink {
            node_guid_a: a,
            port_a: pa,
            node_guid_b: b,
            port_b: pb,
        })
        .collect();
    links.sort_by_key(|l| (l.node_guid_a, l.port_a, l.node_guid_b, l.port_b));
    rec.topology = Some(TopologySummary {
        sweep: subnet.metrics().heavy_sweeps,
        nodes,
        links,
    });
    for (guid, top, table) in subnet.programmed_lfts() {
        rec.lft_digests.insert(
            guid,
            LftDigest {
                lft_top: top,
                digest: lft_digest(table),
            },
        );
    }
    rec.partitions = Some(
        subnet
            .sweep_partitions()
            .iter()
            .map(|p| {
                let members = p
                    .members
                    .iter()
                    .map(|m| ibsm_replica::PartitionMember {
                        port_guid: m.port_guid,
                        full: m.membership == Membership::Full,
                    })
                    .collect();
                (
                    p.p_key,
                    ibsm_replica::Partition {
                        p_key: p.p_key,
                        name: p.name.clone(),
                        members,
                    },
                )
            })
            .collect(),
    );
    rec
}

/// The roster a master replicates: every SM port it knows, itself included, with the
/// SMInfo it last read (an SM that never answered is left out: no state to record).
pub fn roster_of(sms: &[ibsm_core::node::PeerView]) -> BTreeMap<u64, ibsm_replica::SmRosterEntry> {
    sms.iter()
        .filter_map(|p| {
            let sm_state = match p.state? {
                SmState::NotActive => ibsm_replica::SmState::NotActive,
                SmState::Discovering => ibsm_replica::SmState::Discovering,
                SmState::Standby => ibsm_replica::SmState::Standby,
                SmState::Master => ibsm_replica::SmState::Master,
            };
            Some((
                p.guid,
                ibsm_replica::SmRosterEntry {
                    guid: p.guid,
                    priority: p.priority,
                    sm_state,
                    act_count: p.act_count,
                },
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ibsm_core::subnet::{ConfigError, SubnetConfig};

    #[test]
    fn the_programmed_partitions_and_the_sm_roster_are_replicated_and_pruned() {
        let entry = |guid, priority, sm_state| ibsm_replica::SmRosterEntry {
            guid,
            priority,
            sm_state,
            act_count: 7,
        };
        let part = |p_key| ibsm_replica::Partition {
            p_key,
            name: format!("p{p_key:x}"),
            members: vec![ibsm_replica::PartitionMember {
                port_guid: 9,
                full: true,
            }],
        };
        let mut have = FabricState::default();
        have.partitions.insert(0x7fff, part(0x7fff));
        have.partitions.insert(0x10, part(0x10));
        have.sm_roster
            .insert(1, entry(1, 10, ibsm_replica::SmState::Master));
        have.sm_roster
            .insert(3, entry(3, 5, ibsm_replica::SmState::Standby));
        let want = FabricRecord {
            partitions: Some([(0x7fff, part(0x7fff)), (0x20, part(0x20))].into()),
            sm_roster: Some(
                [
                    // Only the ActCount moved: not rewritten.
                    (
                        1,
                        ibsm_replica::SmRosterEntry {
                            act_count: 99,
                            ..entry(1, 10, ibsm_replica::SmState::Master)
                        },
                    ),
                    (2, entry(2, 8, ibsm_replica::SmState::Standby)),
                ]
                .into(),
            ),
            ..FabricRecord::default()
        };
        let ops = diff_ops(&have, &want);
        assert_eq!(
            ops,
            vec![
                Op::SetPartition(part(0x20)),
                Op::RemovePartition { p_key: 0x10 },
                Op::SetSm(entry(2, 8, ibsm_replica::SmState::Standby)),
                Op::RemoveSm { guid: 3 },
            ]
        );
        for op in &ops {
            have.apply_op(op);
        }
        assert!(
            diff_ops(&have, &want).is_empty(),
            "applied: nothing left to write"
        );
        // A record that says nothing about them leaves them alone.
        assert!(diff_ops(&have, &FabricRecord::default()).is_empty());
    }

    fn part(name: &str, pkey: u16, members: &[u64]) -> Partition {
        Partition {
            name: name.into(),
            p_key: pkey,
            members: members
                .iter()
                .map(|&port_guid| PartitionMember {
                    port_guid,
                    membership: Membership::Full,
                })
                .collect(),
        }
    }

    #[test]
    fn replicated_partitions_join_the_configured_ones_and_win_on_pkey_or_name() {
        let configured = [part("storage", 0x10, &[1]), part("compute", 0x20, &[2])];
        let replicated = [
            part("storage-b", 0x10, &[3]),
            part("compute", 0x25, &[4]),
            part("gpu", 0x30, &[5]),
        ];
        let (got, skipped) = effective_partitions(&configured, &replicated);
        assert!(skipped.is_empty(), "{skipped:?}");
        assert_eq!(
            got,
            vec![
                part("storage-b", 0x10, &[3]),
                part("compute", 0x25, &[4]),
                part("gpu", 0x30, &[5]),
            ]
        );
        assert!(SubnetConfig {
            partitions: got,
            ..SubnetConfig::default()
        }
        .validate()
        .is_ok());
    }

    #[test]
    fn a_replicated_partition_that_breaks_the_set_is_skipped_alone() {
        // Port 9 already in 31 configured partitions: a 32nd does not fit.
        let configured: Vec<Partition> = (1..=31u16)
            .map(|k| part(&format!("p{k}"), k, &[9]))
            .collect();
        let replicated = [
            part("too-many", 0x100, &[9, 8]),
            part("fine", 0x200, &[8]),
            part("fine", 0x300, &[7]),
        ];
        let (got, skipped) = effective_partitions(&configured, &replicated);
        assert_eq!(got.len(), 32);
        assert!(got.iter().any(|p| p.p_key == 0x200));
        let why: Vec<(u16, &ConfigError)> = skipped
            .iter()
            .map(|s| (s.partition.p_key, &s.why))
            .collect();
        assert!(
            matches!(
                why.as_slice(),
                [
                    (0x100, ConfigError::TooManyPartitions { count: 32, .. }),
                    (0x300, ConfigError::Duplicate { what: "name", .. })
                ]
            ),
            "{why:?}"
        );
    }

    #[test]
    fn the_replicated_form_round_trips_and_lists_only_partition_keys() {
        let p = Partition {
            name: "mixed".into(),
            p_key: 0x7ffe,
            members: vec![
                PartitionMember {
                    port_guid: 0x0002_c903_0000_0011,
                    membership: Membership::Full,
                },
                PartitionMember {
                    port_guid: 0x12,
                    membership: Membership::Limited,
                },
            ],
        };
        let key = partition_key(p.p_key);
        assert_eq!(key, "partition/7ffe");
        assert_eq!(
            decode_partition(&key, &encode_partition(&p)).as_ref(),
            Some(&p)
        );
        let mut state = FabricState::default();
        state.config.insert("other".into(), "x".into());
        state.config.insert(key, encode_partition(&p));
        state.config.insert("partitionz".into(), "y|".into());
        state.config.insert("sm.1.node".into(), "1".into());
        assert_eq!(partitions_in(&state), vec![p]);
    }
}
