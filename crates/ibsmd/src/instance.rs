//! One SM instance: a dedicated OS thread that drives an [`ibsm_core::node::Node`]
//! (the whole SM, sans-IO) with a [`MadDevice`]. This file holds no SM policy: it
//! reads the device with a timeout and feeds the node, writes what the node emits,
//! runs the node's routing jobs on a worker thread, hands it the replicated state when
//! the local replica applied something new, and turns its outputs into the status
//! snapshot, `Watch` events, metrics, command replies and replication writes.
//!
//! Why a plain thread and not tokio: umad2sim hands out fake descriptors that epoll
//! cannot watch, and the embedded simulator's device blocks on a condvar; both are
//! driven by `recv(timeout)`. The thread wakes at least every `MAX_WAIT` to read its
//! command channel, so commands are served within that time.
//!
//! Routing is the one long computation (~1.6 s for 48k LIDs): it runs on a second
//! thread per instance (`RoutingWorker`), so this thread keeps answering SMInfo polls
//! meanwhile. Computed inline, a new master stayed silent for the whole computation:
//! its standbys' polls and discovery queries went unanswered and one of them took
//! MASTER beside it (seen in CI on ibsim).
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
//! # Replication
//!
//! With replication the node gets the replicated state ([`ibsm_core::node::ReplicatedFabric`]) every
//! time the local replica's applied index moves (checked before each batch of
//! inputs, so a HANDOVER that arrives right after its replica caught up sees what it
//! caught up to); its mastership claims go to [`crate::replication::Replication`],
//! and after each heavy sweep as MASTER ([`Output::Publish`]) the driver publishes
//! what the configurator holds ([`crate::replication::record_of`]) and the
//! [`crate::fabric_view::FabricView`] that `ibsm.v1.Fabric` serves.

use std::collections::{BTreeSet, HashMap};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ibsm_core::election::{ControlPacket, SmState};
use ibsm_core::node::{CommandReply, Input, Node, NodeCommand, NodeConfig, NodeEvent, Output};
use ibsm_core::subnet::storm::LogSampler;
use ibsm_core::subnet::{RoutingDone, RoutingJob, SubnetConfig, SubnetManager};
use ibsm_mad::MAD_SIZE;
use ibsm_transport::MadDevice;
use tokio::sync::{broadcast, oneshot};

use crate::metrics::Metrics;

pub use ibsm_core::node::{handover_candidate, DEFAULT_MASTER_HEAVY_SWEEP_INTERVAL};

/// Longest sleep in `recv`, so commands are read at least this often.
const MAX_WAIT: Duration = Duration::from_millis(20);
/// How often the instance looks for a routing result while one is being computed.
const ROUTING_RESULT_POLL: Duration = Duration::from_millis(2);
/// Send-error log lines: at most [`STORM_LOG_LINES`] per window, then one line with
/// the count held back.
const STORM_LOG_WINDOW: Duration = Duration::from_secs(10);
/// See [`STORM_LOG_WINDOW`].
const STORM_LOG_LINES: u32 = 20;

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

pub use ibsm_core::node::PeerView;

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
                let result = Driver::new(
                    cfg,
                    device,
                    cmd_rx,
                    Arc::clone(&thread_status),
                    thread_events.clone(),
                )
                .and_then(Driver::run);
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

/// A thread that runs the node's [`RoutingJob`]s, so the instance thread keeps
/// answering SMInfo (and everything else) while routes are computed.
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

/// Where a command's reply goes.
enum Reply {
    Unit(oneshot::Sender<Result<(), CommandError>>),
    Guid(oneshot::Sender<Result<u64, CommandError>>),
    Sweep(oneshot::Sender<String>),
}

struct Driver {
    cfg: InstanceConfig,
    dev: Box<dyn MadDevice + Send>,
    epoch: Instant,
    cmd_rx: mpsc::Receiver<Command>,
    status: Arc<RwLock<Snapshot>>,
    events: broadcast::Sender<EventRecord>,
    node: Node,
    replies: HashMap<u64, Reply>,
    next_id: u64,
    routing: RoutingWorker,
    /// The replica's applied index last handed to the node.
    replicated_at: Option<Option<u64>>,
    send_errors: u64,
    send_error_log: LogSampler,
    /// The node ended (start-up failed): the error the thread ends with.
    failed: Option<String>,
}

impl Driver {
    fn new(
        cfg: InstanceConfig,
        dev: Box<dyn MadDevice + Send>,
        cmd_rx: mpsc::Receiver<Command>,
        status: Arc<RwLock<Snapshot>>,
        events: broadcast::Sender<EventRecord>,
    ) -> anyhow::Result<Driver> {
        let epoch = Instant::now();
        let node = Node::new(node_config(&cfg), Duration::ZERO);
        let routing = RoutingWorker::spawn(&cfg.name)?;
        Ok(Driver {
            cfg,
            dev,
            epoch,
            cmd_rx,
            status,
            events,
            node,
            replies: HashMap::new(),
            next_id: 1,
            routing,
            replicated_at: None,
            send_errors: 0,
            send_error_log: LogSampler::new(STORM_LOG_WINDOW, STORM_LOG_LINES),
            failed: None,
        })
    }

