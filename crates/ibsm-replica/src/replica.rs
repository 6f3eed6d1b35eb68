//! [`Replica`]: one instance of the replicated state (openraft + redb store + gRPC).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use openraft::{BasicNode, Config, SnapshotPolicy};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::forward::execute_local;
use crate::metrics::{to_metrics, ReplicaMetrics};
use crate::network::{
    current, FaultSwitch, ForwardError, ForwardReply, ForwardRequest, NetworkFactory, PeerAuth,
    Peers, RaftCell, RaftGrpc, MAX_MESSAGE_BYTES,
};
use crate::pb::raft_server::RaftServer;
use crate::state::{Command, FabricState, Outcome, Refusal};
use crate::store::{open_db, LogStore, SmData, StateMachineStore, StoreError};
use crate::{NodeId, TypeConfig};

/// Raft timers and log-compaction settings. See the crate doc ("Timers") for why these
/// defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RaftTimers {
    /// Leader heartbeat period. Default 50 ms.
    pub heartbeat: Duration,
    /// Election timeout, drawn in `election_min..election_max`. Default 250-500 ms.
    pub election_min: Duration,
    pub election_max: Duration,
    /// TCP connect timeout to a peer. Default 200 ms.
    pub connect_timeout: Duration,
    /// How long [`Replica::write`] and membership changes keep trying (leader changes,
    /// forwarding) before giving up with [`ReplicaError::Timeout`]. Default 5 s.
    pub write_timeout: Duration,
    /// Time allowed to stream one snapshot to a peer. Default 10 s.
    pub snapshot_timeout: Duration,
    /// Build a snapshot (and compact the log) after this many applied entries. Default 10,000.
    pub snapshot_after_logs: u64,
    /// Entries kept in the log behind the last snapshot, so a briefly lagging follower
    /// catches up from the log rather than a snapshot. Default 1,000.
    pub logs_kept_after_snapshot: u64,
}

impl Default for RaftTimers {
    fn default() -> Self {
        Self {
            heartbeat: Duration::from_millis(50),
            election_min: Duration::from_millis(250),
            election_max: Duration::from_millis(500),
            connect_timeout: Duration::from_millis(200),
            write_timeout: Duration::from_secs(5),
            snapshot_timeout: Duration::from_secs(10),
            snapshot_after_logs: 10_000,
            logs_kept_after_snapshot: 1_000,
        }
    }
}

impl RaftTimers {
    fn to_config(&self) -> Result<Config, ReplicaError> {
        let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        let c = Config {
            cluster_name: "ibsm".into(),
            heartbeat_interval: ms(self.heartbeat),
            election_timeout_min: ms(self.election_min),
            election_timeout_max: ms(self.election_max),
            install_snapshot_timeout: ms(self.snapshot_timeout),
            snapshot_policy: SnapshotPolicy::LogsSinceLast(self.snapshot_after_logs),
            max_in_snapshot_log_to_keep: self.logs_kept_after_snapshot,
            ..Default::default()
        };
        c.validate()
            .map_err(|e| ReplicaError::Config(format!("Raft timers: {e}")))
    }
}

/// Where the Raft gRPC service is served.
#[derive(Debug)]
pub enum Listen {
    /// Bind this address and serve the Raft service alone (tests, tools).
    Bind(SocketAddr),
    /// Serve on a listener the caller already bound (ephemeral ports in tests).
    Listener(tokio::net::TcpListener),
    /// Serve nothing: the caller adds [`Replica::grpc_service`] to its own tonic server
    /// (ibsmd serves the control API and Raft on one port).
    External,
}

/// How to start one instance.
#[derive(Debug)]
pub struct ReplicaConfig {
    /// This instance's Raft node id (`--node-id`).
    pub node_id: NodeId,
    /// The address the peers dial to reach this instance (`--grpc`), `host:port`.
    pub grpc_addr: String,
    pub listen: Listen,
    /// The cluster to bootstrap (`--peer ID=ADDR`..., including this node). The lowest id
    /// initializes it, once, if its store is empty. Empty: this instance joins an
    /// existing cluster and waits for [`Replica::add_member`] on it.
    pub initial_members: BTreeMap<NodeId, String>,
    /// Where replica.redb lives (`--data-dir`); created if missing.
    pub data_dir: PathBuf,
    pub timers: RaftTimers,
    /// How to reach the peers' Raft service over TLS: the CA that signed the members'
    /// certificates and this member's own certificate (mutual TLS, as `ibsmd
    /// --tls-cert/--tls-key/--tls-client-ca` requires of every client). `None`:
    /// plaintext, for a trusted network only.
    pub peer_tls: Option<tonic::transport::ClientTlsConfig>,
    /// How the peers authenticate each other (cluster secret sent and required on
    /// every Raft RPC, and/or member certificates over mutual TLS). The default checks
    /// nothing: in-process tests only; ibsmd refuses to start without one.
    pub peer_auth: PeerAuth,
    /// Bootstrap even though the data dir says it was a member of a cluster before
    /// (its store was lost): `ibsmd --force-bootstrap`. See [`crate::identity`].
    pub force_bootstrap: bool,
}

