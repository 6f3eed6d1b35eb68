//! Configuration of the election state machine and its validation.

use std::collections::BTreeSet;
use std::time::Duration;

/// MAD status for a rejected SubnSet(SMInfo): IBA 13.4.7 status field, bits 4:2 = 7,
/// "invalid value in one or more fields of the attribute or attribute modifier".
/// OpenSM 3.3 answers such a Set with the raw value 7 instead; both are non-zero,
/// which is all an SM checks.
pub const STATUS_INVALID_VALUE: u16 = 0x001c;

/// Default [`ElectionConfig::poll_interval`]: a standby polls an answering master
/// every 25 ms (40 SMPs/s per standby on the master).
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_millis(25);

/// Default [`ElectionConfig::repoll_interval`].
pub const DEFAULT_REPOLL_INTERVAL: Duration = Duration::from_millis(20);

/// Default [`ElectionConfig::leader_heartbeat_fresh`].
pub const DEFAULT_LEADER_HEARTBEAT_FRESH: Duration = Duration::from_millis(75);

/// Highest SM priority (4 bits).
pub const MAX_PRIORITY: u8 = 15;

/// How incoming SubnSet(SMInfo) control packets are checked against our SM_Key.
///
/// What OpenSM does, for comparison (read in OpenSM 3.3.23, the Debian version the lab
/// runs): it checks no SM_Key at all on a received SubnSet(SMInfo) (only the M_Key,
/// and only when its own port has one); it sends its configured SM_Key in HANDOVER
/// (3.3.21 and later; up to 3.3.20 it sent 0 to an SM it did not see as MASTER, which
/// is every standby it hands over to). IBA 14.4.1 only says a read returns SM_Key 0
/// unless the requester is authenticated. So SM_Key 0 in a Set means "sender does not
/// know our key", not "wrong key".
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum SmKeyPolicy {
    /// The payload SM_Key must equal ours, with one exception: SM_Key 0 is accepted
    /// in a HANDOVER from the SM we follow as master while we are STANDBY (what an
    /// OpenSM before 3.3.21 sends; that SM already governs the subnet, and HANDOVER
    /// only gives mastership to us). Any other zero key, and every non-zero wrong key,
    /// is rejected and counted. Default.
    #[default]
    Strict,
    /// Ours or zero, in any control packet from anyone.
    AllowZero,
    /// No check.
    Off,
}

/// Bugs the model checker's self-test injects to prove it can find them. Only with
/// the `fault-injection` feature (ibsm-testkit turns it on): the shipped election
/// has no such knob.
#[cfg(feature = "fault-injection")]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum InjectedFault {
    /// Break ties on equal priority by the HIGHER port GUID.
    TieBreakHigherGuid,
    /// A standby that receives HANDOVER does not become master.
    IgnoreHandover,
}

