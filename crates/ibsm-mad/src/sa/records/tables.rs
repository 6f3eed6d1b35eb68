//! Port table records: GuidInfoRecord (IBA 15.2.5.18), P_KeyTableRecord (15.2.5.11),
//! SLtoVLMappingTableRecord (15.2.5.4) and VLArbitrationTableRecord (15.2.5.9).

use crate::attr::{GuidInfo, PKeyTable, SlToVlMappingTable, SmpAttribute, VlArbitrationTable};
use crate::sa::attribute_id::SaAttributeId;
use crate::sa::error::SaError;
use crate::sa::wire::{load, put, rd16, sub, wr16};

/// GuidInfoRecord, 72 bytes: LID (0..2), BlockNum (2), Reserved (3), Reserved
/// (4..8), one 8-GUID GUIDInfo block (8..72).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct GuidInfoRecord {
    /// LID of the port.
    pub lid: u16,
    /// BlockNum.
    pub block_num: u8,
    /// The block.
    pub guid_info: GuidInfo,
}

impl GuidInfoRecord {
    /// Bytes on the wire.
    pub const SIZE: usize = 72;

    /// Decodes from at least 72 bytes.
    pub fn decode(data: &[u8]) -> Result<Self, SaError> {
        let b: [u8; Self::SIZE] = load(data, "GuidInfoRecord")?;
        Ok(GuidInfoRecord {
            lid: rd16(&b, 0),
            block_num: b[2],
            guid_info: GuidInfo::decode(sub(&b, 8, 64))?,
        })
    }

    /// Encodes, reserved bytes zero.
    pub fn encode(&self) -> [u8; Self::SIZE] {
        let mut b = [0u8; Self::SIZE];
        wr16(&mut b, 0, self.lid);
        b[2] = self.block_num;
        put(&mut b, 8, &self.guid_info.encode());
        b
    }
}

record_components!(GuidInfoRecord, |r, t| {
    /// 0: LID.
    LID = 0 => r.lid == t.lid;
    /// 1: BlockNum.
    BLOCK_NUM = 1 => r.block_num == t.block_num;
    /// 2: Reserved.
    RESERVED_2 = 2;
    /// 3: Reserved.
    RESERVED_3 = 3;
    /// 4: GUID 0 of the block.
    GUID0 = 4 => r.guid_info.guids[0] == t.guid_info.guids[0];
    /// 5: GUID 1.
    GUID1 = 5 => r.guid_info.guids[1] == t.guid_info.guids[1];
    /// 6: GUID 2.
    GUID2 = 6 => r.guid_info.guids[2] == t.guid_info.guids[2];
    /// 7: GUID 3.
    GUID3 = 7 => r.guid_info.guids[3] == t.guid_info.guids[3];
    /// 8: GUID 4.
    GUID4 = 8 => r.guid_info.guids[4] == t.guid_info.guids[4];
    /// 9: GUID 5.
    GUID5 = 9 => r.guid_info.guids[5] == t.guid_info.guids[5];
    /// 10: GUID 6.
    GUID6 = 10 => r.guid_info.guids[6] == t.guid_info.guids[6];
    /// 11: GUID 7.
    GUID7 = 11 => r.guid_info.guids[7] == t.guid_info.guids[7];
});

impl_sa_record!(
    GuidInfoRecord,
    SaAttributeId::GUID_INFO_RECORD,
    "GuidInfoRecord"
);

/// P_KeyTableRecord, 72 bytes: LID (0..2), BlockNum (2..4), PortNum (4; switches
/// only), Reserved (5..8), one 32-entry P_KeyTable block (8..72).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PKeyTableRecord {
    /// LID of the port (for a switch, of port 0).
    pub lid: u16,
    /// BlockNum.
    pub block_num: u16,
    /// PortNum (switch port; reserved for CAs).
    pub port_num: u8,
    /// The block.
    pub p_key_table: PKeyTable,
}

impl PKeyTableRecord {
    /// Bytes on the wire.
    pub const SIZE: usize = 72;

    /// Decodes from at least 72 bytes.
    pub fn decode(data: &[u8]) -> Result<Self, SaError> {
        let b: [u8; Self::SIZE] = load(data, "P_KeyTableRecord")?;
        Ok(PKeyTableRecord {
            lid: rd16(&b, 0),
            block_num: rd16(&b, 2),
            port_num: b[4],
            p_key_table: PKeyTable::decode(sub(&b, 8, 64))?,
        })
    }

    /// Encodes, reserved bytes zero.
    pub fn encode(&self) -> [u8; Self::SIZE] {
        let mut b = [0u8; Self::SIZE];
        wr16(&mut b, 0, self.lid);
        wr16(&mut b, 2, self.block_num);
        b[4] = self.port_num;
        put(&mut b, 8, &self.p_key_table.encode());
        b
    }
}

