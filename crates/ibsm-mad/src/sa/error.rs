//! [`SaError`], the error of every SA decoder, encoder and RMPP helper.

use crate::error::MadError;

/// Why bytes could not be turned into an SA MAD or record, or why an RMPP transfer
/// could not be segmented or reassembled. Each variant says what, where and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SaError {
    /// A field-level error from the shared MAD codec (short buffer, invalid value of
    /// an embedded SMP attribute such as SMInfo.SMState).
    #[error(transparent)]
    Mad(#[from] MadError),
    /// The MgmtClass byte is not SubnAdm.
    #[error("SA MAD: MgmtClass {0:#04x} is not SubnAdm (0x03)")]
    NotSaClass(u8),
    /// BaseVersion is not 1 or ClassVersion is not 2 (answer with status 0x0004).
    #[error(
        "SA MAD: unsupported BaseVersion {base_version} / ClassVersion {class_version} (expected 1 / 2)"
    )]
    BadVersion {
        /// BaseVersion byte.
        base_version: u8,
        /// ClassVersion byte.
        class_version: u8,
    },
    /// An encoded record handed to the table builder does not have the record size.
    #[error("{what}: record {index} is {len} bytes, the record size is {size}")]
    RecordSize {
        /// The record type.
        what: &'static str,
        /// Index of the record in the list.
        index: usize,
        /// Its length.
        len: usize,
        /// The expected size.
        size: usize,
    },
    /// A table is too big for RMPP's 32-bit PayloadLength.
    #[error("RMPP: a payload of {bytes} bytes does not fit a 32-bit PayloadLength")]
    TableTooLarge {
        /// Payload bytes.
        bytes: usize,
    },
    /// A MAD handed to the reassembler is not an active RMPP DATA segment.
    #[error("RMPP: segment {seg_num} is not an active DATA segment (RMPPType {rmpp_type}, flags {flags:#x})")]
    RmppNotData {
        /// RMPPType byte.
        rmpp_type: u8,
        /// RMPPFlags.
        flags: u8,
        /// SegmentNumber.
        seg_num: u32,
    },
    /// The sender gave up: an RMPP STOP or ABORT arrived.
    #[error("RMPP: sender sent RMPPType {rmpp_type} (STOP=3, ABORT=4) with RMPPStatus {status}")]
    RmppAborted {
        /// RMPPType (3 or 4).
        rmpp_type: u8,
        /// RMPPStatus.
        status: u8,
    },
    /// A segment of another transaction.
    #[error("RMPP: segment of TID {got:#x} in the transfer of TID {expected:#x}")]
    RmppTidMismatch {
        /// TID of the transfer.
        expected: u64,
        /// TID of the segment.
        got: u64,
    },
    /// A segment ahead of the next expected one (one was lost or reordered).
    #[error("RMPP: segment {got} arrived, expected segment {expected}")]
    RmppOutOfOrder {
        /// SegmentNumber expected next.
        expected: u32,
        /// SegmentNumber received.
        got: u32,
    },
    /// A segment that was already received (a retransmission; re-ACK, do not store).
    #[error("RMPP: segment {seg_num} is a duplicate (next expected {expected})")]
    RmppDuplicate {
        /// SegmentNumber received.
        seg_num: u32,
        /// SegmentNumber expected next.
        expected: u32,
    },
    /// Segment 1 without the First flag, or a First flag on a later segment.
    #[error("RMPP: segment {seg_num} has First flag {first}, expected {}", *seg_num == 1)]
    RmppBadFirst {
        /// SegmentNumber.
        seg_num: u32,
        /// The First flag it carried.
        first: bool,
    },
    /// The transfer would exceed the reassembler's limit.
    #[error("RMPP: transfer of {got} bytes exceeds the limit of {limit} bytes")]
    RmppOversize {
        /// The limit.
        limit: usize,
        /// Bytes announced or received.
        got: usize,
    },
    /// PayloadLength is inconsistent with the segments.
    #[error("RMPP: segment {seg_num}: PayloadLength {payload_length}: {why}")]
    RmppBadPayloadLength {
        /// SegmentNumber.
        seg_num: u32,
        /// The PayloadLength field.
        payload_length: u32,
        /// Why it is rejected.
        why: &'static str,
    },
    /// A segment after the Last one.
    #[error("RMPP: segment {seg_num} after the transfer completed")]
    RmppAlreadyComplete {
        /// SegmentNumber.
        seg_num: u32,
    },
}
