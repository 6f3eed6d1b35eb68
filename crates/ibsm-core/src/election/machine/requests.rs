//! Our outstanding requests: SubnGet(SMInfo) and SubnSet(SMInfo) sent with their
//! timeout and retries (the payload presents our SM_Key), responses matched to them by
//! TID and handled by what they were for, and what follows when one gives up.

use std::time::Duration;

use crate::election::types::{
    ControlPacket, ElectionEvent, SmInfo, SmInfoMsg, SmRoute, SmState, Transmit,
};

use super::state::{Election, Pending, Purpose};

impl Election {
    pub(super) fn alloc_tid(&mut self) -> u64 {
        let t = self.next_tid;
        self.next_tid = self.next_tid.wrapping_add(1);
        t
    }

    /// Our SMInfo as payload of a request we send (presents our SM_Key).
    pub(super) fn request_payload(&self, state: SmState) -> SmInfo {
        SmInfo {
            sm_key: self.cfg.sm_key,
            sm_state: state,
            ..self.sm_info()
        }
    }

    pub(super) fn query(
        &mut self,
        now: Duration,
        dest: SmRoute,
        expect: Option<u64>,
        purpose: Purpose,
    ) {
        let retries = self.cfg.query_retries;
        self.query_with_retries(now, dest, expect, purpose, retries);
    }

    pub(super) fn query_with_retries(
        &mut self,
        now: Duration,
        dest: SmRoute,
        expect: Option<u64>,
        purpose: Purpose,
        retries: u32,
    ) {
        let timeout = self.cfg.query_timeout;
        self.query_timed(now, dest, expect, purpose, retries, timeout);
    }

    /// A SubnGet(SMInfo) waiting `timeout` for each of its `1 + retries` copies.
    pub(super) fn query_timed(
        &mut self,
        now: Duration,
        dest: SmRoute,
        expect: Option<u64>,
        purpose: Purpose,
        retries: u32,
        timeout: Duration,
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
                deadline: now + timeout,
                timeout,
                retries_left: retries,
            },
        );
    }

    pub(super) fn send_set(
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

    pub(super) fn handle_resp(&mut self, now: Duration, tid: u64, status: u16, info: SmInfo) {
        // Standby poll of the master.
        if self.state == SmState::Standby {
            if let Some(f) = self.following.as_ref() {
                if f.poll_tid == Some(tid) || f.missed_tids.contains(&tid) {
                    self.handle_poll_answer(now, status, info);
                    return;
                }
            }
        }
        if self.late_answer_of_lost_master(now, tid, status, &info) {
            return;
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

    /// DISCOVERING after missed polls: a late answer to one of the polls that lost us
    /// the master is its answer to this round (a MASTER is followed again: no false
    /// takeover because its answers were slow).
    fn late_answer_of_lost_master(
        &mut self,
        now: Duration,
        tid: u64,
        status: u16,
        info: &SmInfo,
    ) -> bool {
        if self.state != SmState::Discovering {
            return false;
        }
        let Some(r) = self.round.as_mut() else {
            return false;
        };
        if !r.lost_tids.contains(&tid) {
            return false;
        }
        r.lost_tids.clear();
        let key_ok = info.sm_key == 0 || info.sm_key == self.cfg.sm_key;
        if status != 0 || r.lost != Some(info.guid) || !key_ok {
            return true;
        }
        let route = r
            .lost_unanswered
            .clone()
            .or_else(|| self.known.get(&info.guid).map(|p| p.route.clone()));
        let Some(route) = route else {
            return true;
        };
        tracing::info!(
            master = format_args!("{:#018x}", info.guid),
            state = %info.sm_state,
            "late answer to a missed poll: the master we lost is alive"
        );
        self.note_peer(info);
        self.record_discovery(*info, route);
        self.maybe_finish_round(now);
        true
    }

    pub(super) fn request_failed(&mut self, now: Duration, p: Pending) {
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
}
