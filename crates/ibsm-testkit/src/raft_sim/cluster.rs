//! The simulated cluster of one run: the [`Sim`] state (the three Raft nodes with their
//! redb data dirs, the in-process network, the abstract SMs, the checker, the trace and
//! counters), starting a node from its data dir, crashing it, and reading it (the state
//! line of the trace, the outcome). What the SMs do and the run loop are `impl Sim`
//! blocks in their own files; they build on this one.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use ibsm_replica::store::{open_db, LogStore, SmData, StateMachineStore};
use ibsm_replica::{Command, LidRange, NodeId, Outcome, TypeConfig};
use openraft::{Config, Raft, ServerState, SnapshotPolicy};
use tokio::sync::mpsc;

use super::checker::Checker;
use super::config::{RaftSimConfig, NODES, SM_GUID_BASE};
use super::report::{RaftSimOutcome, Violation};
use crate::raft_sim_net::{SimNet, SimNetworkFactory};
use crate::rng::Rng;
pub(super) struct Node {
    pub(super) raft: Raft<TypeConfig>,
    pub(super) sm: Arc<RwLock<SmData>>,
}

impl Node {
    pub(super) fn read<T>(&self, f: impl FnOnce(&SmData) -> T) -> T {
        let d = self.sm.read().unwrap_or_else(|e| e.into_inner());
        f(&d)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub(super) enum SmRole {
    Standby,
    Master {
        epoch: u64,
        claim_index: u64,
        /// The master's record (the daemon's `FabricRecord.guid2lid`): seeded from the
        /// replica once the claim is applied locally, then only grown.
        record: Option<BTreeMap<u64, LidRange>>,
    },
}

pub(super) struct SmModel {
    pub(super) node: NodeId,
    pub(super) guid: u64,
    /// Bumped when the SM dies with its node: late results of the dead one are ignored.
    pub(super) generation: u64,
    pub(super) role: SmRole,
    pub(super) busy: bool,
}

pub(super) struct Done {
    pub(super) sm: usize,
    pub(super) generation: u64,
    pub(super) cmd: Command,
    pub(super) result: Result<(u64, Outcome), String>,
}

pub(super) struct Sim {
    pub(super) seed: u64,
    pub(super) cfg: RaftSimConfig,
    pub(super) rng: Rng,
    pub(super) net: SimNet,
    pub(super) root: PathBuf,
    pub(super) nodes: BTreeMap<NodeId, Option<Node>>,
    pub(super) configs: BTreeMap<NodeId, Arc<Config>>,
    pub(super) sms: Vec<SmModel>,
    pub(super) elected: usize,
    pub(super) ports: Vec<u64>,
    pub(super) tx: mpsc::UnboundedSender<Done>,
    pub(super) rx: mpsc::UnboundedReceiver<Done>,
    pub(super) checker: Checker,
    pub(super) trace: Vec<String>,
    pub(super) step: u32,
    pub(super) faulty: bool,
    pub(super) crashes: u32,
    pub(super) partitions: u32,
    pub(super) failovers: u32,
    pub(super) stale_refused: u32,
    pub(super) max_snapshot_index: u64,
    pub(super) started: tokio::time::Instant,
}

impl Sim {
    pub(super) fn new(seed: u64, cfg: RaftSimConfig, root: PathBuf) -> Sim {
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

    pub(super) fn log(&mut self, s: String) {
        tracing::debug!(seed = self.seed, step = self.step, "{s}");
        self.trace.push(s);
    }

    pub(super) async fn start_node(&mut self, id: NodeId) -> Result<(), Violation> {
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

    pub(super) async fn crash(&mut self, id: NodeId) {
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

    pub(super) async fn shutdown_all(&mut self) {
        for id in NODES {
            self.crash(id).await;
        }
    }

    pub(super) fn live(&self) -> Vec<NodeId> {
        self.nodes
            .iter()
            .filter(|(_, n)| n.is_some())
            .map(|(id, _)| *id)
            .collect()
    }

    pub(super) fn node(&self, id: NodeId) -> Option<&Node> {
        self.nodes.get(&id).and_then(|n| n.as_ref())
    }

    pub(super) fn pick<T: Copy>(&mut self, v: &[T]) -> Option<T> {
        if v.is_empty() {
            return None;
        }
        v.get(self.rng.below(v.len() as u64) as usize).copied()
    }

    pub(super) fn state_line(&self) -> String {
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

    pub(super) fn outcome(&self) -> RaftSimOutcome {
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
