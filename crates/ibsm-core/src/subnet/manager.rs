//! [`SubnetManager`]: the configurator's state, its construction, and the calls the
//! daemon makes to start, continue, steer and stop its mastership (become master,
//! prepare or abandon a takeover, inherit the previous master's tables, set the
//! partitions and the fabric's M_Key at run time, sweeps on request) and to read
//! what it did. The sweeps' behaviour is in the sibling files, one
//! `impl SubnetManager` block each; the fields are `pub(super)` for them.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use ibsm_fabric::lid::{LidConfig, LidManager};

use crate::discovery::DiscoveryResult;
use crate::sa::SaFabric;
use crate::transactions::Transactions;

use super::config::{ConfigError, MKeyConfig, Partition, SubnetConfig};
use super::events::{Outgoing, SubnetEvent, SweepReason};
use super::inherit::start_readback;
use super::inherit::{InheritReport, Inherited, Readback, SeedReport};
use super::mcast_state::Mcast;
use super::metrics::{SubnetMetrics, TRAP_LOG_LINES, TRAP_LOG_WINDOW};
use super::routing_job::RoutingJob;
use super::sa_snapshot_job::{PendingSnapshot, Retired, SaSnapshotJob};
use super::standing::StandingLft;
use super::storm;
use super::sweep::{Programmed, Stage, Tagged};
use super::verify::{VerificationReport, Verify};

/// The master SM's subnet configurator (see the module doc).
#[derive(Debug)]
pub struct SubnetManager {
    pub(super) cfg: SubnetConfig,
    pub(super) tx: Transactions<Tagged>,
    /// Generation of the requests that count: [`SubnetManager::abandon_prepared`]
    /// moves it on, so answers to an abandoned sweep's requests still in flight are
    /// dropped instead of being fed to the next sweep (the agent, and its TIDs,
    /// carry on: a fresh agent would reuse TIDs those answers still carry).
    pub(super) generation: u32,
    pub(super) stage: Stage,
    pub(super) active: bool,
    pub(super) new_master: bool,
    pub(super) subnet_up_sent: bool,
    pub(super) heavy_requested: Option<SweepReason>,
    pub(super) reason: SweepReason,
    pub(super) next_light: Option<Duration>,
    pub(super) wake_now: Option<Duration>,
    pub(super) marks: [Duration; 6],
    /// SMPs sent, and their time in flight, at each of `marks`.
    pub(super) mark_sent: [u64; 6],
    pub(super) mark_in_flight: [Duration; 6],
    pub(super) lids: LidManager,
    pub(super) programmed: Programmed,
    /// The last heavy sweep's discovery, shared with the SA snapshot job built from it.
    pub(super) last: Option<Arc<DiscoveryResult>>,
    pub(super) last_end_ports: HashSet<u64>,
    pub(super) light_smps_start: u64,
    /// Traps 129/130/131 per (LID, port, trap): count and time of the last one.
    pub(super) port_errors: HashMap<(u16, u8, u16), (u64, Duration)>,
    pub(super) transmit: VecDeque<Outgoing>,
    pub(super) events: VecDeque<SubnetEvent>,
    pub(super) metrics: SubnetMetrics,
    pub(super) smps_reported: u64,
    /// What the previous master left, for the next mastership's first heavy sweep.
    pub(super) inherit: Option<Inherited>,
    pub(super) inherit_report: Option<InheritReport>,
    /// What the last verification of a known discovery found (see `verify`).
    pub(super) verification: Option<VerificationReport>,
    /// The LFT read-back started with a verification, from the known discovery
    /// (same node indices); taken when the sweep reaches the read-back.
    pub(super) early_readback: Option<Box<Readback>>,
    /// The standby's standing LFT read handed to the prepared takeover (see
    /// `standing`): its switches are read back with block 0 alone when the stamp holds.
    pub(super) standing_lfts: HashMap<u64, StandingLft>,
    /// [`SubnetManager::prepare_takeover`] started the read-only part of a
    /// takeover at this time; `become_master` continues it.
    pub(super) preparing: Option<Duration>,
    /// Partitions set while a sweep was distributing: they replace
    /// `cfg.partitions` when the next sweep starts programming (see
    /// [`SubnetManager::set_partitions`]).
    pub(super) pending_partitions: Option<Vec<Partition>>,
    /// Routing computations for the driver (`offload_routing`), and the last id.
    pub(super) routing_jobs: VecDeque<RoutingJob>,
    pub(super) next_routing_job: u64,
    /// The M_Key the fabric was left with by an earlier master (0: none known),
    /// tried after the configured one (see the module doc, M_Key).
    pub(super) fabric_m_key: u64,
    /// Per source LID trap rate limit.
    pub(super) trap_limiter: storm::TrapLimiter,
    /// Per-trap log lines.
    pub(super) trap_log: storm::LogSampler,
    /// When the last heavy sweep ended (the trap hold-down counts from it).
    pub(super) last_heavy_end: Option<Duration>,
    /// What the Subnet Administrator serves: the fabric as the last heavy sweep left it.
    pub(super) sa_fabric: Option<Arc<SaFabric>>,
    /// Snapshot builds for the driver (`offload_sa_snapshot`), the ones handed out and
    /// not back yet (with the events of their sweeps), the last id, and what the next
    /// job frees on the driver's worker.
    pub(super) sa_jobs: VecDeque<SaSnapshotJob>,
    pub(super) sa_pending: VecDeque<PendingSnapshot>,
    pub(super) next_sa_job: u64,
    pub(super) sa_retired: Retired,
    /// The SA's multicast groups as MFTs (see `mcast`).
    pub(super) mcast: Mcast,
    /// A new mastership's first sweep sets ClientReregister on end ports (see
    /// [`SubnetManager::set_reregister_clients`]).
    pub(super) reregister_clients: bool,
    /// What the last seeding from replicated port digests found (see `port_digest`).
    pub(super) port_seed: Option<SeedReport>,
}

