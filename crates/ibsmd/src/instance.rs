//! One SM instance: a dedicated OS thread that owns a [`MadDevice`], a
//! [`Transactions`] agent (discovery, PortInfo probes, port configuration, SMInfo
//! reads for `ListSms`) and the sans-IO [`Election`].
//!
//! Why a plain thread and not tokio: umad2sim hands out fake descriptors that epoll
//! cannot watch, and the embedded simulator's device blocks on a condvar; both are
//! driven by `recv(timeout)`. The thread wakes at least every `MAX_WAIT` to read its
//! command channel, so commands are served within that time.
//!
//! Routing is the one long computation (~1.6 s for 48k LIDs): it runs on a second
//! thread per instance (`RoutingWorker`, the configurator's `offload_routing`), so
//! this thread keeps answering SMInfo polls meanwhile. Computed inline, a new master
//! stayed silent for the whole computation: its standbys' polls and discovery queries
//! went unanswered and one of them took MASTER beside it (seen in CI on ibsim).
//!
//! # Who owns which TIDs
//!
//! Three MAD initiators share the device: the election (SMInfo polls and control
//! packets), this runtime's own [`Transactions`] agent (the standby's sweeps, SMInfo
//! reads for `ListSms`) and, while MASTER, the [`SubnetManager`] (with an agent of
//! its own). What arrives is routed by the low 32 bits of the TID, because a Linux
//! kernel rewrites the high 32 bits of requests with its agent id:
//!
//! | low 32 bits of the TID | owner |
//! |---|---|
//! | `0x8000_0000..` | the election (its TIDs start at [`ELECTION_TID_LOW`]) |
//! | `0x7000_0000..0x8000_0000` | the blocking bootstrap queries |
//! | `0x4000_0000..0x5000_0000` | the runtime's agent ([`RUNTIME_TID`]) |
//! | `0x0000_0000..0x4000_0000` | the subnet manager's agent ([`SUBNET_TID`]) |
//!
//! Both agents count their low halves from 1, so on the way out the runtime *folds*
//! each agent's counter into its range (keeps the low 28 or 30 bits and sets the
//! range's base) and on the way back *unfolds* it: the agent's real counter is the
//! one, among the values with those low bits, just below the number of SMPs the agent
//! has sent so far (its counter advances once per transmission). That is exact as long
//! as an answer comes back within 2^28 transmissions of its request, i.e. always. The
//! agents need no change and match responses exactly as before.
//!
//! Requests: SubnGet/SubnSet(SMInfo), trap 144 and TrapRepress go to the election,
//! which answers through us (the response is built from the request, see `wire`).
//! A LID-routed request is answered LID-routed to the SLID it came from
//! ([`ibsm_transport::ReceivedMad::slid`]): that is how plain `sminfo` (it reads the
//! local PortInfo.MasterSMLID and sends a LID-routed SubnGet(SMInfo) there) and a
//! LID-routed trap's TrapRepress find their way back; a umad port cannot route a
//! LID-routed MAD any other way.
//! Other traps go to the subnet manager while MASTER, with their SLID (it represses
//! them to that source, rate-limits them per source and sweeps, held down; trap 144,
//! decoded for the election, asks for the same held-down sweep), else they are
//! repressed here and schedule a heavy discovery. `trap` records on `Watch` are
//! sampled (a few per 10 s, then one with the count held back), so a storm does not
//! flood the subscribers.
//!
//! # Send errors and alarms
//!
//! Every MAD goes out through `device_send`: a device that refuses one (a full send
//! queue, a port going down under umad) costs that MAD only. It is counted
//! ([`Snapshot::send_errors`], `ibsm_mad_send_errors_total`), logged sampled, and its
//! sender's own timeout and retry take over; the thread never ends on it, because a
//! master that stops answering SMInfo is taken for dead by its standbys. What the
//! master's heavy sweep finds that an operator must resolve (duplicate GUIDs, the
//! topology cap) becomes [`Snapshot::alarms`] (GetStatus `alarms`), `alarm` records
//! on `Watch` and the `ibsm_duplicate_guids`/`ibsm_topology_capped` gauges; the list
//! is replaced by every heavy sweep, so it clears once the cause is gone.
//!
//! # Sweeps
//!
//! Not MASTER (DISCOVERING, STANDBY): a *heavy* sweep is a directed-route discovery
//! followed by a *probe* (SubnGet(PortInfo) of every CA port and switch port 0, which
//! tells LIDs, port states and which ports advertise IsSM); a *light* sweep is the
//! probe alone, over the ports the last discovery found. The SM ports found feed
//! [`Election::handle_sweep`], and their SMInfo is read for `ListSms`. Nothing is
//! configured.
//!
//! MASTER: the election's MASTER calls [`SubnetManager::become_master`]: a heavy sweep
//! that assigns LIDs, computes and programs LFTs, PortInfo, P_Keys, SLtoVL/VLArb, walks
//! every link Init -> Armed -> Active and sets ClientReregister; it logs "subnet up"
//! when done. If the discovery this instance made while DISCOVERING is fresh (see
//! `take_fresh_discovery`: seconds old, no trap and no other MASTER since it started),
//! that sweep starts from it ([`SubnetManager::become_master_with_discovery`]) instead
//! of walking the fabric a second time. With replication, a STANDBY that has missed
//! all but one poll of its master (or just went DISCOVERING after losing it) and that
//! no known standby outranks prepares the takeover: discovery and the read-back of
//! every LFT start then, read-only ([`SubnetManager::prepare_takeover`], see
//! `watch_master`), and MASTER continues that sweep instead of starting one. Its light sweeps (every
//! `SubnetConfig::sweep_interval`, and on `Sweep{heavy: false}`), traps and a heavy
//! sweep every `master_heavy_sweep_interval` (0: only on change) follow. The SM ports
//! its heavy sweeps find feed [`Election::handle_sweep`], the SMPs
//! it sends move ActCount ([`SubnetManager::take_smps_sent`]), its phase times go to
//! the metrics (`ibsm_sweep_phase_seconds{phase}`).
//! With replication, the partitions it programs are its start-up ones plus the
//! replicated `partition/` keys (`Fabric/SetPartition` on any member): read at
//! takeover, before the first heavy sweep, and every
//! [`crate::replication::PARTITION_POLL`] while MASTER; a change goes to
//! [`SubnetManager::set_partitions`], whose heavy sweep reprograms the P_Key tables. Leaving MASTER calls
//! [`SubnetManager::stop`] and the standby sweeps resume.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ibsm_core::discovery::{Discovery, DiscoveryResult, DiscoveryToken};
use ibsm_core::election::{
    ControlPacket, DrRoute, Election, ElectionConfig, ElectionError, ElectionEvent, SmPort,
    SmRoute, SmState,
};
use ibsm_core::subnet::{RoutingDone, RoutingJob, SubnetConfig, SubnetEvent, SubnetManager};
use ibsm_core::transactions::{Event, Transactions, TransactionsConfig};
use ibsm_mad::attr::PortState;
use ibsm_mad::{
    AttributeId, CapabilityMask, Method, NodeInfo, PortInfo, Smp, SmpAttribute, SmpRoute, MAD_SIZE,
    PERMISSIVE_LID,
};
use ibsm_transport::{MadDevice, ReceivedMad};
use tokio::sync::{broadcast, oneshot};

use crate::metrics::{Metrics, SweepKind};
use ibsm_core::subnet::storm::LogSampler;

/// High 32 bits of the election's TIDs (restored on responses, see the module doc).
const ELECTION_TID_HIGH: u64 = 0x5300_0000;
/// Low 32 bits of the election's first TID; the transactions agent counts from 1.
pub const ELECTION_TID_LOW: u32 = 0x8000_0000;
/// Low 32 bits of the bootstrap queries' TIDs.
const BOOT_TID_LOW: u32 = 0x7000_0000;
/// Low 32 bits of the local PortInfo reads that watch our own link (`| seq & 0xFFFF`).
const PORT_WATCH_TID_LOW: u32 = 0x7100_0000;
/// How often the instance reads its own port's PortInfo. The SMP goes to the local
/// SMA only (no fabric traffic) and is sent outside every agent, so it does not move
/// ActCount (the stall rule must still see a master whose sweeper hangs). 100 ms, like
/// the standby poll: a cut-off master leaves MASTER before its cable is back.
const PORT_WATCH_INTERVAL: Duration = Duration::from_millis(100);

/// A range of low TID halves on the wire that one agent's counter is folded into
/// (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TidRange {
    /// First low half of the range.
    pub base: u32,
    /// Bits of the agent's counter kept; the range is `base..base + 2^bits`.
    pub bits: u32,
}

/// The runtime's own agent: `0x4000_0000..0x5000_0000`.
pub const RUNTIME_TID: TidRange = TidRange {
    base: 0x4000_0000,
    bits: 28,
};
/// The subnet manager's agent: `0x0000_0000..0x4000_0000`.
pub const SUBNET_TID: TidRange = TidRange { base: 0, bits: 30 };

impl TidRange {
    fn mask(self) -> u32 {
        (1u32 << self.bits) - 1
    }

    /// Whether a low half on the wire is in this range.
    pub fn contains(self, wire: u32) -> bool {
        wire & !self.mask() == self.base
    }

    /// The wire low half for the agent's counter value `low`.
    pub fn fold(self, low: u32) -> u32 {
        self.base | (low & self.mask())
    }

    /// The agent's counter value for a wire low half, given how many SMPs the agent
    /// has sent (its counter is then about `sent + 1`; 2^16 of slack covers the
    /// values it skips).
    pub fn unfold(self, wire: u32, sent: u64) -> u32 {
        let span = 1u64 << self.bits;
        let mask = u64::from(self.mask());
        let horizon = sent.wrapping_add(1 << 16);
        let mut c = (horizon & !mask) | (u64::from(wire) & mask);
        if c > horizon {
            c = c.wrapping_sub(span);
        }
        c as u32
    }
}

/// The low half of a MAD's TID (bytes 12..16 of the common header).
fn wire_tid_low(mad: &[u8; MAD_SIZE]) -> u32 {
    u32::from_be_bytes([mad[12], mad[13], mad[14], mad[15]])
}

