//! Up*/Down* routing.

use std::collections::VecDeque;

use super::{fill, ForwardingTables, RoutingError, RoutingOptions, SwitchGraph, INF};
use crate::topology::{NodeIdx, Topology};

/// Multi-source BFS distance over the switch graph ([`INF`]-saturated u32).
fn bfs_from(g: &SwitchGraph, sources: impl Iterator<Item = usize>) -> Vec<u32> {
    let mut dist = vec![u32::MAX; g.len()];
    let mut q = VecDeque::new();
    for s in sources {
        if let Some(x) = dist.get_mut(s) {
            if *x == u32::MAX {
                *x = 0;
                q.push_back(s);
            }
        }
    }
    while let Some(v) = q.pop_front() {
        let dv = dist.get(v).copied().unwrap_or(u32::MAX);
        for &u in g.nbrs.get(v).map_or(&[][..], Vec::as_slice) {
            if let Some(x) = dist.get_mut(u as usize) {
                if *x == u32::MAX {
                    *x = dv + 1;
                    q.push_back(u as usize);
                }
            }
        }
    }
    dist
}

/// Candidate roots (switch numbers): the switches with no CA attached at
/// the greatest hop distance from any CA-attached switch; in a fat tree
/// those are the top-level switches (spines/cores). When every switch has
/// a CA (or none has), the switch with the smallest eccentricity (lowest
/// NodeGUID on ties) is the single root. Every fabric component without a
/// candidate gets its lowest-GUID switch, so every switch has a root.
fn auto_root_set(g: &SwitchGraph) -> Vec<usize> {
    let n = g.len();
    let leafdist = bfs_from(g, (0..n).filter(|&s| g.has_ca.get(s) == Some(&true)));
    let max = leafdist
        .iter()
        .copied()
        .filter(|&d| d != u32::MAX)
        .max()
        .unwrap_or(0);
    let mut roots: Vec<usize> = if max > 0 {
        (0..n).filter(|&s| leafdist.get(s) == Some(&max)).collect()
    } else {
        // Smallest eccentricity; a BFS per switch is fine for the fabrics
        // where this happens (every switch has hosts: small or irregular).
        let mut best: Option<(u32, u64, usize)> = None;
        for s in 0..n {
            let ecc = bfs_from(g, std::iter::once(s))
                .into_iter()
                .filter(|&d| d != u32::MAX)
                .max()
                .unwrap_or(0);
            let key = (ecc, g.guids.get(s).copied().unwrap_or(u64::MAX), s);
            let better = match best {
                None => true,
                Some(b) => (key.0, key.1) < (b.0, b.1),
            };
            if better {
                best = Some(key);
            }
        }
        best.map(|b| b.2).into_iter().collect()
    };
    cover_components(g, &mut roots);
    roots
}

/// Add the lowest-GUID switch of every component that has no root.
fn cover_components(g: &SwitchGraph, roots: &mut Vec<usize>) {
    loop {
        let rank = bfs_from(g, roots.iter().copied());
        let orphan = (0..g.len())
            .filter(|&s| rank.get(s) == Some(&u32::MAX))
            .min_by_key(|&s| g.guids.get(s).copied().unwrap_or(u64::MAX));
        match orphan {
            Some(s) => {
                // The lowest GUID of its component.
                let comp = bfs_from(g, std::iter::once(s));
                let low = (0..g.len())
                    .filter(|&t| comp.get(t) != Some(&u32::MAX))
                    .min_by_key(|&t| g.guids.get(t).copied().unwrap_or(u64::MAX))
                    .unwrap_or(s);
                roots.push(low);
            }
            None => return,
        }
    }
}

/// The NodeGUIDs [`up_down`] picks as roots when given none.
pub fn auto_roots(topo: &Topology) -> Result<Vec<u64>, RoutingError> {
    let g = SwitchGraph::build(topo)?;
    let roots = auto_root_set(&g);
    Ok(roots
        .into_iter()
        .filter_map(|s| g.guids.get(s).copied())
        .collect())
}

