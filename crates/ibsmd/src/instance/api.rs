//! What an instance is started with and what its users exchange with it: settings,
//! commands and their errors, the status snapshot, `Watch` events. The gRPC server,
//! the demo and the driver all name these, so they sit apart from both.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ibsm_core::election::{ControlPacket, SmState};
use ibsm_core::subnet::SubnetConfig;
use tokio::sync::oneshot;

use crate::metrics::Metrics;
use ibsm_core::node::{PeerView, DEFAULT_MASTER_HEAVY_SWEEP_INTERVAL};

/// Settings of one SM instance.
#[derive(Debug, Clone)]
pub struct InstanceConfig {
    /// Name used in logs and `Status.node_name` (the demo's `sm1`..`sm3`).
    pub name: String,
    /// SM priority 0..=15.
    pub priority: u8,
    /// SM_Key (OpenSM's default is 1).
    pub sm_key: u64,
    /// Standby: interval between polls of the master.
    pub poll_interval: Duration,
    /// Standby: interval of the re-polls after a missed poll.
    pub repoll_interval: Duration,
    /// Standby: missed polls in a row before the master is declared dead.
    pub poll_retries: u32,
    /// How long the subnet may stay masterless, the SM that outranks us answering
    /// STANDBY, before we take MASTER and hand it back by HANDOVER once that SM is
    /// ready; `None` waits for it (IBA's rule alone). See
    /// `ibsm_core::election::ElectionConfig::masterless_takeover`.
    pub masterless_takeover: Option<Duration>,
    /// Interval between light sweeps (PortInfo probe of known ports).
    pub light_sweep_interval: Duration,
    /// Not MASTER: interval between heavy sweeps (full directed-route discovery that
    /// finds the SM ports).
    pub heavy_sweep_interval: Duration,
    /// MASTER: interval between periodic heavy sweeps (discovery, LIDs, routing,
    /// programming of what differs); `Duration::ZERO`: only on change (start, traps,
    /// a light sweep that sees a change, `Sweep{heavy}` from the API). Default
    /// [`DEFAULT_MASTER_HEAVY_SWEEP_INTERVAL`]. `--heavy-sweep-interval-s`.
    pub master_heavy_sweep_interval: Duration,
    /// Where the instance publishes its Prometheus metrics (shared with `/metrics`;
    /// the demo keeps one per member across restarts).
    pub metrics: Arc<Metrics>,
    /// What the MASTER configures (LMC, routing engine, partitions, light-sweep
    /// interval, SMP window...). Checked by [`Instance::spawn`](crate::Instance::spawn).
    pub subnet: SubnetConfig,
    /// The replicated fabric state (`--node-id`): a new MASTER seeds its LIDs and
    /// inherits the LFTs from it, and publishes what it programs after each heavy
    /// sweep. See [`crate::replication`].
    pub replication: Option<Arc<crate::replication::Replication>>,
    /// `--trusted-sm-guid` / `trusted_sm_guids`: `None` trusts every SM (IBA, OpenSM);
    /// otherwise only these port GUIDs and our own (see
    /// `ibsm_core::election::ElectionConfig::trusted_sm_guids`).
    pub trusted_sm_guids: Option<BTreeSet<u64>>,
    /// `--sticky-priority`: the priority advertised while MASTER (see
    /// `ibsm_core::election::ElectionConfig::sticky_priority`); `None`: off.
    pub sticky_priority: Option<u8>,
    /// `--hung-master-window-ms`: a standby declares a master lost when it answers
    /// but its ActCount has not moved for this long. `None`: three light-sweep
    /// intervals (the master's, assumed equal to ours); `Some(Duration::ZERO)`: never.
    pub hung_master_window: Option<Duration>,
    /// `--leader-heartbeat-grace-ms`: how long a fresh Raft heartbeat from the master
    /// may hold off declaring it lost (see
    /// `ibsm_core::election::ElectionConfig::leader_heartbeat_grace`). `None`: the
    /// library's default (1 s); `Some(Duration::ZERO)`: heartbeats are not consulted.
    pub leader_heartbeat_grace: Option<Duration>,
    /// `--sm-key-policy`: how incoming SMInfo control packets' SM_Key is checked.
    pub sm_key_policy: ibsm_core::election::SmKeyPolicy,
    /// `--guid2lid`: OpenSM guid2lid text a first master assigns LIDs from (see
    /// `ibsm_core::node::NodeConfig::guid2lid_seed`); check it with
    /// [`crate::config::load_guid2lid`] before anything starts.
    pub guid2lid_seed: Option<String>,
    /// `sminfo_answer_thread` (default on; `--no-sminfo-answer-thread` turns it off):
    /// another SM's SubnGet(SMInfo) is answered the moment it is read, from the node's
    /// state after its last step, and while the SM thread is in a step of 5 ms or more a
    /// stand-in thread reads the port for it and answers them (see
    /// `instance/driver/poll_answer.rs`). Off, or on a device that cannot be shared
    /// between threads, a poll waits for the SM thread's current step and its turn.
    pub sminfo_answer_thread: bool,
}

