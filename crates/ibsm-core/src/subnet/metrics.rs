//! The configurator's counters ([`SubnetMetrics`]; the daemon exports them with
//! prometheus-client) and the windows and bounds of the per-port counting of traps
//! 129/130/131 and of the sampling of per-trap log lines.

use std::time::Duration;

use super::events::PhaseTimes;

/// Counters, exported as metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SubnetMetrics {
    /// Heavy sweeps completed.
    pub heavy_sweeps: u64,
    /// Light sweeps completed.
    pub light_sweeps: u64,
    /// Traps received.
    pub traps: u64,
    /// TrapRepress sent.
    pub trap_represses: u64,
    /// Phase times of the last heavy sweep.
    pub last_phases: PhaseTimes,
    /// LFT blocks sent in total.
    pub lft_blocks_sent: u64,
    /// SMPs sent in total (with retries).
    pub smps_sent: u64,
    /// Requests that failed in total.
    pub failures: u64,
    /// End ports with a LID after the last heavy sweep.
    pub lids: u64,
    /// Traps 129/130/131 (port error thresholds) received.
    pub port_error_traps: u64,
    /// Traps over their source's rate: repressed and counted, not acted on.
    pub traps_rate_limited: u64,
    /// Trap log lines held back by sampling.
    pub trap_logs_suppressed: u64,
    /// Trap-triggered heavy sweeps deferred by the hold-down.
    pub trap_sweeps_deferred: u64,
    /// Duplicate GUIDs found by the last heavy sweep.
    pub duplicate_guids: u64,
    /// 1 when the last heavy sweep's discovery hit the topology cap.
    pub topology_capped: u64,
    /// End ports asked to re-register with the SA (ClientReregister), in total.
    pub client_reregisters: u64,
}

/// Traps 129/130/131 of one (LID, port, trap) further apart than this start
/// a new count.
pub const PORT_ERROR_WINDOW: Duration = Duration::from_secs(60);

/// At most this many (LID, port, trap) counts are kept; older ones go first.
pub(super) const PORT_ERROR_KEYS: usize = 4096;

/// Per-trap log lines: at most [`TRAP_LOG_LINES`] per window, then a count.
pub const TRAP_LOG_WINDOW: Duration = Duration::from_secs(10);
/// See [`TRAP_LOG_WINDOW`].
pub const TRAP_LOG_LINES: u32 = 20;
