//! One whole SM instance on one port as a sans-IO state machine: the election, the
//! node's own MAD agent (standby sweeps, SMInfo reads for the roster), the MASTER's
//! configurator, the watch of its own link and start-up, behind one input/output
//! contract. The daemon, the fabric simulation and the tests drive the same [`Node`].
//!
//! # Contract
//!
//! Time is a `Duration` since the driver's epoch; the node reads no clock and does no
//! I/O. The driver:
//!
//! 1. calls [`Node::handle_input`] with what happened ([`Input`]: a MAD with its
//!    source LID, an operator command with an id, a routing result, an SA
//!    snapshot built, new replicated state) and [`Node::handle_timeout`] once [`Node::poll_timeout`] has passed;
//! 2. drains [`Node::poll_output`] after each call ([`Output`]: a MAD to send, an
//!    event, a routing job, an SA snapshot job (only with
//!    `SubnetConfig::offload_sa_snapshot`), a command's completion with its id, mastership claims,
//!    "publish what the configurator holds", start-up done or failed);
//! 3. sleeps until the next input or [`Node::poll_timeout`].
//!
//! ```
//! use std::time::Duration;
//! use ibsm_core::node::{Node, NodeConfig, Output};
//!
//! let mut node = Node::new(NodeConfig::new(5), Duration::ZERO);
//! // Start-up: the node asks its local SMA for NodeInfo with a 0-hop SMP.
//! let Some(Output::Transmit(first)) = node.poll_output() else { panic!() };
//! assert_eq!(first.mad[1], 0x81, "a directed-route SMP");
//! // ... the driver sends it, and feeds the answer back:
//! // node.handle_input(now, Input::Mad { mad: &answer, slid: 0 });
//! assert!(node.poll_timeout().is_some(), "the start-up read is retried");
//! ```
//!
//! # TIDs
//!
//! Each initiator allocates its TIDs in its own range of the low 32 bits (a Linux
//! kernel rewrites the high half of requests with its agent id), so a response's owner
//! is the range its low half falls in: [`ELECTION_TIDS`], [`STARTUP_TIDS`],
//! [`PORT_WATCH_TIDS`], [`NODE_TIDS`], [`SUBNET_TIDS`]. Requests the node must answer
//! (SubnGet/SubnSet(SMInfo), trap 144) are remembered, bounded, until the election's
//! response is built from them.
//!
//! # Start-up
//!
//! A node first learns its port (0-hop SubnGet(NodeInfo), then PortInfo, each retried
//! [`STARTUP_TRIES`] times). IsSM is already set then, so another SM may be asking our
//! SMInfo: what arrives meanwhile is kept (at most [`STARTUP_BACKLOG_MAX`] MADs) and
//! handled as soon as the port is known, because a request dropped here would never be
//! answered (OpenSM under umad2sim then waits for it forever).
//!
//! # ActCount
//!
//! Every SMP the node's agents emit (standby sweeps, SMInfo polls and control packets,
//! the configurator's sweeps) moves the election's ActCount as it is emitted; the
//! start-up reads and the port watch do not (the stall rule must still see a master
//! whose sweeper hangs).

mod config;
mod link;
mod master;
mod running;
mod sa;
mod standby;
mod standing;
mod startup;
mod state;
mod types;

#[cfg(test)]
mod tests;

use std::collections::VecDeque;
use std::time::Duration;

use crate::subnet::SubnetManager;

pub use config::{
    NodeConfig, DEFAULT_MASTER_HEAVY_SWEEP_INTERVAL, FRESH_DISCOVERY_MAX_AGE, PORT_WATCH_INTERVAL,
    PREPARED_TAKEOVER_MAX_AGE, SA_ACTIVITY_LOG_LINES, SA_ACTIVITY_LOG_WINDOW, STARTUP_BACKLOG_MAX,
    STARTUP_TIMEOUT, STARTUP_TRIES,
};
pub use running::handover_candidate;
pub use state::{ELECTION_TIDS, NODE_TIDS, PORT_WATCH_TIDS, STARTUP_TIDS, SUBNET_TIDS};
pub use types::{
    effective_partitions, CommandError, CommandReply, Input, NodeCommand, NodeError, NodeEvent,
    NodeStatus, Output, PeerView, ReplicatedFabric, SkippedPartition,
};

use startup::{Startup, StartupStep};
use state::Running;

