//! The fabric's state, laid out flat.
//!
//! * `nodes[n]` is a small fixed-size record; its ports are the contiguous run
//!   `ports[nodes[n].first_port ..= first_port + num_ports]` (port 0 included, so a
//!   port's global index is `first_port + port_num` with no lookup).
//! * Routing reads only [`PortHot`] (16 bytes: owner, cable, LID, state), so a
//!   multi-hop walk touches one cache line per hop.
//! * Everything the SMA only needs when an attribute is read or written lives in the
//!   parallel `port_info` vector as an [`ibsm_mad::PortInfo`] image ("cold" state);
//!   the hot fields (LID, LMC, PortState, PortPhysicalState) are authoritative in
//!   [`PortHot`] and patched into the image when PortInfo is read.
//! * Per-switch forwarding tables are allocated lazily, grown to the highest block the
//!   SM has written: a fresh 48k-LID fabric costs nothing for LFTs.
//! * Rarely programmed tables (P_Key blocks beyond the default, GUIDInfo, SLtoVL,
//!   VLArbitration, MFT) live in sparse maps keyed by global port index: a default
//!   table is never stored. Lookups never iterate the maps, so their hashing order
//!   cannot leak into behaviour.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use ibsm_fabric::{NodeType, Topology};
use ibsm_mad::{CapabilityMask, PhysPortState, PortInfo, PortState};

use crate::SimConfig;

/// "No index" marker for u32 index fields.
pub(crate) const NONE: u32 = u32::MAX;

/// PortInfo.PortState values (4 bits).
pub(crate) mod pstate {
    pub const DOWN: u8 = 1;
    pub const INIT: u8 = 2;
    pub const ARMED: u8 = 3;
    pub const ACTIVE: u8 = 4;
}

/// PortInfo.PortPhysicalState values.
pub(crate) mod phys {
    pub const POLLING: u8 = 2;
    pub const DISABLED: u8 = 3;
    pub const LINK_UP: u8 = 5;
}

#[derive(Debug, Clone)]
pub(crate) struct NodeRec {
    pub node_guid: u64,
    pub system_image_guid: u64,
    pub first_port: u32,
    /// Index into `switches`, or NONE for CAs and routers.
    pub switch: u32,
    pub vendor_id: u32,
    pub device_id: u16,
    pub num_ports: u8,
    pub node_type: NodeType,
    pub removed: bool,
    pub led_on: bool,
}

/// What routing needs of a port, 16 bytes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PortHot {
    /// Owning node index.
    pub node: u32,
    /// Global index of the port at the other end of the cable (NONE = no cable).
    /// The cable survives `link_down`; the state fields say whether it carries packets.
    pub remote: u32,
    /// PortInfo.LID (base LID). For switch external ports unused (the switch LID is port 0's).
    pub lid: u16,
    /// PortInfo.LMC.
    pub lmc: u8,
    /// PortInfo.PortState.
    pub state: u8,
    /// PortInfo.PortPhysicalState.
    pub phys: u8,
    /// Port number on its node.
    pub num: u8,
    /// The cable was pulled (`Sim::link_down`): the link cannot train until `link_up`.
    pub unplugged: bool,
}

impl PortHot {
    /// A link carries VL15 (SMPs, directed or LID-routed) once it is trained: the
    /// port is Init, Armed or Active (IBA 7.2: Initialize accepts and transmits SMPs only).
    #[inline]
    pub fn link_up(&self) -> bool {
        self.phys == phys::LINK_UP && self.state >= pstate::INIT
    }

    /// A link carries data packets (VL0..14: every GMP) only when the port is Active
    /// (IBA 7.2: Init and Armed pass SMPs only); ibsim requires the same of every port
    /// a LID-routed packet crosses.
    #[inline]
    pub fn carries_data(&self) -> bool {
        self.phys == phys::LINK_UP && self.state == pstate::ACTIVE
    }

    /// True when `lid` addresses this (CA or router) port: base LID .. base + 2^LMC.
    #[inline]
    pub fn owns_lid(&self, lid: u16) -> bool {
        self.lid != 0
            && lid >= self.lid
            && u32::from(lid) < u32::from(self.lid) + (1u32 << (self.lmc & 7))
    }
}

#[derive(Debug, Clone)]
pub(crate) struct SwitchRec {
    /// LinearForwardingTable, grown lazily in 64-entry blocks; 0xFF = unprogrammed.
    pub lft: Vec<u8>,
    pub linear_fdb_top: u16,
    pub multicast_fdb_top: u16,
    pub default_port: u8,
    pub default_multicast_primary_port: u8,
    pub default_multicast_not_primary_port: u8,
    pub life_time_value: u8,
    pub port_state_change: bool,
}

impl SwitchRec {
    /// Egress port for `dlid`, or None when the LFT has no entry (dropped).
    #[inline]
    pub fn lft_lookup(&self, dlid: u16) -> Option<u8> {
        if dlid > self.linear_fdb_top {
            return None;
        }
        match self.lft.get(usize::from(dlid)) {
            Some(&0xFF) | None => None,
            Some(&p) => Some(p),
        }
    }
}