impl InstanceConfig {
    /// The hung-master window in effect (`None`: the rule is off).
    pub fn effective_hung_master_window(&self) -> Option<Duration> {
        match self.hung_master_window {
            None => Some(self.subnet.sweep_interval.saturating_mul(3)),
            Some(d) if d.is_zero() => None,
            Some(d) => Some(d),
        }
    }

    /// The Raft-heartbeat grace in effect (`None`: heartbeats are not consulted).
    pub fn effective_leader_heartbeat_grace(&self) -> Option<Duration> {
        match self.leader_heartbeat_grace {
            None => ibsm_core::election::ElectionConfig::new(1).leader_heartbeat_grace,
            Some(d) if d.is_zero() => None,
            Some(d) => Some(d),
        }
    }

    /// Defaults: 100 ms x 3 polling (see the crate doc for the trade-off), SM_Key 1,
    /// light sweep every 2 s (standby probe and the master's configurator alike),
    /// standby heavy sweep every 10 s, master heavy sweep every
    /// [`DEFAULT_MASTER_HEAVY_SWEEP_INTERVAL`].
    pub fn new(name: impl Into<String>, priority: u8) -> InstanceConfig {
        InstanceConfig {
            name: name.into(),
            priority,
            sm_key: 1,
            poll_interval: ibsm_core::election::DEFAULT_POLL_INTERVAL,
            repoll_interval: ibsm_core::election::DEFAULT_REPOLL_INTERVAL,
            poll_retries: 3,
            masterless_takeover: Some(Duration::from_secs(1)),
            light_sweep_interval: Duration::from_secs(2),
            heavy_sweep_interval: Duration::from_secs(10),
            master_heavy_sweep_interval: DEFAULT_MASTER_HEAVY_SWEEP_INTERVAL,
            metrics: Arc::new(Metrics::new()),
            subnet: SubnetConfig {
                sweep_interval: Duration::from_secs(2),
                ..SubnetConfig::default()
            },
            replication: None,
            trusted_sm_guids: None,
            sticky_priority: None,
            hung_master_window: None,
            leader_heartbeat_grace: None,
            sm_key_policy: ibsm_core::election::SmKeyPolicy::default(),
            guid2lid_seed: None,
            sminfo_answer_thread: true,
        }
    }
}

/// Why a command was refused; the gRPC layer maps these to status codes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CommandError {
    /// The input itself is wrong (priority 16, unknown GUID, ...).
    #[error("{0}")]
    InvalidArgument(String),
    /// The input is fine but the SM is not in a state to do it.
    #[error("{0}")]
    FailedPrecondition(String),
    /// The instance thread is gone.
    #[error("SM instance {0} is not running")]
    Unavailable(String),
}

/// A request to the instance thread.
#[derive(Debug)]
pub enum Command {
    /// Change the configured priority.
    SetPriority {
        /// New priority.
        priority: u8,
        /// Outcome.
        reply: oneshot::Sender<Result<(), CommandError>>,
    },
    /// Planned handover to `to` (0: the best standby). Replies with the target GUID.
    Handover {
        /// Target port GUID or 0.
        to: u64,
        /// Outcome.
        reply: oneshot::Sender<Result<u64, CommandError>>,
    },
    /// Send DISABLE, STANDBY or DISCOVER to an SM (master only).
    SendControl {
        /// The packet.
        packet: ControlPacket,
        /// Target port GUID.
        guid: u64,
        /// Outcome (the answer arrives later as an event).
        reply: oneshot::Sender<Result<(), CommandError>>,
    },
    /// Run a sweep now; the reply is its summary, sent when it completes.
    Sweep {
        /// Heavy (discovery) or light (probe).
        heavy: bool,
        /// Summary.
        reply: oneshot::Sender<String>,
    },
    /// Replace the start-up partitions (a reloaded `--partitions-file`); the
    /// replicated ones stay on top. Refused sets change nothing.
    SetPartitions {
        /// The new start-up partitions.
        partitions: Vec<ibsm_core::subnet::Partition>,
        /// Outcome.
        reply: oneshot::Sender<Result<(), CommandError>>,
    },
    /// Test facility: the SM thread sleeps this long as one step, as a hung or
    /// descheduled thread would (no timers, no MADs handled meanwhile). No API sends it;
    /// tests use it to check that SMInfo polls are answered meanwhile and ActCount
    /// stands still.
    Stall(Duration),
    /// Stop the instance (its port stops advertising IsSM).
    Shutdown,
}

