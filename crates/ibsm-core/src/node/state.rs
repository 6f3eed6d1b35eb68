//! The data of a running node: the agents it drives, its timers, the standby's
//! sweep, the takeover it prepares, the requests it must answer. Only data and the
//! small types it is made of; the behaviour lives in `running`, `standby`, `master`
//! and `startup`, which all read this file and never each other.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use ibsm_mad::{PortInfo, Smp, MAD_SIZE};

use crate::discovery::{Discovery, DiscoveryResult, DiscoveryToken};
use crate::election::{Election, SmPort};
use crate::sa::SaAgent;
use crate::subnet::storm::LogSampler;
use crate::subnet::{Partition, StandingLfts, SubnetManager};
use crate::transactions::{TidRange, Transactions};

use super::config::NodeConfig;
use super::types::{Output, PeerView, ReplicatedFabric};

/// High 32 bits of the election's TIDs (restored on responses: a kernel may rewrite
/// them).
pub(crate) const ELECTION_TID_HIGH: u64 = 0x5300_0000;
/// The low TID halves of each initiator on the port; disjoint, so a response's owner
/// is its range. Why by low half: a Linux kernel rewrites the high 32 bits of every
/// request with its agent id.
pub const ELECTION_TIDS: TidRange = TidRange {
    base: 0x8000_0000,
    bits: 31,
};
/// The start-up reads of the local port (NodeInfo, PortInfo).
pub const STARTUP_TIDS: TidRange = TidRange {
    base: 0x7000_0000,
    bits: 24,
};
/// The reads of our own port's PortInfo that watch its link.
pub const PORT_WATCH_TIDS: TidRange = TidRange {
    base: 0x7100_0000,
    bits: 24,
};
/// The node's own agent (standby sweeps, SMInfo reads for the roster).
pub const NODE_TIDS: TidRange = TidRange {
    base: 0x4000_0000,
    bits: 28,
};
/// The MASTER's configurator.
pub const SUBNET_TIDS: TidRange = TidRange { base: 0, bits: 30 };

/// Requests kept for building responses; older ones are dropped.
pub(crate) const MAX_REMEMBERED_REQUESTS: usize = 1024;

/// What a transaction of the node's own agent is for.
#[derive(Debug)]
pub(crate) enum Job {
    /// A discovery request of the standby sweep numbered `.0` (`Sweep::seq`).
    Disc(u64, DiscoveryToken),
    /// A probe read of target `.1` by the standby sweep numbered `.0`.
    Probe(u64, usize),
    PeerSmInfo(u64),
    /// A standing read of LFT block `block` of switch `guid` (see `super::standing`).
    StandingLft {
        generation: u32,
        guid: u64,
        block: u16,
    },
}

/// A port the probe reads: every CA port the discovery reached, and switch port 0.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    pub port_guid: u64,
    pub path: Vec<u8>,
    pub port: u8,
    pub is_switch: bool,
    pub info: Option<PortInfo>,
}

#[derive(Debug)]
pub(crate) enum Phase {
    Discover(Box<Discovery>),
    Probe,
}

/// A standby sweep in progress.
#[derive(Debug)]
pub(crate) struct Sweep {
    /// Numbers the sweeps, so the late answers of a stopped one (its SMPs in flight
    /// when it was dropped) are not taken for the next one's.
    pub seq: u64,
    pub heavy: bool,
    /// `fabric_changes` when the sweep started: a discovery during which something
    /// changed is not handed to the configurator.
    pub changes_at_start: u64,
    /// `topology_changes` when the sweep started.
    pub topology_at_start: u64,
    pub started: Duration,
    /// When the current phase began.
    pub phase_started: Duration,
    pub phase: Phase,
    pub outstanding: usize,
    /// Commands answered by this sweep.
    pub replies: Vec<u64>,
    /// The agent's SMPs sent and their time in flight when the sweep started.
    pub smps_at_start: u64,
    pub in_flight_at_start: Duration,
}

/// The watch of our own port's link.
#[derive(Debug)]
pub(crate) struct PortWatch {
    /// Our port number (NodeInfo.LocalPortNum).
    pub port: u8,
    pub seq: u32,
    /// The last read found the port Active.
    pub was_active: bool,
    /// The last read found the port Down.
    pub down: bool,
}

/// The node's own deadlines, one table: each is `Duration::MAX` when not armed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Timer {
    /// Not MASTER: next standby light sweep.
    Light,
    /// Next heavy sweep (standby, or the MASTER's periodic one).
    Heavy,
    /// Next read of our own port's PortInfo.
    PortWatch,
    /// STANDBY with a standing LFT read: its next round.
    StandingLft,
}

