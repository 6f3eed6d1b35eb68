//! Port activation pipelined with distribution.
//!
//! A link's ports go Init -> Armed -> Active as soon as both of its end nodes
//! are programmed (every distribution SMP of each answered or failed, or the
//! node dead), not after the whole fabric is: the Arm Sets of the link's two
//! ends go out together, and the Active Sets once both Arm Sets are answered,
//! because IBA's port state machine (and ibsim, which enforces it) takes a
//! port to Active only when the port across the link is Armed or Active. A
//! link's ports are thus never activated before the LFTs, PortInfo, P_Keys,
//! SLtoVL and VLArbitration of both its ends are in place, which is all that
//! configuring before activating is for; nothing waits for another switch.
//!
//! Port state Sets that are ready go to the MAD agent before any further
//! distribution SMP, so activation rides along with distribution and the
//! window stays full to the end; the sweep ends when the last Set of either
//! kind is answered. What a port is moved to depends only on the state
//! discovery read (Init: Armed then Active; Armed: Active), as before.

use ibsm_fabric::{NodeIdx, Topology};

use super::sweep::{Op, Pipeline, Sweep};
use crate::discovery::DiscoveryResult;

/// PortState values (IBA 14.2.5.6).
const INIT: u8 = 2;
const ARMED: u8 = 3;
const ACTIVE: u8 = 4;

/// A fresh pipeline for a topology of `n` nodes.
pub(super) fn pipeline(n: usize) -> Pipeline {
    Pipeline {
        pending: vec![0; n],
        distributed: vec![false; n],
        dist_left: n,
        ..Pipeline::default()
    }
}

/// Ports of `node` that carry a link we configure (cable known at both ends),
/// and the SM's own CA port even without a cable.
pub(super) fn link_ports(res: &DiscoveryResult, node: NodeIdx) -> Vec<u8> {
    let topo: &Topology = &res.topology;
    let Some(nd) = topo.node(node) else {
        return Vec::new();
    };
    let mut ports: Vec<u8> = nd
        .physical_ports()
        .filter(|(_, p)| p.remote.is_some())
        .map(|(num, _)| num)
        .collect();
    if !nd.is_switch() {
        if let Some((l, lp)) = res.local {
            if l == node && !ports.contains(&lp) {
                ports.push(lp);
            }
        }
    }
    ports
}

/// `count` distribution SMPs were planned for `node` (0 for a node skipped as
/// dead); with none, its distribution is over at once.
pub(super) fn planned(sw: &mut Sweep, node: usize, count: usize) {
    if let Some(p) = sw.pipe.pending.get_mut(node) {
        *p = p.saturating_add(u32::try_from(count).unwrap_or(u32::MAX));
        if *p == 0 {
            node_distributed(sw, node);
        }
    }
}

/// `op` left the sweep: answered (whatever its status), failed after retries,
/// or dropped because its node is dead.
pub(super) fn op_done(sw: &mut Sweep, op: Op) {
    match op {
        Op::State {
            node,
            port,
            state: ARMED,
        } => {
            let key = link_key(sw, node, port);
            let left = match sw.pipe.arms_left.get_mut(&key) {
                Some(n) => {
                    *n = n.saturating_sub(1);
                    *n
                }
                None => return,
            };
            if left == 0 {
                sw.pipe.arms_left.remove(&key);
                let ends = ends_of(sw, node, port);
                release_active(sw, &ends);
            }
        }
        Op::State { .. } => {}
        _ => {
            let node = op.node() as usize;
            let expanded = node < sw.cursor;
            if let Some(p) = sw.pipe.pending.get_mut(node) {
                *p = p.saturating_sub(1);
                if *p == 0 && expanded {
                    node_distributed(sw, node);
                }
            }
        }
    }
}

fn node_distributed(sw: &mut Sweep, node: usize) {
    match sw.pipe.distributed.get_mut(node) {
        Some(d) if !*d => *d = true,
        _ => return,
    }
    sw.pipe.dist_left = sw.pipe.dist_left.saturating_sub(1);
    let idx = NodeIdx(node as u32);
    for p in link_ports(&sw.res, idx) {
        match sw.res.topology.neighbor(idx, p) {
            None => link_ready(sw, &[(idx.0, p)]),
            Some((rn, rp)) => {
                let other_done = sw
                    .pipe
                    .distributed
                    .get(rn.as_usize())
                    .copied()
                    .unwrap_or(true);
                // A cable between two ports of one node is seen from both of them.
                let first_end = rn != idx || p < rp;
                if other_done && first_end {
                    link_ready(sw, &[(idx.0, p), (rn.0, rp)]);
                }
            }
        }
    }
}

/// Both ends of a link are programmed: arm the ends in Init; activate at once
/// when none needs arming.
fn link_ready(sw: &mut Sweep, ends: &[(u32, u8)]) {
    let mut arms = 0u8;
    for &(node, port) in ends {
        if !is_dead(sw, node) && port_state(sw, node, port) == INIT {
            sw.pipe.ready.push_back(Op::State {
                node,
                port,
                state: ARMED,
            });
            arms += 1;
        }
    }
    if arms == 0 {
        release_active(sw, ends);
    } else if let Some(&(node, port)) = ends.first() {
        let key = link_key(sw, node, port);
        sw.pipe.arms_left.insert(key, arms);
    }
}

/// Every end of a link whose Arm Sets are all answered: Active where discovery
/// read Init or Armed.
fn release_active(sw: &mut Sweep, ends: &[(u32, u8)]) {
    for &(node, port) in ends {
        if !is_dead(sw, node) && matches!(port_state(sw, node, port), INIT | ARMED) {
            sw.pipe.ready.push_back(Op::State {
                node,
                port,
                state: ACTIVE,
            });
        }
    }
}

fn is_dead(sw: &Sweep, node: u32) -> bool {
    sw.dead.get(node as usize).copied().unwrap_or(true)
}

/// PortState as discovery read it (0 when unknown).
fn port_state(sw: &Sweep, node: u32, port: u8) -> u8 {
    sw.res
        .port_info
        .get(node as usize)
        .and_then(|ports| ports.get(usize::from(port)))
        .and_then(|pi| pi.as_ref())
        .map_or(0, |pi| u8::from(pi.port_state))
}

/// The link's ends, this one first.
fn ends_of(sw: &Sweep, node: u32, port: u8) -> Vec<(u32, u8)> {
    let mut ends = vec![(node, port)];
    if let Some((rn, rp)) = sw.res.topology.neighbor(NodeIdx(node), port) {
        ends.push((rn.0, rp));
    }
    ends
}

/// The link's lower end: one key for the link whichever end asks.
fn link_key(sw: &Sweep, node: u32, port: u8) -> (u32, u8) {
    match sw.res.topology.neighbor(NodeIdx(node), port) {
        Some((rn, rp)) => (node, port).min((rn.0, rp)),
        None => (node, port),
    }
}
