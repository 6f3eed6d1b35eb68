//! One SM of the fabric simulation: the pieces the daemon's runtime wires together
//! (`ibsmd/src/instance.rs`), driven in virtual time against `ibsm-sim`.
//!
//! **Duplication, on purpose.** The daemon's `Runtime` owns a thread, a real clock, a
//! `MadDevice`, metrics and a command channel, so it cannot run here; the logic that
//! decides *what* happens is reimplemented minimally below and must be kept in step
//! with it:
//!
//! * TID routing of responses to three initiators (election, the runtime's own
//!   [`Transactions`] agent, the [`SubnetManager`]'s agent). The daemon routes by the
//!   low 32 bits and folds each agent's counter into a range, because a Linux kernel
//!   rewrites the high half; the simulator rewrites nothing, so here each initiator has
//!   its own high half and responses are routed by it. (Folding is not exercised here.)
//! * Requests: SMInfo and trap 144 to the election (answered from the remembered
//!   request through [`ibsm_core::election::wire`], the daemon's own conversion); other
//!   traps to the subnet manager while MASTER, else repressed plus a heavy sweep.
//! * Not MASTER: a *standby sweep* is a directed-route [`Discovery`] whose PortInfo
//!   (kept per port) gives IsSM ports and LIDs for [`Election::handle_sweep`]. The
//!   daemon follows discovery with a PortInfo probe and runs probe-only light sweeps;
//!   this harness re-runs discovery every `standby_sweep_interval` instead (same
//!   information, one code path fewer to duplicate).
//! * MASTER: `become_master` on entering MASTER, `stop` on leaving; heavy sweeps of the
//!   configurator feed its SM ports to the election and our LID to it; every SMP it
//!   initiates moves ActCount.
//! * Bootstrap (0-hop NodeInfo/PortInfo in the daemon) reads the port GUID and LID
//!   straight from the topology and the simulator.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use ibsm_core::discovery::{Discovery, DiscoveryConfig, DiscoveryResult, DiscoveryToken};
use ibsm_core::election::{
    wire, DrRoute, Election, ElectionConfig, ElectionEvent, SmInfoMsg, SmPort, SmRoute, SmState,
    Transmit,
};
use ibsm_core::subnet::{SubnetConfig, SubnetEvent, SubnetManager, SweepKind, SweepReport};
use ibsm_core::transactions::{Event, Transactions, TransactionsConfig};
use ibsm_fabric::NodeIdx;
use ibsm_mad::{CapabilityMask, Method, Smp, MAD_SIZE};
use ibsm_sim::{ClientId, Sim};

/// High 32 bits of the election's TIDs.
pub const ELECTION_TID_HIGH: u32 = 0x5300_0000;
/// High 32 bits of the runtime agent's TIDs (standby sweeps).
pub const RUNTIME_TID_HIGH: u32 = 0x4000_0000;
/// High 32 bits of the subnet manager agent's TIDs.
pub const SUBNET_TID_HIGH: u32 = 0x2000_0000;
/// Requests remembered for building responses (as the daemon).
const MAX_REMEMBERED_REQUESTS: usize = 1024;

/// Timers of one SM besides the election's own.
#[derive(Clone, Debug)]
pub struct NodeTimers {
    /// Standby: re-run discovery this often.
    pub standby_sweep_interval: Duration,
    /// Master: a heavy sweep this often (light sweeps per `SubnetConfig::sweep_interval`).
    pub heavy_sweep_interval: Duration,
}

/// Something the world must know about (for its invariants).
#[derive(Clone, Debug)]
pub enum NodeNote {
    /// The subnet manager finished a heavy sweep; `started` is when it began.
    MasterSweepDone {
        /// When the sweep started (as this node observed it).
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
    election: Election,
    tx: Transactions<DiscoveryToken>,
    subnet: SubnetManager,
    timers: NodeTimers,
    sweep: Option<Box<Discovery>>,
    heavy_wanted: bool,
    next_heavy: Duration,
    subnet_sweep_started: Option<Duration>,
    requests: BTreeMap<u64, (Smp, u16)>,
    request_order: VecDeque<u64>,
    notes: Vec<NodeNote>,
}

impl std::fmt::Debug for SmNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SmNode")
            .field("guid", &format_args!("{:#x}", self.guid))
            .field("state", &self.election.state())
            .field("lid", &self.lid)
            .finish_non_exhaustive()
    }
}

