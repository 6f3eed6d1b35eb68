//! [`McastFabric`] (what every group's tree needs from one topology, computed once)
//! and [`McastFabric::tree`], the per-group spanning tree and its port masks
//! ([`McastTree`]). The algorithm and its reasons are in the module doc of
//! [`crate::multicast`].

use std::collections::BTreeMap;

use super::mask::PortMask;
use super::member::{Excluded, McastError, McastMember, MemberIssue};
use crate::routing::{all_pairs_hops, SwitchGraph};
use crate::topology::{NodeIdx, Topology};

/// Hop count meaning "no path".
const INF: u8 = u8::MAX;
/// "Not a switch" in the node -> switch number index.
const NONE: u32 = u32::MAX;

/// Choices of [`McastFabric::tree`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TreeOptions {
    /// Tie-break among equally good roots (and among parallel cables to a
    /// parent): the tied candidates are ordered by NodeGUID (by port number for
    /// cables) and the one at `spread % count` is taken. 0 takes the lowest
    /// GUID, OpenSM's choice; passing the MLID spreads groups over the spines
    /// of a fat tree instead of rooting them all on one.
    pub spread: u64,
}

/// The per-topology part of multicast routing: switches numbered densely,
/// their cables to other switches, and all-pairs switch hop counts. Build it
/// once per topology (a sweep) and compute every group's tree from it; it
/// must be used with the topology it was built from.
///
/// Memory: one byte per switch pair (17 MB for the 4,205 switches of a k=58
/// three-level fat tree).
#[derive(Debug, Clone)]
pub struct McastFabric {
    /// Node count of the topology it was built from.
    built_from: usize,
    /// NodeIdx -> switch number, [`NONE`] for CAs and routers.
    sw_of: Vec<u32>,
    /// Switch number -> node.
    nodes: Vec<NodeIdx>,
    /// Switch number -> NodeGUID.
    guids: Vec<u64>,
    /// `adj[s]`: (port of s, neighbor switch, port of the neighbor), in port order.
    adj: Vec<Vec<(u8, u32, u8)>>,
    /// `dist[s * n + t]`: switch hops, [`INF`] when disconnected. Symmetric.
    dist: Vec<u8>,
}

/// A multicast group's spanning tree over the switches, as port masks.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct McastTree {
    /// The root switch; `None` when nothing needs forwarding (no member
    /// receives, or no member could be placed).
    pub root: Option<NodeIdx>,
    /// For every switch that forwards the group, the ports its MFT entry for
    /// the group's MLID holds. Port 0 (the switch's management port) is in it
    /// only when the switch itself is a receiving member. Switches with an
    /// empty mask are left out.
    pub per_switch: BTreeMap<NodeIdx, PortMask>,
    /// Members left off the tree, and why.
    pub excluded: Vec<Excluded>,
}

impl McastTree {
    /// The mask of a switch (empty when it does not forward the group).
    pub fn mask(&self, switch: NodeIdx) -> PortMask {
        self.per_switch.get(&switch).copied().unwrap_or_default()
    }
}

/// Where a member attaches to the switch graph.
#[derive(Debug, Clone, Copy)]
struct Attach {
    /// Switch number.
    sw: u32,
    /// Port of that switch the member is behind (0: the switch itself).
    port: u8,
    receives: bool,
}

impl McastFabric {
    /// Precompute the switch graph and its hop matrix (bit-parallel BFS on
    /// two threads).
    pub fn new(topo: &Topology) -> Result<McastFabric, McastError> {
        McastFabric::with_threads(topo, 2)
    }

    /// [`McastFabric::new`] on `threads` threads (the result is identical for
    /// any count).
    pub fn with_threads(topo: &Topology, threads: usize) -> Result<McastFabric, McastError> {
        let g = SwitchGraph::cabling(topo);
        // all_pairs_hops fails only on a graph deeper than 254 hops.
        let dist = all_pairs_hops(&g, threads).map_err(|_| McastError::TooDeep)?;
        let mut sw_of = vec![NONE; topo.len()];
        for (s, n) in g.nodes.iter().enumerate() {
            if let Some(slot) = sw_of.get_mut(n.as_usize()) {
                *slot = s as u32;
            }
        }
        let adj = g
            .nodes
            .iter()
            .zip(&g.adj)
            .map(|(&node, a)| {
                a.iter()
                    .filter_map(|&(p, t)| {
                        let (_, rp) = topo.neighbor(node, p)?;
                        Some((p, t, rp))
                    })
                    .collect()
            })
            .collect();
        Ok(McastFabric {
            built_from: topo.len(),
            sw_of,
            nodes: g.nodes,
            guids: g.guids,
            adj,
            dist,
        })
    }

    /// Number of switches.
    pub fn switches(&self) -> usize {
        self.nodes.len()
    }

