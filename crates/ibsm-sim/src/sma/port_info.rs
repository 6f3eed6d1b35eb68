//! The SMA's PortInfo: the view a Get returns (switch external ports report the
//! switch's LID and M_Key), and a Set validated completely before anything is
//! written, which drives the port state machine (`link`).

use ibsm_mad::{PhysPortState, PortInfo, PortState, SmpAttribute};

use crate::state::{phys, pstate, Fabric, NONE};
use crate::SimConfig;

use super::common::{AttrResult, STATUS_INVALID_VALUE};

impl Fabric {
    /// The PortInfo a Get returns for port `target`, received on port `arr`.
    pub(crate) fn port_info_view(&self, arr: u32, target: u32) -> Option<PortInfo> {
        let hot = self.ports.get(target as usize)?;
        let recv = self.ports.get(arr as usize)?;
        let node = self.nodes.get(hot.node as usize)?;
        let mut pi = *self.port_info.get(target as usize)?;
        pi.local_port_num = recv.num;
        pi.port_state = PortState::from(hot.state);
        pi.port_physical_state = PhysPortState::from(hot.phys);
        if node.switch != NONE && hot.num != 0 {
            // External switch ports have no LID of their own: report the switch's.
            let p0 = self.ports.get(node.first_port as usize)?;
            let pi0 = self.port_info.get(node.first_port as usize)?;
            pi.lid = p0.lid;
            pi.lmc = 0;
            pi.master_sm_lid = pi0.master_sm_lid;
            // One M_Key per switch (IBA 14.2.4): port 0's.
            pi.m_key = pi0.m_key;
            pi.m_key_protect_bits = pi0.m_key_protect_bits;
            pi.m_key_lease_period = pi0.m_key_lease_period;
            pi.m_key_violations = pi0.m_key_violations;
        } else {
            pi.lid = hot.lid;
            pi.lmc = hot.lmc;
        }
        Some(pi)
    }

    pub(super) fn port_info_attr(
        &mut self,
        cfg: &SimConfig,
        arr: u32,
        amod: u32,
        set: Option<&[u8; 64]>,
    ) -> AttrResult {
        let (node, recv_num, is_switch, _) = self.whereami(arr).ok_or(STATUS_INVALID_VALUE)?;
        let n = self.nodes.get(node as usize).ok_or(STATUS_INVALID_VALUE)?;
        let first = n.first_port;
        if amod > u32::from(n.num_ports) {
            return Err(STATUS_INVALID_VALUE);
        }
        // amod <= num_ports <= 255 checked above.
        let target_num = amod as u8;
        let target_num = match (is_switch, target_num) {
            (false, 0) => recv_num,
            (_, t) => t,
        };
        let target = first + u32::from(target_num);
        if let Some(d) = set {
            if !is_switch && target_num != recv_num {
                // A CA port's PortInfo may be read, never written, through another port.
                return Err(STATUS_INVALID_VALUE);
            }
            let req = PortInfo::decode(d).map_err(|_| STATUS_INVALID_VALUE)?;
            self.set_port_info(cfg, target, is_switch && target_num == 0, &req)?;
        }
        self.port_info_view(arr, target)
            .map(|pi| pi.encode())
            .ok_or(STATUS_INVALID_VALUE)
    }

