//! # Subnet Administration (class 0x03, ClassVersion 2): the wire codec
//!
//! Bytes <-> typed SA MADs and records, RMPP segmentation and reassembly, and the
//! ComponentMask numbering an SA needs to match a query template against its
//! records. No I/O, no clock, no `unsafe`; single MADs and records never touch the
//! heap (only whole tables and reassembled transfers do).
//!
//! ## Layout
//!
//! - [`SaMad`] (`mad.rs`): the 256-byte MAD: [`crate::MadHeader`], [`RmppHeader`], SM_Key,
//!   AttributeOffset, [`ComponentMask`], 200 bytes of data. Method constants live on
//!   [`crate::Method`] (`GET_TABLE`, `GET_TABLE_RESP`, `REPORT`, `DELETE`, ...),
//!   statuses in [`SaStatus`], attribute ids in [`SaAttributeId`].
//! - Records (`records/`): each a plain `Copy` struct with `SIZE`, `decode`, `encode`,
//!   its component consts (`PathRecord::DGID`, `NodeRecord::LID`, ...) and
//!   `matches(&self, template, mask)`; all implement [`SaRecord`]. Components are
//!   numbered as IBA's tables and OpenSM's `IB_*_COMPMASK_*` do: the record's own fields
//!   first, then the fields of an embedded attribute (NodeInfo, PortInfo, SMInfo, ...),
//!   reserved fields included (they get a `RESERVED_n` const and `matches` ignores them).
//! - RMPP (`rmpp.rs`): [`table_payload`] / [`encode_table`] lay records out back to
//!   back, each padded to 8 bytes (AttributeOffset = padded size / 8);
//!   [`RmppSegments`] cuts a payload into DATA segments; [`RmppReassembler`] puts
//!   received segments back together. The module doc of `rmpp.rs` says exactly what
//!   PayloadLength counts (the 20-byte SA header of every segment is included).
//!
//! ## Choices
//!
//! - [`SaMad::decode`] checks the length and MgmtClass only. ClassVersion is left for
//!   [`SaMad::check_version`], because the SA must *answer* a wrong version (status
//!   BAD_VERSION) rather than drop it.
//! - Errors are [`SaError`]; field-level errors of embedded SMP attributes (a reserved
//!   SMInfo.SMState, a short buffer) arrive wrapped as [`SaError::Mad`].
//! - Field names are IBA's in snake case. Exceptions forced by Rust keywords:
//!   InformInfo.Type is `notice_type` (as in [`crate::Notice`]), InformInfoRecord.Enum
//!   is `subscriber_enum`.

#[macro_use]
mod component_mask;
#[macro_use]
mod record;
mod attribute_id;
mod error;
mod mad;
mod records;
mod rmpp;
mod selector;
mod status;
mod wire;

pub use attribute_id::SaAttributeId;
pub use component_mask::ComponentMask;
pub use error::SaError;
pub use mad::{
    RmppFlags, RmppHeader, RmppType, SaMad, RMPP_HEADER_SIZE, RMPP_VERSION, SA_CLASS,
    SA_CLASS_HEADER_SIZE, SA_CLASS_VERSION, SA_DATA_SIZE, SA_HEADER_SIZE, SA_RMPP_SEGMENT_SIZE,
};
pub use record::{padded, SaRecord};
pub use records::*;
pub use rmpp::{
    encode_table, get_table_resp_template, table_payload, table_records, RmppMessage, RmppProgress,
    RmppReassembler, RmppSegments, TablePayload,
};
pub use selector::Selector;
pub use status::SaStatus;
pub use wire::Gid;
