//! SMP attributes (IBA 14.2.5). Each type decodes from and encodes to the 64-byte
//! SMP data field.
//!
//! Conventions shared by every attribute:
//! - `decode` needs at least the attribute's wire length (`WIRE_LEN` in each module;
//!   shorter input is [`MadError::TooShort`]); bytes after it are ignored.
//! - Reserved bits are ignored on decode and written as zero on encode, so
//!   `encode(decode(b)) == b & !reserved` bit-exactly.
//! - Fields narrower than their Rust type are masked to their IBA width on encode.
//! - Enumerated fields whose undefined values a real device might still send
//!   (NodeType, PortState, ...) keep them in an `Other(u8)` variant instead of failing,
//!   because refusing a whole PortInfo over one odd nibble would blind the SM.

use crate::attribute_id::AttributeId;
use crate::error::MadError;
use crate::header::SMP_DATA_SIZE;

/// Defines a 4-bit or 8-bit enumerated field with named values and an `Other(u8)`
/// catch-all for values IBA leaves reserved.
macro_rules! open_enum {
    ($(#[$m:meta])* $name:ident : $mask:literal { $($(#[$vm:meta])* $var:ident = $val:expr),* $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vm])* $var,)*
            /// A value IBA does not define (kept so it round-trips).
            Other(u8),
        }
        impl From<u8> for $name {
            fn from(v: u8) -> Self {
                match v & $mask {
                    $($val => $name::$var,)*
                    o => $name::Other(o),
                }
            }
        }
        impl From<$name> for u8 {
            fn from(v: $name) -> u8 {
                match v {
                    $($name::$var => $val,)*
                    $name::Other(o) => o & $mask,
                }
            }
        }
        impl Default for $name {
            fn default() -> Self {
                $name::from(0)
            }
        }
    };
}

mod misc;
mod node;
mod notice;
mod pkey;
mod port_info;
mod sm_info;
mod switch;
mod tables;

pub use misc::{LedInfo, VendorDiag};
pub use node::{NodeDescription, NodeInfo, NodeType};
pub use notice::{Notice, NoticeProducer, NoticeType, ProducerType, Trap144, TrapDetails};
pub use pkey::{PKey, PKeyTable};
pub use port_info::{
    CapabilityMask, DiagCode, DiagUniversal, DiagVendor, PhysPortState, PortInfo, PortState,
};
pub use sm_info::{SmInfo, SmState};
pub use switch::{LinearForwardingTable, SwitchInfo};
pub use tables::{
    GuidInfo, MulticastForwardingTable, RandomForwardingTable, RftEntry, SlToVlMappingTable,
    VlArbEntry, VlArbitrationTable,
};

/// An SMP attribute: a typed view of the 64-byte SMP data field.
pub trait SmpAttribute: Sized {
    /// The AttributeID this type decodes.
    const ID: AttributeId;
    /// Decodes from the SMP data field (at least the attribute's wire length).
    fn decode(data: &[u8]) -> Result<Self, MadError>;
    /// Encodes into a 64-byte SMP data field, reserved bits zero.
    fn encode(&self) -> [u8; SMP_DATA_SIZE];
}

/// Copies `data` into a zero-padded 64-byte block after checking it holds at least `need` bytes.
#[inline]
pub(crate) fn load(data: &[u8], need: usize, what: &'static str) -> Result<[u8; 64], MadError> {
    if data.len() < need {
        return Err(MadError::TooShort {
            what,
            need,
            got: data.len(),
        });
    }
    let mut b = [0u8; 64];
    let n = data.len().min(64);
    if let (Some(dst), Some(src)) = (b.get_mut(..n), data.get(..n)) {
        dst.copy_from_slice(src);
    }
    Ok(b)
}

// Field accessors on the fixed 64-byte block. Every call site passes a constant
// offset below 64, so the indexing is checked by construction, not by input.

#[inline]
pub(crate) fn rd16(b: &[u8; 64], off: usize) -> u16 {
    u16::from_be_bytes([b[off], b[off + 1]])
}

#[inline]
pub(crate) fn rd24(b: &[u8; 64], off: usize) -> u32 {
    u32::from_be_bytes([0, b[off], b[off + 1], b[off + 2]])
}

#[inline]
pub(crate) fn rd32(b: &[u8; 64], off: usize) -> u32 {
    u32::from_be_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]])
}

#[inline]
pub(crate) fn rd64(b: &[u8; 64], off: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[off..off + 8]);
    u64::from_be_bytes(x)
}

#[inline]
pub(crate) fn wr16(b: &mut [u8; 64], off: usize, v: u16) {
    b[off..off + 2].copy_from_slice(&v.to_be_bytes());
}

#[inline]
pub(crate) fn wr24(b: &mut [u8; 64], off: usize, v: u32) {
    b[off..off + 3].copy_from_slice(&v.to_be_bytes()[1..]);
}

#[inline]
pub(crate) fn wr32(b: &mut [u8; 64], off: usize, v: u32) {
    b[off..off + 4].copy_from_slice(&v.to_be_bytes());
}

#[inline]
pub(crate) fn wr64(b: &mut [u8; 64], off: usize, v: u64) {
    b[off..off + 8].copy_from_slice(&v.to_be_bytes());
}