/// `row_a[i] = min(row_a[i], row_b[i] + 1)` (saturating at INF).
fn relax(a: &mut [u8], b: &[u8]) {
    for (x, &y) in a.iter_mut().zip(b) {
        *x = (*x).min(y.saturating_add(1));
    }
}

/// Two rows of a flat square matrix, the first mutable.
fn rows(m: &mut [u8], n: usize, a: usize, b: usize) -> Option<(&mut [u8], &[u8])> {
    if a == b {
        return None;
    }
    if a < b {
        let (lo, hi) = m.split_at_mut(b * n);
        Some((lo.get_mut(a * n..(a + 1) * n)?, hi.get(..n)?))
    } else {
        let (lo, hi) = m.split_at_mut(a * n);
        Some((hi.get_mut(..n)?, lo.get(b * n..(b + 1) * n)?))
    }
}

struct Ranked {
    /// Position in (rank, GUID) order: smaller = more "up".
    pos: Vec<u32>,
    /// `d[s * n + t]`: down-only hops from s to t.
    down: Vec<u8>,
    /// `u[s * n + t]`: legal (up* down*) hops, down-only when that exists.
    up: Vec<u8>,
}

fn rank(g: &SwitchGraph, roots: &[usize]) -> Ranked {
    let n = g.len();
    let rank = bfs_from(g, roots.iter().copied());
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&s| {
        (
            rank.get(s).copied().unwrap_or(u32::MAX),
            g.guids.get(s).copied().unwrap_or(u64::MAX),
        )
    });
    let mut pos = vec![0u32; n];
    for (i, &s) in order.iter().enumerate() {
        if let Some(p) = pos.get_mut(s) {
            *p = i as u32;
        }
    }
    let p = |s: u32| pos.get(s as usize).copied().unwrap_or(0);
    // Down-only distances: a down neighbor has a larger position, so it is
    // final when visited in decreasing position order.
    let mut down = vec![INF; n * n];
    for &s in order.iter().rev() {
        if let Some(x) = down.get_mut(s * n + s) {
            *x = 0;
        }
        for &t in g.nbrs.get(s).map_or(&[][..], Vec::as_slice) {
            if p(t) > p(s as u32) {
                if let Some((a, b)) = rows(&mut down, n, s, t as usize) {
                    relax(a, b);
                }
            }
        }
    }
    // Up then down: up neighbors (smaller position) are final first.
    let mut up = vec![INF; n * n];
    for &s in &order {
        for &t in g.nbrs.get(s).map_or(&[][..], Vec::as_slice) {
            if p(t) < p(s as u32) {
                if let Some((a, b)) = rows(&mut up, n, s, t as usize) {
                    relax(a, b);
                }
            }
        }
        if let (Some(urow), Some(drow)) =
            (up.get_mut(s * n..(s + 1) * n), down.get(s * n..(s + 1) * n))
        {
            for (u, &d) in urow.iter_mut().zip(drow) {
                if d != INF {
                    *u = d;
                }
            }
        }
    }
    Ranked { pos, down, up }
}

/// True when some switch cannot reach a CA-attached switch of its own
/// component with these roots.
fn misses_hosts(g: &SwitchGraph, r: &Ranked) -> bool {
    let n = g.len();
    let comp = components(g);
    (0..n).any(|s| {
        (0..n).any(|d| {
            g.has_ca.get(d) == Some(&true)
                && comp.get(s) == comp.get(d)
                && r.up.get(s * n + d) == Some(&INF)
        })
    })
}

fn components(g: &SwitchGraph) -> Vec<u32> {
    let mut comp = vec![u32::MAX; g.len()];
    let mut next = 0;
    for s in 0..g.len() {
        if comp.get(s) != Some(&u32::MAX) {
            continue;
        }
        for (t, d) in bfs_from(g, std::iter::once(s)).into_iter().enumerate() {
            if d != u32::MAX {
                if let Some(c) = comp.get_mut(t) {
                    *c = next;
                }
            }
        }
        next += 1;
    }
    comp
}

