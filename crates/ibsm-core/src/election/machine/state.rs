//! The election's state: [`Election`] and what it tracks (the known SM ports, our
//! outstanding requests, the DISCOVERING round, the master a STANDBY polls, the peers'
//! last answers), its construction and the observers of our own SMInfo (state,
//! advertised priority, ActCount). The behaviour is in the sibling files, one
//! `impl Election` block each; the fields, and the helpers those files share, are
//! `pub(super)`: visible inside `machine` only.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

use crate::election::config::{ElectionConfig, ElectionError};
use crate::election::types::{
    ControlPacket, ElectionEvent, SmInfo, SmInfoMsg, SmPort, SmRoute, SmState, Transmit,
};

/// What an outstanding request of ours is for.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) enum Purpose {
    /// Discovering: SubnGet(SMInfo) of a known SM port.
    Discover,
    /// Master: SubnGet(SMInfo) of another SM (periodic, newcomer, or after trap 144).
    MasterQuery,
    /// Master: our HANDOVER.
    Handover { target: u64 },
    /// Master: DISABLE / STANDBY / DISCOVER on request of the daemon.
    Control { target: u64, packet: ControlPacket },
    /// Standby: trap 144 to the master, until TrapRepress.
    Trap,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Pending {
    pub(super) dest: SmRoute,
    pub(super) msg: SmInfoMsg,
    pub(super) expect_guid: Option<u64>,
    pub(super) purpose: Purpose,
    pub(super) deadline: Duration,
    pub(super) timeout: Duration,
    pub(super) retries_left: u32,
}

/// One Discovering round: the answers so far.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(super) struct Round {
    pub(super) queried: BTreeSet<u64>,
    /// The master we just declared lost after missed polls: it has already failed
    /// `poll_retries` polls in a row, so this round does not ask it again over the same
    /// route (it is in `queried`, `lost_unanswered` is that route), or asks it once
    /// without retries (a round restarted after our port came back), instead of
    /// spending `query_timeout x (1 + query_retries)` more on it.
    pub(super) lost: Option<u64>,
    /// The route `lost` was asked over without an answer.
    pub(super) lost_unanswered: Option<SmRoute>,
    /// A sweep was reported since the round started. A round concludes anything but
    /// "follow a MASTER" only then: the SM ports and routes an older sweep recorded may
    /// miss the real master (an SM that came up since) or lead over a dead cable.
    pub(super) fresh_sweep: bool,
    pub(super) answered: usize,
    /// The SM ports that answered this round (`queried` minus these did not): a
    /// round concluding MASTER without them confirms that at once (see
    /// `Election::confirm_unanswered`).
    pub(super) heard: BTreeSet<u64>,
    /// The TIDs of the polls and re-polls that lost us `lost`: an answer to one of
    /// them, however late, still shows it alive, as it did in STANDBY.
    pub(super) lost_tids: Vec<u64>,
    pub(super) best_master: Option<(SmInfo, SmRoute)>,
    pub(super) best_higher: Option<(SmInfo, SmRoute)>,
}

/// Standby: the SM we poll.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Following {
    pub(super) master: u64,
    pub(super) route: SmRoute,
    pub(super) lid: Option<u16>,
    pub(super) missed: u32,
    pub(super) poll_at: Duration,
    /// The poll in flight (the newest one).
    pub(super) poll_tid: Option<u64>,
    /// The earlier polls of the current miss streak: an answer to any of them, however
    /// late, shows the master alive (at most `poll_retries` TIDs, plus one a re-poll
    /// while the Raft heartbeat holds the loss off).
    pub(super) missed_tids: Vec<u64>,
    pub(super) last_act: Option<u32>,
    pub(super) last_act_change: Duration,
    /// Since when it has answered DISCOVERING (grace, see `discovering_grace`).
    pub(super) discovering_since: Option<Duration>,
    /// Poll waits of the current streak not judged because our own timer fired more
    /// than `repoll_interval` late (we were descheduled: the answer may be waiting
    /// unread); at most `poll_retries` per streak.
    pub(super) excused: u32,
    /// When the Raft leader's heartbeat first held off declaring this master lost in
    /// the current miss streak (`leader_heartbeat_grace` counts from here).
    pub(super) held_since: Option<Duration>,
}

