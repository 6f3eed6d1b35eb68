//! What the MASTER last configured, kept for the `ibsm.v1.Fabric` API (topology, LIDs,
//! routes through the programmed LFTs, partitions).
//!
//! Why a snapshot rather than asking the instance thread: the configurator lives on the
//! SM's MAD thread, and a control call must never queue behind a sweep of a large
//! fabric. After every master heavy sweep the thread publishes one immutable
//! [`FabricView`] (`Snapshot::fabric`, an `Arc`, so reading it costs a pointer copy);
//! the gRPC side answers from it. A non-master answers from its replica instead (see
//! `server::FabricService`), which carries LIDs and cabling but no LFTs.
//!
//! [`FabricView::route`] walks LIDs through the LFTs exactly as a switch forwards: look
//! up DLID in the LFT, leave by that port, follow the cable. It reports the first thing
//! that stops a packet (unknown LID, no LFT entry, a port without a cable, a loop).

use std::collections::{BTreeMap, HashSet};

use ibsm_core::subnet::{Partition, SubnetManager};
use ibsm_fabric::{NodeIdx, NodeType, Topology};

/// LFT value of an unprogrammed entry (IBA: 0xFF drops the packet).
pub const LFT_DROP: u8 = 0xFF;

/// The MASTER's fabric after one heavy sweep.
#[derive(Debug, Clone)]
pub struct FabricView {
    /// Wall clock of the sweep, ms since the Unix epoch.
    pub taken_unix_ms: u64,
    /// The topology with the LIDs as assigned.
    pub topology: Topology,
    /// Switch NodeGUID -> (LinearFDBTop, LFT indexed by LID).
    pub lfts: BTreeMap<u64, (u16, Vec<u8>)>,
    /// The configured partitions (besides the default one).
    pub partitions: Vec<Partition>,
    /// `port_states[node][port]`: (PortState, PortPhysicalState) as the sweep left
    /// them (the SA's view: a link the sweep activated is Active), 0 when not read.
    pub port_states: Vec<Vec<(u8, u8)>>,
    /// Cables an earlier view had whose port now reads not Active (a pulled cable):
    /// the far end is no longer reached, so the topology alone would forget them.
    pub lost: Vec<LostLink>,
    /// `read_lids[node][port]`: the LID in the port's PortInfo as the sweep's
    /// discovery read it on the wire, before the sweep wrote anything (0: not read).
    pub read_lids: Vec<Vec<u16>>,
}

/// A cable of an earlier view that is down now (see [`FabricView::lost`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LostLink {
    /// The end still reached: its NodeGUID and port number.
    pub node_guid: u64,
    pub port: u8,
    /// Its PortState and PortPhysicalState now.
    pub state: (u8, u8),
    /// The far end as last seen: NodeGUID, port, NodeType, NodeDescription.
    pub remote_node_guid: u64,
    pub remote_port: u8,
    pub remote_type: u8,
    pub remote_description: String,
}

impl PartialEq for FabricView {
    /// Two views are the same publication (a view is immutable once published).
    fn eq(&self, other: &FabricView) -> bool {
        self.taken_unix_ms == other.taken_unix_ms && self.lfts == other.lfts
    }
}

impl Eq for FabricView {}

/// One LID assignment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LidOf {
    /// Port GUID.
    pub port_guid: u64,
    /// Base LID.
    pub base_lid: u16,
    /// LMC (2^LMC LIDs from the base).
    pub lmc: u8,
    /// Node holding the port.
    pub node: NodeIdx,
    /// Port number (0 for a switch).
    pub port: u8,
}

/// One switch a routed packet passes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hop {
    /// Switch NodeGUID.
    pub node_guid: u64,
    /// Its NodeDescription.
    pub description: String,
    /// Port the packet enters by (0: it starts here).
    pub in_port: u8,
    /// Port the LFT sends it out of (0: delivered to the switch itself).
    pub out_port: u8,
}

