//! RMPP for the SA, sans-IO: building a GetTableResp payload, cutting it into DATA
//! segments, and reassembling segments on the client side.
//!
//! What PayloadLength counts (IBA 13.6.2.3, and what the Linux kernel's RMPP code
//! puts on the wire for OpenSM's answers): the RMPP payload of an SA segment is the
//! 20-byte SA class header (SM_Key, AttributeOffset, Reserved, ComponentMask) plus
//! the 200 data bytes, 220 bytes. The SA header is repeated in every segment and
//! counted in each. So for `n` segments carrying `len` table bytes:
//!
//! - first segment: PayloadLength = `len + 20 * n` (the whole transfer),
//! - last segment: PayloadLength = `20 + (len - 200 * (n - 1))` (what it carries),
//! - middle segments: 0,
//! - a single segment is first and last: `20 + len`.
//!
//! An empty table is one segment with PayloadLength 20. The receiver's length is
//! `200 * (n - 1) + (PayloadLength_last - 20)`.
//!
//! What is written ([`RmppSegments::wire_len`]): every segment but the last is a
//! whole 256-byte MAD; the last is the 56 header bytes plus the data it carries, as
//! OpenSM writes its answers (a single-segment table is `56 + len`). On a kernel the
//! umad layer pads a short write of an agent without kernel RMPP to a whole MAD with
//! zeros, so the packet is the same 256 bytes and a kernel-RMPP receiver takes the
//! length from PayloadLength; under umad2sim the written length is what the reader
//! gets, and saquery (which counts records from the length it read) then prints the
//! records and no zero-filled ones after them.

use crate::header::Method;
use crate::sa::error::SaError;
use crate::sa::mad::{
    RmppFlags, RmppHeader, RmppType, SaMad, RMPP_VERSION, SA_CLASS_HEADER_SIZE, SA_DATA_SIZE,
    SA_HEADER_SIZE, SA_RMPP_SEGMENT_SIZE,
};
use crate::sa::record::{padded, SaRecord};
use crate::sa::status::SaStatus;

/// The data of a GetTableResp (or GetMultiResp): records back to back, each padded to
/// a multiple of 8 bytes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TablePayload {
    /// AttributeOffset for the SA header: the padded record size in 8-byte words.
    pub attribute_offset: u16,
    /// Number of records.
    pub record_count: usize,
    /// The bytes (`record_count * attribute_offset * 8`).
    pub bytes: Vec<u8>,
}

/// Lays out already-encoded records of `record_size` bytes each: every record is
/// zero-padded to a multiple of 8. Fails if a record has another length.
pub fn table_payload<'a, I>(record_size: usize, records: I) -> Result<TablePayload, SaError>
where
    I: IntoIterator<Item = &'a [u8]>,
{
    let stride = padded(record_size);
    let attribute_offset =
        u16::try_from(stride / 8).map_err(|_| SaError::TableTooLarge { bytes: stride })?;
    let mut bytes = Vec::new();
    let mut record_count = 0;
    for (index, r) in records.into_iter().enumerate() {
        if r.len() != record_size {
            return Err(SaError::RecordSize {
                what: "table record",
                index,
                len: r.len(),
                size: record_size,
            });
        }
        bytes.extend_from_slice(r);
        bytes.resize(bytes.len() + (stride - record_size), 0);
        record_count += 1;
    }
    Ok(TablePayload {
        attribute_offset,
        record_count,
        bytes,
    })
}

/// Encodes typed records into a [`TablePayload`].
pub fn encode_table<R: SaRecord>(records: &[R]) -> Result<TablePayload, SaError> {
    let stride = R::padded_size();
    let mut bytes = vec![0u8; stride * records.len()];
    for (r, chunk) in records.iter().zip(bytes.chunks_exact_mut(stride.max(1))) {
        r.encode_into(chunk)?;
    }
    Ok(TablePayload {
        attribute_offset: R::attribute_offset(),
        record_count: records.len(),
        bytes,
    })
}

/// Splits a payload into records of `attribute_offset * 8` bytes (the client side of
/// [`table_payload`]); a trailing partial record is dropped. An offset of 0 gives
/// nothing.
pub fn table_records(payload: &[u8], attribute_offset: u16) -> impl Iterator<Item = &[u8]> {
    let stride = usize::from(attribute_offset) * 8;
    payload
        .chunks_exact(stride.max(1))
        .filter(move |_| stride > 0)
}

/// The RMPP DATA segments of one transfer, built on demand from a template MAD
/// (the response header: method, TID, attribute, status, SM_Key, AttributeOffset,
/// ComponentMask, RRespTime) and the payload. Iterate for all of them, or call
/// [`RmppSegments::segment`] to retransmit one.
#[derive(Debug, Clone)]
pub struct RmppSegments<'a> {
    template: SaMad,
    payload: &'a [u8],
    count: u32,
    next: u32,
}

