//! MCMemberRecord (IBA 15.2.5.17): a multicast group, or one port's membership in it.

use core::fmt;

use crate::sa::attribute_id::SaAttributeId;
use crate::sa::error::SaError;
use crate::sa::selector::{sel_byte, split_sel, Selector};
use crate::sa::wire::{load, put, rd16, rd32, rd_gid, wr16, wr32, Gid};

/// MCMemberRecord.JoinState (4 bits): one bit per membership type.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct JoinState(pub u8);

impl JoinState {
    /// Bit 0: FullMember.
    pub const FULL_MEMBER: JoinState = JoinState(1 << 0);
    /// Bit 1: NonMember.
    pub const NON_MEMBER: JoinState = JoinState(1 << 1);
    /// Bit 2: SendOnlyNonMember.
    pub const SEND_ONLY_NON_MEMBER: JoinState = JoinState(1 << 2);
    /// Bit 3: SendOnlyFullMember (IBA 1.3).
    pub const SEND_ONLY_FULL_MEMBER: JoinState = JoinState(1 << 3);

    /// True when every bit of `other` is set.
    pub const fn contains(self, other: JoinState) -> bool {
        self.0 & other.0 == other.0
    }

    /// True when no bit is set.
    pub const fn is_empty(self) -> bool {
        self.0 & 0x0F == 0
    }

    /// Both sets of bits.
    pub const fn union(self, other: JoinState) -> JoinState {
        JoinState((self.0 | other.0) & 0x0F)
    }

    /// This set without `other`'s bits.
    pub const fn without(self, other: JoinState) -> JoinState {
        JoinState(self.0 & !other.0 & 0x0F)
    }
}

impl fmt::Debug for JoinState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "JoinState(")?;
        let mut sep = "";
        for (bit, name) in [
            (1, "FullMember"),
            (2, "NonMember"),
            (4, "SendOnlyNonMember"),
            (8, "SendOnlyFullMember"),
        ] {
            if self.0 & bit != 0 {
                write!(f, "{sep}{name}")?;
                sep = "|";
            }
        }
        write!(f, ")")
    }
}

/// MCMemberRecord, 52 bytes (padded to 56).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct McMemberRecord {
    /// MGID (0..16).
    pub mgid: Gid,
    /// PortGID (16..32).
    pub port_gid: Gid,
    /// Q_Key (32..36).
    pub q_key: u32,
    /// MLID (36..38).
    pub mlid: u16,
    /// MTUSelector (38 bits 7:6).
    pub mtu_selector: Selector,
    /// MTU (38 bits 5:0).
    pub mtu: u8,
    /// TClass (39).
    pub tclass: u8,
    /// P_Key (40..42).
    pub p_key: u16,
    /// RateSelector (42 bits 7:6).
    pub rate_selector: Selector,
    /// Rate (42 bits 5:0).
    pub rate: u8,
    /// PacketLifeTimeSelector (43 bits 7:6).
    pub packet_life_time_selector: Selector,
    /// PacketLifeTime (43 bits 5:0).
    pub packet_life_time: u8,
    /// SL (44 bits 7:4).
    pub sl: u8,
    /// FlowLabel (20 bits, 44..47).
    pub flow_label: u32,
    /// HopLimit (47).
    pub hop_limit: u8,
    /// Scope (48 bits 7:4).
    pub scope: u8,
    /// JoinState (48 bits 3:0).
    pub join_state: JoinState,
    /// ProxyJoin (49 bit 7, as IBA places it; OpenSM's C bit-field reads bit 0 on
    /// little-endian hosts, which only matters for a set bit).
    pub proxy_join: bool,
}

impl McMemberRecord {
    /// Bytes on the wire.
    pub const SIZE: usize = 52;

