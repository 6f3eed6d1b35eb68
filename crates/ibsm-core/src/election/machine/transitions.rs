//! State transitions: entering DISCOVERING, STANDBY, MASTER or NOTACTIVE (each drops
//! the activity of the state left), the `StateChanged` event, and the parts of our
//! advertised priority that end with a state (sticky elevation, yielded priority).

use std::time::Duration;

use crate::election::types::{ElectionEvent, SmInfo, SmRoute, SmState, TransitionReason};

use super::state::{Election, Following, Round};

impl Election {
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
    pub(super) fn end_yield(&mut self) {
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

    /// A master is in charge (one we follow answered MASTER, or we are it), or we left
    /// the election (NOTACTIVE): the masterless period, if any, ends. Following a
    /// DISCOVERING or STANDBY SM does not end it (`masterless_takeover` keeps counting).
    pub(super) fn master_seen(&mut self) {
        self.masterless_since = None;
        self.followed_unswept = false;
    }

    pub(super) fn enter_discovering(&mut self, now: Duration, reason: TransitionReason) {
        self.enter_discovering_after(now, reason, None);
    }

    /// DISCOVERING; `lost` is a master that just stopped answering our polls, the
    /// route they went over and their TIDs. Its polls and re-polls were its last
    /// queries over that route: the round does not ask it again there (that would add
    /// a query timeout to every failover), only over another route if the fresh sweep
    /// finds it there; a late answer to one of them still counts as its answer.
    pub(super) fn enter_discovering_after(
        &mut self,
        now: Duration,
        reason: TransitionReason,
        lost: Option<(u64, SmRoute, Vec<u64>)>,
    ) {
        self.clear_activity();
        self.drop_elevation();
        self.masterless_since.get_or_insert(now);
        self.set_state(SmState::Discovering, reason);
        let mut round = Round::default();
        if let Some((guid, route, tids)) = lost {
            round.lost = Some(guid);
            round.lost_unanswered = Some(route);
            round.queried.insert(guid);
            round.lost_tids = tids;
        }
        self.round = Some(round);
        // Ask for the sweep now, so it runs while the known SM ports are queried.
        self.events.push_back(ElectionEvent::DiscoveryNeeded);
        self.query_round(now);
        self.maybe_finish_round(now);
    }

    pub(super) fn enter_standby(
        &mut self,
        now: Duration,
        master: &SmInfo,
        route: SmRoute,
        reason: TransitionReason,
    ) {
        self.clear_activity();
        self.drop_elevation();
        self.set_state(SmState::Standby, reason);
        if master.sm_state == SmState::Master {
            self.master_seen();
        }
        let lid = self.known.get(&master.guid).and_then(|p| p.lid);
        self.following = Some(Following {
            master: master.guid,
            route,
            lid,
            missed: 0,
            poll_at: now + self.cfg.poll_interval,
            poll_tid: None,
            missed_tids: Vec::new(),
            last_act: (master.sm_state == SmState::Master).then_some(master.act_count),
            last_act_change: now,
            discovering_since: (master.sm_state == SmState::Discovering).then_some(now),
            excused: 0,
            held_since: None,
        });
        // A newcomer that outranks the master tells it (IBA / OpenSM: trap 144).
        if master.sm_state == SmState::Master && self.outranks_master(master) {
            self.send_trap144(now);
        }
    }

    pub(super) fn become_master(&mut self, now: Duration, reason: TransitionReason) {
        self.clear_activity();
        self.unknown_requesters.clear();
        self.master_seen();
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

    pub(super) fn enter_not_active(&mut self, reason: TransitionReason) {
        self.clear_activity();
        self.drop_elevation();
        self.master_seen();
        self.set_state(SmState::NotActive, reason);
    }
}