    fn now(&self) -> Duration {
        self.epoch.elapsed()
    }

    fn run(mut self) -> anyhow::Result<()> {
        self.drain();
        loop {
            loop {
                match self.cmd_rx.try_recv() {
                    Ok(Command::Shutdown) | Err(mpsc::TryRecvError::Disconnected) => {
                        tracing::info!("SM instance shutting down");
                        return Ok(());
                    }
                    Ok(cmd) => self.command(cmd),
                    Err(mpsc::TryRecvError::Empty) => break,
                }
            }
            let now = self.now();
            while let Ok(done) = self.routing.done.try_recv() {
                self.routing.outstanding = self.routing.outstanding.saturating_sub(1);
                self.node.handle_input(now, Input::RoutingDone(done));
                self.drain();
            }
            self.feed_replicated();
            if self.node.poll_timeout().is_some_and(|t| t <= now) {
                self.node.handle_timeout(now);
                self.drain();
            }
            if let Some(e) = self.failed.take() {
                anyhow::bail!(e);
            }
            self.publish();
            let now = self.now();
            let mut until = now + MAX_WAIT;
            if self.routing.outstanding > 0 {
                // The result comes on a channel, not the device: look again soon.
                until = until.min(now + ROUTING_RESULT_POLL);
            }
            if let Some(t) = self.node.poll_timeout() {
                until = until.min(t);
            }
            if let Some(r) = self.dev.recv(until.saturating_sub(now))? {
                self.feed_replicated();
                let now = self.now();
                self.mad(now, &r.mad, r.slid);
                // Drain what else is already there before the next round of timers.
                while let Some(r) = self.dev.recv(Duration::ZERO)? {
                    self.mad(now, &r.mad, r.slid);
                }
            }
        }
    }

    fn mad(&mut self, now: Duration, mad: &[u8; MAD_SIZE], slid: u16) {
        self.node.handle_input(now, Input::Mad { mad, slid });
        self.drain();
    }

    /// Hand the node the replicated state when the local replica applied something
    /// since the last time.
    fn feed_replicated(&mut self) {
        let Some(r) = self.cfg.replication.clone() else {
            return;
        };
        let applied = r.replica().last_applied();
        if self.replicated_at == Some(applied) {
            return;
        }
        self.replicated_at = Some(applied);
        let rep = crate::replication::replicated_fabric(&r);
        let now = self.now();
        self.node
            .handle_input(now, Input::Replicated(Arc::new(rep)));
        self.drain();
    }

    fn command(&mut self, cmd: Command) {
        let id = self.next_id;
        self.next_id += 1;
        let (command, reply) = match cmd {
            Command::SetPriority { priority, reply } => {
                (NodeCommand::SetPriority(priority), Reply::Unit(reply))
            }
            Command::Handover { to, reply } => (NodeCommand::Handover { to }, Reply::Guid(reply)),
            Command::SendControl {
                packet,
                guid,
                reply,
            } => (
                NodeCommand::SendControl { packet, guid },
                Reply::Unit(reply),
            ),
            Command::Sweep { heavy, reply } => (NodeCommand::Sweep { heavy }, Reply::Sweep(reply)),
            Command::Shutdown => return,
        };
        self.replies.insert(id, reply);
        let now = self.now();
        self.node.handle_input(now, Input::Command { id, command });
        self.drain();
    }

    /// Carry out everything the node emitted.
    fn drain(&mut self) {
        while let Some(out) = self.node.poll_output() {
            match out {
                Output::Transmit(o) => {
                    self.device_send(o.dlid, &o.mad);
                }
                Output::Event(ev) => self.event(ev),
                Output::RoutingJob(job) => match self.routing.jobs.send(job) {
                    Ok(()) => self.routing.outstanding += 1,
                    Err(mpsc::SendError(job)) => {
                        tracing::error!("routing thread gone: computing routes inline");
                        let done = job.run();
                        let now = self.now();
                        self.node.handle_input(now, Input::RoutingDone(done));
                    }
                },
                Output::Done { id, result } => self.reply(id, result),
                Output::ClaimMastership { sm_guid } => {
                    if let Some(r) = &self.cfg.replication {
                        r.become_master(sm_guid);
                    }
                }
                Output::ReleaseMastership => {
                    if let Some(r) = &self.cfg.replication {
                        r.stop_master();
                    }
                }
                Output::Publish => self.publish_fabric(),
                Output::Started { port_guid, lid } => {
                    tracing::debug!(
                        port_guid = format_args!("{port_guid:#018x}"),
                        lid,
                        "local port read"
                    );
                }
                Output::Failed(e) => {
                    self.failed = Some(format!("SM {}: {e}", self.cfg.name));
                }
            }
        }
    }