    /// Decodes from at least 52 bytes.
    pub fn decode(data: &[u8]) -> Result<Self, SaError> {
        let b: [u8; Self::SIZE] = load(data, "MCMemberRecord")?;
        let (mtu_selector, mtu) = split_sel(b[38]);
        let (rate_selector, rate) = split_sel(b[42]);
        let (packet_life_time_selector, packet_life_time) = split_sel(b[43]);
        let w = rd32(&b, 44);
        Ok(McMemberRecord {
            mgid: rd_gid(&b, 0),
            port_gid: rd_gid(&b, 16),
            q_key: rd32(&b, 32),
            mlid: rd16(&b, 36),
            mtu_selector,
            mtu,
            tclass: b[39],
            p_key: rd16(&b, 40),
            rate_selector,
            rate,
            packet_life_time_selector,
            packet_life_time,
            sl: (w >> 28) as u8,
            flow_label: (w >> 8) & 0x000F_FFFF,
            hop_limit: (w & 0xFF) as u8,
            scope: b[48] >> 4,
            join_state: JoinState(b[48] & 0x0F),
            proxy_join: b[49] & 0x80 != 0,
        })
    }

    /// Encodes, reserved bits zero.
    pub fn encode(&self) -> [u8; Self::SIZE] {
        let mut b = [0u8; Self::SIZE];
        put(&mut b, 0, &self.mgid);
        put(&mut b, 16, &self.port_gid);
        wr32(&mut b, 32, self.q_key);
        wr16(&mut b, 36, self.mlid);
        b[38] = sel_byte(self.mtu_selector, self.mtu);
        b[39] = self.tclass;
        wr16(&mut b, 40, self.p_key);
        b[42] = sel_byte(self.rate_selector, self.rate);
        b[43] = sel_byte(self.packet_life_time_selector, self.packet_life_time);
        wr32(
            &mut b,
            44,
            (u32::from(self.sl & 0x0F) << 28)
                | ((self.flow_label & 0x000F_FFFF) << 8)
                | u32::from(self.hop_limit),
        );
        b[48] = ((self.scope & 0x0F) << 4) | (self.join_state.0 & 0x0F);
        b[49] = u8::from(self.proxy_join) << 7;
        b
    }
}

record_components!(McMemberRecord, |r, t| {
    /// 0: MGID.
    MGID = 0 => r.mgid == t.mgid;
    /// 1: PortGID.
    PORT_GID = 1 => r.port_gid == t.port_gid;
    /// 2: Q_Key.
    Q_KEY = 2 => r.q_key == t.q_key;
    /// 3: MLID.
    MLID = 3 => r.mlid == t.mlid;
    /// 4: MTUSelector.
    MTU_SELECTOR = 4 => r.mtu_selector == t.mtu_selector;
    /// 5: MTU.
    MTU = 5 => r.mtu == t.mtu;
    /// 6: TClass.
    TCLASS = 6 => r.tclass == t.tclass;
    /// 7: P_Key.
    P_KEY = 7 => r.p_key == t.p_key;
    /// 8: RateSelector.
    RATE_SELECTOR = 8 => r.rate_selector == t.rate_selector;
    /// 9: Rate.
    RATE = 9 => r.rate == t.rate;
    /// 10: PacketLifeTimeSelector.
    PACKET_LIFE_TIME_SELECTOR = 10 => r.packet_life_time_selector == t.packet_life_time_selector;
    /// 11: PacketLifeTime.
    PACKET_LIFE_TIME = 11 => r.packet_life_time == t.packet_life_time;
    /// 12: SL.
    SL = 12 => r.sl == t.sl;
    /// 13: FlowLabel.
    FLOW_LABEL = 13 => r.flow_label == t.flow_label;
    /// 14: HopLimit.
    HOP_LIMIT = 14 => r.hop_limit == t.hop_limit;
    /// 15: Scope.
    SCOPE = 15 => r.scope == t.scope;
    /// 16: JoinState.
    JOIN_STATE = 16 => r.join_state == t.join_state;
    /// 17: ProxyJoin.
    PROXY_JOIN = 17 => r.proxy_join == t.proxy_join;
});

impl_sa_record!(
    McMemberRecord,
    SaAttributeId::MC_MEMBER_RECORD,
    "MCMemberRecord"
);
