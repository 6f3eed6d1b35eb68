//! The configurator against the embedded simulator (`ibsm-sim`), driven by a
//! small virtual-time loop. Every check reads the fabric back from the
//! simulated SMAs with SubnGet through a second client, and walks LFTs over the
//! *generated* topology, so nothing here trusts the SM's own state.

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::Duration;

use ibsm_fabric::{gen, NodeIdx, Topology};
use ibsm_mad::attr::{
    LinearForwardingTable, Notice, NoticeType, PKeyTable, PortState, ProducerType, TrapDetails,
};
use ibsm_mad::modifier::PKeyBlock;
use ibsm_mad::{AttributeId, Method, PortInfo, Smp, SmpAttribute, SmpRoute};
use ibsm_sim::{ClientId, Sim, SimConfig};

use super::sweep::Stage;
use super::*;
use crate::transactions::TransactionsConfig;

const MS: Duration = Duration::from_millis(1);

fn cfg() -> SubnetConfig {
    SubnetConfig {
        transactions: TransactionsConfig {
            window: 32,
            timeout: 20 * MS,
            retries: 2,
            tid_high: 7,
            tid_low: crate::transactions::TidRange::ALL,
        },
        sweep_interval: Duration::from_secs(1),
        switch_sl2vl: true,
        ..SubnetConfig::default()
    }
}

/// What the loop saw go out.
#[derive(Debug, Default)]
struct Wire {
    lft_sets: u64,
    rereg_sets: u64,
    /// SubnGet(NodeInfo) sent: discovery walks.
    node_info_gets: u64,
    /// SubnSet(P_KeyTable) sent.
    pkey_sets: u64,
    /// `offload_routing`: jobs run by the loop, and jobs held back (`hold_jobs`).
    routing_jobs_run: u64,
    held_jobs: Vec<RoutingJob>,
    hold_jobs: bool,
    represses: Vec<(Option<u16>, Smp)>,
    /// Every SMP sent and every answer the SM got, in order (only when `trace` is set).
    trace: bool,
    traced: Vec<Traced>,
}

/// One entry of [`Wire::traced`].
#[derive(Debug)]
enum Traced {
    Sent(Box<Smp>),
    Answered(u64),
}

/// A fault injected into the simulator mid-sweep.
type Fault = Box<dyn FnMut(&mut Sim)>;

/// What befalls an SMP of the SM on the way (see [`Lab::mishap`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mishap {
    /// Never reaches the simulator.
    Lost,
    /// Answered at once with this (error) status, not applied.
    Rejected(u16),
}

/// Which SMPs of the SM meet a [`Mishap`].
type Mishaps = Box<dyn FnMut(&Smp) -> Option<Mishap>>;

struct Lab {
    topo: Topology,
    sim: Sim,
    sm_client: ClientId,
    reader: ClientId,
    local: NodeIdx,
    sm: SubnetManager,
    now: Duration,
    wire: Wire,
    tid: u64,
    /// Called once when the SM first sends an LFT block (fault injection mid-sweep).
    on_first_lft: Option<Fault>,
    /// SMPs of the SM for which this says so are lost or rejected on the way (fault
    /// injection by [`Lab::run_until`]).
    mishap: Option<Mishaps>,
}

impl Lab {
    fn new(topo: Topology, cfg: SubnetConfig) -> Lab {
        Lab::with_sim(topo, cfg, SimConfig::default())
    }

    fn with_sim(topo: Topology, cfg: SubnetConfig, sim_cfg: SimConfig) -> Lab {
        let sim = Sim::new(&topo, sim_cfg);
        let local = topo
            .iter()
            .find(|(_, n)| !n.is_switch())
            .map(|(i, _)| i)
            .expect("fabric has a CA");
        let mut lab = Lab {
            sim,
            sm_client: ClientId(0),
            reader: ClientId(0),
            local,
            sm: SubnetManager::new(cfg).expect("valid config"),
            now: Duration::ZERO,
            wire: Wire::default(),
            tid: 1,
            on_first_lft: None,
            mishap: None,
            topo,
        };
        lab.sm_client = lab.sim.attach(local, 1).unwrap();
        lab.sim.set_is_sm(lab.sm_client, true).unwrap();
        lab.reader = lab.sim.attach(local, 1).unwrap();
        lab
    }

    /// Run until an event matches `stop` (returns every event seen).
    fn run_until(&mut self, stop: impl FnMut(&SubnetEvent) -> bool) -> Vec<SubnetEvent> {
        self.run_until_or(stop, |_, _| false)
    }

    /// [`Lab::run_until`], also stopping as soon as `stop_at` holds for what
    /// went out so far and the SM's state (checked after each round).
    fn run_until_or(
        &mut self,
        mut stop: impl FnMut(&SubnetEvent) -> bool,
        mut stop_at: impl FnMut(&Wire, &SubnetManager) -> bool,
    ) -> Vec<SubnetEvent> {
        let mut seen = Vec::new();
        for _ in 0..20_000_000u64 {
            let mut busy = false;
            while let Some(o) = self.sm.poll_transmit() {
                busy = true;
                if let Ok(smp) = Smp::decode(&o.mad) {
                    if smp.method == Method::SET
                        && smp.attr_id == AttributeId::LINEAR_FORWARDING_TABLE
                    {
                        self.wire.lft_sets += 1;
                        if let Some(mut f) = self.on_first_lft.take() {
                            f(&mut self.sim);
                        }
                    }
                    if smp.method == Method::SET
                        && smp.attr_id == AttributeId::PORT_INFO
                        && smp
                            .attribute::<PortInfo>()
                            .is_ok_and(|p| p.client_reregister)
                    {
                        self.wire.rereg_sets += 1;
                    }
                    if smp.method == Method::TRAP_REPRESS {
                        self.wire.represses.push((o.dlid, smp));
                    }
                    if smp.method == Method::GET && smp.attr_id == AttributeId::NODE_INFO {
                        self.wire.node_info_gets += 1;
                    }
                    if smp.method == Method::SET && smp.attr_id == AttributeId::P_KEY_TABLE {
                        self.wire.pkey_sets += 1;
                    }
                    let mishap = self.mishap.as_mut().and_then(|f| f(&smp));
                    let tid = smp.tid;
                    let reply = smp.response();
                    if self.wire.trace {
                        self.wire.traced.push(Traced::Sent(Box::new(smp)));
                    }
                    match mishap {
                        Some(Mishap::Lost) => continue,
                        Some(Mishap::Rejected(status)) => {
                            if self.wire.trace {
                                self.wire.traced.push(Traced::Answered(tid));
                            }
                            let reply = Smp { status, ..reply };
                            self.sm.handle_incoming(self.now, &reply.encode());
                            continue;
                        }
                        None => {}
                    }
                }
                let r = match o.dlid {
                    None => self.sim.send(self.now, self.sm_client, &o.mad),
                    Some(l) => self.sim.send_to(self.now, self.sm_client, l, &o.mad),
                };
                r.expect("well-formed MAD");
            }
            while let Some((client, mad)) = self.sim.poll_delivery(self.now) {
                busy = true;
                if client == self.sm_client {
                    if self.wire.trace {
                        if let Ok(smp) = Smp::decode(&mad) {
                            self.wire.traced.push(Traced::Answered(smp.tid));
                        }
                    }
                    self.sm.handle_incoming(self.now, &mad);
                }
            }
            while let Some(ev) = self.sm.poll_event() {
                let hit = stop(&ev);
                seen.push(ev);
                if hit {
                    return seen;
                }
            }
            while let Some(job) = self.sm.poll_routing_job() {
                if self.wire.hold_jobs {
                    self.wire.held_jobs.push(job);
                } else {
                    busy = true;
                    self.wire.routing_jobs_run += 1;
                    let done = job.run();
                    self.sm.handle_routing_done(self.now, done);
                }
            }
            if stop_at(&self.wire, &self.sm) {
                return seen;
            }
            if busy {
                continue;
            }
            let next = [self.sm.poll_timeout(), self.sim.poll_timeout()]
                .into_iter()
                .flatten()
                .min()
                .expect("something must be pending");
            self.now = self.now.max(next);
            if self.sm.poll_timeout().is_some_and(|t| t <= self.now) {
                self.sm.handle_timeout(self.now);
            }
        }
        panic!("no matching event; saw {seen:?}");
    }

    /// Run everything due up to virtual time `until` (then stop there), returning
    /// the events with the time they came out. For storms: the test injects
    /// traps between calls.
    fn run_to(&mut self, until: Duration) -> Vec<(Duration, SubnetEvent)> {
        let mut seen = Vec::new();
        loop {
            let mut busy = false;
            while let Some(o) = self.sm.poll_transmit() {
                busy = true;
                if let Ok(smp) = Smp::decode(&o.mad) {
                    if smp.method == Method::TRAP_REPRESS {
                        self.wire.represses.push((o.dlid, smp));
                    }
                }
                let r = match o.dlid {
                    None => self.sim.send(self.now, self.sm_client, &o.mad),
                    Some(l) => self.sim.send_to(self.now, self.sm_client, l, &o.mad),
                };
                r.expect("well-formed MAD");
            }
            while let Some(d) = self.sim.poll_delivery_from(self.now) {
                busy = true;
                if d.client == self.sm_client {
                    self.sm.handle_incoming_from(self.now, &d.mad, d.slid);
                }
            }
            while let Some(ev) = self.sm.poll_event() {
                seen.push((self.now, ev));
            }
            while let Some(job) = self.sm.poll_routing_job() {
                busy = true;
                let done = job.run();
                self.sm.handle_routing_done(self.now, done);
            }
            if busy {
                continue;
            }
            let next = [self.sm.poll_timeout(), self.sim.poll_timeout()]
                .into_iter()
                .flatten()
                .min();
            match next {
                Some(t) if t <= until => {
                    self.now = self.now.max(t);
                    if self.sm.poll_timeout().is_some_and(|t| t <= self.now) {
                        self.sm.handle_timeout(self.now);
                    }
                }
                _ => {
                    self.now = self.now.max(until);
                    return seen;
                }
            }
        }
    }

    fn bring_up(&mut self) -> (PhaseTimes, SweepReport) {
        self.sm.become_master(self.now);
        // SubnetUp is followed by the sweep's SweepDone: consume both.
        let evs = self.run_until(|e| matches!(e, SubnetEvent::SweepDone { .. }));
        let up = evs.iter().find_map(|e| match e {
            SubnetEvent::SubnetUp { phases, report } => Some((*phases, report.clone())),
            _ => None,
        });
        up.expect("SubnetUp before the first SweepDone")
    }

    /// A trap 128 (link state change) from the switch at LID `issuer`, received.
    fn link_trap(&mut self, issuer: u16, tid: u64) {
        let t = trap(
            issuer,
            ProducerType::SWITCH,
            &TrapDetails::LinkStateChange { lid: issuer },
            tid,
        );
        self.sm.handle_incoming_from(self.now, &t, issuer);
    }

    fn heavy(&mut self) -> (Vec<SubnetEvent>, SweepReport) {
        let evs = self.run_until(|e| {
            matches!(
                e,
                SubnetEvent::SweepDone {
                    kind: SweepKind::Heavy,
                    ..
                }
            )
        });
        let report = match evs.last() {
            Some(SubnetEvent::SweepDone { report, .. }) => report.clone(),
            _ => unreachable!(),
        };
        (evs, report)
    }

    /// A directed-route discovery of the fabric as it is now, through the reader
    /// client on the SM's port (what a daemon holds from while it was DISCOVERING).
    fn discover(&mut self) -> crate::discovery::DiscoveryResult {
        let mut d = crate::discovery::Discovery::new(crate::discovery::DiscoveryConfig::default());
        let mut pending = HashMap::new();
        loop {
            while let Some(token) = d.poll_request() {
                self.tid += 1;
                let mut smp = token.to_smp().expect("route");
                smp.tid = 0xDD00_0000_0000 | self.tid;
                self.sim
                    .send(self.now, self.reader, &smp.encode())
                    .expect("well-formed");
                pending.insert(smp.tid, token);
            }
            if d.is_done() {
                return d.into_result();
            }
            let t = self.sim.poll_timeout().expect("answers pending");
            self.now = self.now.max(t);
            while let Some((c, mad)) = self.sim.poll_delivery(self.now) {
                let Ok(r) = Smp::decode(&mad) else { continue };
                if c != self.reader {
                    continue;
                }
                match pending.remove(&r.tid) {
                    Some(token) if r.status == 0 => d.handle_response(token, &r),
                    Some(token) => d.handle_failure(token, "error status"),
                    None => {}
                }
            }
        }
    }

