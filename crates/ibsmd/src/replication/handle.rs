//! The [`Replication`] handle the daemon holds: starting the replica and its tasks, the
//! non-blocking calls the SM instance thread makes (become or stop being master,
//! publish a record, register its SM port), following an instance, the planned
//! handover's catch-up wait, and shutdown. The writer task does the Raft writes
//! (`super::writer`); the status and health checks are `super::status`.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ibsm_core::election::SmState;
use ibsm_core::subnet::Partition;
use ibsm_replica::{Listen, NodeId, Replica, ReplicaConfig, ReplicaError};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use super::cluster::ClusterConfig;
use super::keys::{partitions_in, sm_node_key};
use super::record::FabricRecord;
use super::sa::ReplicaSaTables;
use super::shared::{lock, Shared};
use super::writer::writer;

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

/// The daemon's replica plus its writer task. See the module doc.
pub struct Replication {
    pub(super) replica: Arc<Replica>,
    pub(super) shared: Arc<Mutex<Shared>>,
    wake: Arc<Notify>,
    pub(super) data_dir: PathBuf,
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

    /// When the Raft leader's heartbeat last reached this member, and the SM port GUID
    /// that leader registered (`sm.<guid>.node`); `None` before any contact, or when the
    /// leader registered no SM (the election's second opinion on its master).
    pub fn leader_contact_sm(&self) -> Option<(std::time::Instant, u64)> {
        let (at, node) = self.replica.leader_contact()?;
        let guid = self
            .replica
            .with_state(|s| ibsm_replica::config_keys::sm_of_node(&s.config, node))?;
        Some((at, guid))
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

    /// Publish the SA's tables alone (a join, a leave): merged into the record waiting
    /// to be written, or written on their own.
    pub fn publish_sa(&self, tables: ReplicaSaTables) {
        {
            let mut s = lock(&self.shared);
            if s.master_guid.is_none() {
                return;
            }
            match s.desired.as_mut() {
                Some(d) => d.sa = Some(tables),
                None => {
                    s.desired = Some(FabricRecord {
                        sa: Some(tables),
                        ..FabricRecord::default()
                    })
                }
            }
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
                    let st = me.status();
                    m.set_degraded(st.degraded);
                    m.set_applied_index(st.applied_index);
                    let rm = me.metrics();
                    m.set_replication(Some(crate::metrics::ReplicationFigures {
                        epoch: st.epoch,
                        role: st.raft_role,
                        term: st.term,
                        node_id: rm.node_id,
                        leader: st.leader,
                        last_log_index: rm.last_log_index.unwrap_or(0),
                        matched: rm.matched,
                        leadership_requests: lock(&me.shared).leadership_requests,
                    }));
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
