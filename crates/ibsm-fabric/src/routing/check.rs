//! Checks on programmed forwarding tables: hop-by-hop walks and the channel
//! dependency graph (Dally & Seitz: routing is deadlock-free when the graph
//! of "a packet holding channel A may wait for channel B" has no cycle).

use std::collections::HashMap;

use super::{ForwardingTables, UNREACHABLE};
use crate::topology::{Node, NodeIdx, Topology};

/// Why a walk did not reach its LID.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WalkError {
    /// The start node is not in the topology.
    #[error("no node {0}")]
    NoSuchNode(NodeIdx),
    /// The start is a CA with no cabled port.
    #[error("node {0} has no cabled port")]
    NotCabled(NodeIdx),
    /// A switch has no LFT.
    #[error("switch {0} has no forwarding table")]
    NoTable(NodeIdx),
    /// The LFT entry is unreachable (or beyond LinearFDBTop).
    #[error("switch {at} has no route to LID {dlid:#06x}")]
    Unreachable {
        /// The switch.
        at: NodeIdx,
        /// Destination LID.
        dlid: u16,
    },
    /// The LFT points at a port without a cable (or port 0 of a switch that
    /// does not own the LID).
    #[error("switch {at} sends LID {dlid:#06x} to port {port}, which leads nowhere")]
    DeadEnd {
        /// The switch.
        at: NodeIdx,
        /// The port.
        port: u8,
        /// Destination LID.
        dlid: u16,
    },
    /// The packet reached a CA or router that does not own the LID.
    #[error("LID {dlid:#06x} was delivered to node {at}, which does not own it")]
    WrongNode {
        /// Where it ended.
        at: NodeIdx,
        /// Destination LID.
        dlid: u16,
    },
    /// More hops than nodes: the tables loop.
    #[error("route from {from} to LID {dlid:#06x} loops")]
    Loop {
        /// Start node.
        from: NodeIdx,
        /// Destination LID.
        dlid: u16,
    },
}

/// The port of `node` whose LID block holds `dlid` (port 0 for a switch).
fn owning_port(node: &Node, dlid: u16) -> Option<u8> {
    let holds = |lid: u16, lmc: u8| {
        lid != 0 && dlid >= lid && u32::from(dlid) < u32::from(lid) + (1u32 << lmc.min(7))
    };
    if node.is_switch() {
        let p0 = node.ports.first()?;
        holds(p0.lid, p0.lmc).then_some(0)
    } else {
        node.physical_ports()
            .find(|(_, p)| holds(p.lid, p.lmc))
            .map(|(n, _)| n)
    }
}

/// Follow the LFTs from `from` to `dlid`. Returns every hop as (node,
/// egress port); the last element is (destination node, the port that owns
/// `dlid`: 0 on a switch). A CA start leaves by its first cabled port.
pub fn walk(
    topo: &Topology,
    fts: &ForwardingTables,
    from: NodeIdx,
    dlid: u16,
) -> Result<Vec<(NodeIdx, u8)>, WalkError> {
    let start = topo.node(from).ok_or(WalkError::NoSuchNode(from))?;
    if let Some(p) = owning_port(start, dlid) {
        return Ok(vec![(from, p)]);
    }
    let mut path = Vec::new();
    let mut cur = from;
    if !start.is_switch() {
        let (p, r) = start
            .physical_ports()
            .find_map(|(n, p)| p.remote.map(|r| (n, r)))
            .ok_or(WalkError::NotCabled(from))?;
        path.push((from, p));
        cur = r.0;
    }
    for _ in 0..=topo.len() {
        let node = topo.node(cur).ok_or(WalkError::NoSuchNode(cur))?;
        if let Some(p) = owning_port(node, dlid) {
            path.push((cur, p));
            return Ok(path);
        }
        if !node.is_switch() {
            return Err(WalkError::WrongNode { at: cur, dlid });
        }
        let port = fts
            .lft(cur)
            .ok_or(WalkError::NoTable(cur))?
            .get(usize::from(dlid))
            .copied()
            .unwrap_or(UNREACHABLE);
        if port == UNREACHABLE {
            return Err(WalkError::Unreachable { at: cur, dlid });
        }
        let next = (port != 0)
            .then(|| topo.neighbor(cur, port))
            .flatten()
            .ok_or(WalkError::DeadEnd {
                at: cur,
                port,
                dlid,
            })?;
        path.push((cur, port));
        cur = next.0;
    }
    Err(WalkError::Loop { from, dlid })
}

