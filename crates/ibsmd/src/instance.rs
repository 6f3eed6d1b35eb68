//! One SM instance: a dedicated OS thread that owns a [`MadDevice`], a
//! [`Transactions`] agent (discovery, PortInfo probes, port configuration, SMInfo
//! reads for `ListSms`) and the sans-IO [`Election`].
//!
//! Why a plain thread and not tokio: umad2sim hands out fake descriptors that epoll
//! cannot watch, and the embedded simulator's device blocks on a condvar; both are
//! driven by `recv(timeout)`. The thread wakes at least every [`MAX_WAIT`] to read its
//! command channel, so commands are served within that time.
//!
//! Routing of what arrives (by the low 32 bits of the TID, because a Linux kernel
//! rewrites the high 32 bits of requests with its agent id): responses whose low half
//! is at or above [`ELECTION_TID_LOW`] belong to the election (its TIDs start there),
//! other responses to the transactions agent; SubnGet/SubnSet(SMInfo), trap 144 and
//! TrapRepress go to the election, which answers through us (the response is built from
//! the request, see `wire`). Other traps schedule a heavy sweep.
//!
//! Sweeps: a *heavy* sweep is a directed-route discovery followed by a *probe*
//! (SubnGet(PortInfo) of every CA port and switch port 0, which tells LIDs, port states
//! and which ports advertise IsSM); a *light* sweep is the probe alone, over the ports
//! the last discovery found. The SM ports found feed [`Election::handle_sweep`], and
//! their SMInfo is read for `ListSms`. Only a MASTER then *configures*: a LID for every
//! CA port and switch port 0 that has none (a small allocator that keeps the LIDs ports
//! already carry), MasterSMLID pointing at itself, and CA ports walked Init -> Armed ->
//! Active. Routing tables, switch external ports, P_Keys and the rest come with the
//! subnet-management issue.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ibsm_core::discovery::{Discovery, DiscoveryConfig, DiscoveryResult, DiscoveryToken};
use ibsm_core::election::{
    ControlPacket, DrRoute, Election, ElectionConfig, ElectionError, ElectionEvent, SmPort,
    SmRoute, SmState,
};
use ibsm_core::transactions::{Event, Transactions, TransactionsConfig};
use ibsm_mad::{
    AttributeId, CapabilityMask, Method, NodeInfo, PhysPortState, PortInfo, PortState, Smp,
    SmpAttribute, SmpRoute, MAD_SIZE,
};
use ibsm_transport::MadDevice;
use tokio::sync::{broadcast, oneshot};

use crate::metrics::{Metrics, SweepKind};

/// High 32 bits of the election's TIDs (restored on responses, see the module doc).
const ELECTION_TID_HIGH: u64 = 0x5300_0000;
/// Low 32 bits of the election's first TID; the transactions agent counts from 1.
pub const ELECTION_TID_LOW: u32 = 0x8000_0000;
/// Low 32 bits of the bootstrap queries' TIDs.
const BOOT_TID_LOW: u32 = 0x7000_0000;
/// Longest sleep in `recv`, so commands are read at least this often.
const MAX_WAIT: Duration = Duration::from_millis(20);
/// Requests kept for building responses; older ones are dropped.
const MAX_REMEMBERED_REQUESTS: usize = 1024;

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
    /// Interval between heavy sweeps (full directed-route discovery).
    pub heavy_sweep_interval: Duration,
    /// Where the instance publishes its Prometheus metrics (shared with `/metrics`;
    /// the demo keeps one per member across restarts).
    pub metrics: Arc<Metrics>,
}