/// A route from one LID to another.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// Port GUID owning the source LID.
    pub src_port_guid: u64,
    /// Port GUID owning the destination LID.
    pub dst_port_guid: u64,
    /// Switches in order.
    pub hops: Vec<Hop>,
}

/// Why a route cannot be walked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RouteError {
    /// The LID belongs to no port (a bad request).
    #[error("{which} LID {lid} is assigned to no port (assigned LIDs: {known})")]
    UnknownLid {
        /// "source" or "destination".
        which: &'static str,
        /// The LID asked for.
        lid: u16,
        /// Summary of the assigned ranges.
        known: String,
    },
    /// A switch on the path has no LFT entry for the destination.
    #[error("switch {guid:#018x} ({desc}) has no LFT entry for LID {dlid} ({why}); hops so far: {so_far}")]
    Unprogrammed {
        /// Switch NodeGUID.
        guid: u64,
        /// Its description.
        desc: String,
        /// The destination.
        dlid: u16,
        /// Beyond LinearFDBTop, 0xFF, or no LFT programmed at all.
        why: String,
        /// The path walked.
        so_far: String,
    },
    /// The LFT names a port without a cable.
    #[error("switch {guid:#018x} ({desc}) forwards LID {dlid} to port {port}, which has no cable; hops so far: {so_far}")]
    DeadPort {
        /// Switch NodeGUID.
        guid: u64,
        /// Its description.
        desc: String,
        /// The destination.
        dlid: u16,
        /// The egress port.
        port: u8,
        /// The path walked.
        so_far: String,
    },
    /// The packet reached a CA or router that does not own the destination.
    #[error("LID {dlid} is delivered to {desc} port {port} (GUID {guid:#018x}), which does not own it; hops so far: {so_far}")]
    WrongEnd {
        /// The destination.
        dlid: u16,
        /// The end node's description.
        desc: String,
        /// Its port GUID.
        guid: u64,
        /// Port number.
        port: u8,
        /// The path walked.
        so_far: String,
    },
    /// The LFTs send the packet around in a circle.
    #[error("routing loop for LID {dlid}: switch {guid:#018x} ({desc}) is reached twice; hops: {so_far}")]
    Loop {
        /// The destination.
        dlid: u16,
        /// The switch seen twice.
        guid: u64,
        /// Its description.
        desc: String,
        /// The path walked.
        so_far: String,
    },
}

impl FabricView {
    /// The view of `subnet` after a heavy sweep (`None` before its first one).
    /// `prev` (the view this one replaces) lends the cables that went down since.
    pub fn of(
        subnet: &SubnetManager,
        partitions: &[Partition],
        taken_unix_ms: u64,
        prev: Option<&FabricView>,
    ) -> Option<FabricView> {
        let res = subnet.last_discovery()?;
        // The SA's PortInfo is what the sweep left (activated links Active); the
        // discovery's is what it read before activating.
        let sa = subnet
            .sa_fabric()
            .filter(|f| f.port_info.len() == res.port_info.len());
        let infos = sa.map_or(&res.port_info, |f| &f.port_info);
        let port_states: Vec<Vec<(u8, u8)>> = infos
            .iter()
            .map(|ports| {
                ports
                    .iter()
                    .map(|p| {
                        p.map_or((0, 0), |p| {
                            (u8::from(p.port_state), u8::from(p.port_physical_state))
                        })
                    })
                    .collect()
            })
            .collect();
        // What the wire said, not what this sweep assigned.
        let read_lids: Vec<Vec<u16>> = res
            .port_info
            .iter()
            .map(|ports| ports.iter().map(|p| p.map_or(0, |p| p.lid)).collect())
            .collect();
        let mut view = FabricView {
            read_lids,
            taken_unix_ms,
            topology: res.topology.clone(),
            lfts: subnet
                .programmed_lfts()
                .map(|(g, top, t)| (g, (top, t.to_vec())))
                .collect(),
            partitions: partitions.to_vec(),
            port_states,
            lost: Vec::new(),
        };
        if let Some(prev) = prev {
            view.lost = view.lost_since(prev);
        }
        Some(view)
    }