/// A `--peer ID=ADDR` argument (implements `FromStr` for clap).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerArg {
    pub node_id: NodeId,
    pub addr: String,
}

impl FromStr for PeerArg {
    type Err = ReplicaError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (id, addr) = s
            .split_once('=')
            .ok_or_else(|| ReplicaError::Config(format!("peer {s:?}: expected ID=HOST:PORT")))?;
        let node_id = id.trim().parse::<u64>().map_err(|e| {
            ReplicaError::Config(format!("peer {s:?}: node id {id:?} is not a u64: {e}"))
        })?;
        let addr = addr.trim();
        if addr.is_empty() || !addr.contains(':') {
            return Err(ReplicaError::Config(format!(
                "peer {s:?}: address {addr:?} is not HOST:PORT"
            )));
        }
        Ok(PeerArg {
            node_id,
            addr: addr.to_string(),
        })
    }
}

/// Errors of the replica API.
#[derive(Debug, thiserror::Error)]
pub enum ReplicaError {
    #[error("invalid replica configuration: {0}")]
    Config(String),
    #[error(transparent)]
    Identity(#[from] crate::identity::IdentityError),
    #[error("data dir {path}: {source}")]
    DataDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("opening the replica store {path}: {source}")]
    Store {
        path: PathBuf,
        source: Box<StoreError>,
    },
    #[error("binding the Raft gRPC listener on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("raft: {0}")]
    Raft(String),
    #[error("refused by the replicated state machine: {0}")]
    Refused(#[from] Refusal),
    #[error("not done within {0:?} (no reachable leader, or no quorum): the request may still commit later")]
    Timeout(Duration),
    #[error("{}", match leader {
        Some((id, addr)) => format!("membership changes run on the Raft leader: node {id} at {addr}; send the request there"),
        None => "membership changes run on the Raft leader, and there is none right now: retry shortly".to_string(),
    })]
    NotLeader { leader: Option<(NodeId, String)> },
}

/// Proof that a write is committed (on a quorum's disks) and applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteReceipt {
    /// Raft log index of the command.
    pub log_index: u64,
    /// Mastership epoch after the command.
    pub epoch: u64,
}

/// The parts of a Raft core that outlive it.
struct CoreParts {
    config: Arc<Config>,
    net: NetworkFactory,
    db_path: PathBuf,
    /// One restart at a time.
    restarting: tokio::sync::Mutex<()>,
}

struct Server {
    shutdown: Option<oneshot::Sender<()>>,
    join: Option<JoinHandle<Result<(), tonic::transport::Error>>>,
}

/// A running instance. See the crate doc for how the daemon uses it.
pub struct Replica {
    node_id: NodeId,
    raft: RaftCell,
    /// What [`Replica::restart_core`] needs to build a new core on the same store.
    core: CoreParts,
    sm: Arc<RwLock<SmData>>,
    peers: Arc<Peers>,
    fault: FaultSwitch,
    pub(crate) timers: RaftTimers,
    local_addr: Option<SocketAddr>,
    bootstrapped: bool,
    server: tokio::sync::Mutex<Server>,
    svc: RaftGrpc,
}

