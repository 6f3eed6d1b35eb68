//! Traps (SubnTrap(Notice)): the TrapRepress to the real source, the per-source rate
//! limit and sampled log lines, the action per trap number, the counting of port
//! error traps 129/130/131, and the hold-down of trap-triggered heavy sweeps (see
//! the module doc, "Traps").

use std::time::Duration;

use ibsm_mad::attr::{Notice, TrapDetails};
use ibsm_mad::{Method, Smp, SmpRoute};

use super::events::{Outgoing, SubnetEvent, SweepReason};
use super::manager::SubnetManager;
use super::metrics::{PORT_ERROR_KEYS, PORT_ERROR_WINDOW, TRAP_LOG_WINDOW};

impl SubnetManager {
    /// A SubnTrap(Notice) whose source LID is not known: see
    /// [`SubnetManager::handle_trap_from`].
    pub fn handle_trap(&mut self, now: Duration, smp: &Smp) {
        self.handle_trap_from(now, smp, 0);
    }

    /// A SubnTrap(Notice) that arrived from LRH SLID `slid` (0/0xFFFF: unknown):
    /// repress it to its real source, rate-limit it per source, and act on it
    /// (module doc, "Traps").
    pub fn handle_trap_from(&mut self, now: Duration, smp: &Smp, slid: u16) {
        self.metrics.traps += 1;
        let notice = match smp.attribute::<Notice>() {
            Ok(n) => n,
            Err(err) => {
                if self.trap_log.allow(now) {
                    tracing::debug!(%err, slid, "undecodable trap");
                } else {
                    self.metrics.trap_logs_suppressed += 1;
                }
                return;
            }
        };
        let issuer_lid = notice.issuer_lid;
        let source = match slid {
            0 | 0xFFFF => issuer_lid,
            l => l,
        };
        // Repress: same TID, attribute and modifier, back to the real source.
        let repress = match smp.route {
            SmpRoute::Lid => {
                let mut r = *smp;
                r.method = Method::TRAP_REPRESS;
                r.status = 0;
                (source != 0).then_some((Some(source), r))
            }
            SmpRoute::Directed(_) => {
                let mut r = smp.response();
                r.method = Method::TRAP_REPRESS;
                Some((None, r))
            }
        };
        if let Some((dlid, r)) = repress {
            self.transmit.push_back(Outgoing {
                dlid,
                mad: r.encode(),
            });
            self.metrics.trap_represses += 1;
        }
        let trap = notice.trap_number();
        let admitted = self.trap_limiter.admit(now, source);
        if !admitted {
            self.metrics.traps_rate_limited += 1;
        }
        // Log lines: sampled across all traps; a rate-limited trap logs nothing.
        let log = admitted && {
            let ok = self.trap_log.allow(now);
            if !ok {
                self.metrics.trap_logs_suppressed += 1;
            }
            ok
        };
        if log && source != issuer_lid && smp.route == SmpRoute::Lid {
            tracing::warn!(
                slid = source,
                issuer_lid,
                ?trap,
                "trap's IssuerLID differs from the LID it came from: repressed to the source"
            );
        }
        match notice.details() {
            Some(TrapDetails::LinkStateChange { lid }) => {
                if log {
                    tracing::info!(issuer_lid, lid, "trap 128 (link state change): heavy sweep");
                }
                self.request_trap_sweep(now, 128);
            }
            Some(TrapDetails::CapabilityMaskChanged(t)) => {
                if log {
                    tracing::info!(
                        issuer_lid,
                        lid = t.lid,
                        capability_mask = format_args!("{:#010x}", t.capability_mask.0),
                        change_flags = format_args!("{:#06x}", t.change_flags),
                        "trap 144 (capability mask / local changes): heavy sweep"
                    );
                }
                if admitted {
                    self.events.push_back(SubnetEvent::Trap144 {
                        issuer_lid,
                        trap: t,
                    });
                }
                self.request_trap_sweep(now, 144);
            }
            Some(TrapDetails::SystemImageGuidChanged { lid, .. }) => {
                if log {
                    tracing::info!(
                        issuer_lid,
                        lid,
                        "trap 145 (SystemImageGUID changed): heavy sweep"
                    );
                }
                self.request_trap_sweep(now, 145);
            }
            Some(
                TrapDetails::LinkIntegrityThreshold { lid, port_num }
                | TrapDetails::ExcessiveBufferOverrun { lid, port_num }
                | TrapDetails::FlowControlUpdateWatchdog { lid, port_num },
            ) => {
                if admitted {
                    self.port_error_trap(now, trap.unwrap_or(0), lid, port_num);
                }
            }
            Some(
                TrapDetails::GidInService { .. }
                | TrapDetails::GidOutOfService { .. }
                | TrapDetails::McGroupCreated { .. }
                | TrapDetails::McGroupDeleted { .. },
            ) => {
                if log {
                    tracing::warn!(
                        trap,
                        issuer_lid,
                        "an SA notice (64-67) arrived as a trap; only the SM produces these: ignored"
                    );
                }
            }
            None => {
                if log {
                    tracing::info!(
                        trap,
                        issuer_lid,
                        "trap without an action here (vendor or unknown): repressed"
                    );
                }
            }
        }
        // The traps a subscriber may ask the SA for (InformInfo): passed on, unless
        // rate-limited (a flapping port must not turn into a Report storm either).
        if admitted && matches!(trap, Some(128..=131 | 144 | 145)) {
            self.events.push_back(SubnetEvent::Notice(notice));
        }
        self.pump(now);
    }

