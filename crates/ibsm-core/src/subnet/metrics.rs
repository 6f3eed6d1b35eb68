//! The configurator's counters ([`SubnetMetrics`], with their Prometheus text
//! exposition) and the windows and bounds of the per-port counting of traps
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

impl SubnetMetrics {
    /// Prometheus text exposition of the counters.
    pub fn to_prometheus(&self) -> String {
        let p = &self.last_phases;
        let mut s = String::new();
        let mut line = |name: &str, help: &str, kind: &str, v: String| {
            s.push_str(&format!(
                "# HELP ibsm_{name} {help}\n# TYPE ibsm_{name} {kind}\nibsm_{name} {v}\n"
            ));
        };
        line(
            "heavy_sweeps_total",
            "Heavy sweeps completed.",
            "counter",
            self.heavy_sweeps.to_string(),
        );
        line(
            "client_reregisters_total",
            "End ports asked to re-register with the SA (PortInfo.ClientReregister).",
            "counter",
            self.client_reregisters.to_string(),
        );
        line(
            "light_sweeps_total",
            "Light sweeps completed.",
            "counter",
            self.light_sweeps.to_string(),
        );
        line(
            "traps_total",
            "Traps received.",
            "counter",
            self.traps.to_string(),
        );
        line(
            "trap_represses_total",
            "TrapRepress sent.",
            "counter",
            self.trap_represses.to_string(),
        );
        line(
            "lft_blocks_sent_total",
            "LFT blocks sent.",
            "counter",
            self.lft_blocks_sent.to_string(),
        );
        line(
            "smps_sent_total",
            "SMPs sent by the configurator.",
            "counter",
            self.smps_sent.to_string(),
        );
        line(
            "smp_failures_total",
            "SMP requests that failed.",
            "counter",
            self.failures.to_string(),
        );
        line(
            "lids",
            "End ports with a LID.",
            "gauge",
            self.lids.to_string(),
        );
        line(
            "port_error_traps_total",
            "Traps 129/130/131 (port error thresholds) received.",
            "counter",
            self.port_error_traps.to_string(),
        );
        line(
            "traps_rate_limited_total",
            "Traps over their source's rate limit (repressed, not acted on).",
            "counter",
            self.traps_rate_limited.to_string(),
        );
        line(
            "trap_logs_suppressed_total",
            "Trap log lines held back by sampling.",
            "counter",
            self.trap_logs_suppressed.to_string(),
        );
        line(
            "trap_sweeps_deferred_total",
            "Trap-triggered heavy sweeps deferred by the hold-down.",
            "counter",
            self.trap_sweeps_deferred.to_string(),
        );
        line(
            "duplicate_guids",
            "Duplicate GUIDs found by the last heavy sweep.",
            "gauge",
            self.duplicate_guids.to_string(),
        );
        line(
            "topology_capped",
            "1 when the last heavy sweep's discovery hit the topology cap.",
            "gauge",
            self.topology_capped.to_string(),
        );
        for (phase, d) in [
            ("discovery", p.discovery),
            ("lids", p.lids),
            ("routing", p.routing),
            ("distribution", p.distribution),
            ("activation", p.activation),
        ] {
            line(
                &format!("sweep_{phase}_seconds"),
                "Time of this phase in the last heavy sweep.",
                "gauge",
                format!("{}", d.as_secs_f64()),
            );
        }
        s
    }
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
