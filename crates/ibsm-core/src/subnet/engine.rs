//! LID assignment and unicast routing as the configurator calls them.
//!
//! The contract in ARCHITECTURE.md puts these in `ibsm_fabric::lid` and
//! `ibsm_fabric::routing`; until they land this file holds a small
//! implementation with the same shapes ([`ForwardingTables`], a LID manager
//! that remembers assignments by port GUID), so swapping is a change here only.
//!
//! * LIDs: a port keeps the LID it is remembered with, else the LID it already
//!   carries when that is in range, 2^LMC-aligned and free, else the next free
//!   aligned block. Switches get LMC 0 on port 0; CA/router ports 2^LMC LIDs.
//! * Routing: min-hop over the switch graph, balanced: for every (switch,
//!   destination switch) pair the equal-cost egress ports are computed once,
//!   and every destination LID takes the least-loaded one, so the LIDs behind
//!   a leaf spread over all uplinks (what a fat tree needs).

use std::collections::{HashMap, VecDeque};

use ibsm_fabric::{NodeIdx, Topology};

/// Highest unicast LID.
pub const MAX_UNICAST_LID: u16 = 0xBFFF;

/// Egress port per LID per switch: `lfts[node]` is `Some` for switches;
/// entry 0 = the switch itself (management port), 0xFF = unreachable.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ForwardingTables {
    /// Highest LID in use (LinearFDBTop).
    pub lft_top: u16,
    /// Indexed by `NodeIdx`.
    pub lfts: Vec<Option<Vec<u8>>>,
}

/// What the LID assignment did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LidReport {
    /// End ports with a LID after the assignment.
    pub assigned: usize,
    /// Ports that kept the LID they carried or were remembered with.
    pub kept: usize,
    /// Ports that got a LID different from the one they carried.
    pub changed: usize,
    /// End ports left without a LID (the LID space is exhausted).
    pub unassigned: usize,
}

/// The LID space is exhausted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "no free LID block of {size} for port {port_guid:#018x} (unicast LIDs 1..=0xBFFF exhausted)"
)]
pub struct LidExhausted {
    /// The port that got none.
    pub port_guid: u64,
    /// The block size it needed (2^LMC).
    pub size: u32,
}

/// Remembers LIDs by port GUID across sweeps.
#[derive(Debug, Clone, Default)]
pub struct LidManager {
    lmc: u8,
    by_guid: HashMap<u64, u16>,
}

/// An end port: (node, port number, port GUID, LMC it must get).
type EndPort = (NodeIdx, u8, u64, u8);

impl LidManager {
    /// A manager that gives CA ports 2^`lmc` LIDs (`lmc` is capped at 7).
    pub fn new(lmc: u8) -> LidManager {
        LidManager {
            lmc: lmc.min(7),
            by_guid: HashMap::new(),
        }
    }

