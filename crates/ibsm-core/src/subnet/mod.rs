//! The master SM's subnet configurator: heavy and light sweeps, traps, and the
//! programming of every switch and end port. Sans-IO, driven like
//! [`crate::transactions::Transactions`].
//!
//! The daemon creates a [`SubnetManager`] and calls [`SubnetManager::become_master`]
//! when its election says MASTER (that sweep also sets PortInfo.ClientReregister
//! so end nodes re-register with the new SA), [`SubnetManager::stop`] when it stops
//! being master. It feeds every received MAD to [`SubnetManager::handle_incoming`],
//! calls [`SubnetManager::handle_timeout`] when [`SubnetManager::poll_timeout`]
//! passes, sends what [`SubnetManager::poll_transmit`] gives (directed route, or
//! LID-routed to `dlid` for TrapRepress) and acts on [`SubnetEvent`]s.
//!
//! # A heavy sweep
//!
//! 1. **Discovery**: [`crate::discovery::Discovery`] (NodeInfo, NodeDescription,
//!    SwitchInfo, PortInfo of every port) through the shared MAD agent, many SMPs
//!    in flight. A node that stops answering is retried by the agent, then left out.
//! 2. **LIDs**: [`ibsm_fabric::lid::LidManager`] (keeps LIDs by port GUID across sweeps;
//!    [`SubnetManager::import_guid2lid`] seeds it, e.g. from the replicated state).
//! 3. **Routing**: [`ibsm_fabric::routing::min_hop`] (default) or
//!    [`ibsm_fabric::routing::up_down`] ([`SubnetConfig::routing`]) -> LFT per switch;
//!    or the tables the switches already hold when nothing routing depends on
//!    changed (same cabling, no LID moved), so routes never move on a stable
//!    fabric. A new master handed [`Inherited`] state reads every LFT back first
//!    and adopts it when it matches the replicated digests (the `inherit` module).
//! 4. **Distribution**, all by directed route (it works before any LFT exists):
//!    SwitchInfo (LinearFDBTop, LifeTimeValue, clears PortStateChange), the LFT
//!    blocks that differ from what the previous sweep programmed, PortInfo (LID,
//!    LMC, MasterSMLID/SL, SubnetTimeOut, NeighborMTU, OperationalVLs) only where
//!    the port reads differently, P_Key tables, SLtoVL and VLArbitration defaults
//!    (only once per port while its state is remembered).
//! 5. **Activation**: every link port (switch external ports, CA ports) in Init
//!    goes Armed, then every Armed one Active. Each is a barrier: the next phase
//!    starts when the previous one has no SMP outstanding.
//!
//! LIDs and routing are computed inside one call; to time them without a clock
//! the core finishes each compute phase by asking to be called back at once
//! ([`SubnetManager::poll_timeout`] returns the current time), and the phase's
//! duration is the time between the two calls. With a real-clock driver that is
//! the CPU time spent; in virtual time it is 0.
//!
//! A programming SMP that goes unanswered after the agent's retries marks its
//! node dead for the rest of the sweep (its other SMPs are skipped), so one
//! dead switch costs one timeout chain, not one per SMP.
//!
//! # Light sweep (every `sweep_interval`)
//!
//! SubnGet(SwitchInfo) of every switch (PortStateChange), PortInfo of the SM's
//! own port and of the known SM ports. Anything changed or unanswered -> heavy sweep.
//! Also on demand: [`SubnetManager::start_light_sweep`]. "Changed" for a port
//! read: PortState other than what the last heavy sweep left (Active for a link
//! port it activated), a LID other than the assigned one, a MasterSMLID other
//! than ours (another SM configured it), or, for a known SM port,
//! CapabilityMask.IsSM gone (that SM stopped). A *new* SM port is not looked for
//! here: its trap 144 (IsSM set) or the periodic heavy sweep finds it.
//!
//! Activation does not make the next light sweep heavy: the heavy sweep's
//! SwitchInfo Set clears PortStateChange (write 1) before programming, and port
//! state changes made by SubnSet do not raise it again (IBA 14.2.5.4; ibsim and
//! `ibsm-sim` both behave so, checked on ibsim with `smpquery switchinfo` after
//! subnet up). So neither a second clear after activation nor "ignore what we
//! caused" is needed, and both would cost something: a clear after activation
//! would hide a real link change between the last Set and the clear, and
//! ignoring changes on switches we touched would hide one for a whole sweep
//! interval. What made the first light sweep after subnet up heavy-sweep was the
//! SM's own port read Active against the Init its discovery saw; that port is
//! expected Active now. Test: `light_sweep_right_after_subnet_up_starts_no_heavy_sweep`.
//!
//! A new master that already holds a fresh discovery of the fabric (the daemon's
//! own, from while it was DISCOVERING) hands it to
//! [`SubnetManager::become_master_with_discovery`], so start-up discovers once.
//!
//! # Traps
//!
//! Every SubnTrap(Notice) is answered with SubnTrapRepress, whatever it says, so
//! the sender stops repeating it: a directed-route trap along its return path, a
//! LID-routed one to the LRH SLID it arrived from (the trap's real source, given
//! with [`SubnetManager::handle_incoming_from`]), not to the notice's IssuerLID,
//! which the sender fills in and may get wrong (a port that lost its LID, a
//! forged notice: a repress sent there reaches an innocent port, or nobody, and
//! the real source keeps repeating). Without a known SLID the IssuerLID is used.
//!
//! Storms ([`storm`]): traps are rate-limited per source LID (token bucket,
//! [`SubnetConfig::trap_rate`] / [`SubnetConfig::trap_burst`]). A trap over the
//! rate is still repressed (an unrepressed trap is repeated by its sender, which
//! only feeds the storm) and counted ([`SubnetMetrics::traps_rate_limited`]); it is
//! not logged and raises no event, but a sweep-worthy one still requests the
//! (coalesced, held-down) heavy sweep, so no change is lost. Per-trap log lines
//! are sampled: a few per [`TRAP_LOG_WINDOW`], then one line with the count held
//! back. A trap-triggered heavy sweep starts no sooner than
//! [`SubnetConfig::trap_sweep_hold_down`] after the previous heavy sweep ended:
//! the request is kept and the sweep deferred ([`SubnetMetrics::trap_sweeps_deferred`]),
//! so a port flapping every few milliseconds costs one sweep per hold-down, not
//! back-to-back sweeps; an operator's, a partition change's or a light sweep's
//! request is not held down (it replaces a held trap request).
//!
//! Then, as OpenSM's trap receiver does:
//! * 128 (link state change), 145 (SystemImageGUID changed): a heavy sweep.
//! * 144 (capability mask / local changes): reported ([`SubnetEvent::Trap144`])
//!   for the election, and a heavy sweep, whose [`SweepReport::sm_ports`] is the
//!   refreshed list of SM ports (IsSM set or cleared) the daemon hands to
//!   `Election::handle_sweep`; it also rereads a changed NodeDescription.
//! * 129/130/131 (link integrity, buffer overrun, flow-control watchdog on a
//!   port): counted per (LID, port, trap) ([`SubnetMetrics::port_error_traps`])
//!   and logged at warn on the 1st, 10th, 100th... within
//!   [`PORT_ERROR_WINDOW`]; no sweep: they say a link is noisy, not that the
//!   topology changed (a link that actually drops raises 128/PortStateChange).
//! * 64-67 (GID in/out of service, multicast group created/deleted) are the
//!   SA's own notices to its subscribers; one arriving from a port is logged and
//!   dropped, never forwarded. This module *produces* 64/65
//!   ([`SubnetEvent::Notice`]) after a sweep that found end ports appear or
//!   disappear.
//!
//! Heavy sweeps requested by traps coalesce.
//!
//! # Partitions at run time
//!
//! [`SubnetManager::set_partitions`] replaces the configured partitions (the
//! daemon feeds it the replicated ones, so an API change reaches the fabric
//! without a restart and survives a failover). It validates like the start-up
//! configuration and requests a heavy sweep; P_Key tables are sent where the
//! wanted table differs from the one recorded as programmed (the record is
//! per (node, port) and holds the table *content*, so a changed partition set
//! always shows as a difference). A set arriving while a sweep distributes waits
//! for the next sweep's distribution, so the record never holds a table that was
//! not the one sent.
//!
//! # M_Key
//!
//! [`SubnetConfig::m_key`] (OpenSM's `m_key`, `m_key_protection_level`,
//! `m_key_lease_period`) is written into every PortInfo Set (configuration and
//! activation alike), so every CA port and switch port 0 ends up holding it and a
//! rogue SM or tool without it cannot reprogram them (IBA 14.2.4: a port's SMA
//! discards a Set, and from level 2 a Get, that carries another key). The MAD
//! agent puts a key on every SMP it sends, discovery included (see
//! [`crate::transactions`]): how the first sweep works on each kind of fabric:
//! * fresh (every M_Key 0): any key passes, the sweep programs ours;
//! * already keyed with ours (a restart, a failover): our key passes;
//! * keyed with another key the replicated state knows
//!   ([`SubnetManager::set_fabric_m_key`], e.g. the operator changed the key, or a
//!   previous master's): at levels 0/1 discovery reads anyway, the Set with our key
//!   goes unanswered and its retry carries the old key, which rekeys the port;
//!   the agent then learns the new key for that route. At level 2 the discovery
//!   Gets take the same one extra timeout per node.
//! * keyed with a key nobody gave us: at level 0 PortInfo shows it and the agent
//!   uses it; otherwise those ports cannot be configured, by design (the lease
//!   period, if the owner set one, eventually lifts the protection).
//!
//! SMInfo is not guarded by the SMA's M_Key check (it is the SM's own attribute;
//! the election applies IBA's SM_Key disclosure rule itself), so standby polls
//! and election traffic keep working whatever the key and level.

