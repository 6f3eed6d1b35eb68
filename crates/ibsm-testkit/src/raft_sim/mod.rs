//! Seeded simulation of three SMs and their Raft replicas (`ibsm-replica`) under faults,
//! with the replication invariants checked after every step.
//!
//! # What runs
//!
//! Three real `openraft::Raft` instances with the crate's own redb log store and state
//! machine (`ibsm_replica::store`, one data dir each on tmpfs), talking over
//! [`crate::raft_sim_net`] (in-process calls, a fault hook per message), on a tokio
//! current-thread runtime with a paused clock: timers, latency and timeouts are virtual,
//! so 10+ s of cluster life costs a fraction of a second. `Replica` itself is not used:
//! its write retry loop measures its deadline with `std::time::Instant`, which does not
//! advance under a paused clock; the harness's [`sim_write`] does what it does
//! (follower -> leader forwarding, retry on "not leader" until a 1 s write timeout, the
//! daemon's `WRITE_TIMEOUT`) on tokio's clock.
//!
//! The SM election is abstract: one seed drives who the election makes MASTER (a
//! failover picks another live SM; the old master is told to step down only half the
//! time, so a deposed master that still believes it is MASTER keeps writing with its old
//! epoch, as after a partition). Each SM does what `ibsmd::replication` does: a new
//! master claims `local epoch + 1`; once its own replica has applied the claim it seeds
//! its record from the replica's guid2lid and from then on writes `Command::Update
//! { epoch, ops }` with the difference between its record and the replica (new ports get
//! the next free LID, an assigned LID is never changed); a `StaleEpoch` refusal deposes
//! it. Non-masters write `Command::Config` now and then (any instance may).
//!
//! Faults, from the same seed: a node isolated, one directed link cut, all healed,
//! message loss (0-30 %), latency (up to 120 ms one way), a node crashed (its `Raft`
//! shut down and dropped; its SM dies with it) and restarted from its redb data dir.
//!
//! # Invariants (checked after every step, and on every acknowledged write)
//!
//! * an acknowledged write (the write returned `Ok`) is in every replica's state once
//!   that replica has applied past its log index, including after crash/restart;
//! * the epoch in each replica's state machine never decreases;
//! * at most one SM holds an epoch: two acknowledged claims never carry the same epoch,
//!   and an acknowledged `Update` carries the epoch its own SM claimed;
//! * a stale write is refused: no acknowledged `Update{e}` sits in the log after an
//!   acknowledged claim of an epoch > e; claims are ordered in the log by epoch;
//! * the state's `master_guid` is the SM whose claim of the state's epoch was acked;
//! * a port GUID's LID never changes once any replica has it, and no LID is shared;
//! * after the faults stop (links healed, loss 0, every node restarted), all replicas
//!   converge to the same state, containing every acked write and every port of the
//!   fabric, within [`RaftSimConfig::converge_within`] of virtual time.
//!
//! # Determinism
//!
//! The fault schedule, the SM decisions and every message's fate (loss, latency) come
//! from the seed; each node's election timeout is a seed-chosen fixed value (a 1 ms
//! window, because openraft draws it from `rand::thread_rng`, which cannot be seeded);
//! the clock is virtual and the runtime has one thread. openraft's core loop selects
//! `biased`, so the one runtime-seeded choice left is the unbiased `select!` of its
//! replication backoff (backoff timer vs. a new event firing at the same virtual
//! instant). In practice two runs of a seed give identical traces (step lines with
//! every node's role, term, applied/snapshot index and epoch, every write's log index
//! and outcome) and identical message counts: 30 of 30 seeds measured, and
//! `raft_sim_replay_of_a_seed` asserts it.
//!
//! # Planted bugs ([`Plant`])
//!
//! So that a green run means something, the checker is tested against harness bugs:
//! a deposed master that stamps its writes with the newest epoch it sees instead of its
//! own (fencing bypassed), a master that rewrites guid2lid whole and forgets an acked
//! port, and one that renumbers an assigned port.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use ibsm_replica::store::{open_db, LogStore, SmData, StateMachineStore};
use ibsm_replica::{Command, ConfigChange, LidRange, NodeId, Op, Outcome, Refusal, TypeConfig};
use openraft::error::{ClientWriteError, RaftError};
use openraft::{BasicNode, Config, Raft, ServerState, SnapshotPolicy};
use tokio::sync::mpsc;

use crate::raft_sim_net::{NetFaults, NetStats, SimNet, SimNetworkFactory};
use crate::rng::Rng;

/// Node ids of the three replicas; SM `i` runs next to node `i + 1`.
pub const NODES: [NodeId; 3] = [1, 2, 3];
const SM_GUID_BASE: u64 = 0x0002_c903_00a0_0000;
const PORT_GUID_BASE: u64 = 0x0002_c903_00b0_0000;

/// A bug the harness can plant so the checker's self-test has something to catch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plant {
    /// A master stamps its writes with the newest epoch its replica shows rather than
    /// the one it claimed: a deposed master's writes are then accepted.
    UnfencedEpoch,
    /// A master writes `ReplaceGuid2Lid` of its record minus its oldest port: an
    /// acknowledged assignment disappears.
    ForgetAckedPort,
    /// A master gives its oldest port a new LID.
    RenumberPort,
}

