//! The instance thread: reads the device with a timeout, feeds the [`Node`], writes
//! what it emits, runs its routing and SA snapshot jobs on a worker, and turns its
//! outputs into the snapshot, events, metrics, command replies and replication writes.

use std::collections::{HashMap, VecDeque};
use std::sync::mpsc;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use ibsm_core::election::SmState;
use ibsm_core::node::{
    CommandReply, Input, Node, NodeCommand, NodeConfig, NodeEvent, Output, ReplicatedFabric,
};
use ibsm_core::sa::SaReader;
use ibsm_core::subnet::storm::LogSampler;
use ibsm_core::subnet::{RoutingDone, RoutingJob, SaSnapshotDone, SaSnapshotJob};
use ibsm_mad::MAD_SIZE;
use ibsm_transport::{MadDevice, ReceivedMad};
use tokio::sync::{broadcast, oneshot};

use crate::error::DaemonError;

mod poll_answer;
mod reads;

use super::api::{record, Command, CommandError, EventRecord, InstanceConfig, Snapshot};

/// A single step of the instance thread (one MAD, the timers, a job's result, a
/// publication) that takes longer than this is logged: meanwhile its own work waits,
/// and SMInfo polls are answered only by the stand-in (`poll_answer.rs`; without it
/// they wait too, and a standby counts them as missed).
const SLOW_STEP: Duration = Duration::from_millis(30);
/// Longest sleep in `recv`, so commands are read at least this often.
const MAX_WAIT: Duration = Duration::from_millis(20);
/// How often the instance looks for a job's result while one is out.
const JOB_RESULT_POLL: Duration = Duration::from_millis(2);
/// Send-error log lines: at most [`STORM_LOG_LINES`] per window, then one line with
/// the count held back.
const STORM_LOG_WINDOW: Duration = Duration::from_secs(10);
/// See [`STORM_LOG_WINDOW`].
const STORM_LOG_LINES: u32 = 20;

/// Work the node hands out ([`Output::RoutingJob`], [`Output::SaSnapshotJob`]).
/// Also what the driver drops (a replaced fabric view), freed there rather than on
/// the instance thread.
enum Job {
    Routing(RoutingJob),
    SaSnapshot(SaSnapshotJob),
    Drop(Box<dyn std::any::Any + Send>),
}

impl Job {
    fn run(self) -> JobDone {
        match self {
            Job::Routing(j) => JobDone::Routing(j.run()),
            Job::SaSnapshot(j) => JobDone::SaSnapshot(j.run()),
            Job::Drop(what) => {
                drop(what);
                JobDone::Dropped
            }
        }
    }
}

/// A [`Job`]'s result.
enum JobDone {
    Routing(RoutingDone),
    SaSnapshot(SaSnapshotDone),
    Dropped,
}

impl JobDone {
    /// What the node is told (nothing for a drop).
    fn into_input<'a>(self) -> Option<Input<'a>> {
        match self {
            JobDone::Routing(d) => Some(Input::RoutingDone(d)),
            JobDone::SaSnapshot(d) => Some(Input::SaSnapshotDone(d)),
            JobDone::Dropped => None,
        }
    }

    fn what(&self) -> &'static str {
        match self {
            JobDone::Routing(_) => "routing result",
            JobDone::SaSnapshot(_) => "SA snapshot",
            JobDone::Dropped => "drop",
        }
    }
}

/// A thread that runs the node's jobs in order (routing, and the SA snapshot a heavy
/// sweep ends with, freeing the previous one), so the instance thread keeps
/// answering SMInfo (and everything else) meanwhile.
struct Worker {
    jobs: mpsc::Sender<Job>,
    done: mpsc::Receiver<JobDone>,
    outstanding: usize,
}