mod config;
mod events;
mod inherit;
mod metrics;
mod program;
mod routing_job;
pub mod storm;
mod sweep;
#[cfg(test)]
mod tests;

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::Duration;

use ibsm_fabric::NodeIdx;
use ibsm_mad::attr::{CapabilityMask, Notice, NoticeType, PortState, ProducerType, TrapDetails};
use ibsm_mad::{AttributeId, Method, PortInfo, Smp, SmpRoute, SwitchInfo};

use crate::discovery::{Discovery, DiscoveryResult};
use crate::election::{DrRoute, SmPort, SmRoute};
use crate::transactions::{Event, Transactions};

pub use config::{
    ConfigError, MKeyConfig, Membership, Partition, PartitionMember, RoutingEngine, SubnetConfig,
};
pub use events::{Outgoing, PhaseTimes, SubnetEvent, SweepKind, SweepReason, SweepReport};
use ibsm_fabric::lid::{LidConfig, LidManager};
pub use ibsm_fabric::routing::ForwardingTables;
use ibsm_fabric::routing::{self};
use inherit::Readback;
pub use inherit::{lft_digest, links_of, InheritReport, Inherited, Link};
use metrics::PORT_ERROR_KEYS;
pub use metrics::{SubnetMetrics, PORT_ERROR_WINDOW, TRAP_LOG_LINES, TRAP_LOG_WINDOW};
use routing_job::compute_routing;
pub use routing_job::{RoutingDone, RoutingJob};
use sweep::{LightOp, Op, PortExpect, ProgStage, Programmed, Stage, Sweep, Tagged, Token};

/// The master SM's subnet configurator (see the module doc).
#[derive(Debug)]
pub struct SubnetManager {
    cfg: SubnetConfig,
    tx: Transactions<Tagged>,
    /// Generation of the requests that count: [`SubnetManager::abandon_prepared`]
    /// moves it on, so answers to an abandoned sweep's requests still in flight are
    /// dropped instead of being fed to the next sweep (the agent, and its TIDs,
    /// carry on: a fresh agent would reuse TIDs those answers still carry).
    generation: u32,
    stage: Stage,
    active: bool,
    new_master: bool,
    subnet_up_sent: bool,
    heavy_requested: Option<SweepReason>,
    reason: SweepReason,
    next_light: Option<Duration>,
    wake_now: Option<Duration>,
    marks: [Duration; 6],
    lids: LidManager,
    programmed: Programmed,
    last: Option<DiscoveryResult>,
    last_end_ports: HashSet<u64>,
    light_smps_start: u64,
    /// Traps 129/130/131 per (LID, port, trap): count and time of the last one.
    port_errors: HashMap<(u16, u8, u16), (u64, Duration)>,
    transmit: VecDeque<Outgoing>,
    events: VecDeque<SubnetEvent>,
    metrics: SubnetMetrics,
    smps_reported: u64,
    /// What the previous master left, for the next mastership's first heavy sweep.
    inherit: Option<Inherited>,
    inherit_report: Option<InheritReport>,
    /// [`SubnetManager::prepare_takeover`] started the read-only part of a
    /// takeover at this time; `become_master` continues it.
    preparing: Option<Duration>,
    /// Partitions set while a sweep was distributing: they replace
    /// `cfg.partitions` when the next sweep starts programming (see
    /// [`SubnetManager::set_partitions`]).
    pending_partitions: Option<Vec<Partition>>,
    /// Routing computations for the driver (`offload_routing`), and the last id.
    routing_jobs: VecDeque<RoutingJob>,
    next_routing_job: u64,
    /// The M_Key the fabric was left with by an earlier master (0: none known),
    /// tried after the configured one (see the module doc, M_Key).
    fabric_m_key: u64,
    /// Per source LID trap rate limit.
    trap_limiter: storm::TrapLimiter,
    /// Per-trap log lines.
    trap_log: storm::LogSampler,
    /// When the last heavy sweep ended (the trap hold-down counts from it).
    last_heavy_end: Option<Duration>,
}

impl SubnetManager {
    /// A configurator that does nothing until [`SubnetManager::become_master`].
    pub fn new(cfg: SubnetConfig) -> Result<SubnetManager, ConfigError> {
        cfg.validate()?;
        let mut sm = SubnetManager {
            trap_limiter: storm::TrapLimiter::new(cfg.trap_rate, cfg.trap_burst),
            trap_log: storm::LogSampler::new(TRAP_LOG_WINDOW, TRAP_LOG_LINES),
            last_heavy_end: None,
            tx: Transactions::new(cfg.transactions.clone()),
            generation: 0,
            lids: LidManager::new(LidConfig { lmc: cfg.lmc }),
            cfg,
            stage: Stage::Idle,
            active: false,
            new_master: false,
            subnet_up_sent: false,
            heavy_requested: None,
            reason: SweepReason::Requested,
            next_light: None,
            wake_now: None,
            marks: [Duration::ZERO; 6],
            programmed: Programmed::default(),
            last: None,
            last_end_ports: HashSet::new(),
            light_smps_start: 0,
            port_errors: HashMap::new(),
            transmit: VecDeque::new(),
            events: VecDeque::new(),
            metrics: SubnetMetrics::default(),
            smps_reported: 0,
            inherit: None,
            inherit_report: None,
            preparing: None,
            pending_partitions: None,
            routing_jobs: VecDeque::new(),
            next_routing_job: 0,
            fabric_m_key: 0,
        };
        sm.apply_m_keys();
        Ok(sm)
    }

    /// The configured M_Key protection (what every PortInfo Set programs).
    pub fn m_key(&self) -> MKeyConfig {
        self.cfg.m_key
    }

    /// The M_Key the fabric is believed to be programmed with, from the
    /// replicated state of an earlier master. When it differs from the
    /// configured key it is tried second on every SMP (a port still holding it
    /// takes the SubnSet(PortInfo) that rekeys it); the configured key stays the
    /// one programmed. 0: no earlier key.
    pub fn set_fabric_m_key(&mut self, key: u64) {
        if key != self.fabric_m_key {
            tracing::info!(
                differs = key != self.cfg.m_key.key,
                "M_Key the fabric was left with taken over"
            );
        }
        self.fabric_m_key = key;
        self.apply_m_keys();
    }

    fn apply_m_keys(&mut self) {
        self.tx.set_m_keys(&[self.cfg.m_key.key, self.fabric_m_key]);
    }

    /// The partitions this SM programs (besides the default one): the last ones
    /// given to [`SubnetManager::set_partitions`], or the configured ones.
    pub fn partitions(&self) -> &[Partition] {
        self.pending_partitions
            .as_deref()
            .unwrap_or(&self.cfg.partitions)
    }

    /// The partitions the sweep in progress distributes, or the next one will
    /// (differs from [`SubnetManager::partitions`] only while a set waits for a
    /// distribution to end). At [`SubnetEvent::SweepDone`] of a heavy sweep: the
    /// ones that sweep programmed.
    pub fn sweep_partitions(&self) -> &[Partition] {
        &self.cfg.partitions
    }

