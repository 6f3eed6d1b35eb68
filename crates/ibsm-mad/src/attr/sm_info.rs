//! SMInfo (0x0020) and its state enum.

use super::{load, rd32, rd64, wr32, wr64, SmpAttribute};
use crate::attribute_id::AttributeId;
use crate::error::MadError;

/// SMInfo.SMState (4 bits). Strict: values 4..=15 are reserved by IBA and an SM
/// cannot act on them, so decoding them is an error rather than an `Other`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
#[repr(u8)]
pub enum SmState {
    /// 0: NotActive.
    #[default]
    NotActive = 0,
    /// 1: Discovering.
    Discovering = 1,
    /// 2: Standby.
    Standby = 2,
    /// 3: Master.
    Master = 3,
}

impl TryFrom<u8> for SmState {
    type Error = MadError;
    fn try_from(v: u8) -> Result<Self, MadError> {
        Ok(match v {
            0 => SmState::NotActive,
            1 => SmState::Discovering,
            2 => SmState::Standby,
            3 => SmState::Master,
            _ => {
                return Err(MadError::InvalidField {
                    attr: "SMInfo",
                    field: "SMState",
                    value: u64::from(v),
                    why: "IBA defines 0..=3 (NotActive, Discovering, Standby, Master)",
                })
            }
        })
    }
}

impl From<SmState> for u8 {
    fn from(s: SmState) -> u8 {
        s as u8
    }
}

impl std::fmt::Display for SmState {
    /// As OpenSM and `sminfo` print it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SmState::NotActive => "NOTACTIVE",
            SmState::Discovering => "DISCOVERING",
            SmState::Standby => "STANDBY",
            SmState::Master => "MASTER",
        })
    }
}

/// SMInfo (IBA 14.2.5.13, 21 bytes): GUID, SM_Key, ActCount, Priority (byte 20 bits
/// 7:4) and SMState (byte 20 bits 3:0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SmInfo {
    /// GUID: the PortGUID of the port the SM lives behind.
    pub guid: u64,
    /// SM_Key (reads as zero unless the requester is trusted).
    pub sm_key: u64,
    /// ActCount: heartbeat counter.
    pub act_count: u32,
    /// Priority (4 bits).
    pub priority: u8,
    /// SMState.
    pub sm_state: SmState,
}

impl SmInfo {
    /// Bytes of the attribute on the wire.
    pub const WIRE_LEN: usize = 21;
}

impl SmpAttribute for SmInfo {
    const ID: AttributeId = AttributeId::SM_INFO;

    fn decode(data: &[u8]) -> Result<Self, MadError> {
        let b = load(data, Self::WIRE_LEN, "SMInfo")?;
        Ok(SmInfo {
            guid: rd64(&b, 0),
            sm_key: rd64(&b, 8),
            act_count: rd32(&b, 16),
            priority: b[20] >> 4,
            sm_state: SmState::try_from(b[20] & 0x0F)?,
        })
    }

    fn encode(&self) -> [u8; 64] {
        let mut b = [0u8; 64];
        wr64(&mut b, 0, self.guid);
        wr64(&mut b, 8, self.sm_key);
        wr32(&mut b, 16, self.act_count);
        b[20] = ((self.priority & 0x0F) << 4) | u8::from(self.sm_state);
        b
    }
}
