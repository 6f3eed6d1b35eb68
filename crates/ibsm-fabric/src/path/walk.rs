//! [`walk`]: follow the programmed LFTs from a source end port to a DLID, hop by
//! hop, into a [`Path`] (the switches with their ingress and egress ports, and the
//! link count, MTU and rate a PathRecord reports) or a typed [`PathError`]; and
//! [`path_params`], a PathRecord's numbers for an (SLID, DLID) pair.

use super::lfts::{owns, Lfts, LidIndex, MAX_UNICAST_LID};
use crate::routing::UNREACHABLE;
use crate::topology::{NodeIdx, Rate, Topology};

/// Why a path does not exist.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    /// The index names no node.
    #[error("no node {0}")]
    NoSuchNode(NodeIdx),
    /// The node has no such port.
    #[error("node {node} has no port {port}")]
    NoSuchPort {
        /// The node.
        node: NodeIdx,
        /// The port.
        port: u8,
    },
    /// A switch's physical port, or port 0 of a CA or router: packets start
    /// and end at end ports.
    #[error("node {node} port {port} is not an end port")]
    NotEndPort {
        /// The node.
        node: NodeIdx,
        /// The port.
        port: u8,
    },
    /// Not a unicast LID (0 or above 0xBFFF).
    #[error("LID {0:#06x} is not a unicast LID")]
    NotUnicast(u16),
    /// No port owns the SLID.
    #[error("no port has LID {0:#06x}")]
    UnknownLid(u16),
    /// The packet must leave by a port with no cable (link down).
    #[error("node {node} port {port} is down (no cable)")]
    PortDown {
        /// The node.
        node: NodeIdx,
        /// The port.
        port: u8,
    },
    /// A switch on the way has no LFT.
    #[error("switch {0} has no forwarding table")]
    NoTable(NodeIdx),
    /// The LFT entry is 0xFF or past LinearFDBTop.
    #[error("switch {switch} has no route to LID {dlid:#06x}")]
    NoRoute {
        /// The switch.
        switch: NodeIdx,
        /// Destination LID.
        dlid: u16,
    },
    /// The LFT names port 0 of a switch that does not own the LID, or a port
    /// the switch does not have.
    #[error("switch {switch} sends LID {dlid:#06x} to port {port}, which leads nowhere")]
    DeadEnd {
        /// The switch.
        switch: NodeIdx,
        /// The LFT entry.
        port: u8,
        /// Destination LID.
        dlid: u16,
    },
    /// The packet reached an end port that does not own the LID.
    #[error("LID {dlid:#06x} was delivered to node {node} port {port}, which does not own it")]
    WrongDestination {
        /// The node reached.
        node: NodeIdx,
        /// Its port.
        port: u8,
        /// Destination LID.
        dlid: u16,
    },
    /// The packet came back to a switch it had passed: the LFTs loop.
    #[error("route to LID {dlid:#06x} loops at switch {switch}")]
    Loop {
        /// The switch reached twice.
        switch: NodeIdx,
        /// Destination LID.
        dlid: u16,
    },
    /// The topology is not the one a [`PathTable`](crate::path::PathTable) was
    /// built from.
    #[error("topology has {got} nodes, the path table was built from {built}")]
    TopologyChanged {
        /// Nodes when built.
        built: usize,
        /// Nodes now.
        got: usize,
    },
}

/// One switch a packet passes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathHop {
    /// The switch.
    pub switch: NodeIdx,
    /// Port it came in on (0 when the switch itself is the source).
    pub in_port: u8,
    /// Port its LFT sends it out of (0 when the switch itself owns the DLID).
    pub out_port: u8,
}

/// What a PathRecord reports of a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathSummary {
    /// Cables traversed (HCA - leaf - HCA is 2; a switch to itself 0).
    pub links: u16,
    /// The smallest MTU (IBA code) of every port the packet leaves or enters
    /// over a cable; for a path of no cable, the source port's.
    pub mtu: u8,
    /// The slowest rate of every such port; for a path of no cable, the
    /// source port's.
    pub rate: Rate,
}

impl PathSummary {
    /// The summary of a path of no cable, from `port` of `node` to itself.
    pub(crate) fn at_port(topo: &Topology, node: NodeIdx, port: u8) -> PathSummary {
        let p = topo.node(node).and_then(|n| n.port(port));
        PathSummary {
            links: 0,
            mtu: p.map_or(crate::topology::MTU_256, |p| p.mtu),
            rate: p.map_or(Rate::GBPS_2_5, |p| {
                Rate::of_link(p.link_width, p.link_speed)
            }),
        }
    }
}

/// A walk's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Path {
    /// The source end port.
    pub source: (NodeIdx, u8),
    /// The end port that owns the DLID.
    pub destination: (NodeIdx, u8),
    /// The DLID walked to.
    pub dlid: u16,
    /// The switches passed, in order.
    pub hops: Vec<PathHop>,
    /// Link count, MTU and rate.
    pub summary: PathSummary,
}

/// MTU and rate of the cable at `port` of `node`: the smaller of both ends.
/// `None` when the port has no cable.
pub(crate) fn cable(topo: &Topology, node: NodeIdx, port: u8) -> Option<(NodeIdx, u8, u8, Rate)> {
    let a = topo.node(node)?.port(port)?;
    let (r, rp) = a.remote?;
    let b = topo.node(r)?.port(rp)?;
    let mtu = a.mtu.min(b.mtu);
    let rate =
        Rate::of_link(a.link_width, a.link_speed).min(Rate::of_link(b.link_width, b.link_speed));
    Some((r, rp, mtu, rate))
}