/// Tables the SM rarely writes, stored only when they differ from the default.
#[derive(Debug, Default, Clone)]
pub(crate) struct SparseTables {
    /// Whole P_KeyTable per port (PartitionCap entries), absent = default (0xFFFF at 0).
    pub pkeys: HashMap<u32, Box<[u16]>>,
    /// GUIDInfo entries per port (GUIDCap entries; entry 0 is the hardwired GUID and never stored).
    pub guids: HashMap<u32, Box<[u64]>>,
    /// SLtoVLMappingTable per (egress port global index, ingress port number).
    pub sl2vl: HashMap<(u32, u8), [u8; 8]>,
    /// VLArbitration per (port global index, block 1..=4).
    pub vlarb: HashMap<(u32, u8), [u8; 64]>,
    /// MulticastForwardingTable per (switch index, block, port position).
    pub mft: HashMap<(u32, u16, u8), [u8; 64]>,
}

/// The flat fabric state built from a topology.
#[derive(Debug, Clone)]
pub(crate) struct Fabric {
    pub nodes: Vec<NodeRec>,
    pub descriptions: Vec<[u8; 64]>,
    pub ports: Vec<PortHot>,
    /// Hardwired PortGUID per port (every port of a switch reports port 0's).
    pub guids_hw: Vec<u64>,
    pub port_info: Vec<PortInfo>,
    pub switches: Vec<SwitchRec>,
    pub tables: SparseTables,
    /// Running M_Key lease timers: guarding port index -> when its protection lapses
    /// (see the `mkey` module). Ordered, so nothing depends on hash order.
    pub mkey_lease: BTreeMap<u32, Duration>,
}

/// Default CapabilityMask of a CA port (IsSM is added by an attached SM).
pub(crate) const CA_CAPABILITY_MASK: u32 = CapabilityMask::IS_TRAP_SUPPORTED
    | CapabilityMask::IS_SL_MAPPING_SUPPORTED
    | CapabilityMask::IS_LED_INFO_SUPPORTED
    | CapabilityMask::IS_SYSTEM_IMAGE_GUID_SUPPORTED
    | CapabilityMask::IS_COMMUNICATION_MANAGEMENT_SUPPORTED
    | CapabilityMask::IS_CLIENT_REREGISTRATION_SUPPORTED;

/// Default CapabilityMask of a switch management port.
pub(crate) const SWITCH_CAPABILITY_MASK: u32 = CapabilityMask::IS_TRAP_SUPPORTED
    | CapabilityMask::IS_SL_MAPPING_SUPPORTED
    | CapabilityMask::IS_LED_INFO_SUPPORTED
    | CapabilityMask::IS_SYSTEM_IMAGE_GUID_SUPPORTED;