impl<'a> RmppSegments<'a> {
    /// Segments for `payload` (at least one segment, even for an empty payload).
    pub fn new(template: &SaMad, payload: &'a [u8]) -> Result<RmppSegments<'a>, SaError> {
        let too_large = SaError::TableTooLarge {
            bytes: payload.len(),
        };
        let count = u32::try_from(payload.len().div_ceil(SA_DATA_SIZE).max(1))
            .map_err(|_| too_large.clone())?;
        // The first PayloadLength must fit 32 bits.
        let total = (count as usize)
            .checked_mul(SA_CLASS_HEADER_SIZE)
            .and_then(|h| h.checked_add(payload.len()))
            .filter(|&t| u32::try_from(t).is_ok());
        if total.is_none() {
            return Err(too_large);
        }
        Ok(RmppSegments {
            template: *template,
            payload,
            count,
            next: 1,
        })
    }

    /// Number of segments.
    pub fn segment_count(&self) -> u32 {
        self.count
    }

    /// PayloadLength of the first segment (the whole transfer).
    pub fn total_payload_length(&self) -> u32 {
        let n = self.count as usize;
        u32::try_from(self.payload.len() + n * SA_CLASS_HEADER_SIZE).unwrap_or(u32::MAX)
    }

    /// The data bytes segment `seg_num` (1-based) carries, or `None` past the last one.
    fn chunk(&self, seg_num: u32) -> Option<&'a [u8]> {
        if seg_num == 0 || seg_num > self.count {
            return None;
        }
        let start = (seg_num as usize - 1) * SA_DATA_SIZE;
        let end = (start + SA_DATA_SIZE).min(self.payload.len());
        Some(self.payload.get(start..end).unwrap_or(&[]))
    }

    /// How many bytes of segment `seg_num`'s encoding to write: 256 but for the last
    /// segment, which is the 56 header bytes and the data it carries (module doc).
    /// `None` past the last segment.
    pub fn wire_len(&self, seg_num: u32) -> Option<usize> {
        self.chunk(seg_num).map(|c| SA_HEADER_SIZE + c.len())
    }

    /// Segment `seg_num` (1-based), or `None` past the last one.
    pub fn segment(&self, seg_num: u32) -> Option<SaMad> {
        let chunk = self.chunk(seg_num)?;
        let first = seg_num == 1;
        let last = seg_num == self.count;
        let mut flags = RmppFlags::ACTIVE;
        if first {
            flags = flags | RmppFlags::FIRST;
        }
        if last {
            flags = flags | RmppFlags::LAST;
        }
        let payload_length = if last {
            u32::try_from(SA_CLASS_HEADER_SIZE + chunk.len()).unwrap_or(0)
        } else if first {
            self.total_payload_length()
        } else {
            0
        };
        let mut m = self.template;
        m.rmpp = RmppHeader {
            version: RMPP_VERSION,
            rmpp_type: RmppType::DATA,
            resp_time: self.template.rmpp.resp_time,
            flags,
            status: RmppHeader::STATUS_NORMAL,
            data1: seg_num,
            data2: payload_length,
        };
        m.set_data(chunk);
        Some(m)
    }
}

impl Iterator for RmppSegments<'_> {
    type Item = SaMad;

    fn next(&mut self) -> Option<SaMad> {
        let s = self.segment(self.next)?;
        self.next += 1;
        Some(s)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = (self.count + 1).saturating_sub(self.next) as usize;
        (left, Some(left))
    }
}

impl ExactSizeIterator for RmppSegments<'_> {}

/// A whole message put back together by [`RmppReassembler`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RmppMessage {
    /// The first segment (its header, SM_Key, AttributeOffset, ComponentMask; its data
    /// is the first 200 bytes of `payload`).
    pub first: SaMad,
    /// The reassembled SA data.
    pub payload: Vec<u8>,
}

impl RmppMessage {
    /// The records of a table answer, `first.attribute_offset * 8` bytes each.
    pub fn records(&self) -> impl Iterator<Item = &[u8]> {
        table_records(&self.payload, self.first.attribute_offset)
    }
}

/// What one accepted segment did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RmppProgress {
    /// More segments are needed; `last` is the highest segment received in order
    /// (ACK it with `segment.rmpp_ack(last + window - 1)`).
    Incomplete {
        /// Highest in-order SegmentNumber received.
        last: u32,
    },
    /// The transfer is complete (ACK the last segment too).
    Complete(Box<RmppMessage>),
}

/// Client-side reassembly of an RMPP DATA transfer, segment by segment, in order.
///
/// Out-of-order, duplicate, foreign-TID and oversize segments are typed errors; the
/// reassembler stays usable after a duplicate or an out-of-order segment (the caller
/// re-ACKs its last in-order segment and the sender retransmits). A MAD without RMPP
/// (Active clear, or RMPPType 0) as the first input is a complete single-MAD message
/// whose payload is all 200 data bytes (its length is not on the wire).
#[derive(Debug, Clone)]
pub struct RmppReassembler {
    limit: usize,
    first: Option<SaMad>,
    next: u32,
    announced: Option<usize>,
    payload: Vec<u8>,
    done: Option<u32>,
}

impl RmppReassembler {
    /// A default limit: 1 MiB of SA data (about 9,700 NodeRecords).
    pub const DEFAULT_LIMIT: usize = 1 << 20;

