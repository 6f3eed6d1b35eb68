//! Byte helpers over fixed-size record buffers. Every record copies its input into a
//! `[u8; SIZE]` after one length check; all reads and writes below take constant
//! offsets inside that array, so no wire byte can steer an index.

use crate::error::MadError;
use crate::sa::error::SaError;

/// A 128-bit GID as on the wire (network order).
pub type Gid = [u8; 16];

/// Copies the first `N` bytes of `data`, or says how short it is.
#[inline]
pub(crate) fn load<const N: usize>(data: &[u8], what: &'static str) -> Result<[u8; N], SaError> {
    data.get(..N)
        .and_then(|s| <[u8; N]>::try_from(s).ok())
        .ok_or(SaError::Mad(MadError::TooShort {
            what,
            need: N,
            got: data.len(),
        }))
}

/// Copies `src` into `dst` at `off` (constant offsets; lengths fit by construction).
#[inline]
pub(crate) fn put<const N: usize>(b: &mut [u8; N], off: usize, src: &[u8]) {
    if let Some(d) = b.get_mut(off..off + src.len()) {
        d.copy_from_slice(src);
    }
}

/// A sub-slice at a constant offset.
#[inline]
pub(crate) fn sub<const N: usize>(b: &[u8; N], off: usize, len: usize) -> &[u8] {
    b.get(off..off + len).unwrap_or(&[])
}

#[inline]
pub(crate) fn rd16<const N: usize>(b: &[u8; N], off: usize) -> u16 {
    u16::from_be_bytes([b[off], b[off + 1]])
}

#[inline]
pub(crate) fn rd24<const N: usize>(b: &[u8; N], off: usize) -> u32 {
    u32::from_be_bytes([0, b[off], b[off + 1], b[off + 2]])
}

#[inline]
pub(crate) fn rd32<const N: usize>(b: &[u8; N], off: usize) -> u32 {
    u32::from_be_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]])
}

#[inline]
pub(crate) fn rd64<const N: usize>(b: &[u8; N], off: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[off..off + 8]);
    u64::from_be_bytes(x)
}

#[inline]
pub(crate) fn rd_gid<const N: usize>(b: &[u8; N], off: usize) -> Gid {
    let mut g = [0u8; 16];
    g.copy_from_slice(&b[off..off + 16]);
    g
}

#[inline]
pub(crate) fn wr16<const N: usize>(b: &mut [u8; N], off: usize, v: u16) {
    put(b, off, &v.to_be_bytes());
}

#[inline]
pub(crate) fn wr24<const N: usize>(b: &mut [u8; N], off: usize, v: u32) {
    put(b, off, &v.to_be_bytes()[1..]);
}

#[inline]
pub(crate) fn wr32<const N: usize>(b: &mut [u8; N], off: usize, v: u32) {
    put(b, off, &v.to_be_bytes());
}

#[inline]
pub(crate) fn wr64<const N: usize>(b: &mut [u8; N], off: usize, v: u64) {
    put(b, off, &v.to_be_bytes());
}

/// Writes `rec` (a record's `SIZE` bytes) into the start of `out`, or says how short `out` is.
#[inline]
pub(crate) fn write_out(rec: &[u8], out: &mut [u8], what: &'static str) -> Result<(), SaError> {
    let got = out.len();
    out.get_mut(..rec.len())
        .ok_or(SaError::Mad(MadError::TooShort {
            what,
            need: rec.len(),
            got,
        }))?
        .copy_from_slice(rec);
    Ok(())
}
