//! [`SaMad`]: the whole 256-byte SA MAD (IBA 15.2.1.1): MAD common header (24 bytes),
//! RMPP header (12), SA header (SM_Key, AttributeOffset, Reserved, ComponentMask: 20)
//! and 200 bytes of SA data.

use core::fmt;

use crate::error::MadError;
use crate::header::{MadHeader, Method, MgmtClass, BASE_VERSION, MAD_HEADER_SIZE, MAD_SIZE};
use crate::sa::attribute_id::SaAttributeId;
use crate::sa::component_mask::ComponentMask;
use crate::sa::error::SaError;
use crate::sa::record::SaRecord;
use crate::sa::status::SaStatus;
use crate::sa::wire::{load, rd16, rd32, rd64, wr16, wr32, wr64};

/// MgmtClass of Subnet Administration.
pub const SA_CLASS: MgmtClass = MgmtClass::SUBN_ADM;
/// ClassVersion of SA MADs (IBA 1.1 and later).
pub const SA_CLASS_VERSION: u8 = 2;
/// Bytes before the SA data: common header, RMPP header, SA header.
pub const SA_HEADER_SIZE: usize = 56;
/// Bytes of SA data in one MAD.
pub const SA_DATA_SIZE: usize = 200;
/// Bytes of the RMPP header.
pub const RMPP_HEADER_SIZE: usize = 12;
/// Bytes of the SA class header after the RMPP header (SM_Key 8, AttributeOffset 2,
/// Reserved 2, ComponentMask 8). RMPP counts them as payload of every segment.
pub const SA_CLASS_HEADER_SIZE: usize = 20;
/// RMPP payload bytes of one SA segment: the SA class header plus the SA data (220).
pub const SA_RMPP_SEGMENT_SIZE: usize = SA_CLASS_HEADER_SIZE + SA_DATA_SIZE;
/// RMPPVersion this crate speaks.
pub const RMPP_VERSION: u8 = 1;

/// RMPPType (IBA 13.6.2.1). A newtype: a peer's odd value must still decode.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct RmppType(pub u8);

impl RmppType {
    /// 0: not an RMPP packet (RMPP inactive).
    pub const NONE: RmppType = RmppType(0);
    /// 1: DATA.
    pub const DATA: RmppType = RmppType(1);
    /// 2: ACK.
    pub const ACK: RmppType = RmppType(2);
    /// 3: STOP.
    pub const STOP: RmppType = RmppType(3);
    /// 4: ABORT.
    pub const ABORT: RmppType = RmppType(4);
}

impl fmt::Debug for RmppType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            0 => write!(f, "None"),
            1 => write!(f, "Data"),
            2 => write!(f, "Ack"),
            3 => write!(f, "Stop"),
            4 => write!(f, "Abort"),
            v => write!(f, "RmppType({v})"),
        }
    }
}

/// RMPPFlags (3 bits): Active, First, Last.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct RmppFlags(pub u8);

impl RmppFlags {
    /// No flag.
    pub const NONE: RmppFlags = RmppFlags(0);
    /// Bit 0: RMPP is active for this MAD.
    pub const ACTIVE: RmppFlags = RmppFlags(1);
    /// Bit 1: first segment.
    pub const FIRST: RmppFlags = RmppFlags(2);
    /// Bit 2: last segment.
    pub const LAST: RmppFlags = RmppFlags(4);

    /// True when every flag of `other` is set.
    pub const fn contains(self, other: RmppFlags) -> bool {
        self.0 & other.0 == other.0
    }

    /// Both sets of flags.
    pub const fn union(self, other: RmppFlags) -> RmppFlags {
        RmppFlags(self.0 | other.0)
    }
}

impl core::ops::BitOr for RmppFlags {
    type Output = RmppFlags;
    fn bitor(self, rhs: RmppFlags) -> RmppFlags {
        self.union(rhs)
    }
}

impl fmt::Debug for RmppFlags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RmppFlags(")?;
        let mut sep = "";
        for (bit, name) in [(1, "Active"), (2, "First"), (4, "Last")] {
            if self.0 & bit != 0 {
                write!(f, "{sep}{name}")?;
                sep = "|";
            }
        }
        write!(f, ")")
    }
}