    /// A reassembler that refuses transfers of more than `limit` data bytes.
    pub fn new(limit: usize) -> RmppReassembler {
        RmppReassembler {
            limit,
            first: None,
            next: 1,
            announced: None,
            payload: Vec::new(),
            done: None,
        }
    }

    /// Next SegmentNumber expected.
    pub fn expected(&self) -> u32 {
        self.next
    }

    /// Takes one segment.
    pub fn push(&mut self, seg: &SaMad) -> Result<RmppProgress, SaError> {
        let r = seg.rmpp;
        let seg_num = r.seg_num();
        if let Some(first) = &self.first {
            if first.tid() != seg.tid() {
                return Err(SaError::RmppTidMismatch {
                    expected: first.tid(),
                    got: seg.tid(),
                });
            }
        }
        if r.rmpp_type == RmppType::STOP || r.rmpp_type == RmppType::ABORT {
            return Err(SaError::RmppAborted {
                rmpp_type: r.rmpp_type.0,
                status: r.status,
            });
        }
        let plain = !r.is_active() || r.rmpp_type == RmppType::NONE;
        if plain && self.first.is_none() && self.done.is_none() {
            // A plain MAD (no RMPP): the whole answer is in this one. RMPPType 0 with
            // Active set is what OpenSM hands its kernel before RMPP fills the header;
            // it reaches clients as is where nobody does RMPP (umad2sim).
            self.done = Some(0);
            return Ok(RmppProgress::Complete(Box::new(RmppMessage {
                first: *seg,
                payload: seg.data.to_vec(),
            })));
        }
        if !r.is_active() || r.rmpp_type != RmppType::DATA || seg_num == 0 {
            return Err(SaError::RmppNotData {
                rmpp_type: r.rmpp_type.0,
                flags: r.flags.0,
                seg_num,
            });
        }
        if let Some(last) = self.done {
            return Err(if seg_num <= last {
                SaError::RmppDuplicate {
                    seg_num,
                    expected: last + 1,
                }
            } else {
                SaError::RmppAlreadyComplete { seg_num }
            });
        }
        if seg_num < self.next {
            return Err(SaError::RmppDuplicate {
                seg_num,
                expected: self.next,
            });
        }
        if seg_num > self.next {
            return Err(SaError::RmppOutOfOrder {
                expected: self.next,
                got: seg_num,
            });
        }
        let is_first = r.flags.contains(RmppFlags::FIRST);
        if is_first != (seg_num == 1) {
            return Err(SaError::RmppBadFirst {
                seg_num,
                first: is_first,
            });
        }
        let is_last = r.flags.contains(RmppFlags::LAST);
        let paylen = r.payload_length();
        let bad = |why| SaError::RmppBadPayloadLength {
            seg_num,
            payload_length: paylen,
            why,
        };
        if is_first && !is_last && paylen != 0 {
            let n = (paylen as usize).div_ceil(SA_RMPP_SEGMENT_SIZE);
            let data = (paylen as usize)
                .checked_sub(n * SA_CLASS_HEADER_SIZE)
                .ok_or(bad("shorter than the SA headers of its segments"))?;
            if n < 2 {
                return Err(bad("announces one segment, but Last is clear"));
            }
            if data > self.limit {
                return Err(SaError::RmppOversize {
                    limit: self.limit,
                    got: data,
                });
            }
            self.announced = Some(data);
        }
        let take = if is_last {
            let d = (paylen as usize)
                .checked_sub(SA_CLASS_HEADER_SIZE)
                .filter(|&d| d <= SA_DATA_SIZE)
                .ok_or(bad("last segment must carry 20..=220 (SA header + data)"))?;
            let total = self.payload.len() + d;
            if self.announced.is_some_and(|a| a != total) {
                return Err(bad("disagrees with the first segment's total"));
            }
            d
        } else {
            SA_DATA_SIZE
        };
        let total = self.payload.len() + take;
        if total > self.limit {
            return Err(SaError::RmppOversize {
                limit: self.limit,
                got: total,
            });
        }
        if is_first {
            self.first = Some(*seg);
        }
        self.payload
            .extend_from_slice(seg.data.get(..take).unwrap_or(&[]));
        self.next = seg_num + 1;
        if is_last {
            self.done = Some(seg_num);
            let first = self.first.unwrap_or(*seg);
            return Ok(RmppProgress::Complete(Box::new(RmppMessage {
                first,
                payload: core::mem::take(&mut self.payload),
            })));
        }
        Ok(RmppProgress::Incomplete { last: seg_num })
    }
}

impl Default for RmppReassembler {
    fn default() -> Self {
        RmppReassembler::new(Self::DEFAULT_LIMIT)
    }
}

/// The GetTableResp template for `request`: method GetTableResp, status, and the
/// AttributeOffset of the table.
pub fn get_table_resp_template(request: &SaMad, status: SaStatus, attribute_offset: u16) -> SaMad {
    let mut t = request.response(Method::GET_TABLE_RESP, status);
    t.attribute_offset = attribute_offset;
    t
}