    /// Assign LIDs to every end port of `topo` (switch port 0, CA ports with
    /// a cable, plus `local`), writing them into the topology.
    pub fn assign(&mut self, topo: &mut Topology, local: Option<(NodeIdx, u8)>) -> LidReport {
        let mut ends: Vec<EndPort> = Vec::new();
        for (idx, node) in topo.iter() {
            if node.is_switch() {
                if let Some(p) = node.port(0) {
                    ends.push((idx, 0, p.port_guid, 0));
                }
                continue;
            }
            for (num, p) in node.physical_ports() {
                let end = p.remote.is_some() || local == Some((idx, num));
                if end && p.port_guid != 0 {
                    ends.push((idx, num, p.port_guid, self.lmc));
                }
            }
        }
        let mut used = vec![false; usize::from(MAX_UNICAST_LID) + 1];
        let mut out: Vec<Option<u16>> = vec![None; ends.len()];
        let mut report = LidReport::default();
        let free = |used: &[bool], base: u16, size: u32| {
            let end = u32::from(base) + size;
            base != 0
                && end <= u32::from(MAX_UNICAST_LID) + 1
                && u32::from(base) % size == 0
                && (u32::from(base)..end).all(|l| !used.get(l as usize).copied().unwrap_or(true))
        };
        let claim = |used: &mut [bool], base: u16, size: u32| {
            for l in u32::from(base)..u32::from(base) + size {
                if let Some(u) = used.get_mut(l as usize) {
                    *u = true;
                }
            }
        };
        // Pass 1: remembered; pass 2: carried.
        for pass in 0..2 {
            for (i, &(idx, num, guid, lmc)) in ends.iter().enumerate() {
                if out.get(i).copied().flatten().is_some() {
                    continue;
                }
                let size = 1u32 << lmc;
                let want = if pass == 0 {
                    self.by_guid.get(&guid).copied()
                } else {
                    topo.node(idx).and_then(|n| n.port(num)).map(|p| p.lid)
                };
                if let Some(base) = want.filter(|&b| free(&used, b, size)) {
                    claim(&mut used, base, size);
                    if let Some(o) = out.get_mut(i) {
                        *o = Some(base);
                    }
                }
            }
        }
        // Pass 3: new LIDs, end nodes first: when the 49151 unicast LIDs do not
        // cover every port (a k=58 fat tree has 52,983), CAs need them to talk,
        // switches are still reachable by directed route.
        let mut order: Vec<usize> = (0..ends.len()).collect();
        order.sort_by_key(|&i| ends.get(i).map_or(1, |e| u8::from(e.1 == 0)));
        // Next candidate per block size: small blocks fill the holes big ones leave.
        let mut next = [1u32; 8];
        let mut exhausted: Option<LidExhausted> = None;
        for i in order {
            let Some(&(_, _, guid, lmc)) = ends.get(i) else {
                continue;
            };
            if out.get(i).copied().flatten().is_some() {
                continue;
            }
            let size = 1u32 << lmc;
            let slot = usize::from(lmc.min(7));
            let mut base = next.get(slot).copied().unwrap_or(1).div_ceil(size) * size;
            let found = loop {
                if base + size > u32::from(MAX_UNICAST_LID) + 1 {
                    break false;
                }
                // base <= 0xBFFF here.
                if free(&used, base as u16, size) {
                    break true;
                }
                base += size;
            };
            if !found {
                report.unassigned += 1;
                exhausted.get_or_insert(LidExhausted {
                    port_guid: guid,
                    size,
                });
                continue;
            }
            claim(&mut used, base as u16, size);
            if let Some(o) = out.get_mut(i) {
                *o = Some(base as u16);
            }
            if let Some(n) = next.get_mut(slot) {
                *n = base + size;
            }
        }
        if let Some(e) = &exhausted {
            tracing::error!(%e, unassigned = report.unassigned, "LID space exhausted");
        }
        for (i, &(idx, num, guid, lmc)) in ends.iter().enumerate() {
            let Some(lid) = out.get(i).copied().flatten() else {
                continue;
            };
            let old = topo.node(idx).and_then(|n| n.port(num)).map(|p| p.lid);
            if old == Some(lid) {
                report.kept += 1;
            } else {
                report.changed += 1;
            }
            report.assigned += 1;
            self.by_guid.insert(guid, lid);
            if let Err(err) = topo.set_port_lid(idx, num, lid, lmc) {
                tracing::warn!(%err, "cannot record LID");
            }
        }
        report
    }
}

