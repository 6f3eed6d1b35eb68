//! Routing engines: compute every switch's LinearForwardingTable from a
//! topology whose ports carry LIDs (see [`crate::lid`]).
//!
//! Both engines work on the switch graph, never per LID: distances are
//! computed between switches once, then each switch's LFT is filled for the
//! LID blocks "behind" each destination switch (the switch's own LID, egress
//! port 0, and the CA/router ports cabled to it, egress = that cable's port).
//!
//! * [`min_hop`]: all-pairs switch hop counts by a bit-parallel BFS (64
//!   sources per machine word, so a 4,205-switch fabric costs ~80M word ORs),
//!   then for each (switch, destination switch) the equal-cost egress ports.
//! * [`up_down`]: switches ranked by BFS distance from the roots; "up" means
//!   towards a smaller (rank, NodeGUID). `D[s][d]` (down-only distance) is a
//!   DP in decreasing order, `U[s][d]` (up then down) a DP in increasing
//!   order; a switch with a down-only path to `d` always uses it, so no
//!   packet ever turns from down to up: deadlock-free by construction. The
//!   auto-root heuristic is documented on [`up_down`].
//!
//! Balancing (both engines, per source switch): the equal-cost ports for a
//! destination are used round-robin starting at the least-loaded one
//! (load = LIDs already routed over the port by this switch), and the
//! 2^LMC LIDs of a port are consecutive in that rotation, so they leave
//! over different ports whenever there are enough candidates. In a fat
//! tree, where the candidates at a switch are the same uplink set for every
//! remote destination, this keeps the per-port load even within 1.
//!
//! Parallelism: the fill phase (the expensive part: one byte per switch per
//! LID) runs over source switches on `RoutingOptions::threads` scoped threads.
//! Each switch's fill depends only on its own load counters, so the result
//! is identical for any thread count.
//!
//! Checks: [`walk`] follows the tables hop by hop, [`verify_all_reachable`]
//! walks every (switch, LID) pair and [`check_deadlock_free`] searches the
//! channel dependency graph for a cycle.

mod check;
mod updown;

pub use check::{check_deadlock_free, unreachable_pairs, verify_all_reachable, walk, WalkError};
pub use updown::{auto_roots, up_down};

use crate::lid::is_valid_block;
use crate::topology::{NodeIdx, NodeType, Topology};

/// LFT entry for "no route".
pub const UNREACHABLE: u8 = 0xFF;
/// Hop count meaning "no path" in the distance matrices.
pub(crate) const INF: u8 = u8::MAX;

/// The routing result: one LinearForwardingTable per switch.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ForwardingTables {
    /// LinearFDBTop: the highest LID with an entry (every table has
    /// `lft_top + 1` entries, indexed by LID).
    pub lft_top: u16,
    /// Indexed by `NodeIdx`: `Some(lft)` for switches, `None` otherwise.
    /// Entry = egress port; 0 = the switch's own LID (management port);
    /// [`UNREACHABLE`] = no route.
    pub lfts: Vec<Option<Vec<u8>>>,
}

impl ForwardingTables {
    /// The LFT of a switch.
    pub fn lft(&self, node: NodeIdx) -> Option<&[u8]> {
        self.lfts.get(node.as_usize())?.as_deref()
    }

    /// Egress port of `node` for `lid` (`None` if not a switch or beyond
    /// the table).
    pub fn port(&self, node: NodeIdx, lid: u16) -> Option<u8> {
        self.lft(node)?.get(usize::from(lid)).copied()
    }
}

/// Engine settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoutingOptions {
    /// Worker threads for the LFT fill (at least 1 is used).
    pub threads: usize,
}

impl Default for RoutingOptions {
    fn default() -> Self {
        RoutingOptions { threads: 2 }
    }
}

/// Why a routing run was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RoutingError {
    /// A port carries a LID block that is not a valid unicast block.
    #[error("node {node} port {port}: LID {lid:#06x} with LMC {lmc} is not a valid unicast block")]
    BadLid {
        /// Node.
        node: NodeIdx,
        /// Port.
        port: u8,
        /// Base LID.
        lid: u16,
        /// LMC.
        lmc: u8,
    },
    /// Two ports carry overlapping LIDs (run the LID manager first).
    #[error("LID {lid:#06x} is carried by node {} port {} and node {} port {}", first.0, first.1, second.0, second.1)]
    DuplicateLid {
        /// The LID.
        lid: u16,
        /// First holder (node, port).
        first: (NodeIdx, u8),
        /// Second holder.
        second: (NodeIdx, u8),
    },
    /// A root GUID names no node.
    #[error("root {0:#018x} is not in the topology")]
    UnknownRoot(u64),
    /// A root GUID names a CA or router.
    #[error("root {0:#018x} is not a switch")]
    RootNotSwitch(u64),
    /// Some switch is 255 or more switch hops from another.
    #[error("the switch graph is deeper than 254 hops")]
    TooDeep,
}