    /// (PortState, PortPhysicalState) of a port, (0, 0) when not read.
    pub fn port_state(&self, node: NodeIdx, port: usize) -> (u8, u8) {
        self.port_states
            .get(node.as_usize())
            .and_then(|v| v.get(port))
            .copied()
            .unwrap_or((0, 0))
    }

    /// The LID `port` of `node` had in its PortInfo as the sweep read it (0: not read).
    pub fn read_lid(&self, node: NodeIdx, port: usize) -> u16 {
        self.read_lids
            .get(node.as_usize())
            .and_then(|v| v.get(port))
            .copied()
            .unwrap_or(0)
    }

    /// [`FabricView::read_lid`] of an end port (a CA's port, a switch's port 0); 0 for
    /// a switch's external ports, which have no LID of their own.
    pub fn end_port_read_lid(&self, node: NodeIdx, port: usize, is_switch: bool) -> u16 {
        if is_switch && port != 0 {
            return 0;
        }
        self.read_lid(node, port)
    }

    /// Cables of `prev` (and its own lost ones) whose end is still here, without a
    /// cable and not Active.
    fn lost_since(&self, prev: &FabricView) -> Vec<LostLink> {
        let here: BTreeMap<u64, NodeIdx> = self
            .topology
            .iter()
            .map(|(i, n)| (n.node_guid, i))
            .collect();
        let still_down = |guid: u64, port: u8| {
            let idx = here.get(&guid)?;
            let node = self.topology.node(*idx)?;
            let p = node.port(port)?;
            let state = self.port_state(*idx, usize::from(port));
            (p.remote.is_none() && state.0 != 4).then_some(state)
        };
        let mut out = Vec::new();
        for (_, n) in prev.topology.iter() {
            for (num, p) in n.physical_ports() {
                let Some((rn, rp)) = p.remote else { continue };
                let Some(far) = prev.topology.node(rn) else {
                    continue;
                };
                if let Some(state) = still_down(n.node_guid, num) {
                    out.push(LostLink {
                        node_guid: n.node_guid,
                        port: num,
                        state,
                        remote_node_guid: far.node_guid,
                        remote_port: rp,
                        remote_type: far.node_type.to_iba(),
                        remote_description: far.description.clone(),
                    });
                }
            }
        }
        for l in &prev.lost {
            if let Some(state) = still_down(l.node_guid, l.port) {
                if !out
                    .iter()
                    .any(|o| (o.node_guid, o.port) == (l.node_guid, l.port))
                {
                    out.push(LostLink { state, ..l.clone() });
                }
            }
        }
        // A cable between two ends both still here is listed once (by its lower end).
        out.retain(|l| {
            !here.contains_key(&l.remote_node_guid)
                || (l.node_guid, l.port) < (l.remote_node_guid, l.remote_port)
        });
        out
    }

    /// Every port with a LID: switches by port 0, CAs and routers by physical port.
    pub fn lids(&self) -> Vec<LidOf> {
        let mut out = Vec::new();
        for (idx, node) in self.topology.iter() {
            let ports: Vec<(u8, &ibsm_fabric::Port)> = if node.is_switch() {
                node.port(0).map(|p| (0, p)).into_iter().collect()
            } else {
                node.physical_ports().collect()
            };
            for (num, p) in ports {
                if p.lid != 0 {
                    out.push(LidOf {
                        port_guid: p.port_guid,
                        base_lid: p.lid,
                        lmc: if node.is_switch() { 0 } else { p.lmc },
                        node: idx,
                        port: num,
                    });
                }
            }
        }
        out.sort_by_key(|l| l.base_lid);
        out
    }

    /// The port owning `lid` (within base..base+2^LMC).
    pub fn owner(&self, lid: u16) -> Option<LidOf> {
        self.lids().into_iter().find(|l| {
            let span = 1u32 << l.lmc.min(7);
            u32::from(lid) >= u32::from(l.base_lid) && u32::from(lid) < u32::from(l.base_lid) + span
        })
    }

