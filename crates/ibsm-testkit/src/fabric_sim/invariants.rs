//! The invariants of the module doc, checked after every step of a [`Run`]: LIDs are
//! kept, bounded dual mastership, convergence to the best live SM and MasterSMLID after
//! clean sweeps; plus the SM notes (state changes, finished sweeps, harness bugs) they
//! are computed from, and the questions they share (who is MASTER, who is best, who
//! reaches whom).

use std::time::Duration;

use ibsm_core::election::SmState;
use ibsm_mad::PortState;

use super::world::Run;
use crate::sim_driver::NodeNote;
fn rank(priority: u8, guid: u64) -> (u8, std::cmp::Reverse<u64>) {
    (priority, std::cmp::Reverse(guid))
}

impl Run<'_> {
    /// Live SMs in MASTER, by slot.
    pub(super) fn masters(&self) -> Vec<usize> {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, s)| {
                s.node
                    .as_ref()
                    .is_some_and(|n| n.state() == SmState::Master)
            })
            .map(|(i, _)| i)
            .collect()
    }

    /// The highest-ranked live SM.
    fn best_live(&self) -> Option<usize> {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.node.is_some())
            .max_by_key(|(_, s)| rank(s.priority, s.guid))
            .map(|(i, _)| i)
    }

    fn component_of(&self, comps: &[usize], i: usize) -> Option<usize> {
        let (node, _) = self.slots.get(i)?.at;
        comps.get(node.as_usize()).copied()
    }

    /// Two masters that can reach each other.
    fn connected_dual(&self, comps: &[usize]) -> Option<(usize, usize)> {
        let m = self.masters();
        for (k, &a) in m.iter().enumerate() {
            for &b in m.iter().skip(k + 1) {
                if self.component_of(comps, a) == self.component_of(comps, b) {
                    return Some((a, b));
                }
            }
        }
        None
    }

    /// Accounts the time from `self.now` to `next` (the state is constant in between).
    pub(super) fn advance_dual(&mut self, next: Duration) {
        if self.dual_raw {
            self.dual_total += next.saturating_sub(self.now);
        }
    }

    /// A master's heavy sweep completed: the subnet is up when it was clean and every
    /// end port has a LID.
    pub(super) fn subnet_is_up(&self) -> bool {
        let m = self.masters();
        m.len() == 1
            && self.master_sm_lid_checks > 0
            && self
                .end_ports
                .iter()
                .all(|&(n, p, _)| self.sim.port_lid(n, p).is_ok_and(|l| l != 0))
    }

    pub(super) fn collect_notes(&mut self) -> Result<(), String> {
        for i in 0..self.slots.len() {
            let Some(sm) = self.slots.get_mut(i).and_then(|s| s.node.as_mut()) else {
                continue;
            };
            let guid = sm.guid;
            let notes = sm.take_notes();
            for note in notes {
                match note {
                    NodeNote::Bug(b) => return Err(b),
                    NodeNote::State { from, to, reason } => self.transitions.push(format!(
                        "{:>9.3} s  SM {guid:#x}: {from} -> {to} ({reason})",
                        self.now.as_secs_f64()
                    )),
                    NodeNote::MasterSweepDone { started, report } => {
                        let comps = self.components();
                        let mine = self.component_of(&comps, i);
                        let others = self
                            .masters()
                            .into_iter()
                            .filter(|&j| j != i && self.component_of(&comps, j) == mine)
                            .count();
                        let clean = report.failures == 0
                            && started >= self.last_fault
                            && match self.last_multi_master {
                                Some(t) => started > t,
                                None => true,
                            }
                            && (self.now > self.last_fault || !self.faulty)
                            && others == 0
                            && self.masters().contains(&i);
                        if clean {
                            self.check_master_sm_lid_of(i, &comps, "after a clean heavy sweep")?;
                            self.master_sm_lid_checks += 1;
                            if self
                                .quiet_since
                                .is_some_and(|q| started >= q + self.cfg.converge_within)
                            {
                                self.clean_sweep_after_converge = true;
                            }
                        }
                    }
                }
            }
        }
        Ok(())
    }

    pub(super) fn check_master_sm_lid(&self, when: &str) -> Result<(), String> {
        let m = self.masters();
        let [i] = m.as_slice() else {
            return Err(format!("{when}: {} masters, expected one", m.len()));
        };
        self.check_master_sm_lid_of(*i, &self.components(), when)
    }

    /// Every Active end port in the master's component points at the master's LID.
    fn check_master_sm_lid_of(&self, i: usize, comps: &[usize], when: &str) -> Result<(), String> {
        let Some(slot) = self.slots.get(i) else {
            return Ok(());
        };
        let (mn, mp) = slot.at;
        let master_lid = self
            .sim
            .port_lid(mn, mp)
            .map_err(|e| format!("master's port: {e}"))?;
        if master_lid == 0 {
            return Err(format!("{when}: master {:#x} has no LID", slot.guid));
        }
        let mine = comps.get(mn.as_usize());
        for &(n, p, guid) in &self.end_ports {
            if comps.get(n.as_usize()) != mine {
                continue;
            }
            let pi = self
                .sim
                .port_info(n, p)
                .map_err(|e| format!("PortInfo of {}/{p}: {e}", n.0))?;
            if pi.port_state != PortState::Active {
                continue;
            }
            if pi.master_sm_lid != master_lid {
                return Err(format!(
                    "{when}: port {guid:#x} (node {} port {p}) is Active with MasterSMLID {} but master {:#x} has LID {master_lid}",
                    n.0, pi.master_sm_lid, slot.guid
                ));
            }
        }
        Ok(())
    }

    pub(super) fn check(&mut self) -> Result<(), String> {
        // LIDs are kept.
        for &(n, p, guid) in &self.end_ports {
            let lid = self.sim.port_lid(n, p).unwrap_or(0);
            if lid == 0 {
                continue;
            }
            match self.lids.entry(guid) {
                std::collections::btree_map::Entry::Vacant(v) => {
                    v.insert(lid);
                }
                std::collections::btree_map::Entry::Occupied(o) => {
                    if *o.get() != lid {
                        return Err(format!(
                            "port {guid:#x} (node {} port {p}) changed LID {} -> {lid}",
                            n.0,
                            o.get()
                        ));
                    }
                }
            }
        }
        if self.masters().len() > 1 {
            self.last_multi_master = Some(self.now);
        }
        if let [m] = self.masters().as_slice() {
            let g = self.slot_guid(*m);
            if self.last_master.is_some_and(|l| l != g) {
                self.master_changes += 1;
            }
            self.last_master = Some(g);
        }
        // Bounded dual mastership.
        let comps = self.components();
        let dual = self.connected_dual(&comps);
        self.dual_raw = dual.is_some();
        match dual {
            Some((a, b)) if self.loss_until.is_none() => {
                let since = *self.dual_since.get_or_insert(self.now);
                let from = since.max(self.last_net_change);
                let d = self.now.saturating_sub(from);
                self.max_dual = self.max_dual.max(d);
                if d > self.cfg.handover_window {
                    return Err(format!(
                        "SMs {:#x} and {:#x} both MASTER and connected for {} ms (> handover window {} ms)",
                        self.slot_guid(a),
                        self.slot_guid(b),
                        d.as_millis(),
                        self.cfg.handover_window.as_millis()
                    ));
                }
            }
            _ => self.dual_since = None,
        }
        // Convergence.
        if let Some(q) = self.quiet_since {
            if self.now >= q + self.cfg.converge_within {
                let m = self.masters();
                let best = self.best_live();
                if m.len() != 1 || m.first().copied() != best {
                    let names: Vec<String> = m
                        .iter()
                        .map(|&i| format!("{:#x}", self.slot_guid(i)))
                        .collect();
                    return Err(format!(
                        "{} ms after faults stopped: masters [{}], expected exactly the best live SM {:#x}",
                        self.now.saturating_sub(q).as_millis(),
                        names.join(", "),
                        best.map_or(0, |i| self.slot_guid(i))
                    ));
                }
            }
        }
        Ok(())
    }
}
