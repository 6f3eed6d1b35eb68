//! What goes into a [`super::Node`] and what comes out of it: inputs, outputs,
//! operator commands and their replies, events, the status a driver publishes, and
//! the replicated state a new master inherits. Plain data, so drivers, simulations
//! and tests share one vocabulary.

use std::sync::Arc;
use std::time::Duration;

use ibsm_mad::{MadAddress, MAD_SIZE};

use crate::election::{ControlPacket, SmState};
use crate::sa::{SaTables, SaTransmit};
use crate::subnet::{
    ConfigError, Inherited, Outgoing, Partition, RoutingDone, RoutingJob, SaSnapshotDone,
    SaSnapshotJob,
};
use crate::subnet::{SubnetConfig, SweepKind, SweepReport};

/// One input to [`super::Node::handle_input`].
#[derive(Debug)]
pub enum Input<'a> {
    /// A MAD that arrived on the SM's port; `slid` is the LRH SLID it came from (0 if
    /// the transport does not tell), where the answer to a LID-routed request goes.
    Mad {
        /// The MAD.
        mad: &'a [u8; MAD_SIZE],
        /// Its source LID.
        slid: u16,
    },
    /// A SubnGet(SMInfo) that arrived on the SM's port and that the driver already
    /// answered from [`super::Node::sminfo_responder`]
    /// ([`crate::election::SmInfoResponder::answer`]): handled as [`Input::Mad`] (counted,
    /// the poller noted in the roster) but not answered again. Anything else given
    /// this way is handled as [`Input::Mad`].
    SmInfoAnswered {
        /// The MAD.
        mad: &'a [u8; MAD_SIZE],
        /// Its source LID.
        slid: u16,
    },
    /// A General Services MAD (the SA's class 0x03) that arrived on QP1, with its
    /// source address: where the answer goes.
    Gmp {
        /// The MAD.
        mad: &'a [u8; MAD_SIZE],
        /// Its source (LID, QP, Q_Key, SL, P_Key index, GRH).
        from: MadAddress,
    },
    /// An operator command; its [`Output::Done`] carries the same `id`.
    Command {
        /// Chosen by the driver, unique among its pending commands.
        id: u64,
        /// What to do.
        command: NodeCommand,
    },
    /// A routing job ([`Output::RoutingJob`]) finished.
    RoutingDone(RoutingDone),
    /// An SA snapshot job ([`Output::SaSnapshotJob`]) finished.
    SaSnapshotDone(SaSnapshotDone),
    /// The replicated fabric state changed (or is known for the first time).
    Replicated(Arc<ReplicatedFabric>),
    /// The Raft leader's heartbeat reached this SM's replica at `at` (the driver's
    /// clock); `sm_guid` is the SM port registered for the leader's Raft node. A
    /// standby's second opinion on its master (`ElectionConfig::leader_heartbeat_grace`).
    LeaderContact {
        /// The leader's SM port GUID.
        sm_guid: u64,
        /// When its heartbeat arrived.
        at: Duration,
    },
}

/// One output of [`super::Node::poll_output`].
#[derive(Debug)]
pub enum Output {
    /// Put this MAD on the port (LID-routed when `dlid` is `Some(l)`, `l != 0`).
    Transmit(Outgoing),
    /// Send this GMP from QP1 (an SA answer or Report) to its address.
    TransmitGmp(SaTransmit),
    /// Something happened (logs, `Watch`, metrics).
    Event(NodeEvent),
    /// Run this routing computation off the node's thread and hand back its result as
    /// [`Input::RoutingDone`] (or run it inline: the node does not care where).
    RoutingJob(RoutingJob),
    /// Build this SA snapshot off the node's thread and hand it back as
    /// [`Input::SaSnapshotDone`] (or build it inline). Only with
    /// `SubnetConfig::offload_sa_snapshot`; until it is back the SA answers from the
    /// previous snapshot and the sweep's `Done`/`Publish` wait.
    SaSnapshotJob(SaSnapshotJob),
    /// A command finished.
    Done {
        /// The command's id.
        id: u64,
        /// Its outcome.
        result: Result<CommandReply, CommandError>,
    },
    /// This SM became MASTER with replication: claim a new mastership epoch.
    ClaimMastership {
        /// Our SM port GUID.
        sm_guid: u64,
    },
    /// This SM left MASTER: stop writing the replicated state.
    ReleaseMastership,
    /// The SA's state changed (a join, a leave, a registration; or a standby's mirror
    /// of the replica): show [`super::Node::sa_tables`], and replicate it while MASTER.
    PublishSa,
    /// A heavy sweep as MASTER finished: what [`super::Node::subnet`] now holds
    /// (LIDs, topology, LFT digests) is what to replicate and to serve.
    Publish,
    /// The node learned its port (start-up done).
    Started {
        /// Port GUID.
        port_guid: u64,
        /// Port LID (0 before a master assigned one).
        lid: u16,
    },
    /// The node cannot go on (its local port never answered): the driver stops it.
    Failed(NodeError),
}