/// A LID block behind a destination switch.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Block {
    pub base: u16,
    pub count: u16,
    /// Egress port at the destination switch (0 = its own LID).
    pub port: u8,
}

/// The switch graph: switches numbered densely, neighbors by port, and the
/// LID blocks behind each switch.
pub(crate) struct SwitchGraph {
    /// Switch number -> node.
    pub nodes: Vec<NodeIdx>,
    /// Switch number -> NodeGUID.
    pub guids: Vec<u64>,
    /// `adj[s]`: (port, neighbor switch) for each cable to a switch.
    pub adj: Vec<Vec<(u8, u32)>>,
    /// `nbrs[s]`: distinct neighbor switches.
    pub nbrs: Vec<Vec<u32>>,
    /// LID blocks behind each switch, in LID order.
    pub blocks: Vec<Vec<Block>>,
    /// Switch has a CA or router cabled to it.
    pub has_ca: Vec<bool>,
    pub lft_top: u16,
}

impl SwitchGraph {
    pub fn build(topo: &Topology) -> Result<SwitchGraph, RoutingError> {
        let mut index = vec![u32::MAX; topo.len()];
        let mut nodes = Vec::new();
        let mut guids = Vec::new();
        for (idx, node) in topo.iter() {
            if node.is_switch() {
                if let Some(slot) = index.get_mut(idx.as_usize()) {
                    *slot = nodes.len() as u32;
                }
                nodes.push(idx);
                guids.push(node.node_guid);
            }
        }
        let sw_of = |n: NodeIdx| index.get(n.as_usize()).copied().filter(|&s| s != u32::MAX);
        let n = nodes.len();
        let mut adj = vec![Vec::new(); n];
        let mut blocks: Vec<Vec<Block>> = vec![Vec::new(); n];
        let mut has_ca = vec![false; n];
        // Owner of each LID, to find overlaps: (node, port) packed, 0 = free.
        let mut owner: Vec<u64> = vec![0; usize::from(crate::lid::MAX_UNICAST_LID) + 1];
        let mut top = 0u16;
        let mut claim =
            |node: NodeIdx, port: u8, lid: u16, lmc: u8| -> Result<Block, RoutingError> {
                if !is_valid_block(lid, lmc) {
                    return Err(RoutingError::BadLid {
                        node,
                        port,
                        lid,
                        lmc,
                    });
                }
                let count = 1u16 << lmc;
                let me = (u64::from(node.0) << 8 | u64::from(port)) + 1;
                for l in lid..lid + count {
                    if let Some(o) = owner.get_mut(usize::from(l)) {
                        if *o != 0 {
                            let prev = *o - 1;
                            return Err(RoutingError::DuplicateLid {
                                lid: l,
                                first: (NodeIdx((prev >> 8) as u32), (prev & 0xFF) as u8),
                                second: (node, port),
                            });
                        }
                        *o = me;
                    }
                }
                top = top.max(lid + count - 1);
                Ok(Block {
                    base: lid,
                    count,
                    port: 0,
                })
            };
        for (idx, node) in topo.iter() {
            match node.node_type {
                NodeType::Switch => {
                    let Some(s) = sw_of(idx) else { continue };
                    if let Some(p0) = node.ports.first() {
                        if p0.lid != 0 {
                            let b = claim(idx, 0, p0.lid, p0.lmc)?;
                            if let Some(v) = blocks.get_mut(s as usize) {
                                v.push(b);
                            }
                        }
                    }
                    for (pn, p) in node.physical_ports() {
                        if let Some((r, _)) = p.remote {
                            match sw_of(r) {
                                Some(t) => {
                                    if let Some(v) = adj.get_mut(s as usize) {
                                        v.push((pn, t));
                                    }
                                }
                                None => {
                                    if let Some(h) = has_ca.get_mut(s as usize) {
                                        *h = true;
                                    }
                                }
                            }
                        }
                    }
                }
                NodeType::Ca | NodeType::Router => {
                    for (pn, p) in node.physical_ports() {
                        let Some((r, rp)) = p.remote else { continue };
                        let Some(s) = sw_of(r) else { continue };
                        if p.lid == 0 {
                            continue;
                        }
                        let mut b = claim(idx, pn, p.lid, p.lmc)?;
                        b.port = rp;
                        if let Some(v) = blocks.get_mut(s as usize) {
                            v.push(b);
                        }
                    }
                }
            }
        }
        for v in &mut blocks {
            v.sort_by_key(|b| b.base);
        }
        let nbrs = adj
            .iter()
            .map(|a| {
                let mut v: Vec<u32> = a.iter().map(|&(_, t)| t).collect();
                v.sort_unstable();
                v.dedup();
                v
            })
            .collect();
        Ok(SwitchGraph {
            nodes,
            guids,
            adj,
            nbrs,
            blocks,
            has_ca,
            lft_top: top,
        })
    }

