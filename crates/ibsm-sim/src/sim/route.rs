//! Forwarding through the fabric: crossing a link (only a trained one for SMPs, only
//! an Active one for GMPs, to a node that is not removed), the directed route out and
//! back (IBA C14-9, C14-13), and LID routing through the LFTs the SM programmed,
//! loops cut after `max_lid_hops`.

use crate::state::NONE;
use crate::wire::{self, Mad};

use super::simulator::{Drop, Sim, PERMISSIVE};

impl Sim {
    /// The port at the far end of the link out of `from`, if the link carries SMPs
    /// (`data` false: trained, Init or later) or data packets (`data` true: both ends
    /// Active).
    #[inline]
    fn cross(&self, from: u32, data: bool) -> Result<u32, Drop> {
        let up = |p: &crate::state::PortHot| {
            if data {
                p.carries_data()
            } else {
                p.link_up()
            }
        };
        let p = self.fabric.ports.get(from as usize).ok_or(Drop::Link)?;
        if !up(p) {
            return Err(Drop::Link);
        }
        let r = self.fabric.ports.get(p.remote as usize).ok_or(Drop::Link)?;
        if !up(r)
            || self
                .fabric
                .nodes
                .get(r.node as usize)
                .is_none_or(|n| n.removed)
        {
            return Err(Drop::Link);
        }
        Ok(p.remote)
    }

    /// Outbound directed route (D = 0), IBA C14-9. `m` leaves port `from` with the
    /// HopPointer already incremented; returns the port where the SMP reaches its
    /// destination SMA (HopPointer = HopCount + 1, ReturnPath filled in).
    pub(super) fn walk_out(&self, m: &mut Mad, mut from: u32) -> Result<u32, Drop> {
        let n = m[wire::HOP_CNT];
        loop {
            let arr = self.cross(from, false)?;
            let a = self.fabric.ports.get(arr as usize).ok_or(Drop::Link)?;
            let h = m[wire::HOP_PTR];
            wire::set_return_path(m, h, a.num);
            if h == n {
                m[wire::HOP_PTR] = n + 1;
                return Ok(arr);
            }
            if h > n {
                return Err(Drop::BadPath);
            }
            // C14-9:2: an intermediate hop must be a switch.
            let node = self.fabric.nodes.get(a.node as usize).ok_or(Drop::Link)?;
            if node.switch == NONE {
                return Err(Drop::BadPath);
            }
            let e = wire::initial_path(m, h + 1);
            if e == 0 || e > node.num_ports {
                return Err(Drop::BadPath);
            }
            m[wire::HOP_PTR] = h + 1;
            from = node.first_port + u32::from(e);
        }
    }

    /// Return trip (D = 1), IBA C14-13. `m` leaves `from` with the HopPointer already
    /// decremented; returns the port where it reaches its requester (HopPointer 0).
    pub(super) fn walk_back(&self, m: &mut Mad, mut from: u32) -> Result<u32, Drop> {
        let n = m[wire::HOP_CNT];
        loop {
            let arr = self.cross(from, false)?;
            let h = m[wire::HOP_PTR];
            if h == 1 {
                // C14-13:3 with DrSLID permissive: hand to the SM.
                m[wire::HOP_PTR] = 0;
                return Ok(arr);
            }
            if h < 2 || h > n {
                return Err(Drop::BadPath);
            }
            let a = self.fabric.ports.get(arr as usize).ok_or(Drop::Link)?;
            let node = self.fabric.nodes.get(a.node as usize).ok_or(Drop::Link)?;
            if node.switch == NONE {
                return Err(Drop::BadPath);
            }
            let e = wire::return_path(m, h - 1);
            if e == 0 || e > node.num_ports {
                return Err(Drop::BadPath);
            }
            m[wire::HOP_PTR] = h - 1;
            from = node.first_port + u32::from(e);
        }
    }

    /// LID routing of an SMP injected at port `from` (a CA port, or a switch's port 0)
    /// towards `dlid`, through the LFTs the SM has programmed. Returns the receiving
    /// port (for a switch: the port the packet entered by, or port 0 when injected there).
    pub(super) fn route_lid(&self, from: u32, dlid: u16) -> Result<u32, Drop> {
        self.route_lid_on(from, dlid, false)
    }

    /// [`Sim::route_lid`] for a data packet (a GMP): the same LFT walk, but every link
    /// crossed must be Active at both ends.
    pub(super) fn route_lid_data(&self, from: u32, dlid: u16) -> Result<u32, Drop> {
        self.route_lid_on(from, dlid, true)
    }

    fn route_lid_on(&self, from: u32, dlid: u16, data: bool) -> Result<u32, Drop> {
        let f = &self.fabric;
        let p = f.ports.get(from as usize).ok_or(Drop::Link)?;
        let node = f.nodes.get(p.node as usize).ok_or(Drop::Link)?;
        if node.removed {
            return Err(Drop::Link);
        }
        // `at` is (switch node, port the packet entered by) while inside a switch.
        let mut at = if node.switch != NONE {
            Some((p.node, from))
        } else if dlid != PERMISSIVE && p.owns_lid(dlid) {
            // To our own LID: the HCA loops it back without touching the wire.
            return Ok(from);
        } else {
            None
        };
        let mut cur = from;
        let mut hops = 0u16;
        loop {
            if let Some((sn, entered)) = at {
                let n = f.nodes.get(sn as usize).ok_or(Drop::Link)?;
                let sw = f.switches.get(n.switch as usize).ok_or(Drop::Link)?;
                let own = f.ports.get(n.first_port as usize).map_or(0, |p0| p0.lid);
                if dlid == PERMISSIVE || (own != 0 && dlid == own) {
                    return Ok(entered);
                }
                let e = sw.lft_lookup(dlid).ok_or(Drop::Unrouted)?;
                if e == 0 {
                    return Ok(entered);
                }
                if e > n.num_ports {
                    return Err(Drop::Unrouted);
                }
                hops = hops.saturating_add(1);
                if hops > self.cfg.max_lid_hops || hops == u16::MAX {
                    return Err(Drop::Unrouted);
                }
                cur = n.first_port + u32::from(e);
            }
            let arr = self.cross(cur, data)?;
            let a = f.ports.get(arr as usize).ok_or(Drop::Link)?;
            let an = f.nodes.get(a.node as usize).ok_or(Drop::Link)?;
            if an.switch != NONE {
                at = Some((a.node, arr));
                continue;
            }
            if dlid == PERMISSIVE || a.owns_lid(dlid) {
                return Ok(arr);
            }
            return Err(Drop::Unrouted);
        }
    }
}