/// Election settings. `ElectionConfig::new(port_guid)` gives the defaults.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ElectionConfig {
    /// Our port GUID (SMInfo.GUID; OpenSM checks it equals the port GUID it queried).
    pub port_guid: u64,
    /// Configured priority, 0..=15.
    pub priority: u8,
    /// Our SM_Key. Default 1, like OpenSM.
    pub sm_key: u64,
    /// How incoming control packets are checked against `sm_key`.
    pub sm_key_policy: SmKeyPolicy,
    /// Our port's PortInfo.M_Key (0 = none, the default). The M_Key rule for our
    /// SMInfo answers: a requester is authenticated (gets our real SM_Key) when this is
    /// 0 or the SMP's M_Key equals it, or when its payload presents our SM_Key; else it
    /// reads SM_Key 0. OpenSM answers the same way and ignores a peer whose answer
    /// carries an SM_Key other than its own, so answering 0 to everyone would make
    /// OpenSM ignore us.
    pub m_key: u64,
    /// Standby: interval between SubnGet(SMInfo) polls of a master that answers, and
    /// how long the first poll of a miss streak waits for its answer. Default 25 ms.
    pub poll_interval: Duration,
    /// Standby: after a missed poll, the master is polled again at this shorter
    /// interval (each re-poll waits this long for its answer) until it answers or
    /// `poll_retries` polls in a row went unanswered. Default 20 ms. Also the
    /// lateness of our own poll timer above which we were descheduled and the wait is
    /// not judged, and the interval at which a master that took over without an
    /// answer from some SM port re-reads it. See the module doc, "Detection" and "A
    /// false takeover".
    pub repoll_interval: Duration,
    /// Standby: consecutive unanswered polls (the first one and its re-polls) before
    /// the master is declared lost. Default 3.
    pub poll_retries: u32,
    /// Standby: how long the SM we follow may keep answering DISCOVERING (a higher SM
    /// that is still looking around, so about to become master) before we re-discover.
    /// An SM that answers STANDBY or NOTACTIVE is not our master: we re-discover at
    /// once. Default 1 s (10 polls).
    pub discovering_grace: Duration,
    /// Discovering: how long the subnet may stay without a master while the SM that
    /// outranks us answers STANDBY (it has not noticed that its master is gone, as
    /// OpenSM polling every 10 s) before we take MASTER ourselves; our master polls
    /// then hand the subnet to it with HANDOVER. Counted from the moment we lost our
    /// master (or started). `None` waits for the higher SM however long it takes (the
    /// IBA rule alone). Default 1 s. See the `election` module doc, "Never masterless".
    pub masterless_takeover: Option<Duration>,
    /// Standby: declare the master lost when it answers but its ActCount has not
    /// advanced for this long (a hung master). `None` disables the rule. Default 6 s,
    /// three light-sweep intervals of a master at the default 2 s (`NodeConfig` sets
    /// it to three of its own light-sweep intervals).
    pub stall_window: Option<Duration>,
    /// Standby: how long the Raft leader's heartbeat may hold off declaring the master
    /// lost after `poll_retries` missed polls, when the Raft leader is the SM we follow
    /// and its last heartbeat reached us within `leader_heartbeat_fresh`
    /// ([`Election::handle_leader_contact`](super::Election::handle_leader_contact)).
    /// Re-polls go on meanwhile; the first answer ends the streak. The heartbeat is a
    /// second opinion, never the decider: it only delays, at most this long per miss
    /// streak, so an SM port that died under a live process is still declared lost.
    /// `None` ignores heartbeats. Default 1 s. See the module doc, "A busy master".
    pub leader_heartbeat_grace: Option<Duration>,
    /// How recent the Raft leader's last heartbeat must be to hold off a loss (see
    /// `leader_heartbeat_grace`). Default 75 ms: one and a half of Raft's 50 ms
    /// heartbeat, so a killed master's last heartbeat is too old by the time its
    /// missed polls are counted (25 ms + 3 x 20 ms).
    pub leader_heartbeat_fresh: Duration,
    /// Discovering / master sweeps: timeout of one SubnGet(SMInfo). Default 100 ms.
    pub query_timeout: Duration,
    /// Retries of such a query after the first try. Default 2.
    pub query_retries: u32,
    /// Timeout of one HANDOVER (or other control packet) we send. Default 200 ms.
    pub handover_timeout: Duration,
    /// Retries of HANDOVER after the first try. Default 3.
    pub handover_retries: u32,
    /// Master: interval between SMInfo queries of all known SM ports (how a master
    /// notices a higher SM whose trap 144 was lost, or a second master). Default 1 s.
    pub master_poll_interval: Duration,
    /// Sticky mode: on becoming master, raise our effective priority to this value so a
    /// returning higher SM does not take mastership back. Dropped when we stop being
    /// master. `None` (default) disables it.
    pub sticky_priority: Option<u8>,
    /// Trusted SMs: `None` (default) trusts every SM, as IBA and OpenSM do. `Some(set)`
    /// trusts only the port GUIDs in the set (and our own): any other SM is never
    /// followed, never handed over to, its control packets are refused, and it reads
    /// SM_Key 0 in our SMInfo answers; a MASTER among them is a rogue that a trusted
    /// master does not yield to (see the `election` module doc, "Trusted SMs").
    pub trusted_sm_guids: Option<BTreeSet<u64>>,
    /// First transaction ID used; TIDs then count up (wrapping).
    pub tid_base: u64,
    /// A bug to inject (model checker self-tests only).
    #[cfg(feature = "fault-injection")]
    pub injected_fault: Option<InjectedFault>,
}

impl ElectionConfig {
    /// Defaults for the given port GUID: priority 0, SM_Key 1 (strict), polls every
    /// 25 ms, re-polls every 20 ms after a miss, lost after 3 misses in a row.
    pub fn new(port_guid: u64) -> ElectionConfig {
        ElectionConfig {
            port_guid,
            priority: 0,
            sm_key: 1,
            sm_key_policy: SmKeyPolicy::Strict,
            m_key: 0,
            poll_interval: DEFAULT_POLL_INTERVAL,
            repoll_interval: DEFAULT_REPOLL_INTERVAL,
            poll_retries: 3,
            discovering_grace: Duration::from_secs(1),
            masterless_takeover: Some(Duration::from_secs(1)),
            stall_window: Some(Duration::from_secs(6)),
            leader_heartbeat_grace: Some(Duration::from_secs(1)),
            leader_heartbeat_fresh: DEFAULT_LEADER_HEARTBEAT_FRESH,
            query_timeout: Duration::from_millis(100),
            query_retries: 2,
            handover_timeout: Duration::from_millis(200),
            handover_retries: 3,
            master_poll_interval: Duration::from_secs(1),
            sticky_priority: None,
            trusted_sm_guids: None,
            tid_base: 0x5300_0000_0000_0000,
            #[cfg(feature = "fault-injection")]
            injected_fault: None,
        }
    }

