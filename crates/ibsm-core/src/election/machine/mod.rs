//! The election state machine itself. See the module doc of `election` for the rules.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

#[cfg(feature = "fault-injection")]
use super::config::InjectedFault;
use super::config::{
    ElectionConfig, ElectionError, SmKeyPolicy, MAX_PRIORITY, STATUS_INVALID_VALUE,
};
use super::types::{
    ControlPacket, DrRoute, ElectionEvent, RejectReason, SmInfo, SmInfoMsg, SmPort, SmRoute,
    SmState, TransitionReason, Transmit,
};

/// What an outstanding request of ours is for.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Purpose {
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
struct Pending {
    dest: SmRoute,
    msg: SmInfoMsg,
    expect_guid: Option<u64>,
    purpose: Purpose,
    deadline: Duration,
    timeout: Duration,
    retries_left: u32,
}

/// One Discovering round: the answers so far.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
struct Round {
    queried: BTreeSet<u64>,
    /// The master we just declared lost after missed polls: it has already failed
    /// `poll_retries` polls in a row, so this round asks it once more without retries
    /// instead of spending `query_retries` more timeouts on it (that alone would add
    /// `query_timeout x query_retries` to every failover).
    lost: Option<u64>,
    /// The route `lost` was asked over without an answer.
    lost_unanswered: Option<SmRoute>,
    /// A sweep was reported since the round started. A round concludes anything but
    /// "follow a MASTER" only then: the SM ports and routes an older sweep recorded may
    /// miss the real master (an SM that came up since) or lead over a dead cable.
    fresh_sweep: bool,
    answered: usize,
    best_master: Option<(SmInfo, SmRoute)>,
    best_higher: Option<(SmInfo, SmRoute)>,
}

/// Standby: the SM we poll.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Following {
    master: u64,
    route: SmRoute,
    lid: Option<u16>,
    missed: u32,
    poll_at: Duration,
    poll_tid: Option<u64>,
    last_act: Option<u32>,
    last_act_change: Duration,
    /// Since when it has answered DISCOVERING (grace, see `discovering_grace`).
    discovering_since: Option<Duration>,
}

