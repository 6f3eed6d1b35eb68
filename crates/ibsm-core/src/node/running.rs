//! A running node's plumbing: what arrives is routed by the low half of its TID
//! (every initiator allocates in its own [`TidRange`](crate::transactions::TidRange)),
//! requests go to the election (SMInfo, trap 144, TrapRepress) or the configurator
//! (other traps while MASTER), operator commands are served, and `pump` moves
//! everything the agents emit into the node's outputs, counting ActCount where SMPs
//! are emitted.
//!
//! A LID-routed request is answered LID-routed to the SLID it came from: that is how
//! plain `sminfo` (it reads the local PortInfo.MasterSMLID and sends a LID-routed
//! SubnGet(SMInfo) there) and a LID-routed trap's TrapRepress find their way back.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::time::Duration;

use ibsm_mad::{Method, Smp, SmpRoute, MAD_SIZE, PERMISSIVE_LID};

use crate::election::{response_dlid, wire, Election, ElectionError, SmInfoMsg, SmState, Transmit};
use crate::sa::SaAgent;
use crate::subnet::storm::LogSampler;
use crate::subnet::{Outgoing, StandingLfts, SubnetManager};
use crate::transactions::{Transactions, TransactionsConfig};

use super::config::{
    NodeConfig, SA_ACTIVITY_LOG_LINES, SA_ACTIVITY_LOG_WINDOW, TRAP_RECORD_LINES,
    TRAP_RECORD_WINDOW,
};
use super::state::{
    PortWatch, Running, Timer, ELECTION_TIDS, ELECTION_TID_HIGH, MAX_REMEMBERED_REQUESTS,
    NODE_TIDS, PORT_WATCH_TIDS, SUBNET_TIDS,
};
use super::types::{
    CommandError, CommandReply, NodeCommand, NodeError, NodeEvent, NodeStatus, Output, PeerView,
};

impl Running {
    /// The node once its port is known (`now`: start-up done).
    pub(crate) fn new(
        cfg: NodeConfig,
        now: Duration,
        port_guid: u64,
        lid: u16,
        local_port: u8,
    ) -> Result<Running, NodeError> {
        let m_key = cfg.subnet.m_key.key;
        let mut ecfg = cfg.election.clone();
        ecfg.port_guid = port_guid;
        ecfg.m_key = m_key;
        ecfg.tid_base = (ELECTION_TID_HIGH << 32) | u64::from(ELECTION_TIDS.base);
        let mut election =
            Election::new(ecfg, now).map_err(|e| NodeError::Config(e.to_string()))?;
        election.set_local_lid(lid);
        // Routing runs wherever the driver puts its jobs: the node keeps answering
        // SMInfo polls meanwhile (a master silent for a whole routing computation
        // looks dead to its standbys).
        let mut subnet_cfg = cfg.subnet.clone();
        subnet_cfg.offload_routing = true;
        subnet_cfg.transactions.tid_low = SUBNET_TIDS;
        let subnet =
            SubnetManager::new(subnet_cfg).map_err(|e| NodeError::Config(e.to_string()))?;
        // The node's own sweeps (the discovery a new master configures from) keep as
        // many SMPs in flight as the configurator's.
        let mut tx = Transactions::new(TransactionsConfig {
            tid_low: NODE_TIDS,
            window: cfg.subnet.transactions.window,
            ..TransactionsConfig::default()
        });
        tx.set_m_keys(&[m_key]);
        let mut timers = BTreeMap::new();
        timers.insert(Timer::Heavy, now.saturating_add(cfg.heavy_sweep_interval));
        timers.insert(Timer::Light, now.saturating_add(cfg.light_sweep_interval));
        timers.insert(Timer::PortWatch, now);
        tracing::info!(
            port_guid = format_args!("{port_guid:#018x}"),
            lid,
            priority = cfg.election.priority,
            "SM instance started in DISCOVERING"
        );
        let mut running = Running {
            out: VecDeque::new(),
            timers,
            election,
            tx,
            port_guid,
            lid,
            sweep: None,
            heavy_wanted: true,
            heavy_wanted_by_round: false,
            sweep_seq: 0,
            waiting_replies: Vec::new(),
            targets: Vec::new(),
            nodes: 0,
            unreachable: 0,
            subnet,
            subnet_sent: 0,
            subnet_replies: Vec::new(),
            subnet_replies_next: Vec::new(),
            subnet_light_replies: Vec::new(),
            last_discovery: None,
            fabric_changes: 0,
            topology_changes: 0,
            peers: BTreeMap::new(),
            state_since: now,
            state_reason: "started".into(),
            handed_over_to: 0,
            requests: HashMap::new(),
            request_order: VecDeque::new(),
            answered: HashSet::new(),
            last_sweep: String::new(),
            last_change_sweep: None,
            election_sent: 0,
            sminfo_requests: 0,
            port_watch: PortWatch {
                port: local_port,
                seq: 0,
                was_active: false,
                down: false,
            },
            prepared: None,
            prepared_sm_ports: None,
            replicated: None,
            partitions_applied: None,
            alarms: Vec::new(),
            duplicate_guids: 0,
            topology_capped: false,
            trap_event_log: LogSampler::new(TRAP_RECORD_WINDOW, TRAP_RECORD_LINES),
            sa_activity_log: LogSampler::new(SA_ACTIVITY_LOG_WINDOW, SA_ACTIVITY_LOG_LINES),
            sa: SaAgent::new(cfg.sa.clone()),
            standing: StandingLfts::default(),
            standing_under: None,
            cfg,
        };
        // The start-up partitions' IPoIB broadcast groups exist from the start, like
        // the default partition's.
        running.sync_ipoib_groups();
        Ok(running)
    }