    /// SubnGet by directed route through the reader client (None: no answer or error status).
    fn get(&mut self, path: &[u8], attr: AttributeId, amod: u32) -> Option<Smp> {
        self.tid += 1;
        let smp = Smp::get_dr(path, attr, amod, 0xEE00_0000_0000 | self.tid);
        self.exchange(smp)
    }

    /// SubnSet by directed route through the reader client (another SM writing).
    fn set(&mut self, path: &[u8], attr: AttributeId, amod: u32, data: [u8; 64]) -> Option<Smp> {
        self.tid += 1;
        let smp = Smp::try_set_dr(path, attr, amod, 0xEE00_0000_0000 | self.tid, data).ok()?;
        self.exchange(smp)
    }

    fn exchange(&mut self, smp: Smp) -> Option<Smp> {
        let tid = smp.tid;
        self.sim.send(self.now, self.reader, &smp.encode()).ok()?;
        let deadline = self.now + Duration::from_millis(5);
        while let Some(t) = self.sim.poll_timeout() {
            if t > deadline {
                break;
            }
            self.now = self.now.max(t);
            while let Some((c, mad)) = self.sim.poll_delivery(self.now) {
                if c == self.reader {
                    let r = Smp::decode(&mad).ok()?;
                    if r.tid == tid {
                        return (r.status == 0).then_some(r);
                    }
                } else {
                    self.sm.handle_incoming(self.now, &mad);
                }
            }
        }
        None
    }
}

/// DR paths from `start` over the real topology (BFS through switches only).
fn paths(
    topo: &Topology,
    start: NodeIdx,
    dead: &HashSet<(NodeIdx, u8)>,
) -> HashMap<NodeIdx, Vec<u8>> {
    let mut out = HashMap::from([(start, Vec::new())]);
    let mut q = VecDeque::from([start]);
    while let Some(n) = q.pop_front() {
        let node = topo.node(n).unwrap();
        if n != start && !node.is_switch() {
            continue;
        }
        let base = out[&n].clone();
        for (p, port) in node.physical_ports() {
            if dead.contains(&(n, p)) {
                continue;
            }
            if let Some((r, _)) = port.remote {
                if let std::collections::hash_map::Entry::Vacant(e) = out.entry(r) {
                    let mut path = base.clone();
                    path.push(p);
                    e.insert(path);
                    q.push_back(r);
                }
            }
        }
    }
    out
}

/// The path on which a CA port answers as itself: its switch's path + the cable.
fn port_route(
    topo: &Topology,
    pmap: &HashMap<NodeIdx, Vec<u8>>,
    node: NodeIdx,
    port: u8,
) -> Option<Vec<u8>> {
    if topo.node(node)?.is_switch() {
        return pmap.get(&node).cloned();
    }
    let (sw, sp) = topo.neighbor(node, port)?;
    let mut p = pmap.get(&sw)?.clone();
    p.push(sp);
    Some(p)
}

struct ReadBack {
    /// LID range per end port (node, port) -> (base, lmc).
    lids: HashMap<(NodeIdx, u8), (u16, u8)>,
    /// Each switch's LFT, LID 0's entry taken out (0xFF: it holds the LFT stamp).
    lfts: HashMap<NodeIdx, Vec<u8>>,
    /// LID 0's entry of each switch's LFT: the stamp (see `lft_stamp`).
    stamps: HashMap<NodeIdx, u8>,
}

/// Read every end port's PortInfo and every switch's LFT back from the SMAs, and
/// check states, LIDs (unique, aligned) on the way.
fn read_back(
    lab: &mut Lab,
    expect_lmc: u8,
    skip: &HashSet<NodeIdx>,
    dead: &HashSet<(NodeIdx, u8)>,
) -> ReadBack {
    let topo = lab.topo.clone();
    let pmap = paths(&topo, lab.local, dead);
    let mut lids = HashMap::new();
    let mut owner: HashMap<u16, (NodeIdx, u8)> = HashMap::new();
    let mut lfts = HashMap::new();
    let mut stamps = HashMap::new();
    for (idx, node) in topo.iter() {
        if skip.contains(&idx) || !pmap.contains_key(&idx) {
            continue;
        }
        let mut ports: Vec<u8> = node
            .physical_ports()
            .filter(|(n, p)| {
                !dead.contains(&(idx, *n)) && p.remote.is_some_and(|(r, _)| !skip.contains(&r))
            })
            .map(|(n, _)| n)
            .collect();
        if node.is_switch() {
            ports.insert(0, 0);
        }
        for p in ports {
            let path = port_route(&topo, &pmap, idx, p).unwrap();
            let pi = lab
                .get(&path, AttributeId::PORT_INFO, u32::from(p))
                .unwrap_or_else(|| panic!("PortInfo {idx}/{p} unanswered"))
                .attribute::<PortInfo>()
                .unwrap();
            if p != 0 {
                assert_eq!(
                    pi.port_state,
                    PortState::Active,
                    "{idx}/{p} ({}) not Active",
                    node.description
                );
            }
            if node.is_switch() && p != 0 {
                continue;
            }
            let lmc = if node.is_switch() { 0 } else { expect_lmc };
            assert_eq!(pi.lmc, lmc, "LMC of {idx}/{p}");
            assert!(
                pi.lid >= 1 && u32::from(pi.lid) + (1 << lmc) - 1 <= 0xBFFF,
                "LID {:#x} out of range",
                pi.lid
            );
            assert_eq!(
                pi.lid % (1 << lmc),
                0,
                "LID {:#x} of {idx}/{p} not aligned to LMC {lmc}",
                pi.lid
            );
            for l in pi.lid..pi.lid + (1 << lmc) {
                if let Some(prev) = owner.insert(l, (idx, p)) {
                    panic!("LID {l:#x} on {prev:?} and {idx}/{p}");
                }
            }
            lids.insert((idx, p), (pi.lid, lmc));
            assert_ne!(pi.master_sm_lid, 0, "MasterSMLID unset on {idx}/{p}");
        }
        if node.is_switch() {
            let path = pmap[&idx].clone();
            let si = lab
                .get(&path, AttributeId::SWITCH_INFO, 0)
                .unwrap()
                .attribute::<ibsm_mad::SwitchInfo>()
                .unwrap();
            let mut table = Vec::new();
            for b in 0..=(si.linear_fdb_top / 64) {
                let blk = lab
                    .get(&path, AttributeId::LINEAR_FORWARDING_TABLE, u32::from(b))
                    .unwrap()
                    .attribute::<LinearForwardingTable>()
                    .unwrap();
                table.extend_from_slice(&blk.ports);
            }
            table.truncate(usize::from(si.linear_fdb_top) + 1);
            if let Some(lid0) = table.first_mut() {
                stamps.insert(idx, *lid0);
                *lid0 = 0xFF;
            }
            lfts.insert(idx, table);
        }
    }
    ReadBack { lids, lfts, stamps }
}

/// Walk the read-back LFTs from every switch to every LID; `dead` cables must not be used.
fn check_walks(topo: &Topology, rb: &ReadBack, dead: &HashSet<(NodeIdx, u8)>) {
    let lid_owner: HashMap<u16, NodeIdx> = rb
        .lids
        .iter()
        .flat_map(|(&(n, _), &(base, lmc))| (base..base + (1 << lmc)).map(move |l| (l, n)))
        .collect();
    for &start in rb.lfts.keys() {
        for (&lid, &target) in &lid_owner {
            let mut at = start;
            let mut hops = 0;
            loop {
                assert!(hops < 64, "loop routing LID {lid:#x} from {start}");
                let Some(table) = rb.lfts.get(&at) else {
                    assert_eq!(at, target, "LID {lid:#x} from {start} ended at CA {at}");
                    break;
                };
                let port = *table.get(usize::from(lid)).unwrap_or(&0xFF);
                assert_ne!(
                    port, 0xFF,
                    "switch {at} has no route to LID {lid:#x} (from {start})"
                );
                if port == 0 {
                    assert_eq!(at, target, "switch {at} claims LID {lid:#x}");
                    break;
                }
                assert!(
                    !dead.contains(&(at, port)),
                    "LID {lid:#x} from {start} routed over dead link {at}/{port}"
                );
                let (next, _) = topo
                    .neighbor(at, port)
                    .unwrap_or_else(|| panic!("{at}/{port} has no cable"));
                at = next;
                hops += 1;
            }
        }
    }
}

#[test]
fn fat_tree_comes_up_with_lmc_and_partitions() {
    let topo = gen::fat_tree_3level(4).unwrap();
    let cas: Vec<u64> = topo
        .iter()
        .filter(|(_, n)| !n.is_switch())
        .map(|(_, n)| n.ports[1].port_guid)
        .collect();
    let mut c = cfg();
    c.lmc = 1;
    c.partitions = vec![
        Partition {
            groups: Vec::new(),
            index0: false,
            name: "storage".into(),
            p_key: 0x0010,
            members: vec![
                PartitionMember {
                    port_guid: cas[1],
                    membership: Membership::Full,
                },
                PartitionMember {
                    port_guid: cas[2],
                    membership: Membership::Limited,
                },
            ],
            ipoib: None,
        },
        Partition {
            groups: Vec::new(),
            index0: false,
            name: "compute".into(),
            p_key: 0x0020,
            members: vec![PartitionMember {
                port_guid: cas[2],
                membership: Membership::Full,
            }],
            ipoib: None,
        },
    ];
    let mut lab = Lab::new(topo.clone(), c);
    let (_, report) = lab.bring_up();
    assert_eq!(report.nodes, topo.len());
    assert_eq!(report.lids, 20 + 16);
    assert_eq!(report.failures, 0);
    assert!(report.ports_activated > 0);
    // Every CA port was told to re-register (first sweep of a new master).
    assert_eq!(lab.wire.rereg_sets, 16);
    let rb = read_back(&mut lab, 1, &HashSet::new(), &HashSet::new());
    assert_eq!(rb.lids.len(), 36);
    check_walks(&topo, &rb, &HashSet::new());
    // P_Key tables read back.
    let pmap = paths(&topo, lab.local, &HashSet::new());
    let expect: [(u64, Vec<u16>); 3] = [
        (cas[1], vec![0xFFFF, 0x8010]),
        (cas[2], vec![0xFFFF, 0x0010, 0x8020]),
        (cas[3], vec![0xFFFF]),
    ];
    for (guid, keys) in expect {
        let (n, p) = topo.find_by_port_guid(guid).unwrap();
        let path = port_route(&topo, &pmap, n, p).unwrap();
        let t = lab
            .get(
                &path,
                AttributeId::P_KEY_TABLE,
                PKeyBlock { block: 0, port: 0 }.attr_mod(),
            )
            .unwrap()
            .attribute::<PKeyTable>()
            .unwrap();
        let got: Vec<u16> = t.keys.iter().map(|k| k.0).filter(|&k| k != 0).collect();
        assert_eq!(got, keys, "P_Keys of {guid:#x}");
    }
}

#[test]
fn second_sweep_on_unchanged_fabric_sends_no_lft_block() {
    let topo = gen::fat_tree_2level(8).unwrap();
    let mut lab = Lab::new(topo, cfg());
    lab.bring_up();
    let first = lab.wire.lft_sets;
    assert!(first > 0);
    lab.sm.start_heavy_sweep(lab.now);
    let (evs, report) = lab.heavy();
    assert_eq!(
        lab.wire.lft_sets, first,
        "LFT blocks resent on an unchanged fabric"
    );
    assert_eq!(report.lft_blocks_sent, 0);
    assert_eq!(report.port_info_sets, 0, "PortInfo resent: {report:?}");
    assert!(!evs
        .iter()
        .any(|e| matches!(e, SubnetEvent::TopologyChanged { .. })));
    // ClientReregister only on the new master's first sweep.
    assert_eq!(lab.wire.rereg_sets, 32);
}

