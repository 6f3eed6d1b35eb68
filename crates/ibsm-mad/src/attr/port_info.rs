//! PortInfo (0x0015), its CapabilityMask, DiagCode and state enums.

use super::{load, rd16, rd24, rd32, rd64, wr16, wr24, wr32, wr64, SmpAttribute};
use crate::attribute_id::AttributeId;
use crate::error::MadError;

/// PortInfo.CapabilityMask (IBA 1.3 Table 150 footnotes; bit 0 is the LSB).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct CapabilityMask(pub u32);

impl CapabilityMask {
    /// Bit 1: an SM is present on this port.
    pub const IS_SM: u32 = 1 << 1;
    /// Bit 2.
    pub const IS_NOTICE_SUPPORTED: u32 = 1 << 2;
    /// Bit 3.
    pub const IS_TRAP_SUPPORTED: u32 = 1 << 3;
    /// Bit 4.
    pub const IS_OPTIONAL_IPD_SUPPORTED: u32 = 1 << 4;
    /// Bit 5.
    pub const IS_AUTOMATIC_MIGRATION_SUPPORTED: u32 = 1 << 5;
    /// Bit 6.
    pub const IS_SL_MAPPING_SUPPORTED: u32 = 1 << 6;
    /// Bit 7.
    pub const IS_M_KEY_NVRAM: u32 = 1 << 7;
    /// Bit 8.
    pub const IS_P_KEY_NVRAM: u32 = 1 << 8;
    /// Bit 9.
    pub const IS_LED_INFO_SUPPORTED: u32 = 1 << 9;
    /// Bit 10.
    pub const IS_SM_DISABLED: u32 = 1 << 10;
    /// Bit 11.
    pub const IS_SYSTEM_IMAGE_GUID_SUPPORTED: u32 = 1 << 11;
    /// Bit 12.
    pub const IS_P_KEY_SWITCH_EXTERNAL_PORT_TRAP_SUPPORTED: u32 = 1 << 12;
    /// Bit 13 (IBA 1.3: cable info).
    pub const IS_CABLE_INFO_SUPPORTED: u32 = 1 << 13;
    /// Bit 14 (IBA 1.2.1).
    pub const IS_EXTENDED_SPEEDS_SUPPORTED: u32 = 1 << 14;
    /// Bit 15 (IBA 1.2.1): PortInfo.CapabilityMask2 is valid.
    pub const IS_CAPABILITY_MASK2_SUPPORTED: u32 = 1 << 15;
    /// Bit 16.
    pub const IS_COMMUNICATION_MANAGEMENT_SUPPORTED: u32 = 1 << 16;
    /// Bit 17.
    pub const IS_SNMP_TUNNELING_SUPPORTED: u32 = 1 << 17;
    /// Bit 18.
    pub const IS_REINIT_SUPPORTED: u32 = 1 << 18;
    /// Bit 19.
    pub const IS_DEVICE_MANAGEMENT_SUPPORTED: u32 = 1 << 19;
    /// Bit 20.
    pub const IS_VENDOR_CLASS_SUPPORTED: u32 = 1 << 20;
    /// Bit 21.
    pub const IS_DR_NOTICE_SUPPORTED: u32 = 1 << 21;
    /// Bit 22.
    pub const IS_CAPABILITY_MASK_NOTICE_SUPPORTED: u32 = 1 << 22;
    /// Bit 23.
    pub const IS_BOOT_MANAGEMENT_SUPPORTED: u32 = 1 << 23;
    /// Bit 24.
    pub const IS_LINK_ROUND_TRIP_LATENCY_SUPPORTED: u32 = 1 << 24;
    /// Bit 25.
    pub const IS_CLIENT_REREGISTRATION_SUPPORTED: u32 = 1 << 25;
    /// Bit 26 (IBA 1.2.1).
    pub const IS_OTHER_LOCAL_CHANGES_NOTICE_SUPPORTED: u32 = 1 << 26;
    /// Bit 27 (IBA 1.2.1).
    pub const IS_LINK_SPEED_WIDTH_PAIRS_TABLE_SUPPORTED: u32 = 1 << 27;
    /// Bit 28 (IBA 1.3).
    pub const IS_VENDOR_SPECIFIC_MADS_TABLE_SUPPORTED: u32 = 1 << 28;
    /// Bit 29 (IBA 1.3).
    pub const IS_MULTICAST_P_KEY_TRAP_SUPPRESSION_SUPPORTED: u32 = 1 << 29;
    /// Bit 30 (IBA 1.3).
    pub const IS_MULTICAST_FDB_TOP_SUPPORTED: u32 = 1 << 30;
    /// Bit 31 (IBA 1.3).
    pub const IS_HIERARCHY_INFO_SUPPORTED: u32 = 1 << 31;