/// Up*/Down* routing: deadlock-free for any topology.
///
/// Switches are ranked by BFS hop distance from the roots and ordered by
/// (rank, NodeGUID); a hop towards a smaller key is "up". A route is any
/// number of up hops followed by any number of down hops, and a switch
/// that has a down-only path to a destination always takes it, so no packet
/// turns from down to up and the channel dependency graph has no cycle.
///
/// `roots`: NodeGUIDs of switches, or `None` for the automatic choice: the
/// switches with no CA attached that are farthest (in switch hops) from any
/// CA-attached switch (the top level of a fat tree), else the most central
/// switch. If those roots would leave some switch without a legal route to
/// a CA-attached switch (possible in irregular fabrics with several
/// candidates), the lowest-GUID candidate alone is used, which always
/// connects a component.
///
/// As in OpenSM's updn, switch LIDs that have no up*/down* path from a
/// given switch (e.g. spine to spine in a fat tree: that would need a
/// valley) stay [`super::UNREACHABLE`] in that switch's table; every CA/router
/// LID is reachable from every switch, and every LID from every
/// CA-attached switch, so the SM reaches all switches and they all answer.
pub fn up_down(
    topo: &Topology,
    roots: Option<&[u64]>,
    opts: &RoutingOptions,
) -> Result<ForwardingTables, RoutingError> {
    let g = SwitchGraph::build(topo)?;
    let n = g.len();
    let root_set: Vec<usize> = match roots {
        Some(guids) => {
            let mut v = Vec::with_capacity(guids.len());
            for &guid in guids {
                let idx: NodeIdx = topo
                    .find_by_guid(guid)
                    .ok_or(RoutingError::UnknownRoot(guid))?;
                let s = g
                    .nodes
                    .iter()
                    .position(|&x| x == idx)
                    .ok_or(RoutingError::RootNotSwitch(guid))?;
                v.push(s);
            }
            cover_components(&g, &mut v);
            v
        }
        None => auto_root_set(&g),
    };
    let mut ranked = rank(&g, &root_set);
    if roots.is_none() && root_set.len() > 1 && misses_hosts(&g, &ranked) {
        let mut single: Vec<usize> = root_set
            .iter()
            .copied()
            .min_by_key(|&s| g.guids.get(s).copied().unwrap_or(u64::MAX))
            .into_iter()
            .collect();
        cover_components(&g, &mut single);
        tracing::info!(
            candidates = root_set.len(),
            "up/down: several roots leave hosts unreachable; using one root"
        );
        ranked = rank(&g, &single);
    }
    if ranked.down.contains(&(INF - 1)) || ranked.up.contains(&(INF - 1)) {
        return Err(RoutingError::TooDeep);
    }
    let pos = &ranked.pos;
    let p = |s: usize| pos.get(s).copied().unwrap_or(0);
    let (down, up) = (&ranked.down, &ranked.up);
    let drow = |x: usize| down.get(x * n..(x + 1) * n).unwrap_or(&[]);
    let urow = |x: usize| up.get(x * n..(x + 1) * n).unwrap_or(&[]);
    let lfts = fill(&g, opts.threads, |s, c| {
        let adj = g.adj.get(s).map_or(&[][..], Vec::as_slice);
        c.reset(adj.iter().map(|&(port, _)| port), n);
        let (ds_row, us_row) = (drow(s), urow(s));
        for (j, &(_, t)) in adj.iter().enumerate() {
            let t = t as usize;
            if p(t) > p(s) {
                // Down: only on a down-only path, one hop shorter.
                c.mark(j, drow(t), ds_row, |dt, ds| {
                    (ds != INF) & (dt.wrapping_add(1) == ds)
                });
            } else {
                // Up: only when s has no down-only path to d.
                c.mark_up(j, urow(t), us_row, ds_row);
            }
        }
    });
    let unreachable = (0..n)
        .flat_map(|s| (0..n).map(move |d| (s, d)))
        .filter(|&(s, d)| {
            g.blocks.get(d).is_some_and(|b| !b.is_empty()) && up.get(s * n + d) == Some(&INF)
        })
        .count();
    tracing::debug!(
        switches = n,
        roots = root_set.len(),
        unreachable_switch_pairs = unreachable,
        "up/down routing computed"
    );
    Ok(g.tables(topo, lfts))
}
