//! PathRecord (IBA 15.2.5.16): one path between two ports and its properties.

use crate::sa::attribute_id::SaAttributeId;
use crate::sa::component_mask::ComponentMask;
use crate::sa::error::SaError;
use crate::sa::selector::{sel_byte, split_sel, Selector};
use crate::sa::wire::{load, put, rd16, rd32, rd64, rd_gid, wr16, wr32, wr64, Gid};

/// PathRecord, 64 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PathRecord {
    /// ServiceID (0..8; reserved before IBA 1.2).
    pub service_id: u64,
    /// DGID (8..24).
    pub dgid: Gid,
    /// SGID (24..40).
    pub sgid: Gid,
    /// DLID (40..42).
    pub dlid: u16,
    /// SLID (42..44).
    pub slid: u16,
    /// RawTraffic (44 bit 7): a raw (non-IBA transport) path.
    pub raw_traffic: bool,
    /// FlowLabel (20 bits, 44..47 after 3 reserved bits).
    pub flow_label: u32,
    /// HopLimit (47).
    pub hop_limit: u8,
    /// TClass (48).
    pub tclass: u8,
    /// Reversible (49 bit 7).
    pub reversible: bool,
    /// NumbPath (49 bits 6:0): in a query, how many paths at most.
    pub numb_path: u8,
    /// P_Key (50..52).
    pub p_key: u16,
    /// QoSClass (12 bits, 52..54 bits 15:4).
    pub qos_class: u16,
    /// SL (54 bits 3:0 of the same word).
    pub sl: u8,
    /// MTUSelector (54 bits 7:6).
    pub mtu_selector: Selector,
    /// MTU (54 bits 5:0).
    pub mtu: u8,
    /// RateSelector (55 bits 7:6).
    pub rate_selector: Selector,
    /// Rate (55 bits 5:0).
    pub rate: u8,
    /// PacketLifeTimeSelector (56 bits 7:6).
    pub packet_life_time_selector: Selector,
    /// PacketLifeTime (56 bits 5:0).
    pub packet_life_time: u8,
    /// Preference (57): 0 = the SA's most preferred path.
    pub preference: u8,
}

impl PathRecord {
    /// Bytes on the wire.
    pub const SIZE: usize = 64;

    /// Both ServiceID components (ServiceID_MSB | ServiceID_LSB).
    pub const SERVICE_ID: ComponentMask =
        ComponentMask(Self::SERVICE_ID_MSB.0 | Self::SERVICE_ID_LSB.0);

    /// Decodes from at least 64 bytes.
    pub fn decode(data: &[u8]) -> Result<Self, SaError> {
        let b: [u8; Self::SIZE] = load(data, "PathRecord")?;
        let w = rd32(&b, 44);
        let qs = rd16(&b, 52);
        let (mtu_selector, mtu) = split_sel(b[54]);
        let (rate_selector, rate) = split_sel(b[55]);
        let (packet_life_time_selector, packet_life_time) = split_sel(b[56]);
        Ok(PathRecord {
            service_id: rd64(&b, 0),
            dgid: rd_gid(&b, 8),
            sgid: rd_gid(&b, 24),
            dlid: rd16(&b, 40),
            slid: rd16(&b, 42),
            raw_traffic: w & 0x8000_0000 != 0,
            flow_label: (w >> 8) & 0x000F_FFFF,
            hop_limit: (w & 0xFF) as u8,
            tclass: b[48],
            reversible: b[49] & 0x80 != 0,
            numb_path: b[49] & 0x7F,
            p_key: rd16(&b, 50),
            qos_class: qs >> 4,
            sl: (qs & 0x0F) as u8,
            mtu_selector,
            mtu,
            rate_selector,
            rate,
            packet_life_time_selector,
            packet_life_time,
            preference: b[57],
        })
    }

    /// Encodes, reserved bits zero.
    pub fn encode(&self) -> [u8; Self::SIZE] {
        let mut b = [0u8; Self::SIZE];
        wr64(&mut b, 0, self.service_id);
        put(&mut b, 8, &self.dgid);
        put(&mut b, 24, &self.sgid);
        wr16(&mut b, 40, self.dlid);
        wr16(&mut b, 42, self.slid);
        wr32(
            &mut b,
            44,
            (u32::from(self.raw_traffic) << 31)
                | ((self.flow_label & 0x000F_FFFF) << 8)
                | u32::from(self.hop_limit),
        );
        b[48] = self.tclass;
        b[49] = (u8::from(self.reversible) << 7) | (self.numb_path & 0x7F);
        wr16(&mut b, 50, self.p_key);
        wr16(
            &mut b,
            52,
            ((self.qos_class & 0x0FFF) << 4) | u16::from(self.sl & 0x0F),
        );
        b[54] = sel_byte(self.mtu_selector, self.mtu);
        b[55] = sel_byte(self.rate_selector, self.rate);
        b[56] = sel_byte(self.packet_life_time_selector, self.packet_life_time);
        b[57] = self.preference;
        b
    }
}

record_components!(PathRecord, |r, t| {
    /// 0: ServiceID bits 63:32.
    SERVICE_ID_MSB = 0 => (r.service_id >> 32) == (t.service_id >> 32);
    /// 1: ServiceID bits 31:0.
    SERVICE_ID_LSB = 1 => (r.service_id as u32) == (t.service_id as u32);
    /// 2: DGID.
    DGID = 2 => r.dgid == t.dgid;
    /// 3: SGID.
    SGID = 3 => r.sgid == t.sgid;
    /// 4: DLID.
    DLID = 4 => r.dlid == t.dlid;
    /// 5: SLID.
    SLID = 5 => r.slid == t.slid;
    /// 6: RawTraffic.
    RAW_TRAFFIC = 6 => r.raw_traffic == t.raw_traffic;
    /// 7: Reserved.
    RESERVED_7 = 7;
    /// 8: FlowLabel.
    FLOW_LABEL = 8 => r.flow_label == t.flow_label;
    /// 9: HopLimit.
    HOP_LIMIT = 9 => r.hop_limit == t.hop_limit;
    /// 10: TClass.
    TCLASS = 10 => r.tclass == t.tclass;
    /// 11: Reversible.
    REVERSIBLE = 11 => r.reversible == t.reversible;
    /// 12: NumbPath.
    NUMB_PATH = 12 => r.numb_path == t.numb_path;
    /// 13: P_Key.
    P_KEY = 13 => r.p_key == t.p_key;
    /// 14: QoSClass.
    QOS_CLASS = 14 => r.qos_class == t.qos_class;
    /// 15: SL.
    SL = 15 => r.sl == t.sl;
    /// 16: MTUSelector.
    MTU_SELECTOR = 16 => r.mtu_selector == t.mtu_selector;
    /// 17: MTU.
    MTU = 17 => r.mtu == t.mtu;
    /// 18: RateSelector.
    RATE_SELECTOR = 18 => r.rate_selector == t.rate_selector;
    /// 19: Rate.
    RATE = 19 => r.rate == t.rate;
    /// 20: PacketLifeTimeSelector.
    PACKET_LIFE_TIME_SELECTOR = 20 => r.packet_life_time_selector == t.packet_life_time_selector;
    /// 21: PacketLifeTime.
    PACKET_LIFE_TIME = 21 => r.packet_life_time == t.packet_life_time;
    /// 22: Preference.
    PREFERENCE = 22 => r.preference == t.preference;
});

impl_sa_record!(PathRecord, SaAttributeId::PATH_RECORD, "PathRecord");
