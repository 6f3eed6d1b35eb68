//! DISCOVERING: the round that queries every known SM port and concludes STANDBY behind
//! the best MASTER, STANDBY behind an SM that outranks us, or MASTER; it concludes
//! without a MASTER answer only after a sweep made since the round began.

use std::time::Duration;

use crate::election::types::{ElectionEvent, SmInfo, SmPort, SmRoute, SmState, TransitionReason};

use super::state::{Election, Purpose, Round};

impl Election {
    pub(super) fn query_round(&mut self, now: Duration) {
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

    pub(super) fn maybe_finish_round(&mut self, now: Duration) {
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
        let may_skip_sweep = !self.followed_unswept;
        if let Some(r) = self.round.as_mut() {
            // Without a MASTER among the SM ports an older sweep recorded, conclude
            // only from a sweep made since: a master that went silent over a broken
            // path is not dead (a false failover, two masters until they meet), and
            // an SM that came up since the last sweep may be the master (else we
            // follow a STANDBY, or take MASTER beside it). The sweep was asked for
            // when the round began (`enter_discovering_after`); the initial and
            // port-up rounds wait for the driver's first sweep anyway (`swept`).
            // Except, once per masterless period, when the best SM that outranks us
            // answered DISCOVERING: it is taking over, and our sweep would only
            // compete for the fabric with its takeover reads (see the module doc).
            if !r.fresh_sweep && r.best_master.is_none() && !(may_skip_sweep && taking_over(r)) {
                return;
            }
        }
        let Some(round) = self.round.take() else {
            return;
        };
        let unswept = !round.fresh_sweep && round.best_master.is_none();
        if let Some((info, route)) = round.best_master {
            self.enter_standby(
                now,
                &info,
                route,
                TransitionReason::FoundMaster { master: info.guid },
            );
            if !round.fresh_sweep {
                // A MASTER is in charge (the new one, or the lost one after all): the
                // sweep the round asked for would only compete with its sweep.
                self.events.push_back(ElectionEvent::DiscoveryWithdrawn);
            }
        } else if let Some((info, waited)) = round
            .best_higher
            .as_ref()
            .and_then(|(info, _)| Some((info, self.masterless_past_bound(now, info)?)))
        {
            // Nobody is in charge and the SM that should be does not know it: take the
            // subnet now; the master polls hand it over once it answers STANDBY.
            self.become_master(
                now,
                TransitionReason::HigherSmIdle {
                    guid: info.guid,
                    priority: info.priority,
                    masterless_for: waited,
                },
            );
            self.confirm_unanswered(now, &round);
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
            if unswept {
                // Only `taking_over` lets a round get here without its sweep.
                self.followed_unswept = true;
                tracing::info!(
                    guid = format_args!("{:#018x}", info.guid),
                    priority = info.priority,
                    "a higher SM answers DISCOVERING (taking over): following it without the fresh sweep"
                );
                self.events.push_back(ElectionEvent::DiscoveryWithdrawn);
            }
        } else {
            self.become_master(
                now,
                TransitionReason::NoHigherSm {
                    answered: round.answered,
                    queried: round.queried.len(),
                },
            );
            self.confirm_unanswered(now, &round);
        }
    }

    /// MASTER concluded from a round in which some known SM ports did not answer
    /// (above all the master we just lost to missed polls): if one of them is alive
    /// after all (it was slow, not dead: a starved host), two masters run until we
    /// read it, and waiting for the first master poll made that a full
    /// `master_poll_interval` (about 1 s, seen on ibsim under load). So each is
    /// queried at once, re-sent every `repoll_interval` for one `master_poll_interval`
    /// (one TID: an answer to any copy counts, the periodic master poll takes over
    /// after that); its first answer goes through the MASTER rules, so a MASTER or
    /// STANDBY that outranks us gets HANDOVER within a re-poll wait of answering.
    fn confirm_unanswered(&mut self, now: Duration, round: &Round) {
        let silent: Vec<SmPort> = round
            .queried
            .iter()
            .filter(|g| !round.heard.contains(g))
            .filter_map(|g| self.known.get(g).cloned())
            .collect();
        let wait = self.cfg.repoll_interval;
        let copies = self.cfg.master_poll_interval.as_nanos() / wait.as_nanos().max(1);
        let retries = u32::try_from(copies.saturating_sub(1)).unwrap_or(u32::MAX);
        for p in silent {
            tracing::info!(
                guid = format_args!("{:#018x}", p.guid),
                "MASTER without an answer from this SM port: confirming it every re-poll interval"
            );
            self.query_timed(
                now,
                p.route,
                Some(p.guid),
                Purpose::MasterQuery,
                retries,
                wait,
            );
        }
    }

    /// How long the subnet has been without a master, when that is past
    /// `masterless_takeover` and `higher` (the best SM that outranks us) answered
    /// STANDBY: it follows no master we can find, so it has not noticed the loss. An SM
    /// answering DISCOVERING is busy becoming master and is waited for.
    fn masterless_past_bound(&self, now: Duration, higher: &SmInfo) -> Option<Duration> {
        let bound = self.cfg.masterless_takeover?;
        let waited = now.saturating_sub(self.masterless_since?);
        (higher.sm_state == SmState::Standby && waited >= bound).then_some(waited)
    }

    /// DISCOVERING, waiting for the round's fresh sweep: a known SM that already
    /// answered this round queried us naming itself DISCOVERING or MASTER (it noticed
    /// the loss after it answered us, typically STANDBY: both standbys of a dead
    /// master miss its polls within a poll of each other). Ask it again at once (no
    /// retries, one query at a time): its answer, not the payload, may then conclude
    /// the round (a MASTER, or a higher SM taking over) before the sweep is in. Only
    /// while such an answer could: a DISCOVERING requester must outrank us and the
    /// masterless period must not have used its unswept conclusion yet.
    pub(super) fn requested_while_discovering(&mut self, now: Duration, info: &SmInfo) {
        let useful = match info.sm_state {
            SmState::Master => true,
            SmState::Discovering => !self.followed_unswept && self.outranks_us(info),
            _ => false,
        };
        let Some(r) = self.round.as_ref() else {
            return;
        };
        if !useful || r.fresh_sweep || r.best_master.is_some() || !r.heard.contains(&info.guid) {
            return;
        }
        let asking = self
            .pending
            .values()
            .any(|p| p.purpose == Purpose::Discover && p.expect_guid == Some(info.guid));
        let Some(p) = self.known.get(&info.guid).cloned() else {
            return;
        };
        if asking || !self.is_trusted(info.guid) {
            return;
        }
        tracing::debug!(
            guid = format_args!("{:#018x}", info.guid),
            state = %info.sm_state,
            "a known SM says it changed state: asking it again before the sweep is in"
        );
        self.query_with_retries(now, p.route, Some(p.guid), Purpose::Discover, 0);
    }

    pub(super) fn record_discovery(&mut self, info: SmInfo, route: SmRoute) {
        let first = self
            .round
            .as_mut()
            .is_some_and(|round| round.heard.insert(info.guid));
        if self.is_suspect(&info) {
            return;
        }
        if !self.is_trusted(info.guid) {
            // Neither a master to follow nor a higher SM to wait for: without a trusted
            // one the round concludes MASTER by the normal rules.
            self.note_untrusted(&info);
            if let Some(round) = self.round.as_mut() {
                round.answered += usize::from(first);
            }
            return;
        }
        let outranks = self.outranks_us(&info);
        // (The same SM answering again, asked again: its newer answer replaces its older.)
        let better = |cur: &Option<(SmInfo, SmRoute)>, this: &Election| match cur {
            None => true,
            Some((c, _)) => {
                c.guid == info.guid
                    || this.ranks_above((info.priority, info.guid), (c.priority, c.guid))
            }
        };
        let Some(round) = self.round.as_ref() else {
            return;
        };
        let take_master = info.sm_state == SmState::Master && better(&round.best_master, self);
        let take_higher = matches!(info.sm_state, SmState::Discovering | SmState::Standby)
            && outranks
            && better(&round.best_higher, self);
        if let Some(round) = self.round.as_mut() {
            round.answered += usize::from(first);
            if take_master {
                round.best_master = Some((info, route));
            } else if take_higher {
                round.best_higher = Some((info, route));
            }
        }
    }
}

/// The best SM of the round that outranks us answered DISCOVERING: it noticed the
/// loss and is taking over. (A STANDBY answer does not qualify: it may follow a master
/// our stale sweep does not know, or be re-followed forever.)
fn taking_over(r: &Round) -> bool {
    r.best_higher
        .as_ref()
        .is_some_and(|(info, _)| info.sm_state == SmState::Discovering)
}
