//! The MAD common header (IBA 13.4.2, 24 bytes) and its small newtypes.

use core::fmt;

use crate::attribute_id::AttributeId;
use crate::error::MadError;

/// Size of every MAD on the wire (umad hands us exactly this many bytes after its own header).
pub const MAD_SIZE: usize = 256;
/// Size of the SMP data field (both LID-routed and directed-route SMPs).
pub const SMP_DATA_SIZE: usize = 64;
/// Size of the MAD common header.
pub const MAD_HEADER_SIZE: usize = 24;
/// MAD BaseVersion this crate speaks.
pub const BASE_VERSION: u8 = 1;
/// ClassVersion of the subnet management classes.
pub const SMP_CLASS_VERSION: u8 = 1;

/// MAD method byte, including the response bit (0x80): `GET_RESP` is `0x81`.
///
/// A newtype rather than an enum because vendor and class-specific methods exist
/// and a decoder must carry them through instead of failing.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Method(pub u8);

impl Method {
    /// SubnGet.
    pub const GET: Method = Method(0x01);
    /// SubnSet.
    pub const SET: Method = Method(0x02);
    /// Send (not used by SMPs, kept for completeness).
    pub const SEND: Method = Method(0x03);
    /// SubnTrap.
    pub const TRAP: Method = Method(0x05);
    /// SubnGetResp (the response to Get and Set).
    pub const GET_RESP: Method = Method(0x81);
    /// SubnTrapRepress.
    pub const TRAP_REPRESS: Method = Method(0x07);
    /// Report (a class manager forwards a Notice to a subscriber, SA 15.2.1).
    pub const REPORT: Method = Method(0x06);
    /// ReportResp.
    pub const REPORT_RESP: Method = Method(0x86);
    /// GetTable (SA: every record matching a template, RMPP answer).
    pub const GET_TABLE: Method = Method(0x12);
    /// GetTableResp.
    pub const GET_TABLE_RESP: Method = Method(0x92);
    /// GetTraceTable (SA TraceRecord).
    pub const GET_TRACE_TABLE: Method = Method(0x13);
    /// GetMulti (SA MultiPathRecord, RMPP both ways).
    pub const GET_MULTI: Method = Method(0x14);
    /// GetMultiResp.
    pub const GET_MULTI_RESP: Method = Method(0x94);
    /// Delete (SA: remove a record, e.g. leave a multicast group).
    pub const DELETE: Method = Method(0x15);
    /// DeleteResp.
    pub const DELETE_RESP: Method = Method(0x95);

    /// The response bit (R) of the method byte.
    pub const RESPONSE_BIT: u8 = 0x80;

    /// True when the R bit is set.
    pub const fn is_response(self) -> bool {
        self.0 & Self::RESPONSE_BIT != 0
    }

    /// IBA name, or `None` for methods neither SMPs nor the SA use.
    pub const fn name(self) -> Option<&'static str> {
        Some(match self.0 {
            0x01 => "Get",
            0x02 => "Set",
            0x03 => "Send",
            0x05 => "Trap",
            0x81 => "GetResp",
            0x07 => "TrapRepress",
            0x06 => "Report",
            0x86 => "ReportResp",
            0x12 => "GetTable",
            0x92 => "GetTableResp",
            0x13 => "GetTraceTable",
            0x14 => "GetMulti",
            0x94 => "GetMultiResp",
            0x15 => "Delete",
            0x95 => "DeleteResp",
            _ => return None,
        })
    }
}

impl fmt::Debug for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => write!(f, "{n}"),
            None => write!(f, "Method({:#04x})", self.0),
        }
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// MAD management class byte.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct MgmtClass(pub u8);

impl MgmtClass {
    /// Subnet management, LID-routed (SubnLidRouted).
    pub const SUBN_LID_ROUTED: MgmtClass = MgmtClass(0x01);
    /// Subnet management, directed route (SubnDirectedRoute).
    pub const SUBN_DIRECTED_ROUTE: MgmtClass = MgmtClass(0x81);
    /// Subnet administration ([`crate::sa::SaMad`]).
    pub const SUBN_ADM: MgmtClass = MgmtClass(0x03);
    /// Performance management.
    pub const PERF_MGT: MgmtClass = MgmtClass(0x04);
}

