//! [`Selector`]: the 2-bit MTUSelector / RateSelector / PacketLifeTimeSelector of
//! PathRecord, MultiPathRecord and MCMemberRecord (IBA 15.2.5.16).

/// How the SA compares a requested MTU, rate or packet lifetime with a path's.
/// All four 2-bit values are defined, so decoding never fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum Selector {
    /// 0: greater than the value given.
    #[default]
    GreaterThan,
    /// 1: less than the value given.
    LessThan,
    /// 2: exactly the value given.
    Exactly,
    /// 3: the largest (for PacketLifeTime: smallest) available.
    Largest,
}

impl From<u8> for Selector {
    /// From the 2-bit field (higher bits ignored).
    fn from(v: u8) -> Self {
        match v & 0x03 {
            0 => Selector::GreaterThan,
            1 => Selector::LessThan,
            2 => Selector::Exactly,
            _ => Selector::Largest,
        }
    }
}

impl From<Selector> for u8 {
    fn from(s: Selector) -> u8 {
        match s {
            Selector::GreaterThan => 0,
            Selector::LessThan => 1,
            Selector::Exactly => 2,
            Selector::Largest => 3,
        }
    }
}

/// Byte of a selector (bits 7:6) and a 6-bit value (bits 5:0).
pub(crate) fn sel_byte(s: Selector, v: u8) -> u8 {
    (u8::from(s) << 6) | (v & 0x3F)
}

/// Splits a selector byte.
pub(crate) fn split_sel(b: u8) -> (Selector, u8) {
    (Selector::from(b >> 6), b & 0x3F)
}