/// Knobs of one run.
#[derive(Debug, Clone)]
pub struct RaftSimConfig {
    /// Steps with faults.
    pub steps: u32,
    /// Virtual time per step.
    pub step: Duration,
    /// After the faults stop, the replicas must agree within this much virtual time.
    pub converge_within: Duration,
    /// How long one write keeps trying (the daemon's `WRITE_TIMEOUT`).
    pub write_timeout: Duration,
    /// Snapshot every this many entries (small, so snapshots, purges and snapshot
    /// installs happen during a run).
    pub snapshot_after_logs: u64,
    pub logs_kept_after_snapshot: u64,
    pub plant: Option<Plant>,
}

impl Default for RaftSimConfig {
    fn default() -> Self {
        RaftSimConfig {
            steps: 80,
            step: Duration::from_millis(100),
            converge_within: Duration::from_secs(15),
            write_timeout: Duration::from_secs(1),
            snapshot_after_logs: 12,
            logs_kept_after_snapshot: 3,
            plant: None,
        }
    }
}

/// A broken invariant.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Violation {
    #[error("acknowledged write lost: node {node} applied up to {applied} but lacks the write at index {index} ({what})")]
    AckedWriteLost {
        node: NodeId,
        applied: u64,
        index: u64,
        what: String,
    },
    #[error("epoch decreased on node {node}: {from} -> {to}")]
    EpochDecreased { node: NodeId, from: u64, to: u64 },
    #[error("epoch {epoch} acknowledged to two SMs: {first} and {second}")]
    EpochHeldTwice {
        epoch: u64,
        first: usize,
        second: usize,
    },
    #[error(
        "SM {sm} wrote with epoch {epoch} at index {index}, but that epoch is held by {holder:?}"
    )]
    ForeignEpochWrite {
        sm: usize,
        epoch: u64,
        index: u64,
        holder: Option<usize>,
    },
    #[error("stale write accepted: Update with epoch {epoch} at index {index} after the claim of epoch {newer} at index {newer_index}")]
    StaleWriteAccepted {
        epoch: u64,
        index: u64,
        newer: u64,
        newer_index: u64,
    },
    #[error(
        "claims out of epoch order in the log: epoch {a} at index {ai}, epoch {b} at index {bi}"
    )]
    ClaimsOutOfOrder { a: u64, ai: u64, b: u64, bi: u64 },
    #[error("two SMs believe they hold the current epoch {epoch}: {sms:?}")]
    TwoMasters { epoch: u64, sms: Vec<usize> },
    #[error("node {node}: epoch {epoch} has master_guid {state:#x?}, but its claim was acknowledged to SM {holder}")]
    MasterMismatch {
        node: NodeId,
        epoch: u64,
        state: Option<u64>,
        holder: usize,
    },
    #[error("node {node}: port {port_guid:#018x} changed LID {was:?} -> {now:?}")]
    LidChanged {
        node: NodeId,
        port_guid: u64,
        was: LidRange,
        now: Option<LidRange>,
    },
    #[error("node {node}: LID {lid} is held by ports {a:#018x} and {b:#018x}")]
    LidShared {
        node: NodeId,
        lid: u16,
        a: u64,
        b: u64,
    },
    #[error("write refused unexpectedly: {0}")]
    UnexpectedRefusal(String),
    #[error("replicas did not converge within {within:?} after the faults stopped: {detail}")]
    NoConvergence { within: Duration, detail: String },
    #[error("harness: {0}")]
    Harness(String),
}

/// A failing run: the seed to replay and what broke.
#[derive(Debug, Clone)]
pub struct RaftSimFailure {
    pub seed: u64,
    pub step: u32,
    pub violation: Violation,
    /// The last lines of the trace.
    pub trace_tail: Vec<String>,
}

impl fmt::Display for RaftSimFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "IBSM_SEED={} (step {}): {}",
            self.seed, self.step, self.violation
        )?;
        writeln!(
            f,
            "replay: IBSM_SEED={} cargo test -p ibsm-testkit raft_sim",
            self.seed
        )?;
        for l in &self.trace_tail {
            writeln!(f, "  {l}")?;
        }
        Ok(())
    }
}

/// What a passing run did.
#[derive(Debug, Clone)]
pub struct RaftSimOutcome {
    pub steps: u32,
    pub crashes: u32,
    pub partitions: u32,
    pub failovers: u32,
    pub acked: usize,
    pub stale_refused: u32,
    pub final_epoch: u64,
    pub final_index: u64,
    pub ports: usize,
    /// Highest snapshot index any node reached (snapshots and log purges happened).
    pub max_snapshot_index: u64,
    pub virtual_time: Duration,
    pub net: NetStats,
    /// One line per step and per write result.
    pub trace: Vec<String>,
}