/// The RMPP header (IBA 13.6.2.1), bytes 24..36 of every SA MAD. All zero when RMPP
/// is not in use (plain Get/GetResp).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct RmppHeader {
    /// RMPPVersion (1; 0 when inactive).
    pub version: u8,
    /// RMPPType.
    pub rmpp_type: RmppType,
    /// RRespTime (5 bits, byte 26 bits 7:3): the receiver's response time value.
    pub resp_time: u8,
    /// RMPPFlags (byte 26 bits 2:0).
    pub flags: RmppFlags,
    /// RMPPStatus.
    pub status: u8,
    /// Data1: SegmentNumber for DATA and ACK.
    pub data1: u32,
    /// Data2: PayloadLength for DATA, NewWindowLast for ACK.
    pub data2: u32,
}

impl RmppHeader {
    /// RMPPStatus 0: normal.
    pub const STATUS_NORMAL: u8 = 0;
    /// RMPPStatus 1: resources exhausted (STOP).
    pub const STATUS_RESOURCES_EXHAUSTED: u8 = 1;
    /// RMPPStatus 118: total time too long.
    pub const STATUS_TOTAL_TIME_TOO_LONG: u8 = 118;
    /// RMPPStatus 119: inconsistent Last and PayloadLength.
    pub const STATUS_INCONSISTENT_LAST_PAYLOAD_LENGTH: u8 = 119;
    /// RMPPStatus 120: inconsistent First and SegmentNumber.
    pub const STATUS_INCONSISTENT_FIRST_SEGMENT_NUMBER: u8 = 120;
    /// RMPPStatus 121: bad RMPPType.
    pub const STATUS_BAD_RMPP_TYPE: u8 = 121;
    /// RMPPStatus 122: NewWindowLast too small.
    pub const STATUS_NEW_WINDOW_LAST_TOO_SMALL: u8 = 122;
    /// RMPPStatus 123: SegmentNumber too big.
    pub const STATUS_SEGMENT_NUMBER_TOO_BIG: u8 = 123;
    /// RMPPStatus 124: illegal status.
    pub const STATUS_ILLEGAL_STATUS: u8 = 124;
    /// RMPPStatus 125: unsupported version.
    pub const STATUS_UNSUPPORTED_VERSION: u8 = 125;
    /// RMPPStatus 126: too many retries.
    pub const STATUS_TOO_MANY_RETRIES: u8 = 126;
    /// RMPPStatus 127: unspecified.
    pub const STATUS_UNSPECIFIED: u8 = 127;

    /// Decodes bytes 24..36 of a MAD (given as the 12 header bytes).
    pub fn decode(b: &[u8; RMPP_HEADER_SIZE]) -> RmppHeader {
        RmppHeader {
            version: b[0],
            rmpp_type: RmppType(b[1]),
            resp_time: b[2] >> 3,
            flags: RmppFlags(b[2] & 0x07),
            status: b[3],
            data1: rd32(b, 4),
            data2: rd32(b, 8),
        }
    }

    /// Encodes the 12 header bytes.
    pub fn encode(&self) -> [u8; RMPP_HEADER_SIZE] {
        let mut b = [0u8; RMPP_HEADER_SIZE];
        b[0] = self.version;
        b[1] = self.rmpp_type.0;
        b[2] = ((self.resp_time & 0x1F) << 3) | (self.flags.0 & 0x07);
        b[3] = self.status;
        wr32(&mut b, 4, self.data1);
        wr32(&mut b, 8, self.data2);
        b
    }

    /// True when the Active flag is set.
    pub const fn is_active(&self) -> bool {
        self.flags.contains(RmppFlags::ACTIVE)
    }

    /// SegmentNumber (Data1) of a DATA or ACK packet.
    pub const fn seg_num(&self) -> u32 {
        self.data1
    }

    /// PayloadLength (Data2) of a DATA packet.
    pub const fn payload_length(&self) -> u32 {
        self.data2
    }

    /// NewWindowLast (Data2) of an ACK packet.
    pub const fn new_window_last(&self) -> u32 {
        self.data2
    }
}

