//! What the instances write and a scrape reads: [`Metrics`] (atomics the instance
//! thread writes, and the mutex-held open-ended parts), the replication figures, and
//! the limits of the exposition. A file of its own so the exposition (`mod.rs`) and the
//! collector (`families.rs`) both import it and not each other.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use ibsm_core::election::SmState;

/// Content type of the exposition (OpenMetrics text, which Prometheus scrapes).
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// At most this many (LID, port) series of `ibsm_port_traps_total` per instance; the
/// least-trapping one goes first (a trap storm from many ports cannot grow a scrape
/// without bound).
pub const PORT_TRAP_SERIES: usize = 256;

/// Connections served at once on `/metrics`.
pub const MAX_CONNECTIONS: usize = 32;
/// How long a client may take to send its request head.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(5);
/// How long one connection may live (keep-alive included).
pub const CONNECTION_LIFETIME: Duration = Duration::from_secs(60);

/// At most this many (method, attribute) series of `ibsm_sa_requests_by_total`.
pub const SA_REQUEST_SERIES: usize = 128;

/// Which sweep, for `ibsm_sweeps_total{kind}`: the configurator's own kinds (one type
/// for one thing), which a standby's sweeps use as well.
pub use ibsm_core::subnet::SweepKind;

/// Counters and gauges of one SM instance. Cheap to share (`Arc`), all methods take
/// `&self`.
#[derive(Debug, Default)]
pub struct Metrics {
    pub(super) sm_state: AtomicU64,
    pub(super) act_count: AtomicU64,
    pub(super) failovers: AtomicU64,
    pub(super) sweeps_heavy: AtomicU64,
    pub(super) sweeps_light: AtomicU64,
    pub(super) mads_sent: AtomicU64,
    pub(super) mads_timeouts: AtomicU64,
    pub(super) mads_retries: AtomicU64,
    pub(super) sm_key_rejections: AtomicU64,
    pub(super) losses_held_off: AtomicU64,
    pub(super) sminfo_requests: AtomicU64,
    pub(super) sminfo_fast_answers: AtomicU64,
    pub(super) degraded: AtomicU64,
    pub(super) mad_send_errors: AtomicU64,
    pub(super) traps: AtomicU64,
    pub(super) traps_rate_limited: AtomicU64,
    pub(super) trap_sweeps_deferred: AtomicU64,
    pub(super) duplicate_guids: AtomicU64,
    pub(super) topology_capped: AtomicU64,
    pub(super) untrusted_sms: AtomicU64,
    pub(super) rogue_masters: AtomicU64,
    pub(super) untrusted_reports: AtomicU64,
    pub(super) up: AtomicU64,
    pub(super) sa_groups: AtomicU64,
    pub(super) sa_members: AtomicU64,
    pub(super) sa_requests: AtomicU64,
    pub(super) sa_errors: AtomicU64,
    pub(super) sa_reader_answers: AtomicU64,
    pub(super) sa_services: AtomicU64,
    pub(super) sa_subscriptions: AtomicU64,
    pub(super) sa_replica_current: AtomicU64,
    pub(super) sa_replica_write_unix_ms: AtomicU64,
    pub(super) replica_applied_index: AtomicU64,
    pub(super) client_reregisters: AtomicU64,
    pub(super) mads_received: AtomicU64,
    pub(super) phases: Mutex<BTreeMap<String, f64>>,
    pub(super) replication: Mutex<Option<ReplicationFigures>>,
    pub(super) port_traps: Mutex<BTreeMap<(u16, u8), u64>>,
    pub(super) sa_requests_by: Mutex<BTreeMap<(String, String), u64>>,
}

/// What replication reports, for [`Metrics::set_replication`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplicationFigures {
    /// Mastership epoch of the local copy.
    pub epoch: u64,
    /// `leader`, `follower`, `candidate`, `learner` or `shutdown`.
    pub role: String,
    /// Raft term.
    pub term: u64,
    /// This member's Raft node id.
    pub node_id: u64,
    /// The Raft leader's node id (0: none known).
    pub leader: u64,
    /// This member's last log index.
    pub last_log_index: u64,
    /// On the leader: the highest log index each member is known to hold (`None`:
    /// nothing replicated to it yet). Empty elsewhere.
    pub matched: BTreeMap<u64, Option<u64>>,
    /// Raft leadership requests this member made as SM master (Raft leadership follows
    /// the SM master: `replication` module doc).
    pub leadership_requests: u64,
}

/// Raft roles, every one a series of `ibsm_raft_role` (1 for the current one).
pub(crate) const ROLES: [&str; 5] = ["leader", "follower", "candidate", "learner", "shutdown"];

