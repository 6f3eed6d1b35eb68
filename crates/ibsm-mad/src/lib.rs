//! # ibsm-mad: bytes <-> typed InfiniBand MADs
//!
//! The codec every other ibsm crate speaks: the MAD common header, LID-routed
//! (class 0x01) and directed-route (class 0x81) SMPs, every subnet management
//! attribute the SM uses, Notice/traps, and typed AttributeModifiers. No I/O, no
//! `unsafe`, no clock.
//!
//! ## Layout choices (and why)
//!
//! - **No heap on the hot path.** The embedded simulator pushes ~1M SMPs/s through
//!   this crate, so [`Smp`] is a plain `Copy` struct (~230 bytes) decoded from a
//!   `&[u8]` and encoded into a `[u8; 256]` on the stack; attributes encode into
//!   `[u8; 64]`. Nothing allocates (NodeDescription keeps its 64 raw bytes).
//! - **Decoding never panics.** Input is copied once into a fixed-size array after a
//!   length check, and all field reads use constant offsets into that array, so no
//!   wire byte can steer an index. Malformed input gives a [`MadError`] that says what,
//!   where and why. A proptest and a cargo-fuzz target (`/work/main/fuzz`) keep it so.
//! - **Reserved bits are ignored on decode and zero on encode**, so for every
//!   attribute `encode(decode(b)) == b & !reserved`; the round-trip tests check this
//!   against an independent table of used bits per attribute.
//! - **Newtypes, not enums, for open code spaces**: [`Method`], [`MgmtClass`],
//!   [`AttributeId`] carry any byte value (vendor methods and attributes exist).
//!   Enumerated fields that devices might fill with undefined values (NodeType,
//!   PortState, ...) have an `Other(u8)` variant so one odd nibble does not make a
//!   whole PortInfo undecodable. Fields an SM must act on exactly ([`SmState`],
//!   [`modifier::SmInfoControl`], VLArbitration section) are strict and fail instead.
//! - **Bit layouts follow IBA 1.3** (what OpenSM and ibsim put on the wire), not the
//!   older tables of the seed text where they differ (e.g. SwitchInfo byte 11:
//!   LifeTimeValue in bits 7:3, PortStateChange bit 2). The golden tests in
//!   `tests/golden/` hold bytes captured from ibsim and OpenSM to pin this down.
//! - **Directed-route paths** are given as the list of egress ports *without* the
//!   unused leading 0 of smpdump's "0,1,3" notation: `Smp::get_dr(&[1, 3], ...)` is
//!   two hops. `DirectedRoute::path()` gives the same slice back.
//! - Field names are IBA names in snake case (`master_sm_lid`, `capability_mask`).
//! - **Subnet Administration** (class 0x03) lives in [`sa`]: the SA MAD with its RMPP
//!   and SA headers, every SA record with its ComponentMask numbering and `matches`,
//!   and sans-IO RMPP segmentation/reassembly.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod address;
pub mod attr;
mod attribute_id;
mod error;
mod header;
pub mod modifier;
pub mod sa;
mod smp;

pub use address::{GrhInfo, MadAddress, GSI_QKEY};
pub use attr::*;
pub use attribute_id::AttributeId;
pub use error::MadError;
pub use header::{
    peek_tid, MadHeader, Method, MgmtClass, BASE_VERSION, MAD_HEADER_SIZE, MAD_SIZE,
    SMP_CLASS_VERSION, SMP_DATA_SIZE,
};
pub use modifier::SmInfoControl;
pub use smp::{DirectedRoute, Smp, SmpRoute, MAX_HOPS, PERMISSIVE_LID};
