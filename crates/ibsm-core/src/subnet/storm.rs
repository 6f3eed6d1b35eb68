//! Storm control for the master: a per-issuer token bucket for traps and a
//! log sampler, both on time passed in (no clock here).
//!
//! Why: a flapping link or a babbling port can send traps faster than the SM
//! can usefully act on them, and one log line per trap would drown the log
//! (and the disk) exactly when an operator needs it. The bucket bounds the
//! work per issuer; the sampler keeps a few lines per window and says how many
//! it held back, so nothing is silently lost. The heavy-sweep hold-down that
//! bounds the *sweeps* a storm can cause lives in the configurator itself
//! ([`super::SubnetConfig::trap_sweep_hold_down`]).

use std::collections::HashMap;
use std::time::Duration;

/// Token buckets, one per key (the trap's source LID): `rate` tokens per
/// second, at most `burst` saved up. One token admits one trap.
#[derive(Debug, Clone)]
pub struct TrapLimiter {
    rate: u32,
    burst: u32,
    /// Per key: tokens in thousandths, and when they were last refilled.
    buckets: HashMap<u16, (u64, Duration)>,
}

/// Most keys kept; full buckets (idle issuers) are dropped first.
const MAX_KEYS: usize = 4096;

impl TrapLimiter {
    /// `rate` traps per second per issuer, bursts of `burst` (both at least 1).
    pub fn new(rate: u32, burst: u32) -> TrapLimiter {
        TrapLimiter {
            rate: rate.max(1),
            burst: burst.max(1),
            buckets: HashMap::new(),
        }
    }

    fn full(&self) -> u64 {
        u64::from(self.burst) * 1000
    }

    /// Whether a trap from `issuer` at `now` is within its rate (and take a token).
    pub fn admit(&mut self, now: Duration, issuer: u16) -> bool {
        let full = self.full();
        let rate = u64::from(self.rate);
        if self.buckets.len() >= MAX_KEYS && !self.buckets.contains_key(&issuer) {
            // Drop the buckets that would be full by now: those issuers are quiet.
            self.buckets.retain(|_, (tokens, last)| {
                let ms = now.saturating_sub(*last).as_millis();
                let refill = u64::try_from(ms).unwrap_or(u64::MAX).saturating_mul(rate);
                tokens.saturating_add(refill) < full
            });
            if self.buckets.len() >= MAX_KEYS {
                self.buckets.clear();
            }
        }
        let (tokens, last) = self.buckets.entry(issuer).or_insert((full, now));
        let ms = u64::try_from(now.saturating_sub(*last).as_millis()).unwrap_or(u64::MAX);
        // rate tokens/s = rate thousandths per ms.
        *tokens = tokens.saturating_add(ms.saturating_mul(rate)).min(full);
        *last = now;
        if *tokens >= 1000 {
            *tokens -= 1000;
            true
        } else {
            false
        }
    }
}

/// Lets `per_window` log lines through per `window` and counts the rest;
/// [`LogSampler::take_suppressed`] hands the count out once the window is over,
/// for a summary line.
#[derive(Debug, Clone)]
pub struct LogSampler {
    window: Duration,
    per_window: u32,
    start: Option<Duration>,
    logged: u32,
    suppressed: u64,
}

impl LogSampler {
    /// At most `per_window` lines per `window`.
    pub fn new(window: Duration, per_window: u32) -> LogSampler {
        LogSampler {
            window,
            per_window,
            start: None,
            logged: 0,
            suppressed: 0,
        }
    }

    /// Whether to log a line at `now` (counted as suppressed when not). A new
    /// window starts when the previous one is over and its count was taken.
    pub fn allow(&mut self, now: Duration) -> bool {
        match self.start {
            Some(s) if now.saturating_sub(s) < self.window => {}
            _ if self.suppressed > 0 => {
                // Window over but its count not reported yet: keep counting into it.
            }
            _ => {
                self.start = Some(now);
                self.logged = 0;
            }
        }
        if self.logged < self.per_window {
            self.logged += 1;
            true
        } else {
            self.suppressed += 1;
            false
        }
    }

    /// Lines held back in a window that is over (then reset), or `None` when
    /// there is nothing to report yet.
    pub fn take_suppressed(&mut self, now: Duration) -> Option<u64> {
        let start = self.start?;
        if self.suppressed == 0 || now.saturating_sub(start) < self.window {
            return None;
        }
        let n = self.suppressed;
        self.suppressed = 0;
        self.start = None;
        self.logged = 0;
        Some(n)
    }

    /// When [`LogSampler::take_suppressed`] will have something, if lines are held back.
    pub fn next_report(&self) -> Option<Duration> {
        match self.start {
            Some(s) if self.suppressed > 0 => Some(s + self.window),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn the_bucket_admits_a_burst_then_the_rate_per_issuer() {
        let mut l = TrapLimiter::new(10, 5);
        let t0 = Duration::from_secs(1);
        let admitted = (0..20).filter(|_| l.admit(t0, 7)).count();
        assert_eq!(admitted, 5, "a burst of 5");
        // Another issuer has its own bucket.
        assert!(l.admit(t0, 8));
        // 10/s: one token per 100 ms.
        assert!(!l.admit(t0 + 50 * MS, 7));
        assert!(l.admit(t0 + 150 * MS, 7));
        assert!(!l.admit(t0 + 160 * MS, 7));
        // Over 10 s of a 1000/s storm, about rate x time + burst get through.
        let mut n = 0;
        for i in 0..10_000u32 {
            if l.admit(t0 + Duration::from_secs(1) + i * MS, 9) {
                n += 1;
            }
        }
        assert!((100..=106).contains(&n), "{n}");
        // Quiet for a while: the burst is back, no more.
        let later = t0 + Duration::from_secs(60);
        assert_eq!((0..20).filter(|_| l.admit(later, 9)).count(), 5);
    }

    #[test]
    fn the_bucket_map_stays_bounded() {
        let mut l = TrapLimiter::new(1, 1);
        for i in 0..10_000u32 {
            let lid = (i % 0xBFFF) as u16;
            l.admit(Duration::from_secs(u64::from(i)), lid);
        }
        assert!(l.buckets.len() <= MAX_KEYS);
    }

    #[test]
    fn the_sampler_logs_a_few_per_window_and_counts_the_rest() {
        let mut s = LogSampler::new(Duration::from_secs(10), 3);
        let t0 = Duration::from_secs(5);
        let logged = (0..100).filter(|&i| s.allow(t0 + i * MS)).count();
        assert_eq!(logged, 3);
        assert_eq!(s.take_suppressed(t0 + Duration::from_secs(1)), None);
        assert_eq!(s.next_report(), Some(t0 + Duration::from_secs(10)));
        assert_eq!(s.take_suppressed(t0 + Duration::from_secs(10)), Some(97));
        assert_eq!(s.take_suppressed(t0 + Duration::from_secs(11)), None);
        assert_eq!(s.next_report(), None);
        // A new window lets lines through again.
        assert!(s.allow(t0 + Duration::from_secs(12)));
        // Nothing held back, nothing to report.
        assert_eq!(s.take_suppressed(t0 + Duration::from_secs(30)), None);
    }
}