#[test]
fn link_down_is_found_by_light_sweep_and_rerouted() {
    let topo = gen::fat_tree_3level(4).unwrap();
    let mut lab = Lab::new(topo.clone(), cfg());
    lab.bring_up();
    // An edge-to-aggregation cable in a pod other than the SM's.
    let edge = topo.find_by_name("edge-3-0").unwrap();
    let (agg, agg_port) = topo.neighbor(edge, 3).unwrap();
    lab.sim.link_down(edge, 3).unwrap();
    let blocks_before = lab.wire.lft_sets;
    let evs = lab.run_until(|e| {
        matches!(
            e,
            SubnetEvent::SweepDone {
                kind: SweepKind::Heavy,
                ..
            }
        )
    });
    assert!(
        evs.iter().any(|e| matches!(
            e,
            SubnetEvent::SweepDone {
                kind: SweepKind::Light,
                ..
            }
        )),
        "the heavy sweep was not triggered by a light sweep"
    );
    assert!(evs.iter().any(|e| matches!(
        e,
        SubnetEvent::TopologyChanged {
            links_changed: 1,
            ..
        }
    )));
    assert!(
        lab.wire.lft_sets > blocks_before,
        "no LFT update after the link went down"
    );
    let dead = HashSet::from([(edge, 3), (agg, agg_port)]);
    let rb = read_back(&mut lab, 0, &HashSet::new(), &dead);
    check_walks(&topo, &rb, &dead);
    // The light sweep after that is quiet: PortStateChange was cleared.
    let evs = lab.run_until(|e| {
        matches!(
            e,
            SubnetEvent::SweepDone {
                kind: SweepKind::Light,
                ..
            }
        )
    });
    assert_eq!(
        evs.iter()
            .filter(|e| matches!(
                e,
                SubnetEvent::SweepDone {
                    kind: SweepKind::Heavy,
                    ..
                }
            ))
            .count(),
        0
    );
}

#[test]
fn a_handed_over_discovery_brings_the_subnet_up_without_a_second_walk() {
    let topo = gen::fat_tree_3level(4).unwrap();
    let mut lab = Lab::new(topo.clone(), cfg());
    let discovery = lab.discover();
    assert_eq!(discovery.topology.len(), topo.len());
    lab.sm.become_master_with_discovery(lab.now, discovery);
    let evs = lab.run_until(|e| matches!(e, SubnetEvent::SweepDone { .. }));
    let (phases, report) = evs
        .iter()
        .find_map(|e| match e {
            SubnetEvent::SubnetUp { phases, report } => Some((*phases, report.clone())),
            _ => None,
        })
        .expect("SubnetUp");
    assert_eq!(lab.wire.node_info_gets, 0, "the fabric was walked again");
    assert_eq!(phases.discovery, Duration::ZERO);
    assert_eq!(report.nodes, topo.len());
    assert_eq!(report.failures, 0);
    // Still a new master's sweep: every CA port re-registers.
    assert_eq!(lab.wire.rereg_sets, 16);
    let rb = read_back(&mut lab, 0, &HashSet::new(), &HashSet::new());
    check_walks(&topo, &rb, &HashSet::new());
    // Later heavy sweeps discover as usual.
    lab.sm.start_heavy_sweep(lab.now);
    lab.heavy();
    assert!(lab.wire.node_info_gets >= topo.len() as u64);
}

#[test]
fn on_demand_light_sweep_reads_switches_not_the_fabric_and_sees_a_pulled_cable() {
    let topo = gen::fat_tree_3level(4).unwrap();
    let switches = topo.iter().filter(|(_, n)| n.is_switch()).count() as u64;
    let mut lab = Lab::new(topo.clone(), cfg());
    lab.bring_up();
    let light_done = |e: &SubnetEvent| matches!(e, SubnetEvent::SweepDone { .. });
    // Activation itself flips PortStateChange on the switches: the first light sweep
    // after bring-up may see that and sweep heavy once; settle before measuring.
    lab.sm.start_light_sweep(lab.now);
    if let Some(SubnetEvent::SweepDone {
        report: SweepReport { changed: true, .. },
        ..
    }) = lab.run_until(light_done).last()
    {
        lab.heavy();
    }
    let walks = lab.wire.node_info_gets;
    lab.sm.start_light_sweep(lab.now);
    let evs = lab.run_until(light_done);
    match evs.last() {
        Some(SubnetEvent::SweepDone {
            kind: SweepKind::Light,
            report,
            ..
        }) => {
            assert!(!report.changed, "{report:?}");
            assert!(
                (switches..topo.len() as u64).contains(&report.smps),
                "{report:?}"
            );
        }
        other => panic!("expected a light sweep first, got {other:?}"),
    }
    assert_eq!(
        lab.wire.node_info_gets, walks,
        "a light sweep walked the fabric"
    );
    // A pulled cable: the on-demand light sweep sees it, a heavy sweep follows.
    let edge = topo.find_by_name("edge-3-0").unwrap();
    lab.sim.link_down(edge, 3).unwrap();
    lab.sm.start_light_sweep(lab.now);
    let evs = lab.run_until(light_done);
    assert!(
        matches!(
            evs.last(),
            Some(SubnetEvent::SweepDone {
                kind: SweepKind::Light,
                report: SweepReport { changed: true, .. },
                ..
            })
        ),
        "{evs:?}"
    );
    lab.heavy();
    assert!(lab.wire.node_info_gets > walks);
}

#[test]
fn random_fabrics_come_up() {
    for seed in [1u64, 7, 42] {
        let topo = gen::random(seed, 12, 30, 8).unwrap();
        let mut lab = Lab::new(topo.clone(), cfg());
        let (_, report) = lab.bring_up();
        assert_eq!(report.nodes, topo.len(), "seed {seed}");
        let rb = read_back(&mut lab, 0, &HashSet::new(), &HashSet::new());
        check_walks(&topo, &rb, &HashSet::new());
    }
}

#[test]
fn a_dead_switch_does_not_stall_the_sweep() {
    let topo = gen::fat_tree_3level(4).unwrap();
    let mut lab = Lab::new(topo.clone(), cfg());
    // A core switch dies after discovery saw it, while LFTs are being sent.
    let core = topo.find_by_name("core-3").unwrap();
    lab.on_first_lft = Some(Box::new(move |sim: &mut Sim| {
        sim.remove_node(core).unwrap()
    }));
    let (_, report) = lab.bring_up();
    assert!(report.dead_nodes >= 1, "{report:?}");
    assert!(report.failures >= 1);
    // The next sweep leaves it out and the rest of the fabric routes around it.
    lab.sm.start_heavy_sweep(lab.now);
    let (evs, report) = lab.heavy();
    assert_eq!(report.nodes, topo.len() - 1);
    assert!(evs
        .iter()
        .any(|e| matches!(e, SubnetEvent::TopologyChanged { removed, .. } if removed.len() == 1)));
    let dead: HashSet<(NodeIdx, u8)> = topo
        .node(core)
        .unwrap()
        .physical_ports()
        .filter_map(|(_, p)| p.remote)
        .collect();
    let rb = read_back(&mut lab, 0, &HashSet::from([core]), &dead);
    check_walks(&topo, &rb, &dead);
}

#[test]
fn trap_128_is_repressed_and_triggers_a_heavy_sweep() {
    let topo = gen::fat_tree_2level(4).unwrap();
    let mut lab = Lab::new(topo, cfg());
    lab.bring_up();
    let notice = Notice::generic(
        NoticeType::from(1u8),
        ProducerType::SWITCH,
        0x0005,
        &TrapDetails::LinkStateChange { lid: 0x0005 },
    );
    let trap = Smp::request(
        Method::TRAP,
        SmpRoute::Lid,
        AttributeId::NOTICE,
        0,
        0x1234,
        notice.encode(),
    );
    lab.sm.handle_incoming(lab.now, &trap.encode());
    // Again before the sweep: coalesced into one heavy sweep, still repressed.
    lab.sm.handle_incoming(lab.now, &trap.encode());
    let (_, _) = lab.heavy();
    assert_eq!(lab.wire.represses.len(), 2);
    for (dlid, smp) in &lab.wire.represses {
        assert_eq!(*dlid, Some(0x0005));
        assert_eq!(smp.tid, 0x1234);
        assert_eq!(smp.attr_id, AttributeId::NOTICE);
    }
    assert_eq!(lab.sm.metrics().heavy_sweeps, 2);
}

#[test]
fn config_is_validated() {
    let c = SubnetConfig {
        lmc: 8,
        ..SubnetConfig::default()
    };
    assert!(matches!(
        SubnetManager::new(c).unwrap_err(),
        ConfigError::Lmc(8)
    ));
    let c = SubnetConfig {
        partitions: vec![Partition {
            groups: Vec::new(),
            index0: false,
            name: "x".into(),
            p_key: 0x8000,
            members: vec![],
            ipoib: None,
        }],
        ..SubnetConfig::default()
    };
    assert!(matches!(
        SubnetManager::new(c).unwrap_err(),
        ConfigError::PKey { .. }
    ));
    let p = Partition {
        groups: Vec::new(),
        index0: false,
        name: "x".into(),
        p_key: 1,
        members: vec![],
        ipoib: None,
    };
    let c = SubnetConfig {
        partitions: vec![p.clone(), Partition { p_key: 2, ..p }],
        ..SubnetConfig::default()
    };
    assert!(matches!(
        SubnetManager::new(c).unwrap_err(),
        ConfigError::Duplicate { .. }
    ));
}

#[test]
fn lid_space_exhaustion_serves_end_ports_first() {
    // 3-level k=8: 128 CAs + 80 switches. LMC 7 gives each CA 128 LIDs:
    // 16384 LIDs, everything fits.
    let mut topo = gen::fat_tree_3level(8).unwrap();
    let mut lm = ibsm_fabric::lid::LidManager::new(ibsm_fabric::lid::LidConfig { lmc: 7 });
    let r = lm.assign(&mut topo).unwrap();
    assert_eq!(r.unassigned, 0);
    assert_eq!(r.assigned + r.kept, 128 + 80);
    // k=16 with LMC 7: 1024 CAs need 131072 LIDs: 383 get a block, none of the
    // switches is served before every CA that fits.
    let mut topo = gen::fat_tree_3level(16).unwrap();
    let mut lm = ibsm_fabric::lid::LidManager::new(ibsm_fabric::lid::LidConfig { lmc: 7 });
    let r = lm.assign(&mut topo).unwrap();
    assert!(r.unassigned > 0);
    let ca_lids = topo
        .iter()
        .filter(|(_, n)| !n.is_switch() && n.ports[1].lid != 0)
        .count();
    let sw_lids = topo
        .iter()
        .filter(|(_, n)| n.is_switch() && n.ports[0].lid != 0)
        .count();
    assert_eq!(ca_lids, 0xBFFF / 128);
    assert_eq!(
        sw_lids, 127,
        "switches take the LIDs below the first aligned CA block and the tail"
    );
}

/// The switch port cabled to a CA port, and the DR path of that switch.
fn switch_port_of(lab: &Lab, guid: u64) -> (Vec<u8>, u8) {
    let (n, p) = lab.topo.find_by_port_guid(guid).unwrap();
    let (sw, sp) = lab.topo.neighbor(n, p).unwrap();
    let pmap = paths(&lab.topo, lab.local, &HashSet::new());
    (pmap[&sw].clone(), sp)
}

fn read_pkeys(lab: &mut Lab, path: &[u8], port: u8) -> Vec<u16> {
    lab.get(
        path,
        AttributeId::P_KEY_TABLE,
        PKeyBlock { block: 0, port }.attr_mod(),
    )
    .unwrap_or_else(|| panic!("P_KeyTable of port {port} at {path:?} unanswered"))
    .attribute::<PKeyTable>()
    .unwrap()
    .keys
    .iter()
    .map(|k| k.0)
    .filter(|&k| k != 0)
    .collect()
}

fn read_enforcement(lab: &mut Lab, path: &[u8], port: u8) -> (bool, bool) {
    let pi = lab
        .get(path, AttributeId::PORT_INFO, u32::from(port))
        .unwrap()
        .attribute::<PortInfo>()
        .unwrap();
    (
        pi.partition_enforcement_inbound,
        pi.partition_enforcement_outbound,
    )
}

