//! Deterministic tests of the whole node: start-up with a backlog, and several nodes
//! on the embedded simulator in virtual time through a master's death, a planned
//! handover and a pulled cable (which only the port watch notices).

use std::time::Duration;

use ibsm_fabric::{gen, NodeIdx, Topology};
use ibsm_mad::{AttributeId, Method, NodeInfo, PortInfo, Smp};
use ibsm_sim::{ClientId, Sim, SimConfig};

use super::*;

mod detection;
mod lid_seed;
mod peer_ages;
mod sa;
mod sa_ipoib;
mod sa_mcast;
mod sa_reader;
mod sa_services;
mod sa_tables;
mod sminfo_responder;
mod standing;
mod takeover;
use crate::election::SmState;

const MS: Duration = Duration::from_millis(1);

pub(super) fn cfg(priority: u8) -> NodeConfig {
    let mut c = NodeConfig::new(priority);
    c.subnet.sweep_interval = Duration::from_millis(500);
    c.light_sweep_interval = Duration::from_millis(500);
    c
}

fn transmits(node: &mut Node) -> Vec<Outgoing> {
    let mut v = Vec::new();
    while let Some(o) = node.poll_output() {
        if let Output::Transmit(t) = o {
            v.push(t);
        }
    }
    v
}

use crate::subnet::Outgoing;

/// The local SMA's answer to a start-up read.
fn answer_startup(req: &Outgoing, guid: u64) -> [u8; 256] {
    let smp = Smp::decode(&req.mad).unwrap();
    let resp = smp.response();
    let resp = if smp.attr_id == AttributeId::NODE_INFO {
        resp.with_attribute(&NodeInfo {
            port_guid: guid,
            node_guid: guid,
            local_port_num: 1,
            num_ports: 1,
            ..NodeInfo::default()
        })
    } else {
        resp.with_attribute(&PortInfo {
            lid: 7,
            ..PortInfo::default()
        })
    };
    resp.encode()
}

#[test]
fn a_request_that_arrives_during_start_up_is_answered_once_the_port_is_known() {
    let mut node = Node::new(cfg(3), Duration::ZERO);
    let first = transmits(&mut node);
    assert_eq!(first.len(), 1, "one NodeInfo read");
    // Another SM asks our SMInfo before we know our own port.
    let ask = Smp::get_dr(&[], AttributeId::SM_INFO, 0, 0x1234_0000_0042);
    node.handle_input(
        MS,
        Input::Mad {
            mad: &ask.encode(),
            slid: 0,
        },
    );
    assert!(
        transmits(&mut node).is_empty(),
        "nothing to answer with yet"
    );
    // The first read is lost: retried after the start-up timeout.
    assert_eq!(node.poll_timeout(), Some(STARTUP_TIMEOUT));
    node.handle_timeout(STARTUP_TIMEOUT);
    let retry = transmits(&mut node);
    assert_eq!(retry.len(), 1);
    let ni = answer_startup(&retry[0], 0xabc);
    node.handle_input(STARTUP_TIMEOUT + MS, Input::Mad { mad: &ni, slid: 0 });
    let pi_req = transmits(&mut node);
    assert_eq!(
        Smp::decode(&pi_req[0].mad).unwrap().attr_id,
        AttributeId::PORT_INFO
    );
    let pi = answer_startup(&pi_req[0], 0xabc);
    node.handle_input(STARTUP_TIMEOUT + 2 * MS, Input::Mad { mad: &pi, slid: 0 });
    let out = transmits(&mut node);
    let answer = out
        .iter()
        .filter_map(|o| Smp::decode(&o.mad).ok())
        .find(|s| s.method == Method::GET_RESP && s.attr_id == AttributeId::SM_INFO)
        .expect("the backlogged SubnGet(SMInfo) is answered");
    assert_eq!(answer.tid, ask.tid);
    let info = answer.attribute::<ibsm_mad::SmInfo>().unwrap();
    assert_eq!(info.guid, 0xabc);
    assert_eq!(info.sm_state, SmState::Discovering);
    let st = node.status();
    assert!(st.started);
    assert_eq!((st.port_guid, st.lid), (0xabc, 7));
}