impl fmt::Debug for MgmtClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            0x01 => write!(f, "SubnLidRouted"),
            0x81 => write!(f, "SubnDirectedRoute"),
            0x03 => write!(f, "SubnAdm"),
            0x04 => write!(f, "PerfMgt"),
            c => write!(f, "MgmtClass({c:#04x})"),
        }
    }
}

/// The MAD common header (IBA 13.4.3), as it appears on the wire for every class.
///
/// For directed-route SMPs the `status` field holds the D bit (bit 15) and the
/// 15-bit status, and `class_specific` holds HopPointer (high byte) and HopCount
/// (low byte); [`crate::Smp`] splits those out. This struct keeps them raw so it
/// can describe any class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct MadHeader {
    /// BaseVersion (1).
    pub base_version: u8,
    /// MgmtClass.
    pub mgmt_class: MgmtClass,
    /// ClassVersion.
    pub class_version: u8,
    /// Method, R bit included.
    pub method: Method,
    /// Status (16 bits as on the wire).
    pub status: u16,
    /// ClassSpecific (for DR SMPs: HopPointer << 8 | HopCount).
    pub class_specific: u16,
    /// TransactionID.
    pub tid: u64,
    /// AttributeID.
    pub attr_id: AttributeId,
    /// AttributeModifier.
    pub attr_mod: u32,
}

impl MadHeader {
    /// Decodes the first 24 bytes of `buf`. Checks nothing beyond length: the
    /// header is class-agnostic, callers decide which versions and classes they accept.
    pub fn decode(buf: &[u8]) -> Result<MadHeader, MadError> {
        let b: &[u8; MAD_HEADER_SIZE] = buf
            .get(..MAD_HEADER_SIZE)
            .and_then(|s| s.try_into().ok())
            .ok_or(MadError::TooShort {
                what: "MAD header",
                need: MAD_HEADER_SIZE,
                got: buf.len(),
            })?;
        Ok(MadHeader {
            base_version: b[0],
            mgmt_class: MgmtClass(b[1]),
            class_version: b[2],
            method: Method(b[3]),
            status: u16::from_be_bytes([b[4], b[5]]),
            class_specific: u16::from_be_bytes([b[6], b[7]]),
            tid: u64::from_be_bytes([b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]]),
            attr_id: AttributeId(u16::from_be_bytes([b[16], b[17]])),
            // b[18..20] is Reserved.
            attr_mod: u32::from_be_bytes([b[20], b[21], b[22], b[23]]),
        })
    }

    /// Encodes the header (Reserved bytes 18..20 zero).
    pub fn encode(&self) -> [u8; MAD_HEADER_SIZE] {
        let mut b = [0u8; MAD_HEADER_SIZE];
        self.encode_into(&mut b);
        b
    }

    /// Encodes the header into the first 24 bytes of a MAD buffer.
    pub fn encode_into(&self, b: &mut [u8; MAD_HEADER_SIZE]) {
        b[0] = self.base_version;
        b[1] = self.mgmt_class.0;
        b[2] = self.class_version;
        b[3] = self.method.0;
        b[4..6].copy_from_slice(&self.status.to_be_bytes());
        b[6..8].copy_from_slice(&self.class_specific.to_be_bytes());
        b[8..16].copy_from_slice(&self.tid.to_be_bytes());
        b[16..18].copy_from_slice(&self.attr_id.0.to_be_bytes());
        b[18] = 0;
        b[19] = 0;
        b[20..24].copy_from_slice(&self.attr_mod.to_be_bytes());
    }
}

/// Reads the TransactionID of a MAD without decoding the rest; `None` if the
/// buffer is shorter than 16 bytes. Used to route responses to waiting transactions.
pub fn peek_tid(buf: &[u8]) -> Option<u64> {
    let b: [u8; 8] = buf.get(8..16)?.try_into().ok()?;
    Some(u64::from_be_bytes(b))
}
