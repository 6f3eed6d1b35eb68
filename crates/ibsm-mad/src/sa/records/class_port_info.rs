//! ClassPortInfo (IBA 13.4.8.1), as the SA answers it (72 bytes).

use crate::sa::attribute_id::SaAttributeId;
use crate::sa::component_mask::ComponentMask;
use crate::sa::error::SaError;
use crate::sa::wire::{load, put, rd16, rd24, rd32, rd_gid, wr16, wr24, wr32, Gid};

/// ClassPortInfo: what the class manager supports and where to send redirected
/// requests and traps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ClassPortInfo {
    /// BaseVersion (0).
    pub base_version: u8,
    /// ClassVersion (1).
    pub class_version: u8,
    /// CapabilityMask (2..4): bits 0 IsTrapSupported, 1 IsGetSetSupported
    /// (common); 8.. class specific (see the `CAP_*` consts).
    pub capability_mask: u16,
    /// CapabilityMask2 (4..8, bits 31:5; 27 bits).
    pub capability_mask2: u32,
    /// RespTimeValue (byte 7 bits 4:0).
    pub resp_time_value: u8,
    /// RedirectGID (8..24).
    pub redirect_gid: Gid,
    /// RedirectTC (24).
    pub redirect_tc: u8,
    /// RedirectSL (25 bits 7:4).
    pub redirect_sl: u8,
    /// RedirectFL (20 bits, 25..28).
    pub redirect_fl: u32,
    /// RedirectLID (28..30).
    pub redirect_lid: u16,
    /// RedirectP_Key (30..32).
    pub redirect_p_key: u16,
    /// RedirectQP (24 bits, 33..36; byte 32 reserved).
    pub redirect_qp: u32,
    /// RedirectQ_Key (36..40).
    pub redirect_q_key: u32,
    /// TrapGID (40..56).
    pub trap_gid: Gid,
    /// TrapTC (56).
    pub trap_tc: u8,
    /// TrapSL (57 bits 7:4).
    pub trap_sl: u8,
    /// TrapFL (20 bits, 57..60).
    pub trap_fl: u32,
    /// TrapLID (60..62).
    pub trap_lid: u16,
    /// TrapP_Key (62..64).
    pub trap_p_key: u16,
    /// TrapHL (64).
    pub trap_hl: u8,
    /// TrapQP (24 bits, 65..68).
    pub trap_qp: u32,
    /// TrapQ_Key (68..72).
    pub trap_q_key: u32,
}

impl ClassPortInfo {
    /// Bytes on the wire.
    pub const SIZE: usize = 72;
    /// CapabilityMask bit 0: the class sends traps.
    pub const CAP_IS_TRAP_SUPPORTED: u16 = 1 << 0;
    /// CapabilityMask bit 1: Get/Set of class attributes supported.
    pub const CAP_IS_GET_SET_SUPPORTED: u16 = 1 << 1;
    /// SA CapabilityMask bit 8: optional records supported.
    pub const CAP_IS_OPTIONAL_RECORDS_SUPPORTED: u16 = 1 << 8;
    /// SA CapabilityMask bit 9: UD multicast supported.
    pub const CAP_IS_UD_MULTICAST_SUPPORTED: u16 = 1 << 9;
    /// SA CapabilityMask bit 10: MultiPathRecord supported.
    pub const CAP_IS_MULTI_PATH_SUPPORTED: u16 = 1 << 10;
    /// SA CapabilityMask bit 11: reinit supported.
    pub const CAP_IS_REINIT_SUPPORTED: u16 = 1 << 11;
    /// SA CapabilityMask bit 13: PortInfoRecord queries match CapabilityMask bitwise.
    pub const CAP_IS_PORT_INFO_CAPABILITY_MASK_MATCH_SUPPORTED: u16 = 1 << 13;
    /// SA CapabilityMask2 bit 1: QoS supported.
    pub const CAP2_IS_QOS_SUPPORTED: u32 = 1 << 1;
    /// SA CapabilityMask2 bit 2: reverse-path P_Key supported.
    pub const CAP2_IS_REVERSE_PATH_P_KEY_SUPPORTED: u32 = 1 << 2;
    /// SA CapabilityMask2 bit 3: MulticastFDBTop supported.
    pub const CAP2_IS_MCAST_TOP_SUPPORTED: u32 = 1 << 3;
    /// SA CapabilityMask2 bit 4: HierarchyInfo supported.
    pub const CAP2_IS_HIERARCHY_SUPPORTED: u32 = 1 << 4;
    /// SA CapabilityMask2 bit 5: alias GUIDs supported.
    pub const CAP2_IS_ALIAS_GUIDS_SUPPORTED: u32 = 1 << 5;
    /// SA CapabilityMask2 bit 6: full PortInfoRecords (all ports of a switch) supported.
    pub const CAP2_IS_FULL_PORT_INFO_RECORD_SUPPORTED: u32 = 1 << 6;
    /// SA CapabilityMask2 bit 7: extended link speeds supported.
    pub const CAP2_IS_EXTENDED_SPEEDS_SUPPORTED: u32 = 1 << 7;
    /// SA CapabilityMask2 bit 8: multicast ServiceRecords supported.
    pub const CAP2_IS_MULTICAST_SERVICE_RECORDS_SUPPORTED: u32 = 1 << 8;
    /// SA CapabilityMask2 bit 10: PortInfoRecord queries match CapabilityMask2 bitwise.
    pub const CAP2_IS_PORT_INFO_CAPABILITY_MASK2_MATCH_SUPPORTED: u32 = 1 << 10;
    /// SA CapabilityMask2 bit 12: SendOnlyFullMember joins supported.
    pub const CAP2_IS_SEND_ONLY_FULL_MEMBER_SUPPORTED: u32 = 1 << 12;