/// One SM instance on one port. See the module doc for the contract.
pub struct Node {
    phase: NodePhase,
    /// Outputs of start-up (the running node has its own queue).
    out: VecDeque<Output>,
}

enum NodePhase {
    Starting(Box<Startup>),
    Running(Box<Running>),
    Failed,
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let phase = match &self.phase {
            NodePhase::Starting(_) => "starting",
            NodePhase::Running(_) => "running",
            NodePhase::Failed => "failed",
        };
        f.debug_struct("Node")
            .field("phase", &phase)
            .finish_non_exhaustive()
    }
}

impl Node {
    /// A node that starts by reading its local port (the first output is that read).
    /// A configuration the configurator refuses ends it at once ([`Output::Failed`]).
    pub fn new(cfg: NodeConfig, now: Duration) -> Node {
        let mut out = VecDeque::new();
        if let Err(e) = SubnetManager::new(cfg.subnet.clone()) {
            out.push_back(Output::Failed(NodeError::Config(e.to_string())));
            return Node {
                phase: NodePhase::Failed,
                out,
            };
        }
        let startup = Startup::new(cfg, now, &mut out);
        Node {
            phase: NodePhase::Starting(Box::new(startup)),
            out,
        }
    }

    /// Feed one input.
    pub fn handle_input(&mut self, now: Duration, input: Input<'_>) {
        match &mut self.phase {
            NodePhase::Failed => {
                if let Input::Command { id, .. } = input {
                    self.out.push_back(Output::Done {
                        id,
                        result: Err(CommandError::FailedPrecondition(
                            "this SM instance has stopped".into(),
                        )),
                    });
                }
            }
            NodePhase::Starting(s) => match input {
                Input::Mad { mad, slid } | Input::SmInfoAnswered { mad, slid } => {
                    if s.handle_mad(now, mad, slid, &mut self.out) == StartupStep::Done {
                        self.finish_startup(now);
                    }
                }
                // The SA is not up before the port is known; the requester retries.
                Input::Gmp { .. } => {}
                Input::Command { id, command } => s.commands.push((id, command)),
                Input::Replicated(r) => s.replicated = Some(r),
                Input::RoutingDone(_) | Input::SaSnapshotDone(_) | Input::LeaderContact { .. } => {}
            },
            NodePhase::Running(r) => {
                match input {
                    Input::Mad { mad, slid } => r.handle_mad(now, mad, slid),
                    Input::SmInfoAnswered { mad, slid } => {
                        r.handle_answered_sminfo_get(now, mad, slid)
                    }
                    Input::Gmp { mad, from } => r.handle_gmp(now, mad, from),
                    Input::Command { id, command } => r.handle_command(now, id, command),
                    Input::RoutingDone(done) => r.subnet.handle_routing_done(now, done),
                    Input::SaSnapshotDone(done) => r.subnet.handle_sa_snapshot_done(done),
                    Input::Replicated(rep) => r.replicated_changed(now, rep),
                    Input::LeaderContact { sm_guid, at } => {
                        r.election.handle_leader_contact(sm_guid, at)
                    }
                }
                r.pump(now);
            }
        }
        self.settle();
    }

    /// Fire every deadline that is due at `now`.
    pub fn handle_timeout(&mut self, now: Duration) {
        match &mut self.phase {
            NodePhase::Failed => {}
            NodePhase::Starting(s) => s.handle_timeout(now, &mut self.out),
            NodePhase::Running(r) => {
                r.handle_timeout(now);
                r.pump(now);
            }
        }
        self.settle();
    }

    /// A start-up that failed ends the node.
    fn settle(&mut self) {
        if matches!(&self.phase, NodePhase::Starting(s) if s.failed) {
            self.phase = NodePhase::Failed;
        }
    }

    /// When [`Node::handle_timeout`] is due next (`None`: only inputs move it).
    pub fn poll_timeout(&self) -> Option<Duration> {
        match &self.phase {
            NodePhase::Failed => None,
            NodePhase::Starting(s) => Some(s.deadline),
            NodePhase::Running(r) => r.poll_timeout(),
        }
    }

    /// The next output, if any.
    pub fn poll_output(&mut self) -> Option<Output> {
        if let Some(o) = self.out.pop_front() {
            return Some(o);
        }
        match &mut self.phase {
            NodePhase::Running(r) => r.out.pop_front(),
            _ => None,
        }
    }

