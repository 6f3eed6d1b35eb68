//! Raw access to the fields of a 256-byte SMP that routing touches.
//!
//! The forwarding hot path edits the packet in place (hop pointer, return path,
//! D bit, method, status) instead of decoding it into [`ibsm_mad::Smp`] and
//! re-encoding: a switch does not parse a packet either, and this keeps a hop at a
//! handful of byte writes. Every offset is a constant below 256 and every path index
//! is masked to 0..64, so no input byte can steer an index out of bounds.

pub(crate) type Mad = [u8; 256];

pub(crate) const BASE_VERSION: usize = 0;
pub(crate) const MGMT_CLASS: usize = 1;
pub(crate) const CLASS_VERSION: usize = 2;
pub(crate) const METHOD: usize = 3;
pub(crate) const STATUS: usize = 4;
pub(crate) const HOP_PTR: usize = 6;
pub(crate) const HOP_CNT: usize = 7;
pub(crate) const ATTR_ID: usize = 16;
pub(crate) const ATTR_MOD: usize = 20;
pub(crate) const M_KEY: usize = 24;
pub(crate) const DR_SLID: usize = 32;
pub(crate) const DR_DLID: usize = 34;
pub(crate) const DATA: usize = 64;
pub(crate) const INITIAL_PATH: usize = 128;
pub(crate) const RETURN_PATH: usize = 192;

/// D bit in the 16-bit DR status word.
pub(crate) const D_BIT: u16 = 0x8000;

#[inline]
pub(crate) fn rd16(m: &Mad, off: usize) -> u16 {
    u16::from_be_bytes([m[off & 0xFF], m[(off + 1) & 0xFF]])
}

#[inline]
pub(crate) fn wr16(m: &mut Mad, off: usize, v: u16) {
    let [a, b] = v.to_be_bytes();
    m[off & 0xFF] = a;
    m[(off + 1) & 0xFF] = b;
}

#[inline]
pub(crate) fn rd32(m: &Mad, off: usize) -> u32 {
    u32::from_be_bytes([
        m[off & 0xFF],
        m[(off + 1) & 0xFF],
        m[(off + 2) & 0xFF],
        m[(off + 3) & 0xFF],
    ])
}

#[inline]
pub(crate) fn rd64(m: &Mad, off: usize) -> u64 {
    (u64::from(rd32(m, off)) << 32) | u64::from(rd32(m, off + 4))
}

#[inline]
pub(crate) fn initial_path(m: &Mad, i: u8) -> u8 {
    m[INITIAL_PATH + usize::from(i & 63)]
}

#[inline]
pub(crate) fn return_path(m: &Mad, i: u8) -> u8 {
    m[RETURN_PATH + usize::from(i & 63)]
}

#[inline]
pub(crate) fn set_return_path(m: &mut Mad, i: u8, port: u8) {
    m[RETURN_PATH + usize::from(i & 63)] = port;
}

#[inline]
pub(crate) fn direction(m: &Mad) -> bool {
    rd16(m, STATUS) & D_BIT != 0
}

/// The SMP data field.
#[inline]
pub(crate) fn data(m: &Mad) -> &[u8; 64] {
    // DATA..DATA+64 is a constant in-bounds range of a 256-byte array.
    m[DATA..DATA + 64].try_into().unwrap_or(&[0u8; 64])
}

#[inline]
pub(crate) fn set_data(m: &mut Mad, d: &[u8; 64]) {
    m[DATA..DATA + 64].copy_from_slice(d);
}

/// Turns a request into its response in place: R bit set, status written (the D bit
/// of a DR SMP is set here too: a response always travels the return direction).
#[inline]
pub(crate) fn make_response(m: &mut Mad, directed: bool, status: u16) {
    m[METHOD] |= 0x80;
    if directed {
        wr16(m, STATUS, D_BIT | (status & 0x7FFF));
    } else {
        wr16(m, STATUS, status);
    }
}
