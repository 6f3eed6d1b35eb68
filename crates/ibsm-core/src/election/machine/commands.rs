//! Operator commands: a run-time priority change, DISABLE / STANDBY / DISCOVER sent to
//! a known SM port, and the planned handover to a chosen SM (which lowers our advertised
//! priority so that it sticks).

use std::time::Duration;

use crate::election::config::{ElectionConfigError, ElectionError, MAX_PRIORITY};
use crate::election::types::{ControlPacket, ElectionEvent, SmState};

use super::state::{Election, Purpose};

impl Election {
    /// Changes our configured priority at run time (and ends a priority yielded by
    /// [`handover_to`](Self::handover_to)). Raising the advertised priority in STANDBY
    /// sends trap 144 to the master, which re-reads our SMInfo and hands over if we now
    /// outrank it.
    pub fn set_priority(&mut self, now: Duration, priority: u8) -> Result<(), ElectionError> {
        let now = self.clock(now);
        if priority > MAX_PRIORITY {
            return Err(ElectionConfigError::Priority {
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
    ///
    /// [`TransitionReason::HandoverDone`]: crate::election::TransitionReason::HandoverDone
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
}