/// Balanced min-hop routing over the switches of `topo` (LIDs must be set).
pub fn min_hop(topo: &Topology) -> ForwardingTables {
    let n = topo.len();
    // Dense switch numbering and adjacency (switch neighbours only).
    let mut sw_of = vec![u32::MAX; n];
    let mut switches: Vec<NodeIdx> = Vec::new();
    for (idx, node) in topo.iter() {
        if node.is_switch() {
            if let Some(s) = sw_of.get_mut(idx.as_usize()) {
                *s = switches.len() as u32;
            }
            switches.push(idx);
        }
    }
    let ns = switches.len();
    // adj[s] = (egress port, neighbour switch).
    let mut adj: Vec<Vec<(u8, u32)>> = vec![Vec::new(); ns];
    // LIDs reached through each switch: (lid count base, lmc, egress port at that switch).
    let mut dests: Vec<Vec<(u16, u8, u8)>> = vec![Vec::new(); ns];
    let mut lft_top = 0u16;
    for (s, &idx) in switches.iter().enumerate() {
        let Some(node) = topo.node(idx) else { continue };
        if let Some(p0) = node.port(0) {
            if p0.lid != 0 {
                if let Some(d) = dests.get_mut(s) {
                    d.push((p0.lid, 0, 0));
                }
                lft_top = lft_top.max(p0.lid);
            }
        }
        for (num, port) in node.physical_ports() {
            let Some((rn, rp)) = port.remote else {
                continue;
            };
            let Some(r) = topo.node(rn) else { continue };
            if r.is_switch() {
                let t = sw_of.get(rn.as_usize()).copied().unwrap_or(u32::MAX);
                if let Some(a) = adj.get_mut(s) {
                    a.push((num, t));
                }
            } else if let Some(rport) = r.port(rp) {
                if rport.lid != 0 {
                    if let Some(d) = dests.get_mut(s) {
                        d.push((rport.lid, rport.lmc, num));
                    }
                    let top = u32::from(rport.lid) + (1u32 << rport.lmc) - 1;
                    lft_top = lft_top.max(u16::try_from(top).unwrap_or(MAX_UNICAST_LID));
                }
            }
        }
    }
    let size = usize::from(lft_top) + 1;
    let mut lfts: Vec<Option<Vec<u8>>> = vec![None; n];
    let mut tables: Vec<Vec<u8>> = vec![vec![0xFF; size]; ns];
    // load[s][port]: LIDs routed out of that port so far.
    let mut load: Vec<Vec<u32>> = switches
        .iter()
        .map(|&i| vec![0; topo.node(i).map_or(1, |n| n.ports.len())])
        .collect();
    let mut dist = vec![u32::MAX; ns];
    let mut queue = VecDeque::with_capacity(ns);
    let mut cand: Vec<u8> = Vec::new();
    for d in 0..ns {
        let Some(dl) = dests.get(d) else { continue };
        if dl.is_empty() {
            continue;
        }
        dist.iter_mut().for_each(|x| *x = u32::MAX);
        if let Some(x) = dist.get_mut(d) {
            *x = 0;
        }
        queue.clear();
        queue.push_back(d as u32);
        while let Some(u) = queue.pop_front() {
            let du = dist.get(u as usize).copied().unwrap_or(u32::MAX);
            for &(_, v) in adj.get(u as usize).map_or(&[][..], Vec::as_slice) {
                if let Some(dv) = dist.get_mut(v as usize) {
                    if *dv == u32::MAX {
                        *dv = du + 1;
                        queue.push_back(v);
                    }
                }
            }
        }
        for x in 0..ns {
            let dx = dist.get(x).copied().unwrap_or(u32::MAX);
            let (Some(table), Some(ld)) = (tables.get_mut(x), load.get_mut(x)) else {
                continue;
            };
            if dx == u32::MAX {
                continue;
            }
            if x == d {
                for &(lid, lmc, port) in dl {
                    for l in 0..(1u32 << lmc) {
                        if let Some(e) = table.get_mut(usize::from(lid) + l as usize) {
                            *e = port;
                        }
                    }
                }
                continue;
            }
            cand.clear();
            for &(port, v) in adj.get(x).map_or(&[][..], Vec::as_slice) {
                if dist.get(v as usize).copied() == Some(dx - 1) {
                    cand.push(port);
                }
            }
            for &(lid, lmc, _) in dl {
                for l in 0..(1u32 << lmc) {
                    let best = cand
                        .iter()
                        .copied()
                        .min_by_key(|&p| ld.get(usize::from(p)).copied().unwrap_or(u32::MAX));
                    let Some(p) = best else { break };
                    if let Some(c) = ld.get_mut(usize::from(p)) {
                        *c += 1;
                    }
                    if let Some(e) = table.get_mut(usize::from(lid) + l as usize) {
                        *e = p;
                    }
                }
            }
        }
    }
    for (s, table) in tables.into_iter().enumerate() {
        if let (Some(&idx), true) = (switches.get(s), true) {
            if let Some(slot) = lfts.get_mut(idx.as_usize()) {
                *slot = Some(table);
            }
        }
    }
    ForwardingTables { lft_top, lfts }
}