/// One SA MAD, every field typed. `Copy` and heap-free like [`crate::Smp`].
///
/// `header.class_specific` is reserved for the SA: ignored on decode (read as 0),
/// written as 0. The ClassVersion is *not* checked by [`SaMad::decode`]: an SA must
/// answer a wrong one with status BAD_VERSION, so it needs the decoded MAD; use
/// [`SaMad::check_version`].
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct SaMad {
    /// Common MAD header (MgmtClass 0x03).
    pub header: MadHeader,
    /// RMPP header.
    pub rmpp: RmppHeader,
    /// SM_Key (the SA_Key; 0 unless the requester is trusted).
    pub sm_key: u64,
    /// AttributeOffset: record stride of a table in 8-byte words.
    pub attribute_offset: u16,
    /// ComponentMask of a query.
    pub component_mask: ComponentMask,
    /// SA data (a record, a template, or a segment of a table).
    pub data: [u8; SA_DATA_SIZE],
}

impl Default for SaMad {
    fn default() -> Self {
        SaMad::new(Method::GET, SaAttributeId(0), 0)
    }
}

impl fmt::Debug for SaMad {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SaMad")
            .field("header", &self.header)
            .field("rmpp", &self.rmpp)
            .field("sm_key", &format_args!("{:#x}", self.sm_key))
            .field("attribute_offset", &self.attribute_offset)
            .field("component_mask", &self.component_mask)
            .field("data", &format_args!("[{} bytes]", SA_DATA_SIZE))
            .finish()
    }
}

impl SaMad {
    /// An SA MAD with the given method, attribute and TID; everything else zero.
    pub fn new(method: Method, attr_id: SaAttributeId, tid: u64) -> SaMad {
        SaMad {
            header: MadHeader {
                base_version: BASE_VERSION,
                mgmt_class: SA_CLASS,
                class_version: SA_CLASS_VERSION,
                method,
                status: 0,
                class_specific: 0,
                tid,
                attr_id: attr_id.into(),
                attr_mod: 0,
            },
            rmpp: RmppHeader::default(),
            sm_key: 0,
            attribute_offset: 0,
            component_mask: ComponentMask::NONE,
            data: [0u8; SA_DATA_SIZE],
        }
    }

    /// A query: `method` (Get, GetTable, Set, Delete, ...) for `record` as template
    /// with `mask` selecting its components.
    pub fn query<R: SaRecord>(
        method: Method,
        tid: u64,
        record: &R,
        mask: ComponentMask,
    ) -> Result<SaMad, SaError> {
        let mut m = SaMad::new(method, R::ATTRIBUTE_ID, tid);
        m.component_mask = mask;
        m.set_record(record)?;
        Ok(m)
    }

    /// Decodes a 256-byte SA MAD (more bytes are ignored). Fails on a short buffer or
    /// a MgmtClass other than 0x03; reserved bytes are ignored.
    pub fn decode(buf: &[u8]) -> Result<SaMad, SaError> {
        if buf.len() < MAD_SIZE {
            return Err(SaError::Mad(MadError::TooShort {
                what: "SA MAD",
                need: MAD_SIZE,
                got: buf.len(),
            }));
        }
        let b: [u8; MAD_SIZE] = load(buf, "SA MAD")?;
        let mut header = MadHeader::decode(&b)?;
        if header.mgmt_class != SA_CLASS {
            return Err(SaError::NotSaClass(header.mgmt_class.0));
        }
        header.class_specific = 0;
        let mut r = [0u8; RMPP_HEADER_SIZE];
        r.copy_from_slice(&b[MAD_HEADER_SIZE..MAD_HEADER_SIZE + RMPP_HEADER_SIZE]);
        let mut data = [0u8; SA_DATA_SIZE];
        data.copy_from_slice(&b[SA_HEADER_SIZE..]);
        Ok(SaMad {
            header,
            rmpp: RmppHeader::decode(&r),
            sm_key: rd64(&b, 36),
            attribute_offset: rd16(&b, 44),
            // 46..48 Reserved.
            component_mask: ComponentMask(rd64(&b, 48)),
            data,
        })
    }