/// Seeds to run: `IBSM_SEED=<n>` replays one; else `IBSM_SEEDS=<count>` or `default`.
pub fn seeds(default_count: u64) -> Result<Vec<u64>, String> {
    if let Ok(s) = std::env::var("IBSM_SEED") {
        return s
            .trim()
            .parse::<u64>()
            .map(|v| vec![v])
            .map_err(|e| format!("IBSM_SEED={s:?} is not a u64: {e}"));
    }
    let n = match std::env::var("IBSM_SEEDS") {
        Ok(s) => s
            .trim()
            .parse::<u64>()
            .map_err(|e| format!("IBSM_SEEDS={s:?} is not a u64: {e}"))?,
        Err(_) => default_count,
    };
    Ok((0..n).collect())
}

/// Run one seed on a fresh paused-clock runtime.
pub fn run(seed: u64, cfg: &RaftSimConfig) -> Result<RaftSimOutcome, RaftSimFailure> {
    let fail = |v: Violation| RaftSimFailure {
        seed,
        step: 0,
        violation: v,
        trace_tail: Vec::new(),
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .map_err(|e| fail(Violation::Harness(format!("tokio runtime: {e}"))))?;
    // tmpfs when there is one: redb fsyncs every append, which is free on tmpfs.
    let dir = tempfile::Builder::new()
        .prefix("ibsm-raft-sim-")
        .tempdir_in("/dev/shm")
        .or_else(|_| tempfile::Builder::new().prefix("ibsm-raft-sim-").tempdir())
        .map_err(|e| fail(Violation::Harness(format!("temp dir: {e}"))))?;
    let root = dir.path().to_path_buf();
    rt.block_on(async move {
        let mut sim = Sim::new(seed, cfg.clone(), root);
        let r = sim.run().await.map(|()| sim.outcome());
        sim.shutdown_all().await;
        r.map_err(|v| RaftSimFailure {
            seed,
            step: sim.step,
            violation: v,
            trace_tail: sim.trace.iter().rev().take(40).rev().cloned().collect(),
        })
    })
}

/// A write as the daemon's `Replica::write` does it, on tokio's clock: to the leader
/// the local node knows (forwarded over the simulated network), retried on "not leader"
/// and lost messages until `timeout`. `Ok((log_index, outcome))` once the entry is
/// committed and applied on the leader.
pub async fn sim_write(
    net: &SimNet,
    from: NodeId,
    cmd: Command,
    timeout: Duration,
) -> Result<(u64, Outcome), String> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if tokio::time::Instant::now() >= deadline {
            return Err(format!("timed out after {timeout:?}"));
        }
        let Some(local) = net.node(from) else {
            return Err(format!("node {from} is down"));
        };
        let leader = local.metrics().borrow().current_leader;
        let target = leader.unwrap_or(from);
        let c = cmd.clone();
        let attempt = async {
            if target == from {
                Ok(local.client_write(c).await)
            } else {
                net.call(from, target, |r| async move { r.client_write(c).await })
                    .await
            }
        };
        match tokio::time::timeout_at(deadline, attempt).await {
            Err(_) => return Err(format!("timed out after {timeout:?}")),
            Ok(Ok(Ok(resp))) => return Ok((resp.log_id.index, resp.data)),
            Ok(Ok(Err(RaftError::APIError(ClientWriteError::ForwardToLeader(_))))) | Ok(Err(_)) => {
                tokio::time::sleep(Duration::from_millis(20)).await
            }
            Ok(Ok(Err(e))) => return Err(format!("node {target}: {e}")),
        }
    }
}

struct Node {
    raft: Raft<TypeConfig>,
    sm: Arc<RwLock<SmData>>,
}

impl Node {
    fn read<T>(&self, f: impl FnOnce(&SmData) -> T) -> T {
        let d = self.sm.read().unwrap_or_else(|e| e.into_inner());
        f(&d)
    }
}

#[derive(Debug, Clone, PartialEq)]
enum SmRole {
    Standby,
    Master {
        epoch: u64,
        claim_index: u64,
        /// The master's record (the daemon's `FabricRecord.guid2lid`): seeded from the
        /// replica once the claim is applied locally, then only grown.
        record: Option<BTreeMap<u64, LidRange>>,
    },
}

struct SmModel {
    node: NodeId,
    guid: u64,
    /// Bumped when the SM dies with its node: late results of the dead one are ignored.
    generation: u64,
    role: SmRole,
    busy: bool,
}

struct Done {
    sm: usize,
    generation: u64,
    cmd: Command,
    result: Result<(u64, Outcome), String>,
}

struct Acked {
    index: u64,
    sm: usize,
    cmd: Command,
}

#[derive(Default)]
struct Checker {
    acked: Vec<Acked>,
    /// epoch -> (SM, log index) of its acknowledged claim.
    claims: BTreeMap<u64, (usize, u64)>,
    /// The LID every port GUID got first.
    lids: BTreeMap<u64, LidRange>,
    last_epoch: BTreeMap<NodeId, u64>,
}