    pub(crate) fn timer(&self, t: Timer) -> Duration {
        self.timers.get(&t).copied().unwrap_or(Duration::MAX)
    }

    pub(crate) fn set_timer(&mut self, t: Timer, at: Duration) {
        self.timers.insert(t, at);
    }

    pub(crate) fn emit(&mut self, ev: NodeEvent) {
        self.out.push_back(Output::Event(ev));
    }

    pub(crate) fn send(&mut self, mad: [u8; MAD_SIZE], dlid: Option<u16>) {
        self.out.push_back(Output::Transmit(Outgoing { dlid, mad }));
    }

    pub(crate) fn done(&mut self, id: u64, result: Result<CommandReply, CommandError>) {
        self.out.push_back(Output::Done { id, result });
    }

    /// The earliest deadline of the node and every agent in it.
    pub(crate) fn poll_timeout(&self) -> Option<Duration> {
        let mut at = self.timer(Timer::PortWatch);
        if self.subnet.is_active() {
            if !self.subnet.is_sweeping() {
                at = at.min(self.timer(Timer::Heavy));
            }
        } else if self.sweep.is_none() && !self.subnet.is_preparing() {
            at = at
                .min(self.timer(Timer::Light))
                .min(self.timer(Timer::Heavy));
            if self.heavy_wanted || !self.waiting_replies.is_empty() {
                at = Duration::ZERO;
            }
        }
        if self.standing_under.is_some() {
            at = at.min(self.timer(Timer::StandingLft));
        }
        [
            self.tx.poll_timeout(),
            self.election.poll_timeout(),
            self.subnet.poll_timeout(),
            self.sa.poll_timeout(),
        ]
        .into_iter()
        .flatten()
        .fold(at, Duration::min)
        .into()
    }

