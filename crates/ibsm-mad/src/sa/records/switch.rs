//! Switch records: SwitchInfoRecord (IBA 15.2.5.4), LinearForwardingTableRecord
//! (15.2.5.6) and MulticastForwardingTableRecord (15.2.5.8).

use crate::attr::{LinearForwardingTable, MulticastForwardingTable, SmpAttribute, SwitchInfo};
use crate::sa::attribute_id::SaAttributeId;
use crate::sa::error::SaError;
use crate::sa::wire::{load, put, rd16, sub, wr16};

/// SwitchInfoRecord, 24 bytes: LID (0..2), Reserved (2..4), SwitchInfo (4..24).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SwitchInfoRecord {
    /// LID of the switch (port 0).
    pub lid: u16,
    /// SwitchInfo.
    pub switch_info: SwitchInfo,
}

impl SwitchInfoRecord {
    /// Bytes on the wire.
    pub const SIZE: usize = 24;

    /// Decodes from at least 24 bytes.
    pub fn decode(data: &[u8]) -> Result<Self, SaError> {
        let b: [u8; Self::SIZE] = load(data, "SwitchInfoRecord")?;
        Ok(SwitchInfoRecord {
            lid: rd16(&b, 0),
            switch_info: SwitchInfo::decode(sub(&b, 4, SwitchInfo::WIRE_LEN))?,
        })
    }

    /// Encodes, reserved bits zero.
    pub fn encode(&self) -> [u8; Self::SIZE] {
        let mut b = [0u8; Self::SIZE];
        wr16(&mut b, 0, self.lid);
        put(
            &mut b,
            4,
            &self.switch_info.encode()[..SwitchInfo::WIRE_LEN],
        );
        b
    }
}

// OpenSM names only LID and RESERVED1; the SwitchInfo fields follow in IBA order,
// reserved ones included, as for NodeRecord and SMInfoRecord.
record_components!(SwitchInfoRecord, |r, t| {
    /// 0: LID.
    LID = 0 => r.lid == t.lid;
    /// 1: Reserved.
    RESERVED_1 = 1;
    /// 2: LinearFDBCap.
    LINEAR_FDB_CAP = 2 => r.switch_info.linear_fdb_cap == t.switch_info.linear_fdb_cap;
    /// 3: RandomFDBCap.
    RANDOM_FDB_CAP = 3 => r.switch_info.random_fdb_cap == t.switch_info.random_fdb_cap;
    /// 4: MulticastFDBCap.
    MULTICAST_FDB_CAP = 4 => r.switch_info.multicast_fdb_cap == t.switch_info.multicast_fdb_cap;
    /// 5: LinearFDBTop.
    LINEAR_FDB_TOP = 5 => r.switch_info.linear_fdb_top == t.switch_info.linear_fdb_top;
    /// 6: DefaultPort.
    DEFAULT_PORT = 6 => r.switch_info.default_port == t.switch_info.default_port;
    /// 7: DefaultMulticastPrimaryPort.
    DEFAULT_MULTICAST_PRIMARY_PORT = 7 => r.switch_info.default_multicast_primary_port == t.switch_info.default_multicast_primary_port;
    /// 8: DefaultMulticastNotPrimaryPort.
    DEFAULT_MULTICAST_NOT_PRIMARY_PORT = 8 => r.switch_info.default_multicast_not_primary_port == t.switch_info.default_multicast_not_primary_port;
    /// 9: LifeTimeValue.
    LIFE_TIME_VALUE = 9 => r.switch_info.life_time_value == t.switch_info.life_time_value;
    /// 10: PortStateChange.
    PORT_STATE_CHANGE = 10 => r.switch_info.port_state_change == t.switch_info.port_state_change;
    /// 11: OptimizedSLtoVLMappingProgramming.
    OPTIMIZED_SL_TO_VL_MAPPING_PROGRAMMING = 11 => r.switch_info.optimized_sl_to_vl_mapping_programming == t.switch_info.optimized_sl_to_vl_mapping_programming;
    /// 12: LIDsPerPort.
    LIDS_PER_PORT = 12 => r.switch_info.lids_per_port == t.switch_info.lids_per_port;
    /// 13: PartitionEnforcementCap.
    PARTITION_ENFORCEMENT_CAP = 13 => r.switch_info.partition_enforcement_cap == t.switch_info.partition_enforcement_cap;
    /// 14: InboundEnforcementCap.
    INBOUND_ENFORCEMENT_CAP = 14 => r.switch_info.inbound_enforcement_cap == t.switch_info.inbound_enforcement_cap;
    /// 15: OutboundEnforcementCap.
    OUTBOUND_ENFORCEMENT_CAP = 15 => r.switch_info.outbound_enforcement_cap == t.switch_info.outbound_enforcement_cap;
    /// 16: FilterRawInboundCap.
    FILTER_RAW_INBOUND_CAP = 16 => r.switch_info.filter_raw_inbound_cap == t.switch_info.filter_raw_inbound_cap;
    /// 17: FilterRawOutboundCap.
    FILTER_RAW_OUTBOUND_CAP = 17 => r.switch_info.filter_raw_outbound_cap == t.switch_info.filter_raw_outbound_cap;
    /// 18: EnhancedPort0.
    ENHANCED_PORT0 = 18 => r.switch_info.enhanced_port0 == t.switch_info.enhanced_port0;
    /// 19: Reserved.
    RESERVED_19 = 19;
    /// 20: MulticastFDBTop.
    MULTICAST_FDB_TOP = 20 => r.switch_info.multicast_fdb_top == t.switch_info.multicast_fdb_top;
});