/// A takeover prepared while the master went silent: `fabric_changes` when it
/// started and the replicated guid2lid text it assigned LIDs from.
#[derive(Debug)]
pub(crate) struct Prepared {
    pub changes: u64,
    pub guid2lid_file: String,
}

/// A running node (start-up done).
pub(crate) struct Running {
    pub cfg: NodeConfig,
    pub out: VecDeque<Output>,
    pub timers: BTreeMap<Timer, Duration>,
    pub election: Election,
    pub tx: Transactions<Job>,
    pub port_guid: u64,
    pub lid: u16,
    pub sweep: Option<Sweep>,
    pub heavy_wanted: bool,
    /// `heavy_wanted` was set by the election's `DiscoveryNeeded` alone (nothing else
    /// wanted a heavy sweep): a `DiscoveryWithdrawn` takes it back.
    pub heavy_wanted_by_round: bool,
    /// The last `Sweep::seq` handed out.
    pub sweep_seq: u64,
    /// `Sweep` commands waiting for the next standby sweep: (wants heavy, id).
    pub waiting_replies: Vec<(bool, u64)>,
    pub targets: Vec<Target>,
    pub nodes: usize,
    pub unreachable: usize,
    /// The MASTER's configurator (idle unless MASTER or preparing a takeover).
    pub subnet: SubnetManager,
    /// SMPs the subnet manager initiated, over all masterships.
    pub subnet_sent: u64,
    /// `Sweep` commands answered by the subnet manager's next heavy sweep.
    pub subnet_replies: Vec<u64>,
    /// `Sweep{heavy}` callers that asked while a heavy sweep was already under way:
    /// that sweep read the fabric before they asked, so the next one answers them.
    pub subnet_replies_next: Vec<u64>,
    /// `Sweep{heavy: false}` commands answered by its next sweep of either kind.
    pub subnet_light_replies: Vec<u64>,
    /// The last standby discovery: (finished at, `fabric_changes` when it started,
    /// result). A new MASTER configures from it when fresh.
    pub last_discovery: Option<(Duration, u64, u64, DiscoveryResult)>,
    /// Counts what may have changed the fabric behind a discovery's back: traps,
    /// heavy sweep requests, another SM in MASTER, our link going.
    pub fabric_changes: u64,
    /// `fabric_changes` without the SMInfo answers of a MASTER: what a takeover's
    /// verification of the last standby discovery cannot see for itself (a trap,
    /// a sweep request, our own link lost).
    pub topology_changes: u64,
    pub peers: BTreeMap<u64, PeerView>,
    /// When the SM entered its current SMState (node clock), why, and, when that was
    /// a completed HANDOVER out of MASTER, to whom (0 otherwise).
    pub state_since: Duration,
    pub state_reason: String,
    pub handed_over_to: u64,
    /// Requests to answer, by full TID: the request and the LID its answer goes to.
    pub requests: HashMap<u64, (Smp, u16)>,
    pub request_order: VecDeque<u64>,
    /// Requests among `requests` the driver already answered
    /// ([`super::Input::SmInfoAnswered`]): the election's answer to them is not sent.
    pub answered: HashSet<u64>,
    pub last_sweep: String,
    /// The last master heavy sweep that changed the fabric (LIDs, LFTs, port
    /// states, re-registrations, or a topology change), and when it finished.
    pub last_change_sweep: Option<(Duration, String)>,
    /// SMPs the election initiated (SMInfo polls, control packets).
    pub election_sent: u64,
    /// SubnGet(SMInfo) requests received ([`super::NodeStatus::sminfo_requests`]).
    pub sminfo_requests: u64,
    pub port_watch: PortWatch,
    pub prepared: Option<Prepared>,
    /// The SM ports the current prepared takeover's discovery found.
    pub prepared_sm_ports: Option<Vec<SmPort>>,
    /// The replicated fabric state, as last handed in.
    pub replicated: Option<Arc<ReplicatedFabric>>,
    /// The replicated partitions last handed to the configurator in this mastership.
    pub partitions_applied: Option<Vec<Partition>>,
    pub alarms: Vec<String>,
    pub duplicate_guids: u64,
    pub topology_capped: bool,
    /// Per-trap `Watch` records, sampled under a storm.
    pub trap_event_log: LogSampler,
    /// SA client changes logged at info, sampled under a storm (each one is still a
    /// `Watch` record).
    pub sa_activity_log: LogSampler,
    /// The Subnet Administrator (answers only while MASTER; redirects otherwise).
    pub sa: SaAgent,
    /// STANDBY: the standing read of every switch's LFT (see `super::standing`), and
    /// the (master SM port GUID, replica epoch) it is kept under (`None`: not kept).
    pub standing: StandingLfts,
    pub standing_under: Option<(u64, u64)>,
}

/// A MAD kept while the node starts.
pub(crate) type Backlogged = (Box<[u8; MAD_SIZE]>, u16);