/// What the SA holds, for [`Metrics::set_sa`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SaSize {
    /// Multicast groups.
    pub groups: u64,
    /// Members over all groups.
    pub members: u64,
    /// ServiceRecords.
    pub services: u64,
    /// InformInfo subscriptions.
    pub subscriptions: u64,
}

/// SMInfo.SMState as a number (IBA: 0 NOTACTIVE, 1 DISCOVERING, 2 STANDBY, 3 MASTER).
pub fn state_number(s: SmState) -> u64 {
    match s {
        SmState::NotActive => 0,
        SmState::Discovering => 1,
        SmState::Standby => 2,
        SmState::Master => 3,
    }
}

impl Metrics {
    /// All zero.
    pub fn new() -> Metrics {
        Metrics::default()
    }

    /// Current SMInfo.SMState; counts a failover when it moves into MASTER.
    pub fn set_state(&self, s: SmState) {
        let n = state_number(s);
        let old = self.sm_state.swap(n, Ordering::Relaxed);
        if n == 3 && old != 3 {
            self.failovers.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Whether the instance thread runs (`ibsm_up`).
    pub fn set_up(&self, up: bool) {
        self.up.store(u64::from(up), Ordering::Relaxed);
    }

    /// SMInfo.ActCount.
    pub fn set_act_count(&self, n: u32) {
        self.act_count.store(u64::from(n), Ordering::Relaxed);
    }

    /// A sweep started.
    pub fn sweep_started(&self, kind: SweepKind) {
        match kind {
            SweepKind::Heavy => &self.sweeps_heavy,
            SweepKind::Light => &self.sweeps_light,
        }
        .fetch_add(1, Ordering::Relaxed);
    }

    /// Totals of MADs sent, timed out and retried since the instance started (the
    /// thread publishes the agent's running totals; these are monotonic).
    pub fn set_mad_totals(&self, sent: u64, timeouts: u64, retries: u64) {
        self.mads_sent.fetch_max(sent, Ordering::Relaxed);
        self.mads_timeouts.fetch_max(timeouts, Ordering::Relaxed);
        self.mads_retries.fetch_max(retries, Ordering::Relaxed);
    }

    /// Requests refused because their SM_Key was wrong (running total).
    pub fn set_sm_key_rejections(&self, n: u64) {
        self.sm_key_rejections.fetch_max(n, Ordering::Relaxed);
    }

    /// Miss streaks whose loss the Raft leader's heartbeat held off (running total).
    pub fn set_losses_held_off(&self, n: u64) {
        self.losses_held_off.fetch_max(n, Ordering::Relaxed);
    }

    /// SubnGet(SMInfo) requests received from other SMs (running total).
    pub fn set_sminfo_requests(&self, n: u64) {
        self.sminfo_requests.fetch_max(n, Ordering::Relaxed);
    }

    /// One SubnGet(SMInfo) answered as read, ahead of the SM thread's turn
    /// (`ibsm_sminfo_fast_answers_total`).
    pub fn sminfo_fast_answered(&self) {
        self.sminfo_fast_answers.fetch_add(1, Ordering::Relaxed);
    }

    /// One MAD the device refused to send.
    pub fn mad_send_error(&self) {
        self.mad_send_errors.fetch_add(1, Ordering::Relaxed);
    }

    /// The configurator's trap totals (running, monotonic within an instance).
    pub fn set_trap_totals(&self, traps: u64, rate_limited: u64, sweeps_deferred: u64) {
        self.traps.fetch_max(traps, Ordering::Relaxed);
        self.traps_rate_limited
            .fetch_max(rate_limited, Ordering::Relaxed);
        self.trap_sweeps_deferred
            .fetch_max(sweeps_deferred, Ordering::Relaxed);
    }

    /// Alarms of the last heavy sweep as MASTER: duplicate GUIDs found, and
    /// whether discovery hit the topology cap.
    pub fn set_alarms(&self, duplicate_guids: u64, capped: bool) {
        self.duplicate_guids
            .store(duplicate_guids, Ordering::Relaxed);
        self.topology_capped
            .store(u64::from(capped), Ordering::Relaxed);
    }

    /// With `trusted_sm_guids`: the known SM ports outside it now, and how many of them
    /// answer MASTER (rogue masters).
    pub fn set_untrusted_sms(&self, untrusted: u64, rogue_masters: u64) {
        self.untrusted_sms.store(untrusted, Ordering::Relaxed);
        self.rogue_masters.store(rogue_masters, Ordering::Relaxed);
    }

    /// The election reported an untrusted SM or a rogue master (new, or changed).
    pub fn count_untrusted_seen(&self) {
        self.untrusted_reports.fetch_add(1, Ordering::Relaxed);
    }

    /// Hook for sweep phases: how long `phase` (e.g. `discover`, `lid`, `lft`) took in
    /// the last sweep that ran it. Exposed as `ibsm_sweep_phase_seconds{phase}`.
    /// Phase names should be short snake_case words; other characters are replaced.
    pub fn set_sweep_phase(&self, phase: &str, took: Duration) {
        let name: String = phase
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        if let Ok(mut p) = self.phases.lock() {
            p.insert(name, took.as_secs_f64());
        }
    }

    /// The SA's size and counters, and the ports asked to re-register.
    pub fn set_sa(&self, size: SaSize, requests: u64, errors: u64, rereg: u64) {
        self.sa_groups.store(size.groups, Ordering::Relaxed);
        self.sa_members.store(size.members, Ordering::Relaxed);
        self.sa_services.store(size.services, Ordering::Relaxed);
        self.sa_subscriptions
            .store(size.subscriptions, Ordering::Relaxed);
        self.sa_requests.store(requests, Ordering::Relaxed);
        self.sa_errors.store(errors, Ordering::Relaxed);
        self.client_reregisters.store(rereg, Ordering::Relaxed);
    }

    /// SubnAdmGets of fabric records the instance thread answered as it read them,
    /// ahead of its other work (`ibsm_sa_reader_answers_total`; also counted in
    /// `ibsm_sa_requests_total`).
    pub fn set_sa_reader_answers(&self, n: u64) {
        self.sa_reader_answers.store(n, Ordering::Relaxed);
    }

    /// The replica's freshness for the SA: whether it holds exactly the SA state this
    /// SM serves, and when it last applied an SA write (ms since the Unix epoch, 0:
    /// none since start).
    pub fn set_sa_replica(&self, current: bool, last_write_unix_ms: u64) {
        self.sa_replica_current
            .store(u64::from(current), Ordering::Relaxed);
        self.sa_replica_write_unix_ms
            .store(last_write_unix_ms, Ordering::Relaxed);
    }

    /// The local replica's applied log index (`ibsm_replica_applied_index`).
    pub fn set_applied_index(&self, index: u64) {
        self.replica_applied_index.store(index, Ordering::Relaxed);
    }

    /// Whether the replication of this instance is degraded (`ibsm_replication_degraded`).
    pub fn set_degraded(&self, degraded: bool) {
        self.degraded.store(u64::from(degraded), Ordering::Relaxed);
    }

    /// One MAD received from the device (`ibsm_mads_received_total`).
    pub fn mad_received(&self) {
        self.mads_received.fetch_add(1, Ordering::Relaxed);
    }

    /// Replication figures of this member (`ibsm_replication_epoch`, `ibsm_raft_*`);
    /// `None` removes them (no replication).
    pub fn set_replication(&self, figures: Option<ReplicationFigures>) {
        if let Ok(mut r) = self.replication.lock() {
            *r = figures;
        }
    }

    /// A trap from the port `port` of LID `lid` (`ibsm_port_traps_total{lid,port}`,
    /// at most [`PORT_TRAP_SERIES`] series: the least-counted one makes room).
    pub fn count_port_trap(&self, lid: u16, port: u8) {
        let Ok(mut t) = self.port_traps.lock() else {
            return;
        };
        if !t.contains_key(&(lid, port)) && t.len() >= PORT_TRAP_SERIES {
            if let Some(k) = t.iter().min_by_key(|(_, n)| **n).map(|(k, _)| *k) {
                t.remove(&k);
            }
        }
        *t.entry((lid, port)).or_insert(0) += 1;
    }

    /// One SA request (`ibsm_sa_requests_by_total{method,attribute}`, at most
    /// [`SA_REQUEST_SERIES`] series; requests of further pairs are not counted there).
    pub fn count_sa_request(&self, method: &str, attribute: &str) {
        let Ok(mut t) = self.sa_requests_by.lock() else {
            return;
        };
        let key = (method.to_string(), attribute.to_string());
        if t.len() >= SA_REQUEST_SERIES && !t.contains_key(&key) {
            return;
        }
        *t.entry(key).or_insert(0) += 1;
    }

    /// Current value of `ibsm_failovers_total` (for tests and status).
    pub fn failovers(&self) -> u64 {
        self.failovers.load(Ordering::Relaxed)
    }
}