impl InstanceConfig {
    /// Defaults: 100 ms x 3 polling (see the crate doc for the trade-off), SM_Key 1,
    /// light sweep every 2 s, heavy sweep every 10 s.
    pub fn new(name: impl Into<String>, priority: u8) -> InstanceConfig {
        InstanceConfig {
            name: name.into(),
            priority,
            sm_key: 1,
            poll_interval: Duration::from_millis(100),
            poll_retries: 3,
            light_sweep_interval: Duration::from_secs(2),
            heavy_sweep_interval: Duration::from_secs(10),
            metrics: Arc::new(Metrics::new()),
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
}

impl Snapshot {
    fn new(name: &str) -> Snapshot {
        Snapshot {
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
        let (cmd_tx, cmd_rx) = mpsc::channel();
        let status = Arc::new(RwLock::new(Snapshot::new(&cfg.name)));
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
enum Job {
    Disc(DiscoveryToken),
    Probe(usize),
    Configure { target: usize, step: u8 },
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
    Configure,
}

#[derive(Debug)]
struct Sweep {
    heavy: bool,
    started: Duration,
    /// When the current phase began (for `ibsm_sweep_phase_seconds`).
    phase_started: Duration,
    phase: Phase,
    outstanding: usize,
    configured: usize,
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
    lids: BTreeMap<u64, u16>,
    peers: BTreeMap<u64, PeerView>,
    requests: HashMap<u64, (Smp, u16)>,
    request_order: VecDeque<u64>,
    last_sweep: String,
    /// SMPs the election initiated (SMInfo polls, control packets), for metrics.
    election_sent: u64,
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
        let (port_guid, lid) = bootstrap(dev.as_mut())?;
        let mut ecfg = ElectionConfig::new(port_guid);
        ecfg.priority = cfg.priority;
        ecfg.sm_key = cfg.sm_key;
        ecfg.poll_interval = cfg.poll_interval;
        ecfg.poll_retries = cfg.poll_retries;
        ecfg.tid_base = (ELECTION_TID_HIGH << 32) | u64::from(ELECTION_TID_LOW);
        let mut election = Election::new(ecfg, Duration::ZERO)
            .map_err(|e| anyhow::anyhow!("SM {}: {e}", cfg.name))?;
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
            tx: Transactions::new(TransactionsConfig::default()),
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
            lids: BTreeMap::new(),
            peers: BTreeMap::new(),
            requests: HashMap::new(),
            request_order: VecDeque::new(),
            last_sweep: String::new(),
            election_sent: 0,
            cfg,
        })
    }

    fn now(&self) -> Duration {
        self.epoch.elapsed()
    }

    fn run(mut self) -> anyhow::Result<()> {
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
            if self.tx.poll_timeout().is_some_and(|t| t <= now) {
                self.tx.handle_timeout(now);
            }
            if self.election.poll_timeout().is_some_and(|t| t <= now) {
                self.election.handle_timeout(now);
            }
            if self.sweep.is_none() {
                if self.heavy_wanted || now >= self.next_heavy {
                    self.start_sweep(now, true);
                } else if now >= self.next_light || !self.waiting_replies.is_empty() {
                    self.start_sweep(now, false);
                }
            }
            self.pump(now)?;
            self.publish();
            let now = self.now();
            let mut until = now + MAX_WAIT;
            for t in [self.tx.poll_timeout(), self.election.poll_timeout()]
                .into_iter()
                .flatten()
            {
                until = until.min(t);
            }
            if self.sweep.is_none() {
                until = until.min(self.next_light).min(self.next_heavy);
            }
            if let Some(mad) = self.dev.recv(until.saturating_sub(now))? {
                let now = self.now();
                self.incoming(now, &mad)?;
                // Drain what else is already there before the next round of timers.
                while let Some(mad) = self.dev.recv(Duration::ZERO)? {
                    self.incoming(now, &mad)?;
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
        let standbys: Vec<PeerView> = self
            .peers
            .values()
            .filter(|p| !p.is_self && p.state == Some(SmState::Standby))
            .cloned()
            .collect();
        let rank = |p: &PeerView| (p.priority, std::cmp::Reverse(p.guid));
        let Some(best) = standbys.iter().max_by_key(|p| rank(p)).cloned() else {
            return Err(CommandError::FailedPrecondition(format!(
                "no SM in STANDBY to hand over to (known SMs: {})",
                self.peers.len().saturating_sub(1)
            )));
        };
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
        if target.priority == 0 && target.guid > self.port_guid {
            return Err(CommandError::FailedPrecondition(format!(
                "SM {:#018x} has priority 0 and a higher GUID than ours, so it cannot outrank us; raise its priority first",
                target.guid
            )));
        }
        // The election hands over to a STANDBY that outranks it: drop to 0 and let the
        // next master poll send HANDOVER.
        self.election
            .set_priority(now, 0)
            .map_err(|e| CommandError::InvalidArgument(e.to_string()))?;
        let _ = self.events.send(record(
            "handover",
            format!(
                "planned handover to {:#018x}: priority lowered to 0",
                target.guid
            ),
            None,
            None,
        ));
        Ok(target.guid)
    }

    // ----- wire ------------------------------------------------------------------

    fn incoming(&mut self, now: Duration, mad: &[u8; MAD_SIZE]) -> anyhow::Result<()> {
        let mut smp = match Smp::decode(mad) {
            Ok(s) => s,
            Err(err) => {
                tracing::debug!(%err, "dropping undecodable MAD");
                return Ok(());
            }
        };
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
            } else if low < BOOT_TID_LOW {
                self.tx.handle_incoming(now, mad);
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
                    ibsm_core::election::SmInfoMsg::Trap144 { issuer_lid, .. } => *issuer_lid,
                    _ => 0,
                };
                if matches!(msg, ibsm_core::election::SmInfoMsg::Trap144 { .. }) {
                    let _ = self.events.send(record(
                        "trap",
                        format!("trap 144 from LID {hint}"),
                        None,
                        None,
                    ));
                }
                self.remember_request(smp, hint);
                let from = crate::wire::arrival_route(&smp, hint);
                self.election.handle_message(now, from, msg);
            }
            None if smp.method == Method::TRAP => {
                // Another trap (link state change...): acknowledge it and re-discover.
                let repress = Smp {
                    method: Method::TRAP_REPRESS,
                    ..smp.response()
                };
                let _ = self.send_smp(&repress, None);
                tracing::info!(attr = ?smp.attr_id, "trap received: heavy sweep scheduled");
                let _ = self.events.send(record(
                    "trap",
                    "trap received: heavy sweep scheduled".into(),
                    None,
                    None,
                ));
                self.heavy_wanted = true;
            }
            None => {
                tracing::trace!(attr = ?smp.attr_id, method = ?smp.method, "ignoring request");
            }
        }
        Ok(())
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
        let entry = self.peers.entry(info.guid).or_insert(PeerView {
            guid: info.guid,
            lid: 0,
            priority: 0,
            state: None,
            act_count: 0,
            is_self: false,
        });
        entry.priority = info.priority;
        entry.state = Some(info.state);
        entry.act_count = info.act_count;
    }

    fn send_smp(&mut self, smp: &Smp, dlid: Option<u16>) -> anyhow::Result<()> {
        let bytes = smp.encode();
        match dlid {
            Some(l) if l != 0 => self.dev.send_lid(l, &bytes)?,
            _ => self.dev.send(&bytes)?,
        }
        Ok(())
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
            while let Some(mad) = self.tx.poll_transmit() {
                progressed = true;
                self.dev.send(&mad)?;
                self.election.handle_smps_sent(1);
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
                if *to == SmState::Master {
                    // Configure at once (the probe that follows a sweep configures).
                    self.next_light = now;
                }
                if *from == SmState::Master {
                    if let Some(s) = &self.sweep {
                        if matches!(s.phase, Phase::Configure) {
                            tracing::info!("no longer master: port configuration stops");
                        }
                    }
                }
                record("state", text, Some(*from), Some(*to))
            }
            ElectionEvent::HeavySweepRequested => {
                self.heavy_wanted = true;
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
        let phase = if heavy {
            Phase::Discover(Box::new(Discovery::new(DiscoveryConfig::default())))
        } else {
            Phase::Probe
        };
        self.sweep = Some(Sweep {
            heavy,
            started: now,
            phase_started: now,
            phase,
            outstanding: 0,
            configured: 0,
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
            Job::Configure { target, step } => {
                let ok = smp.as_ref().is_some_and(|s| s.status == 0);
                if !ok {
                    tracing::warn!(
                        port_guid =
                            self.targets
                                .get(target)
                                .map(|t| format_args!("{:#018x}", t.port_guid).to_string()),
                        status = smp.map(|s| s.status),
                        "PortInfo Set failed"
                    );
                } else if step == 1 && self.election.state() == SmState::Master {
                    // Armed -> Active.
                    // The image to write is the one the Set returned (LID and
                    // MasterSMLID as just written), not the probe's.
                    let written = smp.as_ref().and_then(|s| s.attribute::<PortInfo>().ok());
                    if let (Some(t), Some(mut pi)) = (self.targets.get(target), written) {
                        let was = t.info.map(|i| i.port_state);
                        {
                            if !t.is_switch && was == Some(PortState::Init) {
                                pi.port_state = PortState::Active;
                                pi.port_physical_state = PhysPortState::NoChange;
                                if let Ok(set) = Smp::try_set_dr(
                                    &t.path,
                                    AttributeId::PORT_INFO,
                                    u32::from(t.port),
                                    0,
                                    pi.encode(),
                                ) {
                                    self.tx.submit(now, set, Job::Configure { target, step: 2 });
                                    if let Some(s) = self.sweep.as_mut() {
                                        s.outstanding += 1;
                                    }
                                }
                            }
                        }
                    }
                }
                if ok {
                    if let Some(s) = self.sweep.as_mut() {
                        s.configured += 1;
                    }
                }
                self.finish_one(now, Phase::Configure);
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
        match phase {
            Phase::Probe => self.probe_done(now),
            _ => self.sweep_done(now),
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
        self.phase_done(now, "discover");
        self.discovered(&result);
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

    /// The probe finished: feed the election, read SMInfo of the SM ports, configure.
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
        let present: BTreeSet<u64> = ports.iter().map(|p| p.guid).collect();
        self.peers
            .retain(|g, _| present.contains(g) && *g != self.port_guid);
        for p in &ports {
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
            });
            entry.lid = p.lid.unwrap_or(0);
            if let SmRoute::Directed(dr) = &p.route {
                let hops = dr.initial_path.get(1..).unwrap_or(&[]);
                if let Ok(smp) = Smp::try_get_dr(hops, AttributeId::SM_INFO, 0, 0) {
                    self.tx.submit(now, smp, Job::PeerSmInfo(p.guid));
                }
            }
        }
        self.election.handle_sweep(now, &ports);
        if self.election.state() == SmState::Master {
            self.configure(now);
        }
        if self.sweep.as_ref().is_some_and(|s| s.outstanding == 0) {
            self.sweep_done(now);
        }
    }

    /// MASTER only: LIDs, MasterSMLID, CA ports to Active.
    fn configure(&mut self, now: Duration) {
        // LIDs ports carry stay theirs; the allocator fills the holes, ours first.
        let mut used: BTreeSet<u16> = self
            .targets
            .iter()
            .filter_map(|t| t.info.map(|i| i.lid))
            .filter(|l| *l != 0)
            .collect();
        used.extend(self.lids.values().copied());
        let mut order: Vec<usize> = (0..self.targets.len()).collect();
        order.sort_by_key(|&i| self.targets.get(i).map(|t| t.port_guid != self.port_guid));
        let mut next = 1u16;
        for &i in &order {
            let Some(t) = self.targets.get(i) else {
                continue;
            };
            let Some(pi) = t.info else { continue };
            if pi.lid != 0 {
                self.lids.insert(t.port_guid, pi.lid);
                continue;
            }
            if self.lids.contains_key(&t.port_guid) {
                continue;
            }
            while used.contains(&next) {
                next = next.saturating_add(1);
            }
            if next >= 0xC000 {
                tracing::error!("unicast LID space exhausted");
                break;
            }
            used.insert(next);
            self.lids.insert(t.port_guid, next);
        }
        let my_lid = self.lids.get(&self.port_guid).copied().unwrap_or(self.lid);
        let mut n = 0;
        for i in order {
            let Some(t) = self.targets.get(i) else {
                continue;
            };
            let Some(mut pi) = t.info else { continue };
            let lid = self.lids.get(&t.port_guid).copied().unwrap_or(pi.lid);
            let state_walk =
                !t.is_switch && matches!(pi.port_state, PortState::Init | PortState::Armed);
            if pi.lid == lid && pi.master_sm_lid == my_lid && !state_walk {
                continue;
            }
            tracing::debug!(
                port_guid = format_args!("{:#018x}", t.port_guid),
                lid = pi.lid,
                new_lid = lid,
                master_sm_lid = pi.master_sm_lid,
                state = ?pi.port_state,
                "configuring port"
            );
            pi.lid = lid;
            pi.master_sm_lid = my_lid;
            pi.port_physical_state = PhysPortState::NoChange;
            pi.port_state = match pi.port_state {
                PortState::Init if !t.is_switch => PortState::Armed,
                PortState::Armed if !t.is_switch => PortState::Active,
                _ => PortState::NoChange,
            };
            let attr_mod = if t.is_switch { 0 } else { u32::from(t.port) };
            if let Ok(set) =
                Smp::try_set_dr(&t.path, AttributeId::PORT_INFO, attr_mod, 0, pi.encode())
            {
                self.tx
                    .submit(now, set, Job::Configure { target: i, step: 1 });
                n += 1;
            }
        }
        if n > 0 {
            tracing::info!(
                ports = n,
                lid = my_lid,
                "master: configuring ports (LID, MasterSMLID, state)"
            );
        }
        if let Some(s) = self.sweep.as_mut() {
            s.phase = Phase::Configure;
            s.outstanding = n;
        }
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
        if self
            .sweep
            .as_ref()
            .is_some_and(|s| matches!(s.phase, Phase::Configure))
        {
            self.phase_done(now, "configure");
        }
        let Some(s) = self.sweep.take() else {
            return;
        };
        let sm_ports = self.peers.len() + 1;
        let summary = format!(
            "{} sweep: {} nodes, {} ports probed, {} SM ports, {} unreachable, {} ports configured, {} ms",
            if s.heavy { "heavy" } else { "light" },
            self.nodes,
            self.targets.len(),
            sm_ports,
            self.unreachable,
            s.configured,
            now.saturating_sub(s.started).as_millis()
        );
        if s.heavy || s.configured > 0 {
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
        };
        let mut sms: Vec<PeerView> = self.peers.values().cloned().collect();
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
        }
        let m = &self.cfg.metrics;
        m.set_up(true);
        m.set_state(state);
        m.set_act_count(self.election.act_count());
        m.set_sm_key_rejections(self.election.sm_key_violations());
        let c = self.tx.counters();
        m.set_mad_totals(
            c.sent.saturating_add(self.election_sent),
            c.timeouts,
            c.retries,
        );
    }
}

/// Read our port's GUID and LID with 0-hop SubnGet(NodeInfo)/(PortInfo), blocking.
fn bootstrap(dev: &mut dyn MadDevice) -> anyhow::Result<(u64, u16)> {
    let ni: NodeInfo = local_get(dev, AttributeId::NODE_INFO, 0, 1)?;
    if ni.port_guid == 0 {
        anyhow::bail!("the local port reports PortGUID 0 in NodeInfo");
    }
    let pi: PortInfo = local_get(dev, AttributeId::PORT_INFO, u32::from(ni.local_port_num), 2)?;
    Ok((ni.port_guid, pi.lid))
}

fn local_get<A: SmpAttribute>(
    dev: &mut dyn MadDevice,
    attr: AttributeId,
    attr_mod: u32,
    seq: u32,
) -> anyhow::Result<A> {
    let tid = u64::from(BOOT_TID_LOW + seq);
    let req = Smp::try_get_dr(&[], attr, attr_mod, tid)?;
    for _ in 0..10 {
        dev.send(&req.encode())?;
        let deadline = Instant::now() + Duration::from_millis(300);
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            let Some(mad) = dev.recv(left)? else {
                break;
            };
            let Ok(smp) = Smp::decode(&mad) else { continue };
            if smp.method == Method::GET_RESP && smp.tid as u32 == tid as u32 && smp.attr_id == attr
            {
                if smp.status != 0 {
                    anyhow::bail!("local {attr:?} answered with status {:#06x}", smp.status);
                }
                return Ok(smp.attribute::<A>()?);
            }
        }
    }
    anyhow::bail!("the local port did not answer SubnGet({attr:?}) after 10 tries")
}
