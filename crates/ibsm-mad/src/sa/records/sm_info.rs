//! SMInfoRecord (IBA 15.2.5.9): LID and SMInfo of one SM port.

use crate::attr::{SmInfo, SmpAttribute};
use crate::sa::attribute_id::SaAttributeId;
use crate::sa::error::SaError;
use crate::sa::wire::{load, put, rd16, sub, wr16};

/// SMInfoRecord, 25 bytes (padded to 32): LID (0..2), Reserved (2..4), SMInfo (4..25).
/// Decoding fails like SMInfo does on a reserved SMState.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SmInfoRecord {
    /// LID of the SM's port.
    pub lid: u16,
    /// SMInfo (the SA zeroes SM_Key for untrusted requesters).
    pub sm_info: SmInfo,
}

impl SmInfoRecord {
    /// Bytes on the wire.
    pub const SIZE: usize = 25;

    /// Decodes from at least 25 bytes.
    pub fn decode(data: &[u8]) -> Result<Self, SaError> {
        let b: [u8; Self::SIZE] = load(data, "SMInfoRecord")?;
        Ok(SmInfoRecord {
            lid: rd16(&b, 0),
            sm_info: SmInfo::decode(sub(&b, 4, SmInfo::WIRE_LEN))?,
        })
    }

    /// Encodes, reserved bytes zero.
    pub fn encode(&self) -> [u8; Self::SIZE] {
        let mut b = [0u8; Self::SIZE];
        wr16(&mut b, 0, self.lid);
        put(&mut b, 4, &self.sm_info.encode()[..SmInfo::WIRE_LEN]);
        b
    }
}

record_components!(SmInfoRecord, |r, t| {
    /// Component 0: LID.
    LID = 0 => r.lid == t.lid;
    /// Component 1: Reserved.
    RESERVED_1 = 1;
    /// Component 2: SMInfo.GUID.
    GUID = 2 => r.sm_info.guid == t.sm_info.guid;
    /// Component 3: SMInfo.SM_Key.
    SM_KEY = 3 => r.sm_info.sm_key == t.sm_info.sm_key;
    /// Component 4: SMInfo.ActCount.
    ACT_COUNT = 4 => r.sm_info.act_count == t.sm_info.act_count;
    /// Component 5: SMInfo.Priority.
    PRIORITY = 5 => r.sm_info.priority == t.sm_info.priority;
    /// Component 6: SMInfo.SMState.
    SM_STATE = 6 => r.sm_info.sm_state == t.sm_info.sm_state;
});

impl_sa_record!(SmInfoRecord, SaAttributeId::SM_INFO_RECORD, "SMInfoRecord");
