//! The state a sweep keeps between calls: the tokens of its requests in the shared
//! MAD agent (tagged with the generation they count in), what a light sweep expects
//! an SM port to read, the heavy sweep after discovery ([`Sweep`]) with its
//! programming phase and operations, the [`Stage`] a sweep is in, and what earlier
//! sweeps programmed ([`Programmed`]), so that only changes are sent.

use std::collections::{HashMap, VecDeque};

use ibsm_fabric::routing::ForwardingTables;
use ibsm_mad::attr::PortState;
use ibsm_mad::modifier::VlArbSection;

use crate::discovery::{Discovery, DiscoveryResult, DiscoveryToken};

use super::events::SweepReport;
use super::inherit::{PortDigest, Readback};
use super::verify::{Verify, VerifyOp};

/// A [`Token`] and the generation it was submitted in (see `SubnetManager::generation`).
#[derive(Debug, Clone)]
pub(super) struct Tagged {
    pub(super) generation: u32,
    pub(super) token: Token,
}

/// Token of a request in the shared MAD agent.
#[derive(Debug, Clone)]
pub(super) enum Token {
    Disc(DiscoveryToken),
    Prog(Op),
    Light(LightOp),
    /// Read-back of one LFT block of switch `node` (a new master inheriting).
    ReadLft {
        node: u32,
        block: u16,
    },
    /// One MulticastForwardingTable write (see `mcast`).
    Mft(ibsm_fabric::multicast::MftWrite),
    /// One read verifying a known discovery (see `verify`).
    Verify(VerifyOp),
}

#[derive(Debug, Clone, Copy)]
pub(super) enum LightOp {
    SwitchInfo,
    PortInfo(PortExpect),
}

/// What a light sweep expects an SM port (ours or a known SM's) to read.
#[derive(Debug, Clone, Copy)]
pub(super) struct PortExpect {
    pub(super) state: PortState,
    pub(super) lid: u16,
    pub(super) master_sm_lid: u16,
    /// A known SM's port: CapabilityMask.IsSM must still be set.
    pub(super) sm: bool,
}

/// State of the current heavy sweep after discovery.
#[derive(Debug)]
pub(super) struct Sweep {
    pub(super) res: DiscoveryResult,
    pub(super) tables: ForwardingTables,
    pub(super) master_lid: u16,
    pub(super) client_reregister: bool,
    pub(super) dead: Vec<bool>,
    pub(super) lft_failed: Vec<bool>,
    /// Next node whose distribution SMPs are planned.
    pub(super) cursor: usize,
    pub(super) ops: VecDeque<Op>,
    pub(super) outstanding: usize,
    /// Distribution progress per node and the port activation it releases.
    pub(super) pipe: Pipeline,
    /// Switches whose LFT round (see `lft_write`) holds Sets back until an answer.
    pub(super) lft_rounds: HashMap<u32, Round>,
    /// LFT Sets a round released; they go before any further distribution SMP.
    pub(super) lft_next: VecDeque<Op>,
    pub(super) report: SweepReport,
    /// No port's LID was assigned or changed by this sweep's LID assignment.
    pub(super) lids_stable: bool,
    /// Program the M_Key fields of PortInfo: a key is configured, or one the
    /// fabric held is to be removed. Otherwise they are written back as read (a
    /// port's own lease period, say, is left alone).
    pub(super) manage_m_key: bool,
    /// The PortInfo each acknowledged SubnSet(PortInfo) of this sweep returned, by
    /// (node, port): what the port holds after the Set (IBA 14.2.5.6 fields written
    /// as "no change", and fields a port does not implement, read as the port kept
    /// them), which is what the SA serves.
    pub(super) port_info_set: HashMap<(u32, u8), ibsm_mad::PortInfo>,
    /// This sweep's discovery is a known one, verified (see `verify`).
    pub(super) verified: bool,
    /// A verified takeover's replicated port digests, seeded into [`Programmed`]
    /// when programming starts (see `port_digest`).
    pub(super) seed: Option<HashMap<(u64, u8), PortDigest>>,
}