fn ca_guids(topo: &Topology) -> Vec<u64> {
    topo.iter()
        .filter(|(_, n)| !n.is_switch())
        .map(|(_, n)| n.ports[1].port_guid)
        .collect()
}

fn two_partitions(cas: &[u64]) -> Vec<Partition> {
    vec![
        Partition {
            groups: Vec::new(),
            index0: false,
            name: "storage".into(),
            p_key: 0x0010,
            members: vec![
                PartitionMember {
                    port_guid: cas[1],
                    membership: Membership::Full,
                },
                PartitionMember {
                    port_guid: cas[2],
                    membership: Membership::Limited,
                },
            ],
            ipoib: None,
        },
        Partition {
            groups: Vec::new(),
            index0: false,
            name: "compute".into(),
            p_key: 0x0020,
            members: vec![PartitionMember {
                port_guid: cas[2],
                membership: Membership::Full,
            }],
            ipoib: None,
        },
    ]
}

#[test]
fn switch_ports_facing_cas_enforce_the_cas_partitions() {
    let topo = gen::fat_tree_2level(4).unwrap();
    let cas = ca_guids(&topo);
    let mut c = cfg();
    c.partitions = two_partitions(&cas);
    let mut lab = Lab::new(topo.clone(), c.clone());
    let (_, report) = lab.bring_up();
    assert_eq!(report.failures, 0, "{report:?}");
    let expect: [(u64, Vec<u16>); 3] = [
        (cas[1], vec![0xFFFF, 0x8010]),
        (cas[2], vec![0xFFFF, 0x0010, 0x8020]),
        (cas[3], vec![0xFFFF]),
    ];
    for (guid, keys) in &expect {
        let (path, sp) = switch_port_of(&lab, *guid);
        // Limited stays limited at the switch: the copy is exact.
        assert_eq!(
            &read_pkeys(&mut lab, &path, sp),
            keys,
            "switch port facing {guid:#x}"
        );
        assert_eq!(
            read_enforcement(&mut lab, &path, sp),
            (true, true),
            "{guid:#x}"
        );
    }
    // Switch-to-switch ports neither get a CA's table nor enforce.
    let leaf = topo.find_by_name("leaf-0").unwrap();
    let up = topo
        .node(leaf)
        .unwrap()
        .physical_ports()
        .find(|(_, p)| {
            p.remote
                .is_some_and(|(r, _)| topo.node(r).unwrap().is_switch())
        })
        .map(|(n, _)| n)
        .unwrap();
    let pmap = paths(&topo, lab.local, &HashSet::new());
    let lpath = pmap[&leaf].clone();
    assert_eq!(read_enforcement(&mut lab, &lpath, up), (false, false));
    assert_eq!(read_pkeys(&mut lab, &lpath, up), vec![0xFFFF]);
    // A second sweep resends nothing (tables and bits read as wanted).
    lab.sm.start_heavy_sweep(lab.now);
    let (_, report) = lab.heavy();
    assert_eq!(report.port_info_sets, 0, "{report:?}");

    // A master configured without switch enforcement clears the bits.
    c.partition_enforcement = false;
    lab.sm.stop();
    lab.sm = SubnetManager::new(c).unwrap();
    lab.bring_up();
    for (guid, _) in &expect {
        let (path, sp) = switch_port_of(&lab, *guid);
        assert_eq!(
            read_enforcement(&mut lab, &path, sp),
            (false, false),
            "{guid:#x}"
        );
    }
}

#[test]
fn switch_enforcement_follows_the_switch_caps() {
    let topo = gen::fat_tree_2level(4).unwrap();
    let cas = ca_guids(&topo);
    let mut c = cfg();
    c.partitions = two_partitions(&cas);
    // Switches without per-port P_Key tables: nothing is written to their
    // external ports (the sim refuses such a P_KeyTable, a failure would show).
    let sim_cfg = SimConfig {
        partition_enforcement_cap: 0,
        ..SimConfig::default()
    };
    let mut lab = Lab::with_sim(topo.clone(), c.clone(), sim_cfg);
    let (_, report) = lab.bring_up();
    assert_eq!(report.failures, 0, "{report:?}");
    let (path, sp) = switch_port_of(&lab, cas[1]);
    assert_eq!(read_enforcement(&mut lab, &path, sp), (false, false));
    // Tables of 2 entries: cas[1] (2 keys) is enforced, cas[2] (3 keys) cannot
    // be without cutting it off a partition, so its switch port does not enforce.
    let sim_cfg = SimConfig {
        partition_enforcement_cap: 2,
        ..SimConfig::default()
    };
    let mut lab = Lab::with_sim(topo, c, sim_cfg);
    let (_, report) = lab.bring_up();
    assert_eq!(report.failures, 0, "{report:?}");
    let (path, sp) = switch_port_of(&lab, cas[1]);
    assert_eq!(read_enforcement(&mut lab, &path, sp), (true, true));
    assert_eq!(read_pkeys(&mut lab, &path, sp), vec![0xFFFF, 0x8010]);
    let (path, sp) = switch_port_of(&lab, cas[2]);
    assert_eq!(read_enforcement(&mut lab, &path, sp), (false, false));
}

/// OpenSM's default VL arbitration as the IBA tables read: (VL, weight) of entry
/// `i`, for a link running `vls` data VLs and a table of `cap` entries.
fn expected_vlarb(high: bool, i: usize, cap: u8, vls: u8) -> (u8, u8) {
    if i >= usize::from(cap) || i >= 15 || i as u8 >= vls {
        return (0, 0);
    }
    let weight = match (high, i) {
        (true, 0) => 4,
        (true, _) => 0,
        (false, 0) => 0,
        (false, _) => 4,
    };
    (i as u8, weight)
}

fn read_vlarb(lab: &mut Lab, path: &[u8], port: u8, section: u32) -> Vec<(u8, u8)> {
    lab.get(
        path,
        AttributeId::VL_ARBITRATION_TABLE,
        (section << 16) | u32::from(port),
    )
    .unwrap_or_else(|| panic!("VLArbitration block {section} of {path:?}/{port} unanswered"))
    .attribute::<ibsm_mad::attr::VlArbitrationTable>()
    .unwrap()
    .entries
    .iter()
    .map(|e| (e.vl, e.weight))
    .collect()
}

#[test]
fn vl_arbitration_programs_every_block_the_port_has() {
    let topo = gen::fat_tree_2level(4).unwrap();
    let (low_cap, high_cap) = (64u8, 40u8);
    let sim_cfg = SimConfig {
        vl_arb_low_cap: low_cap,
        vl_arb_high_cap: high_cap,
        ..SimConfig::default()
    };
    let mut lab = Lab::with_sim(topo.clone(), cfg(), sim_cfg);
    // A previous SM left junk in every block of a CA port and a switch port.
    let cas = ca_guids(&topo);
    let (n, p) = topo.find_by_port_guid(cas[2]).unwrap();
    let pmap = paths(&topo, lab.local, &HashSet::new());
    let ca_path = port_route(&topo, &pmap, n, p).unwrap();
    let (sw_path, sp) = switch_port_of(&lab, cas[2]);
    let junk = [0x0Eu8; 64];
    for section in 1..=4u32 {
        assert!(lab
            .set(
                &ca_path,
                AttributeId::VL_ARBITRATION_TABLE,
                section << 16,
                junk
            )
            .is_some());
        assert!(lab
            .set(
                &sw_path,
                AttributeId::VL_ARBITRATION_TABLE,
                (section << 16) | u32::from(sp),
                junk
            )
            .is_some());
    }
    let (_, report) = lab.bring_up();
    assert_eq!(report.failures, 0, "{report:?}");
    // VLCap 4 on both ends, max_operational_vls 4: VL0-7.
    let vls = 8;
    for (path, port) in [(ca_path, 0u8), (sw_path.clone(), sp)] {
        for (section, high, base) in [
            (1u32, false, 0),
            (2, false, 32),
            (3, true, 0),
            (4, true, 32),
        ] {
            let got = read_vlarb(&mut lab, &path, port, section);
            let cap = if high { high_cap } else { low_cap };
            let want: Vec<(u8, u8)> = (0..32)
                .map(|j| expected_vlarb(high, base + j, cap, vls))
                .collect();
            assert_eq!(got, want, "block {section} of {path:?}/{port}");
        }
        let pi = lab
            .get(&path, AttributeId::PORT_INFO, u32::from(port))
            .unwrap()
            .attribute::<PortInfo>()
            .unwrap();
        assert_eq!(pi.vl_high_limit, 0);
    }
}

#[test]
fn vl_arbitration_sends_no_block_beyond_the_caps() {
    // Default caps (8 entries): blocks 2 and 4 do not exist; the sim rejects
    // them, so a single one sent would count as a failure.
    let topo = gen::fat_tree_2level(4).unwrap();
    let mut lab = Lab::new(topo.clone(), cfg());
    let (_, report) = lab.bring_up();
    assert_eq!(report.failures, 0, "{report:?}");
    let (path, sp) = switch_port_of(&lab, ca_guids(&topo)[1]);
    let got = read_vlarb(&mut lab, &path, sp, 1);
    let want: Vec<(u8, u8)> = (0..32).map(|i| expected_vlarb(false, i, 8, 8)).collect();
    assert_eq!(got, want);
    let got = read_vlarb(&mut lab, &path, sp, 3);
    let want: Vec<(u8, u8)> = (0..32).map(|i| expected_vlarb(true, i, 8, 8)).collect();
    assert_eq!(got, want);
}

/// A LID-routed SubnTrap(Notice) as a port's SMA sends it to the master.
fn trap(issuer_lid: u16, producer: ProducerType, details: &TrapDetails, tid: u64) -> Vec<u8> {
    let notice = Notice::generic(NoticeType::from(1u8), producer, issuer_lid, details);
    Smp::request(
        Method::TRAP,
        SmpRoute::Lid,
        AttributeId::NOTICE,
        0,
        tid,
        notice.encode(),
    )
    .encode()
    .to_vec()
}

fn is_heavy_done(e: &SubnetEvent) -> bool {
    matches!(
        e,
        SubnetEvent::SweepDone {
            kind: SweepKind::Heavy,
            ..
        }
    )
}

fn is_light_done(e: &SubnetEvent) -> bool {
    matches!(
        e,
        SubnetEvent::SweepDone {
            kind: SweepKind::Light,
            ..
        }
    )
}

/// Bring the fabric up and run light sweeps until one is quiet.
fn settled(topo: Topology) -> Lab {
    let mut lab = Lab::new(topo, cfg());
    lab.bring_up();
    for _ in 0..3 {
        let evs = lab.run_until(is_light_done);
        if let Some(SubnetEvent::SweepDone { report, .. }) = evs.last() {
            if !report.changed {
                return lab;
            }
        }
    }
    panic!("light sweeps never quiet");
}

/// The first CA that is not the SM's (index in the generated topology), with the
/// LID the SM gave its port 1 and that port's GUID.
fn other_ca(lab: &Lab) -> (NodeIdx, u16, u64) {
    let (idx, guid) = lab
        .topo
        .iter()
        .filter(|(i, n)| !n.is_switch() && *i != lab.local)
        .map(|(i, n)| (i, n.ports[1].port_guid))
        .next()
        .unwrap();
    let res = lab.sm.last_discovery().unwrap();
    let (n, p) = res.topology.find_by_port_guid(guid).unwrap();
    let lid = res.topology.node(n).unwrap().port(p).unwrap().lid;
    (idx, lid, guid)
}

#[test]
fn light_sweep_after_bring_up_is_quiet() {
    // The SM's own port reads Active after activation: that is expected, not a change.
    let mut lab = Lab::new(gen::fat_tree_3level(4).unwrap(), cfg());
    lab.bring_up();
    let evs = lab.run_until(is_light_done);
    assert!(!evs.iter().any(is_heavy_done), "{evs:?}");
    match evs.last() {
        Some(SubnetEvent::SweepDone { report, .. }) => assert!(!report.changed),
        other => panic!("{other:?}"),
    }
}