impl Worker {
    fn spawn(name: &str) -> Result<Worker, DaemonError> {
        let (jobs, job_rx) = mpsc::channel::<Job>();
        let (done_tx, done) = mpsc::channel();
        std::thread::Builder::new()
            .name(format!("{name}-worker"))
            .spawn(move || {
                // Ends when the instance drops its sender.
                while let Ok(job) = job_rx.recv() {
                    if done_tx.send(job.run()).is_err() {
                        break;
                    }
                }
            })
            .map_err(|source| DaemonError::Thread {
                name: name.to_string(),
                what: "worker",
                source,
            })?;
        Ok(Worker {
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
    Partitions(
        oneshot::Sender<Result<(), CommandError>>,
        Vec<ibsm_core::subnet::Partition>,
    ),
}

pub(super) struct Driver {
    cfg: InstanceConfig,
    dev: Box<dyn MadDevice + Send>,
    epoch: Instant,
    cmd_rx: mpsc::Receiver<Command>,
    status: Arc<RwLock<Snapshot>>,
    events: broadcast::Sender<EventRecord>,
    node: Node,
    replies: HashMap<u64, Reply>,
    next_id: u64,
    worker: Worker,
    /// The Raft leader's last heartbeat handed to the node (`Input::LeaderContact`).
    leader_contact_at: Option<Instant>,
    /// The replica's applied index last handed to the node.
    replicated_at: Option<Option<u64>>,
    /// The replica's SA tables last handed to the node (to see them change, and to
    /// tell whether the replica is current with the node's SA).
    replica_sa: Option<Arc<ReplicatedFabric>>,
    /// The costly parts of the last [`ReplicatedFabric`] built, reused while their
    /// sources in the replica are unchanged (an SA write changes none of them).
    replica_cache: Option<crate::replication::ReplicatedCache>,
    /// The SA's tables as last published, not yet handed to replication: written at
    /// the end of the batch of MADs being handled, once for all the changes in it.
    sa_to_replicate: Option<Arc<ibsm_core::sa::SaTables>>,
    send_errors: u64,
    send_error_log: LogSampler,
    /// When (node time) the last sweep that changed the fabric finished, as last
    /// placed on the wall clock in the status.
    last_change_at: Option<Duration>,
    /// The node ended (start-up failed): the error the thread ends with.
    failed: Option<String>,
    /// While MASTER: answers SubnAdmGet of fabric records from the node's current SA
    /// snapshot as they are read (`Driver::read_ahead`), refreshed after every batch
    /// of the node's outputs.
    sa_reader: Option<SaReader>,
    /// MADs read ahead of their turn (not answered by `sa_reader`), handled in order.
    pending: VecDeque<poll_answer::Incoming>,
    /// The port's reader thread, which answers SMInfo polls as they arrive
    /// (`poll_answer.rs`); `None`: this thread reads the device.
    reader: Option<poll_answer::PollAnswerer>,
    /// What `sa_reader` answered: requests, answers with an error status.
    sa_reader_counts: (u64, u64),
}

impl Driver {
    pub(super) fn new(
        cfg: InstanceConfig,
        dev: Box<dyn MadDevice + Send>,
        cmd_rx: mpsc::Receiver<Command>,
        status: Arc<RwLock<Snapshot>>,
        events: broadcast::Sender<EventRecord>,
    ) -> Result<Driver, DaemonError> {
        let epoch = Instant::now();
        let node = Node::new(node_config(&cfg), Duration::ZERO);
        let worker = Worker::spawn(&cfg.name)?;
        let reader = match dev.try_share() {
            Some(theirs) if cfg.sminfo_answer_thread => Some(poll_answer::PollAnswerer::spawn(
                &cfg.name,
                theirs,
                Arc::clone(&cfg.metrics),
            )?),
            _ => None,
        };
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
            worker,
            replicated_at: None,
            leader_contact_at: None,
            last_change_at: None,
            replica_sa: None,
            replica_cache: None,
            sa_to_replicate: None,
            send_errors: 0,
            send_error_log: LogSampler::new(STORM_LOG_WINDOW, STORM_LOG_LINES),
            failed: None,
            sa_reader: None,
            pending: VecDeque::new(),
            reader,
            sa_reader_counts: (0, 0),
        })
    }

    fn now(&self) -> Duration {
        self.epoch.elapsed()
    }

    pub(super) fn run(mut self) -> Result<(), DaemonError> {
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
            while let Ok(done) = self.worker.done.try_recv() {
                self.worker.outstanding = self.worker.outstanding.saturating_sub(1);
                let t = Instant::now();
                let what = done.what();
                if let Some(input) = done.into_input() {
                    self.node.handle_input(now, input);
                    self.drain();
                }
                slow_step(what, t);
            }
            self.feed_replicated();
            self.feed_leader_contact();
            // What already arrived goes first: after a busy stretch (a loaded host, a
            // long batch) the master's answer to a standby poll may be waiting in the
            // device, and the timers below must not count that poll as missed.
            if self.node.poll_timeout().is_some_and(|t| t <= now) {
                self.read_ahead()?;
                self.handle_pending()?;
            }
            let now = self.now();
            if self.node.poll_timeout().is_some_and(|t| t <= now) {
                let t = Instant::now();
                self.node.handle_timeout(now);
                self.drain();
                slow_step("timers", t);
            }
            if let Some(e) = self.failed.take() {
                return Err(DaemonError::Node {
                    name: self.cfg.name.clone(),
                    why: e,
                });
            }
            self.replicate_sa();
            self.publish();
            let now = self.now();
            let mut until = now + MAX_WAIT;
            if self.worker.outstanding > 0 {
                // The result comes on a channel, not the device: look again soon.
                until = until.min(now + JOB_RESULT_POLL);
            }
            if let Some(t) = self.node.poll_timeout() {
                until = until.min(t);
            }
            if let Some(r) = self.recv(until.saturating_sub(now))? {
                self.feed_replicated();
                self.take(r);
                // Handle what else is already there before the next round of timers.
                self.read_ahead()?;
                self.handle_pending()?;
            }
        }
    }