#[derive(Debug)]
pub(super) enum Stage {
    Idle,
    Discovering(Box<Discovery>),
    /// A takeover verifies the discovery it already holds (see `verify`); a
    /// difference turns it into `Discovering`.
    Verifying(Box<Verify>),
    /// Discovery done; LIDs computed at the given time, routing next.
    LidsDone(Box<Sweep>),
    /// A new master reads the LFTs its predecessor left (see `inherit`).
    ReadingLfts(Box<Sweep>, Box<Readback>),
    /// Routing handed to the driver as [`RoutingJob`](super::routing_job::RoutingJob)
    /// `id` (`offload_routing`).
    Routing(Box<Sweep>, u64),
    /// Routing computed; distribution next.
    RoutingDone(Box<Sweep>),
    Programming(Box<Sweep>),
    Light {
        outstanding: usize,
        changed: bool,
    },
}

/// What was programmed by earlier sweeps, to send only changes.
#[derive(Debug, Default)]
pub(super) struct Programmed {
    /// LFT per switch NodeGUID, and the LinearFDBTop it was programmed with (shared
    /// with the SA snapshot and the daemon's published view, which copy no table).
    pub(super) lfts: HashMap<u64, (u16, std::sync::Arc<[u8]>)>,
    /// The LFT stamp (`super::lft_stamp`) each switch NodeGUID holds, as this SM
    /// last wrote or read it; absent: unknown.
    pub(super) lft_stamps: HashMap<u64, super::lft_stamp::Stamp>,
    /// P_Key block 0 per (node GUID, port).
    pub(super) pkeys: HashMap<(u64, u8), [u16; 32]>,
    /// SLtoVL/VLArbitration programmed for (node GUID, port) with these OperationalVLs.
    pub(super) qos: HashMap<(u64, u8), u8>,
}

/// Distribution progress per node and the port activation it releases (see the
/// `activation` module).
#[derive(Debug, Default)]
pub(super) struct Pipeline {
    /// Distribution SMPs of each node planned and not yet answered or failed.
    pub(super) pending: Vec<u32>,
    /// Each node's distribution is over (every SMP of it answered or failed, or
    /// the node dead).
    pub(super) distributed: Vec<bool>,
    /// Nodes whose distribution is not over yet.
    pub(super) dist_left: usize,
    /// Port state Sets ready to go; they go before any further distribution SMP.
    pub(super) ready: VecDeque<Op>,
    /// Links (by their lower end) with Arm Sets not yet answered, and how many.
    pub(super) arms_left: HashMap<(u32, u8), u8>,
    /// The end of distribution has been recorded (the sweep's mark).
    pub(super) dist_end_marked: bool,
}

/// One programming SMP. `node` is a `NodeIdx` of the sweep's topology.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Op {
    SwitchInfo {
        node: u32,
    },
    /// One LFT block. Block 0 always carries an LFT stamp (`super::lft_stamp`):
    /// an odd one opens the switch's round, an even one closes it (see
    /// `super::lft_write`); other blocks carry none.
    Lft {
        node: u32,
        block: u16,
        stamp: Option<u8>,
        /// The Set writes content the switch does not hold yet (false: a block-0
        /// Set that only moves the stamp).
        content: bool,
    },
    PortInfo {
        node: u32,
        port: u8,
    },
    PKey {
        node: u32,
        port: u8,
    },
    Sl2Vl {
        node: u32,
        port: u8,
        in_port: u8,
    },
    VlArb {
        node: u32,
        port: u8,
        section: VlArbSection,
    },
    State {
        node: u32,
        port: u8,
        state: u8,
    },
}

impl Op {
    pub(super) fn node(self) -> u32 {
        match self {
            Op::SwitchInfo { node }
            | Op::Lft { node, .. }
            | Op::PortInfo { node, .. }
            | Op::PKey { node, .. }
            | Op::Sl2Vl { node, .. }
            | Op::VlArb { node, .. }
            | Op::State { node, .. } => node,
        }
    }
}

/// A switch's LFT round under way: the Sets it holds back (see `super::lft_write`).
#[derive(Debug)]
pub(super) struct Round {
    /// Blocks other than 0 held until the open is answered (empty once released).
    pub(super) held: Vec<u16>,
    /// Released blocks whose answer the close still waits for.
    pub(super) awaiting: usize,
    /// The stamp that closes the round.
    pub(super) close: u8,
    /// The close carries block 0's new content (no open carried it).
    pub(super) close_content: bool,
}
