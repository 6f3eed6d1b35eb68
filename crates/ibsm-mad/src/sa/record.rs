//! [`SaRecord`]: what every SA record type offers, so tables, RMPP and the fuzz target
//! can be written once.

use crate::sa::attribute_id::SaAttributeId;
use crate::sa::component_mask::ComponentMask;
use crate::sa::error::SaError;

/// An SA record (or SA attribute carried in the SA data): fixed size, no heap.
pub trait SaRecord: Sized {
    /// The AttributeID that carries it.
    const ATTRIBUTE_ID: SaAttributeId;
    /// Bytes of the record on the wire, as IBA lists it (before padding to 8).
    const SIZE: usize;
    /// IBA name, for errors and logs.
    const NAME: &'static str;

    /// Decodes from at least `SIZE` bytes (more are ignored; reserved bits too).
    fn decode(data: &[u8]) -> Result<Self, SaError>;

    /// Encodes into the first `SIZE` bytes of `out`, reserved bits zero.
    fn encode_into(&self, out: &mut [u8]) -> Result<(), SaError>;

    /// Component-wise match against a query template (see each type's `matches`).
    fn matches(&self, template: &Self, mask: ComponentMask) -> bool;

    /// The record size padded to a multiple of 8: its stride in a GetTableResp.
    fn padded_size() -> usize {
        padded(Self::SIZE)
    }

    /// AttributeOffset of a table of these records (padded size in 8-byte words).
    fn attribute_offset() -> u16 {
        u16::try_from(padded(Self::SIZE) / 8).unwrap_or(u16::MAX)
    }
}

/// `size` rounded up to a multiple of 8.
pub const fn padded(size: usize) -> usize {
    size.div_ceil(8) * 8
}

/// Implements [`SaRecord`] for a type with inherent `decode`, `encode -> [u8; SIZE]`
/// and `matches` (the latter from `record_components!`).
macro_rules! impl_sa_record {
    ($ty:ident, $id:expr, $name:literal) => {
        impl $crate::sa::record::SaRecord for $ty {
            const ATTRIBUTE_ID: $crate::sa::attribute_id::SaAttributeId = $id;
            const SIZE: usize = $ty::SIZE;
            const NAME: &'static str = $name;
            fn decode(data: &[u8]) -> Result<Self, $crate::sa::error::SaError> {
                $ty::decode(data)
            }
            fn encode_into(&self, out: &mut [u8]) -> Result<(), $crate::sa::error::SaError> {
                $crate::sa::wire::write_out(&self.encode(), out, $name)
            }
            fn matches(
                &self,
                template: &Self,
                mask: $crate::sa::component_mask::ComponentMask,
            ) -> bool {
                $ty::matches(self, template, mask)
            }
        }
    };
}