/// Check that `(node, port)` is an end port of `topo`.
pub(crate) fn check_end_port(topo: &Topology, node: NodeIdx, port: u8) -> Result<bool, PathError> {
    let n = topo.node(node).ok_or(PathError::NoSuchNode(node))?;
    if n.port(port).is_none() {
        return Err(PathError::NoSuchPort { node, port });
    }
    if n.is_switch() != (port == 0) {
        return Err(PathError::NotEndPort { node, port });
    }
    Ok(n.is_switch())
}

/// Follow the LFTs from the end port `source` (a CA/router port, or port 0 of
/// a switch) to `dlid`, exactly that LID: with LMC > 0 each of a port's
/// 2^LMC LIDs has its own LFT entries and may take another way.
///
/// A CA source sends out of its own port; each switch sends out of the port
/// its LFT names for `dlid` (port 0: itself, if it owns the LID); the walk
/// ends at the end port owning `dlid`. Visiting a switch twice is a loop.
pub fn walk(
    topo: &Topology,
    lfts: &impl Lfts,
    source: (NodeIdx, u8),
    dlid: u16,
) -> Result<Path, PathError> {
    let (src, sport) = source;
    let src_is_switch = check_end_port(topo, src, sport)?;
    if dlid == 0 || dlid > MAX_UNICAST_LID {
        return Err(PathError::NotUnicast(dlid));
    }
    let owned = |n: NodeIdx, p: u8| topo.node(n).is_some_and(|node| owns(node, p, dlid));
    let mut path = Path {
        source,
        destination: source,
        dlid,
        hops: Vec::new(),
        summary: PathSummary::at_port(topo, src, sport),
    };
    if owned(src, sport) {
        return Ok(path);
    }
    let mut mtu = u8::MAX;
    let mut rate = Rate::GBPS_1200;
    let mut links: u16 = 0;
    let (mut cur, mut in_port) = if src_is_switch {
        (src, 0)
    } else {
        let (r, rp, m, ra) = cable(topo, src, sport).ok_or(PathError::PortDown {
            node: src,
            port: sport,
        })?;
        mtu = mtu.min(m);
        rate = rate.min(ra);
        links += 1;
        if !topo.node(r).is_some_and(|n| n.is_switch()) {
            if !owned(r, rp) {
                return Err(PathError::WrongDestination {
                    node: r,
                    port: rp,
                    dlid,
                });
            }
            path.destination = (r, rp);
            path.summary = PathSummary { links, mtu, rate };
            return Ok(path);
        }
        (r, rp)
    };
    loop {
        let node = topo.node(cur).ok_or(PathError::NoSuchNode(cur))?;
        let out = lfts
            .lft(cur)
            .ok_or(PathError::NoTable(cur))?
            .get(usize::from(dlid))
            .copied()
            .unwrap_or(UNREACHABLE);
        if out == UNREACHABLE {
            return Err(PathError::NoRoute { switch: cur, dlid });
        }
        let dead = PathError::DeadEnd {
            switch: cur,
            port: out,
            dlid,
        };
        if out == 0 {
            if !owns(node, 0, dlid) {
                return Err(dead);
            }
            path.hops.push(PathHop {
                switch: cur,
                in_port,
                out_port: 0,
            });
            path.destination = (cur, 0);
            break;
        }
        if out > node.num_ports() {
            return Err(dead);
        }
        let (r, rp, m, ra) = cable(topo, cur, out).ok_or(PathError::PortDown {
            node: cur,
            port: out,
        })?;
        path.hops.push(PathHop {
            switch: cur,
            in_port,
            out_port: out,
        });
        mtu = mtu.min(m);
        rate = rate.min(ra);
        links = links.saturating_add(1);
        if topo.node(r).is_some_and(|n| n.is_switch()) {
            if path.hops.iter().any(|h| h.switch == r) {
                return Err(PathError::Loop { switch: r, dlid });
            }
            cur = r;
            in_port = rp;
        } else {
            if !owned(r, rp) {
                return Err(PathError::WrongDestination {
                    node: r,
                    port: rp,
                    dlid,
                });
            }
            path.destination = (r, rp);
            break;
        }
    }
    path.summary = if links == 0 {
        PathSummary::at_port(topo, src, sport)
    } else {
        PathSummary { links, mtu, rate }
    };
    Ok(path)
}

/// What the SA's PathRecord needs for (SLID, DLID).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathParams {
    /// Source LID (one of the source port's 2^LMC LIDs).
    pub slid: u16,
    /// Destination LID.
    pub dlid: u16,
    /// Cables, MTU and rate of the forward path.
    pub summary: PathSummary,
    /// PathRecord.Reversible: the destination port's packets to `slid` arrive
    /// too (the reverse walk, which may take another way).
    pub reversible: bool,
}

/// PathRecord numbers for (SLID, DLID) by walking both directions.
pub fn path_params(
    topo: &Topology,
    lfts: &impl Lfts,
    lids: &LidIndex,
    slid: u16,
    dlid: u16,
) -> Result<PathParams, PathError> {
    if slid == 0 || slid > MAX_UNICAST_LID {
        return Err(PathError::NotUnicast(slid));
    }
    let source = lids.owner(slid).ok_or(PathError::UnknownLid(slid))?;
    let fwd = walk(topo, lfts, source, dlid)?;
    let reversible = walk(topo, lfts, fwd.destination, slid).is_ok();
    Ok(PathParams {
        slid,
        dlid,
        summary: fwd.summary,
        reversible,
    })
}