/// What `GetStatus` and `ListSms` report; refreshed by the instance thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// Instance name.
    pub name: String,
    /// Our port GUID (0 until the local port was read).
    pub guid: u64,
    /// Our port LID.
    pub lid: u16,
    /// Advertised priority.
    pub priority: u8,
    /// SMState (`NotActive` before start and after shutdown).
    pub state: SmState,
    /// ActCount.
    pub act_count: u32,
    /// Master's port GUID (0 if unknown).
    pub master_guid: u64,
    /// Master's LID (0 if unknown).
    pub master_lid: u16,
    /// Every SM port seen, ourselves included.
    pub sms: Vec<PeerView>,
    /// Summary of the last completed sweep.
    pub last_sweep: String,
    /// Summary of the last sweep that changed the fabric (empty: none yet).
    pub last_change_sweep: String,
    /// When that sweep finished, ms since the Unix epoch (0: none yet).
    pub last_change_sweep_unix_ms: u64,
    /// Incoming control packets rejected for a wrong SM_Key.
    pub sm_key_rejections: u64,
    /// The thread is running.
    pub running: bool,
    /// What this SM configured as MASTER at its last heavy sweep (`None` before its
    /// first one); kept after it steps down, so it may be stale then.
    pub fabric: Option<Arc<crate::fabric_view::FabricView>>,
    /// The SA's state as this SM's node holds it (the MASTER's own; a standby's
    /// mirror of the replica), as replicated tables; refreshed at every change.
    pub sa: Option<Arc<ibsm_core::sa::SaTables>>,
    /// The replica's freshness for the SA (see [`SaReplica`]).
    pub sa_replica: SaReplica,
    /// The partitions of this SM's start-up configuration (`--partition`, config
    /// file); the MASTER programs them plus the replicated ones.
    pub startup_partitions: Vec<ibsm_core::subnet::Partition>,
    /// Conditions an operator must resolve, from this SM's last heavy sweep as
    /// MASTER (duplicate GUIDs, the topology cap); empty when all is well.
    pub alarms: Vec<String>,
    /// MADs the device refused to send (each a failed MAD, never the end of the
    /// instance thread).
    pub send_errors: u64,
    /// The settings the instance was started with, as an operator reads them.
    pub settings: SettingsView,
    /// The instance thread's clock: time zero of the node's `Duration`s
    /// ([`PeerView::answered_at`], `state_since`); `None` before the thread ran.
    pub clock: Option<std::time::Instant>,
    /// Since when (node clock) the SM has been in `state`, why, and to whom it
    /// handed over when that is why (0 otherwise).
    pub state_since: Duration,
    pub state_reason: String,
    pub handed_over_to: u64,
}

impl Snapshot {
    /// How long ago `at` (a time on the node's clock) was, now.
    pub fn age_of(&self, at: Duration) -> Option<Duration> {
        self.clock.map(|c| c.elapsed().saturating_sub(at))
    }
}

/// The election and subnet settings of an instance, for status (`ibsmctl status`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SettingsView {
    /// Configured priority (the advertised one may be the sticky priority).
    pub priority: u8,
    /// `--sticky-priority`.
    pub sticky_priority: Option<u8>,
    /// Standby polling.
    pub poll_interval: Duration,
    /// Standby re-polls after a miss.
    pub repoll_interval: Duration,
    /// Misses in a row that lose the master.
    pub poll_retries: u32,
    /// The hung-master window in effect (`None`: off).
    pub hung_master_window: Option<Duration>,
    /// The Raft-heartbeat grace in effect (`None`: off).
    pub leader_heartbeat_grace: Option<Duration>,
    /// Masterless takeover bound (`None`: off).
    pub masterless_takeover: Option<Duration>,
    /// SM_Key check of control packets.
    pub sm_key_policy: ibsm_core::election::SmKeyPolicy,
    /// Switch ports facing CAs enforce partitions.
    pub partition_enforcement: bool,
    /// SMPs in flight.
    pub smp_window: usize,
    /// LMC.
    pub lmc: u8,
    /// Routing engine (`minhop`, `updown`).
    pub routing: String,
    /// Master light-sweep interval.
    pub light_sweep_interval: Duration,
    /// Master periodic heavy-sweep interval (zero: only on change).
    pub heavy_sweep_interval: Duration,
    /// Trusted SM GUIDs (0: all trusted).
    pub trusted_sms: usize,
}