    /// Checks the values; the state machine refuses a config that fails this.
    pub fn validate(&self) -> Result<(), ElectionConfigError> {
        if self.port_guid == 0 {
            return Err(ElectionConfigError::ZeroGuid);
        }
        if self.priority > MAX_PRIORITY {
            return Err(ElectionConfigError::Priority {
                what: "priority",
                value: self.priority,
            });
        }
        if let Some(p) = self.sticky_priority {
            if p > MAX_PRIORITY {
                return Err(ElectionConfigError::Priority {
                    what: "sticky_priority",
                    value: p,
                });
            }
        }
        for (what, d) in [
            ("poll_interval", self.poll_interval),
            ("repoll_interval", self.repoll_interval),
            ("query_timeout", self.query_timeout),
            ("handover_timeout", self.handover_timeout),
            ("master_poll_interval", self.master_poll_interval),
            ("leader_heartbeat_fresh", self.leader_heartbeat_fresh),
        ] {
            if d.is_zero() {
                return Err(ElectionConfigError::ZeroDuration { what });
            }
        }
        if self.poll_retries == 0 {
            return Err(ElectionConfigError::ZeroPollRetries);
        }
        Ok(())
    }
}

/// A rejected [`ElectionConfig`] or priority.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ElectionConfigError {
    /// Port GUID 0 is not a valid GUID.
    #[error("election config: port_guid must not be 0")]
    ZeroGuid,
    /// A priority above 15.
    #[error("election config: {what} {value} is out of range 0..=15 (SMInfo.Priority is 4 bits)")]
    Priority {
        /// Which field.
        what: &'static str,
        /// The value given.
        value: u8,
    },
    /// A zero interval or timeout would spin.
    #[error("election config: {what} must be greater than zero")]
    ZeroDuration {
        /// Which field.
        what: &'static str,
    },
    /// poll_retries 0 would fail over on the first poll.
    #[error("election config: poll_retries must be at least 1")]
    ZeroPollRetries,
}

/// An API call that is not allowed now.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ElectionError {
    /// Priority out of range.
    #[error(transparent)]
    Config(#[from] ElectionConfigError),
    /// Control packets other than HANDOVER/ACKNOWLEDGE are sent by the master only.
    #[error("cannot send {packet}: we are {state}, only MASTER sends it")]
    NotMaster {
        /// What was asked.
        packet: super::types::ControlPacket,
        /// Our state.
        state: super::types::SmState,
    },
    /// The target is not among the known SM ports.
    #[error("SM port {guid:#018x} is not known (not in the last sweep)")]
    UnknownPeer {
        /// The GUID asked for.
        guid: u64,
    },
    /// HANDOVER and ACKNOWLEDGE are driven by the state machine itself.
    #[error(
        "{packet} is sent by the election itself, not on request (use handover_to for HANDOVER)"
    )]
    NotOnRequest {
        /// What was asked.
        packet: super::types::ControlPacket,
    },
    /// A HANDOVER is already outstanding.
    #[error("a handover to {target:#018x} is already in progress")]
    HandoverInProgress {
        /// Its target.
        target: u64,
    },
    /// We have no SMInfo answer from the target yet, so we know neither its state nor
    /// its priority (the master reads every SM port each `master_poll_interval`).
    #[error(
        "SM port {guid:#018x} has not answered SMInfo yet: its state and priority are unknown"
    )]
    PeerNotQueried {
        /// The target.
        guid: u64,
    },
    /// With `trusted_sm_guids` set, mastership is never handed to an SM outside it.
    #[error(
        "SM port {guid:#018x} is not a trusted SM (not in trusted_sm_guids): no HANDOVER to it"
    )]
    UntrustedTarget {
        /// The target.
        guid: u64,
    },
    /// HANDOVER goes to an SM in STANDBY (or a second MASTER); others refuse it or, in
    /// DISCOVERING, ignore it.
    #[error("SM port {guid:#018x} was last seen {state}; HANDOVER needs it in STANDBY or MASTER")]
    TargetNotReady {
        /// The target.
        guid: u64,
        /// Its last reported SMState.
        state: super::types::SmState,
    },
    /// To make the handover stick we must advertise a priority that ranks below the
    /// target; there is none when it has priority 0 and a higher port GUID than ours
    /// (ties go to the lower GUID).
    #[error(
        "cannot hand over to {guid:#018x}: it has priority 0 and a higher port GUID than ours \
         ({ours:#018x}), so no priority of ours ranks below it and we would take mastership back; \
         raise its priority first"
    )]
    CannotRankBelow {
        /// The target.
        guid: u64,
        /// Our port GUID.
        ours: u64,
    },
}
