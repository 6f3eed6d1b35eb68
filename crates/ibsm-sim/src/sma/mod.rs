//! The subnet management agent of every simulated node: Get/Set of the SM
//! attributes with IBA semantics, and the port state machine.
//!
//! Status values (IBA 13.4.7, bits 4:2 of the MAD status):
//! * 0x0008 method not supported,
//! * 0x000C method/attribute combination not supported (unknown attribute,
//!   Set of a read-only attribute, attribute the node type does not implement),
//! * 0x001C invalid value in the attribute or its modifier (block out of range,
//!   illegal PortState transition, ...). A Set that fails changes nothing.

use ibsm_mad::{
    AttributeId, Method, NodeInfo, NodeType as MadNodeType, PhysPortState, PortInfo, PortState,
    SmpAttribute, SwitchInfo,
};

use std::time::Duration;

use crate::mkey::MKeyCheck;
use crate::state::{phys, pstate, Fabric, NONE};
use crate::SimConfig;

pub(crate) const STATUS_BAD_METHOD: u16 = 0x0008;
pub(crate) const STATUS_UNSUPPORTED_ATTR: u16 = 0x000C;
pub(crate) const STATUS_INVALID_VALUE: u16 = 0x001C;

/// What the SMA does with a request that reached it.
pub(crate) enum SmaAction {
    /// The response (status + data) has been written; send it back.
    Respond(u16),
    /// Nothing goes back (TrapRepress consumed).
    Consume,
    /// Nothing goes back: the M_Key check failed (IBA 14.2.4).
    MKeyViolation,
}

type AttrResult = Result<[u8; 64], u16>;

/// Block count of a table of `entries` entries, `per_block` per block.
fn blocks(entries: u32, per_block: u32) -> u32 {
    entries.div_ceil(per_block)
}

