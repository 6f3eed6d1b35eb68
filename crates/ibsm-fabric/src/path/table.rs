//! [`PathTable`]: every switch's link count, MTU and rate to every DLID, computed
//! once from the LFTs, so a PathRecord is an O(1) lookup: an all-to-all PathRecord
//! table on a k=16 fat tree (1M pairs) without a million walks.
//!
//! Why one pass per DLID suffices: an LFT entry depends only on (switch, DLID),
//! so for one DLID the entries of all switches form a functional graph, each
//! switch pointing at the next. Where the routing is sound that graph is an
//! in-tree towards the destination; a switch's answer is its cable's values
//! combined with its successor's answer. Each switch is resolved once per DLID by
//! following successors until a resolved switch, the destination, a failure or a
//! switch already on the current chain (a loop: the whole chain fails), then
//! unwinding the chain. A failed entry keeps no reason: the lookup walks the
//! path again to return the same typed error as [`walk`](super::walk::walk).

use super::lfts::{owns, Lfts, LidIndex, MAX_UNICAST_LID};
use super::walk::{cable, check_end_port, walk, PathError, PathParams, PathSummary};
use crate::routing::UNREACHABLE;
use crate::topology::{NodeIdx, Rate, Topology};

/// "Not a switch" in the node -> switch number index.
const NONE: u32 = u32::MAX;

/// Every [`Rate`], slowest first: entries store a rate's rank here so that
/// the minimum is a byte comparison.
fn ranked_rates() -> Vec<Rate> {
    let mut v: Vec<Rate> = (0..=u8::MAX).filter_map(Rate::from_iba).collect();
    v.sort();
    v
}

/// One (DLID, switch) entry: cables, MTU and rate rank to the destination.
/// `mtu == 0` marks a failure; the identity (nothing traversed yet) has
/// `mtu == rank == u8::MAX`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Reach {
    links: u16,
    mtu: u8,
    rank: u8,
}

const FAIL: Reach = Reach {
    links: 0,
    mtu: 0,
    rank: 0,
};
const ARRIVED: Reach = Reach {
    links: 0,
    mtu: u8::MAX,
    rank: u8::MAX,
};

impl Reach {
    fn ok(self) -> bool {
        self.mtu != 0
    }

    /// Cross a cable (mtu, rank) before `self`.
    fn after(self, mtu: u8, rank: u8) -> Reach {
        if !self.ok() {
            return FAIL;
        }
        match self.links.checked_add(1) {
            Some(links) => Reach {
                links,
                mtu: self.mtu.min(mtu),
                rank: self.rank.min(rank),
            },
            None => FAIL,
        }
    }
}

/// Where a switch's LFT entry for the DLID leads.
#[derive(Clone, Copy)]
enum Step {
    /// To the DLID's owner through a cable (mtu, rank), or to itself (port 0).
    Arrive(Option<(u8, u8)>),
    /// To another switch through a cable (mtu, rank).
    Next(u32, u8, u8),
    Fail,
}

/// What a switch port leads to.
#[derive(Clone, Copy)]
enum Far {
    Down,
    Switch(u32),
    End(NodeIdx, u8),
}

/// Per-(switch, DLID) path numbers; see the module doc.
///
/// Memory: 4 bytes per (switch, DLID) pair: 1.7 MB for a k=16 three-level fat
/// tree (320 switches, 1,344 LIDs), 12 MB for k=24, but 0.8 GB for k=58
/// (49k LIDs, 4,205 switches): there, build it for the DLIDs that matter
/// ([`PathTable::for_dlids`], e.g. one LID per port) or walk per query.
#[derive(Debug, Clone)]
pub struct PathTable {
    built_from: usize,
    lids: LidIndex,
    sw_of: Vec<u32>,
    switches: usize,
    /// LID -> row, [`NONE`] when not in the table.
    row_of: Vec<u32>,
    dlids: Vec<u16>,
    reach: Vec<Reach>,
    ranked: Vec<Rate>,
}

impl PathTable {
    /// The table for every LID an end port of `topo` owns.
    pub fn new(topo: &Topology, lfts: &impl Lfts) -> PathTable {
        let lids = LidIndex::new(topo);
        let all: Vec<u16> = lids.lids().collect();
        PathTable::build(topo, lfts, lids, all)
    }

