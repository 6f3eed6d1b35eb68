//! MultiPathRecord (IBA 15.2.5.20): a GetMulti query for paths between sets of GIDs.

use crate::error::MadError;
use crate::sa::attribute_id::SaAttributeId;
use crate::sa::component_mask::ComponentMask;
use crate::sa::error::SaError;
use crate::sa::selector::{sel_byte, split_sel, Selector};
use crate::sa::wire::{load, put, rd16, rd32, rd_gid, wr16, wr32, Gid};

/// MultiPathRecord: a 24-byte header and SGIDCount + DGIDCount GIDs (SGIDs first).
///
/// Fixed size, no heap: up to [`MultiPathRecord::MAX_GIDS`] (11) GIDs, what fits in
/// one MAD's 200 data bytes (OpenSM's limit too). Unused slots of `gids` are zero
/// after decoding and are not encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct MultiPathRecord {
    /// RawTraffic (0 bit 7).
    pub raw_traffic: bool,
    /// FlowLabel (20 bits).
    pub flow_label: u32,
    /// HopLimit (3).
    pub hop_limit: u8,
    /// TClass (4).
    pub tclass: u8,
    /// Reversible (5 bit 7).
    pub reversible: bool,
    /// NumbPath (5 bits 6:0).
    pub numb_path: u8,
    /// P_Key (6..8).
    pub p_key: u16,
    /// QoSClass (12 bits, 8..10).
    pub qos_class: u16,
    /// SL (4 bits).
    pub sl: u8,
    /// MTUSelector (10 bits 7:6).
    pub mtu_selector: Selector,
    /// MTU (10 bits 5:0).
    pub mtu: u8,
    /// RateSelector (11 bits 7:6).
    pub rate_selector: Selector,
    /// Rate (11 bits 5:0).
    pub rate: u8,
    /// PacketLifeTimeSelector (12 bits 7:6).
    pub packet_life_time_selector: Selector,
    /// PacketLifeTime (12 bits 5:0).
    pub packet_life_time: u8,
    /// ServiceID: bits 63:56 at byte 13, bits 55:0 at 17..24.
    pub service_id: u64,
    /// IndependenceSelector (14 bits 7:6).
    pub independence_selector: u8,
    /// SGIDCount (15).
    pub sgid_count: u8,
    /// DGIDCount (16).
    pub dgid_count: u8,
    /// SDGID: the SGIDs then the DGIDs (24..).
    pub gids: [Gid; 11],
}

impl MultiPathRecord {
    /// Bytes of the fixed header.
    pub const HEADER_SIZE: usize = 24;
    /// GIDs that fit in one MAD.
    pub const MAX_GIDS: usize = 11;
    /// Bytes of a record with the maximum number of GIDs (the whole SA data field).
    pub const SIZE: usize = Self::HEADER_SIZE + 16 * Self::MAX_GIDS;

    /// Both ServiceID components.
    pub const SERVICE_ID: ComponentMask =
        ComponentMask(Self::SERVICE_ID_8MSB.0 | Self::SERVICE_ID_56LSB.0);

    /// A record for `sgids` and `dgids` (header fields default), or an error if they
    /// are more than 11 together.
    pub fn with_gids(sgids: &[Gid], dgids: &[Gid]) -> Result<MultiPathRecord, SaError> {
        let n = sgids.len() + dgids.len();
        if n > Self::MAX_GIDS {
            return Err(too_many(n));
        }
        let mut r = MultiPathRecord {
            sgid_count: sgids.len() as u8,
            dgid_count: dgids.len() as u8,
            ..MultiPathRecord::default()
        };
        for (slot, g) in r.gids.iter_mut().zip(sgids.iter().chain(dgids)) {
            *slot = *g;
        }
        Ok(r)
    }

    /// The SGIDs.
    pub fn sgids(&self) -> &[Gid] {
        let s = usize::from(self.sgid_count).min(Self::MAX_GIDS);
        self.gids.get(..s).unwrap_or(&[])
    }

    /// The DGIDs.
    pub fn dgids(&self) -> &[Gid] {
        let s = usize::from(self.sgid_count).min(Self::MAX_GIDS);
        let e = (s + usize::from(self.dgid_count)).min(Self::MAX_GIDS);
        self.gids.get(s..e).unwrap_or(&[])
    }

    /// Bytes this record takes on the wire (header + its GIDs).
    pub fn wire_len(&self) -> usize {
        Self::HEADER_SIZE
            + 16 * (usize::from(self.sgid_count) + usize::from(self.dgid_count)).min(Self::MAX_GIDS)
    }