    /// Replace the partitions at run time (e.g. from the API or the replicated
    /// state). They are validated exactly as [`SubnetConfig::validate`] does at
    /// construction; a refused set changes nothing. A set equal to the current
    /// one (same partitions in the same order) does nothing either. Otherwise,
    /// while master, a heavy sweep ([`SweepReason::PartitionsChanged`]) follows,
    /// whose distribution writes every P_Key table (CA ports, and switch ports
    /// that enforce for a CA) that now differs from what was programmed: new
    /// members get the P_Key, removed members lose it. Not master: the
    /// partitions are kept for the first sweep of a mastership.
    ///
    /// Why the swap may wait: a sweep that is already distributing has decided
    /// (and sent) P_Key tables from the old partitions, and records each answered
    /// Set from the partitions current at that moment. Changing them under it
    /// would record tables that were never sent, and the cache of programmed
    /// tables would hide the change from the next sweep. So during distribution
    /// the new set waits and takes effect when the next sweep starts programming;
    /// before that point (discovery, LIDs, routing) the running sweep uses it.
    pub fn set_partitions(
        &mut self,
        now: Duration,
        partitions: Vec<Partition>,
    ) -> Result<(), ConfigError> {
        let candidate = SubnetConfig {
            partitions,
            ..self.cfg.clone()
        };
        candidate.validate()?;
        let partitions = candidate.partitions;
        if partitions.as_slice() == self.partitions() {
            tracing::debug!(
                partitions = partitions.len(),
                "partitions unchanged: nothing to reprogram"
            );
            return Ok(());
        }
        tracing::info!(
            partitions = partitions.len(),
            pkeys = ?partitions
                .iter()
                .map(|p| format!("{:#06x}", p.p_key))
                .collect::<Vec<_>>(),
            master = self.active,
            "partitions changed at run time"
        );
        match self.stage {
            Stage::Programming(_) => {
                self.pending_partitions = Some(partitions);
                if self.active {
                    self.request_heavy(SweepReason::PartitionsChanged);
                }
            }
            Stage::Discovering(_)
            | Stage::LidsDone(_)
            | Stage::ReadingLfts(..)
            | Stage::Routing(..)
            | Stage::RoutingDone(_) => {
                // This sweep has not decided any P_Key table yet: it uses them.
                self.pending_partitions = None;
                self.cfg.partitions = partitions;
            }
            Stage::Idle | Stage::Light { .. } => {
                self.pending_partitions = None;
                self.cfg.partitions = partitions;
                if self.active {
                    self.request_heavy(SweepReason::PartitionsChanged);
                }
            }
        }
        self.pump(now);
        Ok(())
    }

    /// Hand over what the previous master left (replicated LFT digests and
    /// cabling; call before [`SubnetManager::become_master`]): the first heavy
    /// sweep reads every switch's LFT back, verifies it and rewrites only what
    /// differs, or adopts the tables as they are when nothing changed. See
    /// [`Inherited`] and the `inherit` module for why.
    pub fn inherit(&mut self, inherited: Inherited) {
        self.inherit = Some(inherited);
    }

    /// Seed remembered LID assignments (OpenSM's guid2lid text, e.g. from the
    /// replicated state): a port without a LID gets its remembered one back,
    /// and no remembered LID is given to another port.
    pub fn import_guid2lid(
        &mut self,
        text: &str,
    ) -> Result<usize, ibsm_fabric::lid::Guid2LidError> {
        self.lids.import_guid2lid(text)
    }

    /// What the last read-back of inherited LFTs found.
    pub fn last_inherit(&self) -> Option<&InheritReport> {
        self.inherit_report.as_ref()
    }

