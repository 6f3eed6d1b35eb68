//! Typed AttributeModifiers (IBA 14.2.5). Each type converts from the raw `u32`
//! (`from_attr_mod`) and back (`attr_mod`). Bits IBA reserves are ignored on the way
//! in and written zero on the way out, so `T::from_attr_mod(x).attr_mod()` equals `x`
//! with its reserved bits cleared. Only modifiers whose values IBA enumerates
//! (SMInfo control, VLArbitration section) can fail.

use crate::error::MadError;

/// P_KeyTable modifier: bits 15:0 block (32 keys each), bits 23:16 port (switch
/// external ports only; CAs ignore it). Bits 31:24 would be the high half of a 16-bit
/// port number, which no IBA device has; they are ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PKeyBlock {
    /// Block number (entries `block*32 .. block*32+31`).
    pub block: u16,
    /// Port (switches; 0 = management port).
    pub port: u8,
}

impl PKeyBlock {
    /// From the raw AttributeModifier.
    pub const fn from_attr_mod(m: u32) -> PKeyBlock {
        PKeyBlock {
            block: (m & 0xFFFF) as u16,
            port: ((m >> 16) & 0xFF) as u8,
        }
    }
    /// To the raw AttributeModifier.
    pub const fn attr_mod(self) -> u32 {
        ((self.port as u32) << 16) | self.block as u32
    }
}

/// SLtoVLMappingTable modifier (IBA 1.2.1): bits 7:0 output port, bits 15:8 input
/// port, bit 16 "all input ports", bit 17 "all output ports" (optimized programming,
/// only when SwitchInfo.OptimizedSLtoVLMappingProgramming allows it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Sl2VlPorts {
    /// Input port (0 = management port).
    pub in_port: u8,
    /// Output port.
    pub out_port: u8,
    /// Bit 16: apply to all input ports (in_port ignored).
    pub all_in_ports: bool,
    /// Bit 17: apply to all output ports (out_port ignored).
    pub all_out_ports: bool,
}

impl Sl2VlPorts {
    /// From the raw AttributeModifier.
    pub const fn from_attr_mod(m: u32) -> Sl2VlPorts {
        Sl2VlPorts {
            in_port: ((m >> 8) & 0xFF) as u8,
            out_port: (m & 0xFF) as u8,
            all_in_ports: m & (1 << 16) != 0,
            all_out_ports: m & (1 << 17) != 0,
        }
    }
    /// To the raw AttributeModifier.
    pub const fn attr_mod(self) -> u32 {
        ((self.all_out_ports as u32) << 17)
            | ((self.all_in_ports as u32) << 16)
            | ((self.in_port as u32) << 8)
            | self.out_port as u32
    }
}

/// Which quarter of the VL arbitration tables a VLArbitrationTable SMP carries
/// (modifier bits 31:16).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum VlArbSection {
    /// 1: Low-priority table, entries 0..32.
    LowLower = 1,
    /// 2: Low-priority table, entries 32..64.
    LowUpper = 2,
    /// 3: High-priority table, entries 0..32.
    HighLower = 3,
    /// 4: High-priority table, entries 32..64.
    HighUpper = 4,
}

/// VLArbitrationTable modifier: bits 31:16 section, bits 7:0 port (switches).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VlArbBlock {
    /// Table and half.
    pub section: VlArbSection,
    /// Port (switches; CAs ignore it).
    pub port: u8,
}

impl VlArbBlock {
    /// From the raw AttributeModifier; sections other than 1..=4 are reserved.
    pub fn from_attr_mod(m: u32) -> Result<VlArbBlock, MadError> {
        let section = match m >> 16 {
            1 => VlArbSection::LowLower,
            2 => VlArbSection::LowUpper,
            3 => VlArbSection::HighLower,
            4 => VlArbSection::HighUpper,
            s => {
                return Err(MadError::InvalidField {
                    attr: "VLArbitrationTable",
                    field: "AttributeModifier[31:16]",
                    value: u64::from(s),
                    why: "section must be 1..=4",
                })
            }
        };
        Ok(VlArbBlock {
            section,
            port: (m & 0xFF) as u8,
        })
    }
    /// To the raw AttributeModifier.
    pub const fn attr_mod(self) -> u32 {
        ((self.section as u32) << 16) | self.port as u32
    }
}