impl SmNode {
    /// Starts an SM (DISCOVERING, heavy standby sweep first) on an attached client.
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        now: Duration,
        guid: u64,
        lid: u16,
        at: (NodeIdx, u8),
        client: ClientId,
        mut ecfg: ElectionConfig,
        mut scfg: SubnetConfig,
        timers: NodeTimers,
    ) -> Result<SmNode, String> {
        ecfg.port_guid = guid;
        ecfg.tid_base = (u64::from(ELECTION_TID_HIGH) << 32) | 0x8000_0000;
        let priority = ecfg.priority;
        let mut election = Election::new(ecfg, now).map_err(|e| e.to_string())?;
        election.set_local_lid(lid);
        scfg.transactions.tid_high = SUBNET_TID_HIGH;
        let subnet = SubnetManager::new(scfg).map_err(|e| e.to_string())?;
        let tx = Transactions::new(TransactionsConfig {
            tid_high: RUNTIME_TID_HIGH,
            ..TransactionsConfig::default()
        });
        Ok(SmNode {
            guid,
            priority,
            at,
            client,
            lid,
            election,
            tx,
            subnet,
            next_heavy: now + timers.standby_sweep_interval,
            timers,
            sweep: None,
            heavy_wanted: true,
            subnet_sweep_started: None,
            requests: BTreeMap::new(),
            request_order: VecDeque::new(),
            notes: Vec::new(),
        })
    }

    /// The election's state.
    pub fn state(&self) -> SmState {
        self.election.state()
    }

    /// The election (read-only).
    pub fn election(&self) -> &Election {
        &self.election
    }

    /// Notes since the last call.
    pub fn take_notes(&mut self) -> Vec<NodeNote> {
        std::mem::take(&mut self.notes)
    }

    /// When this node wants [`SmNode::on_timers`] next.
    pub fn next_wake(&self, now: Duration) -> Option<Duration> {
        let mut t = [
            self.tx.poll_timeout(),
            self.election.poll_timeout(),
            self.subnet.poll_timeout(),
        ]
        .into_iter()
        .flatten()
        .min();
        let mut add = |d: Duration| t = Some(t.map_or(d, |x| x.min(d)));
        if self.subnet.is_active() {
            if !self.subnet.is_sweeping() {
                add(self.next_heavy);
            }
        } else if self.sweep.is_none() {
            add(if self.heavy_wanted {
                now
            } else {
                self.next_heavy
            });
        }
        t
    }

    /// Fires what is due (the top of the daemon's loop), then pumps.
    pub fn on_timers(&mut self, now: Duration, sim: &mut Sim) {
        if self.tx.poll_timeout().is_some_and(|t| t <= now) {
            self.tx.handle_timeout(now);
        }
        if self.election.poll_timeout().is_some_and(|t| t <= now) {
            self.election.handle_timeout(now);
        }
        if self.subnet.poll_timeout().is_some_and(|t| t <= now) {
            self.subnet.handle_timeout(now);
        }
        if self.subnet.is_active() {
            if !self.subnet.is_sweeping() && now >= self.next_heavy {
                self.next_heavy = now + self.timers.heavy_sweep_interval;
                self.subnet.start_heavy_sweep(now);
            }
        } else if self.sweep.is_none() && (self.heavy_wanted || now >= self.next_heavy) {
            self.heavy_wanted = false;
            self.next_heavy = now + self.timers.standby_sweep_interval;
            self.sweep = Some(Box::new(Discovery::new(DiscoveryConfig::default())));
        }
        self.pump(now, sim);
    }

    /// A MAD the simulator delivered to us.
    pub fn incoming(&mut self, now: Duration, sim: &mut Sim, slid: u16, mad: &[u8; MAD_SIZE]) {
        self.dispatch(now, sim, slid, mad);
        self.pump(now, sim);
    }

    fn dispatch(&mut self, now: Duration, sim: &mut Sim, slid: u16, mad: &[u8; MAD_SIZE]) {
        let smp = match Smp::decode(mad) {
            Ok(s) => s,
            Err(err) => {
                tracing::debug!(%err, "dropping undecodable MAD");
                return;
            }
        };
        if smp.method.0 & 0x80 != 0 {
            match (smp.tid >> 32) as u32 {
                ELECTION_TID_HIGH => {
                    if let Some(msg) = wire::decode_for_election(&smp) {
                        let from = wire::arrival_route(&smp, slid);
                        self.election.handle_message(now, from, msg);
                    }
                }
                RUNTIME_TID_HIGH => self.tx.handle_incoming(now, mad),
                SUBNET_TID_HIGH if self.subnet.is_active() => self.subnet.handle_incoming(now, mad),
                _ => tracing::trace!(tid = smp.tid, "response for no initiator"),
            }
            return;
        }
        match wire::decode(&smp) {
            Ok(msg @ SmInfoMsg::TrapRepress { .. }) => {
                self.election
                    .handle_message(now, wire::arrival_route(&smp, slid), msg);
            }
            Ok(msg) => {
                let hint = match &msg {
                    SmInfoMsg::Trap144 { issuer_lid, .. } => *issuer_lid,
                    _ => slid,
                };
                if matches!(msg, SmInfoMsg::Trap144 { .. }) && self.subnet.is_active() {
                    self.subnet.start_heavy_sweep(now);
                }
                self.remember_request(smp, hint);
                self.election
                    .handle_message(now, wire::arrival_route(&smp, hint), msg);
            }
            Err(_) if smp.method == Method::TRAP && self.subnet.is_active() => {
                self.subnet.handle_incoming(now, mad);
            }
            Err(_) if smp.method == Method::TRAP => {
                let repress = Smp {
                    method: Method::TRAP_REPRESS,
                    ..smp.response()
                };
                self.send(now, sim, &repress.encode(), None);
                self.heavy_wanted = true;
            }
            Err(err) => tracing::trace!(%err, "ignoring request"),
        }
    }

    fn remember_request(&mut self, smp: Smp, hint: u16) {
        if self.requests.insert(smp.tid, (smp, hint)).is_none() {
            self.request_order.push_back(smp.tid);
        }
        while self.request_order.len() > MAX_REMEMBERED_REQUESTS {
            if let Some(old) = self.request_order.pop_front() {
                self.requests.remove(&old);
            }
        }
    }

    fn send(&mut self, now: Duration, sim: &mut Sim, mad: &[u8; MAD_SIZE], dlid: Option<u16>) {
        let r = match dlid {
            Some(l) if l != 0 => sim.send_to(now, self.client, l, mad),
            _ => sim.send(now, self.client, mad),
        };
        if let Err(err) = r {
            let what = Smp::decode(mad).map_or_else(
                |e| format!("undecodable: {e}"),
                |s| {
                    format!(
                        "method {:?} attribute {:?} tid {:#x}",
                        s.method, s.attr_id, s.tid
                    )
                },
            );
            self.notes.push(NodeNote::Bug(format!(
                "SM {:#x}: the simulator refused an SMP we built ({what}): {err}",
                self.guid
            )));
        }
    }

    /// Moves everything along until nothing changes (the daemon's `pump`).
    fn pump(&mut self, now: Duration, sim: &mut Sim) {
        loop {
            let mut progressed = false;
            while let Some(ev) = self.tx.poll_event() {
                progressed = true;
                self.on_tx_event(ev);
            }
            progressed |= self.advance_sweep(now);
            while let Some(mad) = self.tx.poll_transmit() {
                progressed = true;
                self.send(now, sim, &mad, None);
                self.election.handle_smps_sent(1);
            }
            while let Some(out) = self.subnet.poll_transmit() {
                progressed = true;
                self.send(now, sim, &out.mad, out.dlid);
            }
            let n = self.subnet.take_smps_sent();
            if n > 0 {
                self.election.handle_smps_sent(n);
            }
            while let Some(ev) = self.subnet.poll_event() {
                progressed = true;
                self.on_subnet_event(now, ev);
            }
            if self.subnet.is_sweeping() && self.subnet_sweep_started.is_none() {
                self.subnet_sweep_started = Some(now);
            }
            while let Some(t) = self.election.poll_transmit() {
                progressed = true;
                self.transmit_election(now, sim, t);
            }
            while let Some(ev) = self.election.poll_event() {
                progressed = true;
                self.on_election_event(now, ev);
            }
            if !progressed {
                return;
            }
        }
    }

    fn transmit_election(&mut self, now: Duration, sim: &mut Sim, t: Transmit) {
        if t.msg.is_response() {
            let Some((req, hint)) = self.requests.remove(&t.msg.tid()) else {
                return;
            };
            match wire::encode_response(&req, &t.msg) {
                Ok(resp) => {
                    let dlid = match (&req.route, &t.dest) {
                        (ibsm_mad::SmpRoute::Lid, SmRoute::Lid(l)) if *l != 0 => Some(*l),
                        (ibsm_mad::SmpRoute::Lid, _) if hint != 0 => Some(hint),
                        _ => None,
                    };
                    self.send(now, sim, &resp.encode(), dlid);
                }
                Err(err) => self.notes.push(NodeNote::Bug(format!(
                    "SM {:#x}: cannot encode the election's response: {err}",
                    self.guid
                ))),
            }
            return;
        }
        match wire::encode_request(&t.dest, &t.msg) {
            Ok((smp, dlid)) => {
                self.send(now, sim, &smp.encode(), dlid);
                self.election.handle_smps_sent(1);
            }
            Err(err) => self.notes.push(NodeNote::Bug(format!(
                "SM {:#x}: cannot encode the election's request: {err}",
                self.guid
            ))),
        }
    }

    fn on_election_event(&mut self, now: Duration, ev: ElectionEvent) {
        tracing::debug!(guid = format_args!("{:#x}", self.guid), "{ev}");
        match ev {
            ElectionEvent::StateChanged { from, to, reason } => {
                if to == SmState::Master && !self.subnet.is_active() {
                    self.sweep = None;
                    self.next_heavy = now + self.timers.heavy_sweep_interval;
                    self.subnet_sweep_started = None;
                    self.subnet.become_master(now);
                }
                if from == SmState::Master && to != SmState::Master && self.subnet.is_active() {
                    self.subnet.stop();
                    self.subnet_sweep_started = None;
                    self.heavy_wanted = true;
                }
                self.notes.push(NodeNote::State {
                    from,
                    to,
                    reason: reason.to_string(),
                });
            }
            ElectionEvent::DiscoveryNeeded => self.heavy_wanted = true,
            ElectionEvent::HeavySweepRequested => {
                if self.subnet.is_active() {
                    self.subnet.start_heavy_sweep(now);
                } else {
                    self.heavy_wanted = true;
                }
            }
            _ => {}
        }
    }

    fn on_subnet_event(&mut self, now: Duration, ev: SubnetEvent) {
        if let SubnetEvent::SweepDone {
            kind: SweepKind::Light,
            ..
        } = ev
        {
            self.subnet_sweep_started = None;
        }
        if let SubnetEvent::SweepDone {
            kind: SweepKind::Heavy,
            report,
            ..
        } = ev
        {
            let local_lid = self.subnet.last_discovery().and_then(|res| {
                let (n, p) = res.local?;
                res.topology.node(n)?.port(p).map(|p| p.lid)
            });
            if let Some(lid) = local_lid.filter(|l| *l != 0 && *l != self.lid) {
                self.lid = lid;
                self.election.set_local_lid(lid);
            }
            self.election.handle_sweep(now, &report.sm_ports);
            self.next_heavy = now + self.timers.heavy_sweep_interval;
            let started = self.subnet_sweep_started.take().unwrap_or(now);
            self.notes.push(NodeNote::MasterSweepDone {
                started,
                report: Box::new(report),
            });
        }
    }

    fn on_tx_event(&mut self, ev: Event<DiscoveryToken>) {
        let Some(d) = self.sweep.as_mut() else {
            return;
        };
        match ev {
            Event::Response { token, smp } => d.handle_response(token, &smp),
            Event::Failed { token, .. } => d.handle_failure(token, "no response after retries"),
            Event::Unsolicited(_) => {}
        }
    }

    /// Standby discovery progress; returns true if it did something.
    fn advance_sweep(&mut self, now: Duration) -> bool {
        let Some(d) = self.sweep.as_mut() else {
            return false;
        };
        let mut progressed = false;
        while self.tx.queued() < self.tx.config().window {
            let Some(token) = d.poll_request() else {
                break;
            };
            progressed = true;
            match token.to_smp() {
                Ok(smp) => self.tx.submit(now, smp, token),
                Err(err) => d.handle_failure(token, &err.to_string()),
            }
        }
        if !d.is_done() {
            return progressed;
        }
        let Some(d) = self.sweep.take() else {
            return progressed;
        };
        let result = d.into_result();
        let ports = sm_ports(&result);
        if let Some(lid) = local_lid(&result).filter(|l| *l != self.lid) {
            self.lid = lid;
            self.election.set_local_lid(lid);
        }
        self.election.handle_sweep(now, &ports);
        true
    }
}