#[test]
fn a_silent_local_port_ends_the_node_with_a_clear_error() {
    let mut node = Node::new(cfg(3), Duration::ZERO);
    let mut now = Duration::ZERO;
    let mut failed = None;
    while let Some(t) = node.poll_timeout() {
        now = t;
        node.handle_timeout(now);
        while let Some(o) = node.poll_output() {
            if let Output::Failed(e) = o {
                failed = Some(e);
            }
        }
    }
    let e = failed.expect("the node gives up");
    assert_eq!(
        e,
        NodeError::LocalPortSilent {
            attr: "NodeInfo",
            tries: STARTUP_TRIES
        }
    );
    assert!(now >= STARTUP_TIMEOUT * (STARTUP_TRIES - 1));
    node.handle_input(
        now,
        Input::Command {
            id: 9,
            command: NodeCommand::Sweep { heavy: true },
        },
    );
    assert!(matches!(
        node.poll_output(),
        Some(Output::Done {
            id: 9,
            result: Err(CommandError::FailedPrecondition(_))
        })
    ));
}

/// SM nodes on the embedded simulator, in virtual time.
pub(super) struct Lab {
    pub(super) topo: Topology,
    pub(super) sim: Sim,
    pub(super) now: Duration,
    pub(super) sms: Vec<Member>,
    pub(super) two_masters_since: Option<Duration>,
    /// Nodes run with `NodeConfig::replicated` (the test feeds their replicas).
    pub(super) replicated: bool,
    /// The nodes' start-up partitions.
    pub(super) partitions: Vec<crate::subnet::Partition>,
    /// This node's routing jobs are kept in `held` instead of run (a busy worker).
    pub(super) hold_routing: Option<usize>,
    pub(super) held: Vec<crate::subnet::RoutingJob>,
    /// The nodes' `NodeConfig::guid2lid_seed` (`--guid2lid`).
    pub(super) guid2lid_seed: Option<String>,
    /// While set, every SMP a node transmits is kept in `sent` (node, SMP).
    pub(super) record_sent: bool,
    pub(super) sent: Vec<(usize, Smp)>,
}

/// The longest two SMs may both be MASTER (a HANDOVER's round trip).
const TWO_MASTERS_MAX: Duration = Duration::from_millis(5);

pub(super) struct Member {
    pub(super) at: NodeIdx,
    pub(super) client: ClientId,
    pub(super) node: Option<Node>,
    pub(super) priority: u8,
    pub(super) done: Vec<(u64, Result<CommandReply, CommandError>)>,
    pub(super) log: Vec<String>,
    /// GMPs (SA answers) the node sent.
    pub(super) gmps: Vec<crate::sa::SaTransmit>,
}

impl Lab {
    pub(super) fn new(topo: Topology, priorities: &[u8]) -> Lab {
        Lab::with_partitions(topo, priorities, Vec::new())
    }

    /// Nodes configured with these start-up partitions.
    pub(super) fn with_partitions(
        topo: Topology,
        priorities: &[u8],
        partitions: Vec<crate::subnet::Partition>,
    ) -> Lab {
        let sim = Sim::new(&topo, SimConfig::default());
        let cas: Vec<NodeIdx> = topo
            .iter()
            .filter(|(_, n)| !n.is_switch())
            .map(|(i, _)| i)
            .collect();
        let mut lab = Lab {
            topo,
            sim,
            now: Duration::ZERO,
            sms: Vec::new(),
            two_masters_since: None,
            replicated: false,
            partitions,
            hold_routing: None,
            held: Vec::new(),
            guid2lid_seed: None,
            record_sent: false,
            sent: Vec::new(),
        };
        for (i, p) in priorities.iter().enumerate() {
            let at = cas[i * 2];
            lab.sms.push(Member {
                at,
                client: ClientId(0),
                node: None,
                priority: *p,
                done: Vec::new(),
                log: Vec::new(),
                gmps: Vec::new(),
            });
            lab.start(i);
        }
        lab
    }

    pub(super) fn start(&mut self, i: usize) {
        let m = &mut self.sms[i];
        m.client = self.sim.attach(m.at, 1).unwrap();
        self.sim.set_is_sm(m.client, true).unwrap();
        let mut c = cfg(m.priority);
        c.replicated = self.replicated;
        c.subnet.partitions = self.partitions.clone();
        c.guid2lid_seed.clone_from(&self.guid2lid_seed);
        m.node = Some(Node::new(c, self.now));
        self.drain(i);
    }

