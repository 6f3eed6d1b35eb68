//! PortInfoRecord (IBA 15.2.5.3): EndportLID, PortNum, Options and PortInfo.

use crate::attr::{PortInfo, SmpAttribute};
use crate::sa::attribute_id::SaAttributeId;
use crate::sa::error::SaError;
use crate::sa::wire::{load, put, rd16, sub, wr16};

/// PortInfoRecord, 68 bytes (padded to 72): EndportLID (0..2), PortNum (2),
/// Options (3), PortInfo (4..68).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PortInfoRecord {
    /// EndportLID: LID of the end port (for a switch, of port 0).
    pub endport_lid: u16,
    /// PortNum.
    pub port_num: u8,
    /// Options (IBA 1.3; OpenSM: bit 0 asks for all ports of a switch).
    pub options: u8,
    /// PortInfo of that port.
    pub port_info: PortInfo,
}

impl PortInfoRecord {
    /// Bytes on the wire.
    pub const SIZE: usize = 68;

    /// Decodes from at least 68 bytes.
    pub fn decode(data: &[u8]) -> Result<Self, SaError> {
        let b: [u8; Self::SIZE] = load(data, "PortInfoRecord")?;
        Ok(PortInfoRecord {
            endport_lid: rd16(&b, 0),
            port_num: b[2],
            options: b[3],
            port_info: PortInfo::decode(sub(&b, 4, PortInfo::WIRE_LEN))?,
        })
    }

    /// Encodes, PortInfo's reserved bits zero.
    pub fn encode(&self) -> [u8; Self::SIZE] {
        let mut b = [0u8; Self::SIZE];
        wr16(&mut b, 0, self.endport_lid);
        b[2] = self.port_num;
        b[3] = self.options;
        put(&mut b, 4, &self.port_info.encode());
        b
    }
}

