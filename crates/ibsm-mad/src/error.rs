//! The one error type of this crate.

use crate::attribute_id::AttributeId;

/// Why bytes could not be turned into a typed MAD, SMP or attribute (or a value
/// could not be turned into bytes). Every variant says what was being decoded,
/// where and why, so a log line is enough to find the offending peer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MadError {
    /// The buffer ends before the structure does.
    #[error("{what}: buffer too short: need {need} bytes, got {got}")]
    TooShort {
        /// What was being decoded ("SMP", "NodeInfo", ...).
        what: &'static str,
        /// Bytes the structure needs.
        need: usize,
        /// Bytes the caller supplied.
        got: usize,
    },
    /// MAD BaseVersion is not 1 (the only version IBA defines for SMPs).
    #[error("MAD header: unsupported BaseVersion {0} (expected 1)")]
    BadBaseVersion(u8),
    /// ClassVersion of a subnet management MAD is not 1.
    #[error(
        "MAD header: unsupported ClassVersion {version} for MgmtClass {class:#04x} (expected 1)"
    )]
    BadClassVersion {
        /// The MgmtClass byte.
        class: u8,
        /// The ClassVersion byte.
        version: u8,
    },
    /// The MgmtClass is neither SubnLidRouted (0x01) nor SubnDirectedRoute (0x81).
    #[error("MAD header: MgmtClass {0:#04x} is not a subnet management class (0x01 or 0x81)")]
    NotSmpClass(u8),
    /// A directed-route SMP claims more than 63 hops (IBA 14.2.2: paths are 64 bytes, entry 0 unused).
    #[error("directed-route SMP: HopCount {0} exceeds the IBA maximum of 63")]
    HopCountTooLarge(u8),
    /// A caller asked for a directed route longer than 63 hops.
    #[error("directed route of {0} hops exceeds the IBA maximum of 63")]
    PathTooLong(usize),
    /// A field holds a value IBA reserves or does not define and that has no
    /// meaningful typed representation.
    #[error("{attr}.{field}: invalid value {value:#x}: {why}")]
    InvalidField {
        /// Attribute or structure name as in IBA ("SMInfo", "AttributeModifier").
        attr: &'static str,
        /// Field name as in IBA ("SMState").
        field: &'static str,
        /// The offending value.
        value: u64,
        /// Why it is rejected.
        why: &'static str,
    },
    /// `Smp::attribute::<A>()` was asked for an attribute the SMP does not carry.
    #[error("SMP carries attribute {got}, not {expected}")]
    AttributeMismatch {
        /// The attribute the caller wanted.
        expected: AttributeId,
        /// The attribute in the SMP header.
        got: AttributeId,
    },
}