    fn known_lids(&self) -> String {
        let lids = self.lids();
        match (lids.first(), lids.last()) {
            (Some(a), Some(b)) => {
                format!("{} ports, LIDs {}..{}", lids.len(), a.base_lid, b.base_lid)
            }
            _ => "none".into(),
        }
    }

    /// Walk `src` -> `dst` through the programmed LFTs.
    pub fn route(&self, src: u16, dst: u16) -> Result<Route, RouteError> {
        let s = self.owner(src).ok_or_else(|| RouteError::UnknownLid {
            which: "source",
            lid: src,
            known: self.known_lids(),
        })?;
        let d = self.owner(dst).ok_or_else(|| RouteError::UnknownLid {
            which: "destination",
            lid: dst,
            known: self.known_lids(),
        })?;
        let t = &self.topology;
        let mut hops: Vec<Hop> = Vec::new();
        let so_far = |hops: &[Hop]| -> String {
            if hops.is_empty() {
                return "none".into();
            }
            hops.iter()
                .map(|h| format!("{:#x}[{}->{}]", h.node_guid, h.in_port, h.out_port))
                .collect::<Vec<_>>()
                .join(" ")
        };
        // Where the packet is: (node, port it entered by; 0 = it starts on this switch).
        let mut at: (NodeIdx, u8) = match t.node(s.node) {
            Some(n) if n.is_switch() => (s.node, 0),
            Some(n) => match n.port(s.port).and_then(|p| p.remote) {
                Some(r) => r,
                None => {
                    return Err(RouteError::DeadPort {
                        guid: n.node_guid,
                        desc: n.description.clone(),
                        dlid: dst,
                        port: s.port,
                        so_far: "none".into(),
                    })
                }
            },
            None => {
                return Err(RouteError::UnknownLid {
                    which: "source",
                    lid: src,
                    known: self.known_lids(),
                })
            }
        };
        let mut seen = HashSet::new();
        loop {
            let Some(node) = t.node(at.0) else {
                return Err(RouteError::UnknownLid {
                    which: "destination",
                    lid: dst,
                    known: self.known_lids(),
                });
            };
            if !node.is_switch() {
                if at.0 == d.node && at.1 == d.port {
                    break;
                }
                return Err(RouteError::WrongEnd {
                    dlid: dst,
                    desc: node.description.clone(),
                    guid: node.port(at.1).map_or(node.node_guid, |p| p.port_guid),
                    port: at.1,
                    so_far: so_far(&hops),
                });
            }
            if !seen.insert(at.0) {
                return Err(RouteError::Loop {
                    dlid: dst,
                    guid: node.node_guid,
                    desc: node.description.clone(),
                    so_far: so_far(&hops),
                });
            }
            if at.0 == d.node {
                hops.push(Hop {
                    node_guid: node.node_guid,
                    description: node.description.clone(),
                    in_port: at.1,
                    out_port: 0,
                });
                break;
            }
            let unprogrammed = |why: String, hops: &[Hop]| RouteError::Unprogrammed {
                guid: node.node_guid,
                desc: node.description.clone(),
                dlid: dst,
                why,
                so_far: so_far(hops),
            };
            let Some((top, lft)) = self.lfts.get(&node.node_guid) else {
                return Err(unprogrammed(
                    "no LFT programmed on this switch".into(),
                    &hops,
                ));
            };
            if dst > *top {
                return Err(unprogrammed(format!("beyond LinearFDBTop {top}"), &hops));
            }
            let out = match lft.get(usize::from(dst)) {
                Some(&LFT_DROP) | None => {
                    return Err(unprogrammed("entry is 0xFF (drop)".into(), &hops))
                }
                Some(&p) => p,
            };
            hops.push(Hop {
                node_guid: node.node_guid,
                description: node.description.clone(),
                in_port: at.1,
                out_port: out,
            });
            match node.port(out).and_then(|p| p.remote).filter(|_| out != 0) {
                Some(next) => at = next,
                None => {
                    hops.pop();
                    return Err(RouteError::DeadPort {
                        guid: node.node_guid,
                        desc: node.description.clone(),
                        dlid: dst,
                        port: out,
                        so_far: so_far(&hops),
                    });
                }
            }
        }
        Ok(Route {
            src_port_guid: s.port_guid,
            dst_port_guid: d.port_guid,
            hops,
        })
    }