#[test]
fn traps_64_65_from_a_port_are_repressed_and_ignored() {
    let mut lab = settled(gen::fat_tree_2level(4).unwrap());
    let (_, lid, guid) = other_ca(&lab);
    let mut gid = [0u8; 16];
    gid[..8].copy_from_slice(&0xFE80_0000_0000_0000u64.to_be_bytes());
    gid[8..].copy_from_slice(&guid.to_be_bytes());
    let heavy = lab.sm.metrics().heavy_sweeps;
    let t64 = trap(
        lid,
        ProducerType::CA,
        &TrapDetails::GidInService { gid },
        0x64,
    );
    let t65 = trap(
        lid,
        ProducerType::CA,
        &TrapDetails::GidOutOfService { gid },
        0x65,
    );
    lab.sm.handle_incoming(lab.now, &t64);
    lab.sm.handle_incoming(lab.now, &t65);
    assert!(!lab.sm.is_sweeping(), "a 64/65 started a sweep");
    let evs = lab.run_until(is_light_done);
    assert!(!evs.iter().any(is_heavy_done), "{evs:?}");
    assert!(
        !evs.iter().any(|e| matches!(e, SubnetEvent::Notice(_))),
        "a foreign 64/65 was passed on to the SA: {evs:?}"
    );
    assert_eq!(lab.sm.metrics().heavy_sweeps, heavy);
    let tids: Vec<(Option<u16>, u64)> = lab
        .wire
        .represses
        .iter()
        .map(|(d, s)| (*d, s.tid))
        .collect();
    assert_eq!(tids, vec![(Some(lid), 0x64), (Some(lid), 0x65)]);
}

#[test]
fn port_error_traps_are_repressed_counted_and_do_not_sweep() {
    let mut lab = settled(gen::fat_tree_2level(4).unwrap());
    let sw_lid = 1; // any switch LID: the trap only names it
    let heavy = lab.sm.metrics().heavy_sweeps;
    for i in 0..12u64 {
        let t = trap(
            sw_lid,
            ProducerType::SWITCH,
            &TrapDetails::LinkIntegrityThreshold {
                lid: sw_lid,
                port_num: 3,
            },
            0x1290 + i,
        );
        lab.sm.handle_incoming(lab.now, &t);
    }
    for (tid, d) in [
        (
            0x130,
            TrapDetails::ExcessiveBufferOverrun {
                lid: sw_lid,
                port_num: 3,
            },
        ),
        (
            0x131,
            TrapDetails::FlowControlUpdateWatchdog {
                lid: sw_lid,
                port_num: 4,
            },
        ),
    ] {
        lab.sm
            .handle_incoming(lab.now, &trap(sw_lid, ProducerType::SWITCH, &d, tid));
    }
    assert_eq!(
        lab.wire.represses.len(),
        0,
        "nothing sent before the loop runs"
    );
    let evs = lab.run_until(is_light_done);
    assert!(!evs.iter().any(is_heavy_done), "{evs:?}");
    assert_eq!(lab.sm.metrics().heavy_sweeps, heavy);
    assert_eq!(lab.wire.represses.len(), 14);
    assert!(lab
        .wire
        .represses
        .iter()
        .all(|(d, s)| *d == Some(sw_lid) && s.method == Method::TRAP_REPRESS));
    assert_eq!(lab.sm.port_error_count(sw_lid, 3, 129), 12);
    assert_eq!(lab.sm.port_error_count(sw_lid, 3, 130), 1);
    assert_eq!(lab.sm.port_error_count(sw_lid, 4, 131), 1);
    assert_eq!(lab.sm.port_error_count(sw_lid, 4, 129), 0);
    assert_eq!(lab.sm.metrics().port_error_traps, 14);
    // Outside the window the count starts again.
    lab.now += PORT_ERROR_WINDOW + MS;
    let t = trap(
        sw_lid,
        ProducerType::SWITCH,
        &TrapDetails::LinkIntegrityThreshold {
            lid: sw_lid,
            port_num: 3,
        },
        0x1300,
    );
    lab.sm.handle_incoming(lab.now, &t);
    assert_eq!(lab.sm.port_error_count(sw_lid, 3, 129), 1);
}

#[test]
fn trap_144_is_sm_refreshes_the_known_sms_and_the_light_sweep_sees_one_stop() {
    let mut lab = settled(gen::fat_tree_2level(4).unwrap());
    let (node, lid, guid) = other_ca(&lab);
    // Another SM starts on that CA: IsSM goes up and its SMA sends trap 144.
    let standby = lab.sim.attach(node, 1).unwrap();
    lab.sim.set_is_sm(standby, true).unwrap();
    let pi = lab.sim.port_info(node, 1).unwrap();
    let t144 = TrapDetails::CapabilityMaskChanged(ibsm_mad::attr::Trap144 {
        lid,
        other_local_changes: false,
        capability_mask: pi.capability_mask,
        change_flags: 0,
        capability_mask2: 0,
    });
    lab.sm
        .handle_incoming(lab.now, &trap(lid, ProducerType::CA, &t144, 0x144));
    let (evs, report) = lab.heavy();
    assert!(evs
        .iter()
        .any(|e| matches!(e, SubnetEvent::Trap144 { issuer_lid, .. } if *issuer_lid == lid)));
    assert_eq!(lab.wire.represses.len(), 1);
    assert_eq!(
        report.sm_ports.iter().map(|p| p.guid).collect::<Vec<_>>(),
        vec![guid],
        "the new SM port is not in the sweep's SM list"
    );
    // The standby dies without a trap: the light sweep reads its IsSM gone.
    lab.sim.set_is_sm(standby, false).unwrap();
    let evs = lab.run_until(is_light_done);
    match evs.last() {
        Some(SubnetEvent::SweepDone { report, .. }) => assert!(report.changed, "{report:?}"),
        other => panic!("{other:?}"),
    }
    let (_, report) = lab.heavy();
    assert!(report.sm_ports.is_empty(), "{:?}", report.sm_ports);
}

#[test]
fn light_sweep_sees_another_sm_rewrite_our_port() {
    let mut lab = settled(gen::fat_tree_2level(4).unwrap());
    let port = lab
        .sm
        .last_discovery()
        .and_then(|r| r.local)
        .map(|(_, p)| p)
        .unwrap();
    let mut pi = lab
        .get(&[], AttributeId::PORT_INFO, u32::from(port))
        .unwrap()
        .attribute::<PortInfo>()
        .unwrap();
    let ours = pi.master_sm_lid;
    assert_ne!(ours, 0);
    // A rival SM points our port at itself; nothing on a switch changes.
    pi.master_sm_lid = 0x0BAD;
    pi.port_state = PortState::NoChange;
    pi.port_physical_state = ibsm_mad::PhysPortState::NoChange;
    lab.set(&[], AttributeId::PORT_INFO, u32::from(port), pi.encode())
        .unwrap();
    let evs = lab.run_until(is_light_done);
    match evs.last() {
        Some(SubnetEvent::SweepDone { report, .. }) => assert!(report.changed, "{report:?}"),
        other => panic!("{other:?}"),
    }
    lab.heavy();
    let pi = lab
        .get(&[], AttributeId::PORT_INFO, u32::from(port))
        .unwrap()
        .attribute::<PortInfo>()
        .unwrap();
    assert_eq!(pi.master_sm_lid, ours, "MasterSMLID not restored");
}

/// SwitchInfo.PortStateChange after bring-up, and the light sweeps that read it.
///
/// Links that trained before the SM came (and a bounced cable) leave
/// PortStateChange raised; the first sweep's SwitchInfo Set clears it (write 1)
/// before programming, and activation (Init -> Armed -> Active by SubnSet) does not
/// raise it again (IBA 14.2.5.4: "changes in port state resulting from SubnSet do
/// not change this bit"; ibsim behaves the same). So a light sweep right after
/// subnet up, on an unchanged fabric, sees nothing and starts no heavy sweep:
/// after a fresh bring-up and after a new master takes over an Active fabric.
#[test]
fn light_sweep_right_after_subnet_up_starts_no_heavy_sweep() {
    let topo = gen::fat_tree_3level(4).unwrap();
    let switches: Vec<NodeIdx> = topo
        .iter()
        .filter(|(_, n)| n.is_switch())
        .map(|(i, _)| i)
        .collect();
    let mut lab = Lab::new(topo.clone(), cfg());
    let edge = topo.find_by_name("edge-3-0").unwrap();
    lab.sim.link_down(edge, 3).unwrap();
    lab.sim.link_up(edge, 3).unwrap();
    let raised = switches
        .iter()
        .filter(|s| lab.sim.port_state_change(**s) == Some(true))
        .count();
    assert!(raised > 0, "the bounced cable raised PortStateChange");
    for round in ["bring-up", "takeover"] {
        if round == "takeover" {
            // A new master on the same port: every link is Active already.
            lab.sm.stop();
            lab.sm = SubnetManager::new(cfg()).unwrap();
        }
        let (_, up) = lab.bring_up();
        if round == "bring-up" {
            assert!(up.ports_activated > 0, "{up:?}");
        } else {
            assert_eq!(up.ports_activated, 0, "{up:?}");
        }
        for s in &switches {
            assert_eq!(
                lab.sim.port_state_change(*s),
                Some(false),
                "{round}: PortStateChange left set on {:?}",
                topo.node(*s).map(|n| &n.description)
            );
        }
        let heavy = lab.sm.metrics().heavy_sweeps;
        lab.sm.start_light_sweep(lab.now);
        let evs = lab.run_until(is_light_done);
        match evs.last() {
            Some(SubnetEvent::SweepDone { report, .. }) => {
                assert!(!report.changed, "{round}: {report:?}")
            }
            other => panic!("{other:?}"),
        }
        // The periodic one after it too, and no heavy sweep in between.
        let evs = lab.run_until(is_light_done);
        assert!(!evs.iter().any(is_heavy_done), "{round}: {evs:?}");
        assert_eq!(lab.sm.metrics().heavy_sweeps, heavy, "{round}");
    }
}

/// The P_Keys of a CA port and of the switch port facing it.
fn pkeys_at_ca_and_switch(lab: &mut Lab, guid: u64) -> (Vec<u16>, Vec<u16>) {
    let pmap = paths(&lab.topo, lab.local, &HashSet::new());
    let (n, p) = lab.topo.find_by_port_guid(guid).unwrap();
    let path = port_route(&lab.topo, &pmap, n, p).unwrap();
    let ca = read_pkeys(lab, &path, 0);
    let (spath, sp) = switch_port_of(lab, guid);
    (ca, read_pkeys(lab, &spath, sp))
}

/// Every CA port and the switch port facing it hold exactly `want(guid)`.
fn assert_pkeys(lab: &mut Lab, cas: &[u64], want: impl Fn(u64) -> Vec<u16>) {
    for &g in cas {
        let (ca, sw) = pkeys_at_ca_and_switch(lab, g);
        assert_eq!(ca, want(g), "P_Keys of CA port {g:#x}");
        assert_eq!(sw, want(g), "P_Keys of the switch port facing {g:#x}");
    }
}

/// The P_Key table `parts` gives port `guid` (0xFFFF first, then in order).
fn expected_keys(parts: &[Partition], guid: u64) -> Vec<u16> {
    std::iter::once(0xFFFF)
        .chain(parts.iter().filter_map(|p| {
            let m = p.members.iter().find(|m| m.port_guid == guid)?;
            Some(
                p.p_key
                    | if m.membership == Membership::Full {
                        0x8000
                    } else {
                        0
                    },
            )
        }))
        .collect()
}

fn gpu_partition(cas: &[u64]) -> Partition {
    Partition {
        groups: Vec::new(),
        index0: false,
        name: "gpu".into(),
        p_key: 0x0030,
        members: vec![
            PartitionMember {
                port_guid: cas[3],
                membership: Membership::Full,
            },
            PartitionMember {
                port_guid: cas[1],
                membership: Membership::Limited,
            },
        ],
        ipoib: None,
    }
}