/// The sans-IO SMInfo election of one SM (see the `election` module doc).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Election {
    cfg: ElectionConfig,
    state: SmState,
    priority: u8,
    elevated: bool,
    act_count: u32,
    local_lid: u16,
    now: Duration,
    known: BTreeMap<u64, SmPort>,
    swept: bool,
    next_tid: u64,
    pending: BTreeMap<u64, Pending>,
    round: Option<Round>,
    following: Option<Following>,
    handover: Option<u64>,
    /// Priority to advertise once the outstanding targeted handover completes.
    handover_yield: Option<u8>,
    /// A targeted HANDOVER (target, yield) that got no answer at all: if the next
    /// query finds the target MASTER, it was accepted and only the answers were lost.
    unconfirmed: Option<(u64, u8)>,
    /// Priority advertised instead of the configured one after a targeted handover,
    /// until the operator sets a priority again.
    yielded: Option<u8>,
    /// Last (Priority, SMState) each known SM port answered (not ActCount: the model
    /// checker hashes this state, and nothing here needs it).
    peers: BTreeMap<u64, (u8, SmState)>,
    /// MASTER: SMs not among our known SM ports that queried our SMInfo (their GUID is
    /// in the request's payload); each asked for one heavy sweep. Removed once a sweep
    /// reports them; bounded by [`MAX_UNKNOWN_REQUESTERS`].
    unknown_requesters: BTreeSet<u64>,
    /// With `trusted_sm_guids`: the known SM ports outside the set and the (Priority,
    /// SMState) they last answered; reported once per change
    /// ([`ElectionEvent::UntrustedSmSeen`], [`ElectionEvent::RogueMaster`]).
    untrusted: BTreeMap<u64, (u8, SmState)>,
    /// Our port is not Active ([`handle_local_port`](Self::handle_local_port)): stay
    /// DISCOVERING, never conclude MASTER of a fabric we cannot see.
    port_down: bool,
    master_poll_at: Option<Duration>,
    suspects: BTreeMap<u64, u32>,
    sm_key_violations: u64,
    transmits: VecDeque<Transmit>,
    events: VecDeque<ElectionEvent>,
}

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
            suspects: BTreeMap::new(),
            sm_key_violations: 0,
            transmits: VecDeque::new(),
            events: VecDeque::new(),
        })
    }

    // ----- observers -------------------------------------------------------------

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

    /// The last (Priority, SMState) a known SM port answered to our SMInfo queries.
    pub fn peer_state(&self, guid: u64) -> Option<(u8, SmState)> {
        self.peers.get(&guid).copied()
    }

    /// The highest-ranked known SM port last seen in STANDBY: the natural target of
    /// "hand over to the best standby" ([`handover_to`](Self::handover_to)).
    pub fn best_standby(&self) -> Option<u64> {
        self.peers
            .iter()
            .filter(|(g, (_, st))| {
                *st == SmState::Standby && self.known.contains_key(g) && self.is_trusted(**g)
            })
            .map(|(g, (p, _))| (*p, *g))
            .reduce(|best, c| if self.ranks_above(c, best) { c } else { best })
            .map(|(_, g)| g)
    }

    /// Whether `guid` is a trusted SM: always without `trusted_sm_guids`; with it, our
    /// own port and the GUIDs listed.
    pub fn is_trusted(&self, guid: u64) -> bool {
        guid == self.cfg.port_guid
            || !matches!(&self.cfg.trusted_sm_guids, Some(set) if !set.contains(&guid))
    }

    /// The known SM ports outside `trusted_sm_guids` that answered our SMInfo queries,
    /// with the (Priority, SMState) they last answered. Empty without the setting.
    pub fn untrusted_sms(&self) -> impl Iterator<Item = (u64, u8, SmState)> + '_ {
        self.untrusted.iter().map(|(g, (p, st))| (*g, *p, *st))
    }

    /// The known SM port a request that arrived by `from` came from, if we can tell
    /// (see the module doc, "Trusted SMs"): a LID-routed request by its SLID, which the
    /// sending HCA sets from its port's LID, among the LIDs of the SM ports our sweep
    /// found; a directed-route request by its return path, which the switches on the
    /// way record (the sender writes only the initial path), reversed and compared with
    /// the route our sweep recorded to each SM port. The SMInfo payload's GUID is never
    /// used: any sender can write any GUID there.
    pub fn requester_port(&self, from: &SmRoute) -> Option<u64> {
        match from {
            SmRoute::Lid(0) => None,
            SmRoute::Lid(lid) => self
                .known
                .values()
                .find(|p| p.lid == Some(*lid))
                .map(|p| p.guid),
            SmRoute::Directed(dr) => {
                if dr.dr_slid != 0xffff || dr.dr_dlid != 0xffff || dr.return_path.is_empty() {
                    // LID-routed parts, or no recorded return path: the only hops we
                    // would have are the ones the sender wrote itself.
                    return None;
                }
                let SmRoute::Directed(back) = route_for_new_request(from) else {
                    return None;
                };
                let hops = dr_hops(&back);
                if hops.is_empty() {
                    return None;
                }
                self.known
                    .values()
                    .find(|p| matches!(&p.route, SmRoute::Directed(d) if dr_hops(d) == hops))
                    .map(|p| p.guid)
            }
        }
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

    // ----- quinn-proto style driving ---------------------------------------------

    /// Next SMP to send.
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.transmits.pop_front()
    }

    /// Next event.
    pub fn poll_event(&mut self) -> Option<ElectionEvent> {
        self.events.pop_front()
    }

    /// When [`handle_timeout`](Self::handle_timeout) must be called next.
    pub fn poll_timeout(&self) -> Option<Duration> {
        let mut t = self.pending.values().map(|p| p.deadline).min();
        let mut consider = |d: Option<Duration>| {
            if let Some(d) = d {
                t = Some(t.map_or(d, |t| t.min(d)));
            }
        };
        consider(self.following.as_ref().map(|f| f.poll_at));
        consider(self.master_poll_at);
        t
    }

    /// The driver sent `n` SMPs it initiated (requests, traps; not responses):
    /// ActCount advances. Report the election's own requests too.
    pub fn handle_smps_sent(&mut self, n: u32) {
        self.act_count = self.act_count.wrapping_add(n);
    }

    /// Our port's LID (IssuerLID of the trap 144 we send). 0 until the master assigns one.
    pub fn set_local_lid(&mut self, lid: u16) {
        self.local_lid = lid;
    }

    /// The SM ports (IsSM set) the latest sweep found, ours included or not. In
    /// DISCOVERING the first call starts the round; later calls add the new ports to it.
    /// A MASTER queries ports it did not know. A STANDBY refreshes the master's route.
    pub fn handle_sweep(&mut self, now: Duration, ports: &[SmPort]) {
        let now = self.clock(now);
        let old: BTreeSet<u64> = self.known.keys().copied().collect();
        self.known = ports
            .iter()
            .filter(|p| p.guid != self.cfg.port_guid)
            .map(|p| (p.guid, p.clone()))
            .collect();
        let known = &self.known;
        self.peers.retain(|g, _| known.contains_key(g));
        self.unknown_requesters.retain(|g| !known.contains_key(g));
        self.untrusted.retain(|g, _| known.contains_key(g));
        self.swept = true;
        match self.state {
            SmState::Discovering => {
                if let Some(r) = self.round.as_mut() {
                    r.fresh_sweep = true;
                    // The lost master is still there but reached another way now (a
                    // cable on the old path went down): ask it again over the new
                    // route, with the normal retries, before anyone declares it dead.
                    if let (Some(lost), Some(old)) = (r.lost, r.lost_unanswered.as_ref()) {
                        if known.get(&lost).is_some_and(|p| p.route != *old) {
                            r.queried.remove(&lost);
                            r.lost = None;
                            r.lost_unanswered = None;
                        }
                    }
                }
                self.query_round(now);
                self.maybe_finish_round(now);
            }
            SmState::Master => {
                let new: Vec<SmPort> = self
                    .known
                    .values()
                    .filter(|p| !old.contains(&p.guid))
                    .cloned()
                    .collect();
                for p in new {
                    self.query(now, p.route.clone(), Some(p.guid), Purpose::MasterQuery);
                }
            }
            SmState::Standby => {
                if let Some(f) = self.following.as_mut() {
                    if let Some(p) = self.known.get(&f.master) {
                        f.route = p.route.clone();
                        f.lid = p.lid;
                    }
                }
            }
            SmState::NotActive => {}
        }
    }

    /// The driver read our own port's link: `active` false when its PortState is Down,
    /// or (reported false then true) when it retrained from Active to Init between two
    /// reads (a cable pulled and plugged back). A MASTER or STANDBY whose port lost its
    /// link goes DISCOVERING ([`TransitionReason::LocalPortDown`]):
    /// cut off, it cannot know whether another SM took over meanwhile, and a master that
    /// kept its role would answer MASTER beside the new one the moment the link is back
    /// (and reprogram the fabric with its stale view). While the port is down the
    /// discovery round does not conclude, so an isolated SM never makes itself MASTER of
    /// nothing; when the link is back a fresh round starts with the next
    /// [`handle_sweep`](Self::handle_sweep) (a sweep made while cut off saw our node
    /// alone).
    pub fn handle_local_port(&mut self, now: Duration, active: bool) {
        let now = self.clock(now);
        if !active {
            if self.port_down {
                return;
            }
            self.port_down = true;
            if matches!(self.state, SmState::Master | SmState::Standby) {
                self.enter_discovering(now, TransitionReason::LocalPortDown);
            }
            return;
        }
        if !self.port_down {
            return;
        }
        self.port_down = false;
        // What a sweep found while we were cut off is stale (our node alone): the round
        // waits for the next handle_sweep.
        self.swept = false;
        if self.state == SmState::Discovering {
            let lost = self.round.as_ref().and_then(|r| r.lost);
            self.pending.retain(|_, p| p.purpose != Purpose::Discover);
            self.round = Some(Round {
                lost,
                ..Round::default()
            });
            self.query_round(now);
            self.maybe_finish_round(now);
        }
    }

    /// Changes our configured priority at run time (and ends a priority yielded by
    /// [`handover_to`](Self::handover_to)). Raising the advertised priority in STANDBY
    /// sends trap 144 to the master, which re-reads our SMInfo and hands over if we now
    /// outrank it.
    pub fn set_priority(&mut self, now: Duration, priority: u8) -> Result<(), ElectionError> {
        let now = self.clock(now);
        if priority > MAX_PRIORITY {
            return Err(super::ElectionConfigError::Priority {
                what: "priority",
                value: priority,
            }
            .into());
        }
        let old_eff = self.priority();
        self.priority = priority;
        // The operator decides again: a priority yielded by handover_to ends here.
        self.yielded = None;
        let new_eff = self.priority();
        if old_eff != new_eff {
            self.events.push_back(ElectionEvent::PriorityChanged {
                from: old_eff,
                to: new_eff,
            });
        }
        if new_eff > old_eff && self.state == SmState::Standby {
            self.send_trap144(now);
        }
        Ok(())
    }

    /// As MASTER, send DISABLE, STANDBY or DISCOVER to a known SM port. The answer comes
    /// back as [`ElectionEvent::ControlAnswered`].
    pub fn send_control(
        &mut self,
        now: Duration,
        target: u64,
        packet: ControlPacket,
    ) -> Result<(), ElectionError> {
        let now = self.clock(now);
        if matches!(packet, ControlPacket::Handover | ControlPacket::Acknowledge) {
            return Err(ElectionError::NotOnRequest { packet });
        }
        if self.state != SmState::Master {
            return Err(ElectionError::NotMaster {
                packet,
                state: self.state,
            });
        }
        let route = self
            .known
            .get(&target)
            .map(|p| p.route.clone())
            .ok_or(ElectionError::UnknownPeer { guid: target })?;
        self.send_set(
            now,
            route,
            target,
            packet,
            Purpose::Control { target, packet },
        );
        Ok(())
    }

    /// As MASTER, hand mastership over to the known SM port `target` now (a planned
    /// handover): HANDOVER goes out at once and completes, like the automatic one, on
    /// ACKNOWLEDGE or a status-0 response ([`TransitionReason::HandoverDone`]), or fails
    /// with [`ElectionEvent::HandoverFailed`] leaving us MASTER and our priority as it was.
    ///
    /// The move sticks: if we outrank the target, completing the handover lowers the
    /// priority we advertise to the highest one that ranks below the target (its priority
    /// from its last SMInfo answer), until [`set_priority`](Self::set_priority) is called
    /// again; so we neither trap 144 nor get the mastership handed back. Refused when we
    /// are not MASTER, a handover is outstanding, the target is not a known SM port, has
    /// not answered SMInfo yet, was last seen neither STANDBY nor MASTER, or has priority
    /// 0 and a higher GUID than ours (nothing ranks below it).
    pub fn handover_to(&mut self, now: Duration, target: u64) -> Result<(), ElectionError> {
        let now = self.clock(now);
        if self.state != SmState::Master {
            return Err(ElectionError::NotMaster {
                packet: ControlPacket::Handover,
                state: self.state,
            });
        }
        if let Some(t) = self.handover {
            return Err(ElectionError::HandoverInProgress { target: t });
        }
        let route = self
            .known
            .get(&target)
            .map(|p| p.route.clone())
            .ok_or(ElectionError::UnknownPeer { guid: target })?;
        if !self.is_trusted(target) {
            return Err(ElectionError::UntrustedTarget { guid: target });
        }
        let (target_prio, target_state) = self
            .peers
            .get(&target)
            .copied()
            .ok_or(ElectionError::PeerNotQueried { guid: target })?;
        if !matches!(target_state, SmState::Standby | SmState::Master) {
            return Err(ElectionError::TargetNotReady {
                guid: target,
                state: target_state,
            });
        }
        let me = self.cfg.port_guid;
        let base = self.yielded.unwrap_or(self.priority);
        let yield_to = if self.ranks_above((base, me), (target_prio, target)) {
            // The highest priority that ranks below the target.
            let p = if self.ranks_above((target_prio, target), (target_prio, me)) {
                Some(target_prio)
            } else {
                target_prio.checked_sub(1)
            };
            Some(p.ok_or(ElectionError::CannotRankBelow {
                guid: target,
                ours: me,
            })?)
        } else {
            None
        };
        self.handover = Some(target);
        self.handover_yield = yield_to;
        self.events
            .push_back(ElectionEvent::HandoverStarted { to: target });
        self.send_set(
            now,
            route,
            target,
            ControlPacket::Handover,
            Purpose::Handover { target },
        );
        Ok(())
    }

    /// An SMInfo SMP (or trap 144 / TrapRepress) arrived. `from` is how it came: for a
    /// request it is where the response goes (handed back unchanged in the Transmit).
    pub fn handle_message(&mut self, now: Duration, from: SmRoute, msg: SmInfoMsg) {
        let now = self.clock(now);
        match msg {
            SmInfoMsg::Get { tid, m_key, info } => {
                let mut reply = self.sm_info();
                if self.requester_passes(m_key, &info) && self.requester_trusted(&from) {
                    reply.sm_key = self.cfg.sm_key;
                }
                self.transmits.push_back(Transmit {
                    dest: from.clone(),
                    msg: SmInfoMsg::GetResp {
                        tid,
                        status: 0,
                        attr_mod: 0,
                        info: reply,
                    },
                });
                self.requested_by(now, &from, &info);
            }
            SmInfoMsg::Set {
                tid,
                m_key,
                attr_mod,
                info,
            } => self.handle_set(now, from, tid, m_key, attr_mod, info),
            SmInfoMsg::GetResp {
                tid, status, info, ..
            } => self.handle_resp(now, tid, status, info),
            SmInfoMsg::Trap144 {
                tid,
                issuer_lid,
                issuer_guid,
            } => self.handle_trap144(now, from, tid, issuer_lid, issuer_guid),
            SmInfoMsg::TrapRepress { tid } => {
                if matches!(self.pending.get(&tid), Some(p) if p.purpose == Purpose::Trap) {
                    self.pending.remove(&tid);
                }
            }
        }
    }

    /// Time passed: retries, polls, failover.
    pub fn handle_timeout(&mut self, now: Duration) {
        let now = self.clock(now);
        let expired: Vec<u64> = self
            .pending
            .iter()
            .filter(|(_, p)| p.deadline <= now)
            .map(|(t, _)| *t)
            .collect();
        for tid in expired {
            let Some(mut p) = self.pending.remove(&tid) else {
                continue;
            };
            if p.retries_left > 0 {
                p.retries_left -= 1;
                p.deadline = now + p.timeout;
                self.transmits.push_back(Transmit {
                    dest: p.dest.clone(),
                    msg: p.msg.clone(),
                });
                self.pending.insert(tid, p);
            } else {
                self.request_failed(now, p);
            }
        }
        self.standby_tick(now);
        if self.state == SmState::Master {
            if let Some(at) = self.master_poll_at {
                if at <= now {
                    self.master_poll_at = Some(now + self.cfg.master_poll_interval);
                    let busy: BTreeSet<u64> = self
                        .pending
                        .values()
                        .filter(|p| p.purpose == Purpose::MasterQuery)
                        .filter_map(|p| p.expect_guid)
                        .collect();
                    let ports: Vec<SmPort> = self
                        .known
                        .values()
                        .filter(|p| !busy.contains(&p.guid))
                        .cloned()
                        .collect();
                    for p in ports {
                        self.query(now, p.route, Some(p.guid), Purpose::MasterQuery);
                    }
                }
            }
        }
    }

    // ----- internals -------------------------------------------------------------

    fn clock(&mut self, now: Duration) -> Duration {
        self.now = self.now.max(now);
        self.now
    }

    fn alloc_tid(&mut self) -> u64 {
        let t = self.next_tid;
        self.next_tid = self.next_tid.wrapping_add(1);
        t
    }

    /// Does (priority, guid) outrank `other`? Higher priority wins, then the LOWER GUID.
    fn ranks_above(&self, a: (u8, u64), b: (u8, u64)) -> bool {
        if a.0 != b.0 {
            return a.0 > b.0;
        }
        #[cfg(feature = "fault-injection")]
        if self.cfg.injected_fault == Some(InjectedFault::TieBreakHigherGuid) {
            return a.1 > b.1;
        }
        a.1 < b.1
    }

    fn outranks_us(&self, info: &SmInfo) -> bool {
        self.ranks_above(
            (info.priority, info.guid),
            (self.priority(), self.cfg.port_guid),
        )
    }

    /// The M_Key rule for our SMInfo answers (see `ElectionConfig::m_key`).
    fn requester_passes(&self, m_key: u64, info: &SmInfo) -> bool {
        self.cfg.m_key == 0 || m_key == self.cfg.m_key || info.sm_key == self.cfg.sm_key
    }

    /// Without `trusted_sm_guids` everyone; with it, a request from a port we can tell
    /// ([`requester_port`](Self::requester_port)) and that is trusted.
    fn requester_trusted(&self, from: &SmRoute) -> bool {
        self.cfg.trusted_sm_guids.is_none()
            || self
                .requester_port(from)
                .is_some_and(|g| self.is_trusted(g))
    }

    /// An untrusted known SM port answered `info`: remembered, and reported when new or
    /// changed.
    fn note_untrusted(&mut self, info: &SmInfo) {
        if !self.known.contains_key(&info.guid) {
            return;
        }
        let seen = (info.priority, info.sm_state);
        if self.untrusted.insert(info.guid, seen) == Some(seen) {
            return;
        }
        let guid = format_args!("{:#018x}", info.guid);
        if info.sm_state == SmState::Master {
            tracing::warn!(
                %guid,
                priority = info.priority,
                our_state = %self.state,
                "rogue master: an untrusted SM answers MASTER; ignored"
            );
            self.events.push_back(ElectionEvent::RogueMaster {
                guid: info.guid,
                priority: info.priority,
                our_state: self.state,
            });
        } else {
            tracing::warn!(
                %guid,
                priority = info.priority,
                state = %info.sm_state,
                "untrusted SM (not in trusted_sm_guids): not followed, never handed over to"
            );
            self.events.push_back(ElectionEvent::UntrustedSmSeen {
                guid: info.guid,
                priority: info.priority,
                state: info.sm_state,
            });
        }
    }

    /// Remembers a known SM port's answer (priority and state) for handover_to.
    fn note_peer(&mut self, info: &SmInfo) {
        if self.known.contains_key(&info.guid) {
            self.peers.insert(info.guid, (info.priority, info.sm_state));
        }
    }

    /// Our SMInfo as payload of a request we send (presents our SM_Key).
    fn request_payload(&self, state: SmState) -> SmInfo {
        SmInfo {
            sm_key: self.cfg.sm_key,
            sm_state: state,
            ..self.sm_info()
        }
    }

    fn is_suspect(&self, info: &SmInfo) -> bool {
        self.suspects.get(&info.guid) == Some(&info.act_count)
    }

    fn query(&mut self, now: Duration, dest: SmRoute, expect: Option<u64>, purpose: Purpose) {
        let retries = self.cfg.query_retries;
        self.query_with_retries(now, dest, expect, purpose, retries);
    }

    fn query_with_retries(
        &mut self,
        now: Duration,
        dest: SmRoute,
        expect: Option<u64>,
        purpose: Purpose,
        retries: u32,
    ) {
        let tid = self.alloc_tid();
        let msg = SmInfoMsg::Get {
            tid,
            m_key: self.cfg.m_key,
            info: self.request_payload(self.state),
        };
        self.transmits.push_back(Transmit {
            dest: dest.clone(),
            msg: msg.clone(),
        });
        self.pending.insert(
            tid,
            Pending {
                dest,
                msg,
                expect_guid: expect,
                purpose,
                deadline: now + self.cfg.query_timeout,
                timeout: self.cfg.query_timeout,
                retries_left: retries,
            },
        );
    }

    fn send_set(
        &mut self,
        now: Duration,
        dest: SmRoute,
        target: u64,
        packet: ControlPacket,
        purpose: Purpose,
    ) {
        let tid = self.alloc_tid();
        let msg = SmInfoMsg::Set {
            tid,
            m_key: self.cfg.m_key,
            attr_mod: packet.attr_mod(),
            info: self.request_payload(packet.required_sender_state()),
        };
        self.transmits.push_back(Transmit {
            dest: dest.clone(),
            msg: msg.clone(),
        });
        self.pending.insert(
            tid,
            Pending {
                dest,
                msg,
                expect_guid: Some(target),
                purpose,
                deadline: now + self.cfg.handover_timeout,
                timeout: self.cfg.handover_timeout,
                retries_left: self.cfg.handover_retries,
            },
        );
    }

    fn set_state(&mut self, to: SmState, reason: TransitionReason) {
        let from = self.state;
        self.state = to;
        tracing::info!(from = %from, to = %to, reason = %reason, guid = self.cfg.port_guid, "sm state change");
        self.events
            .push_back(ElectionEvent::StateChanged { from, to, reason });
    }

    /// Mastership is handed to us on purpose: a priority we yielded in an earlier
    /// [`handover_to`](Self::handover_to) (so that the move away from us stuck) has done
    /// its job and ends. Kept, it can rank us below the SM that just handed over: that
    /// SM computed its own yield from the priority it last read from us, possibly from
    /// before our yield (a master reads its peers only every `master_poll_interval`), so
    /// it may not yield at all; our first master poll then finds it outranking us and
    /// we hand the subnet straight back (drill planned-handover, cycle 2).
    fn end_yield(&mut self) {
        if self.yielded.is_some() {
            self.changing_priority(|e| e.yielded = None);
        }
    }

    fn drop_elevation(&mut self) {
        if self.elevated {
            self.changing_priority(|e| e.elevated = false);
        }
    }

    /// Applies `change` to what makes up our advertised priority and reports
    /// `PriorityChanged` if the advertised value moved.
    fn changing_priority(&mut self, change: impl FnOnce(&mut Self)) {
        let old = self.priority();
        change(self);
        let new = self.priority();
        if old != new {
            self.events
                .push_back(ElectionEvent::PriorityChanged { from: old, to: new });
        }
    }

    fn clear_activity(&mut self) {
        self.pending.clear();
        self.round = None;
        self.following = None;
        self.handover = None;
        self.handover_yield = None;
        self.unconfirmed = None;
        self.master_poll_at = None;
    }

    fn enter_discovering(&mut self, now: Duration, reason: TransitionReason) {
        self.enter_discovering_after(now, reason, None);
    }

    /// DISCOVERING; `lost` is a master that just stopped answering our polls.
    fn enter_discovering_after(
        &mut self,
        now: Duration,
        reason: TransitionReason,
        lost: Option<u64>,
    ) {
        self.clear_activity();
        self.drop_elevation();
        self.set_state(SmState::Discovering, reason);
        self.round = Some(Round {
            lost,
            ..Round::default()
        });
        // Ask for the sweep now, so it runs while the known SM ports are queried.
        self.events.push_back(ElectionEvent::DiscoveryNeeded);
        self.query_round(now);
        self.maybe_finish_round(now);
    }

    fn enter_standby(
        &mut self,
        now: Duration,
        master: &SmInfo,
        route: SmRoute,
        reason: TransitionReason,
    ) {
        self.clear_activity();
        self.drop_elevation();
        self.set_state(SmState::Standby, reason);
        let lid = self.known.get(&master.guid).and_then(|p| p.lid);
        self.following = Some(Following {
            master: master.guid,
            route,
            lid,
            missed: 0,
            poll_at: now + self.cfg.poll_interval,
            poll_tid: None,
            last_act: (master.sm_state == SmState::Master).then_some(master.act_count),
            last_act_change: now,
            discovering_since: (master.sm_state == SmState::Discovering).then_some(now),
        });
        // A newcomer that outranks the master tells it (IBA / OpenSM: trap 144).
        if master.sm_state == SmState::Master && self.outranks_master(master) {
            self.send_trap144(now);
        }
    }

    fn outranks_master(&self, master: &SmInfo) -> bool {
        self.ranks_above(
            (self.priority(), self.cfg.port_guid),
            (master.priority, master.guid),
        )
    }

    fn become_master(&mut self, now: Duration, reason: TransitionReason) {
        self.clear_activity();
        self.unknown_requesters.clear();
        self.set_state(SmState::Master, reason);
        if let Some(p) = self.cfg.sticky_priority {
            let old = self.priority();
            self.elevated = true;
            let new = self.priority();
            if old != new {
                self.events
                    .push_back(ElectionEvent::PriorityChanged { from: old, to: new });
            }
            let _ = p;
        }
        self.master_poll_at = Some(now + self.cfg.master_poll_interval);
    }

    fn enter_not_active(&mut self, reason: TransitionReason) {
        self.clear_activity();
        self.drop_elevation();
        self.set_state(SmState::NotActive, reason);
    }

    fn query_round(&mut self, now: Duration) {
        if !self.swept {
            return;
        }
        let Some(round) = self.round.as_ref() else {
            return;
        };
        let lost = round.lost;
        let todo: Vec<SmPort> = self
            .known
            .values()
            .filter(|p| !round.queried.contains(&p.guid))
            .cloned()
            .collect();
        for p in todo {
            if let Some(r) = self.round.as_mut() {
                r.queried.insert(p.guid);
            }
            let retries = if lost == Some(p.guid) {
                0
            } else {
                self.cfg.query_retries
            };
            self.query_with_retries(now, p.route, Some(p.guid), Purpose::Discover, retries);
        }
    }

    fn maybe_finish_round(&mut self, now: Duration) {
        if self.state != SmState::Discovering || !self.swept || self.port_down {
            return;
        }
        if self
            .pending
            .values()
            .any(|p| p.purpose == Purpose::Discover)
        {
            return;
        }
        if let Some(r) = self.round.as_mut() {
            // Without a MASTER among the SM ports an older sweep recorded, conclude
            // only from a sweep made since: a master that went silent over a broken
            // path is not dead (a false failover, two masters until they meet), and
            // an SM that came up since the last sweep may be the master (else we
            // follow a STANDBY, or take MASTER beside it). The sweep was asked for
            // when the round began (`enter_discovering_after`); the initial and
            // port-up rounds wait for the driver's first sweep anyway (`swept`).
            if !r.fresh_sweep && r.best_master.is_none() {
                return;
            }
        }
        let Some(round) = self.round.take() else {
            return;
        };
        if let Some((info, route)) = round.best_master {
            self.enter_standby(
                now,
                &info,
                route,
                TransitionReason::FoundMaster { master: info.guid },
            );
        } else if let Some((info, route)) = round.best_higher {
            self.enter_standby(
                now,
                &info,
                route,
                TransitionReason::FoundHigherSm {
                    guid: info.guid,
                    priority: info.priority,
                },
            );
        } else {
            self.become_master(
                now,
                TransitionReason::NoHigherSm {
                    answered: round.answered,
                    queried: round.queried.len(),
                },
            );
        }
    }

    fn record_discovery(&mut self, info: SmInfo, route: SmRoute) {
        if self.is_suspect(&info) {
            return;
        }
        if !self.is_trusted(info.guid) {
            // Neither a master to follow nor a higher SM to wait for: without a trusted
            // one the round concludes MASTER by the normal rules.
            self.note_untrusted(&info);
            if let Some(round) = self.round.as_mut() {
                round.answered += 1;
            }
            return;
        }
        let outranks = self.outranks_us(&info);
        let better = |cur: &Option<(SmInfo, SmRoute)>, this: &Election| match cur {
            None => true,
            Some((c, _)) => this.ranks_above((info.priority, info.guid), (c.priority, c.guid)),
        };
        let Some(round) = self.round.as_ref() else {
            return;
        };
        let take_master = info.sm_state == SmState::Master && better(&round.best_master, self);
        let take_higher = matches!(info.sm_state, SmState::Discovering | SmState::Standby)
            && outranks
            && better(&round.best_higher, self);
        if let Some(round) = self.round.as_mut() {
            round.answered += 1;
            if take_master {
                round.best_master = Some((info, route));
            } else if take_higher {
                round.best_higher = Some((info, route));
            }
        }
    }

    fn handle_resp(&mut self, now: Duration, tid: u64, status: u16, info: SmInfo) {
        // Standby poll of the master.
        if self.state == SmState::Standby {
            if let Some(f) = self.following.as_ref() {
                if f.poll_tid == Some(tid) {
                    self.handle_poll_answer(now, status, info);
                    return;
                }
            }
        }
        let Some(p) = self.pending.remove(&tid) else {
            tracing::debug!(tid, "SMInfo response without a pending request; ignored");
            return;
        };
        let guid_ok = !matches!(p.expect_guid, Some(g) if g != info.guid);
        let key_ok = info.sm_key == 0 || info.sm_key == self.cfg.sm_key;
        if !key_ok {
            self.events
                .push_back(ElectionEvent::RemoteSmKeyMismatch { guid: info.guid });
        }
        if status == 0 && guid_ok && key_ok {
            self.note_peer(&info);
        }
        if info.act_count
            != self
                .suspects
                .get(&info.guid)
                .copied()
                .unwrap_or(info.act_count)
        {
            self.suspects.remove(&info.guid);
        }
        match p.purpose {
            Purpose::Discover => {
                if status == 0 && guid_ok && key_ok && self.state == SmState::Discovering {
                    self.record_discovery(info, p.dest);
                }
                self.maybe_finish_round(now);
            }
            Purpose::MasterQuery => {
                if status == 0 && guid_ok && key_ok {
                    let verified = p.expect_guid.is_some();
                    self.master_view(now, info, p.dest, verified);
                }
            }
            Purpose::Handover { target } => {
                if self.state != SmState::Master || self.handover != Some(target) {
                    return;
                }
                if status == 0 && guid_ok {
                    self.complete_handover(now, target, p.dest, info, false);
                } else {
                    self.handover = None;
                    self.handover_yield = None;
                    self.pending
                        .retain(|_, q| !matches!(q.purpose, Purpose::Handover { .. }));
                    self.events.push_back(ElectionEvent::HandoverFailed {
                        to: target,
                        status: Some(status),
                    });
                }
            }
            Purpose::Control { target, packet } => {
                self.events.push_back(ElectionEvent::ControlAnswered {
                    to: target,
                    packet,
                    status: Some(status),
                });
            }
            Purpose::Trap => {}
        }
    }

    fn request_failed(&mut self, now: Duration, p: Pending) {
        match p.purpose {
            Purpose::Discover => {
                let moved = p
                    .expect_guid
                    .and_then(|g| self.known.get(&g))
                    .is_some_and(|k| k.route != p.dest);
                let mut requery = false;
                if let Some(r) = self.round.as_mut() {
                    if r.lost.is_some() && r.lost == p.expect_guid {
                        if r.fresh_sweep && moved {
                            // A sweep since found the lost master over another route
                            // (before this query over the old one gave up): ask there.
                            if let Some(g) = r.lost.take() {
                                r.queried.remove(&g);
                            }
                            requery = true;
                        } else {
                            r.lost_unanswered = Some(p.dest);
                        }
                    }
                }
                if requery {
                    self.query_round(now);
                }
                self.maybe_finish_round(now)
            }
            Purpose::MasterQuery | Purpose::Trap => {}
            Purpose::Handover { target } => {
                if self.handover == Some(target) {
                    // Stay MASTER: if the target did take over and only the answers were
                    // lost, the next master poll sees a higher MASTER and hands over again;
                    // for a targeted handover to a lower SM, master_view completes it.
                    self.handover = None;
                    self.unconfirmed = self.handover_yield.take().map(|y| (target, y));
                    self.events.push_back(ElectionEvent::HandoverFailed {
                        to: target,
                        status: None,
                    });
                }
            }
            Purpose::Control { target, packet } => {
                self.events.push_back(ElectionEvent::ControlAnswered {
                    to: target,
                    packet,
                    status: None,
                });
            }
        }
    }

    /// MASTER learnt another SM's SMInfo. `verified`: it answers a query of a known
    /// SM port (its GUID checked against the port's); not after a trap 144 from a port
    /// our sweeps have not found, whose answer names itself.
    fn master_view(&mut self, now: Duration, info: SmInfo, route: SmRoute, verified: bool) {
        if self.state != SmState::Master || self.is_suspect(&info) {
            return;
        }
        if self.cfg.trusted_sm_guids.is_some() && (!verified || !self.is_trusted(info.guid)) {
            // Never handed over to, whatever it answers; an untrusted MASTER is a rogue
            // and we, the trusted master, keep mastership (and keep sweeping).
            if verified {
                self.note_untrusted(&info);
            }
            return;
        }
        if self.handover.is_some() {
            return;
        }
        if let Some((target, y)) = self.unconfirmed {
            if info.guid == target {
                self.unconfirmed = None;
                if info.sm_state == SmState::Master {
                    self.handover_yield = Some(y);
                    self.complete_handover(now, target, route, info, false);
                    return;
                }
            }
        }
        if matches!(info.sm_state, SmState::Master | SmState::Standby) && self.outranks_us(&info) {
            self.handover = Some(info.guid);
            self.events
                .push_back(ElectionEvent::HandoverStarted { to: info.guid });
            self.send_set(
                now,
                route,
                info.guid,
                ControlPacket::Handover,
                Purpose::Handover { target: info.guid },
            );
        }
    }

    fn complete_handover(
        &mut self,
        now: Duration,
        target: u64,
        route: SmRoute,
        info: SmInfo,
        acknowledged: bool,
    ) {
        let master = SmInfo {
            guid: target,
            sm_state: SmState::Master,
            ..info
        };
        let route = self
            .known
            .get(&target)
            .map(|p| p.route.clone())
            .unwrap_or(route);
        if let Some(y) = self.handover_yield.take() {
            // Before enter_standby, so it neither traps 144 nor would win it back.
            let old = self.priority();
            self.yielded = Some(y);
            self.elevated = false;
            let new = self.priority();
            if old != new {
                self.events
                    .push_back(ElectionEvent::PriorityChanged { from: old, to: new });
            }
        }
        self.enter_standby(
            now,
            &master,
            route,
            TransitionReason::HandoverDone {
                to: target,
                acknowledged,
            },
        );
    }

    fn handle_poll_answer(&mut self, now: Duration, status: u16, info: SmInfo) {
        let Some(f) = self.following.as_ref() else {
            return;
        };
        let master = f.master;
        let key_ok = info.sm_key == 0 || info.sm_key == self.cfg.sm_key;
        if status != 0 || info.guid != master || !key_ok {
            // Counts as a missed poll at the next tick.
            return;
        }
        self.note_peer(&info);
        let stall = self.cfg.stall_window;
        let grace = self.cfg.discovering_grace;
        let outranks = self.outranks_us(&info);
        let Some(f) = self.following.as_mut() else {
            return;
        };
        match info.sm_state {
            SmState::Master => {
                f.missed = 0;
                f.poll_tid = None;
                f.discovering_since = None;
                if f.last_act != Some(info.act_count) {
                    f.last_act = Some(info.act_count);
                    f.last_act_change = now;
                } else if let Some(w) = stall {
                    let stalled_for = now.saturating_sub(f.last_act_change);
                    if stalled_for >= w {
                        self.suspects.insert(master, info.act_count);
                        self.enter_discovering(
                            now,
                            TransitionReason::ActCountStalled {
                                master,
                                act_count: info.act_count,
                                stalled_for,
                            },
                        );
                    }
                }
            }
            SmState::Discovering if outranks => {
                // A higher SM still looking around is about to become master: alive,
                // but only for `discovering_grace` (OpenSM counts it as a missed poll).
                f.missed = 0;
                f.poll_tid = None;
                f.last_act = None;
                let since = *f.discovering_since.get_or_insert(now);
                let waited = now.saturating_sub(since);
                if waited >= grace {
                    self.enter_discovering(
                        now,
                        TransitionReason::FollowedNotMaster {
                            guid: master,
                            state: SmState::Discovering,
                            waited,
                        },
                    );
                }
            }
            SmState::Standby => {
                // It follows someone else (it handed over, or lost to a higher SM): that
                // one is the master. OpenSM keeps polling a higher STANDBY SM as if it
                // were alive, which strands a standby behind a standby after a handover.
                self.enter_discovering(
                    now,
                    TransitionReason::FollowedNotMaster {
                        guid: master,
                        state: SmState::Standby,
                        waited: Duration::ZERO,
                    },
                )
            }
            state => {
                self.enter_discovering(now, TransitionReason::MasterResigned { master, state })
            }
        }
    }

    fn standby_tick(&mut self, now: Duration) {
        if self.state != SmState::Standby {
            return;
        }
        let retries = self.cfg.poll_retries;
        let Some(f) = self.following.as_mut() else {
            return;
        };
        if f.poll_at > now {
            return;
        }
        if f.poll_tid.take().is_some() {
            f.missed += 1;
        }
        if f.missed >= retries {
            let (master, missed) = (f.master, f.missed);
            self.enter_discovering_after(
                now,
                TransitionReason::MissedPolls { master, missed },
                Some(master),
            );
            return;
        }
        let dest = f.route.clone();
        let tid = self.alloc_tid();
        let msg = SmInfoMsg::Get {
            tid,
            m_key: self.cfg.m_key,
            info: self.request_payload(SmState::Standby),
        };
        if let Some(f) = self.following.as_mut() {
            f.poll_tid = Some(tid);
            f.poll_at = now + self.cfg.poll_interval;
        }
        self.transmits.push_back(Transmit { dest, msg });
    }

    fn send_trap144(&mut self, now: Duration) {
        let Some(f) = self.following.as_ref() else {
            return;
        };
        let dest = f.lid.map(SmRoute::Lid).unwrap_or_else(|| f.route.clone());
        let tid = self.alloc_tid();
        let msg = SmInfoMsg::Trap144 {
            tid,
            issuer_lid: self.local_lid,
            issuer_guid: self.cfg.port_guid,
        };
        self.pending.retain(|_, p| p.purpose != Purpose::Trap);
        self.transmits.push_back(Transmit {
            dest: dest.clone(),
            msg: msg.clone(),
        });
        self.pending.insert(
            tid,
            Pending {
                dest,
                msg,
                expect_guid: None,
                purpose: Purpose::Trap,
                deadline: now + self.cfg.query_timeout,
                timeout: self.cfg.query_timeout,
                retries_left: self.cfg.query_retries,
            },
        );
    }

    /// MASTER answered a SubnGet(SMInfo). A requester that names itself in the payload
    /// (as ours do: GUID, priority, state) and is not among the SM ports our sweeps found
    /// is an SM that came up after our last heavy sweep: its port set IsSM, which moves no
    /// PortState, so no light sweep sees it, and a newcomer below us sends no trap 144.
    /// Read its SMInfo back along the request's path (the roster learns it at once) and
    /// ask for one heavy sweep, which adds its port to the known ones. A known SM's
    /// payload refreshes its (priority, state). Requests with a zero GUID (`sminfo`,
    /// OpenSM, pollers) change nothing.
    fn requested_by(&mut self, now: Duration, from: &SmRoute, info: &SmInfo) {
        if self.state != SmState::Master || info.guid == 0 || info.guid == self.cfg.port_guid {
            return;
        }
        if self.known.contains_key(&info.guid) {
            // A known SM's own word on its state and advertised priority, fresher than
            // our last master poll (a standby polls us every `poll_interval`): what
            // handover_to checks and computes its yield from.
            if info.sm_state != SmState::NotActive {
                self.note_peer(info);
            }
            return;
        }
        if self.unknown_requesters.contains(&info.guid)
            || self.unknown_requesters.len() >= MAX_UNKNOWN_REQUESTERS
        {
            return;
        }
        tracing::info!(
            guid = format_args!("{:#018x}", info.guid),
            priority = info.priority,
            state = %info.sm_state,
            "an SM our sweeps have not found queried us: reading its SMInfo, heavy sweep"
        );
        self.unknown_requesters.insert(info.guid);
        self.query(
            now,
            route_for_new_request(from),
            Some(info.guid),
            Purpose::MasterQuery,
        );
        self.events.push_back(ElectionEvent::HeavySweepRequested);
    }

    fn handle_trap144(
        &mut self,
        now: Duration,
        from: SmRoute,
        tid: u64,
        issuer_lid: u16,
        issuer_guid: u64,
    ) {
        if self.state != SmState::Master {
            tracing::debug!(issuer_lid, "trap 144 while not master; ignored");
            return;
        }
        self.transmits.push_back(Transmit {
            dest: from.clone(),
            msg: SmInfoMsg::TrapRepress { tid },
        });
        let port = self
            .known
            .values()
            .find(|p| {
                (issuer_guid != 0 && p.guid == issuer_guid)
                    || (issuer_lid != 0 && p.lid == Some(issuer_lid))
            })
            .cloned();
        match port {
            Some(p) => self.query(now, p.route, Some(p.guid), Purpose::MasterQuery),
            None => self.query(
                now,
                route_for_new_request(&from),
                None,
                Purpose::MasterQuery,
            ),
        }
    }

    fn handle_set(
        &mut self,
        now: Duration,
        from: SmRoute,
        tid: u64,
        m_key: u64,
        attr_mod: u32,
        info: SmInfo,
    ) {
        // The response payload is our SMInfo before the transition (as OpenSM does).
        let mut reply = self.sm_info();
        if self.requester_passes(m_key, &info) && self.requester_trusted(&from) {
            reply.sm_key = self.cfg.sm_key;
        }
        let verdict = self.check_set(&from, attr_mod, &info);
        let status = match verdict {
            Ok(_) => 0,
            Err(reason) => {
                if reason == RejectReason::SmKeyMismatch {
                    self.sm_key_violations += 1;
                }
                tracing::warn!(attr_mod, from = info.guid, %reason, "rejecting SubnSet(SMInfo)");
                self.events.push_back(ElectionEvent::ControlRejected {
                    attr_mod,
                    from: info.guid,
                    reason,
                });
                STATUS_INVALID_VALUE
            }
        };
        self.transmits.push_back(Transmit {
            dest: from.clone(),
            msg: SmInfoMsg::GetResp {
                tid,
                status,
                attr_mod,
                info: reply,
            },
        });
        let Ok(packet) = verdict else {
            return;
        };
        let reason = TransitionReason::Control {
            packet,
            from: info.guid,
        };
        match (self.state, packet) {
            (SmState::Standby, ControlPacket::Handover) => {
                #[cfg(feature = "fault-injection")]
                if self.cfg.injected_fault == Some(InjectedFault::IgnoreHandover) {
                    return;
                }
                self.end_yield();
                self.become_master(now, reason);
                self.send_ack(now, info.guid, &from);
            }
            (SmState::Master, ControlPacket::Handover) => {
                self.events.push_back(ElectionEvent::HeavySweepRequested);
                self.send_ack(now, info.guid, &from);
            }
            (SmState::Master, ControlPacket::Acknowledge) if self.handover == Some(info.guid) => {
                let route = route_for_new_request(&from);
                self.complete_handover(now, info.guid, route, info, true);
            }
            (SmState::Standby, ControlPacket::Discover) => self.enter_discovering(now, reason),
            (SmState::Standby, ControlPacket::Disable) => self.enter_not_active(reason),
            (SmState::NotActive, ControlPacket::Standby) => {
                let route = self
                    .known
                    .get(&info.guid)
                    .map(|p| p.route.clone())
                    .unwrap_or_else(|| route_for_new_request(&from));
                let master = SmInfo {
                    sm_state: SmState::Master,
                    ..info
                };
                self.enter_standby(now, &master, route, reason);
            }
            // DISCOVERING + HANDOVER (OpenSM: nothing, the sender is found later),
            // STANDBY + ACKNOWLEDGE (already standby).
            _ => {}
        }
    }

    fn check_set(
        &self,
        from: &SmRoute,
        attr_mod: u32,
        info: &SmInfo,
    ) -> Result<ControlPacket, RejectReason> {
        let packet =
            ControlPacket::from_attr_mod(attr_mod).ok_or(RejectReason::UnknownControlPacket)?;
        if self.cfg.trusted_sm_guids.is_some() {
            // The sender's port, told by the route the SMP came by, must be a trusted SM
            // and the payload must name that port (a rogue can write any GUID there).
            let sender = self.requester_port(from);
            if sender != Some(info.guid) || !self.is_trusted(info.guid) {
                return Err(RejectReason::UntrustedSender);
            }
        }
        let key_ok = match self.cfg.sm_key_policy {
            SmKeyPolicy::Strict => {
                info.sm_key == self.cfg.sm_key
                    || (info.sm_key == 0
                        && packet == ControlPacket::Handover
                        && self.state == SmState::Standby
                        && self.following.as_ref().map(|f| f.master) == Some(info.guid))
            }
            SmKeyPolicy::AllowZero => info.sm_key == self.cfg.sm_key || info.sm_key == 0,
            SmKeyPolicy::Off => true,
        };
        if !key_ok {
            return Err(RejectReason::SmKeyMismatch);
        }
        if info.sm_state != packet.required_sender_state() {
            return Err(RejectReason::BadSenderState);
        }
        let waiting_ack = self.state == SmState::Master
            && packet == ControlPacket::Acknowledge
            && self.handover.is_some();
        if !(packet.legal_in(self.state) || waiting_ack) {
            return Err(RejectReason::IllegalInState);
        }
        Ok(packet)
    }

    fn send_ack(&mut self, _now: Duration, to: u64, from: &SmRoute) {
        let dest = self
            .known
            .get(&to)
            .map(|p| p.route.clone())
            .unwrap_or_else(|| route_for_new_request(from));
        let tid = self.alloc_tid();
        // ACKNOWLEDGE must carry SMState=STANDBY (the state the HANDOVER found us in).
        self.transmits.push_back(Transmit {
            dest,
            msg: SmInfoMsg::Set {
                tid,
                m_key: self.cfg.m_key,
                attr_mod: ControlPacket::Acknowledge.attr_mod(),
                info: self.request_payload(SmState::Standby),
            },
        });
    }
}