    /// True when every bit of `bits` is set.
    pub const fn contains(self, bits: u32) -> bool {
        self.0 & bits == bits
    }

    /// Sets or clears `bits`.
    pub fn set(&mut self, bits: u32, on: bool) {
        if on {
            self.0 |= bits;
        } else {
            self.0 &= !bits;
        }
    }

    /// IsSM.
    pub const fn is_sm(self) -> bool {
        self.contains(Self::IS_SM)
    }

    /// IsSMDisabled.
    pub const fn is_sm_disabled(self) -> bool {
        self.contains(Self::IS_SM_DISABLED)
    }

    /// IsTrapSupported.
    pub const fn is_trap_supported(self) -> bool {
        self.contains(Self::IS_TRAP_SUPPORTED)
    }

    /// IsClientReregistrationSupported.
    pub const fn is_client_reregistration_supported(self) -> bool {
        self.contains(Self::IS_CLIENT_REREGISTRATION_SUPPORTED)
    }
}

/// PortInfo.DiagCode (IBA 14.2.5.6.1): bits 3:0 universal code; for codes 3 and 4
/// bit 15 says whether bits 14:4 are a vendor code (0) or a VendorDiag index (1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct DiagCode(pub u16);

/// The universal part (bits 3:0) of a [`DiagCode`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DiagUniversal {
    /// 0: port ready / fully operational.
    Ready,
    /// 1: self-test in progress.
    PerformingSelfTest,
    /// 2: initializing.
    Initializing,
    /// 3: soft error, still operational.
    SoftError,
    /// 4: hard error, inoperative.
    HardError,
    /// 5..=15: reserved.
    Reserved(u8),
}

/// The vendor part (bits 15:4) of a [`DiagCode`], meaningful for soft/hard errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DiagVendor {
    /// Bit 15 = 0: bits 14:4 are a vendor-specific error code.
    Code(u16),
    /// Bit 15 = 1: read VendorDiag with AttributeModifier = this index (bits 14:4).
    VendorDiagIndex(u16),
}

impl DiagCode {
    /// The universal code in bits 3:0.
    pub const fn universal(self) -> DiagUniversal {
        match self.0 & 0xF {
            0 => DiagUniversal::Ready,
            1 => DiagUniversal::PerformingSelfTest,
            2 => DiagUniversal::Initializing,
            3 => DiagUniversal::SoftError,
            4 => DiagUniversal::HardError,
            // masked to 4 bits
            r => DiagUniversal::Reserved(r as u8),
        }
    }

    /// The vendor detail (bits 15:4); `None` unless the universal code is a soft or
    /// hard error, the only cases IBA gives it meaning.
    pub const fn vendor(self) -> Option<DiagVendor> {
        match self.universal() {
            DiagUniversal::SoftError | DiagUniversal::HardError => {
                let v = (self.0 >> 4) & 0x07FF;
                Some(if self.0 & 0x8000 != 0 {
                    DiagVendor::VendorDiagIndex(v)
                } else {
                    DiagVendor::Code(v)
                })
            }
            _ => None,
        }
    }

    /// True when the port reports itself fully operational (DiagCode == 0).
    pub const fn is_ok(self) -> bool {
        self.0 == 0
    }
}