#[test]
fn partitions_set_at_run_time_are_programmed_and_removed() {
    let topo = gen::fat_tree_2level(4).unwrap();
    let cas = ca_guids(&topo);
    let mut c = cfg();
    c.partitions = two_partitions(&cas);
    let mut lab = Lab::new(topo, c);
    let (_, report) = lab.bring_up();
    assert_eq!(report.failures, 0, "{report:?}");
    let start = two_partitions(&cas);
    assert_pkeys(&mut lab, &cas, |g| expected_keys(&start, g));

    // Add one: its members get it at the CA port and at the enforcing switch port.
    let mut added = start.clone();
    added.push(gpu_partition(&cas));
    lab.sm.set_partitions(lab.now, added.clone()).unwrap();
    assert_eq!(lab.sm.partitions(), added.as_slice());
    let (evs, report) = lab.heavy();
    assert_eq!(report.failures, 0, "{report:?}");
    assert!(
        !evs.iter()
            .any(|e| matches!(e, SubnetEvent::SubnetUp { .. })),
        "a partition change is a sweep of the same mastership"
    );
    assert_pkeys(&mut lab, &cas, |g| expected_keys(&added, g));
    assert_eq!(
        pkeys_at_ca_and_switch(&mut lab, cas[3]).0,
        vec![0xFFFF, 0x8030]
    );
    assert_eq!(
        pkeys_at_ca_and_switch(&mut lab, cas[1]).0,
        vec![0xFFFF, 0x8010, 0x0030]
    );

    // Remove "storage": cas[1] and cas[2] lose 0x10 everywhere, gpu stays.
    let removed: Vec<Partition> = added
        .iter()
        .filter(|p| p.name != "storage")
        .cloned()
        .collect();
    lab.sm.set_partitions(lab.now, removed.clone()).unwrap();
    let before = lab.wire.pkey_sets;
    let (_, report) = lab.heavy();
    assert_eq!(report.failures, 0, "{report:?}");
    assert!(lab.wire.pkey_sets > before);
    assert_pkeys(&mut lab, &cas, |g| expected_keys(&removed, g));
    assert_eq!(
        pkeys_at_ca_and_switch(&mut lab, cas[1]),
        (vec![0xFFFF, 0x0030], vec![0xFFFF, 0x0030])
    );

    // The same set again: nothing to do, no sweep.
    lab.sm.set_partitions(lab.now, removed.clone()).unwrap();
    assert!(!lab.sm.is_sweeping());

    // Invalid sets are refused and change nothing (no sweep, tables unchanged).
    let mut dup = removed.clone();
    dup.push(Partition {
        name: "again".into(),
        ..gpu_partition(&cas)
    });
    assert!(matches!(
        lab.sm.set_partitions(lab.now, dup),
        Err(ConfigError::Duplicate { what: "P_Key", .. })
    ));
    let mut bad_key = removed.clone();
    bad_key.push(Partition {
        groups: Vec::new(),
        index0: false,
        name: "default".into(),
        p_key: 0x8000,
        members: vec![],
        ipoib: None,
    });
    assert!(matches!(
        lab.sm.set_partitions(lab.now, bad_key),
        Err(ConfigError::PKey { pkey: 0x8000, .. })
    ));
    let crowded: Vec<Partition> = (1..=32u16)
        .map(|k| Partition {
            groups: Vec::new(),
            index0: false,
            name: format!("p{k}"),
            p_key: 0x100 + k,
            members: vec![PartitionMember {
                port_guid: cas[0],
                membership: Membership::Full,
            }],
            ipoib: None,
        })
        .collect();
    assert!(matches!(
        lab.sm.set_partitions(lab.now, crowded),
        Err(ConfigError::TooManyPartitions { count: 32, .. })
    ));
    assert_eq!(lab.sm.partitions(), removed.as_slice());
    assert!(!lab.sm.is_sweeping());
    let sets = lab.wire.pkey_sets;
    lab.sm.start_heavy_sweep(lab.now);
    let (_, report) = lab.heavy();
    assert_eq!(report.failures, 0, "{report:?}");
    assert_eq!(lab.wire.pkey_sets, sets, "nothing changed: no P_Key Set");
    assert_pkeys(&mut lab, &cas, |g| expected_keys(&removed, g));
}

#[test]
fn partitions_set_during_distribution_take_effect_on_the_next_sweep() {
    let topo = gen::fat_tree_2level(4).unwrap();
    let cas = ca_guids(&topo);
    let mut c = cfg();
    c.partitions = two_partitions(&cas);
    let mut lab = Lab::new(topo, c);
    lab.bring_up();
    let mut added = two_partitions(&cas);
    added.push(gpu_partition(&cas));
    lab.sm.set_partitions(lab.now, added).unwrap();
    // Stop as soon as the sweep has sent its first P_Key Set (answers in flight).
    let before = lab.wire.pkey_sets;
    lab.run_until_or(|_| false, |w, _| w.pkey_sets > before);
    assert!(matches!(lab.sm.stage, Stage::Programming(_)));
    // Change again under the distributing sweep: storage goes, gpu stays.
    let last: Vec<Partition> = vec![gpu_partition(&cas)];
    lab.sm.set_partitions(lab.now, last.clone()).unwrap();
    assert_eq!(lab.sm.partitions(), last.as_slice());
    lab.heavy();
    // The follow-up sweep programs the last set everywhere.
    let (_, report) = lab.heavy();
    assert_eq!(report.failures, 0, "{report:?}");
    assert!(!lab.sm.is_sweeping());
    assert_pkeys(&mut lab, &cas, |g| expected_keys(&last, g));
}

#[test]
fn partitions_set_while_not_master_apply_from_the_first_sweep() {
    let topo = gen::fat_tree_2level(4).unwrap();
    let cas = ca_guids(&topo);
    let mut lab = Lab::new(topo, cfg());
    let parts = two_partitions(&cas);
    lab.sm.set_partitions(lab.now, parts.clone()).unwrap();
    assert!(!lab.sm.is_sweeping());
    assert_eq!(lab.sm.poll_transmit(), None);
    lab.bring_up();
    assert_pkeys(&mut lab, &cas, |g| expected_keys(&parts, g));
}

#[test]
fn offloaded_routing_waits_for_its_result_and_programs_the_same_tables() {
    // The daemon computes routing on another thread (its own keeps answering SMInfo
    // polls): the sweep must send no LFT before the result, ignore a result that is
    // not for it, and program exactly what the inline computation programs.
    let topo = gen::fat_tree_3level(4).expect("k=4");
    let mut inline = Lab::new(topo.clone(), cfg());
    inline.bring_up();
    assert_eq!(inline.wire.routing_jobs_run, 0, "inline by default");

    let mut off = Lab::new(
        topo.clone(),
        SubnetConfig {
            offload_routing: true,
            ..cfg()
        },
    );
    off.wire.hold_jobs = true;
    off.sm.become_master(off.now);
    off.run_until_or(|_| false, |w, _| !w.held_jobs.is_empty());
    assert_eq!(off.wire.held_jobs.len(), 1);
    assert_eq!(off.wire.lft_sets, 0, "no LFT before the routing result");
    assert!(off.sm.is_sweeping(), "the sweep waits for its routing");
    let job = off.wire.held_jobs.remove(0);
    let twice = job.clone().run();
    off.sm.handle_routing_done(off.now, job.run());
    // A second result for the same job finds no sweep waiting: ignored.
    off.sm.handle_routing_done(off.now, twice);
    off.wire.hold_jobs = false;
    off.run_until(|e| matches!(e, SubnetEvent::SweepDone { .. }));
    assert!(off.wire.lft_sets > 0);

    let max_lid = u16::try_from(topo.len() * 2).unwrap_or(u16::MAX);
    let mut compared = 0;
    for (idx, node) in topo.iter().filter(|(_, n)| n.is_switch()) {
        for lid in 1..=max_lid {
            assert_eq!(
                off.sim.lft_entry(idx, lid),
                inline.sim.lft_entry(idx, lid),
                "{} LID {lid}",
                node.description
            );
            compared += usize::from(inline.sim.lft_entry(idx, lid).is_some());
        }
    }
    assert!(compared > 0, "no LFT entry compared");
}

// ----- M_Key ---------------------------------------------------------------------------
//
// The embedded fabric checks M_Keys as IBA 14.2.4 says (ibsim does not), so these
// show the protection working: every port keyed, a rogue Set refused, a successor
// master reaching the ports with the replicated key, and a key change.

const M_KEY: u64 = 0x5EC0_0000_C0FF_EE01;

fn keyed_cfg(key: u64, protect_bits: u8, lease_period: u16) -> SubnetConfig {
    SubnetConfig {
        m_key: MKeyConfig {
            key,
            protect_bits,
            lease_period,
        },
        ..cfg()
    }
}

impl Lab {
    /// SubnGet by directed route through the reader client, carrying `m_key`.
    fn get_keyed(&mut self, path: &[u8], attr: AttributeId, amod: u32, m_key: u64) -> Option<Smp> {
        self.tid += 1;
        let mut smp = Smp::get_dr(path, attr, amod, 0xEE00_0000_0000 | self.tid);
        smp.m_key = m_key;
        self.exchange(smp)
    }

    /// SubnSet by directed route through the reader client, carrying `m_key`.
    fn set_keyed(&mut self, path: &[u8], amod: u32, pi: &PortInfo, m_key: u64) -> Option<Smp> {
        self.tid += 1;
        let mut smp = Smp::set_dr_attr(path, amod, 0xEE00_0000_0000 | self.tid, pi);
        smp.m_key = m_key;
        self.exchange(smp)
    }

    /// The management PortInfo (CA port 1, switch port 0) of every node, read from
    /// the reader's port with `m_key`; panics on a node that does not answer.
    fn management_port_infos(&mut self, m_key: u64) -> Vec<(NodeIdx, PortInfo)> {
        let pmap = paths(&self.topo, self.local, &HashSet::new());
        let nodes: Vec<(NodeIdx, bool)> =
            self.topo.iter().map(|(i, n)| (i, n.is_switch())).collect();
        let mut out = Vec::new();
        for (idx, is_switch) in nodes {
            let path = if idx == self.local {
                Vec::new()
            } else if is_switch {
                pmap[&idx].clone()
            } else {
                port_route(&self.topo, &pmap, idx, 1).expect("CA is cabled")
            };
            let pi = self
                .get_keyed(&path, AttributeId::PORT_INFO, 0, m_key)
                .unwrap_or_else(|| panic!("node {idx:?} does not answer with the key"))
                .attribute::<PortInfo>()
                .unwrap();
            out.push((idx, pi));
        }
        out
    }

    /// Moves the SM role to another CA, as after a failover: the old master stops,
    /// a new `SubnetManager` with `cfg` (told the replicated `fabric_key`) takes over.
    fn fail_over(&mut self, cfg: SubnetConfig, fabric_key: u64) {
        self.sm.stop();
        self.sim.set_is_sm(self.sm_client, false).unwrap();
        let (idx, _, _) = other_ca(self);
        self.sm_client = self.sim.attach(idx, 1).unwrap();
        self.sim.set_is_sm(self.sm_client, true).unwrap();
        self.sm = SubnetManager::new(cfg).expect("valid config");
        self.sm.set_fabric_m_key(fabric_key);
        self.bring_up();
    }
}

fn assert_keyed(lab: &mut Lab, key: u64, level: u8, lease: u16) {
    let pis = lab.management_port_infos(key);
    assert_eq!(pis.len(), lab.topo.len());
    for (idx, pi) in pis {
        assert_eq!(
            (pi.m_key, pi.m_key_protect_bits, pi.m_key_lease_period),
            (key, level, lease),
            "node {idx:?}"
        );
        if !lab.topo.node(idx).unwrap().is_switch() {
            assert_eq!(pi.port_state, PortState::Active, "node {idx:?}");
        }
    }
}