    /// The table for these DLIDs only (others are answered by walking).
    pub fn for_dlids(
        topo: &Topology,
        lfts: &impl Lfts,
        dlids: impl IntoIterator<Item = u16>,
    ) -> PathTable {
        let lids = LidIndex::new(topo);
        let mut v: Vec<u16> = dlids
            .into_iter()
            .filter(|&l| lids.owner(l).is_some())
            .collect();
        v.sort_unstable();
        v.dedup();
        PathTable::build(topo, lfts, lids, v)
    }

    fn build(topo: &Topology, lfts: &impl Lfts, lids: LidIndex, dlids: Vec<u16>) -> PathTable {
        let ranked = ranked_rates();
        let rank_of = |r: Rate| ranked.iter().position(|&x| x == r).unwrap_or(0) as u8;
        let mut sw_of = vec![NONE; topo.len()];
        let mut nodes = Vec::new();
        for (idx, node) in topo.iter() {
            if node.is_switch() {
                if let Some(s) = sw_of.get_mut(idx.as_usize()) {
                    *s = nodes.len() as u32;
                }
                nodes.push(idx);
            }
        }
        let n = nodes.len();
        // Per switch: its LFT and, per port, (far end, cable MTU, rate rank).
        let tables: Vec<Option<&[u8]>> = nodes.iter().map(|&s| lfts.lft(s)).collect();
        let ports: Vec<Vec<(Far, u8, u8)>> = nodes
            .iter()
            .map(|&s| {
                let num = topo.node(s).map_or(0, |x| x.num_ports());
                (0..=num)
                    .map(|p| match cable(topo, s, p).filter(|_| p != 0) {
                        None => (Far::Down, 0, 0),
                        Some((r, rp, mtu, rate)) => {
                            let far = match sw_of.get(r.as_usize()) {
                                Some(&t) if t != NONE => Far::Switch(t),
                                _ => Far::End(r, rp),
                            };
                            (far, mtu, rank_of(rate))
                        }
                    })
                    .collect()
            })
            .collect();
        let mut row_of = vec![NONE; dlids.last().map_or(0, |&l| usize::from(l) + 1)];
        for (i, &l) in dlids.iter().enumerate() {
            if let Some(r) = row_of.get_mut(usize::from(l)) {
                *r = i as u32;
            }
        }
        let mut reach = vec![FAIL; dlids.len() * n];
        let mut state = vec![0u8; n]; // 0 new, 1 on the chain, 2 done
                                      // The switches of the current chain, each with the cable it crosses
                                      // (None: it fails, or delivers to its own port 0).
        let mut chain: Vec<(u32, Option<(u8, u8)>)> = Vec::new();
        for (row, &dlid) in reach.chunks_mut(n.max(1)).zip(&dlids) {
            let owner = lids.owner(dlid);
            let step = |s: u32| -> Step {
                let su = s as usize;
                let Some(lft) = tables.get(su).copied().flatten() else {
                    return Step::Fail;
                };
                let out = lft.get(usize::from(dlid)).copied().unwrap_or(UNREACHABLE);
                if out == UNREACHABLE {
                    return Step::Fail;
                }
                if out == 0 {
                    let own = nodes
                        .get(su)
                        .and_then(|&m| topo.node(m))
                        .is_some_and(|node| owns(node, 0, dlid));
                    return if own { Step::Arrive(None) } else { Step::Fail };
                }
                match ports.get(su).and_then(|v| v.get(usize::from(out))) {
                    Some(&(Far::Switch(t), mtu, rank)) => Step::Next(t, mtu, rank),
                    Some(&(Far::End(r, rp), mtu, rank)) if owner == Some((r, rp)) => {
                        Step::Arrive(Some((mtu, rank)))
                    }
                    _ => Step::Fail,
                }
            };
            state.fill(0);
            for s0 in 0..n as u32 {
                if state.get(s0 as usize) == Some(&2) {
                    continue;
                }
                chain.clear();
                let mut s = s0;
                // The answer just after the last switch of the chain.
                let mut acc = loop {
                    match state.get(s as usize) {
                        Some(&2) => break row.get(s as usize).copied().unwrap_or(FAIL),
                        // Back on the chain: the LFTs loop.
                        Some(&1) | None => break FAIL,
                        _ => {}
                    }
                    if let Some(x) = state.get_mut(s as usize) {
                        *x = 1;
                    }
                    match step(s) {
                        Step::Fail => {
                            chain.push((s, None));
                            break FAIL;
                        }
                        Step::Arrive(cable) => {
                            chain.push((s, cable));
                            break ARRIVED;
                        }
                        Step::Next(t, mtu, rank) => {
                            chain.push((s, Some((mtu, rank))));
                            s = t;
                        }
                    }
                };
                while let Some((v, cable)) = chain.pop() {
                    if let Some((mtu, rank)) = cable {
                        acc = acc.after(mtu, rank);
                    }
                    if let Some(x) = row.get_mut(v as usize) {
                        *x = acc;
                    }
                    if let Some(x) = state.get_mut(v as usize) {
                        *x = 2;
                    }
                }
            }
        }
        PathTable {
            built_from: topo.len(),
            lids,
            sw_of,
            switches: n,
            row_of,
            dlids,
            reach,
            ranked,
        }
    }

