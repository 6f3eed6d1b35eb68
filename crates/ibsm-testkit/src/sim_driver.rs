//! One SM of the fabric simulation: the shipped [`ibsm_core::node::Node`], driven in
//! virtual time against `ibsm-sim` exactly as ibsmd drives it against a device
//! (what the node emits goes to the simulator, what the simulator delivers goes to the
//! node, routing jobs run inline). Only the bookkeeping the world's invariants need
//! is added here: state changes and the master's sweeps, as [`NodeNote`]s.

use std::time::Duration;

use ibsm_core::election::{Election, ElectionConfig, SmState};
use ibsm_core::node::{Input, Node, NodeConfig, NodeEvent, Output};
use ibsm_core::subnet::{SubnetConfig, SweepReport};
use ibsm_fabric::NodeIdx;
use ibsm_mad::MAD_SIZE;
use ibsm_sim::{ClientId, Sim};

/// Timers of one SM besides the election's own.
#[derive(Clone, Debug)]
pub struct NodeTimers {
    /// Not MASTER: a heavy (discovery) sweep this often; light probes every
    /// `SubnetConfig::sweep_interval`.
    pub standby_sweep_interval: Duration,
    /// Master: a heavy sweep this often (light sweeps per `SubnetConfig::sweep_interval`).
    pub heavy_sweep_interval: Duration,
}

/// Something the world must know about (for its invariants).
#[derive(Clone, Debug)]
pub enum NodeNote {
    /// The subnet manager finished a heavy sweep; `started` is when it began.
    MasterSweepDone {
        /// When the sweep started.
        started: Duration,
        /// What it did.
        report: Box<SweepReport>,
    },
    /// The election changed state.
    State {
        /// Old.
        from: SmState,
        /// New.
        to: SmState,
        /// The rule, rendered.
        reason: String,
    },
    /// A problem the harness treats as a bug (a send the simulator refused...).
    Bug(String),
}

/// One live SM.
pub struct SmNode {
    /// Port GUID.
    pub guid: u64,
    /// Configured priority.
    pub priority: u8,
    /// Where it is attached.
    pub at: (NodeIdx, u8),
    /// Its simulator endpoint.
    pub client: ClientId,
    /// Our port's LID as we last learned it.
    pub lid: u16,
    node: Node,
    notes: Vec<NodeNote>,
}

impl std::fmt::Debug for SmNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SmNode")
            .field("guid", &format_args!("{:#x}", self.guid))
            .field("state", &self.state())
            .field("lid", &self.lid)
            .finish_non_exhaustive()
    }
}

impl SmNode {
    /// Starts an SM on an attached client: it reads its port (0-hop SMPs to the
    /// simulator's SMA), then DISCOVERING with a heavy sweep first.
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        now: Duration,
        guid: u64,
        lid: u16,
        at: (NodeIdx, u8),
        client: ClientId,
        election: ElectionConfig,
        subnet: SubnetConfig,
        timers: NodeTimers,
        sim: &mut Sim,
    ) -> Result<SmNode, String> {
        let priority = election.priority;
        let cfg = NodeConfig {
            election,
            light_sweep_interval: subnet.sweep_interval,
            heavy_sweep_interval: timers.standby_sweep_interval,
            master_heavy_sweep_interval: timers.heavy_sweep_interval,
            subnet,
            replicated: false,
            sa: ibsm_core::sa::SaConfig::default(),
            guid2lid_seed: None,
        };
        let mut sm = SmNode {
            guid,
            priority,
            at,
            client,
            lid,
            node: Node::new(cfg, now),
            notes: Vec::new(),
        };
        sm.drain(now, sim);
        Ok(sm)
    }

    /// The election's state (DISCOVERING while the node still reads its port).
    pub fn state(&self) -> SmState {
        self.node.status().state.unwrap_or(SmState::Discovering)
    }

    /// The election (read-only), once the node has read its port.
    pub fn election(&self) -> Option<&Election> {
        self.node.election()
    }

    /// Notes since the last call.
    pub fn take_notes(&mut self) -> Vec<NodeNote> {
        std::mem::take(&mut self.notes)
    }

    /// When this node wants [`SmNode::on_timers`] next.
    pub fn next_wake(&self, _now: Duration) -> Option<Duration> {
        self.node.poll_timeout()
    }

    /// Fires what is due.
    pub fn on_timers(&mut self, now: Duration, sim: &mut Sim) {
        self.node.handle_timeout(now);
        self.drain(now, sim);
    }

    /// A MAD the simulator delivered to us.
    pub fn incoming(&mut self, now: Duration, sim: &mut Sim, slid: u16, mad: &[u8; MAD_SIZE]) {
        self.node.handle_input(now, Input::Mad { mad, slid });
        self.drain(now, sim);
    }

    fn drain(&mut self, now: Duration, sim: &mut Sim) {
        let mut jobs = Vec::new();
        loop {
            while let Some(out) = self.node.poll_output() {
                match out {
                    Output::Transmit(t) => {
                        let r = match t.dlid {
                            Some(l) if l != 0 => sim.send_to(now, self.client, l, &t.mad),
                            _ => sim.send(now, self.client, &t.mad),
                        };
                        if let Err(err) = r {
                            self.notes
                                .push(NodeNote::Bug(format!("the simulator refused a MAD: {err}")));
                        }
                    }
                    Output::RoutingJob(job) => jobs.push(job),
                    Output::Event(NodeEvent::Record {
                        kind: "state",
                        text,
                        from: Some(from),
                        to: Some(to),
                    }) => self.notes.push(NodeNote::State {
                        from,
                        to,
                        reason: text,
                    }),
                    Output::Event(NodeEvent::MasterSweep { report, took }) => {
                        self.notes.push(NodeNote::MasterSweepDone {
                            started: now.saturating_sub(took),
                            report,
                        });
                    }
                    Output::Started { lid, .. } => self.lid = lid,
                    Output::Failed(e) => self
                        .notes
                        .push(NodeNote::Bug(format!("SM {:#x} failed: {e}", self.guid))),
                    _ => {}
                }
            }
            let Some(job) = jobs.pop() else { break };
            self.node.handle_input(now, Input::RoutingDone(job.run()));
        }
        let lid = self.node.status().lid;
        if lid != 0 {
            self.lid = lid;
        }
    }
}
