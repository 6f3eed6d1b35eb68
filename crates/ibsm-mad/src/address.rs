//! [`MadAddress`]: where a General Services MAD (GMP, any class but the SMPs) came from or
//! goes to. SMPs need no address beyond a LID (QP0, directed routes carry their own
//! path), but a Subnet Administration answer must go back to the requester's LID *and*
//! QP, with its Q_Key, SL and P_Key index, and a GRH when the request carried one
//! (IBA 13.5.1.2: a GMP response goes to the request's source). Kept here, apart from
//! any class, so the umad transport, the embedded simulator and the SA speak one type.

/// The well-known Q_Key of QP1 (GSI), IBA 13.4.2.
pub const GSI_QKEY: u32 = 0x8001_0000;

/// Global Route Header fields of a GMP: present when the request crossed a router or
/// the requester asked for one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct GrhInfo {
    /// Remote GID (source of a received MAD, destination of a sent one).
    pub gid: [u8; 16],
    /// HopLimit.
    pub hop_limit: u8,
    /// TrafficClass.
    pub traffic_class: u8,
    /// FlowLabel (20 bits).
    pub flow_label: u32,
    /// Index of the local GID in the port's GID table.
    pub gid_index: u8,
}

/// The remote end of a GMP: LRH SLID/DLID, the remote QP and its Q_Key, SL, path bits,
/// P_Key index, and the GRH if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MadAddress {
    /// Remote LID (LRH SLID of a received MAD, DLID of a sent one).
    pub lid: u16,
    /// Remote QP number (24 bits).
    pub qpn: u32,
    /// Q_Key to send with (for a received MAD: the Q_Key it carried).
    pub qkey: u32,
    /// Service level.
    pub sl: u8,
    /// Source path bits (the low LMC bits of our own LID to send from).
    pub path_bits: u8,
    /// Index into the local port's P_Key table.
    pub pkey_index: u16,
    /// GRH, when present.
    pub grh: Option<GrhInfo>,
}

impl MadAddress {
    /// QP1 of `lid` with the GSI Q_Key, SL 0, no GRH: how a client addresses the SA.
    pub const fn gsi(lid: u16) -> MadAddress {
        MadAddress {
            lid,
            qpn: 1,
            qkey: GSI_QKEY,
            sl: 0,
            path_bits: 0,
            pkey_index: 0,
            grh: None,
        }
    }
}