/// The sans-IO SMInfo election of one SM (see the `election` module doc).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Election {
    pub(super) cfg: ElectionConfig,
    pub(super) state: SmState,
    pub(super) priority: u8,
    pub(super) elevated: bool,
    pub(super) act_count: u32,
    pub(super) local_lid: u16,
    pub(super) now: Duration,
    pub(super) known: BTreeMap<u64, SmPort>,
    pub(super) swept: bool,
    pub(super) next_tid: u64,
    pub(super) pending: BTreeMap<u64, Pending>,
    pub(super) round: Option<Round>,
    pub(super) following: Option<Following>,
    pub(super) handover: Option<u64>,
    /// Priority to advertise once the outstanding targeted handover completes.
    pub(super) handover_yield: Option<u8>,
    /// A targeted HANDOVER (target, yield) that got no answer at all: if the next
    /// query finds the target MASTER, it was accepted and only the answers were lost.
    pub(super) unconfirmed: Option<(u64, u8)>,
    /// Priority advertised instead of the configured one after a targeted handover,
    /// until the operator sets a priority again.
    pub(super) yielded: Option<u8>,
    /// Last (Priority, SMState) each known SM port answered (not ActCount: the model
    /// checker hashes this state, and nothing here needs it).
    pub(super) peers: BTreeMap<u64, (u8, SmState)>,
    /// MASTER: SMs not among our known SM ports that queried our SMInfo (their GUID is
    /// in the request's payload); each asked for one heavy sweep. Removed once a sweep
    /// reports them; bounded by [`MAX_UNKNOWN_REQUESTERS`].
    pub(super) unknown_requesters: BTreeSet<u64>,
    /// With `trusted_sm_guids`: the known SM ports outside the set and the (Priority,
    /// SMState) they last answered; reported once per change
    /// ([`ElectionEvent::UntrustedSmSeen`], [`ElectionEvent::RogueMaster`]).
    pub(super) untrusted: BTreeMap<u64, (u8, SmState)>,
    /// Our port is not Active ([`handle_local_port`](Self::handle_local_port)): stay
    /// DISCOVERING, never conclude MASTER of a fabric we cannot see.
    pub(super) port_down: bool,
    pub(super) master_poll_at: Option<Duration>,
    /// Since when no master has been seen: set when we lose the master we followed (or
    /// start, or leave MASTER), cleared when we follow a MASTER or become one. What
    /// `masterless_takeover` is measured against.
    pub(super) masterless_since: Option<Duration>,
    /// A round of the current masterless period concluded STANDBY behind a higher SM
    /// answering DISCOVERING without waiting for its fresh sweep
    /// ([`ElectionEvent::DiscoveryWithdrawn`]). Once per masterless period: the next
    /// round waits for its sweep, so a stale view cannot be re-followed forever.
    /// Cleared with `masterless_since`.
    pub(super) followed_unswept: bool,
    pub(super) suspects: BTreeMap<u64, u32>,
    /// The SM port GUID of the Raft leader and when its last heartbeat reached us
    /// ([`Election::handle_leader_contact`]).
    pub(super) leader_contact: Option<(u64, Duration)>,
    /// Miss streaks that reached `poll_retries` while the Raft leader's heartbeat was
    /// fresh, so the loss was held off, in total.
    pub(super) losses_held_off: u64,
    pub(super) sm_key_violations: u64,
    pub(super) transmits: VecDeque<Transmit>,
    pub(super) events: VecDeque<ElectionEvent>,
}

/// At most this many unknown SMInfo requesters each trigger a heavy sweep between two
/// sweeps that find them (a flood of made-up GUIDs cannot sweep the fabric forever).
pub(super) const MAX_UNKNOWN_REQUESTERS: usize = 64;

