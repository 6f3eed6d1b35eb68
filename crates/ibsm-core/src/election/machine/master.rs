//! MASTER: what it learns of the other SMs (master polls, trap 144, SMInfo requesters
//! our sweeps have not found) and the HANDOVER to one that outranks us, completed by
//! going STANDBY behind it (on ACKNOWLEDGE or a status-0 response).

use std::time::Duration;

use crate::election::types::{
    ControlPacket, ElectionEvent, SmInfo, SmInfoMsg, SmRoute, SmState, TransitionReason, Transmit,
};

use super::route::route_for_new_request;
use super::state::{Election, Purpose, MAX_UNKNOWN_REQUESTERS};

impl Election {
    /// MASTER learnt another SM's SMInfo. `verified`: it answers a query of a known
    /// SM port (its GUID checked against the port's); not after a trap 144 from a port
    /// our sweeps have not found, whose answer names itself.
    pub(super) fn master_view(
        &mut self,
        now: Duration,
        info: SmInfo,
        route: SmRoute,
        verified: bool,
    ) {
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

    pub(super) fn complete_handover(
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

    /// MASTER answered a SubnGet(SMInfo). A requester that names itself in the payload
    /// (as ours do: GUID, priority, state) and is not among the SM ports our sweeps found
    /// is an SM that came up after our last heavy sweep: its port set IsSM, which moves no
    /// PortState, so no light sweep sees it, and a newcomer below us sends no trap 144.
    /// Read its SMInfo back along the request's path (the roster learns it at once) and
    /// ask for one heavy sweep, which adds its port to the known ones. A known SM's
    /// payload refreshes its (priority, state). Requests with a zero GUID (`sminfo`,
    /// OpenSM, pollers) change nothing.
    pub(super) fn requested_by(&mut self, now: Duration, from: &SmRoute, info: &SmInfo) {
        if self.state == SmState::Discovering {
            self.requested_while_discovering(now, info);
            return;
        }
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
            // A second MASTER that says it outranks us: IBA has the lower master hand
            // over, so read it now (verified, over the route our sweep recorded)
            // rather than at the next master poll, up to `master_poll_interval` of two
            // masters. One query at a time per SM; a lower MASTER is its own business
            // (it reads our answer, which says MASTER and our priority).
            if info.sm_state == SmState::Master
                && self.outranks_us(info)
                && self.handover.is_none()
                && !self
                    .pending
                    .values()
                    .any(|p| p.purpose == Purpose::MasterQuery && p.expect_guid == Some(info.guid))
            {
                if let Some(p) = self.known.get(&info.guid).cloned() {
                    self.query(now, p.route, Some(p.guid), Purpose::MasterQuery);
                }
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

    pub(super) fn handle_trap144(
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
}