/// Why a node stopped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NodeError {
    /// The local SMA did not answer a 0-hop SubnGet after every try.
    #[error("the local port did not answer SubnGet({attr}) after {tries} tries")]
    LocalPortSilent {
        /// The attribute asked.
        attr: &'static str,
        /// How many times.
        tries: u32,
    },
    /// The local SMA answered with an error status.
    #[error("the local port answered SubnGet({attr}) with status {status:#06x}")]
    LocalPortStatus {
        /// The attribute asked.
        attr: &'static str,
        /// MAD status.
        status: u16,
    },
    /// The local port's NodeInfo says PortGUID 0.
    #[error("the local port reports PortGUID 0 in NodeInfo")]
    NoPortGuid,
    /// The configuration was refused.
    #[error("configuration: {0}")]
    Config(String),
}

/// An operator command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeCommand {
    /// Change the configured priority.
    SetPriority(u8),
    /// Planned handover to `to` (0: the best standby).
    Handover {
        /// Target port GUID or 0.
        to: u64,
    },
    /// Send DISABLE, STANDBY or DISCOVER to an SM (master only).
    SendControl {
        /// The packet.
        packet: ControlPacket,
        /// Target port GUID.
        guid: u64,
    },
    /// Run a sweep now; done when it completes.
    Sweep {
        /// Heavy (discovery) or light (probe).
        heavy: bool,
    },
    /// Replace the start-up partitions (a reloaded partitions file). Checked as at
    /// start (a refused set changes nothing); the replicated ones still go on top.
    /// While MASTER the P_Key tables are reprogrammed in a heavy sweep; done once
    /// the set is handed to the configurator.
    SetConfiguredPartitions(Vec<crate::subnet::Partition>),
}

/// What a command that succeeded returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommandReply {
    /// Done.
    Done,
    /// HANDOVER sent to this port GUID.
    HandoverTo(u64),
    /// The summary of the sweep that answered it.
    Swept(String),
}

/// Why a command was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CommandError {
    /// The input itself is wrong (priority 16, unknown GUID, ...).
    #[error("{0}")]
    InvalidArgument(String),
    /// The input is fine but the SM is not in a state to do it.
    #[error("{0}")]
    FailedPrecondition(String),
}

/// What happened, for logs, `Watch` and metrics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeEvent {
    /// A line for `Watch` (already logged by the node where it says so).
    Record {
        /// `state`, `priority`, `handover`, `control`, `sweep`, `trap`, `alarm`, `trust`,
        /// `sa` (joins, leaves, services, subscriptions, group changes).
        kind: &'static str,
        /// Human-readable line (for `state`: exactly the log line).
        text: String,
        /// For `state`: old state.
        from: Option<SmState>,
        /// For `state`: new state.
        to: Option<SmState>,
    },
    /// A sweep started or (for the MASTER's) completed: one more of this kind.
    Sweep(SweepKind),
    /// How long a sweep phase took (`discover`, `probe`, `lid`, `routing`,
    /// `distribution`, `activation`).
    Phase {
        /// Phase name.
        phase: &'static str,
        /// Its duration.
        took: Duration,
    },
    /// An SM outside `trusted_sm_guids` was seen (or one acted as MASTER).
    UntrustedSm,
    /// A heavy sweep as MASTER finished (what it found and did, how long it took).
    MasterSweep {
        /// Its report.
        report: Box<SweepReport>,
        /// Its duration (all phases).
        took: Duration,
    },
}

impl NodeEvent {
    pub(crate) fn record(kind: &'static str, text: String) -> NodeEvent {
        NodeEvent::Record {
            kind,
            text,
            from: None,
            to: None,
        }
    }
}

/// Another SM as last seen (or ourselves).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerView {
    /// Port GUID.
    pub guid: u64,
    /// LID of its port (0 if none).
    pub lid: u16,
    /// Priority from its last SMInfo.
    pub priority: u8,
    /// SMState from its last SMInfo; `None` if it never answered.
    pub state: Option<SmState>,
    /// ActCount from its last SMInfo.
    pub act_count: u32,
    /// This instance.
    pub is_self: bool,
    /// Trusted by this instance (always, without `trusted_sm_guids`).
    pub trusted: bool,
    /// When its last SMInfo arrived (an answer to our SubnGet, or an SMInfo it sent
    /// us), on the node's clock (the `now` the node was given); `None`: never, and
    /// always for ourselves.
    pub answered_at: Option<Duration>,
    /// Our SubnGet(SMInfo) of it that went unanswered in a row since its last answer
    /// (a standby's polls of its master, and the sweeps' reads of every SM port).
    pub missed_polls: u32,
}

impl PeerView {
    pub(crate) fn unknown(guid: u64) -> PeerView {
        PeerView {
            guid,
            lid: 0,
            priority: 0,
            state: None,
            act_count: 0,
            is_self: false,
            trusted: true,
            answered_at: None,
            missed_polls: 0,
        }
    }
}