fn set_wire_tid_low(mad: &mut [u8; MAD_SIZE], low: u32) {
    mad[12..16].copy_from_slice(&low.to_be_bytes());
}
/// Longest sleep in `recv`, so commands are read at least this often.
const MAX_WAIT: Duration = Duration::from_millis(20);

/// How often the instance looks for a routing result while one is being computed.
const ROUTING_RESULT_POLL: Duration = Duration::from_millis(2);
/// Requests kept for building responses; older ones are dropped.
const MAX_REMEMBERED_REQUESTS: usize = 1024;

/// Send-error and trap-event lines: at most [`STORM_LOG_LINES`] per window, then
/// one line with the count held back.
const STORM_LOG_WINDOW: Duration = Duration::from_secs(10);
/// See [`STORM_LOG_WINDOW`].
const STORM_LOG_LINES: u32 = 20;

/// Default interval of the MASTER's periodic heavy sweep (`--heavy-sweep-interval-s`).
///
/// Why 60 s and not OpenSM's 10 s: OpenSM's 10 s `sweep_interval` is a *light* sweep
/// (heavy only when it sees a change), and so is ours (`--sweep-interval-s`, 2 s:
/// SwitchInfo.PortStateChange of every switch, our port and the SM ports), with traps
/// 128/144 on top. The periodic heavy sweep is only a safety net for what those
/// cannot see (a lost trap about a CA-only change, a port reconfigured by someone
/// else, a lower-priority SM that appeared silently). On a k=32 fat tree a discovery
/// alone takes seconds of SMP traffic, so every 10 s would keep the fabric's VL15
/// busy most of the time; once a minute costs a few percent. 0 turns it off.
pub const DEFAULT_MASTER_HEAVY_SWEEP_INTERVAL: Duration = Duration::from_secs(60);

/// How old the DISCOVERING/STANDBY discovery may be for a new MASTER to start
/// configuring from it instead of discovering again (see `become_master`). At start-up
/// the election decides within a few SMInfo polls of the first sweep.
const FRESH_DISCOVERY_MAX_AGE: Duration = Duration::from_secs(5);

/// How old a prepared takeover (see `prepare_takeover`) may be when MASTER comes for
/// the new master to continue it rather than start over. The election normally
/// decides one SMInfo query timeout (~100 ms) after DISCOVERING.
const PREPARED_TAKEOVER_MAX_AGE: Duration = Duration::from_secs(2);

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
    /// Standby: missed polls in a row before the master is declared dead.
    pub poll_retries: u32,
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
    /// interval, SMP window...). Checked by [`Instance::spawn`].
    pub subnet: SubnetConfig,
    /// The replicated fabric state (`--node-id`): a new MASTER seeds its LIDs and
    /// inherits the LFTs from it, and publishes what it programs after each heavy
    /// sweep. See [`crate::replication`].
    pub replication: Option<Arc<crate::replication::Replication>>,
    /// `--trusted-sm-guid` / `trusted_sm_guids`: `None` trusts every SM (IBA, OpenSM);
    /// otherwise only these port GUIDs and our own (see
    /// `ibsm_core::election::ElectionConfig::trusted_sm_guids`).
    pub trusted_sm_guids: Option<BTreeSet<u64>>,
}