impl Replica {
    /// Open the store under `data_dir`, start Raft, serve (per `listen`) and bootstrap
    /// the cluster if this is the first start of its lowest-id member.
    pub async fn start(cfg: ReplicaConfig) -> Result<Replica, ReplicaError> {
        if !cfg.initial_members.is_empty() {
            match cfg.initial_members.get(&cfg.node_id) {
                None => {
                    return Err(ReplicaError::Config(format!(
                        "node {} is not among the initial members {:?}",
                        cfg.node_id,
                        cfg.initial_members.keys().collect::<Vec<_>>()
                    )))
                }
                Some(a) if a != &cfg.grpc_addr => {
                    return Err(ReplicaError::Config(format!(
                        "node {}: --grpc {} differs from its --peer address {a}",
                        cfg.node_id, cfg.grpc_addr
                    )))
                }
                Some(_) => {}
            }
        }
        let config = Arc::new(cfg.timers.to_config()?);
        create_private_dir(&cfg.data_dir).map_err(|source| ReplicaError::DataDir {
            path: cfg.data_dir.clone(),
            source,
        })?;
        let ident = crate::identity::read(&cfg.data_dir, cfg.node_id)?;
        if ident.is_none() {
            crate::identity::write(
                &cfg.data_dir,
                &crate::identity::Identity {
                    format: crate::identity::FORMAT_VERSION,
                    node_id: cfg.node_id,
                    cluster_id: None,
                },
            )?;
        }
        let known_cluster = ident.as_ref().and_then(|i| i.cluster_id.clone());
        let cluster_id: crate::network::ClusterIdCell =
            Arc::new(std::sync::RwLock::new(known_cluster.clone()));
        let path = cfg.data_dir.join("replica.redb");
        let db = open_db_waiting(&path).await?;
        let sm = StateMachineStore::open(db.clone()).map_err(|source| ReplicaError::Store {
            path: path.clone(),
            source: Box::new(source),
        })?;
        let sm_data = sm.data();
        let fault = FaultSwitch::default();
        let peers = Arc::new(Peers::new(
            cfg.timers.connect_timeout,
            fault.clone(),
            cfg.peer_tls.clone(),
            cfg.peer_auth.secret.clone(),
            Arc::clone(&cluster_id),
        ));
        let net = NetworkFactory {
            peers: peers.clone(),
            fault: fault.clone(),
        };
        let raft = openraft::Raft::new(
            cfg.node_id,
            Arc::clone(&config),
            net.clone(),
            LogStore::new(db),
            sm,
        )
        .await
        .map_err(|e| ReplicaError::Raft(e.to_string()))?;
        let cell: RaftCell = Arc::new(RwLock::new(raft.clone()));

        let svc_state = RaftGrpc {
            raft: Arc::clone(&cell),
            fault: fault.clone(),
            auth: cfg.peer_auth.clone(),
            spool_dir: cfg.data_dir.clone(),
            snapshot_slot: Arc::new(tokio::sync::Semaphore::new(1)),
            cluster_id: Arc::clone(&cluster_id),
            node_id: cfg.node_id,
            leader_contact: crate::LeaderContact::default(),
        };
        let svc = Self::service_for(&svc_state);
        let (listener, local_addr) = match cfg.listen {
            Listen::External => (None, None),
            Listen::Bind(addr) => {
                let l = tokio::net::TcpListener::bind(addr)
                    .await
                    .map_err(|source| ReplicaError::Bind { addr, source })?;
                let a = l.local_addr().ok();
                (Some(l), a)
            }
            Listen::Listener(l) => {
                let a = l.local_addr().ok();
                (Some(l), a)
            }
        };
        let server = match listener {
            None => Server {
                shutdown: None,
                join: None,
            },
            Some(l) => {
                let (tx, rx) = oneshot::channel::<()>();
                // TCP_NODELAY on accepted connections: without it Nagle + delayed ACK
                // add ~40 ms to every small Raft RPC (measured: p50 42 ms -> ~1 ms).
                let incoming = tokio_stream::StreamExt::map(
                    tokio_stream::wrappers::TcpListenerStream::new(l),
                    |conn| {
                        if let Ok(c) = &conn {
                            if let Err(e) = c.set_nodelay(true) {
                                tracing::warn!(error = %e, "TCP_NODELAY on a Raft connection");
                            }
                        }
                        conn
                    },
                );
                let join = tokio::spawn(
                    tonic::transport::Server::builder()
                        .add_service(svc)
                        .serve_with_incoming_shutdown(incoming, async {
                            let _ = rx.await;
                        }),
                );
                Server {
                    shutdown: Some(tx),
                    join: Some(join),
                }
            }
        };

        let mut bootstrapped = false;
        if cfg.initial_members.keys().next() == Some(&cfg.node_id) {
            let initialized = raft
                .is_initialized()
                .await
                .map_err(|e| ReplicaError::Raft(e.to_string()))?;
            if !initialized {
                if let (Some(old), false) = (&known_cluster, cfg.force_bootstrap) {
                    return Err(ReplicaError::Config(format!(
                        "{}: this data dir was a member of cluster {old} but its store is empty (lost?): refusing to bootstrap a second cluster; restore the store, or add this node back to the running cluster (Cluster/AddMember after wiping the dir), or start with --force-bootstrap to make a new cluster",
                        cfg.data_dir.display()
                    )));
                }
                let new_id =
                    crate::identity::new_cluster_id().map_err(|source| ReplicaError::DataDir {
                        path: cfg.data_dir.clone(),
                        source,
                    })?;
                crate::identity::write(
                    &cfg.data_dir,
                    &crate::identity::Identity {
                        format: crate::identity::FORMAT_VERSION,
                        node_id: cfg.node_id,
                        cluster_id: Some(new_id.clone()),
                    },
                )?;
                *cluster_id.write().unwrap_or_else(|p| p.into_inner()) = Some(new_id);
                let members: BTreeMap<NodeId, BasicNode> = cfg
                    .initial_members
                    .iter()
                    .map(|(id, a)| (*id, BasicNode::new(a.clone())))
                    .collect();
                raft.initialize(members)
                    .await
                    .map_err(|e| ReplicaError::Raft(e.to_string()))?;
                bootstrapped = true;
                tracing::info!(node_id = cfg.node_id, members = ?cfg.initial_members, "cluster bootstrapped");
            }
        }
        Ok(Replica {
            node_id: cfg.node_id,
            raft: cell,
            core: CoreParts {
                config,
                net,
                db_path: path,
                restarting: tokio::sync::Mutex::new(()),
            },
            sm: sm_data,
            peers,
            fault,
            timers: cfg.timers,
            local_addr,
            bootstrapped,
            server: tokio::sync::Mutex::new(server),
            svc: svc_state,
        })
    }

