//! [`AttributeId`], the SMP attribute identifier, in a file of its own: the MAD
//! header carries one, [`crate::MadError`] names one, and every attribute codec
//! declares its own, so all of them import it from here without importing each other.

use core::fmt;

/// SMP attribute identifier (IBA Table 145 / "Subnet Management Attributes").
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct AttributeId(pub u16);

impl AttributeId {
    /// ClassPortInfo.
    pub const CLASS_PORT_INFO: AttributeId = AttributeId(0x0001);
    /// Notice (traps).
    pub const NOTICE: AttributeId = AttributeId(0x0002);
    /// InformInfo.
    pub const INFORM_INFO: AttributeId = AttributeId(0x0003);
    /// NodeDescription.
    pub const NODE_DESCRIPTION: AttributeId = AttributeId(0x0010);
    /// NodeInfo.
    pub const NODE_INFO: AttributeId = AttributeId(0x0011);
    /// SwitchInfo.
    pub const SWITCH_INFO: AttributeId = AttributeId(0x0012);
    /// GUIDInfo.
    pub const GUID_INFO: AttributeId = AttributeId(0x0014);
    /// PortInfo.
    pub const PORT_INFO: AttributeId = AttributeId(0x0015);
    /// P_KeyTable.
    pub const P_KEY_TABLE: AttributeId = AttributeId(0x0016);
    /// SLtoVLMappingTable.
    pub const SL_TO_VL_MAPPING_TABLE: AttributeId = AttributeId(0x0017);
    /// VLArbitrationTable.
    pub const VL_ARBITRATION_TABLE: AttributeId = AttributeId(0x0018);
    /// LinearForwardingTable.
    pub const LINEAR_FORWARDING_TABLE: AttributeId = AttributeId(0x0019);
    /// RandomForwardingTable.
    pub const RANDOM_FORWARDING_TABLE: AttributeId = AttributeId(0x001A);
    /// MulticastForwardingTable.
    pub const MULTICAST_FORWARDING_TABLE: AttributeId = AttributeId(0x001B);
    /// SMInfo.
    pub const SM_INFO: AttributeId = AttributeId(0x0020);
    /// VendorDiag.
    pub const VENDOR_DIAG: AttributeId = AttributeId(0x0030);
    /// LedInfo.
    pub const LED_INFO: AttributeId = AttributeId(0x0031);

    /// IBA name of the attribute, or `None` for ids this crate does not know.
    pub const fn name(self) -> Option<&'static str> {
        Some(match self.0 {
            0x0001 => "ClassPortInfo",
            0x0002 => "Notice",
            0x0003 => "InformInfo",
            0x0010 => "NodeDescription",
            0x0011 => "NodeInfo",
            0x0012 => "SwitchInfo",
            0x0014 => "GUIDInfo",
            0x0015 => "PortInfo",
            0x0016 => "P_KeyTable",
            0x0017 => "SLtoVLMappingTable",
            0x0018 => "VLArbitrationTable",
            0x0019 => "LinearForwardingTable",
            0x001A => "RandomForwardingTable",
            0x001B => "MulticastForwardingTable",
            0x0020 => "SMInfo",
            0x0030 => "VendorDiag",
            0x0031 => "LedInfo",
            _ => return None,
        })
    }
}

impl fmt::Debug for AttributeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => write!(f, "{n}({:#06x})", self.0),
            None => write!(f, "AttributeId({:#06x})", self.0),
        }
    }
}

impl fmt::Display for AttributeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}
