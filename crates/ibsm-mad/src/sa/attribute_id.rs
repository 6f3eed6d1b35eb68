//! [`SaAttributeId`]: the AttributeID of an SA MAD (IBA 15.2.5, Table 193).

use core::fmt;

use crate::attribute_id::AttributeId;

/// SA attribute identifier. A newtype (not an enum): vendor attributes exist and an
/// SA must answer an unknown one with status 0x001C, not fail to decode it.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct SaAttributeId(pub u16);

macro_rules! sa_attribute_ids {
    ($($(#[$m:meta])* $name:ident = $val:literal, $iba:literal;)*) => {
        impl SaAttributeId {
            $($(#[$m])* pub const $name: SaAttributeId = SaAttributeId($val);)*

            /// Every SA attribute this crate names.
            pub const ALL: &'static [SaAttributeId] = &[$(SaAttributeId::$name),*];

            /// IBA name, or `None` for ids this crate does not know.
            pub const fn name(self) -> Option<&'static str> {
                match self.0 {
                    $($val => Some($iba),)*
                    _ => None,
                }
            }
        }
    };
}

sa_attribute_ids! {
    /// ClassPortInfo.
    CLASS_PORT_INFO = 0x0001, "ClassPortInfo";
    /// Notice (in Report).
    NOTICE = 0x0002, "Notice";
    /// InformInfo (event subscription).
    INFORM_INFO = 0x0003, "InformInfo";
    /// NodeRecord.
    NODE_RECORD = 0x0011, "NodeRecord";
    /// PortInfoRecord.
    PORT_INFO_RECORD = 0x0012, "PortInfoRecord";
    /// SLtoVLMappingTableRecord.
    SL_TO_VL_MAPPING_TABLE_RECORD = 0x0013, "SLtoVLMappingTableRecord";
    /// SwitchInfoRecord.
    SWITCH_INFO_RECORD = 0x0014, "SwitchInfoRecord";
    /// LinearForwardingTableRecord.
    LINEAR_FORWARDING_TABLE_RECORD = 0x0015, "LinearForwardingTableRecord";
    /// RandomForwardingTableRecord.
    RANDOM_FORWARDING_TABLE_RECORD = 0x0016, "RandomForwardingTableRecord";
    /// MulticastForwardingTableRecord.
    MULTICAST_FORWARDING_TABLE_RECORD = 0x0017, "MulticastForwardingTableRecord";
    /// SMInfoRecord.
    SM_INFO_RECORD = 0x0018, "SMInfoRecord";
    /// LinkRecord.
    LINK_RECORD = 0x0020, "LinkRecord";
    /// GuidInfoRecord.
    GUID_INFO_RECORD = 0x0030, "GuidInfoRecord";
    /// ServiceRecord.
    SERVICE_RECORD = 0x0031, "ServiceRecord";
    /// P_KeyTableRecord.
    P_KEY_TABLE_RECORD = 0x0033, "P_KeyTableRecord";
    /// PathRecord.
    PATH_RECORD = 0x0035, "PathRecord";
    /// VLArbitrationTableRecord.
    VL_ARBITRATION_TABLE_RECORD = 0x0036, "VLArbitrationTableRecord";
    /// MCMemberRecord.
    MC_MEMBER_RECORD = 0x0038, "MCMemberRecord";
    /// TraceRecord.
    TRACE_RECORD = 0x0039, "TraceRecord";
    /// MultiPathRecord.
    MULTI_PATH_RECORD = 0x003A, "MultiPathRecord";
    /// InformInfoRecord.
    INFORM_INFO_RECORD = 0x00F3, "InformInfoRecord";
}

impl From<AttributeId> for SaAttributeId {
    fn from(a: AttributeId) -> Self {
        SaAttributeId(a.0)
    }
}

impl From<SaAttributeId> for AttributeId {
    fn from(a: SaAttributeId) -> Self {
        AttributeId(a.0)
    }
}

impl fmt::Debug for SaAttributeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => write!(f, "{n}({:#06x})", self.0),
            None => write!(f, "SaAttributeId({:#06x})", self.0),
        }
    }
}

impl fmt::Display for SaAttributeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}