    /// Hand the node the Raft leader's newest heartbeat, if one arrived since the last
    /// time: the election's second opinion on a master whose polls go unanswered.
    fn feed_leader_contact(&mut self) {
        let Some(r) = self.cfg.replication.as_ref() else {
            return;
        };
        let Some((at, _)) = r.replica().leader_contact() else {
            return;
        };
        if self.leader_contact_at == Some(at) {
            return;
        }
        self.leader_contact_at = Some(at);
        let Some((at, sm_guid)) = r.leader_contact_sm() else {
            return;
        };
        let at = at.saturating_duration_since(self.epoch);
        let now = self.now();
        self.node
            .handle_input(now, Input::LeaderContact { sm_guid, at });
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
        let rep = Arc::new(crate::replication::replicated_fabric_cached(
            &r,
            &mut self.replica_cache,
        ));
        let sa_changed = self.replica_sa.as_ref().is_none_or(|old| old.sa != rep.sa);
        self.replica_sa = Some(Arc::clone(&rep));
        let now = self.now();
        self.node.handle_input(now, Input::Replicated(rep));
        self.drain();
        if sa_changed {
            if let Ok(mut st) = self.status.write() {
                st.sa_replica.changed_unix_ms = super::api::unix_ms();
                st.sa_replica.changed_index = applied.unwrap_or(0);
            }
        }
        let mine = self.node.sa_tables();
        self.check_sa_replica(mine.as_ref());
    }

    /// Whether the replica's SA tables are `mine`, the node's (see
    /// [`super::api::SaReplica::current`]).
    fn check_sa_replica(&mut self, mine: Option<&ibsm_core::sa::SaTables>) {
        let Some(rep) = &self.replica_sa else {
            return;
        };
        let holds = rep.sa.contains_key(&ibsm_core::sa::SaTableKind::McGroups);
        let current = holds && mine.is_some_and(|t| same_sa(t, &rep.sa));
        if let Ok(mut st) = self.status.write() {
            st.sa_replica.holds_state = holds;
            st.sa_replica.current = current;
        }
    }