impl SettingsView {
    /// What `cfg` sets.
    pub fn of(cfg: &InstanceConfig) -> SettingsView {
        SettingsView {
            priority: cfg.priority,
            sticky_priority: cfg.sticky_priority,
            poll_interval: cfg.poll_interval,
            repoll_interval: cfg.repoll_interval,
            poll_retries: cfg.poll_retries,
            hung_master_window: cfg.effective_hung_master_window(),
            leader_heartbeat_grace: cfg.effective_leader_heartbeat_grace(),
            masterless_takeover: cfg.masterless_takeover,
            sm_key_policy: cfg.sm_key_policy,
            partition_enforcement: cfg.subnet.partition_enforcement,
            smp_window: cfg.subnet.transactions.window,
            lmc: cfg.subnet.lmc,
            routing: match cfg.subnet.routing {
                ibsm_core::subnet::RoutingEngine::MinHop => "minhop".into(),
                ibsm_core::subnet::RoutingEngine::UpDown { .. } => "updown".into(),
            },
            light_sweep_interval: cfg.subnet.sweep_interval,
            heavy_sweep_interval: cfg.master_heavy_sweep_interval,
            trusted_sms: cfg.trusted_sm_guids.as_ref().map_or(0, BTreeSet::len),
        }
    }
}

impl Snapshot {
    pub(super) fn new(cfg: &InstanceConfig) -> Snapshot {
        Snapshot {
            startup_partitions: cfg.subnet.partitions.clone(),
            settings: SettingsView::of(cfg),
            name: cfg.name.clone(),
            guid: 0,
            lid: 0,
            priority: 0,
            state: SmState::NotActive,
            act_count: 0,
            master_guid: 0,
            master_lid: 0,
            sms: Vec::new(),
            last_sweep: String::new(),
            last_change_sweep: String::new(),
            last_change_sweep_unix_ms: 0,
            sm_key_rejections: 0,
            running: true,
            fabric: None,
            sa: None,
            sa_replica: SaReplica::default(),
            alarms: Vec::new(),
            send_errors: 0,
            clock: None,
            state_since: Duration::ZERO,
            state_reason: String::new(),
            handed_over_to: 0,
        }
    }
}

/// How the local replica's copy of the SA's state relates to the SA this SM's node
/// holds (status and metrics; all zero/false without replication).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SaReplica {
    /// The replica holds SA state and it is exactly what the node serves (the
    /// MASTER's own, a standby's mirror): a takeover from this replica now would keep
    /// every registration and set no ClientReregister.
    pub current: bool,
    /// The replica holds SA state at all (an ibsm SA replicated it).
    pub holds_state: bool,
    /// Wall clock (ms since the Unix epoch) when this member's replica last applied
    /// a change of the SA's tables (0: none since this process started).
    pub changed_unix_ms: u64,
    /// The replica's applied index at that change.
    pub changed_index: u64,
}

/// One event for `Watch`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventRecord {
    /// Wall-clock time, ms since the Unix epoch.
    pub at_unix_ms: u64,
    /// `state`, `priority`, `handover`, `control`, `sweep`, `trap`, `stopped`.
    pub kind: String,
    /// Human-readable line (for `state`: exactly the log line).
    pub text: String,
    /// For `state`: old state.
    pub from: Option<SmState>,
    /// For `state`: new state.
    pub to: Option<SmState>,
}

/// Wall clock, ms since the Unix epoch (0 before it).
pub(super) fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

pub(super) fn record(
    kind: &str,
    text: String,
    from: Option<SmState>,
    to: Option<SmState>,
) -> EventRecord {
    let at_unix_ms = unix_ms();
    EventRecord {
        at_unix_ms,
        kind: kind.to_string(),
        text,
        from,
        to,
    }
}

impl From<ibsm_core::node::CommandError> for CommandError {
    fn from(e: ibsm_core::node::CommandError) -> CommandError {
        match e {
            ibsm_core::node::CommandError::InvalidArgument(s) => CommandError::InvalidArgument(s),
            ibsm_core::node::CommandError::FailedPrecondition(s) => {
                CommandError::FailedPrecondition(s)
            }
        }
    }
}
