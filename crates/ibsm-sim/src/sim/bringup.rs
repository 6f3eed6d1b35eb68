//! [`Sim::bring_up`]: the fabric as a master SM leaves it (LIDs, min-hop LFTs, every
//! trained link Active, MasterSMLID everywhere), written straight into the simulated
//! state without running an SM. Test support for what needs a working subnet but is
//! not about building one: GMPs between clients, an SA answering queries.

use std::collections::VecDeque;

use ibsm_fabric::NodeIdx;

use crate::error::SimError;
use crate::state::{pstate, NONE};

use super::simulator::Sim;

/// The unicast LIDs end at 0xBFFF.
const MAX_UNICAST_LID: u16 = 0xBFFF;

/// What [`Sim::bring_up`] assigned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BringUp {
    /// (node, port, LID) of every port that got a LID: CA ports with a cable, switch
    /// port 0. In node order.
    pub lids: Vec<(NodeIdx, u8, u16)>,
    /// The master SM's LID (that of the port given to `bring_up`), now every port's
    /// MasterSMLID.
    pub sm_lid: u16,
}

impl BringUp {
    /// The LID of (node, port); for a switch ask for port 0.
    pub fn lid(&self, node: NodeIdx, port: u8) -> Option<u16> {
        self.lids
            .iter()
            .find(|&&(n, p, _)| n == node && p == port)
            .map(|&(_, _, l)| l)
    }
}

impl Sim {
    /// Programs the fabric as a master SM on CA port `sm` = (node, port) would, without
    /// sending a MAD: LIDs 1, 2, ... in node order (LMC 0) on switch port 0 and on every
    /// CA port with a trained link, min-hop LinearForwardingTables (ties: the lowest
    /// port number) with LinearFDBTop the highest LID, every trained link Active, and
    /// MasterSMLID the SM port's LID on every port that has a LID. Removed nodes are
    /// skipped. SMInfo, P_Keys and the rest keep their power-on values.
    pub fn bring_up(&mut self, sm: (NodeIdx, u8)) -> Result<BringUp, SimError> {
        let sm_port = self.link_port(sm.0, sm.1)?;
        if self.node_rec(sm.0)?.switch != NONE {
            return Err(SimError::NotCaPort {
                node: sm.0,
                port: sm.1,
            });
        }
        // Links: Init/Armed become Active (both ends are trained, or neither).
        for p in &mut self.fabric.ports {
            if p.link_up() {
                p.state = pstate::ACTIVE;
            }
        }
        // LIDs.
        let mut lids = Vec::new();
        let mut owners = Vec::new();
        let mut next: u16 = 1;
        for (n, rec) in self.fabric.nodes.iter().enumerate() {
            if rec.removed {
                continue;
            }
            let ports: Vec<u8> = if rec.switch != NONE {
                vec![0]
            } else {
                (1..=rec.num_ports)
                    .filter(|&p| {
                        self.fabric
                            .ports
                            .get((rec.first_port + u32::from(p)) as usize)
                            .is_some_and(|h| h.link_up())
                    })
                    .collect()
            };
            for p in ports {
                if next > MAX_UNICAST_LID {
                    return Err(SimError::Unsupported(
                        "bring_up: more ports than unicast LIDs",
                    ));
                }
                let idx = rec.first_port + u32::from(p);
                owners.push((idx, next));
                lids.push((NodeIdx(u32::try_from(n).unwrap_or(u32::MAX)), p, next));
                next += 1;
            }
        }
        for &(idx, lid) in &owners {
            if let Some(h) = self.fabric.ports.get_mut(idx as usize) {
                h.lid = lid;
                h.lmc = 0;
            }
        }
        let sm_lid = self.fabric.port(sm_port).map_or(0, |p| p.lid);
        for &(idx, _) in &owners {
            if let Some(pi) = self.fabric.port_info.get_mut(idx as usize) {
                pi.master_sm_lid = sm_lid;
                pi.master_sm_sl = 0;
            }
        }
        // LFTs: a breadth-first search from each LID's owner over switch-to-switch links.
        let top = next.saturating_sub(1);
        let size = (usize::from(top) + 1).div_ceil(64) * 64;
        for sw in &mut self.fabric.switches {
            sw.lft = vec![0xFF; size];
            sw.linear_fdb_top = top;
        }
        for &(dest, lid) in &owners {
            self.route_to(dest, lid);
        }
        tracing::debug!(
            lids = lids.len(),
            sm_lid,
            top,
            "fabric brought up without an SM"
        );
        Ok(BringUp { lids, sm_lid })
    }

    /// Fill every switch's LFT entry for `lid`, owned by port `dest`.
    fn route_to(&mut self, dest: u32, lid: u16) {
        let f = &self.fabric;
        let Some(d) = f.ports.get(dest as usize) else {
            return;
        };
        // (switch node, egress port towards `dest`)
        let mut first = None;
        if f.nodes
            .get(d.node as usize)
            .is_some_and(|n| n.switch != NONE)
        {
            first = Some((d.node, 0u8));
        } else if let Some(r) = f.ports.get(d.remote as usize).filter(|_| d.link_up()) {
            if f.nodes
                .get(r.node as usize)
                .is_some_and(|n| n.switch != NONE)
            {
                first = Some((r.node, r.num));
            }
        }
        let Some(first) = first else {
            return;
        };
        let mut egress: Vec<Option<u8>> = vec![None; f.nodes.len()];
        let mut queue = VecDeque::new();
        if let Some(e) = egress.get_mut(first.0 as usize) {
            *e = Some(first.1);
        }
        queue.push_back(first.0);
        while let Some(s) = queue.pop_front() {
            let Some(n) = f.nodes.get(s as usize) else {
                continue;
            };
            for q in 1..=n.num_ports {
                let Some(h) = f.ports.get((n.first_port + u32::from(q)) as usize) else {
                    continue;
                };
                let Some(r) = f.ports.get(h.remote as usize) else {
                    continue;
                };
                let peer_is_switch = f
                    .nodes
                    .get(r.node as usize)
                    .is_some_and(|pn| pn.switch != NONE && !pn.removed);
                if !h.link_up() || !peer_is_switch {
                    continue;
                }
                if let Some(e @ None) = egress.get_mut(r.node as usize) {
                    *e = Some(r.num);
                    queue.push_back(r.node);
                }
            }
        }
        for (node, e) in egress.iter().enumerate() {
            let Some(port) = *e else { continue };
            let si = self.fabric.nodes.get(node).map_or(NONE, |n| n.switch);
            if let Some(slot) = self
                .fabric
                .switches
                .get_mut(si as usize)
                .and_then(|s| s.lft.get_mut(usize::from(lid)))
            {
                *slot = port;
            }
        }
    }
}