    fn reply(&mut self, id: u64, result: Result<CommandReply, ibsm_core::node::CommandError>) {
        let Some(reply) = self.replies.remove(&id) else {
            return;
        };
        let result = result.map_err(CommandError::from);
        match reply {
            Reply::Unit(tx) => {
                let _ = tx.send(result.map(|_| ()));
            }
            Reply::Guid(tx) => {
                let _ = tx.send(result.map(|r| match r {
                    CommandReply::HandoverTo(g) => g,
                    _ => 0,
                }));
            }
            Reply::Sweep(tx) => {
                let _ = tx.send(match result {
                    Ok(CommandReply::Swept(s)) => s,
                    Ok(_) => String::new(),
                    Err(e) => e.to_string(),
                });
            }
        }
    }

    fn event(&mut self, ev: NodeEvent) {
        let m = &self.cfg.metrics;
        match ev {
            NodeEvent::Record {
                kind,
                text,
                from,
                to,
            } => {
                if let Some(to) = to {
                    m.set_state(to);
                }
                let _ = self.events.send(record(kind, text, from, to));
            }
            NodeEvent::Sweep(kind) => m.sweep_started(kind),
            NodeEvent::Phase { phase, took } => m.set_sweep_phase(phase, took),
            NodeEvent::UntrustedSm => m.count_untrusted_seen(),
            NodeEvent::MasterSweep { .. } => {}
        }
    }

    /// After a heavy sweep as MASTER: replicate what the configurator holds, and
    /// publish the view `ibsm.v1.Fabric` serves.
    fn publish_fabric(&mut self) {
        let Some(subnet) = self.node.subnet() else {
            return;
        };
        if let Some(r) = &self.cfg.replication {
            let mut rec = crate::replication::record_of(subnet);
            rec.sm_roster = Some(crate::replication::roster_of(&self.node.status().sms));
            r.publish(rec);
        }
        // The partitions this sweep programmed (start-up plus replicated).
        let view = crate::fabric_view::FabricView::of(
            subnet,
            subnet.sweep_partitions(),
            record("sweep", String::new(), None, None).at_unix_ms,
        );
        if let (Some(v), Ok(mut st)) = (view, self.status.write()) {
            st.fabric = Some(Arc::new(v));
        }
    }

    /// Put one MAD on the device (LID-routed to `dlid` when given and not 0). A send
    /// error is one failed MAD: counted, logged (sampled under a storm), and left to
    /// the sender's own timeout and retry; it never ends the instance thread, which
    /// must keep answering SMInfo.
    fn device_send(&mut self, dlid: Option<u16>, mad: &[u8; MAD_SIZE]) {
        let r = match dlid {
            Some(l) if l != 0 => self.dev.send_lid(l, mad),
            _ => self.dev.send(mad),
        };
        let Err(err) = r else { return };
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
    }

    fn publish(&mut self) {
        let st = self.node.status();
        let state = st.state.unwrap_or(SmState::NotActive);
        if let Ok(mut s) = self.status.write() {
            s.guid = st.port_guid;
            s.lid = st.lid;
            s.priority = st.priority;
            s.state = state;
            s.act_count = st.act_count;
            s.master_guid = st.master_guid;
            s.master_lid = st.master_lid;
            s.sms = st.sms;
            s.last_sweep = st.last_sweep;
            s.sm_key_rejections = st.sm_key_rejections;
            s.running = true;
            s.alarms = st.alarms;
            s.send_errors = self.send_errors;
        }
        let m = &self.cfg.metrics;
        m.set_up(true);
        m.set_state(state);
        m.set_act_count(st.act_count);
        m.set_sm_key_rejections(st.sm_key_rejections);
        m.set_trap_totals(st.traps.0, st.traps.1, st.traps.2);
        m.set_untrusted_sms(st.untrusted_sms.0, st.untrusted_sms.1);
        m.set_mad_totals(st.mads.0, st.mads.1, st.mads.2);
        if st.started {
            m.set_alarms(st.duplicate_guids, st.topology_capped);
        }
    }
}

/// The node's settings from the instance's.
fn node_config(cfg: &InstanceConfig) -> NodeConfig {
    let mut election = ibsm_core::election::ElectionConfig::new(0);
    election.priority = cfg.priority;
    election.sm_key = cfg.sm_key;
    election.poll_interval = cfg.poll_interval;
    election.poll_retries = cfg.poll_retries;
    election.trusted_sm_guids.clone_from(&cfg.trusted_sm_guids);
    NodeConfig {
        election,
        light_sweep_interval: cfg.light_sweep_interval,
        heavy_sweep_interval: cfg.heavy_sweep_interval,
        master_heavy_sweep_interval: cfg.master_heavy_sweep_interval,
        subnet: cfg.subnet.clone(),
        replicated: cfg.replication.is_some(),
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
