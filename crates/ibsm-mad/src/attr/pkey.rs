//! P_KeyTable (0x0016).

use super::{load, rd16, wr16, SmpAttribute};
use crate::attribute_id::AttributeId;
use crate::error::MadError;

/// A partition key: bit 15 is the membership type (1 = full, 0 = limited), bits
/// 14:0 the base. The all-zero key is the invalid/empty entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct PKey(pub u16);

impl PKey {
    /// The default partition, full member (0xFFFF).
    pub const DEFAULT_FULL: PKey = PKey(0xFFFF);
    /// The default partition, limited member (0x7FFF).
    pub const DEFAULT_LIMITED: PKey = PKey(0x7FFF);
    /// An empty table entry.
    pub const INVALID: PKey = PKey(0);

    /// Builds a key from its base (15 bits) and membership.
    pub const fn new(base: u16, full_member: bool) -> PKey {
        PKey((base & 0x7FFF) | if full_member { 0x8000 } else { 0 })
    }
    /// Bits 14:0.
    pub const fn base(self) -> u16 {
        self.0 & 0x7FFF
    }
    /// Membership bit (bit 15): true for full membership.
    pub const fn is_full_member(self) -> bool {
        self.0 & 0x8000 != 0
    }
    /// True for an empty entry (base 0).
    pub const fn is_invalid(self) -> bool {
        self.base() == 0
    }
}

/// One 32-entry block of a P_KeyTable (IBA 14.2.5.7). Block number (and for switch
/// external ports the port) travel in the AttributeModifier ([`crate::modifier::PKeyBlock`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PKeyTable {
    /// The 32 entries of the block.
    pub keys: [PKey; 32],
}

impl PKeyTable {
    /// Entries per block.
    pub const ENTRIES: usize = 32;
}

impl SmpAttribute for PKeyTable {
    const ID: AttributeId = AttributeId::P_KEY_TABLE;

    fn decode(data: &[u8]) -> Result<Self, MadError> {
        let b = load(data, 64, "P_KeyTable")?;
        let mut keys = [PKey(0); 32];
        for (i, k) in keys.iter_mut().enumerate() {
            *k = PKey(rd16(&b, i * 2));
        }
        Ok(PKeyTable { keys })
    }

    fn encode(&self) -> [u8; 64] {
        let mut b = [0u8; 64];
        for (i, k) in self.keys.iter().enumerate() {
            wr16(&mut b, i * 2, k.0);
        }
        b
    }
}
