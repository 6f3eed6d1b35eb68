//! M_Key checking by every simulated SMA (IBA 1.3 section 14.2.4).
//!
//! ibsim does not check M_Keys (the check is commented out in its `sim_mad.c`), so a
//! subnet manager that protects its ports could never be tested against it. This
//! module makes the embedded fabric check them as IBA says, so tests can show that a
//! Set without the key fails and a failover keeps the key working.
//!
//! Rules implemented (the guarding PortInfo is the receiving CA port's own, or a
//! switch's port 0: a switch has one M_Key for all its ports):
//!
//! * The check passes when the port's M_Key is 0 (an unprotected port) or equals the
//!   SMP's M_Key.
//! * Otherwise M_KeyProtectBits decide (IBA table "Protection levels"):
//!   * 0: SubnGet is allowed (the M_Key reads back as is); SubnSet and
//!     SubnTrapRepress fail.
//!   * 1: SubnGet is allowed but a PortInfo GetResp carries M_Key 0; Set and
//!     TrapRepress fail.
//!   * 2 and 3: SubnGet fails too (3 behaves as 2 here: IBA 1.3 adds nothing this
//!     fabric models).
//! * A failed check is silent, as IBA wants: the SMP is discarded without a
//!   response (the requester times out, it cannot tell a protected port from a dead
//!   one), nothing is changed, M_KeyViolations counts up (saturating), and the lease
//!   timer starts if M_KeyLeasePeriod is not 0 and it is not already running.
//! * An SMP that passes the check with a matching non-zero M_Key stops the lease
//!   timer. When the timer runs out (M_KeyLeasePeriod seconds after the first
//!   unanswered violation) the port's M_KeyProtectBits drop to 0: a fabric whose SM
//!   died is not locked forever. Expiry is evaluated lazily, when the next SMP
//!   reaches the port (the simulator owns no clock).
//! * SMInfo and traps never reach the SMA (they go to the SM client at the port, see
//!   the crate doc), so the M_Key never guards them here: SMInfo is the SM's, which
//!   applies its own M_Key rule to the SM_Key it discloses.
//! * Trap 256 (Bad M_Key) is not generated. SubnTrapRepress is checked like a Set
//!   when it reaches an SMA, but this fabric carries it as a response (see `Sim::send`),
//!   to the client at the port, so in practice it never does.

use std::time::Duration;

use ibsm_mad::Method;

use crate::state::{Fabric, NONE};

/// What the M_Key check says about a request that reached an SMA.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MKeyCheck {
    /// Go ahead; `hide_key`: a PortInfo answer must carry M_Key 0 (level 1).
    Pass { hide_key: bool },
    /// Discard the SMP without an answer.
    Fail,
}

impl Fabric {
    /// The port whose PortInfo M_Key guards the SMA reached through port `arr`.
    fn mkey_guard(&self, arr: u32) -> Option<u32> {
        let p = self.ports.get(arr as usize)?;
        let n = self.nodes.get(p.node as usize)?;
        Some(if n.switch != NONE { n.first_port } else { arr })
    }

    /// Checks the M_Key of a `method` request carrying `m_key` that reached port `arr`
    /// at `now`, with the bookkeeping IBA asks for (violations, lease timer).
    pub(crate) fn check_m_key(
        &mut self,
        now: Duration,
        arr: u32,
        method: Method,
        m_key: u64,
    ) -> MKeyCheck {
        let Some(guard) = self.mkey_guard(arr) else {
            return MKeyCheck::Pass { hide_key: false };
        };
        if let Some(&expiry) = self.mkey_lease.get(&guard) {
            if now >= expiry {
                self.mkey_lease.remove(&guard);
                if let Some(pi) = self.port_info.get_mut(guard as usize) {
                    tracing::debug!(port = guard, "M_Key lease expired: protection off");
                    pi.m_key_protect_bits = 0;
                }
            }
        }
        let Some(pi) = self.port_info.get_mut(guard as usize) else {
            return MKeyCheck::Pass { hide_key: false };
        };
        if pi.m_key == 0 || pi.m_key == m_key {
            if pi.m_key != 0 {
                self.mkey_lease.remove(&guard);
            }
            return MKeyCheck::Pass { hide_key: false };
        }
        let level = pi.m_key_protect_bits;
        let denied = match method {
            Method::GET => level >= 2,
            _ => true,
        };
        if !denied {
            return MKeyCheck::Pass {
                hide_key: level == 1,
            };
        }
        pi.m_key_violations = pi.m_key_violations.saturating_add(1);
        let lease = pi.m_key_lease_period;
        if lease != 0 {
            self.mkey_lease
                .entry(guard)
                .or_insert(now + Duration::from_secs(u64::from(lease)));
        }
        tracing::trace!(port = guard, level, "M_Key check failed: SMP discarded");
        MKeyCheck::Fail
    }
}