    /// Switch hops between two switches (`None` if either is not a switch or
    /// they are not connected).
    pub fn hops(&self, a: NodeIdx, b: NodeIdx) -> Option<u8> {
        let sa = *self.sw_of.get(a.as_usize()).filter(|&&s| s != NONE)? as usize;
        let sb = *self.sw_of.get(b.as_usize()).filter(|&&s| s != NONE)? as usize;
        self.dist
            .get(sa * self.nodes.len() + sb)
            .copied()
            .filter(|&d| d != INF)
    }

    fn row(&self, s: usize) -> &[u8] {
        let n = self.nodes.len();
        self.dist.get(s * n..(s + 1) * n).unwrap_or(&[])
    }

    /// Where a member attaches: its switch and the port it is behind.
    fn attach(&self, topo: &Topology, m: &McastMember) -> Result<Attach, MemberIssue> {
        if m.join.is_empty() {
            return Err(MemberIssue::EmptyJoinState);
        }
        let (node, port) = m.port.resolve(topo)?;
        let receives = m.join.receives();
        let sw_num = |n: NodeIdx| self.sw_of.get(n.as_usize()).copied().filter(|&s| s != NONE);
        if port == 0 {
            let sw = sw_num(node).ok_or(MemberIssue::NotEndPort { node, port })?;
            return Ok(Attach { sw, port, receives });
        }
        let (r, rp) = topo
            .neighbor(node, port)
            .ok_or(MemberIssue::NotCabled { node, port })?;
        let sw = sw_num(r).ok_or(MemberIssue::NoSwitch { node, port })?;
        Ok(Attach {
            sw,
            port: rp,
            receives,
        })
    }

    /// The spanning tree of one group.
    ///
    /// Members whose port cannot be placed (unknown, not cabled, cabled to a
    /// CA, on a switch with no path to the root) are left off and listed in
    /// [`McastTree::excluded`]. With no receiving member the tree is empty:
    /// nothing would be delivered. Cost: O(switches x member switches) for the
    /// root, then O(tree size x switch radix).
    pub fn tree(
        &self,
        topo: &Topology,
        members: &[McastMember],
        opts: &TreeOptions,
    ) -> Result<McastTree, McastError> {
        if topo.len() != self.built_from {
            return Err(McastError::TopologyChanged {
                built: self.built_from,
                got: topo.len(),
            });
        }
        let mut out = McastTree::default();
        // One entry per (switch, port): a port that joined twice holds the union.
        let mut at: BTreeMap<(u32, u8), bool> = BTreeMap::new();
        let mut placed: Vec<(&McastMember, u32)> = Vec::with_capacity(members.len());
        for m in members {
            match self.attach(topo, m) {
                Ok(a) => {
                    *at.entry((a.sw, a.port)).or_insert(false) |= a.receives;
                    placed.push((m, a.sw));
                }
                Err(issue) => out.excluded.push(Excluded { member: *m, issue }),
            }
        }
        if !at.values().any(|&r| r) {
            return Ok(out);
        }
        let Some(root) = self.choose_root(&at, opts.spread) else {
            return Ok(out);
        };
        let n = self.nodes.len();
        let root_row = self.row(root);
        let depth = |s: u32| root_row.get(s as usize).copied().unwrap_or(INF);
        // Member counts per switch: (receivers, members).
        let mut own: BTreeMap<u32, (u32, u32)> = BTreeMap::new();
        for &(m, sw) in &placed {
            if depth(sw) == INF {
                out.excluded.push(Excluded {
                    member: *m,
                    issue: MemberIssue::Unreachable {
                        switch: self.nodes.get(sw as usize).copied().unwrap_or(NodeIdx(sw)),
                    },
                });
            }
        }
        for (&(sw, _), &receives) in &at {
            if depth(sw) == INF {
                continue;
            }
            let e = own.entry(sw).or_default();
            e.0 += u32::from(receives);
            e.1 += 1;
        }
        // Parent pointers from every member switch up to the root: each switch
        // takes a neighbor one hop closer to the root, so the union is a tree.
        // parent[s] = (parent switch, port of s, port of the parent).
        let mut parent: Vec<Option<(u32, u8, u8)>> = vec![None; n];
        let mut in_tree = vec![false; n];
        let mut tree: Vec<u32> = Vec::new();
        if let Some(x) = in_tree.get_mut(root) {
            *x = true;
        }
        tree.push(root as u32);
        for &start in own.keys() {
            let mut v = start;
            while !in_tree.get(v as usize).copied().unwrap_or(true) {
                if let Some(x) = in_tree.get_mut(v as usize) {
                    *x = true;
                }
                tree.push(v);
                let Some(p) = self.parent_of(v, depth(v), &depth, opts.spread) else {
                    break;
                };
                if let Some(slot) = parent.get_mut(v as usize) {
                    *slot = Some(p);
                }
                v = p.0;
            }
        }
        // Subtree counts, deepest switches first.
        tree.sort_by_key(|&s| std::cmp::Reverse(depth(s)));
        let mut sub: Vec<(u32, u32)> = vec![(0, 0); n];
        for (&s, &c) in &own {
            if let Some(x) = sub.get_mut(s as usize) {
                *x = c;
            }
        }
        let (total_recv, total) = own
            .values()
            .fold((0u32, 0u32), |a, &(r, m)| (a.0 + r, a.1 + m));
        let mut masks: Vec<PortMask> = vec![PortMask::EMPTY; n];
        for &s in &tree {
            let (recv, any) = sub.get(s as usize).copied().unwrap_or_default();
            let Some((u, ps, pu)) = parent.get(s as usize).copied().flatten() else {
                continue;
            };
            if let Some(x) = sub.get_mut(u as usize) {
                x.0 += recv;
                x.1 += any;
            }
            // Upward: something in this subtree sends and someone outside receives.
            if any > 0 && total_recv > recv {
                if let Some(m) = masks.get_mut(s as usize) {
                    m.set(ps);
                }
            }
            // Downward: someone in this subtree receives and someone outside sends.
            if recv > 0 && total > any {
                if let Some(m) = masks.get_mut(u as usize) {
                    m.set(pu);
                }
            }
        }
        for (&(sw, port), &receives) in &at {
            if receives && depth(sw) != INF {
                if let Some(m) = masks.get_mut(sw as usize) {
                    m.set(port);
                }
            }
        }
        out.root = self.nodes.get(root).copied();
        for &s in &tree {
            let (Some(&node), Some(&m)) = (self.nodes.get(s as usize), masks.get(s as usize))
            else {
                continue;
            };
            if !m.is_empty() {
                out.per_switch.insert(node, m);
            }
        }
        Ok(out)
    }