impl Election {
    /// A new SM in DISCOVERING. It queries nothing until the first
    /// [`handle_sweep`](Self::handle_sweep) tells it which ports advertise IsSM.
    pub fn new(cfg: ElectionConfig, now: Duration) -> Result<Election, ElectionError> {
        cfg.validate()?;
        Ok(Election {
            priority: cfg.priority,
            next_tid: cfg.tid_base,
            cfg,
            state: SmState::Discovering,
            elevated: false,
            act_count: 0,
            local_lid: 0,
            now,
            known: BTreeMap::new(),
            swept: false,
            pending: BTreeMap::new(),
            round: Some(Round::default()),
            following: None,
            handover: None,
            handover_yield: None,
            unconfirmed: None,
            yielded: None,
            peers: BTreeMap::new(),
            unknown_requesters: BTreeSet::new(),
            untrusted: BTreeMap::new(),
            port_down: false,
            master_poll_at: None,
            masterless_since: Some(now),
            followed_unswept: false,
            suspects: BTreeMap::new(),
            leader_contact: None,
            losses_held_off: 0,
            sm_key_violations: 0,
            transmits: VecDeque::new(),
            events: VecDeque::new(),
        })
    }

    /// Our SMState.
    pub fn state(&self) -> SmState {
        self.state
    }

    /// ActCount (SMPs we initiated, as reported by [`handle_smps_sent`](Self::handle_smps_sent)).
    pub fn act_count(&self) -> u32 {
        self.act_count
    }

    /// The configured priority.
    pub fn configured_priority(&self) -> u8 {
        self.priority
    }

    /// The priority we advertise: the configured one (or the one we yielded to after
    /// [`handover_to`](Self::handover_to)), or the sticky value while we are an
    /// elevated master.
    pub fn priority(&self) -> u8 {
        let base = self.yielded.unwrap_or(self.priority);
        match (self.elevated, self.cfg.sticky_priority) {
            (true, Some(p)) => p.max(base),
            _ => base,
        }
    }

    /// The priority we lowered ourselves to after a targeted handover, until the next
    /// [`set_priority`](Self::set_priority).
    pub fn yielded_priority(&self) -> Option<u8> {
        self.yielded
    }

    /// GUID of the master as we know it: ours when MASTER, the polled SM when STANDBY.
    pub fn master_guid(&self) -> Option<u64> {
        match self.state {
            SmState::Master => Some(self.cfg.port_guid),
            SmState::Standby => self.following.as_ref().map(|f| f.master),
            _ => None,
        }
    }

    /// STANDBY: polls of the master that went unanswered in a row so far (0 in
    /// other states, and again once the master answers). The daemon starts the
    /// read-only part of a takeover one poll before the election gives up.
    pub fn missed_polls(&self) -> u32 {
        match (&self.following, self.state) {
            (Some(f), SmState::Standby) => f.missed,
            _ => 0,
        }
    }

    /// Count of incoming Sets rejected for a wrong SM_Key.
    pub fn sm_key_violations(&self) -> u64 {
        self.sm_key_violations
    }

    /// The Raft leader's heartbeat reached this SM's replica at `at`; `sm_guid` is the
    /// SM port GUID registered for the leader's Raft node. A second opinion on the
    /// master we follow (`ElectionConfig::leader_heartbeat_grace`): it can hold off
    /// declaring that master lost for a while, never declare it.
    pub fn handle_leader_contact(&mut self, sm_guid: u64, at: Duration) {
        if self.leader_contact.is_none_or(|(_, t)| t <= at) {
            self.leader_contact = Some((sm_guid, at));
        }
    }

    /// Miss streaks that reached `poll_retries` while the master we followed was the
    /// Raft leader and its heartbeat was fresh, so its loss was held off, in total.
    pub fn losses_held_off(&self) -> u64 {
        self.losses_held_off
    }

    /// GUID of the SM we are handing over to, while a HANDOVER is outstanding.
    pub fn handover_target(&self) -> Option<u64> {
        self.handover
    }

    /// The configuration.
    pub fn config(&self) -> &ElectionConfig {
        &self.cfg
    }

    /// Our SMInfo as we would answer it to an unauthenticated requester (SM_Key 0).
    pub fn sm_info(&self) -> SmInfo {
        SmInfo {
            guid: self.cfg.port_guid,
            sm_key: 0,
            act_count: self.act_count,
            priority: self.priority(),
            sm_state: self.state,
        }
    }

    pub(super) fn clock(&mut self, now: Duration) -> Duration {
        self.now = self.now.max(now);
        self.now
    }
}