    /// Hand the SA's tables published in this batch of MADs to replication (which
    /// writes them behind the answers, merged with any write still waiting).
    fn replicate_sa(&mut self) {
        let Some(t) = self.sa_to_replicate.take() else {
            return;
        };
        if let Some(r) = &self.cfg.replication {
            r.publish_sa(crate::replication::replica_tables((*t).clone()));
            self.check_sa_replica(Some(&t));
        }
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
            Command::SetPartitions { partitions, reply } => (
                NodeCommand::SetConfiguredPartitions(partitions.clone()),
                Reply::Partitions(reply, partitions),
            ),
            Command::Stall(d) => {
                tracing::warn!(ms = d.as_millis(), "test facility: the SM thread stalls");
                std::thread::sleep(d);
                return;
            }
            Command::Shutdown => return,
        };
        self.replies.insert(id, reply);
        let now = self.now();
        self.node.handle_input(now, Input::Command { id, command });
        self.drain();
    }

    /// Carry out everything the node emitted.
    fn drain(&mut self) {
        // The node's state is final for this step: what the reader thread answers
        // SMInfo polls with, before any of its MADs go out.
        if let Some(r) = &mut self.reader {
            r.publish(self.node.sminfo_responder());
        }
        while let Some(out) = self.node.poll_output() {
            match out {
                Output::Transmit(o) => {
                    self.device_send(o.dlid, &o.mad);
                }
                Output::TransmitGmp(t) => self.send_gmp(&t),
                Output::Event(ev) => self.event(ev),
                Output::RoutingJob(job) => self.job(Job::Routing(job)),
                Output::SaSnapshotJob(job) => self.job(Job::SaSnapshot(job)),
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
                Output::PublishSa => {
                    // The status (and so the API) shows the change before the
                    // requester's answer, which follows this output; replication
                    // takes it at the end of the batch (`replicate_sa`).
                    let Some(t) = self.node.sa_tables() else {
                        continue;
                    };
                    let t = Arc::new(t);
                    if let Ok(mut st) = self.status.write() {
                        st.sa = Some(Arc::clone(&t));
                    }
                    if self.cfg.replication.is_some() {
                        self.sa_to_replicate = Some(t);
                    }
                }
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
        self.refresh_sa_reader();
    }

    /// Hand `job` to the worker (or, should it be gone, run it here).
    fn job(&mut self, job: Job) {
        match self.worker.jobs.send(job) {
            Ok(()) => self.worker.outstanding += 1,
            Err(mpsc::SendError(job)) => {
                tracing::error!("worker thread gone: running its job inline");
                if let Some(input) = job.run().into_input() {
                    let now = self.now();
                    self.node.handle_input(now, input);
                }
            }
        }
    }

    fn reply(&mut self, id: u64, result: Result<CommandReply, ibsm_core::node::CommandError>) {
        let Some(reply) = self.replies.remove(&id) else {
            return;
        };
        let result = result.map_err(CommandError::from);
        // The caller reads status and metrics next (a sweep's alarms, a handover's new
        // state): publish the node's state before answering, not at the loop's end.
        self.publish();
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
            Reply::Partitions(tx, partitions) => {
                if result.is_ok() {
                    if let Ok(mut st) = self.status.write() {
                        st.startup_partitions = partitions;
                    }
                }
                let _ = tx.send(result.map(|_| ()));
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
        let t = Instant::now();
        self.publish_fabric_inner();
        slow_step("fabric publication", t);
    }

    fn publish_fabric_inner(&mut self) {
        let Some(subnet) = self.node.subnet() else {
            return;
        };
        if let Some(r) = &self.cfg.replication {
            let mut rec = crate::replication::record_of(subnet);
            rec.sm_roster = Some(crate::replication::roster_of(&self.node.status().sms));
            rec.sa = self
                .node
                .sa_tables()
                .map(crate::replication::replica_tables);
            r.publish(rec);
        }
        // The partitions this sweep programmed (start-up plus replicated).
        let prev = self.status.read().ok().and_then(|st| st.fabric.clone());
        let view = crate::fabric_view::FabricView::of(
            subnet,
            subnet.sweep_partitions(),
            record("sweep", String::new(), None, None).at_unix_ms,
            prev.as_deref(),
        );
        let old = match (view, self.status.write()) {
            (Some(v), Ok(mut st)) => st.fabric.replace(Arc::new(v)),
            _ => None,
        };
        if let Some(old) = old {
            // The view of a k=32 fabric holds every LFT: freed on the worker.
            self.job(Job::Drop(Box::new(old)));
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
            s.state_since = st.state_since;
            s.state_reason = st.state_reason;
            s.handed_over_to = st.handed_over_to;
            s.clock = Some(self.epoch);
            s.act_count = st.act_count;
            s.master_guid = st.master_guid;
            s.master_lid = st.master_lid;
            s.sms = st.sms;
            s.last_sweep = st.last_sweep;
            if let Some((at, summary)) = st.last_change_sweep {
                if self.last_change_at != Some(at) {
                    self.last_change_at = Some(at);
                    // The node's clock is time since this thread's epoch: place `at`
                    // on the wall clock by its age.
                    let age = self.now().saturating_sub(at);
                    s.last_change_sweep_unix_ms = std::time::SystemTime::now()
                        .checked_sub(age)
                        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
                }
                s.last_change_sweep = summary;
            }
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
        m.set_losses_held_off(st.losses_held_off);
        m.set_sminfo_requests(st.sminfo_requests);
        m.set_trap_totals(st.traps.0, st.traps.1, st.traps.2);
        m.set_untrusted_sms(st.untrusted_sms.0, st.untrusted_sms.1);
        m.set_mad_totals(st.mads.0, st.mads.1, st.mads.2);
        if let (Some(sa), Some(sub)) = (self.node.sa(), self.node.subnet()) {
            let sm = sa.metrics();
            let size = crate::metrics::SaSize {
                groups: sa.groups().len() as u64,
                members: sa.groups().member_count() as u64,
                services: sa.services().len() as u64,
                subscriptions: sa.informs().len() as u64,
            };
            let (reads, read_errors) = self.sa_reader_counts;
            m.set_sa(
                size,
                sm.requests + reads,
                sm.errors + read_errors,
                sub.metrics().client_reregisters,
            );
            m.set_sa_reader_answers(reads);
        }
        if let Ok(s) = self.status.read() {
            m.set_sa_replica(s.sa_replica.current, s.sa_replica.changed_unix_ms);
        }
        if st.started {
            m.set_alarms(st.duplicate_guids, st.topology_capped);
        }
    }
}

/// Count a received MAD in the metrics: every one, a trap by the port it names, an SA
/// request by method and attribute.
fn count_received(m: &crate::metrics::Metrics, r: &ReceivedMad) {
    use ibsm_mad::sa::SaAttributeId;
    use ibsm_mad::{Method, Notice, Smp, TrapDetails};
    m.mad_received();
    if r.is_smp() {
        let Ok(smp) = Smp::decode(&r.mad) else {
            return;
        };
        if smp.method != Method::TRAP {
            return;
        }
        let Ok(notice) = smp.attribute::<Notice>() else {
            return;
        };
        let (lid, port) = match notice.details() {
            Some(
                TrapDetails::LinkIntegrityThreshold { lid, port_num }
                | TrapDetails::ExcessiveBufferOverrun { lid, port_num }
                | TrapDetails::FlowControlUpdateWatchdog { lid, port_num },
            ) => (lid, port_num),
            _ => match r.slid() {
                0 | 0xFFFF => (notice.issuer_lid, 0),
                l => (l, 0),
            },
        };
        m.count_port_trap(lid, port);
    } else if r.mad.get(1) == Some(&0x03) {
        // SA class: base version, class, class version, method; AttributeID at 16.
        let (Some(&method), Some(&a0), Some(&a1)) = (r.mad.get(3), r.mad.get(16), r.mad.get(17))
        else {
            return;
        };
        let method = Method(method);
        if method.is_response() {
            return;
        }
        let attr = SaAttributeId(u16::from_be_bytes([a0, a1]));
        let mname = method
            .name()
            .map_or_else(|| format!("0x{:02x}", method.0), str::to_string);
        let aname = attr
            .name()
            .map_or_else(|| format!("0x{:04x}", attr.0), str::to_string);
        m.count_sa_request(&mname, &aname);
    }
}

/// Log a step of the instance thread that kept it from answering for [`SLOW_STEP`].
fn slow_step(what: &'static str, started: Instant) {
    let took = started.elapsed();
    if took >= SLOW_STEP {
        tracing::debug!(
            step = what,
            took_ms = u64::try_from(took.as_millis()).unwrap_or(u64::MAX),
            "instance thread busy: its work waits (SMInfo polls: the stand-in answers them)"
        );
    }
}

/// The same SA state: equal tables, a table absent on one side the same as an empty
/// one (the replica drops a table that becomes empty).
fn same_sa(a: &ibsm_core::sa::SaTables, b: &ibsm_core::sa::SaTables) -> bool {
    let empty = std::collections::BTreeMap::new();
    a.keys()
        .chain(b.keys())
        .all(|k| a.get(k).unwrap_or(&empty) == b.get(k).unwrap_or(&empty))
}

/// The node's settings from the instance's.
fn node_config(cfg: &InstanceConfig) -> NodeConfig {
    let mut election = ibsm_core::election::ElectionConfig::new(0);
    election.priority = cfg.priority;
    election.sm_key = cfg.sm_key;
    election.poll_interval = cfg.poll_interval;
    election.repoll_interval = cfg.repoll_interval;
    election.poll_retries = cfg.poll_retries;
    election.masterless_takeover = cfg.masterless_takeover;
    // A hung master (answers SMInfo, ActCount frozen) is lost after three of its light
    // sweeps by default, assumed to run at our own interval.
    election.stall_window = cfg.effective_hung_master_window();
    election.leader_heartbeat_grace = cfg.effective_leader_heartbeat_grace();
    election.sticky_priority = cfg.sticky_priority;
    election.sm_key_policy = cfg.sm_key_policy;
    election.trusted_sm_guids.clone_from(&cfg.trusted_sm_guids);
    // The SA snapshot a heavy sweep ends with is built on the worker: built here it
    // kept SMInfo waiting past the standbys' poll budget (see the crate doc).
    let mut subnet = cfg.subnet.clone();
    subnet.offload_sa_snapshot = true;
    NodeConfig {
        election,
        light_sweep_interval: cfg.light_sweep_interval,
        heavy_sweep_interval: cfg.heavy_sweep_interval,
        master_heavy_sweep_interval: cfg.master_heavy_sweep_interval,
        subnet,
        replicated: cfg.replication.is_some(),
        // The SA_Key is the SM_Key (both default to 1, as OpenSM's sm_key and sa_key).
        sa: ibsm_core::sa::SaConfig {
            sa_key: cfg.sm_key,
            ..ibsm_core::sa::SaConfig::default()
        },
        guid2lid_seed: cfg.guid2lid_seed.clone(),
    }
}