/// What a driver publishes of a node (status API, metrics).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeStatus {
    /// Start-up is done (the port GUID is known).
    pub started: bool,
    /// Our port GUID (0 until start-up is done).
    pub port_guid: u64,
    /// Our port LID.
    pub lid: u16,
    /// Advertised priority.
    pub priority: u8,
    /// SMState (`NotActive` until start-up is done).
    pub state: Option<SmState>,
    /// Since when (node clock) the SM has been in `state`: its last state change, or
    /// the end of start-up.
    pub state_since: Duration,
    /// Why it entered `state` (the election's rule, as its log line says it).
    pub state_reason: String,
    /// When `state` came from a completed HANDOVER out of MASTER: the port GUID it
    /// handed the subnet to (0 otherwise). The two SMs are both MASTER for that
    /// exchange's round trip (the target takes over on the HANDOVER, this SM leaves on
    /// its answer).
    pub handed_over_to: u64,
    /// ActCount.
    pub act_count: u32,
    /// Master's port GUID (0 if unknown).
    pub master_guid: u64,
    /// Master's LID (0 if unknown).
    pub master_lid: u16,
    /// Every SM port seen, ourselves included, by GUID.
    pub sms: Vec<PeerView>,
    /// Summary of the last completed sweep.
    pub last_sweep: String,
    /// The last master heavy sweep that changed something (LIDs, LFT blocks, PortInfo
    /// sets, ports activated, re-registrations, the topology): when it finished (time
    /// since the driver's epoch) and its summary. Later sweeps that change nothing
    /// leave it.
    pub last_change_sweep: Option<(Duration, String)>,
    /// Incoming control packets rejected for a wrong SM_Key.
    pub sm_key_rejections: u64,
    /// Standby: miss streaks whose loss the Raft leader's heartbeat held off
    /// (`Election::losses_held_off`), in total.
    pub losses_held_off: u64,
    /// Conditions an operator must resolve, from the last heavy sweep as MASTER.
    pub alarms: Vec<String>,
    /// Of those, duplicate GUIDs.
    pub duplicate_guids: u64,
    /// The topology cap was hit.
    pub topology_capped: bool,
    /// SMs seen outside `trusted_sm_guids`, and of them those in MASTER.
    pub untrusted_sms: (u64, u64),
    /// SMPs the node initiated (every agent), timeouts, retries.
    pub mads: (u64, u64, u64),
    /// Traps received, rate-limited, trap sweeps deferred (MASTER's configurator).
    pub traps: (u64, u64, u64),
    /// SubnGet(SMInfo) requests received (other SMs' polls and queries): what the
    /// standbys' polling costs this SM.
    pub sminfo_requests: u64,
}

/// The replicated fabric state a node inherits when it becomes MASTER: the LIDs and
/// LFT digests the previous master published, the fabric's M_Key and the partitions
/// set through the API. Built by the driver from its replica; core-level types, so the
/// node does not depend on the replication crate.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplicatedFabric {
    /// Mastership epoch of the copy.
    pub epoch: u64,
    /// SM port GUID of the master that holds `epoch` (`None`: unknown).
    pub master_guid: Option<u64>,
    /// guid2lid as OpenSM's text (`SubnetManager::import_guid2lid`); empty: none.
    pub guid2lid_file: String,
    /// Ports in it.
    pub guid2lid_ports: usize,
    /// LFT digests and cabling of the previous master.
    pub inherited: Inherited,
    /// The M_Key the previous master programmed (0: none).
    pub m_key: u64,
    /// The replicated partitions (`Fabric/SetPartition`).
    pub partitions: Vec<Partition>,
    /// The Subnet Administrator's tables (groups, members, services,
    /// subscriptions); empty if no SA ever replicated them.
    pub sa: SaTables,
}

/// A replicated partition the MASTER leaves out, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedPartition {
    /// The partition.
    pub partition: Partition,
    /// What the configurator's validation says about the set with it.
    pub why: ConfigError,
}

/// What a MASTER programs: its start-up partitions (`configured`) with the
/// `replicated` ones on top, in P_Key order. A replicated partition replaces a
/// configured one with the same P_Key or the same name (the operator redefined it
/// through the API). Each replicated partition is added only if the set stays valid
/// for `SubnetConfig::validate` (duplicate names, more than 31 partitions on a
/// port...); the ones that would break it are returned as skipped, so one bad entry
/// never stops the others from being programmed.
pub fn effective_partitions(
    configured: &[Partition],
    replicated: &[Partition],
) -> (Vec<Partition>, Vec<SkippedPartition>) {
    let mut out: Vec<Partition> = configured.to_vec();
    let mut skipped = Vec::new();
    let mut rep: Vec<&Partition> = replicated.iter().collect();
    rep.sort_by_key(|p| p.p_key);
    for p in rep {
        let mut next: Vec<Partition> = out
            .iter()
            .filter(|q| q.p_key != p.p_key && !(q.name == p.name && configured.contains(q)))
            .cloned()
            .collect();
        next.push(p.clone());
        let check = SubnetConfig {
            partitions: next,
            ..SubnetConfig::default()
        };
        match check.validate() {
            Ok(()) => out = check.partitions,
            Err(why) => skipped.push(SkippedPartition {
                partition: p.clone(),
                why,
            }),
        }
    }
    out.sort_by_key(|p| p.p_key);
    (out, skipped)
}
