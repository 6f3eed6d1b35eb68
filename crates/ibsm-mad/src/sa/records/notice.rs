//! The Notice an SA carries in Report (IBA 13.4.8.2): the 64 bytes the SMP Notice codec
//! already decodes, plus the IssuerGID that does not fit in an SMP.

use crate::attr::{Notice, SmpAttribute};
use crate::sa::attribute_id::SaAttributeId;
use crate::sa::component_mask::ComponentMask;
use crate::sa::error::SaError;
use crate::sa::wire::{load, put, rd_gid, sub, Gid};

/// Notice as carried in an SA Report, 80 bytes: the Notice (0..64, see
/// [`crate::Notice`]) and IssuerGID (64..80).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SaNotice {
    /// Type, producer, IssuerLID, toggle/count and DataDetails.
    pub notice: Notice,
    /// IssuerGID: the GID of the port that issued the notice.
    pub issuer_gid: Gid,
}

impl SaNotice {
    /// Bytes on the wire.
    pub const SIZE: usize = 80;

    /// Decodes from at least 80 bytes.
    pub fn decode(data: &[u8]) -> Result<Self, SaError> {
        let b: [u8; Self::SIZE] = load(data, "Notice (SA)")?;
        Ok(SaNotice {
            notice: Notice::decode(sub(&b, 0, Notice::WIRE_LEN))?,
            issuer_gid: rd_gid(&b, 64),
        })
    }

    /// Encodes, reserved bits zero.
    pub fn encode(&self) -> [u8; Self::SIZE] {
        let mut b = [0u8; Self::SIZE];
        put(&mut b, 0, &self.notice.encode());
        put(&mut b, 64, &self.issuer_gid);
        b
    }

    /// Notices are reported whole and have no components: always true.
    pub fn matches(&self, _template: &Self, _mask: ComponentMask) -> bool {
        true
    }
}

impl_sa_record!(SaNotice, SaAttributeId::NOTICE, "Notice");