/// Every LID routing should reach: switch port 0 blocks and the blocks of
/// CA/router ports cabled to a switch.
fn routed_lids(topo: &Topology) -> Vec<u16> {
    let mut lids = Vec::new();
    let mut push = |lid: u16, lmc: u8| {
        if lid != 0 {
            for i in 0..(1u32 << lmc.min(7)) {
                if let Ok(l) = u16::try_from(u32::from(lid) + i) {
                    lids.push(l);
                }
            }
        }
    };
    for (_, node) in topo.iter() {
        if node.is_switch() {
            if let Some(p0) = node.ports.first() {
                push(p0.lid, p0.lmc);
            }
        } else {
            for (_, p) in node.physical_ports() {
                let to_switch = p
                    .remote
                    .and_then(|(r, _)| topo.node(r))
                    .is_some_and(Node::is_switch);
                if to_switch {
                    push(p.lid, p.lmc);
                }
            }
        }
    }
    lids.sort_unstable();
    lids
}

/// Walk from every switch to every routed LID; the first failure. Returns
/// the number of (switch, LID) pairs checked. Cost is switches x LIDs x
/// hops: meant for tests and small fabrics, not for every sweep of a large
/// one.
pub fn verify_all_reachable(topo: &Topology, fts: &ForwardingTables) -> Result<usize, WalkError> {
    let lids = routed_lids(topo);
    let mut n = 0;
    for (idx, node) in topo.iter() {
        if !node.is_switch() {
            continue;
        }
        for &lid in &lids {
            walk(topo, fts, idx, lid)?;
            n += 1;
        }
    }
    Ok(n)
}

/// Every (switch, LID) pair whose walk fails, with the reason.
pub fn unreachable_pairs(
    topo: &Topology,
    fts: &ForwardingTables,
) -> Vec<(NodeIdx, u16, WalkError)> {
    let lids = routed_lids(topo);
    let mut out = Vec::new();
    for (idx, node) in topo.iter() {
        if !node.is_switch() {
            continue;
        }
        for &lid in &lids {
            if let Err(e) = walk(topo, fts, idx, lid) {
                out.push((idx, lid, e));
            }
        }
    }
    out
}

/// Search the channel dependency graph for a cycle. Channels are the
/// switch-to-switch cables in one direction, named by (switch, egress
/// port); channel (a, pa) -> (b, pb) is a dependency when some LID is sent
/// by `a` over `pa` to `b` and by `b` over `pb` to another switch. Returns
/// `Err(cycle)` with the channels of one cycle in order.
pub fn check_deadlock_free(
    topo: &Topology,
    fts: &ForwardingTables,
) -> Result<(), Vec<(NodeIdx, u8)>> {
    // Number the switch-to-switch channels.
    let mut id: HashMap<(NodeIdx, u8), u32> = HashMap::new();
    let mut chans: Vec<(NodeIdx, u8, NodeIdx)> = Vec::new();
    for (idx, node) in topo.iter() {
        if !node.is_switch() {
            continue;
        }
        for (pn, p) in node.physical_ports() {
            if let Some((r, _)) = p.remote {
                if topo.node(r).is_some_and(Node::is_switch) {
                    id.insert((idx, pn), chans.len() as u32);
                    chans.push((idx, pn, r));
                }
            }
        }
    }
    let mut succ: Vec<Vec<u32>> = vec![Vec::new(); chans.len()];
    for (c, &(a, pa, b)) in chans.iter().enumerate() {
        let (Some(la), Some(lb)) = (fts.lft(a), fts.lft(b)) else {
            continue;
        };
        for (&ea, &eb) in la.iter().zip(lb) {
            if ea != pa {
                continue;
            }
            if let Some(&next) = id.get(&(b, eb)) {
                if let Some(v) = succ.get_mut(c) {
                    if !v.contains(&next) {
                        v.push(next);
                    }
                }
            }
        }
    }
    // Iterative DFS; 0 white, 1 on stack, 2 done.
    let mut color = vec![0u8; chans.len()];
    for root in 0..chans.len() {
        if color.get(root) != Some(&0) {
            continue;
        }
        let mut stack: Vec<(u32, usize)> = vec![(root as u32, 0)];
        if let Some(c) = color.get_mut(root) {
            *c = 1;
        }
        while let Some(&mut (v, ref mut i)) = stack.last_mut() {
            let next = succ.get(v as usize).and_then(|s| s.get(*i)).copied();
            *i += 1;
            match next {
                None => {
                    if let Some(c) = color.get_mut(v as usize) {
                        *c = 2;
                    }
                    stack.pop();
                }
                Some(w) => match color.get(w as usize) {
                    Some(0) => {
                        if let Some(c) = color.get_mut(w as usize) {
                            *c = 1;
                        }
                        stack.push((w, 0));
                    }
                    Some(1) => {
                        let start = stack.iter().position(|&(x, _)| x == w).unwrap_or(0);
                        return Err(stack
                            .get(start..)
                            .unwrap_or(&[])
                            .iter()
                            .filter_map(|&(x, _)| chans.get(x as usize).map(|&(n, p, _)| (n, p)))
                            .collect());
                    }
                    _ => {}
                },
            }
        }
    }
    Ok(())
}