impl SubnetManager {
    /// A configurator that does nothing until [`SubnetManager::become_master`].
    pub fn new(cfg: SubnetConfig) -> Result<SubnetManager, ConfigError> {
        cfg.validate()?;
        let mut sm = SubnetManager {
            trap_limiter: storm::TrapLimiter::new(cfg.trap_rate, cfg.trap_burst),
            trap_log: storm::LogSampler::new(TRAP_LOG_WINDOW, TRAP_LOG_LINES),
            last_heavy_end: None,
            sa_fabric: None,
            sa_jobs: VecDeque::new(),
            sa_pending: VecDeque::new(),
            next_sa_job: 0,
            sa_retired: Retired::default(),
            mcast: Mcast::default(),
            reregister_clients: true,
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
            mark_sent: [0; 6],
            mark_in_flight: [Duration::ZERO; 6],
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
            verification: None,
            early_readback: None,
            standing_lfts: HashMap::new(),
            preparing: None,
            pending_partitions: None,
            routing_jobs: VecDeque::new(),
            next_routing_job: 0,
            fabric_m_key: 0,
            port_seed: None,
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
            | Stage::Verifying(_)
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

    /// Number of port GUIDs the LID manager remembers LIDs for.
    pub fn remembered_lids(&self) -> usize {
        self.lids.remembered_len()
    }

    /// What the last read-back of inherited LFTs found.
    pub fn last_inherit(&self) -> Option<&InheritReport> {
        self.inherit_report.as_ref()
    }

    /// Every LFT programmed (or verified) so far, shared: (switch NodeGUID,
    /// LinearFDBTop, table).
    pub fn programmed_lft_tables(&self) -> impl Iterator<Item = (u64, u16, &Arc<[u8]>)> + '_ {
        self.programmed
            .lfts
            .iter()
            .map(|(g, (top, t))| (*g, *top, t))
    }

    /// Every LFT programmed (or verified) so far: (switch NodeGUID, LinearFDBTop, table).
    pub fn programmed_lfts(&self) -> impl Iterator<Item = (u64, u16, &[u8])> + '_ {
        self.programmed
            .lfts
            .iter()
            .map(|(g, (top, t))| (*g, *top, &t[..]))
    }