#[test]
fn m_key_is_programmed_on_every_port_and_a_set_needs_it() {
    let mut lab = Lab::new(gen::fat_tree_2level(4).unwrap(), keyed_cfg(M_KEY, 1, 60));
    lab.bring_up();
    assert_keyed(&mut lab, M_KEY, 1, 60);

    // Level 1: a Get without the key is answered but hides the key.
    let (other, _, _) = other_ca(&lab);
    let pmap = paths(&lab.topo, lab.local, &HashSet::new());
    let path = port_route(&lab.topo, &pmap, other, 1).unwrap();
    let anon = lab
        .get_keyed(&path, AttributeId::PORT_INFO, 0, 0)
        .expect("level 1 answers Gets")
        .attribute::<PortInfo>()
        .unwrap();
    assert_eq!((anon.m_key, anon.m_key_protect_bits), (0, 1));

    // A rogue SM (no key, or a wrong one) cannot repoint the port: no answer, no change.
    let rogue = PortInfo {
        master_sm_lid: 0x0BAD,
        port_state: PortState::NoChange,
        port_physical_state: ibsm_mad::PhysPortState::NoChange,
        m_key: M_KEY,
        ..anon
    };
    assert!(lab.set_keyed(&path, 0, &rogue, 0).is_none());
    assert!(lab.set_keyed(&path, 0, &rogue, M_KEY ^ 1).is_none());
    let keyed = lab
        .get_keyed(&path, AttributeId::PORT_INFO, 0, M_KEY)
        .unwrap()
        .attribute::<PortInfo>()
        .unwrap();
    assert_ne!(keyed.master_sm_lid, 0x0BAD);
    assert_eq!(keyed.m_key_violations, 2);
    assert!(lab.sim.stats().dropped_m_key >= 2);

    // With the key the same Set goes through.
    let r = lab
        .set_keyed(&path, 0, &rogue, M_KEY)
        .expect("the key holder may set");
    assert_eq!(r.attribute::<PortInfo>().unwrap().master_sm_lid, 0x0BAD);
}