impl Fabric {
    /// Runs the SMA of the node owning port `arr` (the port that received the SMP) on
    /// a request. `method`, `attr`, `amod` come from the header; `data` is the request
    /// data field and receives the response data. `m_key` is the SMP's M_Key, checked
    /// at `now` (see the `mkey` module) before anything else.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn sma(
        &mut self,
        cfg: &SimConfig,
        now: Duration,
        arr: u32,
        method: Method,
        m_key: u64,
        attr: AttributeId,
        amod: u32,
        data: &mut [u8; 64],
    ) -> SmaAction {
        let known = matches!(method, Method::GET | Method::SET | Method::TRAP_REPRESS);
        let hide_key = if known {
            match self.check_m_key(now, arr, method, m_key) {
                MKeyCheck::Pass { hide_key } => hide_key,
                MKeyCheck::Fail => return SmaAction::MKeyViolation,
            }
        } else {
            false
        };
        let set = match method {
            Method::GET => false,
            Method::SET => true,
            Method::TRAP_REPRESS => return SmaAction::Consume,
            _ => return SmaAction::Respond(STATUS_BAD_METHOD),
        };
        let result = match attr {
            AttributeId::NODE_INFO => self.get_only(set, amod, |f| f.node_info(cfg, arr)),
            AttributeId::NODE_DESCRIPTION => self.get_only(set, amod, |f| f.node_description(arr)),
            AttributeId::SWITCH_INFO => self.switch_info(cfg, arr, amod, set.then_some(&*data)),
            AttributeId::GUID_INFO => self.guid_info(cfg, arr, amod, set.then_some(&*data)),
            AttributeId::PORT_INFO => self.port_info_attr(cfg, arr, amod, set.then_some(&*data)),
            AttributeId::P_KEY_TABLE => self.pkey_table(cfg, arr, amod, set.then_some(&*data)),
            AttributeId::SL_TO_VL_MAPPING_TABLE => self.sl2vl(arr, amod, set.then_some(&*data)),
            AttributeId::VL_ARBITRATION_TABLE => self.vlarb(arr, amod, set.then_some(&*data)),
            AttributeId::LINEAR_FORWARDING_TABLE => self.lft(cfg, arr, amod, set.then_some(&*data)),
            AttributeId::MULTICAST_FORWARDING_TABLE => {
                self.mft(cfg, arr, amod, set.then_some(&*data))
            }
            AttributeId::LED_INFO => self.led_info(arr, amod, set.then_some(&*data)),
            AttributeId::VENDOR_DIAG => {
                if set {
                    Err(STATUS_UNSUPPORTED_ATTR)
                } else if amod > 0xFFFF {
                    Err(STATUS_INVALID_VALUE)
                } else {
                    // NextIndex 0, no vendor diagnostics: every simulated port is healthy.
                    Ok([0u8; 64])
                }
            }
            // RandomFDBCap is 0: no RandomForwardingTable. Unknown attributes, SMInfo on
            // a port without an SM, Notice: method/attribute not supported.
            _ => Err(STATUS_UNSUPPORTED_ATTR),
        };
        match result {
            Ok(mut d) => {
                if hide_key && attr == AttributeId::PORT_INFO {
                    // Level 1: the M_Key field of PortInfo reads 0 without the key.
                    d[..8].fill(0);
                }
                *data = d;
                SmaAction::Respond(0)
            }
            Err(status) => SmaAction::Respond(status),
        }
    }

    fn get_only(
        &self,
        set: bool,
        amod: u32,
        get: impl FnOnce(&Fabric) -> AttrResult,
    ) -> AttrResult {
        if set {
            Err(STATUS_UNSUPPORTED_ATTR)
        } else if amod != 0 {
            Err(STATUS_INVALID_VALUE)
        } else {
            get(self)
        }
    }

    /// (node index, receiving port number, is switch, switch index).
    fn whereami(&self, arr: u32) -> Option<(u32, u8, bool, u32)> {
        let p = self.ports.get(arr as usize)?;
        let n = self.nodes.get(p.node as usize)?;
        Some((p.node, p.num, n.switch != NONE, n.switch))
    }

    fn node_info(&self, cfg: &SimConfig, arr: u32) -> AttrResult {
        let p = self.ports.get(arr as usize).ok_or(STATUS_INVALID_VALUE)?;
        let n = self
            .nodes
            .get(p.node as usize)
            .ok_or(STATUS_INVALID_VALUE)?;
        let port_guid = self.port_info_guid(arr);
        Ok(NodeInfo {
            base_version: 1,
            class_version: 1,
            node_type: MadNodeType::from(n.node_type.to_iba()),
            num_ports: n.num_ports,
            system_image_guid: n.system_image_guid,
            node_guid: n.node_guid,
            port_guid,
            partition_cap: cfg.partition_cap,
            device_id: n.device_id,
            revision: 0,
            local_port_num: p.num,
            vendor_id: n.vendor_id,
        }
        .encode())
    }

    /// NodeInfo.PortGUID of the receiving port (switches: port 0's GUID).
    fn port_info_guid(&self, arr: u32) -> u64 {
        let Some(p) = self.ports.get(arr as usize) else {
            return 0;
        };
        let Some(n) = self.nodes.get(p.node as usize) else {
            return 0;
        };
        let idx = if n.switch != NONE { n.first_port } else { arr };
        self.guids_hw.get(idx as usize).copied().unwrap_or(0)
    }

    fn node_description(&self, arr: u32) -> AttrResult {
        let p = self.ports.get(arr as usize).ok_or(STATUS_INVALID_VALUE)?;
        self.descriptions
            .get(p.node as usize)
            .copied()
            .ok_or(STATUS_INVALID_VALUE)
    }

    fn switch_info(
        &mut self,
        cfg: &SimConfig,
        arr: u32,
        amod: u32,
        set: Option<&[u8; 64]>,
    ) -> AttrResult {
        let (_, _, is_switch, sw) = self.whereami(arr).ok_or(STATUS_INVALID_VALUE)?;
        if !is_switch {
            return Err(STATUS_UNSUPPORTED_ATTR);
        }
        if amod != 0 {
            return Err(STATUS_INVALID_VALUE);
        }
        let rec = self
            .switches
            .get_mut(sw as usize)
            .ok_or(STATUS_INVALID_VALUE)?;
        if let Some(d) = set {
            let req = SwitchInfo::decode(d).map_err(|_| STATUS_INVALID_VALUE)?;
            if u32::from(req.linear_fdb_top) >= u32::from(cfg.linear_fdb_cap).max(1) {
                return Err(STATUS_INVALID_VALUE);
            }
            rec.linear_fdb_top = req.linear_fdb_top;
            rec.multicast_fdb_top = req.multicast_fdb_top;
            rec.default_port = req.default_port;
            rec.default_multicast_primary_port = req.default_multicast_primary_port;
            rec.default_multicast_not_primary_port = req.default_multicast_not_primary_port;
            rec.life_time_value = req.life_time_value & 0x1F;
            // PortStateChange: write 1 to clear, 0 is ignored.
            if req.port_state_change {
                rec.port_state_change = false;
            }
        }
        Ok(SwitchInfo {
            linear_fdb_cap: cfg.linear_fdb_cap,
            random_fdb_cap: 0,
            multicast_fdb_cap: cfg.multicast_fdb_cap,
            linear_fdb_top: rec.linear_fdb_top,
            default_port: rec.default_port,
            default_multicast_primary_port: rec.default_multicast_primary_port,
            default_multicast_not_primary_port: rec.default_multicast_not_primary_port,
            life_time_value: rec.life_time_value,
            port_state_change: rec.port_state_change,
            optimized_sl_to_vl_mapping_programming: 0,
            lids_per_port: 0,
            partition_enforcement_cap: cfg.partition_enforcement_cap,
            inbound_enforcement_cap: cfg.partition_enforcement_cap > 0,
            outbound_enforcement_cap: cfg.partition_enforcement_cap > 0,
            filter_raw_inbound_cap: false,
            filter_raw_outbound_cap: false,
            enhanced_port0: false,
            multicast_fdb_top: rec.multicast_fdb_top,
        }
        .encode())
    }

    fn guid_info(
        &mut self,
        cfg: &SimConfig,
        arr: u32,
        amod: u32,
        set: Option<&[u8; 64]>,
    ) -> AttrResult {
        let (node, _, is_switch, _) = self.whereami(arr).ok_or(STATUS_INVALID_VALUE)?;
        // On a switch only the management port has GUIDInfo.
        let idx = if is_switch {
            self.nodes.get(node as usize).map_or(NONE, |n| n.first_port)
        } else {
            arr
        };
        let cap = u32::from(cfg.guid_cap);
        if cap == 0 {
            return Err(STATUS_UNSUPPORTED_ATTR);
        }
        if amod >= blocks(cap, 8) {
            return Err(STATUS_INVALID_VALUE);
        }
        let first = (amod * 8) as usize;
        if let Some(d) = set {
            let table = self
                .tables
                .guids
                .entry(idx)
                .or_insert_with(|| vec![0u64; cap as usize].into_boxed_slice());
            for (i, chunk) in d.chunks_exact(8).enumerate() {
                let e = first + i;
                // Entry 0 is the hardwired PortGUID: read-only.
                if e == 0 || e >= cap as usize {
                    continue;
                }
                if let (Some(slot), Ok(bytes)) = (table.get_mut(e), <[u8; 8]>::try_from(chunk)) {
                    *slot = u64::from_be_bytes(bytes);
                }
            }
        }
        let hw = self.guids_hw.get(idx as usize).copied().unwrap_or(0);
        let stored = self.tables.guids.get(&idx);
        let mut out = [0u8; 64];
        for (i, chunk) in out.chunks_exact_mut(8).enumerate() {
            let e = first + i;
            let v = if e >= cap as usize {
                0
            } else if e == 0 {
                hw
            } else {
                stored.and_then(|t| t.get(e).copied()).unwrap_or(0)
            };
            chunk.copy_from_slice(&v.to_be_bytes());
        }
        Ok(out)
    }

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

    fn port_info_attr(
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

    fn pkey_table(
        &mut self,
        cfg: &SimConfig,
        arr: u32,
        amod: u32,
        set: Option<&[u8; 64]>,
    ) -> AttrResult {
        let (node, _, is_switch, _) = self.whereami(arr).ok_or(STATUS_INVALID_VALUE)?;
        let n = self.nodes.get(node as usize).ok_or(STATUS_INVALID_VALUE)?;
        let block = amod & 0xFFFF;
        let (idx, size) = if is_switch {
            let port = amod >> 16;
            if port > u32::from(n.num_ports) {
                return Err(STATUS_INVALID_VALUE);
            }
            let size = if port == 0 {
                cfg.partition_cap
            } else {
                cfg.partition_enforcement_cap
            };
            (n.first_port + port, size)
        } else {
            (arr, cfg.partition_cap)
        };
        if size == 0 {
            return Err(STATUS_UNSUPPORTED_ATTR);
        }
        if block >= blocks(u32::from(size), 32) {
            return Err(STATUS_INVALID_VALUE);
        }
        let first = (block * 32) as usize;
        if let Some(d) = set {
            let table = self
                .tables
                .pkeys
                .entry(idx)
                .or_insert_with(|| default_pkeys(size));
            for (i, chunk) in d.chunks_exact(2).enumerate() {
                if let (Some(slot), [a, b]) = (table.get_mut(first + i), chunk) {
                    *slot = u16::from_be_bytes([*a, *b]);
                }
            }
        }
        let stored = self.tables.pkeys.get(&idx);
        let mut out = [0u8; 64];
        for (i, chunk) in out.chunks_exact_mut(2).enumerate() {
            let e = first + i;
            let v = match stored {
                Some(t) => t.get(e).copied().unwrap_or(0),
                None if e == 0 => 0xFFFF,
                None => 0,
            };
            chunk.copy_from_slice(&v.to_be_bytes());
        }
        Ok(out)
    }

    fn sl2vl(&mut self, arr: u32, amod: u32, set: Option<&[u8; 64]>) -> AttrResult {
        let (node, _, is_switch, _) = self.whereami(arr).ok_or(STATUS_INVALID_VALUE)?;
        let n = self.nodes.get(node as usize).ok_or(STATUS_INVALID_VALUE)?;
        let key = if is_switch {
            let in_port = (amod >> 8) & 0xFF;
            let out_port = amod & 0xFF;
            if amod >> 16 != 0
                || in_port > u32::from(n.num_ports)
                || out_port == 0
                || out_port > u32::from(n.num_ports)
            {
                return Err(STATUS_INVALID_VALUE);
            }
            // in_port <= 255 by the mask.
            (n.first_port + out_port, in_port as u8)
        } else {
            (arr, 0)
        };
        if let Some(d) = set {
            let mut t = [0u8; 8];
            t.copy_from_slice(d.get(..8).unwrap_or(&[0u8; 8]));
            if t == [0u8; 8] {
                self.tables.sl2vl.remove(&key);
            } else {
                self.tables.sl2vl.insert(key, t);
            }
        }
        let mut out = [0u8; 64];
        if let Some(t) = self.tables.sl2vl.get(&key) {
            out[..8].copy_from_slice(t);
        }
        Ok(out)
    }

    fn vlarb(&mut self, arr: u32, amod: u32, set: Option<&[u8; 64]>) -> AttrResult {
        let (node, _, is_switch, _) = self.whereami(arr).ok_or(STATUS_INVALID_VALUE)?;
        let n = self.nodes.get(node as usize).ok_or(STATUS_INVALID_VALUE)?;
        let block = amod >> 16;
        if !(1..=4).contains(&block) {
            return Err(STATUS_INVALID_VALUE);
        }
        let idx = if is_switch {
            let port = amod & 0xFFFF;
            if port == 0 || port > u32::from(n.num_ports) {
                return Err(STATUS_INVALID_VALUE);
            }
            n.first_port + port
        } else {
            arr
        };
        // Blocks 1/2 are the low-priority table's lower/upper 32 entries, 3/4 the
        // high-priority table's: a block beyond the port's cap does not exist.
        let pi = self
            .port_info
            .get(idx as usize)
            .ok_or(STATUS_INVALID_VALUE)?;
        let cap = if block <= 2 {
            pi.vl_arbitration_low_cap
        } else {
            pi.vl_arbitration_high_cap
        };
        let upper = block == 2 || block == 4;
        if cap == 0 || (upper && cap <= 32) {
            return Err(STATUS_INVALID_VALUE);
        }
        // block is 1..=4.
        let key = (idx, block as u8);
        if let Some(d) = set {
            self.tables.vlarb.insert(key, *d);
        }
        Ok(self.tables.vlarb.get(&key).copied().unwrap_or([0u8; 64]))
    }

    fn lft(&mut self, cfg: &SimConfig, arr: u32, amod: u32, set: Option<&[u8; 64]>) -> AttrResult {
        let (_, _, is_switch, sw) = self.whereami(arr).ok_or(STATUS_INVALID_VALUE)?;
        if !is_switch || cfg.linear_fdb_cap == 0 {
            return Err(STATUS_UNSUPPORTED_ATTR);
        }
        if amod >= blocks(u32::from(cfg.linear_fdb_cap), 64) {
            return Err(STATUS_INVALID_VALUE);
        }
        let rec = self
            .switches
            .get_mut(sw as usize)
            .ok_or(STATUS_INVALID_VALUE)?;
        let first = (amod * 64) as usize;
        if let Some(d) = set {
            if rec.lft.len() < first + 64 {
                // Lazily grown: only as far as the SM has programmed.
                rec.lft.resize(first + 64, 0xFF);
            }
            if let Some(dst) = rec.lft.get_mut(first..first + 64) {
                dst.copy_from_slice(d);
            }
        }
        let mut out = [0xFFu8; 64];
        if let Some(src) = rec.lft.get(first..first + 64) {
            out.copy_from_slice(src);
        }
        Ok(out)
    }

    fn mft(&mut self, cfg: &SimConfig, arr: u32, amod: u32, set: Option<&[u8; 64]>) -> AttrResult {
        let (node, _, is_switch, sw) = self.whereami(arr).ok_or(STATUS_INVALID_VALUE)?;
        if !is_switch || cfg.multicast_fdb_cap == 0 {
            return Err(STATUS_UNSUPPORTED_ATTR);
        }
        let n = self.nodes.get(node as usize).ok_or(STATUS_INVALID_VALUE)?;
        let position = amod >> 28;
        let block = amod & 0x1FF;
        if amod & 0x0FFF_FE00 != 0
            || block >= blocks(u32::from(cfg.multicast_fdb_cap), 32)
            || position > u32::from(n.num_ports) / 16
        {
            return Err(STATUS_INVALID_VALUE);
        }
        // block < 512 and position < 16 by the masks.
        let key = (sw, block as u16, position as u8);
        if let Some(d) = set {
            if *d == [0u8; 64] {
                self.tables.mft.remove(&key);
            } else {
                self.tables.mft.insert(key, *d);
            }
        }
        Ok(self.tables.mft.get(&key).copied().unwrap_or([0u8; 64]))
    }

    fn led_info(&mut self, arr: u32, amod: u32, set: Option<&[u8; 64]>) -> AttrResult {
        if amod != 0 {
            return Err(STATUS_INVALID_VALUE);
        }
        let node = self
            .ports
            .get(arr as usize)
            .ok_or(STATUS_INVALID_VALUE)?
            .node;
        let rec = self
            .nodes
            .get_mut(node as usize)
            .ok_or(STATUS_INVALID_VALUE)?;
        if let Some(d) = set {
            rec.led_on = d[0] & 0x80 != 0;
        }
        let mut out = [0u8; 64];
        out[0] = if rec.led_on { 0x80 } else { 0 };
        Ok(out)
    }

    // ---- link state machine -------------------------------------------------------

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
    fn link_enable(&mut self, idx: u32) {
        if let Some(h) = self.ports.get_mut(idx as usize) {
            if h.phys == phys::DISABLED {
                h.phys = phys::POLLING;
            }
        }
        self.link_train(idx);
    }
}

fn default_pkeys(size: u16) -> Box<[u16]> {
    let mut v = vec![0u16; usize::from(size)];
    if let Some(first) = v.first_mut() {
        *first = 0xFFFF;
    }
    v.into_boxed_slice()
}