impl Checker {
    fn on_ack(&mut self, sm: usize, index: u64, cmd: &Command) -> Result<(), Violation> {
        match cmd {
            Command::ClaimMastership { epoch, .. } => {
                if let Some((first, _)) = self.claims.get(epoch) {
                    if *first != sm {
                        return Err(Violation::EpochHeldTwice {
                            epoch: *epoch,
                            first: *first,
                            second: sm,
                        });
                    }
                }
                for (e, (_, i)) in &self.claims {
                    if (*e < *epoch && *i > index) || (*e > *epoch && *i < index) {
                        return Err(Violation::ClaimsOutOfOrder {
                            a: *e,
                            ai: *i,
                            b: *epoch,
                            bi: index,
                        });
                    }
                }
                for a in &self.acked {
                    if let Command::Update { epoch: e, .. } = a.cmd {
                        if e < *epoch && a.index > index {
                            return Err(Violation::StaleWriteAccepted {
                                epoch: e,
                                index: a.index,
                                newer: *epoch,
                                newer_index: index,
                            });
                        }
                    }
                }
                self.claims.insert(*epoch, (sm, index));
            }
            Command::Update { epoch, .. } => {
                let holder = self.claims.get(epoch).map(|(s, _)| *s);
                if holder != Some(sm) {
                    return Err(Violation::ForeignEpochWrite {
                        sm,
                        epoch: *epoch,
                        index,
                        holder,
                    });
                }
                for (e, (_, i)) in &self.claims {
                    if *e > *epoch && *i < index {
                        return Err(Violation::StaleWriteAccepted {
                            epoch: *epoch,
                            index,
                            newer: *e,
                            newer_index: *i,
                        });
                    }
                }
            }
            Command::Config(_) => {}
        }
        self.acked.push(Acked {
            index,
            sm,
            cmd: cmd.clone(),
        });
        Ok(())
    }

    fn check_node(&mut self, node: NodeId, d: &SmData, sm_guids: &[u64]) -> Result<(), Violation> {
        let st = &d.state;
        let applied = d.last_applied.map(|l| l.index).unwrap_or(0);
        let last = self.last_epoch.entry(node).or_insert(0);
        if st.epoch < *last {
            return Err(Violation::EpochDecreased {
                node,
                from: *last,
                to: st.epoch,
            });
        }
        *last = st.epoch;
        for (g, was) in &self.lids {
            let now = st.guid2lid.get(g);
            // A port once assigned stays assigned (guid2lid only grows) with its LID;
            // only replicas that have not yet applied it may lack it.
            if now.is_some_and(|n| n != was) {
                return Err(Violation::LidChanged {
                    node,
                    port_guid: *g,
                    was: *was,
                    now: now.copied(),
                });
            }
        }
        for a in self.acked.iter().filter(|a| a.index <= applied) {
            let present = match &a.cmd {
                Command::ClaimMastership { epoch, .. } => st.epoch >= *epoch,
                Command::Update { ops, .. } => ops.iter().all(|op| match op {
                    Op::SetGuid2Lid { port_guid, range } => {
                        st.guid2lid.get(port_guid) == Some(range)
                    }
                    Op::ReplaceGuid2Lid(m) => m.iter().all(|(g, r)| st.guid2lid.get(g) == Some(r)),
                    _ => true,
                }),
                Command::Config(ConfigChange::Set { key, value }) => {
                    st.config.get(key) == Some(value)
                }
                Command::Config(ConfigChange::Remove { key }) => !st.config.contains_key(key),
            };
            if !present {
                return Err(Violation::AckedWriteLost {
                    node,
                    applied,
                    index: a.index,
                    what: format!("{:?} by SM {}", a.cmd, a.sm),
                });
            }
        }
        let mut by_lid: BTreeMap<u16, u64> = BTreeMap::new();
        for (g, r) in &st.guid2lid {
            self.lids.entry(*g).or_insert(*r);
            for lid in r.min_lid..=r.max_lid {
                if let Some(other) = by_lid.insert(lid, *g) {
                    return Err(Violation::LidShared {
                        node,
                        lid,
                        a: other,
                        b: *g,
                    });
                }
            }
        }
        if let Some((holder, _)) = self.claims.get(&st.epoch) {
            let want = sm_guids.get(*holder).copied();
            if st.master_guid != want {
                return Err(Violation::MasterMismatch {
                    node,
                    epoch: st.epoch,
                    state: st.master_guid,
                    holder: *holder,
                });
            }
        }
        Ok(())
    }
}

struct Sim {
    seed: u64,
    cfg: RaftSimConfig,
    rng: Rng,
    net: SimNet,
    root: PathBuf,
    nodes: BTreeMap<NodeId, Option<Node>>,
    configs: BTreeMap<NodeId, Arc<Config>>,
    sms: Vec<SmModel>,
    elected: usize,
    ports: Vec<u64>,
    tx: mpsc::UnboundedSender<Done>,
    rx: mpsc::UnboundedReceiver<Done>,
    checker: Checker,
    trace: Vec<String>,
    step: u32,
    faulty: bool,
    crashes: u32,
    partitions: u32,
    failovers: u32,
    stale_refused: u32,
    max_snapshot_index: u64,
    started: tokio::time::Instant,
}