    /// The DLIDs the table holds, in increasing order.
    pub fn dlids(&self) -> &[u16] {
        &self.dlids
    }

    /// Who owns each LID.
    pub fn lid_index(&self) -> &LidIndex {
        &self.lids
    }

    fn entry(&self, switch: NodeIdx, dlid: u16) -> Option<Reach> {
        let s = *self.sw_of.get(switch.as_usize()).filter(|&&s| s != NONE)? as usize;
        let row = *self.row_of.get(usize::from(dlid)).filter(|&&r| r != NONE)? as usize;
        self.reach.get(row * self.switches + s).copied()
    }

    fn summary_of(&self, r: Reach) -> PathSummary {
        PathSummary {
            links: r.links,
            mtu: r.mtu,
            rate: self
                .ranked
                .get(usize::from(r.rank))
                .copied()
                .unwrap_or(Rate::GBPS_2_5),
        }
    }

    /// The path from the end port `source` to `dlid`: what [`walk`] would
    /// return as its summary, in O(1) when the table holds `dlid` (a walk
    /// otherwise, and for every failure, to name the reason). `topo` and
    /// `lfts` must be the ones the table was built from.
    pub fn summary(
        &self,
        topo: &Topology,
        lfts: &impl Lfts,
        source: (NodeIdx, u8),
        dlid: u16,
    ) -> Result<PathSummary, PathError> {
        if topo.len() != self.built_from {
            return Err(PathError::TopologyChanged {
                built: self.built_from,
                got: topo.len(),
            });
        }
        let (src, sport) = source;
        let is_switch = check_end_port(topo, src, sport)?;
        if dlid == 0 || dlid > MAX_UNICAST_LID {
            return Err(PathError::NotUnicast(dlid));
        }
        let slow = || walk(topo, lfts, source, dlid).map(|p| p.summary);
        if topo.node(src).is_some_and(|n| owns(n, sport, dlid)) {
            return Ok(PathSummary::at_port(topo, src, sport));
        }
        let hit = if is_switch {
            self.entry(src, dlid)
        } else {
            match cable(topo, src, sport) {
                Some((r, _, mtu, rate)) => self.entry(r, dlid).map(|e| {
                    let rank = self.ranked.iter().position(|&x| x == rate).unwrap_or(0);
                    e.after(mtu, rank as u8)
                }),
                None => None,
            }
        };
        match hit {
            Some(r) if r.ok() => Ok(self.summary_of(r)),
            _ => slow(),
        }
    }

    /// PathRecord numbers for (SLID, DLID), both directions from the table.
    pub fn path_params(
        &self,
        topo: &Topology,
        lfts: &impl Lfts,
        slid: u16,
        dlid: u16,
    ) -> Result<PathParams, PathError> {
        if slid == 0 || slid > MAX_UNICAST_LID {
            return Err(PathError::NotUnicast(slid));
        }
        let source = self.lids.owner(slid).ok_or(PathError::UnknownLid(slid))?;
        let summary = self.summary(topo, lfts, source, dlid)?;
        let reversible = match self.lids.owner(dlid) {
            Some(dest) => self.summary(topo, lfts, dest, slid).is_ok(),
            None => false,
        };
        Ok(PathParams {
            slid,
            dlid,
            summary,
            reversible,
        })
    }
}