    pub(super) fn kill(&mut self, i: usize) {
        let m = &mut self.sms[i];
        m.node = None;
        self.sim.detach(m.client).unwrap();
    }

    /// Hand SM `i` the replicated state `rep` (as its daemon does on every apply)
    /// and drain what it sends in answer.
    pub(super) fn replicate(&mut self, i: usize, rep: ReplicatedFabric) {
        let now = self.now;
        self.sms[i]
            .node
            .as_mut()
            .expect("a live SM")
            .handle_input(now, Input::Replicated(std::sync::Arc::new(rep)));
        self.drain(i);
    }

    pub(super) fn drain(&mut self, i: usize) {
        let now = self.now;
        let mut jobs = Vec::new();
        let hold = self.hold_routing == Some(i);
        let held = &mut self.held;
        let record = self.record_sent;
        let sent = &mut self.sent;
        let m = &mut self.sms[i];
        let Some(node) = m.node.as_mut() else { return };
        loop {
            while let Some(o) = node.poll_output() {
                match o {
                    Output::Transmit(t) => {
                        if record {
                            sent.extend(Smp::decode(&t.mad).ok().map(|s| (i, s)));
                        }
                        let _ = match t.dlid {
                            Some(l) if l != 0 => self.sim.send_to(now, m.client, l, &t.mad),
                            _ => self.sim.send(now, m.client, &t.mad),
                        };
                    }
                    Output::RoutingJob(j) => jobs.push(j),
                    Output::Done { id, result } => m.done.push((id, result)),
                    Output::Event(NodeEvent::Record { text, .. }) => {
                        m.log.push(format!("{:?} {text}", now));
                    }
                    Output::TransmitGmp(t) => m.gmps.push(t),
                    Output::Failed(e) => panic!("node {i} failed: {e}"),
                    _ => {}
                }
            }
            let Some(j) = jobs.pop() else { break };
            if hold {
                held.push(j);
                continue;
            }
            node.handle_input(now, Input::RoutingDone(j.run()));
        }
    }

    pub(super) fn state(&self, i: usize) -> Option<SmState> {
        self.sms[i].node.as_ref().and_then(|n| n.status().state)
    }

    /// SM `i`'s configurator (its subnet manager), once its node runs.
    pub(super) fn subnet(&self, i: usize) -> &crate::subnet::SubnetManager {
        self.sms[i]
            .node
            .as_ref()
            .and_then(|n| n.subnet())
            .expect("a running node")
    }

    pub(super) fn masters(&self) -> Vec<usize> {
        (0..self.sms.len())
            .filter(|&i| self.state(i) == Some(SmState::Master))
            .collect()
    }

    /// Run until `until`, checking after every step that no two SMs are MASTER
    /// for longer than [`TWO_MASTERS_MAX`].
    pub(super) fn run_to(&mut self, until: Duration) {
        loop {
            let mut next = self.sim.poll_timeout();
            for m in &self.sms {
                if let Some(t) = m.node.as_ref().and_then(Node::poll_timeout) {
                    next = Some(next.map_or(t, |n: Duration| n.min(t)));
                }
            }
            let Some(next) = next.filter(|t| *t <= until) else {
                self.now = until;
                return;
            };
            self.now = self.now.max(next);
            while let Some(d) = self.sim.poll_delivery_from(self.now) {
                let Some(i) = self
                    .sms
                    .iter()
                    .position(|m| m.client == d.client && m.node.is_some())
                else {
                    continue;
                };
                let now = self.now;
                if let Some(n) = self.sms[i].node.as_mut() {
                    n.handle_input(
                        now,
                        Input::Mad {
                            mad: &d.mad,
                            slid: d.slid,
                        },
                    );
                }
                self.drain(i);
            }
            for i in 0..self.sms.len() {
                let due = self.sms[i]
                    .node
                    .as_ref()
                    .and_then(Node::poll_timeout)
                    .is_some_and(|t| t <= self.now);
                if due {
                    let now = self.now;
                    if let Some(n) = self.sms[i].node.as_mut() {
                        n.handle_timeout(now);
                    }
                    self.drain(i);
                }
            }
            let masters = self.masters();
            // A HANDOVER makes its target MASTER before the old master gets the
            // ACKNOWLEDGE: a window of one round trip, never more.
            let since = if masters.len() > 1 {
                *self.two_masters_since.get_or_insert(self.now)
            } else {
                self.two_masters_since = None;
                self.now
            };
            if self.now.saturating_sub(since) > TWO_MASTERS_MAX {
                for (i, m) in self.sms.iter().enumerate() {
                    eprintln!("node {i}: {}", m.log.join("\n  "));
                }
                panic!("two masters since {since:?}: {masters:?}");
            }
        }
    }