impl Sim {
    fn new(seed: u64, cfg: RaftSimConfig, root: PathBuf) -> Sim {
        let mut rng = Rng::new(seed);
        let net = SimNet::new(rng.next_u64());
        let mut configs = BTreeMap::new();
        for id in NODES {
            // A fixed, seed-chosen election timeout per node (see "Determinism").
            let e = 250 + rng.below(250);
            configs.insert(
                id,
                Arc::new(Config {
                    cluster_name: "ibsm-sim".into(),
                    heartbeat_interval: 50,
                    election_timeout_min: e,
                    election_timeout_max: e + 1,
                    install_snapshot_timeout: 2000,
                    snapshot_policy: SnapshotPolicy::LogsSinceLast(cfg.snapshot_after_logs),
                    max_in_snapshot_log_to_keep: cfg.logs_kept_after_snapshot,
                    ..Default::default()
                }),
            );
        }
        let sms = NODES
            .iter()
            .enumerate()
            .map(|(i, n)| SmModel {
                node: *n,
                guid: SM_GUID_BASE + i as u64,
                generation: 0,
                role: SmRole::Standby,
                busy: false,
            })
            .collect();
        let (tx, rx) = mpsc::unbounded_channel();
        Sim {
            seed,
            cfg,
            rng,
            net,
            root,
            nodes: NODES.iter().map(|n| (*n, None)).collect(),
            configs,
            sms,
            elected: 0,
            ports: Vec::new(),
            tx,
            rx,
            checker: Checker::default(),
            trace: Vec::new(),
            step: 0,
            faulty: true,
            crashes: 0,
            partitions: 0,
            failovers: 0,
            stale_refused: 0,
            max_snapshot_index: 0,
            started: tokio::time::Instant::now(),
        }
    }

    fn log(&mut self, s: String) {
        tracing::debug!(seed = self.seed, step = self.step, "{s}");
        self.trace.push(s);
    }