    /// Encodes the MAD, reserved fields zero.
    pub fn encode(&self) -> [u8; MAD_SIZE] {
        let mut b = [0u8; MAD_SIZE];
        let mut h = [0u8; MAD_HEADER_SIZE];
        let mut header = self.header;
        header.class_specific = 0;
        header.encode_into(&mut h);
        b[..MAD_HEADER_SIZE].copy_from_slice(&h);
        b[MAD_HEADER_SIZE..MAD_HEADER_SIZE + RMPP_HEADER_SIZE].copy_from_slice(&self.rmpp.encode());
        wr64(&mut b, 36, self.sm_key);
        wr16(&mut b, 44, self.attribute_offset);
        wr64(&mut b, 48, self.component_mask.0);
        b[SA_HEADER_SIZE..].copy_from_slice(&self.data);
        b
    }

    /// `Ok` when BaseVersion is 1 and ClassVersion is 2; otherwise the SA answers
    /// [`SaStatus::BAD_VERSION`].
    pub fn check_version(&self) -> Result<(), SaError> {
        if self.header.base_version == BASE_VERSION && self.header.class_version == SA_CLASS_VERSION
        {
            Ok(())
        } else {
            Err(SaError::BadVersion {
                base_version: self.header.base_version,
                class_version: self.header.class_version,
            })
        }
    }

    /// The AttributeID.
    pub fn attribute_id(&self) -> SaAttributeId {
        self.header.attr_id.into()
    }

    /// The Method (R bit included).
    pub fn method(&self) -> Method {
        self.header.method
    }

    /// The TransactionID.
    pub fn tid(&self) -> u64 {
        self.header.tid
    }

    /// The MAD status.
    pub fn status(&self) -> SaStatus {
        SaStatus(self.header.status)
    }

    /// Decodes the SA data as record `R` (the first record of a table segment).
    pub fn record<R: SaRecord>(&self) -> Result<R, SaError> {
        R::decode(&self.data)
    }

    /// Puts `record` at the start of the SA data (the rest zero) and sets the
    /// AttributeOffset to the record's padded size.
    pub fn set_record<R: SaRecord>(&mut self, record: &R) -> Result<(), SaError> {
        self.data = [0u8; SA_DATA_SIZE];
        record.encode_into(&mut self.data)?;
        self.attribute_offset = R::attribute_offset();
        Ok(())
    }

    /// Copies `bytes` (at most 200) to the start of the SA data, zeroing the rest.
    pub fn set_data(&mut self, bytes: &[u8]) {
        self.data = [0u8; SA_DATA_SIZE];
        let n = bytes.len().min(SA_DATA_SIZE);
        if let (Some(d), Some(s)) = (self.data.get_mut(..n), bytes.get(..n)) {
            d.copy_from_slice(s);
        }
    }

    /// The response to this request: `method` (GetResp, GetTableResp, ...), the same
    /// TID, attribute and modifier, `status`, the request's SM_Key and ComponentMask,
    /// no RMPP, empty data.
    pub fn response(&self, method: Method, status: SaStatus) -> SaMad {
        let mut r = *self;
        r.header.method = method;
        r.header.status = status.0;
        r.header.base_version = BASE_VERSION;
        r.header.class_version = SA_CLASS_VERSION;
        r.rmpp = RmppHeader::default();
        r.attribute_offset = 0;
        r.data = [0u8; SA_DATA_SIZE];
        r
    }

    /// The RMPP ACK a receiver sends for this DATA segment (IBA 13.6.3): the same
    /// header with the R bit flipped, RMPPType ACK, SegmentNumber of this segment and
    /// NewWindowLast `new_window_last`; data zero.
    pub fn rmpp_ack(&self, new_window_last: u32) -> SaMad {
        let mut a = *self;
        a.header.method = Method(self.header.method.0 ^ Method::RESPONSE_BIT);
        a.rmpp = RmppHeader {
            version: RMPP_VERSION,
            rmpp_type: RmppType::ACK,
            resp_time: 0,
            flags: RmppFlags::ACTIVE,
            status: RmppHeader::STATUS_NORMAL,
            data1: self.rmpp.data1,
            data2: new_window_last,
        };
        a.data = [0u8; SA_DATA_SIZE];
        a
    }
}
