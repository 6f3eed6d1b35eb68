//! [`SaStatus`]: the MAD Status field of SA responses (IBA 13.4.7 Table 110 for the
//! common bits 7:0, IBA 15.2.1.1 Table 190 for the SA class codes in bits 15:8).

use core::fmt;

/// The 16-bit MAD Status of an SA response.
///
/// Bit 0 Busy, bit 1 RedirectRequired, bits 4:2 the invalid-field code, bits 15:8 the
/// SA class-specific code. A newtype so that any value a peer sends round-trips.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct SaStatus(pub u16);

impl SaStatus {
    /// Success.
    pub const SUCCESS: SaStatus = SaStatus(0x0000);
    /// Busy: the request was discarded, retry later.
    pub const BUSY: SaStatus = SaStatus(0x0001);
    /// Redirect required (see ClassPortInfo).
    pub const REDIRECT: SaStatus = SaStatus(0x0002);
    /// Bad version: BaseVersion or ClassVersion not supported.
    pub const BAD_VERSION: SaStatus = SaStatus(0x0004);
    /// Method not supported.
    pub const METHOD_NOT_SUPPORTED: SaStatus = SaStatus(0x0008);
    /// Method/attribute combination not supported.
    pub const METHOD_ATTR_NOT_SUPPORTED: SaStatus = SaStatus(0x000C);
    /// One or more fields of the attribute or attribute modifier are invalid.
    pub const INVALID_ATTRIBUTE: SaStatus = SaStatus(0x001C);
    /// ERR_NO_RESOURCES: insufficient resources to complete the request.
    pub const ERR_NO_RESOURCES: SaStatus = SaStatus(0x0100);
    /// ERR_REQ_INVALID: the request is malformed or inconsistent.
    pub const ERR_REQ_INVALID: SaStatus = SaStatus(0x0200);
    /// ERR_NO_RECORDS: no record matches (for Get; GetTable answers an empty table).
    pub const ERR_NO_RECORDS: SaStatus = SaStatus(0x0300);
    /// ERR_TOO_MANY_RECORDS: more than one record matches a Get.
    pub const ERR_TOO_MANY_RECORDS: SaStatus = SaStatus(0x0400);
    /// ERR_REQ_INVALID_GID: a GID in the request is invalid.
    pub const ERR_REQ_INVALID_GID: SaStatus = SaStatus(0x0500);
    /// ERR_REQ_INSUFFICIENT_COMPONENTS: the ComponentMask lacks required components.
    pub const ERR_REQ_INSUFFICIENT_COMPONENTS: SaStatus = SaStatus(0x0600);
    /// ERR_REQ_DENIED: the request was denied (e.g. access rights, SA_Key).
    pub const ERR_REQ_DENIED: SaStatus = SaStatus(0x0700);
    /// ERR_REQ_PRIORITY_SUGGESTED (IBA 1.2.1): a different QoS priority is suggested.
    pub const ERR_REQ_PRIORITY_SUGGESTED: SaStatus = SaStatus(0x0800);

    /// True for success (all bits zero).
    pub const fn is_success(self) -> bool {
        self.0 == 0
    }

    /// The SA class-specific code (bits 15:8), 0 when none.
    pub const fn class_code(self) -> u8 {
        (self.0 >> 8) as u8
    }

    /// The common invalid-field code (bits 4:2).
    pub const fn invalid_field_code(self) -> u8 {
        ((self.0 >> 2) & 0x07) as u8
    }

    /// IBA name of the status, or `None` for combinations this crate does not name.
    pub const fn name(self) -> Option<&'static str> {
        Some(match self.0 {
            0x0000 => "SUCCESS",
            0x0001 => "BUSY",
            0x0002 => "REDIRECT",
            0x0004 => "BAD_VERSION",
            0x0008 => "METHOD_NOT_SUPPORTED",
            0x000C => "METHOD_ATTR_NOT_SUPPORTED",
            0x001C => "INVALID_ATTRIBUTE",
            0x0100 => "ERR_NO_RESOURCES",
            0x0200 => "ERR_REQ_INVALID",
            0x0300 => "ERR_NO_RECORDS",
            0x0400 => "ERR_TOO_MANY_RECORDS",
            0x0500 => "ERR_REQ_INVALID_GID",
            0x0600 => "ERR_REQ_INSUFFICIENT_COMPONENTS",
            0x0700 => "ERR_REQ_DENIED",
            0x0800 => "ERR_REQ_PRIORITY_SUGGESTED",
            _ => return None,
        })
    }
}

impl fmt::Debug for SaStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => write!(f, "{n}({:#06x})", self.0),
            None => write!(f, "SaStatus({:#06x})", self.0),
        }
    }
}

impl fmt::Display for SaStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}