    /// The root: the switch with the fewest members out of reach, then the
    /// smallest maximum hop count to a member (a CA member counts its cable:
    /// OpenSM's `mcast_mgr_compute_max_hops`), then the smallest total hop
    /// count over members; ties by NodeGUID, `spread % count`.
    fn choose_root(&self, at: &BTreeMap<(u32, u8), bool>, spread: u64) -> Option<usize> {
        let n = self.nodes.len();
        // Per member switch: (members, CA members).
        let mut per_sw: BTreeMap<u32, (u32, u32)> = BTreeMap::new();
        for &(sw, port) in at.keys() {
            let e = per_sw.entry(sw).or_default();
            e.0 += 1;
            e.1 += u32::from(port != 0);
        }
        let mut unreached = vec![0u32; n];
        let mut max = vec![0u16; n];
        let mut sum = vec![0u64; n];
        for (&m, &(w, w_ca)) in &per_sw {
            let extra = u16::from(w_ca > 0);
            // dist is symmetric: row m holds d(c, m) for every candidate c.
            let row = self.row(m as usize);
            for (((&d, u), mx), sm) in row
                .iter()
                .zip(unreached.iter_mut())
                .zip(max.iter_mut())
                .zip(sum.iter_mut())
            {
                if d == INF {
                    *u += w;
                } else {
                    *mx = (*mx).max(u16::from(d) + extra);
                    *sm += u64::from(d) * u64::from(w) + u64::from(w_ca);
                }
            }
        }
        let key = |c: usize| {
            (
                unreached.get(c).copied().unwrap_or(u32::MAX),
                max.get(c).copied().unwrap_or(u16::MAX),
                sum.get(c).copied().unwrap_or(u64::MAX),
            )
        };
        let best = (0..n).map(key).min()?;
        let mut tied: Vec<(u64, usize)> = (0..n)
            .filter(|&c| key(c) == best)
            .map(|c| (self.guids.get(c).copied().unwrap_or(u64::MAX), c))
            .collect();
        tied.sort_unstable();
        let pick = (spread % tied.len().max(1) as u64) as usize;
        tied.get(pick).map(|&(_, c)| c)
    }

    /// A neighbor of `v` one hop closer to the root: the candidates in port
    /// order, `spread % count`.
    fn parent_of(
        &self,
        v: u32,
        dv: u8,
        depth: &impl Fn(u32) -> u8,
        spread: u64,
    ) -> Option<(u32, u8, u8)> {
        if dv == 0 || dv == INF {
            return None;
        }
        let adj = self.adj.get(v as usize)?;
        let closer = |&&(_, t, _): &&(u8, u32, u8)| depth(t) == dv - 1;
        let count = adj.iter().filter(closer).count();
        if count == 0 {
            return None;
        }
        let pick = (spread % count as u64) as usize;
        adj.iter()
            .filter(closer)
            .nth(pick)
            .map(|&(p, t, rp)| (t, p, rp))
    }
}
