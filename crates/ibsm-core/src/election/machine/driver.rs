//! The driver's side of the sans-IO contract (quinn-proto style): the `poll_*` drains
//! and the `handle_*` inputs (the SM ports a sweep found, our own port's link, a
//! received SMInfo SMP, trap 144 or TrapRepress, SMPs sent for ActCount, time passing).
//! Each input is dispatched on our SMState to the file of that state.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::election::types::{
    ElectionEvent, SmInfoMsg, SmPort, SmRoute, SmState, TransitionReason, Transmit,
};

use super::state::{Election, Purpose, Round};

impl Election {
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

    /// An SMInfo SMP (or trap 144 / TrapRepress) arrived. `from` is how it came: for a
    /// request it is where the response goes (handed back unchanged in the Transmit).
    pub fn handle_message(&mut self, now: Duration, from: SmRoute, msg: SmInfoMsg) {
        let now = self.clock(now);
        match msg {
            SmInfoMsg::Get { tid, m_key, info } => {
                // The same rule as an answer built off the election (SmInfoResponder).
                let reply = self.sminfo_responder().reply_info(&from, m_key, &info);
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
}