    /// Applies a SubnSet(PortInfo) to port `target` (validate everything first, then write).
    fn set_port_info(
        &mut self,
        cfg: &SimConfig,
        target: u32,
        mgmt_port: bool,
        req: &PortInfo,
    ) -> Result<(), u16> {
        let hot = *self
            .ports
            .get(target as usize)
            .ok_or(STATUS_INVALID_VALUE)?;
        let is_switch = self
            .nodes
            .get(hot.node as usize)
            .is_some_and(|n| n.switch != NONE);
        let has_lid = !is_switch || mgmt_port;
        let link_port = !mgmt_port;

        // --- validation (IBA 14.2.5.6 and the port state machine of 7.2) ---
        // Writing back the state a Get returned (a read-modify-write SM) changes nothing;
        // IBA only defines NoChange/Down/Armed/Active as written values.
        let new_state = match req.port_state {
            PortState::NoChange => None,
            _ if !link_port => None, // switch port 0 has no link state machine
            s if u8::from(s) == hot.state && hot.state != pstate::DOWN => None,
            PortState::Down => Some(pstate::DOWN),
            // Init is entered by link training, never by an SMP.
            PortState::Armed if matches!(hot.state, pstate::INIT | pstate::ARMED) => {
                Some(pstate::ARMED)
            }
            PortState::Active if matches!(hot.state, pstate::ARMED | pstate::ACTIVE) => {
                Some(pstate::ACTIVE)
            }
            _ => return Err(STATUS_INVALID_VALUE),
        };
        let new_phys = match req.port_physical_state {
            PhysPortState::NoChange => None,
            _ if !link_port => None,
            p if u8::from(p) == hot.phys => None,
            PhysPortState::Polling => Some(phys::POLLING),
            PhysPortState::Disabled => Some(phys::DISABLED),
            _ => return Err(STATUS_INVALID_VALUE),
        };
        if has_lid && req.lid >= 0xC000 {
            // Multicast range or the permissive LID: not a unicast base LID.
            return Err(STATUS_INVALID_VALUE);
        }
        let cur = *self
            .port_info
            .get(target as usize)
            .ok_or(STATUS_INVALID_VALUE)?;
        if link_port {
            if req.neighbor_mtu > cur.mtu_cap {
                return Err(STATUS_INVALID_VALUE);
            }
            if req.operational_vls > cfg.vl_cap {
                return Err(STATUS_INVALID_VALUE);
            }
        }

        // --- write ---
        let pi = self
            .port_info
            .get_mut(target as usize)
            .ok_or(STATUS_INVALID_VALUE)?;
        if has_lid {
            pi.m_key = req.m_key;
            pi.m_key_lease_period = req.m_key_lease_period;
            pi.m_key_protect_bits = req.m_key_protect_bits;
            pi.master_sm_lid = req.master_sm_lid;
            pi.master_sm_sl = req.master_sm_sl;
            pi.subnet_timeout = req.subnet_timeout;
            pi.gid_prefix = req.gid_prefix;
            pi.m_key_violations = req.m_key_violations;
            pi.p_key_violations = req.p_key_violations;
            pi.q_key_violations = req.q_key_violations;
            pi.multicast_pkey_trap_suppression_enabled =
                req.multicast_pkey_trap_suppression_enabled;
        }
        if link_port {
            // 0 means "no change" for these (IBA), and 0 MTU is tolerated the same way.
            if req.link_width_enabled == 0xFF {
                pi.link_width_enabled = pi.link_width_supported;
            } else if req.link_width_enabled != 0 {
                pi.link_width_enabled = req.link_width_enabled;
            }
            if req.link_speed_enabled == 0x0F {
                pi.link_speed_enabled = pi.link_speed_supported;
            } else if req.link_speed_enabled != 0 {
                pi.link_speed_enabled = req.link_speed_enabled;
            }
            if req.link_speed_ext_enabled != 0 {
                pi.link_speed_ext_enabled = req.link_speed_ext_enabled;
            }
            if req.link_down_default_state != 0 {
                pi.link_down_default_state = req.link_down_default_state;
            }
            if req.neighbor_mtu != 0 {
                pi.neighbor_mtu = req.neighbor_mtu;
            }
            if req.operational_vls != 0 {
                pi.operational_vls = req.operational_vls;
            }
            pi.vl_high_limit = req.vl_high_limit;
            pi.vl_stall_count = req.vl_stall_count;
            pi.local_phy_errors = req.local_phy_errors;
            pi.overrun_errors = req.overrun_errors;
            pi.hoq_life = req.hoq_life;
            // Partition enforcement (and raw filtering) at a switch external port
            // works on the P_KeyTable that SwitchInfo.PartitionEnforcementCap sizes
            // (IBA 14.2.5.7, OpenSM's pkey manager sets both bits on the switch port
            // facing a CA); a switch without such tables keeps them 0.
            if !is_switch || cfg.partition_enforcement_cap > 0 {
                pi.partition_enforcement_inbound = req.partition_enforcement_inbound;
                pi.partition_enforcement_outbound = req.partition_enforcement_outbound;
                pi.filter_raw_inbound = req.filter_raw_inbound;
                pi.filter_raw_outbound = req.filter_raw_outbound;
            }
        }
        if let Some(h) = self.ports.get_mut(target as usize) {
            if has_lid {
                h.lid = req.lid;
                // Switch management ports carry LMC 0 (no enhanced port 0 here).
                h.lmc = if is_switch { 0 } else { req.lmc & 7 };
            }
        }
        if let Some(p) = new_phys {
            if p == phys::DISABLED {
                self.link_fall(target, phys::DISABLED);
            } else {
                self.link_enable(target);
            }
        }
        match new_state {
            Some(pstate::DOWN) => {
                // The link drops and, the cable still being there, retrains to Init.
                self.link_fall(target, phys::POLLING);
                self.link_train(target);
            }
            Some(s) => {
                // Validated against the state before this Set; a PortPhysicalState
                // change in the same Set may have taken the link down meanwhile.
                if let Some(h) = self.ports.get_mut(target as usize) {
                    if h.state >= pstate::INIT {
                        h.state = s;
                    }
                }
            }
            None => {}
        }
        Ok(())
    }
}
