//! InformInfo (IBA 13.4.8.3, a subscription to traps/notices) and InformInfoRecord
//! (IBA 15.2.5.12, the SA's list of subscriptions).

use crate::sa::attribute_id::SaAttributeId;
use crate::sa::component_mask::ComponentMask;
use crate::sa::error::SaError;
use crate::sa::wire::{load, put, rd16, rd24, rd32, rd_gid, sub, wr16, wr24, wr32, Gid};

/// InformInfo, 36 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct InformInfo {
    /// GID (0..16): the port whose events are wanted; all zero = use the LID range.
    pub gid: Gid,
    /// LIDRangeBegin (16..18); 0xFFFF = all ports.
    pub lid_range_begin: u16,
    /// LIDRangeEnd (18..20).
    pub lid_range_end: u16,
    /// IsGeneric (22): 1 = generic traps, 0 = vendor traps (byte kept raw).
    pub is_generic: u8,
    /// Subscribe (23): 1 = subscribe, 0 = unsubscribe (byte kept raw).
    pub subscribe: u8,
    /// Type (24..26): Notice type wanted; 0xFFFF = all.
    pub notice_type: u16,
    /// TrapNumber (generic) or DeviceID (vendor), 26..28; 0xFFFF = all.
    pub trap_number: u16,
    /// QPN (24 bits, 28..31) to send Reports to.
    pub qpn: u32,
    /// RespTimeValue (byte 31 bits 4:0).
    pub resp_time_value: u8,
    /// ProducerType (generic) or VendorID (vendor), 24 bits, 33..36; 0xFFFFFF = all.
    pub producer_type: u32,
}

impl InformInfo {
    /// Bytes on the wire.
    pub const SIZE: usize = 36;

    /// Decodes from at least 36 bytes.
    pub fn decode(data: &[u8]) -> Result<Self, SaError> {
        let b: [u8; Self::SIZE] = load(data, "InformInfo")?;
        let q = rd32(&b, 28);
        Ok(InformInfo {
            gid: rd_gid(&b, 0),
            lid_range_begin: rd16(&b, 16),
            lid_range_end: rd16(&b, 18),
            is_generic: b[22],
            subscribe: b[23],
            notice_type: rd16(&b, 24),
            trap_number: rd16(&b, 26),
            qpn: q >> 8,
            resp_time_value: (q & 0x1F) as u8,
            producer_type: rd24(&b, 33),
        })
    }

    /// Encodes, reserved bits zero.
    pub fn encode(&self) -> [u8; Self::SIZE] {
        let mut b = [0u8; Self::SIZE];
        put(&mut b, 0, &self.gid);
        wr16(&mut b, 16, self.lid_range_begin);
        wr16(&mut b, 18, self.lid_range_end);
        b[22] = self.is_generic;
        b[23] = self.subscribe;
        wr16(&mut b, 24, self.notice_type);
        wr16(&mut b, 26, self.trap_number);
        wr32(
            &mut b,
            28,
            ((self.qpn & 0x00FF_FFFF) << 8) | u32::from(self.resp_time_value & 0x1F),
        );
        wr24(&mut b, 33, self.producer_type & 0x00FF_FFFF);
        b
    }

    /// InformInfo is sent whole (Set) and has no ComponentMask of its own: it is
    /// compared field by field with the numbering of [`InformInfoRecord`] (GID = 3 ...
    /// ProducerType = 15); other bits are ignored.
    pub fn matches(&self, template: &Self, mask: ComponentMask) -> bool {
        let rec = |i: &InformInfo| InformInfoRecord {
            inform_info: *i,
            ..InformInfoRecord::default()
        };
        rec(self).matches(
            &rec(template),
            mask.without(InformInfoRecord::SUBSCRIBER_GID | InformInfoRecord::ENUM),
        )
    }
}

impl_sa_record!(InformInfo, SaAttributeId::INFORM_INFO, "InformInfo");