// The table block is not a component the SA matches on (OpenSM: LID, BLOCK, PORT).
record_components!(PKeyTableRecord, |r, t| {
    /// 0: LID.
    LID = 0 => r.lid == t.lid;
    /// 1: BlockNum.
    BLOCK_NUM = 1 => r.block_num == t.block_num;
    /// 2: PortNum.
    PORT_NUM = 2 => r.port_num == t.port_num;
    /// 3: Reserved.
    RESERVED_3 = 3;
});

impl_sa_record!(
    PKeyTableRecord,
    SaAttributeId::P_KEY_TABLE_RECORD,
    "P_KeyTableRecord"
);

/// SLtoVLMappingTableRecord, 16 bytes: LID (0..2), InputPortNum (2), OutputPortNum
/// (3), Reserved (4..8), SLtoVLMappingTable (8..16).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SlToVlMappingTableRecord {
    /// LID of the port (for a switch, of port 0).
    pub lid: u16,
    /// InputPortNum (switches; reserved for CAs).
    pub input_port_num: u8,
    /// OutputPortNum (switches; reserved for CAs).
    pub output_port_num: u8,
    /// The table.
    pub sl_to_vl_mapping_table: SlToVlMappingTable,
}

impl SlToVlMappingTableRecord {
    /// Bytes on the wire.
    pub const SIZE: usize = 16;

    /// Decodes from at least 16 bytes.
    pub fn decode(data: &[u8]) -> Result<Self, SaError> {
        let b: [u8; Self::SIZE] = load(data, "SLtoVLMappingTableRecord")?;
        Ok(SlToVlMappingTableRecord {
            lid: rd16(&b, 0),
            input_port_num: b[2],
            output_port_num: b[3],
            sl_to_vl_mapping_table: SlToVlMappingTable::decode(sub(&b, 8, 8))?,
        })
    }

    /// Encodes, reserved bytes zero.
    pub fn encode(&self) -> [u8; Self::SIZE] {
        let mut b = [0u8; Self::SIZE];
        wr16(&mut b, 0, self.lid);
        b[2] = self.input_port_num;
        b[3] = self.output_port_num;
        put(&mut b, 8, &self.sl_to_vl_mapping_table.encode()[..8]);
        b
    }
}

record_components!(SlToVlMappingTableRecord, |r, t| {
    /// 0: LID.
    LID = 0 => r.lid == t.lid;
    /// 1: InputPortNum.
    INPUT_PORT_NUM = 1 => r.input_port_num == t.input_port_num;
    /// 2: OutputPortNum.
    OUTPUT_PORT_NUM = 2 => r.output_port_num == t.output_port_num;
    /// 3: Reserved.
    RESERVED_3 = 3;
});

impl_sa_record!(
    SlToVlMappingTableRecord,
    SaAttributeId::SL_TO_VL_MAPPING_TABLE_RECORD,
    "SLtoVLMappingTableRecord"
);

/// VLArbitrationTableRecord, 72 bytes: LID (0..2), OutputPortNum (2), BlockNum (3),
/// Reserved (4..8), one 32-entry VLArbitrationTable block (8..72).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct VlArbitrationTableRecord {
    /// LID of the port (for a switch, of port 0).
    pub lid: u16,
    /// OutputPortNum.
    pub output_port_num: u8,
    /// BlockNum (1 low-lower, 2 low-upper, 3 high-lower, 4 high-upper).
    pub block_num: u8,
    /// The block.
    pub vl_arbitration_table: VlArbitrationTable,
}

impl VlArbitrationTableRecord {
    /// Bytes on the wire.
    pub const SIZE: usize = 72;

    /// Decodes from at least 72 bytes.
    pub fn decode(data: &[u8]) -> Result<Self, SaError> {
        let b: [u8; Self::SIZE] = load(data, "VLArbitrationTableRecord")?;
        Ok(VlArbitrationTableRecord {
            lid: rd16(&b, 0),
            output_port_num: b[2],
            block_num: b[3],
            vl_arbitration_table: VlArbitrationTable::decode(sub(&b, 8, 64))?,
        })
    }

    /// Encodes, reserved bits zero.
    pub fn encode(&self) -> [u8; Self::SIZE] {
        let mut b = [0u8; Self::SIZE];
        wr16(&mut b, 0, self.lid);
        b[2] = self.output_port_num;
        b[3] = self.block_num;
        put(&mut b, 8, &self.vl_arbitration_table.encode());
        b
    }
}

record_components!(VlArbitrationTableRecord, |r, t| {
    /// 0: LID.
    LID = 0 => r.lid == t.lid;
    /// 1: OutputPortNum.
    OUTPUT_PORT_NUM = 1 => r.output_port_num == t.output_port_num;
    /// 2: BlockNum.
    BLOCK_NUM = 2 => r.block_num == t.block_num;
    /// 3: Reserved.
    RESERVED_3 = 3;
});

impl_sa_record!(
    VlArbitrationTableRecord,
    SaAttributeId::VL_ARBITRATION_TABLE_RECORD,
    "VLArbitrationTableRecord"
);