// Numbering: the record's three fields, then PortInfo's fields in IBA order,
// reserved ones included (OpenSM's IB_PIR_COMPMASK_*).
record_components!(PortInfoRecord, |r, t| {
    /// 0: EndportLID.
    ENDPORT_LID = 0 => r.endport_lid == t.endport_lid;
    /// 1: PortNum.
    PORT_NUM = 1 => r.port_num == t.port_num;
    /// 2: Options.
    OPTIONS = 2 => r.options == t.options;
    /// 3: M_Key.
    M_KEY = 3 => r.port_info.m_key == t.port_info.m_key;
    /// 4: GidPrefix.
    GID_PREFIX = 4 => r.port_info.gid_prefix == t.port_info.gid_prefix;
    /// 5: LID (PortInfo.LID, the base LID).
    LID = 5 => r.port_info.lid == t.port_info.lid;
    /// 6: MasterSMLID.
    MASTER_SM_LID = 6 => r.port_info.master_sm_lid == t.port_info.master_sm_lid;
    /// 7: CapabilityMask.
    CAPABILITY_MASK = 7 => r.port_info.capability_mask == t.port_info.capability_mask;
    /// 8: DiagCode.
    DIAG_CODE = 8 => r.port_info.diag_code == t.port_info.diag_code;
    /// 9: M_KeyLeasePeriod.
    M_KEY_LEASE_PERIOD = 9 => r.port_info.m_key_lease_period == t.port_info.m_key_lease_period;
    /// 10: LocalPortNum.
    LOCAL_PORT_NUM = 10 => r.port_info.local_port_num == t.port_info.local_port_num;
    /// 11: LinkWidthEnabled.
    LINK_WIDTH_ENABLED = 11 => r.port_info.link_width_enabled == t.port_info.link_width_enabled;
    /// 12: LinkWidthSupported.
    LINK_WIDTH_SUPPORTED = 12 => r.port_info.link_width_supported == t.port_info.link_width_supported;
    /// 13: LinkWidthActive.
    LINK_WIDTH_ACTIVE = 13 => r.port_info.link_width_active == t.port_info.link_width_active;
    /// 14: LinkSpeedSupported.
    LINK_SPEED_SUPPORTED = 14 => r.port_info.link_speed_supported == t.port_info.link_speed_supported;
    /// 15: PortState.
    PORT_STATE = 15 => r.port_info.port_state == t.port_info.port_state;
    /// 16: PortPhysicalState.
    PORT_PHYSICAL_STATE = 16 => r.port_info.port_physical_state == t.port_info.port_physical_state;
    /// 17: LinkDownDefaultState.
    LINK_DOWN_DEFAULT_STATE = 17 => r.port_info.link_down_default_state == t.port_info.link_down_default_state;
    /// 18: M_KeyProtectBits.
    M_KEY_PROTECT_BITS = 18 => r.port_info.m_key_protect_bits == t.port_info.m_key_protect_bits;
    /// 19: Reserved.
    RESERVED_19 = 19;
    /// 20: LMC.
    LMC = 20 => r.port_info.lmc == t.port_info.lmc;
    /// 21: LinkSpeedActive.
    LINK_SPEED_ACTIVE = 21 => r.port_info.link_speed_active == t.port_info.link_speed_active;
    /// 22: LinkSpeedEnabled.
    LINK_SPEED_ENABLED = 22 => r.port_info.link_speed_enabled == t.port_info.link_speed_enabled;
    /// 23: NeighborMTU.
    NEIGHBOR_MTU = 23 => r.port_info.neighbor_mtu == t.port_info.neighbor_mtu;
    /// 24: MasterSMSL.
    MASTER_SM_SL = 24 => r.port_info.master_sm_sl == t.port_info.master_sm_sl;
    /// 25: VLCap.
    VL_CAP = 25 => r.port_info.vl_cap == t.port_info.vl_cap;
    /// 26: InitType.
    INIT_TYPE = 26 => r.port_info.init_type == t.port_info.init_type;
    /// 27: VLHighLimit.
    VL_HIGH_LIMIT = 27 => r.port_info.vl_high_limit == t.port_info.vl_high_limit;
    /// 28: VLArbitrationHighCap.
    VL_ARBITRATION_HIGH_CAP = 28 => r.port_info.vl_arbitration_high_cap == t.port_info.vl_arbitration_high_cap;
    /// 29: VLArbitrationLowCap.
    VL_ARBITRATION_LOW_CAP = 29 => r.port_info.vl_arbitration_low_cap == t.port_info.vl_arbitration_low_cap;
    /// 30: InitTypeReply.
    INIT_TYPE_REPLY = 30 => r.port_info.init_type_reply == t.port_info.init_type_reply;
    /// 31: MTUCap.
    MTU_CAP = 31 => r.port_info.mtu_cap == t.port_info.mtu_cap;
    /// 32: VLStallCount.
    VL_STALL_COUNT = 32 => r.port_info.vl_stall_count == t.port_info.vl_stall_count;
    /// 33: HOQLife.
    HOQ_LIFE = 33 => r.port_info.hoq_life == t.port_info.hoq_life;
    /// 34: OperationalVLs.
    OPERATIONAL_VLS = 34 => r.port_info.operational_vls == t.port_info.operational_vls;
    /// 35: PartitionEnforcementInbound.
    PARTITION_ENFORCEMENT_INBOUND = 35 => r.port_info.partition_enforcement_inbound == t.port_info.partition_enforcement_inbound;
    /// 36: PartitionEnforcementOutbound.
    PARTITION_ENFORCEMENT_OUTBOUND = 36 => r.port_info.partition_enforcement_outbound == t.port_info.partition_enforcement_outbound;
    /// 37: FilterRawInbound.
    FILTER_RAW_INBOUND = 37 => r.port_info.filter_raw_inbound == t.port_info.filter_raw_inbound;
    /// 38: FilterRawOutbound.
    FILTER_RAW_OUTBOUND = 38 => r.port_info.filter_raw_outbound == t.port_info.filter_raw_outbound;
    /// 39: M_KeyViolations.
    M_KEY_VIOLATIONS = 39 => r.port_info.m_key_violations == t.port_info.m_key_violations;
    /// 40: P_KeyViolations.
    P_KEY_VIOLATIONS = 40 => r.port_info.p_key_violations == t.port_info.p_key_violations;
    /// 41: Q_KeyViolations.
    Q_KEY_VIOLATIONS = 41 => r.port_info.q_key_violations == t.port_info.q_key_violations;
    /// 42: GUIDCap.
    GUID_CAP = 42 => r.port_info.guid_cap == t.port_info.guid_cap;
    /// 43: ClientReregister.
    CLIENT_REREGISTER = 43 => r.port_info.client_reregister == t.port_info.client_reregister;
    /// 44: MulticastPKeyTrapSuppressionEnabled (reserved before IBA 1.3).
    MULTICAST_P_KEY_TRAP_SUPPRESSION_ENABLED = 44 => r.port_info.multicast_pkey_trap_suppression_enabled == t.port_info.multicast_pkey_trap_suppression_enabled;
    /// 45: SubnetTimeOut.
    SUBNET_TIMEOUT = 45 => r.port_info.subnet_timeout == t.port_info.subnet_timeout;
    /// 46: Reserved.
    RESERVED_46 = 46;
    /// 47: RespTimeValue.
    RESP_TIME_VALUE = 47 => r.port_info.resp_time_value == t.port_info.resp_time_value;
    /// 48: LocalPhyErrors.
    LOCAL_PHY_ERRORS = 48 => r.port_info.local_phy_errors == t.port_info.local_phy_errors;
    /// 49: OverrunErrors.
    OVERRUN_ERRORS = 49 => r.port_info.overrun_errors == t.port_info.overrun_errors;
    /// 50: MaxCreditHint.
    MAX_CREDIT_HINT = 50 => r.port_info.max_credit_hint == t.port_info.max_credit_hint;
    /// 51: Reserved.
    RESERVED_51 = 51;
    /// 52: LinkRoundTripLatency.
    LINK_ROUND_TRIP_LATENCY = 52 => r.port_info.link_round_trip_latency == t.port_info.link_round_trip_latency;
    /// 53: CapabilityMask2.
    CAPABILITY_MASK2 = 53 => r.port_info.capability_mask2 == t.port_info.capability_mask2;
    /// 54: LinkSpeedExtActive.
    LINK_SPEED_EXT_ACTIVE = 54 => r.port_info.link_speed_ext_active == t.port_info.link_speed_ext_active;
    /// 55: LinkSpeedExtSupported.
    LINK_SPEED_EXT_SUPPORTED = 55 => r.port_info.link_speed_ext_supported == t.port_info.link_speed_ext_supported;
    /// 56: Reserved.
    RESERVED_56 = 56;
    /// 57: LinkSpeedExtEnabled.
    LINK_SPEED_EXT_ENABLED = 57 => r.port_info.link_speed_ext_enabled == t.port_info.link_speed_ext_enabled;
});

impl_sa_record!(
    PortInfoRecord,
    SaAttributeId::PORT_INFO_RECORD,
    "PortInfoRecord"
);