#[test]
fn every_smp_of_the_master_carries_the_key_so_level_2_fabrics_are_swept() {
    let mut lab = Lab::new(gen::fat_tree_2level(4).unwrap(), keyed_cfg(M_KEY, 2, 0));
    lab.bring_up();
    assert_keyed(&mut lab, M_KEY, 2, 0);
    // Level 2: Gets without the key go unanswered now...
    let pmap = paths(&lab.topo, lab.local, &HashSet::new());
    let (sw, _) = pmap
        .iter()
        .find(|(i, _)| lab.topo.node(**i).unwrap().is_switch())
        .map(|(i, p)| (*i, p.clone()))
        .unwrap();
    let path = pmap[&sw].clone();
    assert!(lab.get_keyed(&path, AttributeId::NODE_INFO, 0, 0).is_none());
    let dropped = lab.sim.stats().dropped_m_key;
    // ...yet the master's own sweeps (heavy: discovery included) see everything.
    lab.sm.start_heavy_sweep(lab.now);
    let (_, report) = lab.heavy();
    assert_eq!(report.nodes, lab.topo.len(), "{report:?}");
    assert_eq!(
        lab.sim.stats().dropped_m_key,
        dropped,
        "no SMP of ours refused"
    );
    let evs = lab.run_until(is_light_done);
    match evs.last() {
        Some(SubnetEvent::SweepDone { report, .. }) => assert!(!report.changed, "{report:?}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn sminfo_reaches_the_sm_whatever_the_m_key() {
    // SMInfo is the SM's, not the SMA's: M_Key protection of the port must not stop a
    // standby's polls (the election applies its own M_Key rule to the SM_Key).
    let mut lab = Lab::new(gen::fat_tree_2level(4).unwrap(), keyed_cfg(M_KEY, 2, 0));
    lab.bring_up();
    let (other, _, _) = other_ca(&lab);
    let standby = lab.sim.attach(other, 1).unwrap();
    let pmap = paths(&lab.topo, other, &HashSet::new());
    let to_master = port_route(&lab.topo, &pmap, lab.local, 1).unwrap();
    let poll = Smp::get_dr(&to_master, AttributeId::SM_INFO, 0, 0x77);
    lab.sim.send(lab.now, standby, &poll.encode()).unwrap();
    lab.now += Duration::from_millis(1);
    let mut got = None;
    while let Some((c, mad)) = lab.sim.poll_delivery(lab.now) {
        if c == lab.sm_client {
            got = Smp::decode(&mad).ok();
        }
    }
    let got = got.expect("the SMInfo poll reached the master's SM client");
    assert_eq!((got.attr_id, got.m_key), (AttributeId::SM_INFO, 0));
}

#[test]
fn a_successor_master_keeps_the_key_and_reaches_the_ports() {
    let mut lab = Lab::new(gen::fat_tree_2level(4).unwrap(), keyed_cfg(M_KEY, 2, 0));
    lab.bring_up();
    lab.fail_over(keyed_cfg(M_KEY, 2, 0), M_KEY);
    assert_keyed(&mut lab, M_KEY, 2, 0);
    assert_eq!(lab.sim.stats().dropped_m_key, 0, "no SMP without the key");
    // A port changed behind its back is put right by the successor: it can Set.
    let evs = lab.run_until(is_light_done);
    assert!(matches!(
        evs.last(),
        Some(SubnetEvent::SweepDone { report, .. }) if !report.changed
    ));
}

#[test]
fn a_successor_with_a_new_key_rekeys_the_fabric_with_the_replicated_old_one() {
    const NEW_KEY: u64 = 0x0000_0000_0000_BEEF;
    let mut lab = Lab::new(gen::fat_tree_2level(4).unwrap(), keyed_cfg(M_KEY, 1, 0));
    lab.bring_up();
    // The operator configured a new key; the replica says the fabric holds the old.
    lab.fail_over(keyed_cfg(NEW_KEY, 2, 30), M_KEY);
    assert_keyed(&mut lab, NEW_KEY, 2, 30);
    // The old key opens nothing any more.
    let (other, _, _) = other_ca(&lab);
    let pmap = paths(&lab.topo, lab.local, &HashSet::new());
    let path = port_route(&lab.topo, &pmap, other, 1).unwrap();
    assert!(lab
        .get_keyed(&path, AttributeId::PORT_INFO, 0, M_KEY)
        .is_none());
    // And the next sweeps run on the new key alone (nothing refused any more).
    let dropped = lab.sim.stats().dropped_m_key;
    lab.sm.start_heavy_sweep(lab.now);
    lab.heavy();
    assert_eq!(lab.sim.stats().dropped_m_key, dropped);
}

#[test]
fn m_key_protection_level_is_validated() {
    let err = SubnetManager::new(keyed_cfg(1, 4, 0)).unwrap_err();
    assert!(err.to_string().contains("m_key_protection_level"), "{err}");
}

#[test]
fn without_a_key_the_m_key_fields_are_left_as_the_ports_hold_them() {
    // ibsim, and real HCAs, report their own M_KeyLeasePeriod: an SM with no key
    // must neither overwrite it nor take it for a difference to reprogram.
    let mut lab = Lab::new(gen::fat_tree_2level(4).unwrap(), cfg());
    let other = lab
        .topo
        .iter()
        .find(|(i, n)| !n.is_switch() && *i != lab.local)
        .map(|(i, _)| i)
        .unwrap();
    let pmap = paths(&lab.topo, lab.local, &HashSet::new());
    let path = port_route(&lab.topo, &pmap, other, 1).unwrap();
    let pi = lab
        .get(&path, AttributeId::PORT_INFO, 0)
        .unwrap()
        .attribute::<PortInfo>()
        .unwrap();
    let preset = PortInfo {
        m_key_lease_period: 4089,
        port_state: PortState::NoChange,
        port_physical_state: ibsm_mad::PhysPortState::NoChange,
        ..pi
    };
    lab.set_keyed(&path, 0, &preset, 0).expect("fresh port");
    lab.bring_up();
    let after = lab
        .get(&path, AttributeId::PORT_INFO, 0)
        .unwrap()
        .attribute::<PortInfo>()
        .unwrap();
    assert_eq!(after.m_key_lease_period, 4089);
    assert_eq!(after.port_state, PortState::Active);
}

#[test]
fn a_lid_routed_trap_is_repressed_to_the_lid_it_came_from() {
    let mut lab = settled(gen::fat_tree_2level(4).unwrap());
    let (_, lid, _) = other_ca(&lab);
    // The notice claims another issuer (a port that lost its LID, a forgery).
    let t = trap(
        0x0BAD,
        ProducerType::CA,
        &TrapDetails::LinkStateChange { lid: 0x0BAD },
        0x77,
    );
    lab.sm.handle_incoming_from(lab.now, &t, lid);
    // Without the SLID (0 or the permissive LID) the IssuerLID is all there is.
    lab.sm.handle_incoming_from(lab.now, &t, 0xFFFF);
    lab.sm.handle_incoming(lab.now, &t);
    let _ = lab.heavy();
    let dlids: Vec<Option<u16>> = lab.wire.represses.iter().map(|(d, _)| *d).collect();
    assert_eq!(dlids, vec![Some(lid), Some(0x0BAD), Some(0x0BAD)]);
    assert!(lab.wire.represses.iter().all(|(_, s)| s.tid == 0x77));
}

#[test]
fn a_trap_storm_is_rate_limited_and_its_sweeps_held_down() {
    let hold = Duration::from_millis(300);
    let mut lab = Lab::new(
        gen::fat_tree_2level(4).unwrap(),
        SubnetConfig {
            trap_rate: 10,
            trap_burst: 5,
            trap_sweep_hold_down: hold,
            ..cfg()
        },
    );
    lab.bring_up();
    let heavy_before = lab.sm.metrics().heavy_sweeps;
    let (_, lid_a, _) = other_ca(&lab);
    let lid_b = 1; // a switch LID: another issuer
    let start = lab.now;
    let mut sent = 0u64;
    let mut events = Vec::new();
    let storm = Duration::from_secs(3);
    let mut last_trap = start;
    // Two issuers, a trap 128 each every 2 ms for 3 s (a flapping link).
    let mut t = start;
    while t < start + storm {
        for (i, slid) in [lid_a, lid_b].into_iter().enumerate() {
            lab.link_trap(slid, 0x1000 + sent + i as u64);
            sent += 1;
        }
        last_trap = lab.now;
        t += 2 * MS;
        events.extend(lab.run_to(t));
    }
    // The storm is over: the deferred sweep still runs.
    events.extend(lab.run_to(lab.now + Duration::from_secs(2)));
    let heavies: Vec<(Duration, Duration)> = events
        .iter()
        .filter_map(|(at, e)| match e {
            SubnetEvent::SweepDone {
                kind: SweepKind::Heavy,
                phases,
                ..
            } => Some((at.saturating_sub(phases.total()), *at)),
            _ => None,
        })
        .collect();
    let m = lab.sm.metrics();
    assert_eq!(m.traps, sent, "every trap counted");
    assert_eq!(
        lab.wire.represses.len() as u64,
        sent,
        "every trap repressed"
    );
    // Per issuer at most burst + rate x time acted on.
    let admitted = sent - m.traps_rate_limited;
    assert!(admitted <= 2 * (5 + 10 * 3 + 1), "{admitted} admitted");
    assert!(admitted >= 2 * 5, "{admitted} admitted");
    assert!(m.trap_logs_suppressed > 0);
    assert!(m.trap_sweeps_deferred > 0);
    // Sweeps: never back to back, at most one per (hold-down + sweep).
    assert!(heavies.len() >= 2, "{heavies:?}");
    for w in heavies.windows(2) {
        let (_, end) = w[0];
        let (next_start, _) = w[1];
        assert!(
            next_start >= end + hold,
            "heavy sweep started {:?} after the previous one ended",
            next_start.saturating_sub(end)
        );
    }
    assert!(heavies.len() as u128 <= storm.as_millis() / hold.as_millis() + 2);
    assert_eq!(m.heavy_sweeps - heavy_before, heavies.len() as u64);
    // The last trap was not lost: a sweep started after it.
    assert!(
        heavies.iter().any(|(s, _)| *s >= last_trap),
        "no sweep after the last trap at {last_trap:?}: {heavies:?}"
    );
}

#[test]
fn an_operator_sweep_is_not_held_down() {
    let hold = Duration::from_secs(5);
    let mut lab = Lab::new(
        gen::fat_tree_2level(4).unwrap(),
        SubnetConfig {
            trap_sweep_hold_down: hold,
            ..cfg()
        },
    );
    lab.bring_up();
    lab.link_trap(1, 9);
    let evs = lab.run_to(lab.now + Duration::from_millis(100));
    assert!(
        !evs.iter().any(|(_, e)| is_heavy_done(e)),
        "trap sweep not held"
    );
    assert!(!lab.sm.is_sweeping());
    lab.sm.start_heavy_sweep(lab.now);
    assert!(
        lab.sm.is_sweeping(),
        "the operator's sweep waits for nothing"
    );
    let _ = lab.heavy();
}

/// `fat_tree_2level(4)` plus a twin of its second CA (same NodeGUID and port
/// GUIDs) on the port of the third CA, whose cable it takes. Returns the
/// topology, the original and the twin.
fn fabric_with_twin() -> (Topology, NodeIdx, NodeIdx) {
    let mut t = gen::fat_tree_2level(4).unwrap();
    let cas: Vec<NodeIdx> = t
        .iter()
        .filter(|(_, n)| !n.is_switch())
        .map(|(i, _)| i)
        .collect();
    let (orig, displaced) = (cas[1], cas[2]);
    let (sw, sp) = t.disconnect(displaced, 1).unwrap().unwrap();
    let mut twin = t.node(orig).unwrap().clone();
    twin.name = "twin".into();
    twin.description = "twin".into();
    let d = t.add_duplicate_node(twin).unwrap();
    t.connect(d, 1, sw, sp).unwrap();
    (t, orig, d)
}

#[test]
fn a_duplicate_guid_newcomer_gets_no_lid_and_the_holder_keeps_its_own() {
    let (topo, orig, twin) = fabric_with_twin();
    let mut lab = Lab::new(topo, cfg());
    // The twin is plugged in only after the subnet is up.
    lab.sim.link_down(twin, 1).unwrap();
    let (_, report) = lab.bring_up();
    assert!(report.duplicates.is_empty(), "{:?}", report.duplicates);
    let held = lab.sim.port_lid(orig, 1).unwrap();
    assert_ne!(held, 0);
    lab.sim.link_up(twin, 1).unwrap();
    lab.sm.start_heavy_sweep(lab.now);
    let (evs, report) = lab.heavy();
    let guid = lab.topo.node(orig).unwrap().node_guid;
    let alarm = evs.iter().find_map(|e| match e {
        SubnetEvent::DuplicateGuid(d) => Some(d.clone()),
        _ => None,
    });
    let alarm = alarm.expect("duplicate reported");
    assert_eq!(alarm.guid, guid);
    assert_eq!(report.duplicates.len(), 1);
    assert_eq!(report.lids_withheld, 1);
    assert_eq!(lab.sm.metrics().duplicate_guids, 1);
    // Read back from the simulated SMAs: the holder kept its LID, the twin has none.
    assert_eq!(lab.sim.port_lid(orig, 1).unwrap(), held);
    assert_eq!(lab.sim.port_lid(twin, 1).unwrap(), 0);
    // The twin unplugged again: the alarm clears with the next sweep.
    lab.sim.link_down(twin, 1).unwrap();
    lab.sm.start_heavy_sweep(lab.now);
    let (_, report) = lab.heavy();
    assert!(report.duplicates.is_empty());
    assert_eq!(lab.sm.metrics().duplicate_guids, 0);
    assert_eq!(lab.sim.port_lid(orig, 1).unwrap(), held);
}

#[test]
fn duplicates_that_never_held_a_lid_get_none() {
    let (topo, orig, twin) = fabric_with_twin();
    let mut lab = Lab::new(topo, cfg());
    let (_, report) = lab.bring_up();
    assert_eq!(report.duplicates.len(), 1, "{:?}", report.duplicates);
    assert_eq!(report.lids_withheld, 2);
    assert_eq!(lab.sim.port_lid(orig, 1).unwrap(), 0);
    assert_eq!(lab.sim.port_lid(twin, 1).unwrap(), 0);
}

#[test]
fn the_topology_cap_is_reported() {
    let mut c = cfg();
    c.discovery.max_nodes = 3;
    let mut lab = Lab::new(gen::fat_tree_2level(4).unwrap(), c);
    lab.sm.become_master(lab.now);
    let evs = lab.run_until(is_heavy_done);
    let cap = evs.iter().find_map(|e| match e {
        SubnetEvent::TopologyCapped(c) => Some(*c),
        _ => None,
    });
    let cap = cap.expect("cap reported");
    assert_eq!(cap.max, 3);
    assert_eq!(lab.sm.last_discovery().unwrap().topology.len(), 3);
    assert_eq!(lab.sm.metrics().topology_capped, 1);
}

#[test]
fn a_port_with_gid_prefix_zero_gets_the_subnet_prefix() {
    // A port fresh from reset may hold GIDPrefix 0; its GID would then name no port
    // of this subnet in an SA query (PathRecord by SGID, rdma_cm's route lookups).
    let mut lab = Lab::new(gen::fat_tree_2level(4).unwrap(), cfg());
    let other = lab
        .topo
        .iter()
        .find(|(i, n)| !n.is_switch() && *i != lab.local)
        .map(|(i, _)| i)
        .unwrap();
    let pmap = paths(&lab.topo, lab.local, &HashSet::new());
    let path = port_route(&lab.topo, &pmap, other, 1).unwrap();
    let pi = lab
        .get(&path, AttributeId::PORT_INFO, 0)
        .unwrap()
        .attribute::<PortInfo>()
        .unwrap();
    let zero = PortInfo {
        gid_prefix: 0,
        port_state: PortState::NoChange,
        port_physical_state: ibsm_mad::PhysPortState::NoChange,
        ..pi
    };
    lab.set_keyed(&path, 0, &zero, 0).expect("fresh port");
    let before = lab
        .get(&path, AttributeId::PORT_INFO, 0)
        .unwrap()
        .attribute::<PortInfo>()
        .unwrap();
    assert_eq!(before.gid_prefix, 0, "the simulator took the preset");
    lab.bring_up();
    let after = lab
        .get(&path, AttributeId::PORT_INFO, 0)
        .unwrap()
        .attribute::<PortInfo>()
        .unwrap();
    assert_eq!(after.gid_prefix, crate::sa::DEFAULT_SUBNET_PREFIX);
}

mod lft_stamp;
mod port_digest;
mod repair;
mod sa_snapshot_job;
mod verify;

/// The node and port a directed-route Set is written to: its path walked over
/// the generated topology from the SM's node, and the port its modifier names
/// (a CA's own port when the modifier is 0).
fn target_of(topo: &Topology, local: NodeIdx, smp: &Smp) -> (NodeIdx, u8) {
    let SmpRoute::Directed(dr) = &smp.route else {
        panic!("programming SMPs go by directed route");
    };
    let mut node = local;
    let mut via = 1;
    for &port in &dr.initial_path[1..=usize::from(dr.hop_cnt)] {
        let (next, in_port) = topo.neighbor(node, port).expect("path over a cable");
        node = next;
        via = in_port;
    }
    let amod_port = (smp.attr_mod & 0xFF) as u8;
    let port = match smp.attr_id {
        AttributeId::PORT_INFO if amod_port != 0 || topo.node(node).unwrap().is_switch() => {
            amod_port
        }
        _ => via,
    };
    (node, port)
}

/// Port activation is pipelined with distribution: a link's ports are armed as
/// soon as every distribution Set of both its end nodes is answered, and made
/// Active as soon as both ends' Arm Sets are answered, not after the whole
/// fabric is programmed; so most port state Sets go out while other switches
/// are still being programmed, and the window is never drained between the two.
/// Read from the wire (every SMP sent and answered, in order), over the
/// generated topology, not from the SM's state.
#[test]
fn activation_rides_along_with_distribution_link_by_link() {
    let topo = gen::fat_tree_3level(8).unwrap();
    let mut lab = Lab::new(topo.clone(), cfg());
    lab.wire.trace = true;
    let (_, report) = lab.bring_up();
    assert_eq!(report.failures, 0);
    let local = lab.local;
    // Sequence numbers: when each Set went out and when its answer came back.
    let mut answered_at: HashMap<u64, usize> = HashMap::new();
    for (i, t) in lab.wire.traced.iter().enumerate() {
        if let Traced::Answered(tid) = t {
            answered_at.insert(*tid, i);
        }
    }
    // (seq sent, seq answered, node, port, new PortState or None for distribution).
    let mut sets = Vec::new();
    for (i, t) in lab.wire.traced.iter().enumerate() {
        let Traced::Sent(smp) = t else { continue };
        if smp.method != Method::SET
            || matches!(
                smp.attr_id,
                AttributeId::SM_INFO | AttributeId::MULTICAST_FORWARDING_TABLE
            )
        {
            continue;
        }
        let (node, port) = target_of(&topo, local, smp);
        let state = (smp.attr_id == AttributeId::PORT_INFO)
            .then(|| smp.attribute::<PortInfo>().unwrap().port_state)
            .filter(|s| matches!(s, PortState::Armed | PortState::Active));
        let done = *answered_at.get(&smp.tid).expect("every Set answered");
        sets.push((i, done, node, port, state));
    }
    let last_distribution = sets
        .iter()
        .filter(|s| s.4.is_none())
        .map(|s| s.0)
        .max()
        .unwrap();
    let states: Vec<_> = sets.iter().filter(|s| s.4.is_some()).collect();
    let (arms, actives) = (
        states
            .iter()
            .filter(|s| s.4 == Some(PortState::Armed))
            .count(),
        states
            .iter()
            .filter(|s| s.4 == Some(PortState::Active))
            .count(),
    );
    // Every link port of the fat tree went Init -> Armed -> Active exactly once.
    let link_ports: usize = topo
        .iter()
        .map(|(_, n)| {
            n.physical_ports()
                .filter(|(_, p)| p.remote.is_some())
                .count()
        })
        .sum();
    assert_eq!((arms, actives), (link_ports, link_ports));
    for (idx, n) in topo.iter() {
        for (p, _) in n.physical_ports().filter(|(_, p)| p.remote.is_some()) {
            assert_eq!(lab.sim.port_state(idx, p).unwrap(), PortState::Active);
        }
    }
    // A port in Init got its configuration with its Arm Set: two PortInfo Sets per
    // link port, and a CA port's Arm Set carries its LID and ClientReregister.
    let mut port_info_sets: HashMap<(NodeIdx, u8), usize> = HashMap::new();
    for t in &lab.wire.traced {
        if let Traced::Sent(smp) = t {
            if smp.method == Method::SET && smp.attr_id == AttributeId::PORT_INFO {
                let (node, port) = target_of(&topo, local, smp);
                if port != 0 {
                    *port_info_sets.entry((node, port)).or_default() += 1;
                }
                let pi = smp.attribute::<PortInfo>().unwrap();
                if pi.port_state == PortState::Armed && !topo.node(node).unwrap().is_switch() {
                    assert!(pi.lid != 0 && pi.client_reregister, "{node:?}: {pi:?}");
                }
            }
        }
    }
    assert_eq!(port_info_sets.len(), link_ports);
    assert!(
        port_info_sets.values().all(|&n| n == 2),
        "{port_info_sets:?}"
    );
    // Most port state Sets went out while distribution was still going on.
    let after = states.iter().filter(|s| s.0 > last_distribution).count();
    assert!(
        after * 4 < states.len(),
        "{after} of {} port state Sets only after the last distribution Set",
        states.len()
    );
    // ... and none before its link was programmed and armed.
    for &&(sent, _, node, port, state) in &states {
        let (rn, rp) = topo.neighbor(node, port).unwrap();
        let ends = [(node, port), (rn, rp)];
        for s in &sets {
            let before = match (state, s.4) {
                // Armed: both end nodes' distribution Sets answered.
                (Some(PortState::Armed), None) => s.2 == node || s.2 == rn,
                // Active: both ends' Arm Sets answered.
                (Some(PortState::Active), Some(PortState::Armed)) => ends.contains(&(s.2, s.3)),
                _ => false,
            };
            if before {
                assert!(
                    s.1 < sent,
                    "{state:?} of {node:?}/{port} sent before the answer to {s:?}"
                );
            }
        }
    }
    // The report tells the same story: state Sets during distribution, and
    // every SMP of the sweep in exactly one phase.
    let ps = report.phase_smps;
    assert!(ps.activation_overlapped > 0);
    assert_eq!(
        ps.discovery + ps.lids_routing + ps.distribution + ps.activation,
        report.smps
    );
}
