//! What every attribute handler of the SMA shares: the MAD status values it answers
//! with, the handler result type (the 64-byte attribute or a status), block
//! arithmetic, and where the receiving port is. A leaf the handler files import.

use crate::state::{Fabric, NONE};

pub(crate) const STATUS_BAD_METHOD: u16 = 0x0008;
pub(crate) const STATUS_UNSUPPORTED_ATTR: u16 = 0x000C;
pub(crate) const STATUS_INVALID_VALUE: u16 = 0x001C;

pub(super) type AttrResult = Result<[u8; 64], u16>;

/// Block count of a table of `entries` entries, `per_block` per block.
pub(super) fn blocks(entries: u32, per_block: u32) -> u32 {
    entries.div_ceil(per_block)
}

impl Fabric {
    pub(super) fn get_only(
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
    pub(super) fn whereami(&self, arr: u32) -> Option<(u32, u8, bool, u32)> {
        let p = self.ports.get(arr as usize)?;
        let n = self.nodes.get(p.node as usize)?;
        Some((p.node, p.num, n.switch != NONE, n.switch))
    }
}
