//! STANDBY: polling the master every `poll_interval`, re-polling every
//! `repoll_interval` after a miss, and judging its answers (missed polls, a stalled
//! ActCount, a followed SM that is no longer MASTER), and trap 144 to a master we
//! outrank, retried until TrapRepress.

use std::time::Duration;

use crate::election::types::{SmInfo, SmInfoMsg, SmRoute, SmState, TransitionReason, Transmit};

use super::state::{Election, Pending, Purpose};

impl Election {
    pub(super) fn handle_poll_answer(&mut self, now: Duration, status: u16, info: SmInfo) {
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
                self.master_seen();
                let Some(f) = self.following.as_mut() else {
                    return;
                };
                f.missed = 0;
                f.excused = 0;
                f.poll_tid = None;
                f.missed_tids.clear();
                f.discovering_since = None;
                if let Some(since) = f.held_since.take() {
                    tracing::info!(
                        master = format_args!("{master:#018x}"),
                        held_ms = now.saturating_sub(since).as_millis() as u64,
                        "the master answered again: the Raft heartbeat was right to hold off its loss"
                    );
                }
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
                f.excused = 0;
                f.poll_tid = None;
                f.missed_tids.clear();
                f.held_since = None;
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

    pub(super) fn standby_tick(&mut self, now: Duration) {
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
        let late = now.saturating_sub(f.poll_at);
        if f.poll_tid.is_some() && late > self.cfg.repoll_interval && f.excused < retries {
            // Our own timer fired more than a re-poll wait late: this process was not
            // running (a starved host), so the master's answer may be waiting unread
            // behind our timers, or still in a fabric (simulator) that starved with
            // us. Silence we were not awake to observe is no evidence: the poll keeps
            // its TID and gets one more re-poll wait, nothing is counted.
            f.excused += 1;
            f.poll_at = now + self.cfg.repoll_interval;
            tracing::debug!(
                late_ms = late.as_millis() as u64,
                excused = f.excused,
                "poll timer fired late (we were descheduled): the wait is not a miss"
            );
            return;
        }
        if let Some(tid) = f.poll_tid.take() {
            // Unanswered within its wait: a miss. Its TID stays valid (a late answer
            // still shows the master alive) for the rest of the streak.
            f.missed += 1;
            f.missed_tids.push(tid);
        }
        let missed = f.missed;
        if missed >= retries && !self.leader_holds_off(now) {
            let Some(f) = self.following.as_mut() else {
                return;
            };
            let (master, route) = (f.master, f.route.clone());
            let tids = std::mem::take(&mut f.missed_tids);
            self.enter_discovering_after(
                now,
                TransitionReason::MissedPolls { master, missed },
                Some((master, route, tids)),
            );
            return;
        }
        // Polled again (a held-off loss included: `missed` stays at the bound, so the
        // next unanswered re-poll asks the heartbeat again).
        let Some(dest) = self.following.as_ref().map(|f| f.route.clone()) else {
            return;
        };
        let tid = self.alloc_tid();
        let msg = SmInfoMsg::Get {
            tid,
            m_key: self.cfg.m_key,
            info: self.request_payload(SmState::Standby),
        };
        let wait = if self.following.as_ref().is_some_and(|f| f.missed > 0) {
            self.cfg.repoll_interval
        } else {
            self.cfg.poll_interval
        };
        if let Some(f) = self.following.as_mut() {
            f.poll_tid = Some(tid);
            f.poll_at = now + wait;
        }
        self.transmits.push_back(Transmit { dest, msg });
    }

    pub(super) fn send_trap144(&mut self, now: Duration) {
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

    /// After `poll_retries` missed polls: whether the Raft leader's heartbeat holds off
    /// declaring the master lost (see `ElectionConfig::leader_heartbeat_grace`). The
    /// leader must be the SM we follow, its last heartbeat at most
    /// `leader_heartbeat_fresh` old, and the streak held for less than the grace.
    fn leader_holds_off(&mut self, now: Duration) -> bool {
        let Some(grace) = self.cfg.leader_heartbeat_grace else {
            return false;
        };
        let fresh = self.cfg.leader_heartbeat_fresh;
        let Some((leader, at)) = self.leader_contact else {
            return false;
        };
        let Some(f) = self.following.as_mut() else {
            return false;
        };
        let age = now.saturating_sub(at);
        if leader != f.master || age > fresh {
            return false;
        }
        let since = match f.held_since {
            Some(s) => s,
            None => {
                f.held_since = Some(now);
                self.losses_held_off += 1;
                tracing::info!(
                    master = format_args!("{:#018x}", f.master),
                    missed = f.missed,
                    heartbeat_age_ms = age.as_millis() as u64,
                    grace_ms = grace.as_millis() as u64,
                    "SMInfo polls missed, but the master's Raft heartbeat is fresh: polling on"
                );
                now
            }
        };
        now.saturating_sub(since) < grace
    }
}