/// SubnSet(SMInfo) control packet type (AttributeModifier).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum SmInfoControl {
    /// 1: hand mastership over to the receiver.
    Handover = 1,
    /// 2: acknowledge a handover.
    Acknowledge = 2,
    /// 3: move a Standby SM to NotActive.
    Disable = 3,
    /// 4: move a NotActive SM back to Standby.
    Standby = 4,
    /// 5: make a Standby SM go Discovering.
    Discover = 5,
}

impl SmInfoControl {
    /// From the raw AttributeModifier of a SubnSet(SMInfo).
    pub fn from_attr_mod(m: u32) -> Result<SmInfoControl, MadError> {
        Ok(match m {
            1 => SmInfoControl::Handover,
            2 => SmInfoControl::Acknowledge,
            3 => SmInfoControl::Disable,
            4 => SmInfoControl::Standby,
            5 => SmInfoControl::Discover,
            _ => {
                return Err(MadError::InvalidField {
                    attr: "SMInfo",
                    field: "AttributeModifier",
                    value: u64::from(m),
                    why: "SubnSet(SMInfo) control must be 1..=5 (HANDOVER..DISCOVER)",
                })
            }
        })
    }
    /// To the raw AttributeModifier.
    pub const fn attr_mod(self) -> u32 {
        self as u32
    }
}

impl TryFrom<u32> for SmInfoControl {
    type Error = MadError;
    fn try_from(m: u32) -> Result<Self, MadError> {
        SmInfoControl::from_attr_mod(m)
    }
}

/// LinearForwardingTable modifier: the 64-LID block (bits 15:0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct LftBlock(pub u16);

impl LftBlock {
    /// The block holding `lid`.
    pub const fn of_lid(lid: u16) -> LftBlock {
        LftBlock(lid / 64)
    }
    /// First LID of the block.
    pub const fn first_lid(self) -> u32 {
        self.0 as u32 * 64
    }
    /// From the raw AttributeModifier.
    pub const fn from_attr_mod(m: u32) -> LftBlock {
        LftBlock((m & 0xFFFF) as u16)
    }
    /// To the raw AttributeModifier.
    pub const fn attr_mod(self) -> u32 {
        self.0 as u32
    }
}

/// RandomForwardingTable modifier: the 16-entry block (bits 15:0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct RftBlock(pub u16);

impl RftBlock {
    /// From the raw AttributeModifier.
    pub const fn from_attr_mod(m: u32) -> RftBlock {
        RftBlock((m & 0xFFFF) as u16)
    }
    /// To the raw AttributeModifier.
    pub const fn attr_mod(self) -> u32 {
        self.0 as u32
    }
}

/// MulticastForwardingTable modifier: bits 8:0 the 32-MLID block (MLIDs
/// `0xC000 + block*32 ..`), bits 31:28 the position (which 16-port slice of the port mask).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct MftBlock {
    /// MLID block (9 bits).
    pub block: u16,
    /// PortMask position (4 bits): ports `position*16 .. position*16+15`.
    pub position: u8,
}

impl MftBlock {
    /// From the raw AttributeModifier.
    pub const fn from_attr_mod(m: u32) -> MftBlock {
        MftBlock {
            block: (m & 0x1FF) as u16,
            position: (m >> 28) as u8,
        }
    }
    /// To the raw AttributeModifier.
    pub const fn attr_mod(self) -> u32 {
        (((self.position & 0x0F) as u32) << 28) | (self.block & 0x1FF) as u32
    }
}

/// GUIDInfo modifier: the 8-GUID block (bits 15:0; IBA allows 0..=31).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct GuidBlock(pub u16);

impl GuidBlock {
    /// From the raw AttributeModifier.
    pub const fn from_attr_mod(m: u32) -> GuidBlock {
        GuidBlock((m & 0xFFFF) as u16)
    }
    /// To the raw AttributeModifier.
    pub const fn attr_mod(self) -> u32 {
        self.0 as u32
    }
}

/// PortInfo modifier: the port number (bits 7:0). 0 = receiving port (CA) or
/// management port (switch).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct PortSelector(pub u8);

impl PortSelector {
    /// From the raw AttributeModifier.
    pub const fn from_attr_mod(m: u32) -> PortSelector {
        PortSelector((m & 0xFF) as u8)
    }
    /// To the raw AttributeModifier.
    pub const fn attr_mod(self) -> u32 {
        self.0 as u32
    }
}