open_enum! {
    /// PortInfo.PortState (4 bits).
    PortState: 0x0F {
        /// 0: no state change (on Set) / reserved on Get.
        NoChange = 0,
        /// 1: Down.
        Down = 1,
        /// 2: Initialize.
        Init = 2,
        /// 3: Armed.
        Armed = 3,
        /// 4: Active.
        Active = 4,
        /// 5: ActiveDefer (IBA 1.2).
        ActiveDefer = 5,
    }
}

open_enum! {
    /// PortInfo.PortPhysicalState (4 bits).
    PhysPortState: 0x0F {
        /// 0: no state change.
        NoChange = 0,
        /// 1: Sleep.
        Sleep = 1,
        /// 2: Polling.
        Polling = 2,
        /// 3: Disabled.
        Disabled = 3,
        /// 4: PortConfigurationTraining.
        PortConfigurationTraining = 4,
        /// 5: LinkUp.
        LinkUp = 5,
        /// 6: LinkErrorRecovery.
        LinkErrorRecovery = 6,
        /// 7: PhyTest.
        PhyTest = 7,
    }
}

/// PortInfo (IBA 1.3 14.2.5.6, 64 bytes), every field. Byte offsets are in
/// `decode`; widths narrower than the Rust type are noted per field and masked on encode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PortInfo {
    /// M_Key (0..8).
    pub m_key: u64,
    /// GidPrefix (8..16).
    pub gid_prefix: u64,
    /// LID (16..18).
    pub lid: u16,
    /// MasterSMLID (18..20).
    pub master_sm_lid: u16,
    /// CapabilityMask (20..24).
    pub capability_mask: CapabilityMask,
    /// DiagCode (24..26).
    pub diag_code: DiagCode,
    /// M_KeyLeasePeriod (26..28).
    pub m_key_lease_period: u16,
    /// LocalPortNum (28).
    pub local_port_num: u8,
    /// LinkWidthEnabled (29).
    pub link_width_enabled: u8,
    /// LinkWidthSupported (30).
    pub link_width_supported: u8,
    /// LinkWidthActive (31).
    pub link_width_active: u8,
    /// LinkSpeedSupported (32, bits 7:4; 4 bits).
    pub link_speed_supported: u8,
    /// PortState (32, bits 3:0).
    pub port_state: PortState,
    /// PortPhysicalState (33, bits 7:4).
    pub port_physical_state: PhysPortState,
    /// LinkDownDefaultState (33, bits 3:0; 4 bits).
    pub link_down_default_state: u8,
    /// M_KeyProtectBits (34, bits 7:6; 2 bits).
    pub m_key_protect_bits: u8,
    /// LMC (34, bits 2:0; 3 bits).
    pub lmc: u8,
    /// LinkSpeedActive (35, bits 7:4; 4 bits).
    pub link_speed_active: u8,
    /// LinkSpeedEnabled (35, bits 3:0; 4 bits).
    pub link_speed_enabled: u8,
    /// NeighborMTU (36, bits 7:4; 4 bits).
    pub neighbor_mtu: u8,
    /// MasterSMSL (36, bits 3:0; 4 bits).
    pub master_sm_sl: u8,
    /// VLCap (37, bits 7:4; 4 bits).
    pub vl_cap: u8,
    /// InitType (37, bits 3:0; 4 bits).
    pub init_type: u8,
    /// VLHighLimit (38).
    pub vl_high_limit: u8,
    /// VLArbitrationHighCap (39).
    pub vl_arbitration_high_cap: u8,
    /// VLArbitrationLowCap (40).
    pub vl_arbitration_low_cap: u8,
    /// InitTypeReply (41, bits 7:4; 4 bits).
    pub init_type_reply: u8,
    /// MTUCap (41, bits 3:0; 4 bits).
    pub mtu_cap: u8,
    /// VLStallCount (42, bits 7:5; 3 bits).
    pub vl_stall_count: u8,
    /// HOQLife (42, bits 4:0; 5 bits).
    pub hoq_life: u8,
    /// OperationalVLs (43, bits 7:4; 4 bits).
    pub operational_vls: u8,
    /// PartitionEnforcementInbound (43, bit 3).
    pub partition_enforcement_inbound: bool,
    /// PartitionEnforcementOutbound (43, bit 2).
    pub partition_enforcement_outbound: bool,
    /// FilterRawInbound (43, bit 1).
    pub filter_raw_inbound: bool,
    /// FilterRawOutbound (43, bit 0).
    pub filter_raw_outbound: bool,
    /// M_KeyViolations (44..46).
    pub m_key_violations: u16,
    /// P_KeyViolations (46..48).
    pub p_key_violations: u16,
    /// Q_KeyViolations (48..50).
    pub q_key_violations: u16,
    /// GUIDCap (50).
    pub guid_cap: u8,
    /// ClientReregister (51, bit 7).
    pub client_reregister: bool,
    /// MulticastPKeyTrapSuppressionEnabled (51, bits 6:5; 2 bits).
    pub multicast_pkey_trap_suppression_enabled: u8,
    /// SubnetTimeOut (51, bits 4:0; 5 bits).
    pub subnet_timeout: u8,
    /// RespTimeValue (52, bits 4:0; 5 bits; bits 7:5 reserved).
    pub resp_time_value: u8,
    /// LocalPhyErrors (53, bits 7:4; 4 bits).
    pub local_phy_errors: u8,
    /// OverrunErrors (53, bits 3:0; 4 bits).
    pub overrun_errors: u8,
    /// MaxCreditHint (54..56).
    pub max_credit_hint: u16,
    /// LinkRoundTripLatency (57..60, 24 bits; byte 56 reserved).
    pub link_round_trip_latency: u32,
    /// CapabilityMask2 (60..62).
    pub capability_mask2: u16,
    /// LinkSpeedExtActive (62, bits 7:4; 4 bits).
    pub link_speed_ext_active: u8,
    /// LinkSpeedExtSupported (62, bits 3:0; 4 bits).
    pub link_speed_ext_supported: u8,
    /// LinkSpeedExtEnabled (63, bits 4:0; 5 bits; bits 7:5 reserved).
    pub link_speed_ext_enabled: u8,
}

