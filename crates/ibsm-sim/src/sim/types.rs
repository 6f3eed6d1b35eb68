//! The simulator's public data types: its configuration ([`SimConfig`]), a client's
//! id ([`ClientId`]), a MAD handed to a client ([`Delivery`]) and the counters of
//! what happened to MADs ([`SimStats`]). A leaf of plain data the rest imports.

use std::fmt;
use std::time::Duration;

use ibsm_mad::{AttributeId, MadAddress, Method};

use crate::wire;

/// Knobs of the simulated devices. `Default` gives a fabric like ibsim's with the
/// capacities of a current switch ASIC.
#[derive(Debug, Clone, PartialEq)]
pub struct SimConfig {
    /// SwitchInfo.LinearFDBCap (LFT entries per switch).
    pub linear_fdb_cap: u16,
    /// SwitchInfo.MulticastFDBCap (0 = no MulticastForwardingTable).
    pub multicast_fdb_cap: u16,
    /// NodeInfo.PartitionCap (P_Key entries of CA ports and switch port 0).
    pub partition_cap: u16,
    /// SwitchInfo.PartitionEnforcementCap (P_Key entries of switch external ports; 0 = none).
    pub partition_enforcement_cap: u16,
    /// PortInfo.GUIDCap (GUIDInfo entries of CA ports and switch port 0).
    pub guid_cap: u8,
    /// PortInfo.MTUCap (IBA encoding: 1 = 256 ... 5 = 4096).
    pub mtu_cap: u8,
    /// PortInfo.VLCap (IBA encoding: 1 = VL0, 2 = VL0-1, 3 = VL0-3, 4 = VL0-7).
    pub vl_cap: u8,
    /// PortInfo.VLArbitrationHighCap of link ports (entries of the high-priority
    /// table; VLArbitration blocks 3 and, above 32, 4 exist).
    pub vl_arb_high_cap: u8,
    /// PortInfo.VLArbitrationLowCap of link ports (blocks 1 and, above 32, 2).
    pub vl_arb_low_cap: u8,
    /// PortInfo.RespTimeValue.
    pub resp_time_value: u8,
    /// SwitchInfo.LifeTimeValue at power-on.
    pub life_time_value: u8,
    /// Delay between `send` and the delivery of what it causes (response, or the
    /// request handed to another client). Changed later with [`Sim::set_latency`](crate::Sim::set_latency).
    pub latency: Duration,
    /// Switch hops after which a LID-routed packet is dropped (routing loops).
    pub max_lid_hops: u16,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            linear_fdb_cap: 49152,
            multicast_fdb_cap: 1024,
            partition_cap: 128,
            partition_enforcement_cap: 32,
            guid_cap: 8,
            mtu_cap: 5,
            vl_cap: 4,
            vl_arb_high_cap: 8,
            vl_arb_low_cap: 8,
            resp_time_value: 8,
            life_time_value: 18,
            latency: Duration::from_micros(2),
            max_lid_hops: 64,
        }
    }
}

/// An SM's endpoint (umad + issm) on a CA port, handed out by [`Sim::attach`](crate::Sim::attach).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClientId(pub u32);

impl fmt::Display for ClientId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "client#{}", self.0)
    }
}

/// A MAD handed to a client, with the source LID of the packet that carried it
/// (LRH SLID; [`PERMISSIVE_LID`](ibsm_mad::PERMISSIVE_LID) for directed-route SMPs) and,
/// for a GMP, its whole source address.
#[derive(Clone, PartialEq, Eq)]
pub struct Delivery {
    /// The receiving client.
    pub client: ClientId,
    /// LRH SLID: where a LID-routed answer must go (see [`Sim::send_to`](crate::Sim::send_to)).
    /// Always `from.lid`.
    pub slid: u16,
    /// Where it came from, the address an answer goes to (with
    /// [`Sim::send_gmp`](crate::Sim::send_gmp) for a GMP). For an SMP only the LID is
    /// meaningful: QPN 0, Q_Key 0, no GRH. For a GMP: the sender's LID (base LID plus
    /// the path bits it sent from), QPN 1 (every client sends from QP1, as every umad
    /// agent does), the Q_Key and SL it was sent with, the DLID path bits that
    /// addressed the receiving port, the index in the receiving port's P_Key table that
    /// matched the packet's P_Key, and a GRH (the sender's GID) when one was sent.
    pub from: MadAddress,
    /// The MAD.
    pub mad: [u8; 256],
}

impl fmt::Debug for Delivery {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Delivery")
            .field("client", &self.client)
            .field("slid", &self.slid)
            .field("qpn", &self.from.qpn)
            .field("class", &self.mad[wire::MGMT_CLASS])
            .field("method", &Method(self.mad[wire::METHOD]))
            .field("attr", &AttributeId(wire::rd16(&self.mad, wire::ATTR_ID)))
            .finish_non_exhaustive()
    }
}

/// The source address of an SMP (LID only: SMPs use QP0, no Q_Key, no GRH).
pub(crate) const fn smp_source(slid: u16) -> MadAddress {
    MadAddress {
        lid: slid,
        qpn: 0,
        qkey: 0,
        sl: 0,
        path_bits: 0,
        pkey_index: 0,
        grh: None,
    }
}

/// Counters of what happened to MADs, for tests and benchmarks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SimStats {
    /// MADs accepted by `send`/`send_to`.
    pub sent: u64,
    /// Requests answered by a simulated SMA.
    pub sma_responses: u64,
    /// Requests (SMInfo, traps) handed to the client at their destination port.
    pub forwarded_to_clients: u64,
    /// MADs handed out by `poll_delivery`.
    pub delivered: u64,
    /// Dropped by `set_loss`.
    pub dropped_loss: u64,
    /// Dropped at a port whose link is not up, or a removed node.
    pub dropped_link: u64,
    /// LID-routed and dropped: no LFT entry, DLID beyond LinearFDBTop, DLID not the
    /// receiving port's, or a loop.
    pub dropped_unrouted: u64,
    /// Directed route leads nowhere (a CA in the middle of the path, a port that does not exist).
    pub dropped_bad_path: u64,
    /// Reached a port with no client to take it (SMInfo/trap/response).
    pub dropped_no_client: u64,
    /// Consumed without an answer (TrapRepress).
    pub consumed: u64,
    /// Discarded by an SMA because the M_Key check failed (IBA 14.2.4).
    pub dropped_m_key: u64,
    /// GMPs (any class but 0x01/0x81) handed to a client.
    pub gmps_to_clients: u64,
    /// GMP Get/Set requests no client at their destination port had registered for:
    /// answered with GetResp status 0x000C, as the Linux kernel's MAD layer does.
    pub gmps_unclaimed: u64,
    /// GMPs dropped at the receiving port for their keys: a Q_Key other than the GSI
    /// one on QP1, or a P_Key the sending port does not hold at the index it sent with
    /// or the receiving port does not hold at all (the partition check of IBA chapter 10).
    pub dropped_key: u64,
}