    /// Everything due at `now`: the agents' timers, the sweeps, the port watch.
    pub(crate) fn handle_timeout(&mut self, now: Duration) {
        if self.tx.poll_timeout().is_some_and(|t| t <= now) {
            self.tx.handle_timeout(now);
        }
        if self.election.poll_timeout().is_some_and(|t| t <= now) {
            self.election.handle_timeout(now);
        }
        if self.subnet.poll_timeout().is_some_and(|t| t <= now) {
            self.subnet.handle_timeout(now);
        }
        if self.sa.poll_timeout().is_some_and(|t| t <= now) {
            self.sa.handle_timeout(now);
        }
        if self.subnet.is_active() {
            if !self.subnet.is_sweeping() && now >= self.timer(Timer::Heavy) {
                self.schedule_master_heavy(now);
                self.subnet.start_heavy_sweep(now);
            }
        } else if self.sweep.is_none() && !self.subnet.is_preparing() {
            // (A prepared takeover has the fabric to itself until MASTER.)
            if self.heavy_wanted || now >= self.timer(Timer::Heavy) {
                self.start_sweep(now, true);
            } else if now >= self.timer(Timer::Light) || !self.waiting_replies.is_empty() {
                self.start_sweep(now, false);
            }
        }
        if now >= self.timer(Timer::PortWatch) {
            self.watch_local_port(now);
        }
        if self.standing_under.is_some() && now >= self.timer(Timer::StandingLft) {
            self.standing_round(now);
        }
    }

    // ----- commands --------------------------------------------------------------