    /// The switch graph of the cables alone, without LID blocks (for
    /// computations that need no LIDs: multicast trees).
    pub fn cabling(topo: &Topology) -> SwitchGraph {
        let mut index = vec![u32::MAX; topo.len()];
        let mut nodes = Vec::new();
        let mut guids = Vec::new();
        for (idx, node) in topo.iter() {
            if node.is_switch() {
                if let Some(slot) = index.get_mut(idx.as_usize()) {
                    *slot = nodes.len() as u32;
                }
                nodes.push(idx);
                guids.push(node.node_guid);
            }
        }
        let sw_of = |n: NodeIdx| index.get(n.as_usize()).copied().filter(|&s| s != u32::MAX);
        let mut adj = vec![Vec::new(); nodes.len()];
        let mut has_ca = vec![false; nodes.len()];
        for (s, &idx) in nodes.iter().enumerate() {
            let Some(node) = topo.node(idx) else { continue };
            for (pn, p) in node.physical_ports() {
                let Some((r, _)) = p.remote else { continue };
                match sw_of(r) {
                    Some(t) => {
                        if let Some(v) = adj.get_mut(s) {
                            v.push((pn, t));
                        }
                    }
                    None => {
                        if let Some(h) = has_ca.get_mut(s) {
                            *h = true;
                        }
                    }
                }
            }
        }
        let nbrs = adj
            .iter()
            .map(|a: &Vec<(u8, u32)>| {
                let mut v: Vec<u32> = a.iter().map(|&(_, t)| t).collect();
                v.sort_unstable();
                v.dedup();
                v
            })
            .collect();
        SwitchGraph {
            blocks: vec![Vec::new(); nodes.len()],
            nodes,
            guids,
            adj,
            nbrs,
            has_ca,
            lft_top: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Assemble per-switch LFTs into a `ForwardingTables` for `topo`.
    pub fn tables(&self, topo: &Topology, lfts: Vec<Vec<u8>>) -> ForwardingTables {
        let mut out = vec![None; topo.len()];
        for (&node, lft) in self.nodes.iter().zip(lfts) {
            if let Some(slot) = out.get_mut(node.as_usize()) {
                *slot = Some(lft);
            }
        }
        ForwardingTables {
            lft_top: self.lft_top,
            lfts: out,
        }
    }
}

/// All-pairs switch hop counts, `dist[s * n + d]`, [`INF`] when
/// disconnected. Bit-parallel BFS: bit `d` of `next[v]` says "v is at
/// distance `level` from d"; since cables are bidirectional the matrix is
/// symmetric. Rows are split over `threads`.
pub(crate) fn all_pairs_hops(g: &SwitchGraph, threads: usize) -> Result<Vec<u8>, RoutingError> {
    let n = g.len();
    let w = n.div_ceil(64);
    let mut dist = vec![INF; n * n];
    let mut visited = vec![0u64; n * w];
    let mut frontier = vec![0u64; n * w];
    let mut next = vec![0u64; n * w];
    for v in 0..n {
        if let Some(x) = visited.get_mut(v * w + v / 64) {
            *x |= 1 << (v % 64);
        }
        if let Some(x) = frontier.get_mut(v * w + v / 64) {
            *x |= 1 << (v % 64);
        }
        if let Some(x) = dist.get_mut(v * n + v) {
            *x = 0;
        }
    }
    if n == 0 {
        return Ok(dist);
    }
    let threads = threads.clamp(1, n);
    let rows_per = n.div_ceil(threads);
    let mut level: u8 = 0;
    loop {
        if level == INF - 1 {
            return Err(RoutingError::TooDeep);
        }
        level += 1;
        let frontier_ref = &frontier;
        let any = std::thread::scope(|scope| {
            let handles: Vec<_> = next
                .chunks_mut(rows_per * w)
                .zip(visited.chunks_mut(rows_per * w))
                .zip(dist.chunks_mut(rows_per * n))
                .enumerate()
                .map(|(ci, ((next_c, vis_c), dist_c))| {
                    scope.spawn(move || {
                        let mut any = false;
                        let first = ci * rows_per;
                        for (i, ((nx, vis), drow)) in next_c
                            .chunks_mut(w)
                            .zip(vis_c.chunks_mut(w))
                            .zip(dist_c.chunks_mut(n))
                            .enumerate()
                        {
                            let v = first + i;
                            nx.fill(0);
                            for &u in g.nbrs.get(v).map_or(&[][..], Vec::as_slice) {
                                let u = u as usize;
                                if let Some(fu) = frontier_ref.get(u * w..(u + 1) * w) {
                                    for (a, b) in nx.iter_mut().zip(fu) {
                                        *a |= *b;
                                    }
                                }
                            }
                            for (wi, (a, seen)) in nx.iter_mut().zip(vis.iter_mut()).enumerate() {
                                *a &= !*seen;
                                *seen |= *a;
                                let mut bits = *a;
                                while bits != 0 {
                                    let b = bits.trailing_zeros() as usize;
                                    bits &= bits - 1;
                                    if let Some(x) = drow.get_mut(wi * 64 + b) {
                                        *x = level;
                                    }
                                    any = true;
                                }
                            }
                        }
                        any
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or(false))
                .fold(false, |a, b| a | b)
        });
        if !any {
            break;
        }
        std::mem::swap(&mut frontier, &mut next);
    }
    Ok(dist)
}

/// Candidate masks for one source switch, filled by an engine: `ports[j]`
/// is the j-th port tested, and bit `j` of `masks[d * w ..][j / 64]` (with
/// `w = ports.len().div_ceil(64)`) says port `j` is an egress towards
/// destination switch `d`.
#[derive(Default)]
pub(crate) struct Cands {
    pub ports: Vec<u8>,
    pub masks: Vec<u64>,
    pub w: usize,
}

impl Cands {
    /// Reset for `ports` and `n` destinations.
    pub fn reset(&mut self, ports: impl Iterator<Item = u8>, n: usize) {
        self.ports.clear();
        self.ports.extend(ports);
        self.w = self.ports.len().div_ceil(64).max(1);
        self.masks.clear();
        self.masks.resize(n * self.w, 0);
    }

    /// Set bit `j` for every destination `d` where `ok(row_t[d], row_s[d])`.
    /// Written as a straight loop over two byte rows so it vectorises when
    /// there is one mask word per destination.
    pub fn mark(&mut self, j: usize, row_t: &[u8], row_s: &[u8], ok: impl Fn(u8, u8) -> bool) {
        let w = self.w;
        let shift = j % 64;
        if w == 1 {
            for ((m, &a), &b) in self.masks.iter_mut().zip(row_t).zip(row_s) {
                *m |= u64::from(ok(a, b)) << shift;
            }
        } else {
            let word = j / 64;
            for ((m, &a), &b) in self.masks.chunks_exact_mut(w).zip(row_t).zip(row_s) {
                if let Some(x) = m.get_mut(word) {
                    *x |= u64::from(ok(a, b)) << shift;
                }
            }
        }
    }
}

impl Cands {
    /// Up/down "up" candidates: bit `j` where `ds[d]` is INF (no down-only
    /// path) and `ut[d] + 1 == us[d]` (finite).
    pub fn mark_up(&mut self, j: usize, ut: &[u8], us: &[u8], ds: &[u8]) {
        let w = self.w;
        let shift = j % 64;
        let ok = |a: u8, b: u8, c: u8| (c == INF) & (b != INF) & (a.wrapping_add(1) == b);
        if w == 1 {
            for (((m, &a), &b), &c) in self.masks.iter_mut().zip(ut).zip(us).zip(ds) {
                *m |= u64::from(ok(a, b, c)) << shift;
            }
        } else {
            let word = j / 64;
            for (((m, &a), &b), &c) in self.masks.chunks_exact_mut(w).zip(ut).zip(us).zip(ds) {
                if let Some(x) = m.get_mut(word) {
                    *x |= u64::from(ok(a, b, c)) << shift;
                }
            }
        }
    }
}

/// Fill every switch's LFT. `cands(s, c)` fills the candidate masks of
/// source switch `s` for all destinations (the `d == s` entry is ignored).
pub(crate) fn fill<F>(g: &SwitchGraph, threads: usize, cands: F) -> Vec<Vec<u8>>
where
    F: Fn(usize, &mut Cands) + Sync,
{
    let n = g.len();
    let len = usize::from(g.lft_top) + 1;
    if n == 0 {
        return Vec::new();
    }
    let threads = threads.clamp(1, n);
    let cands = &cands;
    // Interleave switches over threads so each gets a similar mix of levels.
    let mut parts: Vec<Vec<(usize, Vec<u8>)>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                scope.spawn(move || {
                    let mut out = Vec::with_capacity(n / threads + 1);
                    let mut c = Cands::default();
                    for s in (t..n).step_by(threads) {
                        cands(s, &mut c);
                        out.push((s, fill_one(g, s, len, &c)));
                    }
                    out
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_default())
            .collect()
    });
    let mut lfts: Vec<Vec<u8>> = vec![Vec::new(); n];
    for part in &mut parts {
        for (s, lft) in part.drain(..) {
            if let Some(slot) = lfts.get_mut(s) {
                *slot = lft;
            }
        }
    }
    lfts
}

fn fill_one(g: &SwitchGraph, s: usize, len: usize, cands: &Cands) -> Vec<u8> {
    let mut lft = vec![UNREACHABLE; len];
    let mut load = [0u32; 256];
    let w = cands.w;
    let mut list: Vec<u8> = Vec::with_capacity(64);
    let mut prev: Option<&[u64]> = None;
    let mut k = 0usize;
    for (d, blocks) in g.blocks.iter().enumerate() {
        if blocks.is_empty() {
            continue;
        }
        if d == s {
            for b in blocks {
                let r = usize::from(b.base)..usize::from(b.base) + usize::from(b.count);
                if let Some(e) = lft.get_mut(r) {
                    e.fill(b.port);
                }
            }
            continue;
        }
        let Some(mask) = cands.masks.get(d * w..(d + 1) * w) else {
            continue;
        };
        if prev != Some(mask) {
            // A new candidate set: list it and start the rotation at its
            // least-loaded port. The same set again just continues the
            // rotation, which keeps its ports within 1 of each other.
            prev = Some(mask);
            list.clear();
            for (wi, &word) in mask.iter().enumerate() {
                let mut bits = word;
                while bits != 0 {
                    let j = wi * 64 + bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    if let Some(&p) = cands.ports.get(j) {
                        list.push(p);
                    }
                }
            }
            k = 0;
            let mut best = u32::MAX;
            for (i, &p) in list.iter().enumerate() {
                let l = load.get(usize::from(p)).copied().unwrap_or(u32::MAX);
                if l < best {
                    best = l;
                    k = i;
                }
            }
        }
        if list.is_empty() {
            continue;
        }
        for b in blocks {
            let r = usize::from(b.base)..usize::from(b.base) + usize::from(b.count);
            if let Some(entries) = lft.get_mut(r) {
                for e in entries {
                    let p = list.get(k).copied().unwrap_or(UNREACHABLE);
                    *e = p;
                    if let Some(l) = load.get_mut(usize::from(p)) {
                        *l += 1;
                    }
                    k += 1;
                    if k >= list.len() {
                        k = 0;
                    }
                }
            }
        }
    }
    lft
}

/// Min-hop routing, balanced over equal-cost ports (see the module doc).
/// LIDs with no path (another fabric component) get [`UNREACHABLE`].
pub fn min_hop(topo: &Topology, opts: &RoutingOptions) -> Result<ForwardingTables, RoutingError> {
    let g = SwitchGraph::build(topo)?;
    let n = g.len();
    let dist = all_pairs_hops(&g, opts.threads)?;
    let row = |x: usize| dist.get(x * n..(x + 1) * n).unwrap_or(&[]);
    let lfts = fill(&g, opts.threads, |s, c| {
        let adj = g.adj.get(s).map_or(&[][..], Vec::as_slice);
        c.reset(adj.iter().map(|&(p, _)| p), n);
        for (j, &(_, t)) in adj.iter().enumerate() {
            // Neighbor t is one hop closer to d than s is.
            c.mark(j, row(t as usize), row(s), |dt, ds| {
                (ds != INF) & (dt.wrapping_add(1) == ds)
            });
        }
    });
    tracing::debug!(
        switches = n,
        lft_top = g.lft_top,
        "min-hop routing computed"
    );
    Ok(g.tables(topo, lfts))
}