    pub(super) fn command(&mut self, i: usize, id: u64, command: NodeCommand) {
        let now = self.now;
        if let Some(n) = self.sms[i].node.as_mut() {
            n.handle_input(now, Input::Command { id, command });
        }
        self.drain(i);
    }

    pub(super) fn lids(&self) -> Vec<u16> {
        self.topo
            .iter()
            .filter(|(_, n)| !n.is_switch())
            .map(|(i, _)| self.sim.port_lid(i, 1).unwrap_or(0))
            .collect()
    }
}

#[test]
fn three_nodes_elect_one_master_fail_over_hand_over_and_notice_a_pulled_cable() {
    let topo = gen::fat_tree_2level(4).unwrap();
    let mut lab = Lab::new(topo, &[10, 8, 5]);
    lab.run_to(Duration::from_secs(4));
    assert_eq!(lab.masters(), vec![0], "the highest priority is MASTER");
    assert_eq!(lab.state(1), Some(SmState::Standby));
    assert_eq!(lab.state(2), Some(SmState::Standby));
    let lids = lab.lids();
    assert!(
        lids.iter().all(|l| *l != 0),
        "every CA port addressed: {lids:?}"
    );

    // The master dies: the next one takes over, no LID moves.
    lab.kill(0);
    lab.run_to(lab.now + Duration::from_secs(3));
    assert_eq!(lab.masters(), vec![1]);
    assert_eq!(lab.state(2), Some(SmState::Standby));
    assert_eq!(lab.lids(), lids, "a failover changes no LID");

    // It comes back: the higher priority takes mastership back through HANDOVER.
    lab.start(0);
    lab.run_to(lab.now + Duration::from_secs(4));
    assert_eq!(lab.masters(), vec![0]);
    assert_eq!(lab.lids(), lids);

    // A planned handover to the best standby, answered with its GUID.
    let standby_guid = lab.sms[1].node.as_ref().unwrap().status().port_guid;
    lab.command(0, 1, NodeCommand::SetPriority(10));
    lab.command(0, 2, NodeCommand::Handover { to: 0 });
    lab.run_to(lab.now + Duration::from_secs(2));
    assert!(lab.sms[0]
        .done
        .iter()
        .any(|(id, r)| *id == 2 && *r == Ok(CommandReply::HandoverTo(standby_guid))));
    assert_eq!(lab.masters(), vec![1], "the standby took over");
    assert_eq!(
        lab.state(0),
        Some(SmState::Standby),
        "and the old master follows it"
    );

    // A sweep command on a standby completes with the sweep's summary.
    lab.command(2, 3, NodeCommand::Sweep { heavy: true });
    lab.run_to(lab.now + Duration::from_secs(1));
    assert!(lab.sms[2].done.iter().any(|(id, r)| *id == 3
        && matches!(r, Ok(CommandReply::Swept(s)) if s.starts_with("heavy sweep"))));

    // The master's own cable is pulled: only its port watch can tell (nobody answers
    // its SMPs, it answers nobody). It leaves MASTER; a standby takes over.
    let at = lab.sms[1].at;
    lab.sim.link_down(at, 1).unwrap();
    lab.run_to(lab.now + Duration::from_secs(3));
    assert_ne!(
        lab.state(1),
        Some(SmState::Master),
        "a cut-off master steps down"
    );
    assert_eq!(lab.masters(), vec![0]);
    lab.sim.link_up(at, 1).unwrap();
    lab.run_to(lab.now + Duration::from_secs(4));
    // Back on the fabric it outranks node 0 (which advertises below it since its
    // handover), so mastership moves back by HANDOVER: one master all along.
    let masters = lab.masters();
    assert_eq!(masters.len(), 1, "{masters:?}");
    let standbys = (0..3)
        .filter(|&i| lab.state(i) == Some(SmState::Standby))
        .count();
    assert_eq!(standbys, 2);
    assert_eq!(lab.lids(), lids, "no LID moved through all of it");
}