impl_sa_record!(
    SwitchInfoRecord,
    SaAttributeId::SWITCH_INFO_RECORD,
    "SwitchInfoRecord"
);

/// LinearForwardingTableRecord, 72 bytes: LID (0..2), BlockNum (2..4), Reserved
/// (4..8), one 64-entry LinearForwardingTable block (8..72).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct LinearForwardingTableRecord {
    /// LID of the switch.
    pub lid: u16,
    /// BlockNum: the block covers LIDs `block_num * 64 ..`.
    pub block_num: u16,
    /// The block.
    pub linear_forwarding_table: LinearForwardingTable,
}

impl LinearForwardingTableRecord {
    /// Bytes on the wire.
    pub const SIZE: usize = 72;

    /// Decodes from at least 72 bytes.
    pub fn decode(data: &[u8]) -> Result<Self, SaError> {
        let b: [u8; Self::SIZE] = load(data, "LinearForwardingTableRecord")?;
        Ok(LinearForwardingTableRecord {
            lid: rd16(&b, 0),
            block_num: rd16(&b, 2),
            linear_forwarding_table: LinearForwardingTable::decode(sub(&b, 8, 64))?,
        })
    }

    /// Encodes, reserved bytes zero.
    pub fn encode(&self) -> [u8; Self::SIZE] {
        let mut b = [0u8; Self::SIZE];
        wr16(&mut b, 0, self.lid);
        wr16(&mut b, 2, self.block_num);
        put(&mut b, 8, &self.linear_forwarding_table.encode());
        b
    }
}

// The table block is not a component the SA matches on (OpenSM defines LID and
// BlockNum only).
record_components!(LinearForwardingTableRecord, |r, t| {
    /// 0: LID.
    LID = 0 => r.lid == t.lid;
    /// 1: BlockNum.
    BLOCK_NUM = 1 => r.block_num == t.block_num;
    /// 2: Reserved.
    RESERVED_2 = 2;
});

impl_sa_record!(
    LinearForwardingTableRecord,
    SaAttributeId::LINEAR_FORWARDING_TABLE_RECORD,
    "LinearForwardingTableRecord"
);

/// MulticastForwardingTableRecord, 72 bytes: LID (0..2), Position (bits 15:12 of
/// 2..4), Reserved (3 bits), BlockNum (9 bits), Reserved (4..8), one 32-MLID
/// MulticastForwardingTable block of 16-bit port masks (8..72).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct MulticastForwardingTableRecord {
    /// LID of the switch.
    pub lid: u16,
    /// Position (4 bits): which 16 ports the masks cover.
    pub position: u8,
    /// BlockNum (9 bits): MLIDs `0xC000 + block_num * 32 ..`.
    pub block_num: u16,
    /// The block.
    pub multicast_forwarding_table: MulticastForwardingTable,
}

impl MulticastForwardingTableRecord {
    /// Bytes on the wire.
    pub const SIZE: usize = 72;

    /// Decodes from at least 72 bytes.
    pub fn decode(data: &[u8]) -> Result<Self, SaError> {
        let b: [u8; Self::SIZE] = load(data, "MulticastForwardingTableRecord")?;
        let pb = rd16(&b, 2);
        Ok(MulticastForwardingTableRecord {
            lid: rd16(&b, 0),
            position: (pb >> 12) as u8,
            block_num: pb & 0x01FF,
            multicast_forwarding_table: MulticastForwardingTable::decode(sub(&b, 8, 64))?,
        })
    }

    /// Encodes, reserved bits zero.
    pub fn encode(&self) -> [u8; Self::SIZE] {
        let mut b = [0u8; Self::SIZE];
        wr16(&mut b, 0, self.lid);
        wr16(
            &mut b,
            2,
            (u16::from(self.position & 0x0F) << 12) | (self.block_num & 0x01FF),
        );
        put(&mut b, 8, &self.multicast_forwarding_table.encode());
        b
    }
}

record_components!(MulticastForwardingTableRecord, |r, t| {
    /// 0: LID.
    LID = 0 => r.lid == t.lid;
    /// 1: Position.
    POSITION = 1 => r.position == t.position;
    /// 2: Reserved.
    RESERVED_2 = 2;
    /// 3: BlockNum.
    BLOCK_NUM = 3 => r.block_num == t.block_num;
    /// 4: Reserved.
    RESERVED_4 = 4;
});

impl_sa_record!(
    MulticastForwardingTableRecord,
    SaAttributeId::MULTICAST_FORWARDING_TABLE_RECORD,
    "MulticastForwardingTableRecord"
);
