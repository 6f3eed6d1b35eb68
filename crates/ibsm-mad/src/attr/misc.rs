//! LedInfo (0x0031) and VendorDiag (0x0030).

use super::{load, rd16, wr16, SmpAttribute};
use crate::attribute_id::AttributeId;
use crate::error::MadError;

/// LedInfo (IBA 14.2.5.15, 4 bytes): LedMask in bit 31, the rest reserved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct LedInfo {
    /// LedMask: true = LED on.
    pub led_mask: bool,
}

impl SmpAttribute for LedInfo {
    const ID: AttributeId = AttributeId::LED_INFO;

    fn decode(data: &[u8]) -> Result<Self, MadError> {
        let b = load(data, 4, "LedInfo")?;
        Ok(LedInfo {
            led_mask: b[0] & 0x80 != 0,
        })
    }

    fn encode(&self) -> [u8; 64] {
        let mut b = [0u8; 64];
        b[0] = u8::from(self.led_mask) << 7;
        b
    }
}

/// VendorDiag (IBA 14.2.5.14): NextIndex (16 bits) and 62 bytes of DiagData. Read it
/// with AttributeModifier = the index from [`crate::attr::DiagVendor::VendorDiagIndex`],
/// then follow NextIndex until it is zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VendorDiag {
    /// NextIndex (0 = last block).
    pub next_index: u16,
    /// DiagData (vendor-specific).
    pub diag_data: [u8; 62],
}

impl Default for VendorDiag {
    fn default() -> Self {
        VendorDiag {
            next_index: 0,
            diag_data: [0u8; 62],
        }
    }
}

impl SmpAttribute for VendorDiag {
    const ID: AttributeId = AttributeId::VENDOR_DIAG;

    fn decode(data: &[u8]) -> Result<Self, MadError> {
        let b = load(data, 64, "VendorDiag")?;
        let mut diag_data = [0u8; 62];
        diag_data.copy_from_slice(&b[2..]);
        Ok(VendorDiag {
            next_index: rd16(&b, 0),
            diag_data,
        })
    }

    fn encode(&self) -> [u8; 64] {
        let mut b = [0u8; 64];
        wr16(&mut b, 0, self.next_index);
        b[2..].copy_from_slice(&self.diag_data);
        b
    }
}