    fn service_for(svc: &RaftGrpc) -> RaftServer<RaftGrpc> {
        RaftServer::new(svc.clone())
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES)
    }

    /// The Raft gRPC service, to add to the daemon's tonic server
    /// (`Server::builder().add_service(control).add_service(replica.grpc_service())`).
    /// It checks [`ReplicaConfig::peer_auth`] on every call.
    pub fn grpc_service(&self) -> RaftServer<RaftGrpc> {
        Self::service_for(&self.svc)
    }

    /// The applied log index of the member `id` at `addr`, asked over the
    /// authenticated member channel (never the control API: no bearer token goes to
    /// an address learned from the replicated membership).
    pub async fn peer_applied(&self, id: NodeId, addr: &str) -> Result<u64, String> {
        self.peers.applied(id, addr).await
    }

    /// When the Raft leader last reached this member (an AppendEntries it accepted)
    /// and the leader's node id; `None` on the leader itself or before any contact.
    pub fn leader_contact(&self) -> Option<(std::time::Instant, NodeId)> {
        self.svc.leader_contact.last()
    }

    pub fn node_id(&self) -> NodeId {
        self.node_id
    }

    /// The address the standalone server listens on (`None` with [`Listen::External`]).
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.local_addr
    }

    /// Whether this start initialized the cluster (first start of the lowest id only).
    pub fn bootstrapped(&self) -> bool {
        self.bootstrapped
    }

    /// Cuts this instance off its peers while isolated (tests, chaos drills).
    pub fn fault_switch(&self) -> FaultSwitch {
        self.fault.clone()
    }

    /// The underlying openraft handle (the current core), for what this API does not
    /// cover.
    pub fn raft(&self) -> openraft::Raft<TypeConfig> {
        current(&self.raft)
    }

    /// Put a new Raft core in place of one that openraft stopped on an error (a full
    /// disk, an I/O error): the store is opened again (redb repairs an interrupted
    /// commit), the state machine keeps what it had applied (every entry it applied
    /// was committed, so durable in the log), and openraft replays the log from there.
    /// The gRPC service and every later call use the new core. `Ok(false)` when the
    /// core is running (nothing to do); an error when the store cannot be opened yet
    /// (the old one stays in place, stopped, and a later call tries again).
    pub async fn restart_core(&self) -> Result<bool, ReplicaError> {
        let _one = self.core.restarting.lock().await;
        let old = current(&self.raft);
        if old.metrics().borrow().running_state.is_ok() {
            return Ok(false);
        }
        // Already stopped: this only waits for its tasks to let go of the store.
        let _ = old.shutdown().await;
        let db = open_db_waiting(&self.core.db_path).await?;
        let sm = StateMachineStore::with_data(db.clone(), Arc::clone(&self.sm));
        let raft = openraft::Raft::new(
            self.node_id,
            Arc::clone(&self.core.config),
            self.core.net.clone(),
            LogStore::new(db),
            sm,
        )
        .await
        .map_err(|e| ReplicaError::Raft(e.to_string()))?;
        *self.raft.write().unwrap_or_else(|p| p.into_inner()) = raft;
        tracing::warn!(
            node_id = self.node_id,
            "the Raft core was restarted on its store"
        );
        Ok(true)
    }

    /// Commit `cmd` (forwarded to the leader if needed) and return once it is applied on
    /// the leader. A refused command (stale epoch, invalid op) is `Err(Refused)`.
    pub async fn write(&self, cmd: Command) -> Result<WriteReceipt, ReplicaError> {
        match self.execute(ForwardRequest::Write(cmd)).await? {
            ForwardReply::Written {
                log_index,
                outcome: Outcome::Applied { epoch },
            } => Ok(WriteReceipt { log_index, epoch }),
            ForwardReply::Written {
                outcome: Outcome::Refused(r),
                ..
            } => Err(ReplicaError::Refused(r)),
            other => Err(ReplicaError::Raft(format!(
                "unexpected reply to a write: {other:?}"
            ))),
        }
    }

    /// Claim mastership for the SM `sm_guid` with epoch = (local epoch + 1). Returns the
    /// new epoch. `Refused(StaleEpoch)` means another master claimed first or this
    /// replica's view lagged: re-run the SM election before claiming again.
    pub async fn claim_mastership(&self, sm_guid: u64) -> Result<u64, ReplicaError> {
        let epoch = self.with_state(|s| s.epoch).saturating_add(1);
        Ok(self
            .write(Command::ClaimMastership { epoch, sm_guid })
            .await?
            .epoch)
    }

    /// Add `node_id` (reachable at `addr`) as a voter: it first joins as a learner and
    /// catches up (from a snapshot if the log was compacted), then becomes a voter.
    ///
    /// Runs on the Raft leader only (membership changes are never forwarded: a
    /// follower answers [`ReplicaError::NotLeader`] with the leader's address).
    pub async fn add_member(&self, node_id: NodeId, addr: String) -> Result<u64, ReplicaError> {
        match self
            .execute_on_leader(ForwardRequest::AddMember { node_id, addr })
            .await?
        {
            ForwardReply::MembershipChanged { log_index } => Ok(log_index),
            other => Err(ReplicaError::Raft(format!("unexpected reply: {other:?}"))),
        }
    }

    /// Remove `node_id` from the cluster (voter or learner). On the leader only, as
    /// [`Replica::add_member`].
    pub async fn remove_member(&self, node_id: NodeId) -> Result<u64, ReplicaError> {
        match self
            .execute_on_leader(ForwardRequest::RemoveMember { node_id })
            .await?
        {
            ForwardReply::MembershipChanged { log_index } => Ok(log_index),
            other => Err(ReplicaError::Raft(format!("unexpected reply: {other:?}"))),
        }
    }

    /// Run `req` on this node if it is the leader (retrying while a membership change
    /// is in progress), never forwarding it.
    async fn execute_on_leader(&self, req: ForwardRequest) -> Result<ForwardReply, ReplicaError> {
        let limit = self.timers.write_timeout;
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(ReplicaError::Timeout(limit));
            }
            let r = match tokio::time::timeout(left, execute_local(&self.raft(), req.clone())).await
            {
                Ok(r) => r,
                Err(_) => return Err(ReplicaError::Timeout(limit)),
            };
            match r {
                Ok(reply) => return Ok(reply),
                Err(ForwardError::NotLeader { leader }) => {
                    return Err(ReplicaError::NotLeader { leader })
                }
                Err(ForwardError::Busy(m)) => {
                    tracing::debug!(reason = %m, "membership change in progress, retrying");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(ForwardError::Unreachable(m)) | Err(ForwardError::Failed(m)) => {
                    return Err(ReplicaError::Raft(m))
                }
            }
        }
    }

    pub(crate) async fn execute(&self, req: ForwardRequest) -> Result<ForwardReply, ReplicaError> {
        let limit = self.timers.write_timeout;
        let deadline = Instant::now() + limit;
        let mut target: Option<(NodeId, String)> = None;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(ReplicaError::Timeout(limit));
            }
            let attempt = async {
                match &target {
                    None => execute_local(&self.raft(), req.clone()).await,
                    Some((id, addr)) => self.peers.forward(*id, addr, &req).await,
                }
            };
            let r = match tokio::time::timeout(left, attempt).await {
                Ok(r) => r,
                Err(_) => return Err(ReplicaError::Timeout(limit)),
            };
            match r {
                Ok(reply) => return Ok(reply),
                Err(ForwardError::NotLeader {
                    leader: Some((id, addr)),
                }) if id != self.node_id => target = Some((id, addr)),
                Err(ForwardError::NotLeader { .. }) | Err(ForwardError::Unreachable(_)) => {
                    target = None;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(ForwardError::Busy(m)) => {
                    tracing::debug!(reason = %m, "membership change in progress, retrying");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(ForwardError::Failed(m)) => return Err(ReplicaError::Raft(m)),
            }
        }
    }

    /// Run `f` on the local state (what this instance has applied; a follower may lag
    /// the leader by the replication delay).
    pub fn with_state<T>(&self, f: impl FnOnce(&FabricState) -> T) -> T {
        let d = self.sm.read().unwrap_or_else(|e| e.into_inner());
        f(&d.state)
    }

    /// A copy of the local state.
    pub fn state(&self) -> FabricState {
        self.with_state(|s| s.clone())
    }

    /// This instance's Raft view.
    pub fn metrics(&self) -> ReplicaMetrics {
        let m = self.raft().metrics().borrow().clone();
        to_metrics(&m)
    }

    /// The last applied log index (cheap: no copy of the metrics).
    pub fn last_applied(&self) -> Option<u64> {
        self.raft().metrics().borrow().last_applied.map(|l| l.index)
    }

    /// Wait until `pred` holds on the metrics, or `timeout`.
    pub async fn wait_metrics(
        &self,
        timeout: Duration,
        pred: impl Fn(&ReplicaMetrics) -> bool,
    ) -> Result<ReplicaMetrics, ReplicaError> {
        let mut rx = self.raft().metrics();
        let fut = async {
            loop {
                let m = to_metrics(&rx.borrow_and_update().clone());
                if pred(&m) {
                    return Ok(m);
                }
                if rx.changed().await.is_err() {
                    return Err(ReplicaError::Raft("raft shut down".into()));
                }
            }
        };
        tokio::time::timeout(timeout, fut)
            .await
            .map_err(|_| ReplicaError::Timeout(timeout))?
    }

    /// Build a snapshot now (compaction then purges the log up to it, keeping
    /// `logs_kept_after_snapshot` entries).
    pub async fn trigger_snapshot(&self) -> Result<(), ReplicaError> {
        self.raft()
            .trigger()
            .snapshot()
            .await
            .map_err(|e| ReplicaError::Raft(e.to_string()))
    }

    /// Purge the log up to `upto` (only entries already in a snapshot are purged).
    pub async fn purge_log(&self, upto: u64) -> Result<(), ReplicaError> {
        self.raft()
            .trigger()
            .purge_log(upto)
            .await
            .map_err(|e| ReplicaError::Raft(e.to_string()))
    }

    /// Stop Raft and the standalone server. The store stays on disk for a restart.
    pub async fn shutdown(&self) -> Result<(), ReplicaError> {
        let r = self.raft().shutdown().await;
        let mut s = self.server.lock().await;
        if let Some(tx) = s.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(j) = s.join.take() {
            j.abort();
            let _ = j.await;
        }
        r.map_err(|e| ReplicaError::Raft(e.to_string()))
    }
}

/// Open the store at `path`. A core of this process that was just shut down may still
/// be releasing the file (its tasks drop their store handles asynchronously): wait a
/// little for it.
async fn open_db_waiting(path: &std::path::Path) -> Result<Arc<redb::Database>, ReplicaError> {
    let mut tries = 0;
    loop {
        match open_db(path) {
            Ok(db) => return Ok(db),
            Err(StoreError::Redb(e))
                if matches!(*e, redb::Error::DatabaseAlreadyOpen) && tries < 100 =>
            {
                tries += 1;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(source) => {
                return Err(ReplicaError::Store {
                    path: path.to_path_buf(),
                    source: Box::new(source),
                })
            }
        }
    }
}

/// Create `dir` (and its parents) if missing; a directory this creates is 0700 (the
/// replicated state names every port and key of the fabric).
fn create_private_dir(dir: &std::path::Path) -> std::io::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    let mut b = std::fs::DirBuilder::new();
    b.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        b.mode(0o700);
    }
    b.create(dir)
}