impl PortInfo {
    /// Bytes of the attribute on the wire.
    pub const WIRE_LEN: usize = 64;
}

fn hi(b: u8) -> u8 {
    b >> 4
}
fn lo(b: u8) -> u8 {
    b & 0x0F
}
fn nibbles(h: u8, l: u8) -> u8 {
    ((h & 0x0F) << 4) | (l & 0x0F)
}

impl SmpAttribute for PortInfo {
    const ID: AttributeId = AttributeId::PORT_INFO;

    fn decode(data: &[u8]) -> Result<Self, MadError> {
        let b = load(data, Self::WIRE_LEN, "PortInfo")?;
        Ok(PortInfo {
            m_key: rd64(&b, 0),
            gid_prefix: rd64(&b, 8),
            lid: rd16(&b, 16),
            master_sm_lid: rd16(&b, 18),
            capability_mask: CapabilityMask(rd32(&b, 20)),
            diag_code: DiagCode(rd16(&b, 24)),
            m_key_lease_period: rd16(&b, 26),
            local_port_num: b[28],
            link_width_enabled: b[29],
            link_width_supported: b[30],
            link_width_active: b[31],
            link_speed_supported: hi(b[32]),
            port_state: PortState::from(lo(b[32])),
            port_physical_state: PhysPortState::from(hi(b[33])),
            link_down_default_state: lo(b[33]),
            m_key_protect_bits: b[34] >> 6,
            lmc: b[34] & 0x07,
            link_speed_active: hi(b[35]),
            link_speed_enabled: lo(b[35]),
            neighbor_mtu: hi(b[36]),
            master_sm_sl: lo(b[36]),
            vl_cap: hi(b[37]),
            init_type: lo(b[37]),
            vl_high_limit: b[38],
            vl_arbitration_high_cap: b[39],
            vl_arbitration_low_cap: b[40],
            init_type_reply: hi(b[41]),
            mtu_cap: lo(b[41]),
            vl_stall_count: b[42] >> 5,
            hoq_life: b[42] & 0x1F,
            operational_vls: hi(b[43]),
            partition_enforcement_inbound: b[43] & 0x08 != 0,
            partition_enforcement_outbound: b[43] & 0x04 != 0,
            filter_raw_inbound: b[43] & 0x02 != 0,
            filter_raw_outbound: b[43] & 0x01 != 0,
            m_key_violations: rd16(&b, 44),
            p_key_violations: rd16(&b, 46),
            q_key_violations: rd16(&b, 48),
            guid_cap: b[50],
            client_reregister: b[51] & 0x80 != 0,
            multicast_pkey_trap_suppression_enabled: (b[51] >> 5) & 0x03,
            subnet_timeout: b[51] & 0x1F,
            resp_time_value: b[52] & 0x1F,
            local_phy_errors: hi(b[53]),
            overrun_errors: lo(b[53]),
            max_credit_hint: rd16(&b, 54),
            link_round_trip_latency: rd24(&b, 57),
            capability_mask2: rd16(&b, 60),
            link_speed_ext_active: hi(b[62]),
            link_speed_ext_supported: lo(b[62]),
            link_speed_ext_enabled: b[63] & 0x1F,
        })
    }