    /// Decodes the header and the GIDs it counts; fails when more than 11 GIDs are
    /// counted or the buffer is shorter than they need.
    pub fn decode(data: &[u8]) -> Result<Self, SaError> {
        let h: [u8; Self::HEADER_SIZE] = load(data, "MultiPathRecord")?;
        let n = usize::from(h[15]) + usize::from(h[16]);
        if n > Self::MAX_GIDS {
            return Err(too_many(n));
        }
        let need = Self::HEADER_SIZE + 16 * n;
        if data.len() < need {
            return Err(SaError::Mad(MadError::TooShort {
                what: "MultiPathRecord SDGIDs",
                need,
                got: data.len(),
            }));
        }
        let mut b = [0u8; Self::SIZE];
        put(&mut b, 0, data.get(..need).unwrap_or(&[]));
        let w = rd32(&b, 0);
        let qs = rd16(&b, 8);
        let (mtu_selector, mtu) = split_sel(b[10]);
        let (rate_selector, rate) = split_sel(b[11]);
        let (packet_life_time_selector, packet_life_time) = split_sel(b[12]);
        let mut sid = [0u8; 8];
        sid[0] = b[13];
        sid[1..].copy_from_slice(&b[17..24]);
        let mut gids = [[0u8; 16]; 11];
        for (i, g) in gids.iter_mut().take(n).enumerate() {
            *g = rd_gid(&b, Self::HEADER_SIZE + 16 * i);
        }
        Ok(MultiPathRecord {
            raw_traffic: w & 0x8000_0000 != 0,
            flow_label: (w >> 8) & 0x000F_FFFF,
            hop_limit: (w & 0xFF) as u8,
            tclass: b[4],
            reversible: b[5] & 0x80 != 0,
            numb_path: b[5] & 0x7F,
            p_key: rd16(&b, 6),
            qos_class: qs >> 4,
            sl: (qs & 0x0F) as u8,
            mtu_selector,
            mtu,
            rate_selector,
            rate,
            packet_life_time_selector,
            packet_life_time,
            service_id: u64::from_be_bytes(sid),
            independence_selector: b[14] >> 6,
            sgid_count: h[15],
            dgid_count: h[16],
            gids,
        })
    }

    /// Encodes into the 200-byte SA data layout: header, counted GIDs, zeros after.
    /// Counts above 11 are clamped (only 11 slots exist).
    pub fn encode(&self) -> [u8; Self::SIZE] {
        let mut b = [0u8; Self::SIZE];
        wr32(
            &mut b,
            0,
            (u32::from(self.raw_traffic) << 31)
                | ((self.flow_label & 0x000F_FFFF) << 8)
                | u32::from(self.hop_limit),
        );
        b[4] = self.tclass;
        b[5] = (u8::from(self.reversible) << 7) | (self.numb_path & 0x7F);
        wr16(&mut b, 6, self.p_key);
        wr16(
            &mut b,
            8,
            ((self.qos_class & 0x0FFF) << 4) | u16::from(self.sl & 0x0F),
        );
        b[10] = sel_byte(self.mtu_selector, self.mtu);
        b[11] = sel_byte(self.rate_selector, self.rate);
        b[12] = sel_byte(self.packet_life_time_selector, self.packet_life_time);
        let sid = self.service_id.to_be_bytes();
        b[13] = sid[0];
        b[14] = (self.independence_selector & 0x03) << 6;
        let s = self.sgid_count.min(11);
        let d = self.dgid_count.min(11 - s);
        b[15] = s;
        b[16] = d;
        put(&mut b, 17, &sid[1..]);
        for (i, g) in self.gids.iter().take(usize::from(s + d)).enumerate() {
            put(&mut b, Self::HEADER_SIZE + 16 * i, g);
        }
        b
    }
}

fn too_many(n: usize) -> SaError {
    SaError::Mad(MadError::InvalidField {
        attr: "MultiPathRecord",
        field: "SGIDCount+DGIDCount",
        value: n as u64,
        why: "at most 11 GIDs fit in one MAD",
    })
}

record_components!(MultiPathRecord, |r, t| {
    /// 0: RawTraffic.
    RAW_TRAFFIC = 0 => r.raw_traffic == t.raw_traffic;
    /// 1: Reserved.
    RESERVED_1 = 1;
    /// 2: FlowLabel.
    FLOW_LABEL = 2 => r.flow_label == t.flow_label;
    /// 3: HopLimit.
    HOP_LIMIT = 3 => r.hop_limit == t.hop_limit;
    /// 4: TClass.
    TCLASS = 4 => r.tclass == t.tclass;
    /// 5: Reversible.
    REVERSIBLE = 5 => r.reversible == t.reversible;
    /// 6: NumbPath.
    NUMB_PATH = 6 => r.numb_path == t.numb_path;
    /// 7: P_Key.
    P_KEY = 7 => r.p_key == t.p_key;
    /// 8: QoSClass.
    QOS_CLASS = 8 => r.qos_class == t.qos_class;
    /// 9: SL.
    SL = 9 => r.sl == t.sl;
    /// 10: MTUSelector.
    MTU_SELECTOR = 10 => r.mtu_selector == t.mtu_selector;
    /// 11: MTU.
    MTU = 11 => r.mtu == t.mtu;
    /// 12: RateSelector.
    RATE_SELECTOR = 12 => r.rate_selector == t.rate_selector;
    /// 13: Rate.
    RATE = 13 => r.rate == t.rate;
    /// 14: PacketLifeTimeSelector.
    PACKET_LIFE_TIME_SELECTOR = 14 => r.packet_life_time_selector == t.packet_life_time_selector;
    /// 15: PacketLifeTime.
    PACKET_LIFE_TIME = 15 => r.packet_life_time == t.packet_life_time;
    /// 16: ServiceID bits 63:56.
    SERVICE_ID_8MSB = 16 => (r.service_id >> 56) == (t.service_id >> 56);
    /// 17: IndependenceSelector.
    INDEPENDENCE_SELECTOR = 17 => r.independence_selector == t.independence_selector;
    /// 18: Reserved.
    RESERVED_18 = 18;
    /// 19: SGIDCount.
    SGID_COUNT = 19 => r.sgid_count == t.sgid_count;
    /// 20: DGIDCount.
    DGID_COUNT = 20 => r.dgid_count == t.dgid_count;
    /// 21: ServiceID bits 55:0.
    SERVICE_ID_56LSB = 21 => (r.service_id << 8) == (t.service_id << 8);
});

impl_sa_record!(
    MultiPathRecord,
    SaAttributeId::MULTI_PATH_RECORD,
    "MultiPathRecord"
);
