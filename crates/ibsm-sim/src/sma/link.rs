//! The port state machine of the simulated links: PortState transitions (raising
//! SwitchInfo.PortStateChange where IBA says so), a link falling, training and
//! leaving Disabled. Driven by a PortInfo Set and by the simulator's faults
//! (cable pulled or plugged, node removed).

use crate::state::{phys, pstate, Fabric, NONE};

impl Fabric {
    /// Records a PortState transition of port `idx`, raising SwitchInfo.PortStateChange
    /// when IBA says so (Down<->Init, Armed->Down, Active->Down on a switch port).
    fn transition(&mut self, idx: u32, state: u8, phys_state: u8) {
        let Some(h) = self.ports.get_mut(idx as usize) else {
            return;
        };
        let old = h.state;
        h.state = state;
        h.phys = phys_state;
        let node = h.node;
        let changed = (old == pstate::DOWN && state == pstate::INIT)
            || (old >= pstate::INIT && state == pstate::DOWN);
        if changed {
            let sw = self.nodes.get(node as usize).map_or(NONE, |n| n.switch);
            if let Some(s) = self.switches.get_mut(sw as usize) {
                s.port_state_change = true;
            }
        }
    }

    /// Takes the link of port `idx` down: this end goes Down with `phys_here`, the peer
    /// (if cabled) goes Down/Polling.
    pub(crate) fn link_fall(&mut self, idx: u32, phys_here: u8) {
        let Some(&h) = self.ports.get(idx as usize) else {
            return;
        };
        self.transition(idx, pstate::DOWN, phys_here);
        if h.remote != NONE {
            let peer_phys = self
                .ports
                .get(h.remote as usize)
                .map_or(phys::POLLING, |p| {
                    if p.phys == phys::DISABLED {
                        phys::DISABLED
                    } else {
                        phys::POLLING
                    }
                });
            self.transition(h.remote, pstate::DOWN, peer_phys);
        }
    }

    /// Trains the link of port `idx` if it can come up: cabled, neither end disabled,
    /// neither node removed, and currently Down. Both ends go to Init/LinkUp.
    pub(crate) fn link_train(&mut self, idx: u32) -> bool {
        let Some(&h) = self.ports.get(idx as usize) else {
            return false;
        };
        let Some(&r) = self.ports.get(h.remote as usize) else {
            return false;
        };
        let alive = |f: &Fabric, node: u32| f.nodes.get(node as usize).is_some_and(|n| !n.removed);
        if h.phys == phys::DISABLED
            || r.phys == phys::DISABLED
            || h.unplugged
            || r.unplugged
            || !alive(self, h.node)
            || !alive(self, r.node)
        {
            return false;
        }
        if h.state == pstate::DOWN {
            self.transition(idx, pstate::INIT, phys::LINK_UP);
        }
        if r.state == pstate::DOWN {
            self.transition(h.remote, pstate::INIT, phys::LINK_UP);
        }
        true
    }

    /// PortPhysicalState := Polling on a disabled port: it leaves Disabled and trains.
    pub(super) fn link_enable(&mut self, idx: u32) {
        if let Some(h) = self.ports.get_mut(idx as usize) {
            if h.phys == phys::DISABLED {
                h.phys = phys::POLLING;
            }
        }
        self.link_train(idx);
    }
}