    /// Every LFT programmed (or verified) so far: (switch NodeGUID, LinearFDBTop, table).
    pub fn programmed_lfts(&self) -> impl Iterator<Item = (u64, u16, &[u8])> + '_ {
        self.programmed
            .lfts
            .iter()
            .map(|(g, (top, t))| (*g, *top, t.as_slice()))
    }

    /// Start the read-only half of a takeover before the election has decided:
    /// discovery, LIDs (in memory) and the read-back of every switch's LFT, with
    /// no Set on the wire. It stops before the read tables are compared with the
    /// digests; [`SubnetManager::become_master`] (after a fresh
    /// [`SubnetManager::inherit`]) continues from where it got, so the comparison
    /// uses the replicated state as it is at MASTER. [`SubnetManager::stop`]
    /// drops it (another SM won). Ignored while master or sweeping.
    ///
    /// Why: on a k=16 fat tree discovery plus read-back are ~15k SMPs, and the
    /// fabric (not the window) bounds their rate; a standby that has declared its
    /// master lost (DISCOVERING) is one SMInfo timeout away from MASTER, and using
    /// that time is what brings "fabric verified" under 0.5 s after a SIGKILL.
    /// Everything read is read after the old master stopped answering.
    pub fn prepare_takeover(&mut self, now: Duration, inherited: Inherited) {
        if self.active || !matches!(self.stage, Stage::Idle) {
            return;
        }
        self.inherit = Some(inherited);
        self.inherit_report = None;
        self.preparing = Some(now);
        self.programmed = Programmed::default();
        self.heavy_requested = None;
        self.start_heavy(now, SweepReason::BecameMaster);
        tracing::info!("takeover prepared: discovery and LFT read-back start before MASTER");
        self.pump(now);
    }

    /// True between [`SubnetManager::prepare_takeover`] and `become_master`/`stop`:
    /// the driver must feed responses and timeouts as while active.
    pub fn is_preparing(&self) -> bool {
        self.preparing.is_some()
    }

    /// Drop a prepared takeover (the fabric or the replicated LIDs changed since
    /// it started, or it is too old) without stopping: the agent carries on, so
    /// the answers to its requests still in flight cannot be mistaken for the
    /// next sweep's, and are dropped. Call [`SubnetManager::become_master`] next
    /// for a sweep from scratch; [`SubnetManager::stop`] when not becoming master.
    pub fn abandon_prepared(&mut self) {
        if self.preparing.take().is_none() {
            return;
        }
        self.generation = self.generation.wrapping_add(1);
        self.stage = Stage::Idle;
        self.wake_now = None;
        self.inherit_report = None;
    }

    /// When the prepared takeover started, if one is in progress.
    pub fn preparing_since(&self) -> Option<Duration> {
        self.preparing
    }

    /// The election made us MASTER: start a heavy sweep that also sets
    /// ClientReregister on every end port, then emit [`SubnetEvent::SubnetUp`].
    /// After [`SubnetManager::prepare_takeover`], that sweep is the prepared one,
    /// continued.
    pub fn become_master(&mut self, now: Duration) {
        if self.preparing.is_some() {
            if matches!(
                self.stage,
                Stage::Discovering(_) | Stage::LidsDone(_) | Stage::ReadingLfts(..)
            ) && self.inherit.is_some()
            {
                self.active = true;
                self.new_master = true;
                self.subnet_up_sent = false;
                self.preparing = None;
                tracing::info!("master: continuing the prepared takeover sweep");
                self.pump(now);
                return;
            }
            self.abandon_prepared();
        }
        self.active = true;
        self.new_master = true;
        self.subnet_up_sent = false;
        // A new mastership cannot trust what an earlier one programmed.
        self.programmed = Programmed::default();
        self.request_heavy(SweepReason::BecameMaster);
        self.pump(now);
    }

    /// [`SubnetManager::become_master`] whose first heavy sweep starts from
    /// `discovery` instead of walking the fabric again: LIDs, routing, programming and
    /// activation run on it at once (its discovery phase time is 0).
    ///
    /// Why: a daemon discovers the fabric while DISCOVERING (to find the other SMs),
    /// and at start-up it wins the election moments later; a second discovery of the
    /// same fabric would only double the time to "subnet up". The caller must only
    /// hand over a discovery that is *fresh*: run from this SM's own port with the
    /// same [`SubnetConfig::discovery`], finished moments ago, with no trap and no
    /// other master since it started. Programming skips what a port already reads as
    /// wanted, so a stale PortInfo (changed by another SM after the read) would leave
    /// that port unconfigured until a heavy sweep reads it again. Falls back to
    /// [`SubnetManager::become_master`] if a sweep is in progress.
    pub fn become_master_with_discovery(&mut self, now: Duration, discovery: DiscoveryResult) {
        if !matches!(self.stage, Stage::Idle) || self.preparing.is_some() {
            self.become_master(now);
            return;
        }
        self.active = true;
        self.new_master = true;
        self.subnet_up_sent = false;
        self.programmed = Programmed::default();
        self.heavy_requested = None;
        self.start_heavy(now, SweepReason::BecameMaster);
        tracing::info!(
            nodes = discovery.topology.len(),
            "heavy sweep starts from the discovery handed over (no second discovery)"
        );
        self.marks[1] = now;
        let sweep = self.after_discovery(discovery);
        self.wake_now = Some(now);
        self.stage = Stage::LidsDone(sweep);
        self.pump(now);
    }

    /// No longer master: drop the sweep in progress; nothing more is sent.
    pub fn stop(&mut self) {
        if let Some(p) = self.pending_partitions.take() {
            self.cfg.partitions = p;
        }
        self.active = false;
        self.preparing = None;
        self.inherit = None;
        self.stage = Stage::Idle;
        self.heavy_requested = None;
        self.next_light = None;
        self.wake_now = None;
        self.tx = Transactions::new(self.cfg.transactions.clone());
        self.apply_m_keys();
        self.transmit.clear();
    }

    /// Ask for a heavy sweep (now if idle, else right after the current one).
    pub fn start_heavy_sweep(&mut self, now: Duration) {
        if !self.active {
            self.active = true;
        }
        self.request_heavy(SweepReason::Requested);
        self.pump(now);
    }

    /// Run a light sweep now (SwitchInfo of every switch, PortInfo of our port and of
    /// the known SM ports) instead of waiting for [`SubnetConfig::sweep_interval`]. A
    /// sweep in progress (or a heavy one already requested) stands for it. A change it
    /// sees requests a heavy sweep, as a periodic light sweep does; before the first
    /// heavy sweep there is nothing to compare with, so a heavy sweep runs.
    pub fn start_light_sweep(&mut self, now: Duration) {
        if !self.active {
            return;
        }
        if matches!(self.stage, Stage::Idle) && self.heavy_requested.is_none() {
            self.start_light(now);
        }
        self.pump(now);
    }

    /// True while we act as master.
    pub fn is_active(&self) -> bool {
        self.active
    }

    /// True while a sweep is in progress.
    pub fn is_sweeping(&self) -> bool {
        !matches!(self.stage, Stage::Idle)
    }

    /// The last completed discovery (topology with assigned LIDs, DR paths, PortInfo).
    pub fn last_discovery(&self) -> Option<&DiscoveryResult> {
        self.last.as_ref()
    }

    /// LFTs programmed so far, by switch NodeGUID.
    pub fn programmed_lft(&self, node_guid: u64) -> Option<&[u8]> {
        self.programmed
            .lfts
            .get(&node_guid)
            .map(|(_, v)| v.as_slice())
    }

    /// Counters and the last phase times.
    pub fn metrics(&self) -> SubnetMetrics {
        let mut m = self.metrics;
        m.smps_sent = self.tx.counters().sent;
        m
    }

    /// SMPs initiated since the last call (for `Election::handle_smps_sent`, ActCount).
    pub fn take_smps_sent(&mut self) -> u32 {
        let sent = self.tx.counters().sent + self.metrics.trap_represses;
        let n = sent.saturating_sub(self.smps_reported);
        self.smps_reported = sent;
        u32::try_from(n).unwrap_or(u32::MAX)
    }

    /// Feed a MAD received from the device (its source LID unknown: a LID-routed
    /// trap's repress then goes to the notice's IssuerLID). Prefer
    /// [`SubnetManager::handle_incoming_from`].
    pub fn handle_incoming(&mut self, now: Duration, bytes: &[u8]) {
        self.handle_incoming_from(now, bytes, 0);
    }

    /// Feed a MAD received from the device with the LRH SLID it came from
    /// (`ReceivedMad::slid`; 0 or 0xFFFF when not known): a LID-routed trap is
    /// repressed there, and rate-limited per that source.
    pub fn handle_incoming_from(&mut self, now: Duration, bytes: &[u8], slid: u16) {
        if !self.running() {
            return;
        }
        let smp = match Smp::decode(bytes) {
            Ok(smp) => smp,
            Err(err) => {
                tracing::debug!(%err, "dropping undecodable MAD");
                return;
            }
        };
        if smp.method == Method::TRAP && smp.attr_id == AttributeId::NOTICE {
            self.handle_trap_from(now, &smp, slid);
        } else if smp.method.0 & 0x80 != 0 {
            self.tx.handle_incoming(now, bytes);
        } else {
            self.events.push_back(SubnetEvent::Unsolicited(smp));
        }
        self.pump(now);
    }

    /// A SubnTrap(Notice) whose source LID is not known: see
    /// [`SubnetManager::handle_trap_from`].
    pub fn handle_trap(&mut self, now: Duration, smp: &Smp) {
        self.handle_trap_from(now, smp, 0);
    }

    /// A SubnTrap(Notice) that arrived from LRH SLID `slid` (0/0xFFFF: unknown):
    /// repress it to its real source, rate-limit it per source, and act on it
    /// (module doc, "Traps").
    pub fn handle_trap_from(&mut self, now: Duration, smp: &Smp, slid: u16) {
        self.metrics.traps += 1;
        let notice = match smp.attribute::<Notice>() {
            Ok(n) => n,
            Err(err) => {
                if self.trap_log.allow(now) {
                    tracing::debug!(%err, slid, "undecodable trap");
                } else {
                    self.metrics.trap_logs_suppressed += 1;
                }
                return;
            }
        };
        let issuer_lid = notice.issuer_lid;
        let source = match slid {
            0 | 0xFFFF => issuer_lid,
            l => l,
        };
        // Repress: same TID, attribute and modifier, back to the real source.
        let repress = match smp.route {
            SmpRoute::Lid => {
                let mut r = *smp;
                r.method = Method::TRAP_REPRESS;
                r.status = 0;
                (source != 0).then_some((Some(source), r))
            }
            SmpRoute::Directed(_) => {
                let mut r = smp.response();
                r.method = Method::TRAP_REPRESS;
                Some((None, r))
            }
        };
        if let Some((dlid, r)) = repress {
            self.transmit.push_back(Outgoing {
                dlid,
                mad: r.encode(),
            });
            self.metrics.trap_represses += 1;
        }
        let trap = notice.trap_number();
        let admitted = self.trap_limiter.admit(now, source);
        if !admitted {
            self.metrics.traps_rate_limited += 1;
        }
        // Log lines: sampled across all traps; a rate-limited trap logs nothing.
        let log = admitted && {
            let ok = self.trap_log.allow(now);
            if !ok {
                self.metrics.trap_logs_suppressed += 1;
            }
            ok
        };
        if log && source != issuer_lid && smp.route == SmpRoute::Lid {
            tracing::warn!(
                slid = source,
                issuer_lid,
                ?trap,
                "trap's IssuerLID differs from the LID it came from: repressed to the source"
            );
        }
        match notice.details() {
            Some(TrapDetails::LinkStateChange { lid }) => {
                if log {
                    tracing::info!(issuer_lid, lid, "trap 128 (link state change): heavy sweep");
                }
                self.request_trap_sweep(now, 128);
            }
            Some(TrapDetails::CapabilityMaskChanged(t)) => {
                if log {
                    tracing::info!(
                        issuer_lid,
                        lid = t.lid,
                        capability_mask = format_args!("{:#010x}", t.capability_mask.0),
                        change_flags = format_args!("{:#06x}", t.change_flags),
                        "trap 144 (capability mask / local changes): heavy sweep"
                    );
                }
                if admitted {
                    self.events.push_back(SubnetEvent::Trap144 {
                        issuer_lid,
                        trap: t,
                    });
                }
                self.request_trap_sweep(now, 144);
            }
            Some(TrapDetails::SystemImageGuidChanged { lid, .. }) => {
                if log {
                    tracing::info!(
                        issuer_lid,
                        lid,
                        "trap 145 (SystemImageGUID changed): heavy sweep"
                    );
                }
                self.request_trap_sweep(now, 145);
            }
            Some(
                TrapDetails::LinkIntegrityThreshold { lid, port_num }
                | TrapDetails::ExcessiveBufferOverrun { lid, port_num }
                | TrapDetails::FlowControlUpdateWatchdog { lid, port_num },
            ) => {
                if admitted {
                    self.port_error_trap(now, trap.unwrap_or(0), lid, port_num);
                }
            }
            Some(
                TrapDetails::GidInService { .. }
                | TrapDetails::GidOutOfService { .. }
                | TrapDetails::McGroupCreated { .. }
                | TrapDetails::McGroupDeleted { .. },
            ) => {
                if log {
                    tracing::warn!(
                        trap,
                        issuer_lid,
                        "an SA notice (64-67) arrived as a trap; only the SM produces these: ignored"
                    );
                }
            }
            None => {
                if log {
                    tracing::info!(
                        trap,
                        issuer_lid,
                        "trap without an action here (vendor or unknown): repressed"
                    );
                }
            }
        }
        self.pump(now);
    }

    /// A trap asks for a heavy sweep (`trap` is its number, for the logs): it
    /// coalesces with a requested one and is held down after the last heavy sweep
    /// (module doc, "Traps"). For traps another module decoded (trap 144 the
    /// daemon hands the election) as well as this module's own.
    pub fn request_trap_sweep(&mut self, now: Duration, trap: u16) {
        if self.held_down(now, SweepReason::Trap(trap)) && self.heavy_requested.is_none() {
            self.metrics.trap_sweeps_deferred += 1;
            tracing::debug!(trap, "trap-triggered heavy sweep deferred by the hold-down");
        }
        self.request_heavy(SweepReason::Trap(trap));
        self.pump(now);
    }

    /// A heavy sweep for `reason` must wait: a trap's, within the hold-down
    /// after the last heavy sweep ended.
    fn held_down(&self, now: Duration, reason: SweepReason) -> bool {
        matches!(reason, SweepReason::Trap(_)) && self.hold_down_until().is_some_and(|t| now < t)
    }

    fn hold_down_until(&self) -> Option<Duration> {
        let hold = self.cfg.trap_sweep_hold_down;
        (!hold.is_zero())
            .then_some(self.last_heavy_end)
            .flatten()
            .map(|end| end + hold)
    }

    /// Log how many trap lines sampling held back, once their window is over.
    fn flush_trap_log(&mut self, now: Duration) {
        if let Some(n) = self.trap_log.take_suppressed(now) {
            tracing::warn!(
                suppressed = n,
                window_secs = TRAP_LOG_WINDOW.as_secs(),
                rate_limited_total = self.metrics.traps_rate_limited,
                "trap storm: {n} trap log line(s) held back"
            );
        }
    }

    /// Trap 129/130/131: count it per (LID, port, trap) and log the 1st, 10th, 100th...
    fn port_error_trap(&mut self, now: Duration, trap: u16, lid: u16, port: u8) {
        self.metrics.port_error_traps += 1;
        if self.port_errors.len() >= PORT_ERROR_KEYS {
            self.port_errors
                .retain(|_, (_, last)| now.saturating_sub(*last) <= PORT_ERROR_WINDOW);
            if self.port_errors.len() >= PORT_ERROR_KEYS {
                self.port_errors.clear();
            }
        }
        let entry = self
            .port_errors
            .entry((lid, port, trap))
            .or_insert((0, now));
        if now.saturating_sub(entry.1) > PORT_ERROR_WINDOW {
            entry.0 = 0;
        }
        entry.0 += 1;
        entry.1 = now;
        let count = entry.0;
        let what = match trap {
            129 => "local link integrity threshold",
            130 => "excessive buffer overrun threshold",
            _ => "flow control update watchdog",
        };
        // 1, 10, 100, ...: a babbling port must not flood the log.
        let mut c = count;
        while c >= 10 && c.is_multiple_of(10) {
            c /= 10;
        }
        if c == 1 {
            tracing::warn!(trap, lid, port, count, "trap {trap} ({what}) on a port");
        }
    }

    /// Traps 129/130/131 counted for (LID, port, trap) in the current window.
    pub fn port_error_count(&self, lid: u16, port: u8, trap: u16) -> u64 {
        self.port_errors
            .get(&(lid, port, trap))
            .map_or(0, |(n, _)| *n)
    }

    /// Call when [`SubnetManager::poll_timeout`] has passed.
    pub fn handle_timeout(&mut self, now: Duration) {
        if !self.running() {
            return;
        }
        self.wake_now = None;
        self.tx.handle_timeout(now);
        self.flush_trap_log(now);
        // A requested heavy sweep (held down, or about to start) stands for a light one.
        if matches!(self.stage, Stage::Idle)
            && self.heavy_requested.is_none()
            && self.next_light.is_some_and(|t| t <= now)
        {
            self.start_light(now);
        }
        self.pump(now);
    }

    /// When to call [`SubnetManager::handle_timeout`] next.
    pub fn poll_timeout(&self) -> Option<Duration> {
        if !self.running() {
            return None;
        }
        let idle = matches!(self.stage, Stage::Idle);
        let held = match self.heavy_requested {
            Some(r @ SweepReason::Trap(_)) if idle => {
                self.hold_down_until().filter(|_| self.held_down_at_all(r))
            }
            _ => None,
        };
        [
            self.tx.poll_timeout(),
            self.wake_now,
            if idle { self.next_light } else { None },
            held,
            self.trap_log.next_report(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// The next SMP to send.
    pub fn poll_transmit(&mut self) -> Option<Outgoing> {
        if let Some(o) = self.transmit.pop_front() {
            return Some(o);
        }
        self.tx
            .poll_transmit()
            .map(|mad| Outgoing { dlid: None, mad })
    }

    /// The next event.
    /// With [`SubnetConfig::offload_routing`]: the next routing computation to run
    /// (on any thread: it owns its inputs); give its result to
    /// [`SubnetManager::handle_routing_done`]. A result for a sweep that was dropped
    /// meanwhile is ignored.
    pub fn poll_routing_job(&mut self) -> Option<RoutingJob> {
        self.routing_jobs.pop_front()
    }

    /// A [`RoutingJob`]'s result: the waiting sweep goes on to distribution at the
    /// next [`SubnetManager::handle_timeout`] (its timer is due at once).
    pub fn handle_routing_done(&mut self, now: Duration, done: RoutingDone) {
        let waiting = matches!(&self.stage, Stage::Routing(_, id) if *id == done.id);
        if !waiting {
            tracing::debug!(job = done.id, "routing result for a dropped sweep ignored");
            return;
        }
        if let Stage::Routing(mut sweep, _) = std::mem::replace(&mut self.stage, Stage::Idle) {
            sweep.tables = done.tables;
            sweep.report.lft_top = sweep.tables.lft_top;
            self.wake_now = Some(now);
            self.stage = Stage::RoutingDone(sweep);
        }
    }

    pub fn poll_event(&mut self) -> Option<SubnetEvent> {
        self.events.pop_front()
    }

    // ---- internals ------------------------------------------------------------

    /// Master, or preparing a takeover (read-only).
    fn running(&self) -> bool {
        self.active || self.preparing.is_some()
    }

    fn request_heavy(&mut self, reason: SweepReason) {
        match self.heavy_requested {
            None => self.heavy_requested = Some(reason),
            // A held-down trap request gives way to one that is not held down.
            Some(SweepReason::Trap(_)) if !matches!(reason, SweepReason::Trap(_)) => {
                self.heavy_requested = Some(reason);
            }
            Some(_) => {}
        }
    }

    /// Whether `reason` is subject to the hold-down at all.
    fn held_down_at_all(&self, reason: SweepReason) -> bool {
        matches!(reason, SweepReason::Trap(_)) && !self.cfg.trap_sweep_hold_down.is_zero()
    }

    fn start_heavy(&mut self, now: Duration, reason: SweepReason) {
        tracing::info!(?reason, "heavy sweep");
        self.reason = reason;
        self.marks = [now; 6];
        self.light_smps_start = self.tx.counters().sent;
        self.stage = Stage::Discovering(Box::new(Discovery::new(self.cfg.discovery.clone())));
    }

    fn start_light(&mut self, now: Duration) {
        let Some(last) = self.last.as_ref() else {
            self.request_heavy(SweepReason::LightSweepChange);
            return;
        };
        self.next_light = None;
        self.light_smps_start = self.tx.counters().sent;
        let mut outstanding = 0;
        let mut reqs: Vec<(Smp, Token)> = Vec::new();
        for (idx, node) in last.topology.iter() {
            let Some(path) = last.path(idx) else { continue };
            if node.is_switch() {
                if let Ok(smp) = Smp::try_get_dr(path, AttributeId::SWITCH_INFO, 0, 0) {
                    reqs.push((smp, Token::Light(LightOp::SwitchInfo)));
                }
            }
        }
        let master_sm_lid = last
            .local
            .and_then(|(n, p)| last.topology.node(n)?.port(p).map(|p| p.lid))
            .unwrap_or(0);
        let expect = |node: NodeIdx, port: u8, sm: bool| PortExpect {
            state: match port_state(last, node, port) {
                // The heavy sweep activated every trained link port.
                PortState::Init | PortState::Armed => PortState::Active,
                s => s,
            },
            lid: last
                .topology
                .node(node)
                .and_then(|n| n.port(port))
                .map_or(0, |p| p.lid),
            master_sm_lid,
            sm,
        };
        if let Some((node, port)) = last.local {
            if let Ok(smp) = Smp::try_get_dr(&[], AttributeId::PORT_INFO, u32::from(port), 0) {
                reqs.push((
                    smp,
                    Token::Light(LightOp::PortInfo(expect(node, port, false))),
                ));
            }
        }
        for (node, port, path) in sm_port_paths(last) {
            if let Ok(smp) = Smp::try_get_dr(&path, AttributeId::PORT_INFO, u32::from(port), 0) {
                reqs.push((
                    smp,
                    Token::Light(LightOp::PortInfo(expect(node, port, true))),
                ));
            }
        }
        for (smp, token) in reqs {
            outstanding += 1;
            self.tx.submit(
                now,
                smp,
                Tagged {
                    generation: self.generation,
                    token,
                },
            );
        }
        self.stage = Stage::Light {
            outstanding,
            changed: false,
        };
    }

    /// Move outcomes into the stages and requests into the agent until quiet.
    fn pump(&mut self, now: Duration) {
        if !self.running() {
            return;
        }
        loop {
            let mut progressed = false;
            while let Some(ev) = self.tx.poll_event() {
                progressed = true;
                self.dispatch(ev);
            }
            progressed |= self.feed(now);
            progressed |= self.advance(now);
            if !progressed {
                break;
            }
        }
    }

    fn dispatch(&mut self, ev: Event<Tagged>) {
        let ev = match ev {
            Event::Response { token, smp } if token.generation == self.generation => {
                Event::Response {
                    token: token.token,
                    smp,
                }
            }
            Event::Failed { token, request } if token.generation == self.generation => {
                Event::Failed {
                    token: token.token,
                    request,
                }
            }
            Event::Unsolicited(smp) => Event::Unsolicited(smp),
            Event::Response { .. } | Event::Failed { .. } => {
                tracing::trace!("outcome of an abandoned sweep's request dropped");
                return;
            }
        };
        match ev {
            Event::Unsolicited(smp) => self.events.push_back(SubnetEvent::Unsolicited(smp)),
            Event::Response { token, smp } => match token {
                Token::Disc(t) => {
                    if let Stage::Discovering(d) = &mut self.stage {
                        d.handle_response(t, &smp);
                    }
                }
                Token::Prog(op) => {
                    if let Stage::Programming(sw) = &mut self.stage {
                        sw.outstanding = sw.outstanding.saturating_sub(1);
                        if smp.status == 0 {
                            program::remember(sw, &self.cfg, &mut self.programmed, op);
                        } else {
                            sw.report.failures += 1;
                            tracing::warn!(?op, status = smp.status, "programming SMP rejected");
                            if let Op::Lft { node, .. } = op {
                                if let Some(f) = sw.lft_failed.get_mut(node as usize) {
                                    *f = true;
                                }
                            }
                        }
                    }
                }
                Token::Light(op) => self.on_light(op, Some(&smp)),
                Token::ReadLft { node, block } => {
                    if let Stage::ReadingLfts(_, rb) = &mut self.stage {
                        rb.outstanding = rb.outstanding.saturating_sub(1);
                        match smp.attribute::<ibsm_mad::attr::LinearForwardingTable>() {
                            Ok(t) if smp.status == 0 => rb.store(node, block, &t.ports),
                            _ => {
                                rb.failed.insert(node);
                            }
                        }
                    }
                }
            },
            Event::Failed { token, .. } => match token {
                Token::Disc(t) => {
                    if let Stage::Discovering(d) = &mut self.stage {
                        d.handle_failure(t, "no response after retries");
                    }
                }
                Token::Prog(op) => {
                    if let Stage::Programming(sw) = &mut self.stage {
                        sw.outstanding = sw.outstanding.saturating_sub(1);
                        sw.report.failures += 1;
                        let node = op.node();
                        if let Some(d) = sw.dead.get_mut(node as usize) {
                            if !*d {
                                tracing::warn!(
                                    node,
                                    ?op,
                                    "node stopped answering; skipped for this sweep"
                                );
                                sw.report.dead_nodes += 1;
                            }
                            *d = true;
                        }
                        if let Some(f) = sw.lft_failed.get_mut(node as usize) {
                            *f = true;
                        }
                    }
                }
                Token::Light(op) => self.on_light(op, None),
                Token::ReadLft { node, .. } => {
                    if let Stage::ReadingLfts(_, rb) = &mut self.stage {
                        rb.outstanding = rb.outstanding.saturating_sub(1);
                        rb.failed.insert(node);
                    }
                }
            },
        }
    }

    fn on_light(&mut self, op: LightOp, smp: Option<&Smp>) {
        let Stage::Light {
            outstanding,
            changed,
        } = &mut self.stage
        else {
            return;
        };
        *outstanding = outstanding.saturating_sub(1);
        let Some(smp) = smp.filter(|s| s.status == 0) else {
            *changed = true;
            return;
        };
        match op {
            LightOp::SwitchInfo => {
                if smp
                    .attribute::<SwitchInfo>()
                    .map_or(true, |si| si.port_state_change)
                {
                    *changed = true;
                }
            }
            LightOp::PortInfo(want) => match smp.attribute::<PortInfo>() {
                Ok(pi) => {
                    let why = if pi.port_state != want.state {
                        Some("PortState")
                    } else if pi.lid != want.lid {
                        Some("LID")
                    } else if pi.master_sm_lid != want.master_sm_lid {
                        Some("MasterSMLID")
                    } else if want.sm && !pi.capability_mask.contains(CapabilityMask::IS_SM) {
                        Some("IsSM cleared")
                    } else {
                        None
                    };
                    if let Some(why) = why {
                        tracing::info!(
                            why,
                            lid = pi.lid,
                            state = ?pi.port_state,
                            master_sm_lid = pi.master_sm_lid,
                            sm_port = want.sm,
                            "light sweep: an SM port reads differently"
                        );
                        *changed = true;
                    }
                }
                Err(_) => *changed = true,
            },
        }
    }

    /// Submit requests while the agent's backlog is below one window.
    fn feed(&mut self, now: Duration) -> bool {
        let window = self.tx.config().window;
        let mut progressed = false;
        match &mut self.stage {
            Stage::Discovering(d) => {
                while self.tx.queued() < window {
                    let Some(token) = d.poll_request() else { break };
                    progressed = true;
                    match token.to_smp() {
                        Ok(smp) => self.tx.submit(
                            now,
                            smp,
                            Tagged {
                                generation: self.generation,
                                token: Token::Disc(token),
                            },
                        ),
                        Err(err) => d.handle_failure(token, &err.to_string()),
                    }
                }
            }
            Stage::ReadingLfts(sw, rb) => {
                while self.tx.queued() < window {
                    let Some((node, block)) = rb.queue.pop_front() else {
                        break;
                    };
                    progressed = true;
                    let smp = sw.res.path(NodeIdx(node)).and_then(|path| {
                        Smp::try_get_dr(
                            path,
                            AttributeId::LINEAR_FORWARDING_TABLE,
                            u32::from(block),
                            0,
                        )
                        .ok()
                    });
                    match smp {
                        Some(smp) => {
                            rb.outstanding += 1;
                            self.tx.submit(
                                now,
                                smp,
                                Tagged {
                                    generation: self.generation,
                                    token: Token::ReadLft { node, block },
                                },
                            );
                        }
                        None => {
                            rb.failed.insert(node);
                        }
                    }
                }
            }
            Stage::Programming(sw) => {
                while self.tx.queued() < window {
                    let Some(op) = program::next_op(sw, &self.cfg, &self.programmed) else {
                        break;
                    };
                    progressed = true;
                    match program::op_smp(sw, &self.cfg, op) {
                        Ok(smp) => {
                            sw.outstanding += 1;
                            program::count(&mut sw.report, op);
                            self.tx.submit(
                                now,
                                smp,
                                Tagged {
                                    generation: self.generation,
                                    token: Token::Prog(op),
                                },
                            );
                        }
                        Err(err) => {
                            sw.report.failures += 1;
                            tracing::warn!(?op, %err, "cannot build programming SMP");
                        }
                    }
                }
            }
            _ => {}
        }
        progressed
    }

    /// Move to the next stage when the current one is complete.
    fn advance(&mut self, now: Duration) -> bool {
        let stage = std::mem::replace(&mut self.stage, Stage::Idle);
        let (next, progressed) = match stage {
            Stage::Idle => match self.heavy_requested {
                Some(reason) if self.held_down(now, reason) => (Stage::Idle, false),
                Some(reason) => {
                    self.heavy_requested = None;
                    self.start_heavy(now, reason);
                    return true;
                }
                None => (Stage::Idle, false),
            },
            Stage::Discovering(d) if d.is_done() => {
                self.marks[1] = now;
                let sweep = self.after_discovery(d.into_result());
                if self.preparing.is_some() {
                    self.events.push_back(SubnetEvent::PreparedDiscovery {
                        sm_ports: sweep.report.sm_ports.clone(),
                    });
                }
                self.wake_now = Some(now);
                (Stage::LidsDone(sweep), true)
            }
            // Compute phases resume only from handle_timeout (which clears
            // wake_now), so the phase time is measured between two calls.
            Stage::LidsDone(mut sweep) if self.wake_now.is_none() => {
                // LIDs took from marks[1] to now (this call came after the wake-up).
                self.marks[2] = now;
                if self.inherit.is_some() {
                    // A new master: read back what the switches hold first.
                    let rb = start_readback(&sweep);
                    (Stage::ReadingLfts(sweep, Box::new(rb)), true)
                } else {
                    match self.reuse_routing(&sweep) {
                        Some(t) => {
                            sweep.tables = t;
                            sweep.report.lft_top = sweep.tables.lft_top;
                            self.wake_now = Some(now);
                            (Stage::RoutingDone(sweep), true)
                        }
                        None => self.route(now, sweep),
                    }
                }
            }
            // A prepared takeover waits here for MASTER (and the replicated state
            // as it is then) before comparing.
            Stage::ReadingLfts(mut sweep, rb)
                if rb.queue.is_empty() && rb.outstanding == 0 && self.active =>
            {
                let inh = self.inherit.take().unwrap_or_default();
                let report = self.finish_readback(&mut sweep, *rb, &inh);
                let adopted = report.adopted;
                self.inherit_report = Some(report);
                if adopted {
                    sweep.report.lft_top = sweep.tables.lft_top;
                    self.wake_now = Some(now);
                    (Stage::RoutingDone(sweep), true)
                } else {
                    self.route(now, sweep)
                }
            }
            Stage::RoutingDone(mut sweep) if self.wake_now.is_none() => {
                self.marks[3] = now;
                if let Some(p) = self.pending_partitions.take() {
                    self.cfg.partitions = p;
                }
                sweep.stage = ProgStage::Distribute;
                sweep.cursor = 0;
                (Stage::Programming(sweep), true)
            }
            Stage::Programming(mut sweep)
                if sweep.outstanding == 0
                    && sweep.ops.is_empty()
                    && sweep.cursor >= sweep.res.topology.len() =>
            {
                match sweep.stage {
                    ProgStage::Distribute => {
                        self.marks[4] = now;
                        sweep.stage = ProgStage::Arm;
                        sweep.cursor = 0;
                        (Stage::Programming(sweep), true)
                    }
                    ProgStage::Arm => {
                        sweep.stage = ProgStage::Activate;
                        sweep.cursor = 0;
                        (Stage::Programming(sweep), true)
                    }
                    ProgStage::Activate => {
                        self.marks[5] = now;
                        self.finish_heavy(now, sweep);
                        (Stage::Idle, true)
                    }
                }
            }
            Stage::Light {
                outstanding: 0,
                changed,
            } => {
                self.metrics.light_sweeps += 1;
                let report = SweepReport {
                    smps: self.tx.counters().sent - self.light_smps_start,
                    changed,
                    ..SweepReport::default()
                };
                self.events.push_back(SubnetEvent::SweepDone {
                    kind: SweepKind::Light,
                    phases: PhaseTimes::default(),
                    report,
                });
                if changed {
                    tracing::info!("light sweep saw a change");
                    self.request_heavy(SweepReason::LightSweepChange);
                } else {
                    self.next_light = Some(now + self.cfg.sweep_interval);
                }
                (Stage::Idle, true)
            }
            other => (other, false),
        };
        self.stage = next;
        progressed
    }

    /// LIDs, and the bookkeeping between discovery and routing.
    fn after_discovery(&mut self, mut res: DiscoveryResult) -> Box<Sweep> {
        let n = res.topology.len();
        let mut report = SweepReport {
            nodes: n,
            unreachable: res.unreachable.len(),
            ..SweepReport::default()
        };
        for (_, node) in res.topology.iter() {
            if node.is_switch() {
                report.switches += 1;
            } else {
                report.end_nodes += 1;
            }
        }
        // A switch whose LinearFDBTop is not what we programmed lost its tables
        // (reboot, another SM): forget them so all blocks go out again.
        for (idx, node) in res.topology.iter() {
            if let (Some(Some(si)), Some((top, _))) = (
                res.switch_info.get(idx.as_usize()),
                self.programmed.lfts.get(&node.node_guid),
            ) {
                if si.linear_fdb_top != *top {
                    self.programmed.lfts.remove(&node.node_guid);
                }
            }
        }
        for d in &res.duplicates {
            tracing::error!(
                kind = %d.kind,
                guid = format_args!("{:#018x}", d.guid),
                "ALARM {d}: the port that held the LID keeps it, the other gets none until an operator resolves it"
            );
            self.events.push_back(SubnetEvent::DuplicateGuid(d.clone()));
        }
        if let Some(cap) = res.cap {
            tracing::error!(nodes = n, "ALARM {cap}");
            self.events.push_back(SubnetEvent::TopologyCapped(cap));
        }
        report.duplicates = res.duplicates.clone();
        report.cap = res.cap;
        self.metrics.duplicate_guids = res.duplicates.len() as u64;
        self.metrics.topology_capped = u64::from(res.cap.is_some());
        let mut lids_stable = false;
        match self.lids.assign(&mut res.topology) {
            Ok(lr) => {
                report.lids_withheld = lr.withheld_duplicates;
                lids_stable = lr.assigned == 0 && lr.changed == 0 && lr.duplicates_repaired == 0;
                report.lids = lr.assigned + lr.kept + lr.changed;
                report.lids_unassigned = lr.unassigned;
                if lr.unassigned > 0 {
                    tracing::error!(
                        unassigned = lr.unassigned,
                        "unicast LID space exhausted: ports left without a LID"
                    );
                }
            }
            Err(err) => tracing::error!(%err, "LID assignment failed"),
        }
        let master_lid = res
            .local
            .and_then(|(node, port)| res.topology.node(node)?.port(port).map(|p| p.lid))
            .unwrap_or(0);
        report.sm_ports = sm_port_paths(&res)
            .into_iter()
            .filter_map(|(node, port, path)| {
                let p = res.topology.node(node)?.port(port)?;
                Some(SmPort {
                    guid: p.port_guid,
                    route: SmRoute::Directed(DrRoute::new(&path)),
                    lid: (p.lid != 0).then_some(p.lid),
                })
            })
            .collect();
        Box::new(Sweep {
            res,
            tables: ForwardingTables::default(),
            master_lid,
            client_reregister: self.new_master,
            dead: vec![false; n],
            lft_failed: vec![false; n],
            stage: ProgStage::Distribute,
            cursor: 0,
            ops: VecDeque::new(),
            outstanding: 0,
            report,
            lids_stable,
            manage_m_key: self.cfg.m_key.key != 0 || self.fabric_m_key != 0,
        })
    }

    /// The tables the switches already hold, when nothing routing depends on
    /// changed since they were programmed (same cabling, no LID assigned or
    /// moved, every switch's table known with one LinearFDBTop): a stable fabric
    /// keeps its routes across sweeps, and a new master's adopted routes stay.
    fn reuse_routing(&self, sweep: &Sweep) -> Option<ForwardingTables> {
        let prev = self.last.as_ref()?;
        if !sweep.lids_stable || links_of(&prev.topology) != links_of(&sweep.res.topology) {
            return None;
        }
        let mut top = None;
        let mut lfts = Vec::with_capacity(sweep.res.topology.len());
        for (_, node) in sweep.res.topology.iter() {
            if !node.is_switch() {
                lfts.push(None);
                continue;
            }
            let (t, table) = self.programmed.lfts.get(&node.node_guid)?;
            if *top.get_or_insert(*t) != *t {
                return None;
            }
            lfts.push(Some(table.clone()));
        }
        let lft_top = top?;
        if lft_top < max_lid(&sweep.res.topology) {
            return None;
        }
        Some(ForwardingTables { lft_top, lfts })
    }

    /// Compute the sweep's tables: here, or (`offload_routing`) as a [`RoutingJob`]
    /// for the driver, the sweep waiting in `Stage::Routing` for its result.
    fn route(&mut self, now: Duration, mut sweep: Box<Sweep>) -> (Stage, bool) {
        if self.cfg.offload_routing {
            self.next_routing_job = self.next_routing_job.wrapping_add(1);
            let id = self.next_routing_job;
            self.routing_jobs.push_back(RoutingJob {
                id,
                engine: self.cfg.routing.clone(),
                topology: sweep.res.topology.clone(),
            });
            return (Stage::Routing(sweep, id), true);
        }
        sweep.tables = compute_routing(&self.cfg.routing, &sweep.res.topology);
        sweep.report.lft_top = sweep.tables.lft_top;
        self.wake_now = Some(now);
        (Stage::RoutingDone(sweep), true)
    }

    /// The read-back is complete: remember what the switches hold, then adopt
    /// it as the routing or compute a new one (see [`Inherited`]).
    fn finish_readback(
        &mut self,
        sweep: &mut Sweep,
        rb: Readback,
        inh: &Inherited,
    ) -> InheritReport {
        let mut report = InheritReport {
            blocks_read: rb.blocks_read,
            ..InheritReport::default()
        };
        let mut all_verified = true;
        let mut read: HashMap<u32, Vec<u8>> = HashMap::new();
        for (idx, node) in sweep.res.topology.iter() {
            if !node.is_switch() {
                continue;
            }
            let Ok(n32) = u32::try_from(idx.as_usize()) else {
                continue;
            };
            let table = match rb.tables.get(&n32) {
                Some(t) if !rb.failed.contains(&n32) => t,
                _ => {
                    report.unread += 1;
                    all_verified = false;
                    continue;
                }
            };
            let (top, table) = table;
            report.switches_read += 1;
            if inh.lft_digests.get(&node.node_guid) == Some(&(*top, lft_digest(table))) {
                report.verified += 1;
            } else {
                report.mismatched += 1;
                all_verified = false;
            }
            // What the switch holds, verified or not: only differing blocks go out.
            self.programmed
                .lfts
                .insert(node.node_guid, (*top, table.clone()));
            read.insert(n32, table.clone());
        }
        report.topology_unchanged = inh
            .links
            .as_ref()
            .is_some_and(|l| *l == links_of(&sweep.res.topology));
        let tops: HashSet<u16> = rb.tables.values().map(|(t, _)| *t).collect();
        let max_lid = max_lid(&sweep.res.topology);
        let adopt = all_verified
            && report.topology_unchanged
            && sweep.lids_stable
            && report.switches_read > 0
            && tops.len() == 1
            && tops.iter().all(|t| *t >= max_lid);
        if adopt {
            let top = tops.iter().next().copied().unwrap_or(0);
            let lfts = (0..sweep.res.topology.len())
                .map(|i| u32::try_from(i).ok().and_then(|i| read.remove(&i)))
                .collect();
            sweep.tables = ForwardingTables { lft_top: top, lfts };
            report.adopted = true;
        }
        tracing::info!(
            switches = report.switches_read,
            verified = report.verified,
            mismatched = report.mismatched,
            unread = report.unread,
            blocks = report.blocks_read,
            topology_unchanged = report.topology_unchanged,
            lids_stable = sweep.lids_stable,
            adopted = report.adopted,
            "inherited LFTs read back"
        );
        report
    }

    fn finish_heavy(&mut self, now: Duration, sweep: Box<Sweep>) {
        let Sweep {
            res,
            tables,
            lft_failed,
            mut report,
            ..
        } = *sweep;
        let m = self.marks;
        let phases = PhaseTimes {
            discovery: m[1].saturating_sub(m[0]),
            lids: m[2].saturating_sub(m[1]),
            routing: m[3].saturating_sub(m[2]),
            distribution: m[4].saturating_sub(m[3]),
            activation: m[5].saturating_sub(m[4]),
        };
        report.smps = self.tx.counters().sent - self.light_smps_start;
        // Remember what the switches now hold.
        let top = tables.lft_top;
        for (i, lft) in tables.lfts.into_iter().enumerate() {
            let (Some(lft), Some(node)) = (lft, res.topology.nodes().get(i)) else {
                continue;
            };
            if lft_failed.get(i).copied().unwrap_or(true) {
                self.programmed.lfts.remove(&node.node_guid);
            } else {
                self.programmed.lfts.insert(node.node_guid, (top, lft));
            }
        }
        self.detect_changes(&res);
        self.metrics.heavy_sweeps += 1;
        self.metrics.last_phases = phases;
        self.metrics.lft_blocks_sent += report.lft_blocks_sent;
        self.metrics.failures += report.failures;
        self.metrics.lids = report.lids as u64;
        if !self.subnet_up_sent {
            self.subnet_up_sent = true;
            tracing::info!(
                nodes = report.nodes,
                switches = report.switches,
                lids = report.lids,
                "subnet up in {:.3} s: discovery {:.3} s, LIDs {:.3} s, routing {:.3} s, distribution {:.3} s, activation {:.3} s",
                phases.total().as_secs_f64(),
                phases.discovery.as_secs_f64(),
                phases.lids.as_secs_f64(),
                phases.routing.as_secs_f64(),
                phases.distribution.as_secs_f64(),
                phases.activation.as_secs_f64(),
            );
            self.events.push_back(SubnetEvent::SubnetUp {
                phases,
                report: report.clone(),
            });
        } else {
            tracing::info!(
                reason = ?self.reason,
                lft_blocks = report.lft_blocks_sent,
                failures = report.failures,
                "heavy sweep done in {:.3} s",
                phases.total().as_secs_f64()
            );
        }
        self.events.push_back(SubnetEvent::SweepDone {
            kind: SweepKind::Heavy,
            phases,
            report,
        });
        self.new_master = false;
        self.last = Some(res);
        self.next_light = Some(now + self.cfg.sweep_interval);
        self.last_heavy_end = Some(now);
    }

    /// TopologyChanged and the GID in/out of service notices.
    fn detect_changes(&mut self, res: &DiscoveryResult) {
        let end_ports: HashSet<u64> = res
            .topology
            .iter()
            .filter(|(_, n)| !n.is_switch())
            .flat_map(|(_, n)| {
                n.physical_ports()
                    .filter(|(_, p)| p.lid != 0 && p.port_guid != 0)
                    .map(|(_, p)| p.port_guid)
            })
            .collect();
        if let Some(prev) = &self.last {
            let guids = |r: &DiscoveryResult| -> HashSet<u64> {
                r.topology.iter().map(|(_, n)| n.node_guid).collect()
            };
            let links = |r: &DiscoveryResult| -> HashSet<(u64, u8, u64, u8)> {
                r.topology
                    .links()
                    .filter_map(|((a, pa), (b, pb))| {
                        let ga = r.topology.node(a)?.node_guid;
                        let gb = r.topology.node(b)?.node_guid;
                        Some(if (ga, pa) < (gb, pb) {
                            (ga, pa, gb, pb)
                        } else {
                            (gb, pb, ga, pa)
                        })
                    })
                    .collect()
            };
            let (old, new) = (guids(prev), guids(res));
            let mut added: Vec<u64> = new.difference(&old).copied().collect();
            let mut removed: Vec<u64> = old.difference(&new).copied().collect();
            added.sort_unstable();
            removed.sort_unstable();
            let links_changed = links(prev).symmetric_difference(&links(res)).count();
            if !added.is_empty() || !removed.is_empty() || links_changed > 0 {
                tracing::info!(
                    added = added.len(),
                    removed = removed.len(),
                    links_changed,
                    "topology changed"
                );
                self.events.push_back(SubnetEvent::TopologyChanged {
                    added,
                    removed,
                    links_changed,
                });
            }
            let gid_prefix = 0xFE80_0000_0000_0000u64;
            let gid = |guid: u64| {
                let mut g = [0u8; 16];
                g[..8].copy_from_slice(&gid_prefix.to_be_bytes());
                g[8..].copy_from_slice(&guid.to_be_bytes());
                g
            };
            let mut appeared: Vec<u64> = end_ports
                .difference(&self.last_end_ports)
                .copied()
                .collect();
            let mut gone: Vec<u64> = self
                .last_end_ports
                .difference(&end_ports)
                .copied()
                .collect();
            appeared.sort_unstable();
            gone.sort_unstable();
            let issuer = res
                .local
                .and_then(|(n, p)| res.topology.node(n)?.port(p).map(|p| p.lid))
                .unwrap_or(0);
            for (guids, in_service) in [(appeared, true), (gone, false)] {
                for g in guids {
                    let details = if in_service {
                        TrapDetails::GidInService { gid: gid(g) }
                    } else {
                        TrapDetails::GidOutOfService { gid: gid(g) }
                    };
                    self.events.push_back(SubnetEvent::Notice(Notice::generic(
                        NoticeType::from(4u8),
                        ProducerType::CLASS_MANAGER,
                        issuer,
                        &details,
                    )));
                }
            }
        }
        self.last_end_ports = end_ports;
    }
}

/// Highest LID any port of `t` carries (with its LMC block).
fn max_lid(t: &ibsm_fabric::Topology) -> u16 {
    t.iter()
        .flat_map(|(_, n)| n.ports.iter())
        .filter(|p| p.lid != 0)
        .map(|p| p.lid.saturating_add((1u16 << p.lmc.min(7)) - 1))
        .max()
        .unwrap_or(0)
}

/// The read-back plan: every block `0..=LinearFDBTop/64` of every switch.
fn start_readback(sweep: &Sweep) -> Readback {
    let mut rb = Readback::default();
    for (idx, node) in sweep.res.topology.iter() {
        if !node.is_switch() {
            continue;
        }
        let (Ok(n32), Some(Some(si))) = (
            u32::try_from(idx.as_usize()),
            sweep.res.switch_info.get(idx.as_usize()),
        ) else {
            continue;
        };
        let top = si.linear_fdb_top;
        if top == 0 {
            continue; // never programmed
        }
        rb.tables
            .insert(n32, (top, vec![routing::UNREACHABLE; usize::from(top) + 1]));
        for block in 0..=top / 64 {
            rb.queue.push_back((n32, block));
        }
    }
    rb
}

/// PortState of a port as the last discovery read it.
fn port_state(res: &DiscoveryResult, node: NodeIdx, port: u8) -> PortState {
    res.port_info
        .get(node.as_usize())
        .and_then(|v| v.get(usize::from(port)))
        .and_then(|p| p.as_ref())
        .map_or(PortState::Down, |p| p.port_state)
}

/// Ports other than ours with CapabilityMask.IsSM, with the DR path that reaches them.
fn sm_port_paths(res: &DiscoveryResult) -> Vec<(NodeIdx, u8, Vec<u8>)> {
    let mut out = Vec::new();
    for (idx, node) in res.topology.iter() {
        let Some(pis) = res.port_info.get(idx.as_usize()) else {
            continue;
        };
        for (port, pi) in pis.iter().enumerate() {
            let Some(pi) = pi else { continue };
            let Ok(port) = u8::try_from(port) else {
                continue;
            };
            if !pi.capability_mask.contains(CapabilityMask::IS_SM) || res.local == Some((idx, port))
            {
                continue;
            }
            if let Some(path) = program::port_path(res, idx, port, node.is_switch()) {
                out.push((idx, port, path));
            }
        }
    }
    out
}