impl InstanceConfig {
    /// Defaults: 100 ms x 3 polling (see the crate doc for the trade-off), SM_Key 1,
    /// light sweep every 2 s (standby probe and the master's configurator alike),
    /// standby heavy sweep every 10 s, master heavy sweep every
    /// [`DEFAULT_MASTER_HEAVY_SWEEP_INTERVAL`].
    pub fn new(name: impl Into<String>, priority: u8) -> InstanceConfig {
        InstanceConfig {
            name: name.into(),
            priority,
            sm_key: 1,
            poll_interval: Duration::from_millis(100),
            poll_retries: 3,
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
    /// Stop the instance (its port stops advertising IsSM).
    Shutdown,
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
    /// Incoming control packets rejected for a wrong SM_Key.
    pub sm_key_rejections: u64,
    /// The thread is running.
    pub running: bool,
    /// What this SM configured as MASTER at its last heavy sweep (`None` before its
    /// first one); kept after it steps down, so it may be stale then.
    pub fabric: Option<Arc<crate::fabric_view::FabricView>>,
    /// The partitions of this SM's start-up configuration (`--partition`, config
    /// file); the MASTER programs them plus the replicated ones.
    pub startup_partitions: Vec<ibsm_core::subnet::Partition>,
    /// Conditions an operator must resolve, from this SM's last heavy sweep as
    /// MASTER (duplicate GUIDs, the topology cap); empty when all is well.
    pub alarms: Vec<String>,
    /// MADs the device refused to send (each a failed MAD, never the end of the
    /// instance thread).
    pub send_errors: u64,
}

impl Snapshot {
    fn new(name: &str, startup_partitions: Vec<ibsm_core::subnet::Partition>) -> Snapshot {
        Snapshot {
            startup_partitions,
            name: name.to_string(),
            guid: 0,
            lid: 0,
            priority: 0,
            state: SmState::NotActive,
            act_count: 0,
            master_guid: 0,
            master_lid: 0,
            sms: Vec::new(),
            last_sweep: String::new(),
            sm_key_rejections: 0,
            running: true,
            fabric: None,
            alarms: Vec::new(),
            send_errors: 0,
        }
    }
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

fn record(kind: &str, text: String, from: Option<SmState>, to: Option<SmState>) -> EventRecord {
    let at_unix_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0);
    EventRecord {
        at_unix_ms,
        kind: kind.to_string(),
        text,
        from,
        to,
    }
}

/// Handle to a running SM instance.
pub struct Instance {
    name: String,
    cmd: Mutex<mpsc::Sender<Command>>,
    status: Arc<RwLock<Snapshot>>,
    events: broadcast::Sender<EventRecord>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for Instance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Instance")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl Instance {
    /// Start an instance on `device`. `keepalive` lives as long as the thread and is
    /// dropped when it ends (an open issm, or a guard that detaches a simulator client):
    /// that is what makes the port stop advertising IsSM.
    pub fn spawn(
        cfg: InstanceConfig,
        device: Box<dyn MadDevice + Send>,
        keepalive: Box<dyn Send>,
    ) -> anyhow::Result<Instance> {
        SubnetManager::new(cfg.subnet.clone())
            .map_err(|e| anyhow::anyhow!("SM {}: subnet configuration: {e}", cfg.name))?;
        let (cmd_tx, cmd_rx) = mpsc::channel();
        let status = Arc::new(RwLock::new(Snapshot::new(
            &cfg.name,
            cfg.subnet.partitions.clone(),
        )));
        let (events, _) = broadcast::channel(256);
        let name = cfg.name.clone();
        let thread_status = Arc::clone(&status);
        let thread_events = events.clone();
        let thread_metrics = Arc::clone(&cfg.metrics);
        let thread = std::thread::Builder::new()
            .name(format!("sm-{name}"))
            .spawn(move || {
                let span = tracing::info_span!("sm", name = %cfg.name);
                let _enter = span.enter();
                let name = cfg.name.clone();
                let result = Runtime::new(
                    cfg,
                    device,
                    cmd_rx,
                    Arc::clone(&thread_status),
                    thread_events.clone(),
                )
                .and_then(Runtime::run);
                if let Err(err) = &result {
                    tracing::error!(%err, "SM instance stopped on error");
                }
                drop(keepalive);
                thread_metrics.set_up(false);
                thread_metrics.set_state(SmState::NotActive);
                if let Ok(mut s) = thread_status.write() {
                    s.running = false;
                    s.state = SmState::NotActive;
                    s.master_guid = 0;
                }
                let why = match result {
                    Ok(()) => format!("SM instance {name} stopped"),
                    Err(e) => format!("SM instance {name} stopped: {e}"),
                };
                let _ = thread_events.send(record("stopped", why, None, None));
            })?;
        Ok(Instance {
            name,
            cmd: Mutex::new(cmd_tx),
            status,
            events,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Instance name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The latest status.
    pub fn status(&self) -> Snapshot {
        match self.status.read() {
            Ok(s) => s.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    /// Events from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<EventRecord> {
        self.events.subscribe()
    }

    /// Queue a command.
    pub fn send(&self, cmd: Command) -> Result<(), CommandError> {
        let tx = self
            .cmd
            .lock()
            .map_err(|_| CommandError::Unavailable(self.name.clone()))?;
        tx.send(cmd)
            .map_err(|_| CommandError::Unavailable(self.name.clone()))
    }

    /// Whether the thread still runs.
    pub fn is_running(&self) -> bool {
        self.status().running
    }

    /// Stop the thread and wait for it.
    pub fn shutdown(&self) {
        let _ = self.send(Command::Shutdown);
        let handle = self.thread.lock().ok().and_then(|mut t| t.take());
        if let Some(h) = handle {
            let _ = h.join();
        }
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// What a transaction of ours is for.
#[derive(Debug)]
/// The watch of our own port's link (see [`PORT_WATCH_INTERVAL`]).
struct PortWatch {
    /// Our port number (NodeInfo.LocalPortNum).
    port: u8,
    /// When the next read goes out.
    next: Duration,
    seq: u16,
    /// The last read found the port Active.
    was_active: bool,
    /// The last read found the port Down.
    down: bool,
}

enum Job {
    Disc(DiscoveryToken),
    Probe(usize),
    PeerSmInfo(u64),
}

/// A port the probe reads: every CA port the discovery reached, and switch port 0.
#[derive(Debug, Clone)]
struct Target {
    port_guid: u64,
    path: Vec<u8>,
    port: u8,
    is_switch: bool,
    info: Option<PortInfo>,
}

#[derive(Debug)]
enum Phase {
    Discover(Box<Discovery>),
    Probe,
}

#[derive(Debug)]
struct Sweep {
    heavy: bool,
    /// [`Runtime::fabric_changes`] when the sweep started: a discovery during which
    /// something changed is not handed to the configurator.
    changes_at_start: u64,
    started: Duration,
    /// When the current phase began (for `ibsm_sweep_phase_seconds`).
    phase_started: Duration,
    phase: Phase,
    outstanding: usize,
    replies: Vec<oneshot::Sender<String>>,
}

struct Runtime {
    cfg: InstanceConfig,
    dev: Box<dyn MadDevice + Send>,
    epoch: Instant,
    cmd_rx: mpsc::Receiver<Command>,
    status: Arc<RwLock<Snapshot>>,
    events: broadcast::Sender<EventRecord>,
    election: Election,
    tx: Transactions<Job>,
    port_guid: u64,
    lid: u16,
    sweep: Option<Sweep>,
    heavy_wanted: bool,
    waiting_replies: Vec<(bool, oneshot::Sender<String>)>,
    next_heavy: Duration,
    next_light: Duration,
    targets: Vec<Target>,
    nodes: usize,
    unreachable: usize,
    /// The MASTER's configurator (idle unless MASTER).
    subnet: SubnetManager,
    /// SMPs the subnet manager initiated, over all masterships (metrics).
    subnet_sent: u64,
    /// `Sweep` commands answered by the subnet manager's next heavy sweep.
    subnet_replies: Vec<oneshot::Sender<String>>,
    /// `Sweep{heavy: false}` commands answered by its next sweep of either kind.
    subnet_light_replies: Vec<oneshot::Sender<String>>,
    /// The last standby discovery: (finished at, `fabric_changes` when it started,
    /// result). A new MASTER configures from it when fresh instead of discovering again.
    last_discovery: Option<(Duration, u64, DiscoveryResult)>,
    /// Counts what may have changed the fabric behind a discovery's back: traps,
    /// heavy sweep requests, another SM in MASTER.
    fabric_changes: u64,
    peers: BTreeMap<u64, PeerView>,
    requests: HashMap<u64, (Smp, u16)>,
    request_order: VecDeque<u64>,
    last_sweep: String,
    /// SMPs the election initiated (SMInfo polls, control packets), for metrics.
    election_sent: u64,
    /// A takeover prepared while DISCOVERING (see `prepare_takeover`):
    /// `fabric_changes` when it started and the replicated guid2lid it used.
    port_watch: PortWatch,
    prepared: Option<(u64, BTreeMap<u64, ibsm_replica::LidRange>)>,
    /// MASTER with replication: when the replicated partitions are read next (see
    /// [`crate::replication::PARTITION_POLL`]).
    next_partition_poll: Duration,
    /// The generation of the replicated partition set last handed to the configurator
    /// (`Replication::replicated_partitions`); None: not since this mastership began.
    partitions_seen: Option<u64>,
    /// MADs that arrived while [`bootstrap`] waited for its answers (another SM's
    /// SubnGet(SMInfo) among them): handled first by [`Runtime::run`].
    backlog: VecDeque<ReceivedMad>,
    /// The SM ports the current prepared takeover's discovery found.
    prepared_sm_ports: Option<Vec<SmPort>>,
    /// Where the configurator's routing computations run.
    routing: RoutingWorker,
    /// See [`Snapshot::alarms`].
    alarms: Vec<String>,
    /// See [`Snapshot::send_errors`].
    send_errors: u64,
    /// Log lines for send errors and per-trap events, sampled under a storm.
    send_error_log: LogSampler,
    trap_event_log: LogSampler,
}

/// A thread that runs the configurator's [`RoutingJob`]s, so the instance thread
/// keeps answering SMInfo (and everything else) while routes are computed.
struct RoutingWorker {
    jobs: mpsc::Sender<RoutingJob>,
    done: mpsc::Receiver<RoutingDone>,
    outstanding: usize,
}

impl RoutingWorker {
    fn spawn(name: &str) -> anyhow::Result<RoutingWorker> {
        let (jobs, job_rx) = mpsc::channel::<RoutingJob>();
        let (done_tx, done) = mpsc::channel();
        std::thread::Builder::new()
            .name(format!("{name}-routing"))
            .spawn(move || {
                // Ends when the instance drops its sender.
                while let Ok(job) = job_rx.recv() {
                    if done_tx.send(job.run()).is_err() {
                        break;
                    }
                }
            })
            .map_err(|e| anyhow::anyhow!("SM {name}: cannot start the routing thread: {e}"))?;
        Ok(RoutingWorker {
            jobs,
            done,
            outstanding: 0,
        })
    }
}

impl Runtime {
    fn new(
        cfg: InstanceConfig,
        mut dev: Box<dyn MadDevice + Send>,
        cmd_rx: mpsc::Receiver<Command>,
        status: Arc<RwLock<Snapshot>>,
        events: broadcast::Sender<EventRecord>,
    ) -> anyhow::Result<Runtime> {
        let epoch = Instant::now();
        let mut backlog = VecDeque::new();
        // Every SMP we send carries the fabric's M_Key (IBA 14.2.4), our own port's
        // start-up reads included: at protection level 2 they need it.
        let m_key = cfg.subnet.m_key.key;
        let (port_guid, lid, local_port) = bootstrap(dev.as_mut(), &mut backlog, m_key)?;
        let mut ecfg = ElectionConfig::new(port_guid);
        ecfg.m_key = m_key;
        ecfg.priority = cfg.priority;
        ecfg.sm_key = cfg.sm_key;
        ecfg.poll_interval = cfg.poll_interval;
        ecfg.poll_retries = cfg.poll_retries;
        ecfg.trusted_sm_guids.clone_from(&cfg.trusted_sm_guids);
        ecfg.tid_base = (ELECTION_TID_HIGH << 32) | u64::from(ELECTION_TID_LOW);
        let mut election = Election::new(ecfg, Duration::ZERO)
            .map_err(|e| anyhow::anyhow!("SM {}: {e}", cfg.name))?;
        // Routing runs on a worker thread: this thread answers SMInfo polls, and a
        // master silent for a whole routing computation looks dead to its standbys.
        let mut subnet_cfg = cfg.subnet.clone();
        subnet_cfg.offload_routing = true;
        let subnet = SubnetManager::new(subnet_cfg)
            .map_err(|e| anyhow::anyhow!("SM {}: subnet configuration: {e}", cfg.name))?;
        let routing = RoutingWorker::spawn(&cfg.name)?;
        election.set_local_lid(lid);
        tracing::info!(
            port_guid = format_args!("{port_guid:#018x}"),
            lid,
            priority = cfg.priority,
            "SM instance started in DISCOVERING"
        );
        Ok(Runtime {
            dev,
            epoch,
            cmd_rx,
            status,
            events,
            election,
            tx: {
                let mut tx = Transactions::new(TransactionsConfig::default());
                tx.set_m_keys(&[m_key]);
                tx
            },
            port_guid,
            lid,
            sweep: None,
            heavy_wanted: true,
            waiting_replies: Vec::new(),
            next_heavy: cfg.heavy_sweep_interval,
            next_light: cfg.light_sweep_interval,
            targets: Vec::new(),
            nodes: 0,
            unreachable: 0,
            subnet,
            subnet_sent: 0,
            subnet_replies: Vec::new(),
            subnet_light_replies: Vec::new(),
            last_discovery: None,
            fabric_changes: 0,
            peers: BTreeMap::new(),
            requests: HashMap::new(),
            request_order: VecDeque::new(),
            last_sweep: String::new(),
            election_sent: 0,
            prepared: None,
            next_partition_poll: Duration::ZERO,
            partitions_seen: None,
            backlog,
            prepared_sm_ports: None,
            routing,
            alarms: Vec::new(),
            send_errors: 0,
            send_error_log: LogSampler::new(STORM_LOG_WINDOW, STORM_LOG_LINES),
            trap_event_log: LogSampler::new(STORM_LOG_WINDOW, STORM_LOG_LINES),
            port_watch: PortWatch {
                port: local_port,
                next: Duration::ZERO,
                seq: 0,
                was_active: false,
                down: false,
            },
            cfg,
        })
    }

    fn now(&self) -> Duration {
        self.epoch.elapsed()
    }

    fn run(mut self) -> anyhow::Result<()> {
        let now = self.now();
        while let Some(r) = self.backlog.pop_front() {
            self.incoming(now, &r.mad, r.slid)?;
            self.pump(now)?;
        }
        loop {
            loop {
                match self.cmd_rx.try_recv() {
                    Ok(Command::Shutdown) | Err(mpsc::TryRecvError::Disconnected) => {
                        tracing::info!("SM instance shutting down");
                        return Ok(());
                    }
                    Ok(cmd) => self.handle_command(cmd),
                    Err(mpsc::TryRecvError::Empty) => break,
                }
            }
            let now = self.now();
            while let Ok(done) = self.routing.done.try_recv() {
                self.routing.outstanding = self.routing.outstanding.saturating_sub(1);
                self.subnet.handle_routing_done(now, done);
            }
            if self.tx.poll_timeout().is_some_and(|t| t <= now) {
                self.tx.handle_timeout(now);
            }
            if self.election.poll_timeout().is_some_and(|t| t <= now) {
                self.election.handle_timeout(now);
            }
            if self.subnet.poll_timeout().is_some_and(|t| t <= now) {
                self.subnet.handle_timeout(now);
            }
            if self.subnet.is_active() {
                if !self.subnet.is_sweeping() && now >= self.next_heavy {
                    self.schedule_master_heavy(now);
                    self.subnet.start_heavy_sweep(now);
                }
            } else if self.sweep.is_none() && !self.subnet.is_preparing() {
                // (A prepared takeover has the fabric to itself until MASTER.)
                if self.heavy_wanted || now >= self.next_heavy {
                    self.start_sweep(now, true);
                } else if now >= self.next_light || !self.waiting_replies.is_empty() {
                    self.start_sweep(now, false);
                }
            }
            self.poll_partitions(now);
            self.watch_local_port(now)?;
            self.pump(now)?;
            if self.watch_master(now) {
                self.pump(now)?;
            }
            self.publish();
            let now = self.now();
            let mut until = (now + MAX_WAIT).min(self.port_watch.next);
            if self.routing.outstanding > 0 {
                // The result comes on a channel, not the device: look again soon.
                until = until.min(now + ROUTING_RESULT_POLL);
            }
            for t in [
                self.tx.poll_timeout(),
                self.election.poll_timeout(),
                self.subnet.poll_timeout(),
            ]
            .into_iter()
            .flatten()
            {
                until = until.min(t);
            }
            if self.subnet.is_active() {
                if !self.subnet.is_sweeping() {
                    until = until.min(self.next_heavy);
                }
                if self.cfg.replication.is_some() {
                    until = until.min(self.next_partition_poll);
                }
            } else if self.sweep.is_none() && !self.subnet.is_preparing() {
                until = until.min(self.next_light).min(self.next_heavy);
            }
            if let Some(r) = self.dev.recv(until.saturating_sub(now))? {
                let now = self.now();
                self.incoming(now, &r.mad, r.slid)?;
                // Drain what else is already there before the next round of timers.
                while let Some(r) = self.dev.recv(Duration::ZERO)? {
                    self.incoming(now, &r.mad, r.slid)?;
                    self.pump(now)?;
                }
            }
        }
    }

    // ----- commands --------------------------------------------------------------

    fn handle_command(&mut self, cmd: Command) {
        let now = self.now();
        match cmd {
            Command::SetPriority { priority, reply } => {
                let r = self
                    .election
                    .set_priority(now, priority)
                    .map_err(|e| CommandError::InvalidArgument(e.to_string()));
                let _ = reply.send(r);
            }
            Command::Handover { to, reply } => {
                let r = self.handover(now, to);
                let _ = reply.send(r);
            }
            Command::SendControl {
                packet,
                guid,
                reply,
            } => {
                let r = self
                    .election
                    .send_control(now, guid, packet)
                    .map_err(|e| match e {
                        ElectionError::UnknownPeer { guid } => CommandError::InvalidArgument(
                            format!("unknown GUID {guid:#018x}: not an SM port this instance found in its last sweep"),
                        ),
                        ElectionError::NotMaster { .. } => {
                            CommandError::FailedPrecondition(e.to_string())
                        }
                        other => CommandError::InvalidArgument(other.to_string()),
                    });
                let _ = reply.send(r);
            }
            Command::Sweep { heavy: true, reply } if self.subnet.is_active() => {
                self.subnet.start_heavy_sweep(now);
                self.subnet_replies.push(reply);
            }
            Command::Sweep {
                heavy: false,
                reply,
            } if self.subnet.is_active() => {
                // A light sweep (SwitchInfo of every switch, the SM ports); a sweep in
                // progress answers for it, and a change it sees starts a heavy one.
                self.subnet.start_light_sweep(now);
                self.subnet_light_replies.push(reply);
            }
            Command::Sweep { heavy, reply } => {
                if heavy {
                    self.heavy_wanted = true;
                }
                self.waiting_replies.push((heavy, reply));
            }
            Command::Shutdown => {}
        }
    }

    fn handover(&mut self, now: Duration, to: u64) -> Result<u64, CommandError> {
        let state = self.election.state();
        if state != SmState::Master {
            return Err(CommandError::FailedPrecondition(format!(
                "this SM is {state}; only the MASTER hands over"
            )));
        }
        // Rank every SM that could take over (STANDBY, or still DISCOVERING right after
        // it started), so "the best standby" never silently picks a lower one just
        // because the best one has not settled yet: that one is refused as not ready.
        // An SM outside trusted_sm_guids is never a candidate.
        if to != 0 && !self.election.is_trusted(to) {
            return Err(CommandError::FailedPrecondition(format!(
                "SM {to:#018x} is not a trusted SM (not in trusted_sm_guids): no HANDOVER to it"
            )));
        }
        let candidates: Vec<PeerView> = self
            .peers
            .values()
            .filter(|p| !p.is_self && handover_candidate(p.state))
            .filter(|p| self.election.is_trusted(p.guid))
            .cloned()
            .collect();
        let rank = |p: &PeerView| (p.priority, std::cmp::Reverse(p.guid));
        let Some(best) = candidates.iter().max_by_key(|p| rank(p)).cloned() else {
            return Err(CommandError::FailedPrecondition(format!(
                "no trusted SM in STANDBY to hand over to (known SMs: {})",
                self.peers.len().saturating_sub(1)
            )));
        };
        if best.state != Some(SmState::Standby) {
            return Err(CommandError::FailedPrecondition(format!(
                "the best standby {:#018x} (priority {}) is still DISCOVERING; retry once it is STANDBY",
                best.guid, best.priority
            )));
        }
        let target = if to == 0 {
            best
        } else {
            let Some(t) = self.peers.get(&to).filter(|p| !p.is_self).cloned() else {
                return Err(CommandError::InvalidArgument(format!(
                    "unknown GUID {to:#018x}: not an SM this instance knows"
                )));
            };
            if t.state != Some(SmState::Standby) {
                return Err(CommandError::FailedPrecondition(format!(
                    "SM {to:#018x} is not in STANDBY"
                )));
            }
            if best.guid != t.guid {
                return Err(CommandError::FailedPrecondition(format!(
                    "SM {to:#018x} (priority {}) is not the best standby: {:#018x} (priority {}) outranks it and would take over; raise the target's priority first",
                    t.priority, best.guid, best.priority
                )));
            }
            t
        };
        // HANDOVER goes out now; the election completes it on ACKNOWLEDGE or a status-0
        // answer and then advertises a priority below the target's until the next
        // SetPriority, so the move sticks (it refuses a target that no priority of ours
        // ranks below: priority 0 with a higher GUID).
        self.election
            .handover_to(now, target.guid)
            .map_err(|e| match e {
                ElectionError::UnknownPeer { .. } => CommandError::InvalidArgument(e.to_string()),
                other => CommandError::FailedPrecondition(other.to_string()),
            })?;
        let _ = self.events.send(record(
            "handover",
            format!("planned handover to {:#018x}: HANDOVER sent", target.guid),
            None,
            None,
        ));
        Ok(target.guid)
    }

    // ----- wire ------------------------------------------------------------------

    /// One MAD from the device; `slid` is the LRH SLID it came from, where the answer
    /// to a LID-routed request goes (plain `sminfo` asks the MasterSMLID LID-routed).
    fn incoming(&mut self, now: Duration, mad: &[u8; MAD_SIZE], slid: u16) -> anyhow::Result<()> {
        let mut smp = match Smp::decode(mad) {
            Ok(s) => s,
            Err(err) => {
                tracing::debug!(%err, "dropping undecodable MAD");
                return Ok(());
            }
        };
        // Where a LID-routed request's answer goes: the packet's SLID. Directed-route
        // requests are answered along their return path and need no LID.
        let reply_lid = match smp.route {
            SmpRoute::Lid if slid != 0 && slid != PERMISSIVE_LID => slid,
            _ => 0,
        };
        if smp.route == SmpRoute::Lid && smp.method.0 & 0x80 == 0 {
            tracing::debug!(slid, method = ?smp.method, attr = ?smp.attr_id, "LID-routed request");
        }
        let is_resp = smp.method.0 & 0x80 != 0;
        if is_resp {
            let low = smp.tid as u32;
            if low >= ELECTION_TID_LOW {
                smp.tid = (ELECTION_TID_HIGH << 32) | u64::from(low);
                if let Some(msg) = crate::wire::decode_for_election(&smp) {
                    self.note_sm_info(&msg);
                    let from = crate::wire::arrival_route(&smp, 0);
                    self.election.handle_message(now, from, msg);
                }
            } else if low & 0xFFFF_0000 == PORT_WATCH_TID_LOW {
                self.local_port_read(now, &smp);
            } else if RUNTIME_TID.contains(low) {
                let mut m = *mad;
                set_wire_tid_low(&mut m, RUNTIME_TID.unfold(low, self.tx.counters().sent));
                self.tx.handle_incoming(now, &m);
            } else if SUBNET_TID.contains(low)
                && (self.subnet.is_active() || self.subnet.is_preparing())
            {
                let mut m = *mad;
                let sent = self.subnet.metrics().smps_sent;
                set_wire_tid_low(&mut m, SUBNET_TID.unfold(low, sent));
                self.subnet.handle_incoming(now, &m);
            }
            return Ok(());
        }
        match crate::wire::decode_for_election(&smp) {
            Some(msg) => {
                if smp.method == Method::TRAP_REPRESS {
                    let low = smp.tid as u32;
                    smp.tid = (ELECTION_TID_HIGH << 32) | u64::from(low);
                    let msg = crate::wire::decode_for_election(&smp).unwrap_or(msg);
                    self.election
                        .handle_message(now, crate::wire::arrival_route(&smp, 0), msg);
                    return Ok(());
                }
                self.note_sm_info(&msg);
                let hint = match &msg {
                    _ if reply_lid != 0 => reply_lid,
                    ibsm_core::election::SmInfoMsg::Trap144 { issuer_lid, .. } => *issuer_lid,
                    _ => 0,
                };
                if matches!(msg, ibsm_core::election::SmInfoMsg::Trap144 { .. }) {
                    self.fabric_changes += 1;
                    if self.subnet.is_active() {
                        // A port's capabilities changed (an SM appeared...): re-read
                        // them, held down like every trap-triggered sweep.
                        self.subnet.request_trap_sweep(now, 144);
                    }
                    self.trap_event(now, format!("trap 144 from LID {hint}"));
                }
                self.remember_request(smp, hint);
                let from = crate::wire::arrival_route(&smp, hint);
                self.election.handle_message(now, from, msg);
            }
            None if smp.method == Method::TRAP && self.subnet.is_active() => {
                // The configurator represses it (to the SLID it came from), rate-limits
                // it per source and sweeps, held down (trap 128: a link changed).
                self.trap_event(
                    now,
                    format!(
                        "trap received (attribute {:?}) from LID {slid}: handled by the master",
                        smp.attr_id
                    ),
                );
                self.subnet.handle_incoming_from(now, mad, slid);
            }
            None if smp.method == Method::TRAP => {
                // Another trap (link state change...): acknowledge it and re-discover.
                let repress = Smp {
                    method: Method::TRAP_REPRESS,
                    ..smp.response()
                };
                let _ = self.send_smp(&repress, Some(reply_lid));
                self.trap_event(
                    now,
                    format!(
                        "trap received (attribute {:?}): heavy sweep scheduled",
                        smp.attr_id
                    ),
                );
                self.heavy_wanted = true;
                self.fabric_changes += 1;
            }
            None => {
                tracing::trace!(attr = ?smp.attr_id, method = ?smp.method, "ignoring request");
            }
        }
        Ok(())
    }

    /// A `trap` record for `Watch`, sampled: a storm of traps must not flood the
    /// subscribers; the count held back goes out as one record.
    fn trap_event(&mut self, now: Duration, text: String) {
        if let Some(n) = self.trap_event_log.take_suppressed(now) {
            let _ = self.events.send(record(
                "trap",
                format!("{n} more trap(s) not reported (trap storm)"),
                None,
                None,
            ));
        }
        if self.trap_event_log.allow(now) {
            tracing::info!("{text}");
            let _ = self.events.send(record("trap", text, None, None));
        }
    }

    fn remember_request(&mut self, smp: Smp, hint: u16) {
        if self.requests.insert(smp.tid, (smp, hint)).is_none() {
            self.request_order.push_back(smp.tid);
        }
        while self.request_order.len() > MAX_REMEMBERED_REQUESTS {
            if let Some(old) = self.request_order.pop_front() {
                self.requests.remove(&old);
            }
        }
    }

    /// Record the SMInfo an SM reported about itself (answers and control payloads).
    fn note_sm_info(&mut self, msg: &ibsm_core::election::SmInfoMsg) {
        use ibsm_core::election::SmInfoMsg as M;
        let info = match msg {
            M::GetResp {
                info, status: 0, ..
            }
            | M::Set { info, .. } => info,
            _ => return,
        };
        if info.guid == 0 || info.guid == self.port_guid {
            return;
        }
        if info.sm_state == SmState::Master {
            // Another master may be configuring the fabric: our discovery gets stale.
            self.fabric_changes += 1;
        }
        let entry = self.peers.entry(info.guid).or_insert(PeerView {
            guid: info.guid,
            lid: 0,
            priority: 0,
            state: None,
            act_count: 0,
            is_self: false,
            trusted: true,
        });
        entry.priority = info.priority;
        entry.state = Some(info.sm_state);
        entry.act_count = info.act_count;
    }

    fn send_smp(&mut self, smp: &Smp, dlid: Option<u16>) -> anyhow::Result<()> {
        let bytes = smp.encode();
        self.device_send(dlid, &bytes);
        Ok(())
    }

    /// Put one MAD on the device (LID-routed to `dlid` when given and not 0). A send
    /// error is one failed MAD: counted, logged (sampled under a storm), and left to
    /// the sender's own timeout and retry; it never ends the instance thread, which
    /// must keep answering SMInfo. Returns whether the device took it.
    fn device_send(&mut self, dlid: Option<u16>, mad: &[u8; MAD_SIZE]) -> bool {
        let r = match dlid {
            Some(l) if l != 0 => self.dev.send_lid(l, mad),
            _ => self.dev.send(mad),
        };
        let Err(err) = r else { return true };
        self.send_errors = self.send_errors.saturating_add(1);
        self.cfg.metrics.mad_send_error();
        let now = self.now();
        if let Some(n) = self.send_error_log.take_suppressed(now) {
            tracing::warn!(suppressed = n, "{n} more MAD send error(s) not logged");
        }
        if self.send_error_log.allow(now) {
            tracing::warn!(
                %err,
                dlid = dlid.unwrap_or(0),
                class = mad[1],
                method = mad[3],
                total = self.send_errors,
                "MAD send failed: counted as a failed MAD"
            );
        }
        false
    }

    /// Move everything along until nothing changes: transactions events into the sweep,
    /// the sweep's requests into the agent, the election's transmits onto the wire,
    /// events into logs and the broadcast.
    fn pump(&mut self, now: Duration) -> anyhow::Result<()> {
        loop {
            let mut progressed = false;
            while let Some(ev) = self.tx.poll_event() {
                progressed = true;
                self.on_tx_event(now, ev);
            }
            progressed |= self.advance_sweep(now);
            while let Some(mut mad) = self.tx.poll_transmit() {
                progressed = true;
                let low = RUNTIME_TID.fold(wire_tid_low(&mad));
                set_wire_tid_low(&mut mad, low);
                self.device_send(None, &mad);
                self.election.handle_smps_sent(1);
            }
            while let Some(out) = self.subnet.poll_transmit() {
                progressed = true;
                let mut mad = out.mad;
                // TrapRepress carries the trap's TID; requests carry the agent's.
                if mad[3] != Method::TRAP_REPRESS.0 {
                    let low = SUBNET_TID.fold(wire_tid_low(&mad));
                    set_wire_tid_low(&mut mad, low);
                }
                self.device_send(out.dlid, &mad);
            }
            let n = self.subnet.take_smps_sent();
            if n > 0 {
                self.election.handle_smps_sent(n);
                self.subnet_sent = self.subnet_sent.saturating_add(u64::from(n));
            }
            while let Some(ev) = self.subnet.poll_event() {
                progressed = true;
                self.on_subnet_event(now, ev);
            }
            while let Some(job) = self.subnet.poll_routing_job() {
                progressed = true;
                match self.routing.jobs.send(job) {
                    Ok(()) => self.routing.outstanding += 1,
                    Err(mpsc::SendError(job)) => {
                        tracing::error!("routing thread gone: computing routes inline");
                        let done = job.run();
                        self.subnet.handle_routing_done(now, done);
                    }
                }
            }
            while let Some(t) = self.election.poll_transmit() {
                progressed = true;
                self.transmit_election(t)?;
            }
            while let Some(ev) = self.election.poll_event() {
                progressed = true;
                self.on_election_event(now, ev);
            }
            if !progressed {
                return Ok(());
            }
        }
    }

    fn transmit_election(&mut self, t: ibsm_core::election::Transmit) -> anyhow::Result<()> {
        if t.msg.is_response() {
            let Some((req, hint)) = self.requests.remove(&t.msg.tid()) else {
                tracing::debug!(
                    tid = t.msg.tid(),
                    "response to a request no longer remembered"
                );
                return Ok(());
            };
            let Some(resp) = crate::wire::encode_response(&req, &t.msg) else {
                return Ok(());
            };
            let dlid = match (&req.route, &t.dest) {
                (SmpRoute::Lid, SmRoute::Lid(l)) if *l != 0 => Some(*l),
                (SmpRoute::Lid, _) if hint != 0 => Some(hint),
                _ => None,
            };
            return self.send_smp(&resp, dlid);
        }
        let Some((smp, dlid)) = crate::wire::encode_request(&t.dest, &t.msg) else {
            tracing::warn!(dest = %t.dest, "cannot encode the election's request");
            return Ok(());
        };
        self.send_smp(&smp, dlid)?;
        self.election.handle_smps_sent(1);
        self.election_sent = self.election_sent.saturating_add(1);
        Ok(())
    }

    fn on_election_event(&mut self, now: Duration, ev: ElectionEvent) {
        let text = ev.to_string();
        let rec = match &ev {
            ElectionEvent::StateChanged { from, to, .. } => {
                tracing::info!("{text}");
                self.cfg.metrics.set_state(*to);
                if *to == SmState::Master && !self.subnet.is_active() {
                    // The configurator takes over the sweeps; a standby sweep in
                    // progress is dropped and its callers wait for the master's.
                    if let Some(s) = self.sweep.take() {
                        self.subnet_replies.extend(s.replies);
                    }
                    self.subnet_replies
                        .extend(self.waiting_replies.drain(..).map(|(_, r)| r));
                    self.schedule_master_heavy(now);
                    tracing::info!("master: configuring the subnet (heavy sweep)");
                    self.check_prepared(now);
                    if let Some(r) = &self.cfg.replication {
                        crate::replication::take_over(
                            r,
                            &mut self.subnet,
                            self.port_guid,
                            &self.cfg.subnet.partitions,
                            now,
                        );
                        self.next_partition_poll =
                            now.saturating_add(crate::replication::PARTITION_POLL);
                    }
                    if self.subnet.is_preparing() {
                        // Continue the prepared sweep; the standby discovery is older.
                        self.last_discovery = None;
                        self.subnet.become_master(now);
                    } else {
                        match self.take_fresh_discovery(now) {
                            Some(d) => self.subnet.become_master_with_discovery(now, d),
                            None => self.subnet.become_master(now),
                        }
                    }
                } else if *to == SmState::Discovering && *from == SmState::Standby {
                    let _ = self.prepare_takeover(now);
                } else if *to != SmState::Master && self.subnet.is_preparing() {
                    tracing::info!(state = %to, "prepared takeover dropped: another SM leads");
                    self.subnet.stop();
                    self.prepared = None;
                }
                if *from == SmState::Master && *to != SmState::Master && self.subnet.is_active() {
                    tracing::info!("no longer master: subnet configuration stops");
                    self.subnet.stop();
                    if let Some(r) = &self.cfg.replication {
                        r.stop_master();
                    }
                    self.waiting_replies
                        .extend(self.subnet_replies.drain(..).map(|r| (true, r)));
                    self.waiting_replies
                        .extend(self.subnet_light_replies.drain(..).map(|r| (false, r)));
                    self.heavy_wanted = true;
                }
                record("state", text, Some(*from), Some(*to))
            }
            ElectionEvent::DiscoveryNeeded => {
                // Not a fabric change: a prepared takeover stays valid, and its
                // discovery answers this (now if it is done: it started when the
                // master went silent; else its PreparedDiscovery event will); without
                // one, our own sweep does.
                if self.subnet.is_preparing() {
                    if let Some(ports) = self.prepared_sm_ports.clone() {
                        self.sm_ports_found(now, &ports);
                    }
                } else if !self.subnet.is_active() {
                    self.heavy_wanted = true;
                }
                tracing::info!("{text}");
                record("sweep", text, None, None)
            }
            ElectionEvent::HeavySweepRequested => {
                self.fabric_changes += 1;
                if self.subnet.is_active() {
                    self.subnet.start_heavy_sweep(now);
                } else {
                    self.heavy_wanted = true;
                }
                tracing::info!("{text}");
                record("sweep", text, None, None)
            }
            ElectionEvent::PriorityChanged { .. } => {
                tracing::info!("{text}");
                record("priority", text, None, None)
            }
            ElectionEvent::HandoverStarted { .. } | ElectionEvent::HandoverFailed { .. } => {
                tracing::info!("{text}");
                record("handover", text, None, None)
            }
            ElectionEvent::ControlAnswered { .. } | ElectionEvent::ControlRejected { .. } => {
                tracing::info!("{text}");
                record("control", text, None, None)
            }
            ElectionEvent::RemoteSmKeyMismatch { .. } => {
                tracing::warn!("{text}");
                record("control", text, None, None)
            }
            ElectionEvent::UntrustedSmSeen { .. } | ElectionEvent::RogueMaster { .. } => {
                // Logged with structured fields by the election; this is the event feed.
                self.cfg.metrics.count_untrusted_seen();
                record("trust", text, None, None)
            }
        };
        let _ = self.events.send(rec);
    }

    // ----- sweeps ----------------------------------------------------------------

    fn start_sweep(&mut self, now: Duration, heavy: bool) {
        let heavy = heavy || self.targets.is_empty();
        let mut replies = Vec::new();
        let waiting = std::mem::take(&mut self.waiting_replies);
        for (wants_heavy, reply) in waiting {
            if heavy || !wants_heavy {
                replies.push(reply);
            } else {
                self.waiting_replies.push((wants_heavy, reply));
            }
        }
        if heavy {
            self.heavy_wanted = false;
            self.next_heavy = now + self.cfg.heavy_sweep_interval;
        }
        self.next_light = now + self.cfg.light_sweep_interval;
        self.cfg.metrics.sweep_started(if heavy {
            SweepKind::Heavy
        } else {
            SweepKind::Light
        });
        // The configurator's own discovery settings, so a new MASTER can start from
        // this discovery (see `take_fresh_discovery`).
        let phase = if heavy {
            Phase::Discover(Box::new(Discovery::new(self.cfg.subnet.discovery.clone())))
        } else {
            Phase::Probe
        };
        self.sweep = Some(Sweep {
            heavy,
            changes_at_start: self.fabric_changes,
            started: now,
            phase_started: now,
            phase,
            outstanding: 0,
            replies,
        });
        if !heavy {
            self.launch_probe(now);
        }
    }

    fn launch_probe(&mut self, now: Duration) {
        let mut n = 0;
        for (i, t) in self.targets.iter().enumerate() {
            let attr_mod = if t.is_switch { 0 } else { u32::from(t.port) };
            match Smp::try_get_dr(&t.path, AttributeId::PORT_INFO, attr_mod, 0) {
                Ok(smp) => {
                    self.tx.submit(now, smp, Job::Probe(i));
                    n += 1;
                }
                Err(err) => tracing::warn!(%err, "cannot address a port"),
            }
        }
        if let Some(s) = self.sweep.as_mut() {
            s.phase = Phase::Probe;
            s.outstanding = n;
        }
    }

    fn on_tx_event(&mut self, now: Duration, ev: Event<Job>) {
        let (job, smp) = match ev {
            Event::Response { token, smp } => (token, Some(smp)),
            Event::Failed { token, .. } => (token, None),
            Event::Unsolicited(_) => return,
        };
        match job {
            Job::Disc(token) => {
                if let Some(Sweep {
                    phase: Phase::Discover(d),
                    ..
                }) = self.sweep.as_mut()
                {
                    match &smp {
                        Some(smp) => d.handle_response(token, smp),
                        None => d.handle_failure(token, "no response after retries"),
                    }
                }
            }
            Job::Probe(i) => {
                let info = smp
                    .filter(|s| s.status == 0)
                    .and_then(|s| s.attribute::<PortInfo>().ok());
                if let Some(t) = self.targets.get_mut(i) {
                    t.info = info;
                }
                self.finish_one(now, Phase::Probe);
            }
            Job::PeerSmInfo(guid) => {
                if let Some(smp) = smp.filter(|s| s.status == 0) {
                    if let Some(msg) = crate::wire::decode_for_election(&smp) {
                        if matches!(&msg, ibsm_core::election::SmInfoMsg::GetResp { info, .. } if info.guid == guid)
                        {
                            self.note_sm_info(&msg);
                        }
                    }
                }
            }
        }
    }

    fn finish_one(&mut self, now: Duration, phase: Phase) {
        let Some(s) = self.sweep.as_mut() else {
            return;
        };
        if std::mem::discriminant(&s.phase) != std::mem::discriminant(&phase) {
            return;
        }
        s.outstanding = s.outstanding.saturating_sub(1);
        if s.outstanding > 0 {
            return;
        }
        if matches!(phase, Phase::Probe) {
            self.probe_done(now);
        }
    }

    /// Discovery progress; returns true if it did something.
    fn advance_sweep(&mut self, now: Duration) -> bool {
        let Some(Sweep {
            phase: Phase::Discover(d),
            ..
        }) = self.sweep.as_mut()
        else {
            return false;
        };
        let mut progressed = false;
        while self.tx.queued() < self.tx.config().window {
            let Some(token) = d.poll_request() else {
                break;
            };
            progressed = true;
            match token.to_smp() {
                Ok(smp) => self.tx.submit(now, smp, Job::Disc(token)),
                Err(err) => d.handle_failure(token, &err.to_string()),
            }
        }
        if !d.is_done() {
            return progressed;
        }
        let Some(s) = self.sweep.as_mut() else {
            return progressed;
        };
        let Phase::Discover(d) = std::mem::replace(&mut s.phase, Phase::Probe) else {
            return progressed;
        };
        let result = d.into_result();
        let changes_at_start = s.changes_at_start;
        self.phase_done(now, "discover");
        self.discovered(&result);
        self.last_discovery = Some((now, changes_at_start, result));
        self.launch_probe(now);
        if self.sweep.as_ref().is_some_and(|s| s.outstanding == 0) {
            self.probe_done(now);
        }
        true
    }

    /// Turn a discovery into the probe's target list.
    fn discovered(&mut self, result: &DiscoveryResult) {
        let topo = &result.topology;
        let mut targets = Vec::new();
        for (idx, node) in topo.iter() {
            let Some(path) = result.path(idx) else {
                continue;
            };
            if node.is_switch() {
                targets.push(Target {
                    port_guid: node.port(0).map_or(node.node_guid, |p| p.port_guid),
                    path: path.to_vec(),
                    port: 0,
                    is_switch: true,
                    info: None,
                });
                continue;
            }
            // The CA port this path enters: ours for the local node, else the one
            // whose cable comes from the last switch on the path.
            let port = if result.local.map(|(n, _)| n) == Some(idx) {
                result.local.map(|(_, p)| p)
            } else {
                node.physical_ports().find_map(|(num, p)| {
                    let (rn, rp) = p.remote?;
                    let mut via = result.path(rn)?.to_vec();
                    via.push(rp);
                    (via == path).then_some(num)
                })
            };
            let Some(port) = port else {
                continue;
            };
            let Some(p) = node.port(port) else {
                continue;
            };
            targets.push(Target {
                port_guid: p.port_guid,
                path: path.to_vec(),
                port,
                is_switch: false,
                info: None,
            });
        }
        self.nodes = topo.len();
        self.unreachable = result.unreachable.len();
        self.targets = targets;
    }

    /// The probe finished: feed the election, read SMInfo of the SM ports.
    fn probe_done(&mut self, now: Duration) {
        self.phase_done(now, "probe");
        let mut ports = Vec::new();
        for t in &self.targets {
            let Some(pi) = &t.info else {
                continue;
            };
            if t.port_guid == self.port_guid && pi.lid != self.lid {
                self.lid = pi.lid;
                self.election.set_local_lid(pi.lid);
            }
            if !t.is_switch && pi.capability_mask.0 & CapabilityMask::IS_SM != 0 {
                ports.push(SmPort {
                    guid: t.port_guid,
                    route: SmRoute::Directed(DrRoute::new(&t.path)),
                    lid: (pi.lid != 0).then_some(pi.lid),
                });
            }
        }
        self.sm_ports_found(now, &ports);
        if self.sweep.as_ref().is_some_and(|s| s.outstanding == 0) {
            self.sweep_done(now);
        }
    }

    /// A sweep (ours or the master's) found these SM ports: keep `peers` to them,
    /// read their SMInfo for `ListSms`, and tell the election.
    fn sm_ports_found(&mut self, now: Duration, ports: &[SmPort]) {
        let present: BTreeSet<u64> = ports.iter().map(|p| p.guid).collect();
        self.peers
            .retain(|g, _| present.contains(g) && *g != self.port_guid);
        for p in ports {
            if p.guid == self.port_guid {
                continue;
            }
            let entry = self.peers.entry(p.guid).or_insert(PeerView {
                guid: p.guid,
                lid: 0,
                priority: 0,
                state: None,
                act_count: 0,
                is_self: false,
                trusted: true,
            });
            entry.lid = p.lid.unwrap_or(0);
            if let SmRoute::Directed(dr) = &p.route {
                let hops = dr.initial_path.get(1..).unwrap_or(&[]);
                if let Ok(smp) = Smp::try_get_dr(hops, AttributeId::SM_INFO, 0, 0) {
                    self.tx.submit(now, smp, Job::PeerSmInfo(p.guid));
                }
            }
        }
        self.election.handle_sweep(now, ports);
    }

    /// What the MASTER's configurator reports.
    fn on_subnet_event(&mut self, now: Duration, ev: SubnetEvent) {
        match ev {
            SubnetEvent::SubnetUp { phases, report } => {
                let text = format!(
                    "subnet up: {} nodes ({} switches), {} LIDs, LinearFDBTop {:#06x}, {} SMPs, {:.3} s",
                    report.nodes,
                    report.switches,
                    report.lids,
                    report.lft_top,
                    report.smps,
                    phases.total().as_secs_f64()
                );
                let _ = self.events.send(record("sweep", text, None, None));
            }
            SubnetEvent::SweepDone {
                kind: SweepKind::Heavy,
                phases,
                report,
            } => {
                self.cfg.metrics.sweep_started(SweepKind::Heavy);
                let m = &self.cfg.metrics;
                m.set_sweep_phase("discover", phases.discovery);
                m.set_sweep_phase("lid", phases.lids);
                m.set_sweep_phase("routing", phases.routing);
                m.set_sweep_phase("distribution", phases.distribution);
                m.set_sweep_phase("activation", phases.activation);
                // Our own LID as the configurator assigned it.
                let local_lid = self.subnet.last_discovery().and_then(|res| {
                    let (n, p) = res.local?;
                    res.topology.node(n)?.port(p).map(|p| p.lid)
                });
                if let Some(lid) = local_lid.filter(|l| *l != 0 && *l != self.lid) {
                    self.lid = lid;
                    self.election.set_local_lid(lid);
                }
                self.nodes = report.nodes;
                self.unreachable = report.unreachable;
                self.alarms = report.duplicates.iter().map(|d| d.to_string()).collect();
                self.alarms.extend(report.cap.map(|c| c.to_string()));
                self.cfg
                    .metrics
                    .set_alarms(report.duplicates.len() as u64, report.cap.is_some());
                if let Some(r) = &self.cfg.replication {
                    r.publish(crate::replication::record_of(&self.subnet));
                }
                // The partitions this sweep programmed (start-up plus replicated).
                let view = crate::fabric_view::FabricView::of(
                    &self.subnet,
                    self.subnet.sweep_partitions(),
                    record("sweep", String::new(), None, None).at_unix_ms,
                );
                if let (Some(v), Ok(mut st)) = (view, self.status.write()) {
                    st.fabric = Some(Arc::new(v));
                }
                self.sm_ports_found(now, &report.sm_ports);
                self.schedule_master_heavy(now);
                let summary = format!(
                    "master heavy sweep: {} nodes, {} switches, {} LIDs, {} SM ports, {} unreachable, {} LFT blocks, {} PortInfo sets, {} ports Active, {} SMPs, {} failures, {} ms",
                    report.nodes,
                    report.switches,
                    report.lids,
                    report.sm_ports.len() + 1,
                    report.unreachable,
                    report.lft_blocks_sent,
                    report.port_info_sets,
                    report.ports_activated,
                    report.smps,
                    report.failures,
                    phases.total().as_millis()
                );
                let _ = self
                    .events
                    .send(record("sweep", summary.clone(), None, None));
                for r in self
                    .subnet_replies
                    .drain(..)
                    .chain(self.subnet_light_replies.drain(..))
                {
                    let _ = r.send(summary.clone());
                }
                self.last_sweep = summary;
            }
            SubnetEvent::SweepDone { report, .. } => {
                self.cfg.metrics.sweep_started(SweepKind::Light);
                if !self.subnet_light_replies.is_empty() {
                    let summary = format!(
                        "master light sweep: {} SMPs, {}",
                        report.smps,
                        if report.changed {
                            "a change seen: heavy sweep follows"
                        } else {
                            "no change"
                        }
                    );
                    for r in self.subnet_light_replies.drain(..) {
                        let _ = r.send(summary.clone());
                    }
                    self.last_sweep = summary;
                }
            }
            SubnetEvent::TopologyChanged {
                added,
                removed,
                links_changed,
            } => {
                let text = format!(
                    "topology changed: {} nodes added, {} removed, {links_changed} cables changed",
                    added.len(),
                    removed.len()
                );
                let _ = self.events.send(record("sweep", text, None, None));
            }
            SubnetEvent::Trap144 { issuer_lid, .. } => {
                let _ = self.events.send(record(
                    "trap",
                    format!("trap 144 from LID {issuer_lid}"),
                    None,
                    None,
                ));
            }
            SubnetEvent::DuplicateGuid(d) => {
                let _ = self.events.send(record("alarm", d.to_string(), None, None));
            }
            SubnetEvent::TopologyCapped(c) => {
                let _ = self.events.send(record("alarm", c.to_string(), None, None));
            }
            SubnetEvent::Notice(n) => {
                tracing::debug!(trap = n.trap_number(), "notice for the SA (no SA yet)");
            }
            SubnetEvent::Unsolicited(smp) => {
                tracing::trace!(attr = ?smp.attr_id, "configurator passed a request on");
            }
            SubnetEvent::PreparedDiscovery { sm_ports } => {
                // The takeover's discovery is the fresh sweep a DISCOVERING election
                // waits for (our own sweeps pause while it prepares); kept for a round
                // that starts after it (the preparation starts a poll early).
                self.sm_ports_found(now, &sm_ports);
                self.prepared_sm_ports = Some(sm_ports);
            }
        }
    }

    /// Every [`PORT_WATCH_INTERVAL`]: SubnGet(PortInfo) of our own port to the local
    /// SMA (a zero-hop directed route), answered in [`Self::local_port_read`].
    fn watch_local_port(&mut self, now: Duration) -> anyhow::Result<()> {
        let w = &mut self.port_watch;
        if now < w.next {
            return Ok(());
        }
        w.next = now + PORT_WATCH_INTERVAL;
        w.seq = w.seq.wrapping_add(1);
        let tid = u64::from(PORT_WATCH_TID_LOW | u32::from(w.seq));
        let mut smp = Smp::try_get_dr(&[], AttributeId::PORT_INFO, u32::from(w.port), tid)?;
        smp.m_key = self.subnet.m_key().key;
        self.device_send(None, &smp.encode());
        Ok(())
    }

    /// Our port's PortState: Down means the link is gone; Init after Active means it
    /// retrained (the cable was pulled and plugged back between two reads). Either way
    /// the election re-discovers (`Election::handle_local_port`): cut off, another SM
    /// may have taken over, and a master that stayed MASTER would answer MASTER beside
    /// it when the link is back and reprogram the fabric (LIDs) from its stale view.
    fn local_port_read(&mut self, now: Duration, smp: &Smp) {
        if smp.status != 0 || smp.attr_id != AttributeId::PORT_INFO {
            return;
        }
        let Ok(pi) = smp.attribute::<PortInfo>() else {
            return;
        };
        let state = pi.port_state;
        let was_active =
            std::mem::replace(&mut self.port_watch.was_active, state == PortState::Active);
        let down = state == PortState::Down;
        let retrained = was_active && state == PortState::Init;
        let was_down = std::mem::replace(&mut self.port_watch.down, down);
        if down || retrained {
            if !was_down {
                tracing::info!(?state, retrained, "our port lost its link: re-discovering");
                self.fabric_changes += 1;
            }
            self.election.handle_local_port(now, false);
        }
        if !down && (was_down || retrained) {
            // The link is back: what we swept while cut off is stale (it saw our node
            // alone). Sweep again; the election concludes only after that sweep.
            tracing::info!(
                ?state,
                "our port has its link again: sweeping before the election concludes"
            );
            self.fabric_changes += 1;
            if let Some(s) = self.sweep.take() {
                let heavy = s.heavy;
                self.waiting_replies
                    .extend(s.replies.into_iter().map(|r| (heavy, r)));
            }
            self.heavy_wanted = true;
            self.election.handle_local_port(now, true);
        }
    }

    /// STANDBY: one poll before the election gives up on its master (at the defaults,
    /// 2 of 3 polls missed), prepare the takeover; when the master answers again, drop
    /// the preparation. True if something started or stopped.
    ///
    /// Why one poll early: discovery plus LFT read-back are ~0.2 s of fabric time on
    /// a k=16 fat tree, about what the last two polls (or the last poll and the
    /// election's final query) take, and "fabric verified" within 0.5 s of a SIGKILL
    /// needs both to overlap. A standby that gets no answer to two polls in a row
    /// almost always lost its master; a false alarm costs one read-only sweep and is
    /// dropped at the next answer (and any answer from a MASTER also voids the
    /// preparation at MASTER time, see `check_prepared`).
    fn watch_master(&mut self, now: Duration) -> bool {
        if self.election.state() != SmState::Standby || self.subnet.is_active() {
            return false;
        }
        let missed = self.election.missed_polls();
        let early = self.cfg.poll_retries.saturating_sub(1).max(1);
        if missed >= early && !self.subnet.is_preparing() && !self.subnet.is_sweeping() {
            return self.prepare_takeover(now);
        }
        if missed == 0 && self.subnet.is_preparing() {
            tracing::info!("master answered again: prepared takeover dropped");
            self.subnet.stop();
            self.prepared = None;
            return true;
        }
        false
    }

    /// The standby lost its master (STANDBY -> DISCOVERING): start the read-only half
    /// of the takeover now ([`SubnetManager::prepare_takeover`]: discovery and the
    /// read-back of every LFT, nothing written, no Raft claim) instead of after the
    /// election's last SMInfo query, which only waits for a dead master's timeout.
    /// Only with replication (that is what the read-back is verified against) and
    /// only if no known STANDBY/DISCOVERING SM outranks us, so the other standbys do
    /// not load the fabric with reads they will throw away.
    /// True if it started one.
    fn prepare_takeover(&mut self, now: Duration) -> bool {
        let Some(r) = self.cfg.replication.clone() else {
            return false;
        };
        if self.subnet.is_active() || self.subnet.is_sweeping() {
            return false;
        }
        let me = (self.election.priority(), std::cmp::Reverse(self.port_guid));
        let outranked = self.peers.values().any(|p| {
            !p.is_self
                && matches!(p.state, Some(SmState::Standby | SmState::Discovering))
                && (p.priority, std::cmp::Reverse(p.guid)) > me
        });
        if outranked {
            // (Checked on every loop turn while the polls stay missed: no log.)
            return false;
        }
        tracing::info!(
            state = %self.election.state(),
            missed = self.election.missed_polls(),
            "master silent: preparing the takeover"
        );
        self.prepared_sm_ports = None;
        let guid2lid = crate::replication::prepare_take_over(&r, &mut self.subnet, now);
        self.prepared = Some((self.fabric_changes, guid2lid));
        self.subnet.is_preparing()
    }

    /// At MASTER: keep a prepared takeover only if it is recent, nothing may have
    /// changed the fabric since it started (traps, another MASTER, a sweep request)
    /// and the replicated guid2lid it assigned LIDs from is unchanged; else drop it
    /// and sweep from scratch.
    fn check_prepared(&mut self, now: Duration) {
        let Some((changes, guid2lid)) = self.prepared.take() else {
            return;
        };
        let Some(since) = self.subnet.preparing_since() else {
            return;
        };
        let age = now.saturating_sub(since);
        let lids_same = self
            .cfg
            .replication
            .as_ref()
            .is_some_and(|r| crate::replication::replicated_guid2lid(r) == guid2lid);
        if changes != self.fabric_changes || age > PREPARED_TAKEOVER_MAX_AGE || !lids_same {
            tracing::info!(
                age_ms = u64::try_from(age.as_millis()).unwrap_or(u64::MAX),
                fabric_changed = changes != self.fabric_changes,
                lids_same,
                "prepared takeover dropped: sweeping from scratch"
            );
            self.subnet.abandon_prepared();
        } else {
            tracing::info!(
                age_ms = u64::try_from(age.as_millis()).unwrap_or(u64::MAX),
                "master: continuing the takeover prepared before MASTER"
            );
        }
    }

    /// MASTER with replication: every [`crate::replication::PARTITION_POLL`], hand
    /// the partitions to program (start-up plus the replicated `partition/` keys,
    /// which `Fabric/SetPartition` may have committed through any member) to the
    /// configurator; a changed set makes it sweep and reprogram the P_Key tables.
    fn poll_partitions(&mut self, now: Duration) {
        let Some(r) = &self.cfg.replication else {
            return;
        };
        if !self.subnet.is_active() {
            // A later mastership applies the set afresh.
            self.partitions_seen = None;
            return;
        }
        if now < self.next_partition_poll {
            return;
        }
        self.next_partition_poll = now.saturating_add(crate::replication::PARTITION_POLL);
        if crate::replication::apply_partitions_if_changed(
            r,
            &mut self.subnet,
            &self.cfg.subnet.partitions,
            now,
            &mut self.partitions_seen,
        ) {
            let pkeys: Vec<String> = self
                .subnet
                .partitions()
                .iter()
                .map(|p| format!("{:#06x}", p.p_key))
                .collect();
            let text = format!(
                "partitions changed in the replica: programming P_Keys [{}] (heavy sweep)",
                pkeys.join(", ")
            );
            tracing::info!("{text}");
            let _ = self.events.send(record("sweep", text, None, None));
        }
    }

    /// When the MASTER's next periodic heavy sweep is due (never with interval 0).
    fn schedule_master_heavy(&mut self, now: Duration) {
        let every = self.cfg.master_heavy_sweep_interval;
        self.next_heavy = if every.is_zero() {
            Duration::MAX
        } else {
            now.saturating_add(every)
        };
    }

    /// The last standby discovery if a new MASTER may configure from it: finished
    /// within [`FRESH_DISCOVERY_MAX_AGE`], and nothing that may have changed the fabric
    /// (a trap, a heavy sweep request, another SM in MASTER) since it started. Without
    /// the last condition a failover would start from what the old master was still
    /// changing, and programming skips ports that *read* as wanted. Taken once.
    fn take_fresh_discovery(&mut self, now: Duration) -> Option<DiscoveryResult> {
        let (done, changes, result) = self.last_discovery.take()?;
        let age = now.saturating_sub(done);
        if changes != self.fabric_changes || age > FRESH_DISCOVERY_MAX_AGE {
            tracing::debug!(
                ?age,
                changed = changes != self.fabric_changes,
                "standby discovery not reused"
            );
            return None;
        }
        tracing::info!(
            age_ms = u64::try_from(age.as_millis()).unwrap_or(u64::MAX),
            nodes = result.topology.len(),
            "master: configuring from the discovery made while DISCOVERING"
        );
        Some(result)
    }

    /// Record how long the current sweep phase took and start the next one's clock.
    fn phase_done(&mut self, now: Duration, phase: &str) {
        if let Some(s) = self.sweep.as_mut() {
            self.cfg
                .metrics
                .set_sweep_phase(phase, now.saturating_sub(s.phase_started));
            s.phase_started = now;
        }
    }

    fn sweep_done(&mut self, now: Duration) {
        let Some(s) = self.sweep.take() else {
            return;
        };
        let sm_ports = self.peers.len() + 1;
        let summary = format!(
            "{} sweep: {} nodes, {} ports probed, {} SM ports, {} unreachable, {} ms",
            if s.heavy { "heavy" } else { "light" },
            self.nodes,
            self.targets.len(),
            sm_ports,
            self.unreachable,
            now.saturating_sub(s.started).as_millis()
        );
        if s.heavy {
            tracing::info!("{summary}");
        } else {
            tracing::debug!("{summary}");
        }
        if s.heavy {
            let _ = self
                .events
                .send(record("sweep", summary.clone(), None, None));
        }
        for r in s.replies {
            let _ = r.send(summary.clone());
        }
        self.last_sweep = summary;
    }

    fn publish(&mut self) {
        let state = self.election.state();
        let master_guid = self.election.master_guid().unwrap_or(0);
        let master_lid = if master_guid == self.port_guid {
            self.lid
        } else {
            self.peers.get(&master_guid).map_or(0, |p| p.lid)
        };
        let me = PeerView {
            guid: self.port_guid,
            lid: self.lid,
            priority: self.election.priority(),
            state: Some(state),
            act_count: self.election.act_count(),
            is_self: true,
            trusted: true,
        };
        let mut sms: Vec<PeerView> = self
            .peers
            .values()
            .map(|p| PeerView {
                trusted: self.election.is_trusted(p.guid),
                ..p.clone()
            })
            .collect();
        sms.push(me);
        sms.sort_by_key(|p| p.guid);
        if let Ok(mut s) = self.status.write() {
            s.guid = self.port_guid;
            s.lid = self.lid;
            s.priority = self.election.priority();
            s.state = state;
            s.act_count = self.election.act_count();
            s.master_guid = master_guid;
            s.master_lid = master_lid;
            s.sms = sms;
            s.last_sweep.clone_from(&self.last_sweep);
            s.sm_key_rejections = self.election.sm_key_violations();
            s.running = true;
            s.alarms.clone_from(&self.alarms);
            s.send_errors = self.send_errors;
        }
        let m = &self.cfg.metrics;
        m.set_up(true);
        m.set_state(state);
        m.set_act_count(self.election.act_count());
        m.set_sm_key_rejections(self.election.sm_key_violations());
        let sm = self.subnet.metrics();
        m.set_trap_totals(sm.traps, sm.traps_rate_limited, sm.trap_sweeps_deferred);
        let (untrusted, rogues) = self
            .election
            .untrusted_sms()
            .fold((0u64, 0u64), |(u, r), (_, _, st)| {
                (u + 1, r + u64::from(st == SmState::Master))
            });
        m.set_untrusted_sms(untrusted, rogues);
        let c = self.tx.counters();
        m.set_mad_totals(
            c.sent
                .saturating_add(self.election_sent)
                .saturating_add(self.subnet_sent),
            c.timeouts,
            c.retries,
        );
    }
}

/// Read our port's GUID and LID with 0-hop SubnGet(NodeInfo)/(PortInfo), blocking.
/// Whatever else arrives meanwhile is kept in `backlog` for the event loop: IsSM is
/// already set, so another SM may be asking our SMInfo right now, and a request we
/// dropped would never be answered (OpenSM under umad2sim then waits for it forever,
/// its sweep stuck; on a kernel it would retry after its timeout).
fn bootstrap(
    dev: &mut dyn MadDevice,
    backlog: &mut VecDeque<ReceivedMad>,
    m_key: u64,
) -> anyhow::Result<(u64, u16, u8)> {
    let ni: NodeInfo = local_get(dev, AttributeId::NODE_INFO, 0, 1, backlog, m_key)?;
    if ni.port_guid == 0 {
        anyhow::bail!("the local port reports PortGUID 0 in NodeInfo");
    }
    let pi: PortInfo = local_get(
        dev,
        AttributeId::PORT_INFO,
        u32::from(ni.local_port_num),
        2,
        backlog,
        m_key,
    )?;
    Ok((ni.port_guid, pi.lid, ni.local_port_num))
}

/// At most this many MADs are kept from the bootstrap (a flood is not kept whole).
const BOOT_BACKLOG_MAX: usize = 256;

fn local_get<A: SmpAttribute>(
    dev: &mut dyn MadDevice,
    attr: AttributeId,
    attr_mod: u32,
    seq: u32,
    backlog: &mut VecDeque<ReceivedMad>,
    m_key: u64,
) -> anyhow::Result<A> {
    let tid = u64::from(BOOT_TID_LOW + seq);
    let mut req = Smp::try_get_dr(&[], attr, attr_mod, tid)?;
    req.m_key = m_key;
    for _ in 0..10 {
        dev.send(&req.encode())?;
        let deadline = Instant::now() + Duration::from_millis(300);
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            let Some(r) = dev.recv(left)? else {
                break;
            };
            let Ok(smp) = Smp::decode(&r.mad) else {
                continue;
            };
            if smp.method == Method::GET_RESP && smp.tid as u32 == tid as u32 && smp.attr_id == attr
            {
                if smp.status != 0 {
                    anyhow::bail!("local {attr:?} answered with status {:#06x}", smp.status);
                }
                return Ok(smp.attribute::<A>()?);
            }
            if backlog.len() < BOOT_BACKLOG_MAX {
                backlog.push_back(r);
            } else {
                tracing::warn!(attr = ?smp.attr_id, "start-up backlog full: MAD dropped");
            }
        }
    }
    anyhow::bail!("the local port did not answer SubnGet({attr:?}) after 10 tries")
}

/// An SM a planned handover may target: one that is STANDBY, or DISCOVERING on its way
/// there (ranked, then refused as not ready until it settles).
pub(crate) fn handover_candidate(state: Option<SmState>) -> bool {
    matches!(state, Some(SmState::Standby | SmState::Discovering))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tid_ranges_are_disjoint_from_each_other_and_the_election() {
        for low in [0u32, 1, 0x3FFF_FFFF, 0x4000_0000, 0x0FFF_FFFF, u32::MAX] {
            let r = RUNTIME_TID.fold(low);
            let s = SUBNET_TID.fold(low);
            assert!(RUNTIME_TID.contains(r) && !SUBNET_TID.contains(r));
            assert!(SUBNET_TID.contains(s) && !RUNTIME_TID.contains(s));
            for w in [r, s] {
                assert!(w < BOOT_TID_LOW, "{w:#x}");
            }
        }
    }

    proptest::proptest! {
        /// An answer to any of the last 2^20 requests unfolds to the agent's TID,
        /// whatever the counter, also across the 2^28/2^30/2^32 wraps.
        #[test]
        fn unfold_inverts_fold(sent in 1u64..(1u64 << 34), back in 0u64..(1 << 20)) {
            let low = (sent.saturating_sub(back)) as u32;
            for r in [RUNTIME_TID, SUBNET_TID] {
                proptest::prop_assert_eq!(r.unfold(r.fold(low), sent), low);
            }
        }
    }
}