    /// A trap asks for a heavy sweep (`trap` is its number, for the logs): it
    /// coalesces with a requested one and is held down after the last heavy sweep
    /// (module doc, "Traps"). For traps another module decoded (trap 144 the
    /// daemon hands the election) as well as this module's own.
    pub fn request_trap_sweep(&mut self, now: Duration, trap: u16) {
        if self.held_down(now, SweepReason::Trap(trap)) && self.heavy_requested.is_none() {
            self.metrics.trap_sweeps_deferred += 1;
            tracing::debug!(trap, "trap-triggered heavy sweep deferred by the hold-down");
        }
        self.request_heavy(SweepReason::Trap(trap));
        self.pump(now);
    }

    /// A heavy sweep for `reason` must wait: a trap's, within the hold-down
    /// after the last heavy sweep ended.
    pub(super) fn held_down(&self, now: Duration, reason: SweepReason) -> bool {
        matches!(reason, SweepReason::Trap(_)) && self.hold_down_until().is_some_and(|t| now < t)
    }

    pub(super) fn hold_down_until(&self) -> Option<Duration> {
        let hold = self.cfg.trap_sweep_hold_down;
        (!hold.is_zero())
            .then_some(self.last_heavy_end)
            .flatten()
            .map(|end| end + hold)
    }

    /// Log how many trap lines sampling held back, once their window is over.
    pub(super) fn flush_trap_log(&mut self, now: Duration) {
        if let Some(n) = self.trap_log.take_suppressed(now) {
            tracing::warn!(
                suppressed = n,
                window_secs = TRAP_LOG_WINDOW.as_secs(),
                rate_limited_total = self.metrics.traps_rate_limited,
                "trap storm: {n} trap log line(s) held back"
            );
        }
    }

    /// Trap 129/130/131: count it per (LID, port, trap) and log the 1st, 10th, 100th...
    fn port_error_trap(&mut self, now: Duration, trap: u16, lid: u16, port: u8) {
        self.metrics.port_error_traps += 1;
        if self.port_errors.len() >= PORT_ERROR_KEYS {
            self.port_errors
                .retain(|_, (_, last)| now.saturating_sub(*last) <= PORT_ERROR_WINDOW);
            if self.port_errors.len() >= PORT_ERROR_KEYS {
                self.port_errors.clear();
            }
        }
        let entry = self
            .port_errors
            .entry((lid, port, trap))
            .or_insert((0, now));
        if now.saturating_sub(entry.1) > PORT_ERROR_WINDOW {
            entry.0 = 0;
        }
        entry.0 += 1;
        entry.1 = now;
        let count = entry.0;
        let what = match trap {
            129 => "local link integrity threshold",
            130 => "excessive buffer overrun threshold",
            _ => "flow control update watchdog",
        };
        // 1, 10, 100, ...: a babbling port must not flood the log.
        let mut c = count;
        while c >= 10 && c.is_multiple_of(10) {
            c /= 10;
        }
        if c == 1 {
            tracing::warn!(trap, lid, port, count, "trap {trap} ({what}) on a port");
        }
    }

    /// Traps 129/130/131 counted for (LID, port, trap) in the current window.
    pub fn port_error_count(&self, lid: u16, port: u8, trap: u16) -> u64 {
        self.port_errors
            .get(&(lid, port, trap))
            .map_or(0, |(n, _)| *n)
    }

    /// Whether `reason` is subject to the hold-down at all.
    pub(super) fn held_down_at_all(&self, reason: SweepReason) -> bool {
        matches!(reason, SweepReason::Trap(_)) && !self.cfg.trap_sweep_hold_down.is_zero()
    }
}