    pub(crate) fn handle_command(&mut self, now: Duration, id: u64, command: NodeCommand) {
        match command {
            NodeCommand::SetPriority(priority) => {
                let r = self
                    .election
                    .set_priority(now, priority)
                    .map(|()| CommandReply::Done)
                    .map_err(|e| CommandError::InvalidArgument(e.to_string()));
                self.done(id, r);
            }
            NodeCommand::Handover { to } => {
                let r = self.handover(now, to).map(CommandReply::HandoverTo);
                self.done(id, r);
            }
            NodeCommand::SendControl { packet, guid } => {
                let r = self
                    .election
                    .send_control(now, guid, packet)
                    .map(|()| CommandReply::Done)
                    .map_err(|e| match e {
                        ElectionError::UnknownPeer { guid } => CommandError::InvalidArgument(
                            format!("unknown GUID {guid:#018x}: not an SM port this instance found in its last sweep"),
                        ),
                        ElectionError::NotMaster { .. } => {
                            CommandError::FailedPrecondition(e.to_string())
                        }
                        other => CommandError::InvalidArgument(other.to_string()),
                    });
                self.done(id, r);
            }
            NodeCommand::Sweep { heavy: true } if self.subnet.is_active() => {
                if self.subnet.is_heavy_sweeping() {
                    self.subnet_replies_next.push(id);
                } else {
                    self.subnet_replies.push(id);
                }
                self.subnet.start_heavy_sweep(now);
            }
            NodeCommand::Sweep { heavy: false } if self.subnet.is_active() => {
                // A light sweep (SwitchInfo of every switch, the SM ports); a sweep in
                // progress answers for it, and a change it sees starts a heavy one.
                self.subnet.start_light_sweep(now);
                self.subnet_light_replies.push(id);
            }
            NodeCommand::Sweep { heavy } => {
                if heavy {
                    self.want_heavy_sweep();
                }
                self.waiting_replies.push((heavy, id));
            }
            NodeCommand::SetConfiguredPartitions(partitions) => {
                let r = self.set_configured_partitions(now, partitions);
                self.done(id, r);
            }
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
        let rank = |p: &PeerView| (p.priority, std::cmp::Reverse(p.guid));
        let best = self
            .peers
            .values()
            .filter(|p| !p.is_self && handover_candidate(p.state))
            .filter(|p| self.election.is_trusted(p.guid))
            .max_by_key(|p| rank(p))
            .cloned();
        let Some(best) = best else {
            return Err(CommandError::FailedPrecondition(format!(
                "no trusted SM in STANDBY to hand over to (known SMs: {})",
                self.peers.len()
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
        self.emit(NodeEvent::record(
            "handover",
            format!("planned handover to {:#018x}: HANDOVER sent", target.guid),
        ));
        Ok(target.guid)
    }

    // ----- wire ------------------------------------------------------------------

    /// One MAD from the port; `slid` is the LRH SLID it came from.
    pub(crate) fn handle_mad(&mut self, now: Duration, mad: &[u8; MAD_SIZE], slid: u16) {
        self.handle_mad_as(now, mad, slid, false);
    }

    /// A SubnGet(SMInfo) the driver already answered ([`super::Input::SmInfoAnswered`]):
    /// handled as any MAD (counted, the poller noted), but the election's answer is not
    /// sent again.
    pub(crate) fn handle_answered_sminfo_get(
        &mut self,
        now: Duration,
        mad: &[u8; MAD_SIZE],
        slid: u16,
    ) {
        self.handle_mad_as(now, mad, slid, true);
    }

    fn handle_mad_as(&mut self, now: Duration, mad: &[u8; MAD_SIZE], slid: u16, answered: bool) {
        let mut smp = match Smp::decode(mad) {
            Ok(s) => s,
            Err(err) => {
                tracing::debug!(%err, "dropping undecodable MAD");
                return;
            }
        };
        // Where a LID-routed request's answer goes: the packet's SLID. Directed-route
        // requests are answered along their return path and need no LID.
        let reply_lid = match smp.route {
            SmpRoute::Lid if slid != 0 && slid != PERMISSIVE_LID => slid,
            _ => 0,
        };
        if smp.method.0 & 0x80 != 0 {
            let low = smp.tid as u32;
            if ELECTION_TIDS.contains(low) {
                smp.tid = (ELECTION_TID_HIGH << 32) | u64::from(low);
                if let Some(msg) = wire::decode_for_election(&smp) {
                    self.note_sm_info(now, &msg);
                    let from = wire::arrival_route(&smp, 0);
                    self.election.handle_message(now, from, msg);
                }
            } else if PORT_WATCH_TIDS.contains(low) {
                self.local_port_read(now, &smp);
            } else if NODE_TIDS.contains(low) {
                self.tx.handle_incoming(now, mad);
            } else if SUBNET_TIDS.contains(low)
                && (self.subnet.is_active() || self.subnet.is_preparing())
            {
                self.subnet.handle_incoming(now, mad);
            }
            return;
        }
        match wire::decode_for_election(&smp) {
            Some(msg) => {
                if smp.method == Method::TRAP_REPRESS {
                    let low = smp.tid as u32;
                    smp.tid = (ELECTION_TID_HIGH << 32) | u64::from(low);
                    let msg = wire::decode_for_election(&smp).unwrap_or(msg);
                    self.election
                        .handle_message(now, wire::arrival_route(&smp, 0), msg);
                    return;
                }
                self.note_sm_info(now, &msg);
                if matches!(msg, SmInfoMsg::Get { .. }) {
                    self.sminfo_requests = self.sminfo_requests.saturating_add(1);
                }
                let hint = match &msg {
                    _ if reply_lid != 0 => reply_lid,
                    SmInfoMsg::Trap144 { issuer_lid, .. } => *issuer_lid,
                    _ => 0,
                };
                if matches!(msg, SmInfoMsg::Trap144 { .. }) {
                    self.fabric_changes += 1;
                    self.topology_changes += 1;
                    if self.subnet.is_active() {
                        // A port's capabilities changed (an SM appeared...): re-read
                        // them, held down like every trap-triggered sweep.
                        self.subnet.request_trap_sweep(now, 144);
                    }
                    self.trap_event(now, format!("trap 144 from LID {hint}"));
                }
                let from = wire::arrival_route(&smp, hint);
                let tid = smp.tid;
                self.remember_request(smp, hint);
                if answered && matches!(msg, SmInfoMsg::Get { .. }) {
                    self.answered.insert(tid);
                }
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
                self.send(repress.encode(), Some(reply_lid));
                self.trap_event(
                    now,
                    format!(
                        "trap received (attribute {:?}): heavy sweep scheduled",
                        smp.attr_id
                    ),
                );
                self.want_heavy_sweep();
                self.fabric_changes += 1;
                self.topology_changes += 1;
            }
            None => {
                tracing::trace!(attr = ?smp.attr_id, method = ?smp.method, "ignoring request");
            }
        }
    }

    /// A `trap` record for `Watch`, sampled: a storm of traps must not flood the
    /// subscribers; the count held back goes out as one record.
    fn trap_event(&mut self, now: Duration, text: String) {
        if let Some(n) = self.trap_event_log.take_suppressed(now) {
            self.emit(NodeEvent::record(
                "trap",
                format!("{n} more trap(s) not reported (trap storm)"),
            ));
        }
        if self.trap_event_log.allow(now) {
            tracing::info!("{text}");
            self.emit(NodeEvent::record("trap", text));
        }
    }

    fn remember_request(&mut self, smp: Smp, hint: u16) {
        if self.requests.insert(smp.tid, (smp, hint)).is_none() {
            self.request_order.push_back(smp.tid);
        }
        while self.request_order.len() > MAX_REMEMBERED_REQUESTS {
            if let Some(old) = self.request_order.pop_front() {
                self.requests.remove(&old);
                self.answered.remove(&old);
            }
        }
    }

    /// Record the SMInfo an SM reported about itself (answers and control payloads),
    /// arrived at `now`: it answered, so no poll of it is missed any more.
    pub(crate) fn note_sm_info(&mut self, now: Duration, msg: &SmInfoMsg) {
        let info = match msg {
            SmInfoMsg::GetResp {
                info, status: 0, ..
            }
            | SmInfoMsg::Set { info, .. } => info,
            _ => return,
        };
        if info.guid == 0 || info.guid == self.port_guid {
            return;
        }
        if info.sm_state == SmState::Master {
            // Another master may be configuring the fabric: our discovery gets stale.
            self.fabric_changes += 1;
        }
        let entry = self
            .peers
            .entry(info.guid)
            .or_insert_with(|| PeerView::unknown(info.guid));
        entry.priority = info.priority;
        entry.state = Some(info.sm_state);
        entry.act_count = info.act_count;
        entry.answered_at = Some(now);
        entry.missed_polls = 0;
    }

    /// Move everything along until nothing changes: the agent's events into the
    /// sweep, the sweep's requests into the agent, every agent's transmits and events
    /// into the outputs.
    pub(crate) fn pump(&mut self, now: Duration) {
        loop {
            let mut progressed = false;
            while let Some(ev) = self.tx.poll_event() {
                progressed = true;
                self.on_tx_event(now, ev);
            }
            progressed |= self.advance_sweep(now);
            progressed |= self.feed_standing(now);
            while let Some(mad) = self.tx.poll_transmit() {
                progressed = true;
                self.send(mad, None);
                self.election.handle_smps_sent(1);
            }
            while let Some(out) = self.subnet.poll_transmit() {
                progressed = true;
                self.out.push_back(Output::Transmit(out));
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
                self.out.push_back(Output::RoutingJob(job));
            }
            while let Some(job) = self.subnet.poll_sa_snapshot_job() {
                progressed = true;
                self.out.push_back(Output::SaSnapshotJob(job));
            }
            while let Some(t) = self.election.poll_transmit() {
                progressed = true;
                self.transmit_election(t);
            }
            while let Some(ev) = self.election.poll_event() {
                progressed = true;
                self.on_election_event(now, ev);
            }
            // Changes first: the driver shows (and replicates) the SA's new state
            // before the requester gets its answer.
            progressed |= self.apply_group_changes(now);
            while let Some(t) = self.sa.poll_transmit() {
                progressed = true;
                self.out.push_back(Output::TransmitGmp(t));
            }
            if !progressed {
                break;
            }
        }
        self.tend_standing(now);
        if self.watch_master(now) {
            self.pump(now);
        }
    }

    fn transmit_election(&mut self, t: Transmit) {
        if t.msg.is_response() {
            let Some((req, hint)) = self.requests.remove(&t.msg.tid()) else {
                tracing::debug!(
                    tid = t.msg.tid(),
                    "response to a request no longer remembered"
                );
                return;
            };
            if self.answered.remove(&t.msg.tid()) {
                // The driver sent this answer when the request arrived.
                return;
            }
            let resp = match wire::encode_response(&req, &t.msg) {
                Ok(r) => r,
                Err(err) => {
                    tracing::warn!(%err, "cannot encode the election's response");
                    return;
                }
            };
            let dlid = response_dlid(&req.route, &t.dest, hint);
            self.send(resp.encode(), dlid);
            return;
        }
        let (smp, dlid) = match wire::encode_request(&t.dest, &t.msg) {
            Ok(x) => x,
            Err(err) => {
                tracing::warn!(%err, dest = %t.dest, "cannot encode the election's request");
                return;
            }
        };
        self.send(smp.encode(), dlid);
        self.election.handle_smps_sent(1);
        self.election_sent = self.election_sent.saturating_add(1);
    }

    /// What a driver publishes.
    pub(crate) fn status(&self) -> NodeStatus {
        let state = self.election.state();
        let master_guid = self.election.master_guid().unwrap_or(0);
        let master_lid = self.master_lid();
        // A standby's polls of its master go through the election, which counts the
        // misses; the sweeps' reads of every SM port are counted here.
        let following = (state == SmState::Standby).then_some(master_guid);
        let mut sms: Vec<PeerView> = self
            .peers
            .values()
            .map(|p| PeerView {
                trusted: self.election.is_trusted(p.guid),
                missed_polls: if following == Some(p.guid) {
                    p.missed_polls.max(self.election.missed_polls())
                } else {
                    p.missed_polls
                },
                ..p.clone()
            })
            .collect();
        sms.push(PeerView {
            guid: self.port_guid,
            lid: self.lid,
            priority: self.election.priority(),
            state: Some(state),
            act_count: self.election.act_count(),
            is_self: true,
            trusted: true,
            answered_at: None,
            missed_polls: 0,
        });
        sms.sort_by_key(|p| p.guid);
        let untrusted_sms = self
            .election
            .untrusted_sms()
            .fold((0u64, 0u64), |(u, r), (_, _, st)| {
                (u + 1, r + u64::from(st == SmState::Master))
            });
        let c = self.tx.counters();
        let sm = self.subnet.metrics();
        NodeStatus {
            started: true,
            port_guid: self.port_guid,
            lid: self.lid,
            priority: self.election.priority(),
            state: Some(state),
            state_since: self.state_since,
            state_reason: self.state_reason.clone(),
            handed_over_to: self.handed_over_to,
            act_count: self.election.act_count(),
            master_guid,
            master_lid,
            sms,
            last_sweep: self.last_sweep.clone(),
            last_change_sweep: self.last_change_sweep.clone(),
            sm_key_rejections: self.election.sm_key_violations(),
            losses_held_off: self.election.losses_held_off(),
            alarms: self.alarms.clone(),
            duplicate_guids: self.duplicate_guids,
            topology_capped: self.topology_capped,
            untrusted_sms,
            mads: (
                c.sent
                    .saturating_add(self.election_sent)
                    .saturating_add(self.subnet_sent),
                c.timeouts,
                c.retries,
            ),
            traps: (sm.traps, sm.traps_rate_limited, sm.trap_sweeps_deferred),
            sminfo_requests: self.sminfo_requests,
        }
    }
}

/// An SM a planned handover may target: one that is STANDBY, or DISCOVERING on its way
/// there (ranked, then refused as not ready until it settles).
pub fn handover_candidate(state: Option<SmState>) -> bool {
    matches!(state, Some(SmState::Standby | SmState::Discovering))
}