    /// Decodes from at least 72 bytes.
    pub fn decode(data: &[u8]) -> Result<Self, SaError> {
        let b: [u8; Self::SIZE] = load(data, "ClassPortInfo")?;
        let cm2 = rd32(&b, 4);
        Ok(ClassPortInfo {
            base_version: b[0],
            class_version: b[1],
            capability_mask: rd16(&b, 2),
            capability_mask2: cm2 >> 5,
            resp_time_value: (cm2 & 0x1F) as u8,
            redirect_gid: rd_gid(&b, 8),
            redirect_tc: b[24],
            redirect_sl: b[25] >> 4,
            redirect_fl: rd24(&b, 25) & 0x000F_FFFF,
            redirect_lid: rd16(&b, 28),
            redirect_p_key: rd16(&b, 30),
            redirect_qp: rd24(&b, 33),
            redirect_q_key: rd32(&b, 36),
            trap_gid: rd_gid(&b, 40),
            trap_tc: b[56],
            trap_sl: b[57] >> 4,
            trap_fl: rd24(&b, 57) & 0x000F_FFFF,
            trap_lid: rd16(&b, 60),
            trap_p_key: rd16(&b, 62),
            trap_hl: b[64],
            trap_qp: rd24(&b, 65),
            trap_q_key: rd32(&b, 68),
        })
    }

    /// Encodes, reserved bits zero and narrow fields masked.
    pub fn encode(&self) -> [u8; Self::SIZE] {
        let mut b = [0u8; Self::SIZE];
        b[0] = self.base_version;
        b[1] = self.class_version;
        wr16(&mut b, 2, self.capability_mask);
        wr32(
            &mut b,
            4,
            ((self.capability_mask2 & 0x07FF_FFFF) << 5) | u32::from(self.resp_time_value & 0x1F),
        );
        put(&mut b, 8, &self.redirect_gid);
        b[24] = self.redirect_tc;
        wr24(
            &mut b,
            25,
            (u32::from(self.redirect_sl & 0x0F) << 20) | (self.redirect_fl & 0x000F_FFFF),
        );
        wr16(&mut b, 28, self.redirect_lid);
        wr16(&mut b, 30, self.redirect_p_key);
        wr24(&mut b, 33, self.redirect_qp & 0x00FF_FFFF);
        wr32(&mut b, 36, self.redirect_q_key);
        put(&mut b, 40, &self.trap_gid);
        b[56] = self.trap_tc;
        wr24(
            &mut b,
            57,
            (u32::from(self.trap_sl & 0x0F) << 20) | (self.trap_fl & 0x000F_FFFF),
        );
        wr16(&mut b, 60, self.trap_lid);
        wr16(&mut b, 62, self.trap_p_key);
        b[64] = self.trap_hl;
        wr24(&mut b, 65, self.trap_qp & 0x00FF_FFFF);
        wr32(&mut b, 68, self.trap_q_key);
        b
    }

    /// ClassPortInfo is read with Get and has no components: always true.
    pub fn matches(&self, _template: &Self, _mask: ComponentMask) -> bool {
        true
    }
}

impl_sa_record!(
    ClassPortInfo,
    SaAttributeId::CLASS_PORT_INFO,
    "ClassPortInfo"
);
