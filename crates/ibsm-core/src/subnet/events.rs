//! What the configurator hands the driver: the SMPs to send ([`Outgoing`]), the
//! events it reports ([`SubnetEvent`]) and what they carry about a sweep (its kind,
//! why a heavy sweep started, its phase times and [`SweepReport`]).

use std::fmt;
use std::time::Duration;

use ibsm_mad::attr::Notice;
use ibsm_mad::{Smp, MAD_SIZE};

use crate::discovery::{DuplicateGuid, TopologyCap};
use crate::election::SmPort;

/// An SMP to put on the wire.
#[derive(Clone, PartialEq, Eq)]
pub struct Outgoing {
    /// `None`: directed route (`MadDevice::send`); `Some(lid)`: LID-routed to that
    /// LID (`MadDevice::send_lid`), used for TrapRepress.
    pub dlid: Option<u16>,
    /// The MAD.
    pub mad: [u8; MAD_SIZE],
}

impl fmt::Debug for Outgoing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Outgoing")
            .field("dlid", &self.dlid)
            .finish_non_exhaustive()
    }
}

/// Time spent in each phase of a heavy sweep.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PhaseTimes {
    /// Directed-route discovery.
    pub discovery: Duration,
    /// LID assignment.
    pub lids: Duration,
    /// Routing (LFT computation).
    pub routing: Duration,
    /// SwitchInfo, LFT, PortInfo, P_Key, SLtoVL, VLArbitration: from the end of
    /// routing until the last of these SMPs is answered. Port activation runs in
    /// it too, link by link, as soon as both ends of a link are programmed.
    pub distribution: Duration,
    /// Init -> Armed -> Active: what is left of it after distribution ended.
    pub activation: Duration,
}

impl PhaseTimes {
    /// Sum of the phases.
    pub fn total(&self) -> Duration {
        self.discovery + self.lids + self.routing + self.distribution + self.activation
    }
}

/// What a heavy sweep found and did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SweepReport {
    /// Nodes discovered.
    pub nodes: usize,
    /// Switches discovered.
    pub switches: usize,
    /// CAs and routers discovered.
    pub end_nodes: usize,
    /// End ports with a LID.
    pub lids: usize,
    /// End ports left without a LID (more end ports than unicast LIDs).
    pub lids_unassigned: usize,
    /// LinearFDBTop programmed.
    pub lft_top: u16,
    /// LFT blocks sent this sweep with content the switch did not hold.
    pub lft_blocks_sent: u64,
    /// LFT block-0 Sets that only moved the switch's LFT stamp (a round's close
    /// after its open, or the close of a round that left block 0 as it was).
    pub lft_stamp_sets: u64,
    /// Switches whose LFT stamp open failed: their other changed blocks wait
    /// for the next sweep.
    pub lft_opens_failed: u64,
    /// PortInfo Sets (configuration and state changes).
    pub port_info_sets: u64,
    /// End ports asked to re-register with the SA (PortInfo.ClientReregister set).
    pub client_reregisters: u64,
    /// Ports moved to Armed / Active.
    pub ports_armed: u64,
    /// Ports moved to Active.
    pub ports_activated: u64,
    /// SMPs sent in this sweep (with retries).
    pub smps: u64,
    /// SMPs sent in each phase and how full the window was kept (heavy sweeps).
    pub phase_smps: PhaseSmps,
    /// Requests that failed (timeout after retries, or error status).
    pub failures: u64,
    /// Nodes that stopped answering during programming.
    pub dead_nodes: usize,
    /// Light sweeps: something read differently or went unanswered (a heavy sweep
    /// follows).
    pub changed: bool,
    /// Far ends discovery could not reach.
    pub unreachable: usize,
    /// Other SM ports (PortInfo.CapabilityMask.IsSM), for `Election::handle_sweep`.
    pub sm_ports: Vec<SmPort>,
    /// Devices answering with a GUID another one has (discovery's duplicates).
    pub duplicates: Vec<DuplicateGuid>,
    /// Ports left without a LID because of a duplicate port GUID.
    pub lids_withheld: usize,
    /// Set when discovery hit its topology cap.
    pub cap: Option<TopologyCap>,
}