    /// (switches, CAs, routers, cables).
    pub fn counts(&self) -> (u32, u32, u32, u32) {
        let (mut sw, mut ca, mut rt, mut ends) = (0u32, 0u32, 0u32, 0u32);
        for (_, n) in self.topology.iter() {
            match n.node_type {
                NodeType::Switch => sw += 1,
                NodeType::Ca => ca += 1,
                NodeType::Router => rt += 1,
            }
            ends += u32::try_from(
                n.physical_ports()
                    .filter(|(_, p)| p.remote.is_some())
                    .count(),
            )
            .unwrap_or(u32::MAX);
        }
        (sw, ca, rt, ends / 2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ibsm_fabric::Node;

    /// ca1 - sw1 - sw2 - ca2, LIDs: sw1 1, sw2 2, ca1 3, ca2 4.
    fn line() -> FabricView {
        let mut t = Topology::new();
        let mut n = |ty, g, ports, d: &str| t.add_node(Node::new(ty, g, ports, d));
        let sw1 = n(NodeType::Switch, 0x10, 4, "sw1").unwrap_or(NodeIdx(0));
        let sw2 = n(NodeType::Switch, 0x20, 4, "sw2").unwrap_or(NodeIdx(0));
        let ca1 = n(NodeType::Ca, 0x30, 1, "ca1").unwrap_or(NodeIdx(0));
        let ca2 = n(NodeType::Ca, 0x40, 1, "ca2").unwrap_or(NodeIdx(0));
        for (a, pa, b, pb) in [(ca1, 1, sw1, 1), (sw1, 2, sw2, 2), (sw2, 1, ca2, 1)] {
            t.connect(a, pa, b, pb).expect("connect");
        }
        for (node, port, lid) in [(sw1, 0, 1), (sw2, 0, 2), (ca1, 1, 3), (ca2, 1, 4)] {
            t.set_port_lid(node, port, lid, 0).expect("lid");
        }
        let mut lfts = BTreeMap::new();
        // lft[lid] = port; 0 = the switch itself.
        lfts.insert(0x10, (4, vec![LFT_DROP, 0, 2, 1, 2]));
        lfts.insert(0x20, (4, vec![LFT_DROP, 2, 0, 2, 1]));
        FabricView {
            taken_unix_ms: 1,
            topology: t,
            lfts,
            partitions: Vec::new(),
            port_states: Vec::new(),
            lost: Vec::new(),
            read_lids: Vec::new(),
        }
    }

    #[test]
    fn the_lid_read_on_the_wire_is_kept_apart_from_the_assigned_one() {
        let v = FabricView {
            read_lids: vec![vec![1], vec![2], vec![0, 9]],
            ..line()
        };
        // ca1 port 1 read LID 9 on the wire, whatever the topology assigned.
        assert_eq!(v.read_lid(NodeIdx(2), 1), 9);
        assert_eq!(v.read_lid(NodeIdx(2), 0), 0);
        // Not read (no such port or node): 0, never a panic.
        assert_eq!(v.read_lid(NodeIdx(2), 7), 0);
        assert_eq!(v.read_lid(NodeIdx(40), 1), 0);
    }

    #[test]
    fn a_pulled_cable_stays_in_the_view_as_down_until_it_comes_back() {
        let before = line();
        // ca2's cable pulled: the next sweep reaches sw1, sw2 and ca1 only, and reads
        // sw2 port 1 Down/Polling.
        let mut t = Topology::new();
        let mut n = |ty, g, ports, d: &str| t.add_node(Node::new(ty, g, ports, d));
        let sw1 = n(NodeType::Switch, 0x10, 4, "sw1").unwrap_or(NodeIdx(0));
        let sw2 = n(NodeType::Switch, 0x20, 4, "sw2").unwrap_or(NodeIdx(0));
        let ca1 = n(NodeType::Ca, 0x30, 1, "ca1").unwrap_or(NodeIdx(0));
        for (a, pa, b, pb) in [(ca1, 1, sw1, 1), (sw1, 2, sw2, 2)] {
            t.connect(a, pa, b, pb).expect("connect");
        }
        let mut states = vec![vec![(4, 5); 5]; 3];
        states[1][1] = (1, 2);
        let after = FabricView {
            topology: t,
            port_states: states,
            ..line()
        };
        let lost = after.lost_since(&before);
        assert_eq!(
            lost,
            [LostLink {
                node_guid: 0x20,
                port: 1,
                state: (1, 2),
                remote_node_guid: 0x40,
                remote_port: 1,
                remote_type: 1,
                remote_description: "ca2".into(),
            }]
        );
        // Still down a sweep later: kept; back up (Active): gone.
        let later = FabricView {
            lost: lost.clone(),
            ..after.clone()
        };
        assert_eq!(after.lost_since(&later), lost);
        let mut up = after.clone();
        up.port_states[1][1] = (4, 5);
        assert!(up.lost_since(&later).is_empty());
    }

    #[test]
    fn routes_walk_the_lfts() {
        let v = line();
        let r = v.route(3, 4).expect("route");
        assert_eq!(r.src_port_guid, 0x31);
        assert_eq!(r.dst_port_guid, 0x41);
        let path: Vec<(u64, u8, u8)> = r
            .hops
            .iter()
            .map(|h| (h.node_guid, h.in_port, h.out_port))
            .collect();
        assert_eq!(path, vec![(0x10, 1, 2), (0x20, 2, 1)]);
        // To a switch: delivered at its port 0.
        let r = v.route(3, 2).expect("to switch");
        assert_eq!(r.hops.last().map(|h| h.out_port), Some(0));
        // From a switch.
        let r = v.route(1, 4).expect("from switch");
        assert_eq!(r.hops.first().map(|h| h.in_port), Some(0));
        assert_eq!(v.lids().len(), 4);
        assert_eq!(v.counts(), (2, 2, 0, 3));
    }

    #[test]
    fn route_errors_say_why() {
        let mut v = line();
        assert!(matches!(
            v.route(3, 99),
            Err(RouteError::UnknownLid {
                which: "destination",
                ..
            })
        ));
        assert!(matches!(
            v.route(0, 4),
            Err(RouteError::UnknownLid {
                which: "source",
                ..
            })
        ));
        // Unprogrammed entry.
        if let Some((_, t)) = v.lfts.get_mut(&0x20) {
            t[4] = LFT_DROP;
        }
        let e = v.route(3, 4).expect_err("drop");
        assert!(
            matches!(e, RouteError::Unprogrammed { guid: 0x20, .. }),
            "{e}"
        );
        assert!(e.to_string().contains("0x10[1->2]"), "{e}");
        // A loop: sw2 sends LID 4 back to sw1.
        if let Some((_, t)) = v.lfts.get_mut(&0x20) {
            t[4] = 2;
        }
        let e = v.route(3, 4).expect_err("loop");
        assert!(matches!(e, RouteError::Loop { guid: 0x10, .. }), "{e}");
        // A port without a cable.
        if let Some((_, t)) = v.lfts.get_mut(&0x20) {
            t[4] = 3;
        }
        assert!(matches!(
            v.route(3, 4),
            Err(RouteError::DeadPort { port: 3, .. })
        ));
        // Beyond LinearFDBTop.
        if let Some((top, _)) = v.lfts.get_mut(&0x10) {
            *top = 3;
        }
        let e = v.route(3, 4).expect_err("top");
        assert!(e.to_string().contains("LinearFDBTop 3"), "{e}");
    }
}