    async fn start_node(&mut self, id: NodeId) -> Result<(), Violation> {
        let dir = self.root.join(format!("node{id}"));
        std::fs::create_dir_all(&dir)
            .map_err(|e| Violation::Harness(format!("data dir {}: {e}", dir.display())))?;
        let path = dir.join("replica.redb");
        // The crashed instance's tasks may still hold the file for a moment.
        let mut tries = 0;
        let db = loop {
            match open_db(&path) {
                Ok(db) => break db,
                Err(e) if tries < 200 => {
                    tries += 1;
                    tracing::debug!(%e, "replica store still open, retrying");
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                Err(e) => return Err(Violation::Harness(format!("{}: {e}", path.display()))),
            }
        };
        let sm = StateMachineStore::open(db.clone())
            .map_err(|e| Violation::Harness(format!("state machine: {e}")))?;
        let data = sm.data();
        let config = self
            .configs
            .get(&id)
            .cloned()
            .ok_or_else(|| Violation::Harness(format!("no config for node {id}")))?;
        let net = SimNetworkFactory {
            from: id,
            net: self.net.clone(),
        };
        let raft = Raft::new(id, config, net, LogStore::new(db), sm)
            .await
            .map_err(|e| Violation::Harness(format!("Raft::new({id}): {e}")))?;
        self.net.attach(id, raft.clone());
        self.nodes.insert(id, Some(Node { raft, sm: data }));
        Ok(())
    }

    async fn crash(&mut self, id: NodeId) {
        self.net.detach(id);
        if let Some(Some(n)) = self.nodes.insert(id, None) {
            if let Err(e) = n.raft.shutdown().await {
                tracing::debug!(%e, node = id, "raft shutdown");
            }
        }
        for sm in self.sms.iter_mut().filter(|s| s.node == id) {
            sm.generation += 1;
            sm.role = SmRole::Standby;
            sm.busy = false;
        }
    }

    async fn shutdown_all(&mut self) {
        for id in NODES {
            self.crash(id).await;
        }
    }

    fn live(&self) -> Vec<NodeId> {
        self.nodes
            .iter()
            .filter(|(_, n)| n.is_some())
            .map(|(id, _)| *id)
            .collect()
    }

    fn node(&self, id: NodeId) -> Option<&Node> {
        self.nodes.get(&id).and_then(|n| n.as_ref())
    }

    fn pick<T: Copy>(&mut self, v: &[T]) -> Option<T> {
        if v.is_empty() {
            return None;
        }
        v.get(self.rng.below(v.len() as u64) as usize).copied()
    }

    async fn run(&mut self) -> Result<(), Violation> {
        for id in NODES {
            self.start_node(id).await?;
        }
        let members: BTreeMap<NodeId, BasicNode> = NODES
            .iter()
            .map(|n| (*n, BasicNode::new(format!("sim-{n}"))))
            .collect();
        if let Some(n) = self.node(1) {
            n.raft
                .initialize(members)
                .await
                .map_err(|e| Violation::Harness(format!("initialize: {e}")))?;
        }
        while self.step < self.cfg.steps {
            self.fault_step().await?;
            self.sm_step();
            self.advance().await?;
        }
        // Faults stop: heal everything, restart every crashed node.
        self.faulty = false;
        self.net.set_faults(NetFaults::default());
        for id in NODES {
            if self.node(id).is_none() {
                self.start_node(id).await?;
                self.log(format!("quiet: restart node {id}"));
            }
        }
        self.log("quiet: faults stopped".into());
        let quiet_from = tokio::time::Instant::now();
        loop {
            if self.elected_down() {
                self.failover();
            }
            self.sm_step();
            self.advance().await?;
            match self.converged() {
                Ok(()) => return Ok(()),
                Err(detail) => {
                    if quiet_from.elapsed() > self.cfg.converge_within {
                        return Err(Violation::NoConvergence {
                            within: self.cfg.converge_within,
                            detail,
                        });
                    }
                }
            }
        }
    }

    /// Let virtual time run one step, then take the results and check everything.
    async fn advance(&mut self) -> Result<(), Violation> {
        tokio::time::sleep(self.cfg.step).await;
        self.step += 1;
        while let Ok(d) = self.rx.try_recv() {
            self.on_done(d)?;
        }
        let guids: Vec<u64> = self.sms.iter().map(|s| s.guid).collect();
        for id in NODES {
            if let Some(n) = self.nodes.get(&id).and_then(|n| n.as_ref()) {
                let d = n.sm.read().unwrap_or_else(|e| e.into_inner()).clone();
                self.checker.check_node(id, &d, &guids)?;
            }
        }
        // At most one SM believes it holds the newest acknowledged epoch.
        if let Some((&top, _)) = self.checker.claims.iter().next_back() {
            let holders: Vec<usize> = self
                .sms
                .iter()
                .enumerate()
                .filter(|(_, s)| matches!(s.role, SmRole::Master { epoch, .. } if epoch == top))
                .map(|(i, _)| i)
                .collect();
            if holders.len() > 1 {
                return Err(Violation::TwoMasters {
                    epoch: top,
                    sms: holders,
                });
            }
        }
        for id in NODES {
            if let Some(n) = self.node(id) {
                let snap = n.raft.metrics().borrow().snapshot.map(|l| l.index);
                self.max_snapshot_index = self.max_snapshot_index.max(snap.unwrap_or(0));
            }
        }
        let line = self.state_line();
        self.log(line);
        Ok(())
    }

    fn state_line(&self) -> String {
        let mut s = format!(
            "step {} t={}ms",
            self.step,
            self.started.elapsed().as_millis()
        );
        for id in NODES {
            match self.node(id) {
                None => s.push_str(&format!(" | n{id} down")),
                Some(n) => {
                    let m = n.raft.metrics().borrow().clone();
                    let role = match m.state {
                        ServerState::Leader => "L",
                        ServerState::Follower => "F",
                        ServerState::Candidate => "C",
                        ServerState::Learner => "l",
                        ServerState::Shutdown => "x",
                    };
                    let (applied, epoch, lids) = n.read(|d| {
                        (
                            d.last_applied.map(|l| l.index).unwrap_or(0),
                            d.state.epoch,
                            d.state.guid2lid.len(),
                        )
                    });
                    let snap = m.snapshot.map(|l| l.index).unwrap_or(0);
                    s.push_str(&format!(
                        " | n{id} {role} t{} a{applied} s{snap} e{epoch} p{lids}",
                        m.current_term
                    ));
                }
            }
        }
        let sms: Vec<String> = self
            .sms
            .iter()
            .map(|sm| match &sm.role {
                SmRole::Standby => "S".to_string(),
                SmRole::Master { epoch, .. } => format!("M{epoch}"),
            })
            .collect();
        s.push_str(&format!(" | sm {} elected {}", sms.join(","), self.elected));
        s
    }

    fn on_done(&mut self, d: Done) -> Result<(), Violation> {
        let line = format!(
            "done sm{} gen{} {} -> {}",
            d.sm,
            d.generation,
            short(&d.cmd),
            match &d.result {
                Ok((i, o)) => format!("index {i} {o:?}"),
                Err(e) => format!("error {e}"),
            }
        );
        self.log(line);
        if let Ok((index, Outcome::Applied { .. })) = &d.result {
            // Acknowledged: committed, whether or not the SM that sent it is still alive.
            self.checker.on_ack(d.sm, *index, &d.cmd)?;
        }
        let Some(sm) = self.sms.get_mut(d.sm) else {
            return Err(Violation::Harness(format!("no SM {}", d.sm)));
        };
        if sm.generation != d.generation {
            return Ok(());
        }
        sm.busy = false;
        match (&d.cmd, &d.result) {
            (Command::ClaimMastership { epoch, .. }, Ok((index, Outcome::Applied { .. }))) => {
                sm.role = SmRole::Master {
                    epoch: *epoch,
                    claim_index: *index,
                    record: None,
                };
            }
            (Command::Update { .. }, Ok((_, Outcome::Refused(Refusal::StaleEpoch { .. })))) => {
                // Deposed: another master claimed a newer epoch.
                self.stale_refused += 1;
                sm.role = SmRole::Standby;
            }
            (Command::Update { .. }, Ok((_, Outcome::Refused(r)))) => {
                return Err(Violation::UnexpectedRefusal(format!("SM {}: {r}", d.sm)));
            }
            _ => {}
        }
        Ok(())
    }

    fn elected_down(&self) -> bool {
        match self.sms.get(self.elected) {
            Some(s) => self.node(s.node).is_none(),
            None => true,
        }
    }

    fn failover(&mut self) {
        let live: Vec<usize> = (0..self.sms.len())
            .filter(|i| *i != self.elected)
            .filter(|i| {
                self.sms
                    .get(*i)
                    .is_some_and(|s| self.node(s.node).is_some())
            })
            .collect();
        let Some(new) = self.pick(&live) else { return };
        let old = self.elected;
        let told = self.rng.chance(0.5);
        if told {
            if let Some(s) = self.sms.get_mut(old) {
                s.role = SmRole::Standby;
            }
        }
        self.elected = new;
        self.failovers += 1;
        self.log(format!(
            "failover: sm{old} -> sm{new} (old {})",
            if told { "steps down" } else { "not told" }
        ));
    }

    async fn fault_step(&mut self) -> Result<(), Violation> {
        let live = self.live();
        let down: Vec<NodeId> = NODES
            .iter()
            .copied()
            .filter(|n| !live.contains(n))
            .collect();
        if live.len() > 1 && self.rng.chance(0.04) {
            if let Some(id) = self.pick(&live) {
                self.crash(id).await;
                self.crashes += 1;
                self.log(format!("crash node {id}"));
            }
        }
        if self.rng.chance(0.2) {
            if let Some(id) = self.pick(&down) {
                self.start_node(id).await?;
                self.log(format!("restart node {id}"));
            }
        }
        let mut f = self.net.faults();
        let mut changed = false;
        if self.rng.chance(0.04) {
            if let Some(id) = self.pick(&NODES) {
                for o in NODES.iter().filter(|o| **o != id) {
                    f.cut.insert((id, *o));
                    f.cut.insert((*o, id));
                }
                self.partitions += 1;
                changed = true;
                self.log(format!("isolate node {id}"));
            }
        }
        if self.rng.chance(0.03) {
            let a = self.pick(&NODES).unwrap_or(1);
            let b = self.pick(&NODES).unwrap_or(2);
            if a != b {
                f.cut.insert((a, b));
                changed = true;
                self.log(format!("cut link {a}->{b}"));
            }
        }
        if !f.cut.is_empty() && self.rng.chance(0.1) {
            f.cut.clear();
            changed = true;
            self.log("heal all links".into());
        }
        if self.rng.chance(0.05) {
            f.drop = [0.0, 0.02, 0.1, 0.3][self.rng.below(4) as usize];
            changed = true;
            self.log(format!("loss {}", f.drop));
        }
        if self.rng.chance(0.05) {
            let ms = |m: u64| Duration::from_micros(m);
            f.latency = [
                (ms(200), ms(2_000)),
                (ms(1_000), ms(20_000)),
                (ms(5_000), ms(120_000)),
            ][self.rng.below(3) as usize];
            changed = true;
            self.log(format!("latency {:?}", f.latency));
        }
        if changed {
            self.net.set_faults(f);
        }
        if self.rng.chance(0.06) || (self.elected_down() && self.rng.chance(0.5)) {
            self.failover();
        }
        if self.rng.chance(0.3) {
            let g = PORT_GUID_BASE + self.ports.len() as u64;
            self.ports.push(g);
        }
        Ok(())
    }

    /// Every idle SM does what the daemon's replication writer would do now.
    fn sm_step(&mut self) {
        for i in 0..self.sms.len() {
            let Some(sm) = self.sms.get(i) else { continue };
            let Some(node) = self.node(sm.node) else {
                continue;
            };
            if sm.busy {
                continue;
            }
            let (applied, view, view_epoch) = node.read(|d| {
                (
                    d.last_applied.map(|l| l.index).unwrap_or(0),
                    d.state.guid2lid.clone(),
                    d.state.epoch,
                )
            });
            let cmd = match sm.role.clone() {
                SmRole::Standby if i == self.elected => Command::ClaimMastership {
                    epoch: view_epoch + 1,
                    sm_guid: sm.guid,
                },
                SmRole::Standby => {
                    if !self.faulty || !self.rng.chance(0.05) {
                        continue;
                    }
                    Command::Config(ConfigChange::Set {
                        key: format!("sim.{}.sm{i}", self.step),
                        value: format!("{}", self.rng.next_u64()),
                    })
                }
                SmRole::Master {
                    epoch,
                    claim_index,
                    record,
                } => {
                    // Seed from the replica only once it has applied our own claim: it
                    // then holds every write of every earlier master that committed.
                    if applied < claim_index {
                        continue;
                    }
                    let mut record = record.unwrap_or_else(|| view.clone());
                    let mut next = record
                        .values()
                        .chain(view.values())
                        .map(|r| r.max_lid)
                        .max()
                        .unwrap_or(0);
                    for p in &self.ports {
                        if !record.contains_key(p) {
                            next += 1;
                            record.insert(
                                *p,
                                LidRange {
                                    min_lid: next,
                                    max_lid: next,
                                },
                            );
                        }
                    }
                    if self.cfg.plant == Some(Plant::RenumberPort) && record.len() >= 2 {
                        if let Some(r) = record.values_mut().next() {
                            next += 1;
                            *r = LidRange {
                                min_lid: next,
                                max_lid: next,
                            };
                        }
                    }
                    let mut ops: Vec<Op> = record
                        .iter()
                        .filter(|(g, r)| view.get(g) != Some(r))
                        .map(|(g, r)| Op::SetGuid2Lid {
                            port_guid: *g,
                            range: *r,
                        })
                        .collect();
                    if self.cfg.plant == Some(Plant::ForgetAckedPort)
                        && !ops.is_empty()
                        && record.len() >= 2
                    {
                        let mut m = record.clone();
                        if let Some(first) = m.keys().next().copied() {
                            m.remove(&first);
                        }
                        ops = vec![Op::ReplaceGuid2Lid(m)];
                    }
                    let stamped = if self.cfg.plant == Some(Plant::UnfencedEpoch) {
                        epoch.max(view_epoch)
                    } else {
                        epoch
                    };
                    if let Some(s) = self.sms.get_mut(i) {
                        s.role = SmRole::Master {
                            epoch,
                            claim_index,
                            record: Some(record),
                        };
                    }
                    if ops.is_empty() {
                        continue;
                    }
                    Command::Update {
                        epoch: stamped,
                        ops,
                    }
                }
            };
            let Some(sm) = self.sms.get_mut(i) else {
                continue;
            };
            sm.busy = true;
            let (from, generation) = (sm.node, sm.generation);
            let line = format!("sm{i} sends {}", short(&cmd));
            let (net, tx, timeout) = (self.net.clone(), self.tx.clone(), self.cfg.write_timeout);
            tokio::spawn(async move {
                let result = sim_write(&net, from, cmd.clone(), timeout).await;
                let _ = tx.send(Done {
                    sm: i,
                    generation,
                    cmd,
                    result,
                });
            });
            self.log(line);
        }
    }

    /// `Ok` once every replica is up, has applied the same index (at least every acked
    /// write) and holds the same state with every fabric port assigned.
    fn converged(&self) -> Result<(), String> {
        let mut states = Vec::new();
        for id in NODES {
            let Some(n) = self.node(id) else {
                return Err(format!("node {id} down"));
            };
            states.push((id, n.read(|d| d.clone())));
        }
        let max_acked = self
            .checker
            .acked
            .iter()
            .map(|a| a.index)
            .max()
            .unwrap_or(0);
        let Some((_, first)) = states.first() else {
            return Err("no nodes".into());
        };
        let idx = |d: &SmData| d.last_applied.map(|l| l.index).unwrap_or(0);
        for (id, d) in &states {
            if idx(d) != idx(first) || d.state != first.state {
                return Err(format!(
                    "node {id} applied {} epoch {} ports {} vs node 1 applied {} epoch {} ports {}",
                    idx(d),
                    d.state.epoch,
                    d.state.guid2lid.len(),
                    idx(first),
                    first.state.epoch,
                    first.state.guid2lid.len()
                ));
            }
        }
        if idx(first) < max_acked {
            return Err(format!(
                "applied {} < highest acked index {max_acked}",
                idx(first)
            ));
        }
        if let Some(p) = self
            .ports
            .iter()
            .find(|p| !first.state.guid2lid.contains_key(p))
        {
            return Err(format!("port {p:#018x} has no replicated LID yet"));
        }
        if self.sms.iter().any(|s| s.busy) {
            return Err("a write is still in flight".into());
        }
        Ok(())
    }

    fn outcome(&self) -> RaftSimOutcome {
        let (final_epoch, final_index) = self
            .node(1)
            .map(|n| n.read(|d| (d.state.epoch, d.last_applied.map(|l| l.index).unwrap_or(0))))
            .unwrap_or((0, 0));
        RaftSimOutcome {
            steps: self.step,
            crashes: self.crashes,
            partitions: self.partitions,
            failovers: self.failovers,
            acked: self.checker.acked.len(),
            stale_refused: self.stale_refused,
            final_epoch,
            final_index,
            ports: self.ports.len(),
            max_snapshot_index: self.max_snapshot_index,
            virtual_time: self.started.elapsed(),
            net: self.net.stats(),
            trace: self.trace.clone(),
        }
    }
}

fn short(c: &Command) -> String {
    match c {
        Command::ClaimMastership { epoch, sm_guid } => {
            format!("Claim(e{epoch} {sm_guid:#x})")
        }
        Command::Update { epoch, ops } => format!("Update(e{epoch} {} ops)", ops.len()),
        Command::Config(ConfigChange::Set { key, .. }) => format!("Config({key})"),
        Command::Config(ConfigChange::Remove { key }) => format!("Config(-{key})"),
    }
}