/// The hops of a directed route (`initial_path[1..=hop_cnt]`).
fn dr_hops(dr: &DrRoute) -> &[u8] {
    dr.initial_path
        .get(1..=usize::from(dr.hop_cnt))
        .unwrap_or(&[])
}

/// At most this many unknown SMInfo requesters each trigger a heavy sweep between two
/// sweeps that find them (a flood of made-up GUIDs cannot sweep the fabric forever).
const MAX_UNKNOWN_REQUESTERS: usize = 64;

/// The route for a new request to the sender of a request that arrived by `from`:
/// a LID stays; a directed route is the arrival's return path, reversed.
pub fn route_for_new_request(from: &SmRoute) -> SmRoute {
    match from {
        SmRoute::Lid(l) => SmRoute::Lid(*l),
        SmRoute::Directed(dr) => {
            if dr.return_path.is_empty() {
                return SmRoute::Directed(DrRoute::new(
                    dr.initial_path
                        .get(1..=usize::from(dr.hop_cnt))
                        .unwrap_or(&[]),
                ));
            }
            let hops: Vec<u8> = dr
                .return_path
                .get(1..=usize::from(dr.hop_cnt))
                .unwrap_or(&[])
                .iter()
                .rev()
                .copied()
                .collect();
            SmRoute::Directed(DrRoute::new(&hops))
        }
    }
}