fn local_lid(res: &DiscoveryResult) -> Option<u16> {
    let (n, p) = res.local?;
    let pi = res
        .port_info
        .get(n.as_usize())?
        .get(usize::from(p))?
        .as_ref()?;
    Some(pi.lid)
}

/// Every CA port that advertises IsSM, with the directed route that enters it.
pub fn sm_ports(res: &DiscoveryResult) -> Vec<SmPort> {
    let mut out = Vec::new();
    for (idx, node) in res.topology.iter() {
        if node.is_switch() {
            continue;
        }
        let Some(path) = res.path(idx) else {
            continue;
        };
        let Some(pis) = res.port_info.get(idx.as_usize()) else {
            continue;
        };
        // The CA port this path enters: ours for the local node, else the one whose
        // cable comes from the last switch on the path (as the daemon's probe).
        let port = if res.local.map(|(n, _)| n) == Some(idx) {
            res.local.map(|(_, p)| p)
        } else {
            node.physical_ports().find_map(|(num, p)| {
                let (rn, rp) = p.remote?;
                let mut via = res.path(rn)?.to_vec();
                via.push(rp);
                (via == path).then_some(num)
            })
        };
        let Some(port) = port else {
            continue;
        };
        let (Some(Some(pi)), Some(p)) = (pis.get(usize::from(port)), node.port(port)) else {
            continue;
        };
        if pi.capability_mask.0 & CapabilityMask::IS_SM == 0 {
            continue;
        }
        out.push(SmPort {
            guid: p.port_guid,
            route: SmRoute::Directed(DrRoute::new(path)),
            lid: (pi.lid != 0).then_some(pi.lid),
        });
    }
    out
}