/// SMPs sent in each phase of a heavy sweep (the intervals of [`PhaseTimes`],
/// retries included), and the time SMPs spent on the wire in each
/// ([`crate::transactions::Transactions::in_flight_time`]): a phase's
/// `in_flight` divided by its duration is the mean number of SMPs in flight, so
/// a phase whose mean is well below the window ran the window dry.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PhaseSmps {
    /// SMPs sent during discovery.
    pub discovery: u64,
    /// SMPs sent during LID assignment and routing (a new master's LFT read-back).
    pub lids_routing: u64,
    /// SMPs sent while distributing (port state Sets of links already
    /// programmed included, see `activation_overlapped`).
    pub distribution: u64,
    /// SMPs sent after the last distribution SMP was answered.
    pub activation: u64,
    /// PortInfo Sets of PortState (Armed, Active) sent before distribution ended.
    pub activation_overlapped: u64,
    /// Time SMPs spent in flight during discovery, LIDs and routing,
    /// distribution, activation.
    pub in_flight: [Duration; 4],
}

/// Which sweep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SweepKind {
    /// Full discovery and programming.
    Heavy,
    /// SwitchInfo.PortStateChange and SM ports only.
    Light,
}

/// Why a heavy sweep started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SweepReason {
    /// [`SubnetManager::become_master`](super::SubnetManager::become_master).
    BecameMaster,
    /// [`SubnetManager::start_heavy_sweep`](super::SubnetManager::start_heavy_sweep).
    Requested,
    /// A light sweep saw a change.
    LightSweepChange,
    /// Trap 128 or 144.
    Trap(u16),
    /// [`SubnetManager::set_partitions`](super::SubnetManager::set_partitions) changed
    /// the partitions: P_Key tables (and switch enforcement) are reprogrammed.
    PartitionsChanged,
}

/// What the SM reports to the daemon.
#[derive(Debug, Clone, PartialEq)]
pub enum SubnetEvent {
    /// The first heavy sweep of this mastership completed: the subnet is up.
    SubnetUp {
        /// Phase times of that sweep.
        phases: PhaseTimes,
        /// What it did.
        report: SweepReport,
    },
    /// A sweep completed (also after `SubnetUp`).
    SweepDone {
        /// Heavy or light.
        kind: SweepKind,
        /// Phase times (heavy sweeps).
        phases: PhaseTimes,
        /// What it did (heavy sweeps; light sweeps report only `smps`/`failures`).
        report: SweepReport,
    },
    /// A heavy sweep found nodes or cables different from the previous one.
    TopologyChanged {
        /// NodeGUIDs new in this sweep.
        added: Vec<u64>,
        /// NodeGUIDs gone.
        removed: Vec<u64>,
        /// Cables that appeared or disappeared.
        links_changed: usize,
    },
    /// A notice for the SA to forward to subscribers: traps 64/65 (GID in/out of
    /// service) this SM produces, and the traps 128-131, 144, 145 it received (not
    /// rate-limited).
    Notice(Notice),
    /// A heavy sweep's discovery found two devices answering with one GUID (an
    /// alarm: reported every sweep while it lasts).
    DuplicateGuid(DuplicateGuid),
    /// A heavy sweep's discovery stopped growing at its topology cap.
    TopologyCapped(TopologyCap),
    /// Trap 144 (local changes, e.g. SM priority) arrived and was repressed.
    Trap144 {
        /// IssuerLID.
        issuer_lid: u16,
        /// Its details.
        trap: ibsm_mad::attr::Trap144,
    },
    /// A request that is not for this module (SMInfo from another SM...): for the election.
    Unsolicited(Smp),
    /// The discovery of a prepared takeover
    /// ([`SubnetManager::prepare_takeover`](super::SubnetManager::prepare_takeover))
    /// completed: the SM ports it found, with fresh directed routes, for
    /// [`Election::handle_sweep`](crate::election::Election::handle_sweep) (a
    /// DISCOVERING election waits for such a sweep before it declares the master
    /// it lost dead, see [`ElectionEvent::DiscoveryNeeded`](crate::election::ElectionEvent::DiscoveryNeeded)).
    PreparedDiscovery {
        /// SM ports other than ours.
        sm_ports: Vec<SmPort>,
    },
}
