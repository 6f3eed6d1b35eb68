//! The SMA's node-wide attributes: NodeInfo, NodeDescription, SwitchInfo (with
//! PortStateChange, write 1 to clear) and LedInfo.

use ibsm_mad::{NodeInfo, NodeType as MadNodeType, SmpAttribute, SwitchInfo};

use crate::state::{Fabric, NONE};
use crate::SimConfig;

use super::common::{AttrResult, STATUS_INVALID_VALUE, STATUS_UNSUPPORTED_ATTR};

impl Fabric {
    pub(super) fn node_info(&self, cfg: &SimConfig, arr: u32) -> AttrResult {
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

    pub(super) fn node_description(&self, arr: u32) -> AttrResult {
        let p = self.ports.get(arr as usize).ok_or(STATUS_INVALID_VALUE)?;
        self.descriptions
            .get(p.node as usize)
            .copied()
            .ok_or(STATUS_INVALID_VALUE)
    }

    pub(super) fn switch_info(
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

    pub(super) fn led_info(&mut self, arr: u32, amod: u32, set: Option<&[u8; 64]>) -> AttrResult {
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
}