impl Fabric {
    pub fn build(topo: &Topology, cfg: &SimConfig) -> Fabric {
        let n_nodes = topo.len();
        let n_ports: usize = topo.nodes().iter().map(|n| n.ports.len().max(1)).sum();
        let mut nodes = Vec::with_capacity(n_nodes);
        let mut descriptions = Vec::with_capacity(n_nodes);
        let mut ports = Vec::with_capacity(n_ports);
        let mut port_info = Vec::with_capacity(n_ports);
        let mut guids_hw = Vec::with_capacity(n_ports);
        let mut switches = Vec::new();

        // Pass 1: nodes and their port runs.
        for (idx, node) in topo.iter() {
            let first_port = u32::try_from(ports.len()).unwrap_or(NONE);
            let num_ports = node.num_ports();
            let is_switch = node.node_type == NodeType::Switch;
            let switch = if is_switch {
                switches.push(SwitchRec {
                    lft: Vec::new(),
                    linear_fdb_top: 0,
                    multicast_fdb_top: 0,
                    default_port: 0,
                    default_multicast_primary_port: 0,
                    default_multicast_not_primary_port: 0,
                    life_time_value: cfg.life_time_value,
                    port_state_change: false,
                });
                u32::try_from(switches.len() - 1).unwrap_or(NONE)
            } else {
                NONE
            };
            nodes.push(NodeRec {
                node_guid: node.node_guid,
                system_image_guid: node.system_image_guid,
                first_port,
                switch,
                vendor_id: node.vendor_id & 0x00FF_FFFF,
                device_id: node.device_id,
                num_ports,
                node_type: node.node_type,
                removed: false,
                led_on: false,
            });
            descriptions.push(ibsm_mad::NodeDescription::new(&node.description).raw);
            for p in 0..=num_ports {
                let tp = node.port(p);
                let guid = match (is_switch, tp) {
                    (true, _) => node.ports.first().map_or(node.node_guid, |p0| p0.port_guid),
                    (false, Some(tp)) => tp.port_guid,
                    (false, None) => 0,
                };
                let (lid, lmc) = match (is_switch, p, tp) {
                    (true, 0, Some(tp)) => (tp.lid, 0),
                    (false, 1.., Some(tp)) => (tp.lid, tp.lmc & 7),
                    _ => (0, 0),
                };
                let mgmt = is_switch && p == 0;
                let (state, phys) = if mgmt {
                    // Switch port 0 is always "up": it is internal to the switch.
                    (pstate::ACTIVE, phys::LINK_UP)
                } else {
                    (pstate::DOWN, phys::POLLING)
                };
                guids_hw.push(guid);
                ports.push(PortHot {
                    node: idx.0,
                    remote: NONE,
                    lid,
                    lmc,
                    state,
                    phys,
                    num: p,
                    unplugged: false,
                });
                let (width, speed, speed_ext) = tp.map_or((2, 1, 0), |tp| {
                    (
                        tp.link_width.to_iba(),
                        tp.link_speed.speed_active(),
                        tp.link_speed.speed_ext_active(),
                    )
                });
                let external = p != 0 || !is_switch;
                let mut cap = if is_switch {
                    SWITCH_CAPABILITY_MASK
                } else {
                    CA_CAPABILITY_MASK
                };
                if speed_ext != 0 {
                    cap |= CapabilityMask::IS_EXTENDED_SPEEDS_SUPPORTED;
                }
                port_info.push(PortInfo {
                    gid_prefix: 0xFE80_0000_0000_0000,
                    capability_mask: CapabilityMask(cap),
                    local_port_num: p,
                    link_width_enabled: if external { width } else { 0 },
                    link_width_supported: if external { width } else { 0 },
                    link_width_active: if external { width } else { 0 },
                    link_speed_supported: if external { speed } else { 0 },
                    link_speed_active: if external { speed } else { 0 },
                    link_speed_enabled: if external { speed } else { 0 },
                    link_speed_ext_active: if external { speed_ext } else { 0 },
                    link_speed_ext_supported: if external { speed_ext } else { 0 },
                    link_speed_ext_enabled: if external { speed_ext } else { 0 },
                    port_state: PortState::from(state),
                    port_physical_state: PhysPortState::from(phys),
                    link_down_default_state: if external { phys::POLLING } else { 0 },
                    neighbor_mtu: if external { cfg.mtu_cap } else { 0 },
                    mtu_cap: if external { cfg.mtu_cap } else { 0 },
                    vl_cap: if external { cfg.vl_cap } else { 0 },
                    operational_vls: if external { 1 } else { 0 },
                    vl_arbitration_high_cap: if external { cfg.vl_arb_high_cap } else { 0 },
                    vl_arbitration_low_cap: if external { cfg.vl_arb_low_cap } else { 0 },
                    vl_high_limit: 0,
                    init_type: 0,
                    guid_cap: if is_switch && p != 0 { 0 } else { cfg.guid_cap },
                    subnet_timeout: 0,
                    resp_time_value: cfg.resp_time_value,
                    hoq_life: 0,
                    vl_stall_count: 0,
                    ..PortInfo::default()
                });
            }
        }

        // Pass 2: cables. A remote that does not exist in this topology is treated as
        // no cable: the topology crate validates links, but a Sim must not panic on one.
        for (idx, node) in topo.iter() {
            let Some(rec) = nodes.get(idx.as_usize()) else {
                continue;
            };
            let first = rec.first_port;
            for (p, tp) in node.physical_ports() {
                let Some((rn, rp)) = tp.remote else { continue };
                let Some(rrec) = nodes.get(rn.as_usize()) else {
                    continue;
                };
                if rp == 0 || rp > rrec.num_ports {
                    continue;
                }
                let here = first as usize + usize::from(p);
                let there = rrec.first_port as usize + usize::from(rp);
                if let Some(hp) = ports.get_mut(here) {
                    hp.remote = u32::try_from(there).unwrap_or(NONE);
                    // A cabled port has trained: Init + LinkUp, waiting for the SM.
                    hp.state = pstate::INIT;
                    hp.phys = phys::LINK_UP;
                }
            }
        }
        Fabric {
            nodes,
            descriptions,
            ports,
            guids_hw,
            port_info,
            switches,
            tables: SparseTables::default(),
            mkey_lease: BTreeMap::new(),
        }
    }

    #[inline]
    pub fn port(&self, idx: u32) -> Option<&PortHot> {
        self.ports.get(idx as usize)
    }

    /// Approximate heap bytes held by the fabric state (for the memory smoke test).
    pub fn heap_bytes(&self) -> usize {
        use std::mem::size_of;
        self.nodes.capacity() * size_of::<NodeRec>()
            + self.descriptions.capacity() * 64
            + self.ports.capacity() * size_of::<PortHot>()
            + self.guids_hw.capacity() * size_of::<u64>()
            + self.port_info.capacity() * size_of::<PortInfo>()
            + self.switches.capacity() * size_of::<SwitchRec>()
            + self
                .switches
                .iter()
                .map(|s| s.lft.capacity())
                .sum::<usize>()
    }
}
