//! [`run`]: one seed from start to report, on a fresh paused-clock runtime. The faulty
//! steps (seeded crashes, restarts, partitions, loss, latency, failovers, new ports),
//! the quiet phase that heals everything and waits for convergence, and the step that
//! lets virtual time run and checks every invariant after it.

use std::collections::BTreeMap;
use std::time::Duration;

use ibsm_replica::store::SmData;
use ibsm_replica::NodeId;
use openraft::BasicNode;

use super::cluster::{Sim, SmRole};
use super::config::{RaftSimConfig, NODES, PORT_GUID_BASE};
use super::report::{RaftSimFailure, RaftSimOutcome, Violation};
use crate::raft_sim_net::NetFaults;
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

impl Sim {
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
}