    /// What a driver publishes (status API, metrics).
    pub fn status(&self) -> NodeStatus {
        match &self.phase {
            NodePhase::Running(r) => r.status(),
            NodePhase::Starting(s) => NodeStatus {
                priority: s.cfg.election.priority,
                ..NodeStatus::default()
            },
            NodePhase::Failed => NodeStatus::default(),
        }
    }

    /// The MASTER's configurator (what it discovered, assigned and programmed), once
    /// the node runs. Read it on [`Output::Publish`].
    pub fn subnet(&self) -> Option<&SubnetManager> {
        match &self.phase {
            NodePhase::Running(r) => Some(&r.subnet),
            _ => None,
        }
    }

    /// Switches whose LFT the standby's standing read holds (0 unless STANDBY under
    /// a replicated master; see the `standing` module).
    pub fn standing_lfts(&self) -> usize {
        match &self.phase {
            NodePhase::Running(r) => r.standing.entries().len(),
            _ => 0,
        }
    }

    /// The SA's state as replicated tables (what [`Output::PublishSa`] asks to
    /// replicate), once the node runs.
    pub fn sa_tables(&self) -> Option<crate::sa::SaTables> {
        match &self.phase {
            NodePhase::Running(r) => {
                let mut t = crate::sa::SaTables::new();
                r.sa.groups().to_tables(&mut t);
                r.sa.services().to_tables(&mut t);
                r.sa.informs().to_tables(&mut t);
                Some(t)
            }
            _ => None,
        }
    }

    /// The Subnet Administrator, once the node runs.
    pub fn sa(&self) -> Option<&crate::sa::SaAgent> {
        match &self.phase {
            NodePhase::Running(r) => Some(&r.sa),
            _ => None,
        }
    }

    /// The snapshot an [`crate::sa::SaReader`] may answer SubnAdmGet of fabric
    /// records from, ahead of this node's other work: the one its SA answers from,
    /// while this node is MASTER with an active subnet (when its SA answers queries at
    /// all); `None` otherwise, and then every SA MAD goes to [`Node::handle_input`]
    /// (a standby redirects). A driver checks it after each batch of outputs: a new
    /// `Arc` means a new snapshot.
    pub fn sa_reader_snapshot(&self) -> Option<&std::sync::Arc<crate::sa::SaFabric>> {
        match &self.phase {
            NodePhase::Running(r)
                if r.election.state() == crate::election::SmState::Master
                    && r.subnet.is_active() =>
            {
                r.subnet.sa_fabric()
            }
            _ => None,
        }
    }

    /// What a SubnGet(SMInfo) answer needs now, once the node runs: a driver that
    /// reads the port on a thread of its own takes it after each batch of outputs and
    /// answers the SMInfo polls it reads at once
    /// ([`crate::election::SmInfoResponder::answer`], the same bytes as the node's own
    /// answer), handing them on as [`Input::SmInfoAnswered`]. `None` while starting:
    /// then every MAD goes to [`Node::handle_input`] as it is.
    pub fn sminfo_responder(&self) -> Option<crate::election::SmInfoResponder> {
        match &self.phase {
            NodePhase::Running(r) => Some(r.election.sminfo_responder()),
            _ => None,
        }
    }

    /// The election (state, peers, ActCount), once the node runs.
    pub fn election(&self) -> Option<&crate::election::Election> {
        match &self.phase {
            NodePhase::Running(r) => Some(&r.election),
            _ => None,
        }
    }

    /// Start-up read the port: run, then handle what arrived meanwhile.
    fn finish_startup(&mut self, now: Duration) {
        let NodePhase::Starting(s) = std::mem::replace(&mut self.phase, NodePhase::Failed) else {
            return;
        };
        let s = *s;
        let Some((port_guid, lid, local_port)) = s.port else {
            return;
        };
        let mut r = match Running::new(s.cfg, now, port_guid, lid, local_port) {
            Ok(r) => r,
            Err(e) => {
                self.out.push_back(Output::Failed(e));
                return;
            }
        };
        self.out.push_back(Output::Started { port_guid, lid });
        if let Some(rep) = s.replicated {
            r.replicated = Some(rep);
        }
        for (mad, slid) in s.backlog {
            r.handle_mad(now, &mad, slid);
            r.pump(now);
        }
        for (id, command) in s.commands {
            r.handle_command(now, id, command);
        }
        r.pump(now);
        self.phase = NodePhase::Running(Box::new(r));
    }
}
