//! SwitchInfo (0x0012) and the unicast LinearForwardingTable (0x0019).

use super::{load, rd16, wr16, SmpAttribute};
use crate::attribute_id::AttributeId;
use crate::error::MadError;

/// SwitchInfo (IBA 1.3 14.2.5.4, 20 bytes).
///
/// Byte 11 follows IBA 1.2+ (what OpenSM and ibsim put on the wire): LifeTimeValue in
/// bits 7:3, PortStateChange in bit 2, OptimizedSLtoVLMappingProgramming in bits 1:0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SwitchInfo {
    /// LinearFDBCap (0..2).
    pub linear_fdb_cap: u16,
    /// RandomFDBCap (2..4).
    pub random_fdb_cap: u16,
    /// MulticastFDBCap (4..6).
    pub multicast_fdb_cap: u16,
    /// LinearFDBTop (6..8).
    pub linear_fdb_top: u16,
    /// DefaultPort (8).
    pub default_port: u8,
    /// DefaultMulticastPrimaryPort (9).
    pub default_multicast_primary_port: u8,
    /// DefaultMulticastNotPrimaryPort (10).
    pub default_multicast_not_primary_port: u8,
    /// LifeTimeValue (11, bits 7:3; 5 bits).
    pub life_time_value: u8,
    /// PortStateChange (11, bit 2); write 1 to clear.
    pub port_state_change: bool,
    /// OptimizedSLtoVLMappingProgramming (11, bits 1:0; 2 bits).
    pub optimized_sl_to_vl_mapping_programming: u8,
    /// LIDsPerPort (12..14).
    pub lids_per_port: u16,
    /// PartitionEnforcementCap (14..16).
    pub partition_enforcement_cap: u16,
    /// InboundEnforcementCap (16, bit 7).
    pub inbound_enforcement_cap: bool,
    /// OutboundEnforcementCap (16, bit 6).
    pub outbound_enforcement_cap: bool,
    /// FilterRawInboundCap (16, bit 5).
    pub filter_raw_inbound_cap: bool,
    /// FilterRawOutboundCap (16, bit 4).
    pub filter_raw_outbound_cap: bool,
    /// EnhancedPort0 (16, bit 3).
    pub enhanced_port0: bool,
    /// MulticastFDBTop (18..20; byte 17 reserved).
    pub multicast_fdb_top: u16,
}

impl SwitchInfo {
    /// Bytes of the attribute on the wire.
    pub const WIRE_LEN: usize = 20;
}

impl SmpAttribute for SwitchInfo {
    const ID: AttributeId = AttributeId::SWITCH_INFO;

    fn decode(data: &[u8]) -> Result<Self, MadError> {
        let b = load(data, Self::WIRE_LEN, "SwitchInfo")?;
        Ok(SwitchInfo {
            linear_fdb_cap: rd16(&b, 0),
            random_fdb_cap: rd16(&b, 2),
            multicast_fdb_cap: rd16(&b, 4),
            linear_fdb_top: rd16(&b, 6),
            default_port: b[8],
            default_multicast_primary_port: b[9],
            default_multicast_not_primary_port: b[10],
            life_time_value: b[11] >> 3,
            port_state_change: b[11] & 0x04 != 0,
            optimized_sl_to_vl_mapping_programming: b[11] & 0x03,
            lids_per_port: rd16(&b, 12),
            partition_enforcement_cap: rd16(&b, 14),
            inbound_enforcement_cap: b[16] & 0x80 != 0,
            outbound_enforcement_cap: b[16] & 0x40 != 0,
            filter_raw_inbound_cap: b[16] & 0x20 != 0,
            filter_raw_outbound_cap: b[16] & 0x10 != 0,
            enhanced_port0: b[16] & 0x08 != 0,
            multicast_fdb_top: rd16(&b, 18),
        })
    }

    fn encode(&self) -> [u8; 64] {
        let mut b = [0u8; 64];
        wr16(&mut b, 0, self.linear_fdb_cap);
        wr16(&mut b, 2, self.random_fdb_cap);
        wr16(&mut b, 4, self.multicast_fdb_cap);
        wr16(&mut b, 6, self.linear_fdb_top);
        b[8] = self.default_port;
        b[9] = self.default_multicast_primary_port;
        b[10] = self.default_multicast_not_primary_port;
        b[11] = ((self.life_time_value & 0x1F) << 3)
            | (u8::from(self.port_state_change) << 2)
            | (self.optimized_sl_to_vl_mapping_programming & 0x03);
        wr16(&mut b, 12, self.lids_per_port);
        wr16(&mut b, 14, self.partition_enforcement_cap);
        b[16] = (u8::from(self.inbound_enforcement_cap) << 7)
            | (u8::from(self.outbound_enforcement_cap) << 6)
            | (u8::from(self.filter_raw_inbound_cap) << 5)
            | (u8::from(self.filter_raw_outbound_cap) << 4)
            | (u8::from(self.enhanced_port0) << 3);
        wr16(&mut b, 18, self.multicast_fdb_top);
        b
    }
}

/// One 64-LID block of the LinearForwardingTable (IBA 14.2.5.10): `ports[i]` is the
/// egress port for LID `block * 64 + i` (255 = drop / unassigned). The block number
/// travels in the AttributeModifier ([`crate::modifier::LftBlock`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LinearForwardingTable {
    /// Egress port per LID of the block.
    pub ports: [u8; 64],
}

impl LinearForwardingTable {
    /// Entries per block.
    pub const ENTRIES: usize = 64;
    /// Port value meaning "no route" (IBA: packets to this LID are dropped).
    pub const UNASSIGNED: u8 = 0xFF;
}

impl Default for LinearForwardingTable {
    fn default() -> Self {
        LinearForwardingTable {
            ports: [Self::UNASSIGNED; 64],
        }
    }
}

impl SmpAttribute for LinearForwardingTable {
    const ID: AttributeId = AttributeId::LINEAR_FORWARDING_TABLE;

    fn decode(data: &[u8]) -> Result<Self, MadError> {
        Ok(LinearForwardingTable {
            ports: load(data, 64, "LinearForwardingTable")?,
        })
    }

    fn encode(&self) -> [u8; 64] {
        self.ports
    }
}