    /// The settled LFT stamp (`lft_stamp`) of each switch whose table is in
    /// [`SubnetManager::programmed_lfts`], where this SM closed or read one.
    pub fn programmed_lft_stamps(&self) -> impl Iterator<Item = (u64, u8)> + '_ {
        self.programmed.lft_stamps.iter().filter_map(|(g, s)| {
            s.settled()
                .filter(|_| self.programmed.lfts.contains_key(g))
                .map(|s| (*g, s))
        })
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
        self.prepare_takeover_from(now, inherited, None);
    }

    /// [`SubnetManager::prepare_takeover`] that, given `known` (a discovery this SM
    /// made from its own port with the same [`SubnetConfig::discovery`], with
    /// nothing seen to change the fabric since), verifies it with targeted Gets
    /// instead of walking the fabric (see the `verify` module), and walks it only if
    /// something differs. [`SubnetManager::last_verification`] says what it found.
    pub fn prepare_takeover_from(
        &mut self,
        now: Duration,
        inherited: Inherited,
        known: Option<DiscoveryResult>,
    ) {
        self.prepare_takeover_standing(now, inherited, known, HashMap::new());
    }

    /// [`SubnetManager::prepare_takeover_from`] with the standby's standing LFT read
    /// (`StandingLfts::entries`, by switch NodeGUID): a switch whose standing table
    /// carries the stamp `inherited.lft_stamps` names and the LinearFDBTop read now
    /// is read back with block 0 alone, and its standing table is taken when that
    /// block carries the same settled stamp (see the `inherit` and `lft_stamp`
    /// modules); any other switch is read in full.
    pub fn prepare_takeover_standing(
        &mut self,
        now: Duration,
        inherited: Inherited,
        known: Option<DiscoveryResult>,
        standing: HashMap<u64, StandingLft>,
    ) {
        if self.active || !matches!(self.stage, Stage::Idle) {
            return;
        }
        self.standing_lfts = standing;
        self.inherit = Some(inherited);
        self.inherit_report = None;
        self.verification = None;
        self.early_readback = None;
        self.preparing = Some(now);
        self.programmed = Programmed::default();
        self.heavy_requested = None;
        self.start_heavy(now, SweepReason::BecameMaster);
        match known {
            Some(known) => {
                tracing::info!(
                    nodes = known.topology.len(),
                    "takeover prepared: the known fabric is verified and the LFTs read back before MASTER"
                );
                self.early_readback = Some(Box::new(start_readback(
                    &known,
                    self.inherit.as_ref(),
                    &self.standing_lfts,
                )));
                self.stage = Stage::Verifying(Box::new(Verify::new(known)));
            }
            None => {
                tracing::info!("takeover prepared: discovery and LFT read-back start before MASTER")
            }
        }
        self.pump(now);
    }

    /// What the last verification of a known discovery found (a takeover prepared
    /// with [`SubnetManager::prepare_takeover_from`]).
    pub fn last_verification(&self) -> Option<&VerificationReport> {
        self.verification.as_ref()
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
        self.early_readback = None;
        self.standing_lfts.clear();
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
    /// Whether the next mastership's first heavy sweep sets ClientReregister on every
    /// end port that supports it (the default). A new master whose SA inherited the
    /// previous master's groups, services and subscriptions from a current replica
    /// turns it off: clients keep their registrations and need not re-join anything.
    pub fn set_reregister_clients(&mut self, on: bool) {
        self.reregister_clients = on;
    }

    pub fn become_master(&mut self, now: Duration) {
        self.mcast.reset_knowledge();
        if self.preparing.is_some() {
            if matches!(
                self.stage,
                Stage::Discovering(_)
                    | Stage::Verifying(_)
                    | Stage::LidsDone(_)
                    | Stage::ReadingLfts(..)
            ) && self.inherit.is_some()
            {
                self.active = true;
                self.new_master = true;
                self.subnet_up_sent = false;
                self.preparing = None;
                // The prepared sweep was planned as a read-only standby's: it now
                // programs as a new master, ClientReregister included (unless the SA
                // inherited a current replica).
                if let Stage::LidsDone(sw) | Stage::ReadingLfts(sw, _) = &mut self.stage {
                    sw.client_reregister = self.reregister_clients;
                }
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
        self.mark(1, now);
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
        self.early_readback = None;
        self.standing_lfts.clear();
        self.stage = Stage::Idle;
        self.heavy_requested = None;
        self.next_light = None;
        self.wake_now = None;
        self.tx = Transactions::new(self.cfg.transactions.clone());
        self.apply_m_keys();
        self.transmit.clear();
        // Snapshots still being built are of a mastership that ended: their results
        // are dropped when they come back; their sweeps' events go out now, as
        // they would have had the snapshots been built inline.
        self.sa_jobs.clear();
        for p in std::mem::take(&mut self.sa_pending) {
            self.events.extend(p.events);
        }
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

    /// True while a heavy sweep (discovery through programming) is in progress.
    pub fn is_heavy_sweeping(&self) -> bool {
        !matches!(self.stage, Stage::Idle | Stage::Light { .. })
    }

    /// True while a sweep is in progress.
    pub fn is_sweeping(&self) -> bool {
        !matches!(self.stage, Stage::Idle)
    }

    /// The last completed discovery (topology with assigned LIDs, DR paths, PortInfo).
    pub fn last_discovery(&self) -> Option<&DiscoveryResult> {
        self.last.as_deref()
    }

    /// LFTs programmed so far, by switch NodeGUID.
    pub fn programmed_lft(&self, node_guid: u64) -> Option<&[u8]> {
        self.programmed.lfts.get(&node_guid).map(|(_, v)| &v[..])
    }

    /// The fabric as the last heavy sweep left it, for the Subnet Administrator
    /// (`None` before the first heavy sweep of a mastership).
    pub fn sa_fabric(&self) -> Option<&Arc<SaFabric>> {
        self.sa_fabric.as_ref()
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
}