    fn encode(&self) -> [u8; 64] {
        let mut b = [0u8; 64];
        wr64(&mut b, 0, self.m_key);
        wr64(&mut b, 8, self.gid_prefix);
        wr16(&mut b, 16, self.lid);
        wr16(&mut b, 18, self.master_sm_lid);
        wr32(&mut b, 20, self.capability_mask.0);
        wr16(&mut b, 24, self.diag_code.0);
        wr16(&mut b, 26, self.m_key_lease_period);
        b[28] = self.local_port_num;
        b[29] = self.link_width_enabled;
        b[30] = self.link_width_supported;
        b[31] = self.link_width_active;
        b[32] = nibbles(self.link_speed_supported, u8::from(self.port_state));
        b[33] = nibbles(
            u8::from(self.port_physical_state),
            self.link_down_default_state,
        );
        b[34] = ((self.m_key_protect_bits & 0x03) << 6) | (self.lmc & 0x07);
        b[35] = nibbles(self.link_speed_active, self.link_speed_enabled);
        b[36] = nibbles(self.neighbor_mtu, self.master_sm_sl);
        b[37] = nibbles(self.vl_cap, self.init_type);
        b[38] = self.vl_high_limit;
        b[39] = self.vl_arbitration_high_cap;
        b[40] = self.vl_arbitration_low_cap;
        b[41] = nibbles(self.init_type_reply, self.mtu_cap);
        b[42] = ((self.vl_stall_count & 0x07) << 5) | (self.hoq_life & 0x1F);
        b[43] = ((self.operational_vls & 0x0F) << 4)
            | (u8::from(self.partition_enforcement_inbound) << 3)
            | (u8::from(self.partition_enforcement_outbound) << 2)
            | (u8::from(self.filter_raw_inbound) << 1)
            | u8::from(self.filter_raw_outbound);
        wr16(&mut b, 44, self.m_key_violations);
        wr16(&mut b, 46, self.p_key_violations);
        wr16(&mut b, 48, self.q_key_violations);
        b[50] = self.guid_cap;
        b[51] = (u8::from(self.client_reregister) << 7)
            | ((self.multicast_pkey_trap_suppression_enabled & 0x03) << 5)
            | (self.subnet_timeout & 0x1F);
        b[52] = self.resp_time_value & 0x1F;
        b[53] = nibbles(self.local_phy_errors, self.overrun_errors);
        wr16(&mut b, 54, self.max_credit_hint);
        wr24(&mut b, 57, self.link_round_trip_latency & 0x00FF_FFFF);
        wr16(&mut b, 60, self.capability_mask2);
        b[62] = nibbles(self.link_speed_ext_active, self.link_speed_ext_supported);
        b[63] = self.link_speed_ext_enabled & 0x1F;
        b
    }
}
