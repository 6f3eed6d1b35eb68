//! `Control/StepDown`'s hold: the MASTER yields for a while by advertising priority 0
//! and handing over to the best standby, and gets its priority back when the hold ends.
//!
//! Why priority 0 and not only a HANDOVER: the SMInfo protocol makes a master hand
//! mastership to a standby that outranks it, so an SM that handed over while it still
//! outranks the new master would be handed the subnet straight back. At priority 0 it
//! outranks nobody (ties go to the lower GUID, IBA 14.4.1.1) until the hold ends; then
//! its own priority returns, and the election decides as it would for a priority
//! change (with `sticky_priority`, the new master keeps the subnet).
//!
//! This file keeps the bookkeeping only (which priority comes back, which hold is the
//! current one), so a second StepDown extends the hold without forgetting the priority
//! to restore, and an operator's `SetPriority` during the hold wins over the restore.

use std::sync::Mutex;
use std::time::Duration;

/// The longest hold: a step-down is a drill or a maintenance window, not a way to
/// demote an SM for good (SetPriority is that).
pub const MAX_HOLD: Duration = Duration::from_secs(3600);

/// Why a StepDown is refused before anything changes.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum StepDownError {
    #[error("hold_ms {0} is out of range 1..=3600000 (a step-down lasts at most an hour; SetPriority demotes for good)")]
    Hold(u64),
}

/// Check a requested hold.
pub fn hold_of(hold_ms: u64) -> Result<Duration, StepDownError> {
    let d = Duration::from_millis(hold_ms);
    if hold_ms == 0 || d > MAX_HOLD {
        return Err(StepDownError::Hold(hold_ms));
    }
    Ok(d)
}

/// The hold in force, if any.
#[derive(Debug, Default)]
pub struct Holds {
    inner: Mutex<Option<(u8, u64)>>,
    next: Mutex<u64>,
}

impl Holds {
    /// Start (or extend) a hold: returns the priority to restore (`current` unless a
    /// hold is already in force, whose saved priority is kept) and the hold's id.
    pub fn begin(&self, current: u8) -> (u8, u64) {
        let id = {
            let mut n = self.next.lock().unwrap_or_else(|p| p.into_inner());
            *n += 1;
            *n
        };
        let mut h = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let restore = h.map_or(current, |(p, _)| p);
        *h = Some((restore, id));
        (restore, id)
    }

    /// The hold `id` ended: the priority to restore, if it is still the hold in force.
    pub fn end(&self, id: u64) -> Option<u8> {
        let mut h = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        match *h {
            Some((p, current)) if current == id => {
                *h = None;
                Some(p)
            }
            _ => None,
        }
    }

    /// Drop any hold (an operator set the priority): nothing is restored later.
    pub fn cancel(&self) {
        *self.inner.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_are_bounded_and_nonzero() {
        assert_eq!(hold_of(0), Err(StepDownError::Hold(0)));
        assert_eq!(hold_of(3_600_001), Err(StepDownError::Hold(3_600_001)));
        assert_eq!(hold_of(1500), Ok(Duration::from_millis(1500)));
    }

    #[test]
    fn a_second_step_down_keeps_the_first_priority_and_only_the_last_hold_restores() {
        let h = Holds::default();
        let (p1, a) = h.begin(12);
        assert_eq!(p1, 12);
        // During the hold the SM advertises 0; a second step-down must not save 0.
        let (p2, b) = h.begin(0);
        assert_eq!(p2, 12);
        assert_eq!(h.end(a), None, "a superseded hold restores nothing");
        assert_eq!(h.end(b), Some(12));
        assert_eq!(h.end(b), None);
        let (_, c) = h.begin(7);
        h.cancel();
        assert_eq!(h.end(c), None, "SetPriority during a hold wins");
    }
}
