//! Received control packets (SubnSet(SMInfo), AttributeModifier 1..=5): the checks in
//! the order the `election` module doc gives (control packet, SM_Key, sender SMState,
//! legal in our state, plus the trusted sender), the answer, the transition each
//! accepted packet causes, and the ACKNOWLEDGE we send after accepting HANDOVER.

use std::time::Duration;

#[cfg(feature = "fault-injection")]
use crate::election::config::InjectedFault;
use crate::election::config::{SmKeyPolicy, STATUS_INVALID_VALUE};
use crate::election::types::{
    ControlPacket, ElectionEvent, RejectReason, SmInfo, SmInfoMsg, SmRoute, SmState,
    TransitionReason, Transmit,
};

use super::route::route_for_new_request;
use super::state::Election;

impl Election {
    pub(super) fn handle_set(
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