/// InformInfoRecord, 60 bytes (padded to 64): SubscriberGID (0..16), Enum (16..18),
/// Reserved (18..24), InformInfo (24..60).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct InformInfoRecord {
    /// SubscriberGID.
    pub subscriber_gid: Gid,
    /// Enum (IBA name; a keyword in Rust): tells apart subscriptions of one subscriber.
    pub subscriber_enum: u16,
    /// The subscription.
    pub inform_info: InformInfo,
}

impl InformInfoRecord {
    /// Bytes on the wire.
    pub const SIZE: usize = 60;
    /// Alias of component 10 for vendor subscriptions: DeviceID.
    pub const DEVICE_ID: ComponentMask = Self::TRAP_NUMBER;
    /// Alias of component 15 for vendor subscriptions: VendorID.
    pub const VENDOR_ID: ComponentMask = Self::PRODUCER_TYPE;

    /// Decodes from at least 60 bytes.
    pub fn decode(data: &[u8]) -> Result<Self, SaError> {
        let b: [u8; Self::SIZE] = load(data, "InformInfoRecord")?;
        Ok(InformInfoRecord {
            subscriber_gid: rd_gid(&b, 0),
            subscriber_enum: rd16(&b, 16),
            inform_info: InformInfo::decode(sub(&b, 24, InformInfo::SIZE))?,
        })
    }

    /// Encodes, reserved bytes zero.
    pub fn encode(&self) -> [u8; Self::SIZE] {
        let mut b = [0u8; Self::SIZE];
        put(&mut b, 0, &self.subscriber_gid);
        wr16(&mut b, 16, self.subscriber_enum);
        put(&mut b, 24, &self.inform_info.encode());
        b
    }
}

record_components!(InformInfoRecord, |r, t| {
    /// 0: SubscriberGID.
    SUBSCRIBER_GID = 0 => r.subscriber_gid == t.subscriber_gid;
    /// 1: Enum.
    ENUM = 1 => r.subscriber_enum == t.subscriber_enum;
    /// 2: Reserved.
    RESERVED_2 = 2;
    /// 3: InformInfo.GID.
    GID = 3 => r.inform_info.gid == t.inform_info.gid;
    /// 4: InformInfo.LIDRangeBegin.
    LID_RANGE_BEGIN = 4 => r.inform_info.lid_range_begin == t.inform_info.lid_range_begin;
    /// 5: InformInfo.LIDRangeEnd.
    LID_RANGE_END = 5 => r.inform_info.lid_range_end == t.inform_info.lid_range_end;
    /// 6: Reserved.
    RESERVED_6 = 6;
    /// 7: InformInfo.IsGeneric.
    IS_GENERIC = 7 => r.inform_info.is_generic == t.inform_info.is_generic;
    /// 8: InformInfo.Subscribe.
    SUBSCRIBE = 8 => r.inform_info.subscribe == t.inform_info.subscribe;
    /// 9: InformInfo.Type.
    TYPE = 9 => r.inform_info.notice_type == t.inform_info.notice_type;
    /// 10: InformInfo.TrapNumber (DeviceID).
    TRAP_NUMBER = 10 => r.inform_info.trap_number == t.inform_info.trap_number;
    /// 11: InformInfo.QPN.
    QPN = 11 => r.inform_info.qpn == t.inform_info.qpn;
    /// 12: Reserved.
    RESERVED_12 = 12;
    /// 13: InformInfo.RespTimeValue.
    RESP_TIME_VALUE = 13 => r.inform_info.resp_time_value == t.inform_info.resp_time_value;
    /// 14: Reserved.
    RESERVED_14 = 14;
    /// 15: InformInfo.ProducerType (VendorID).
    PRODUCER_TYPE = 15 => r.inform_info.producer_type == t.inform_info.producer_type;
});

impl_sa_record!(
    InformInfoRecord,
    SaAttributeId::INFORM_INFO_RECORD,
    "InformInfoRecord"
);
