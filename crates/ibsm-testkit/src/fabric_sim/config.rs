//! The knobs of a fabric simulation run ([`FabricSimConfig`]): the SMs' priorities, the
//! fat tree, the lengths of the three phases, the fault mix and the bounds the
//! invariants use. Plain data with the defaults the test suite runs.

use std::time::Duration;

use ibsm_core::election::ElectionConfig;
use ibsm_core::subnet::SubnetConfig;

use crate::sim_driver::NodeTimers;
/// Settings of a fabric simulation run.
#[derive(Clone, Debug)]
pub struct FabricSimConfig {
    /// Priority of each SM (2..=4 SMs).
    pub priorities: Vec<u8>,
    /// Radix of the 2-level fat tree (even, >= 4 so the SMs sit under different leaves).
    pub radix: u32,
    /// Longest warm-up before the run is declared stuck.
    pub warmup_limit: Duration,
    /// Length of the faulty phase.
    pub faulty_for: Duration,
    /// Mean gap between fault events.
    pub fault_every: Duration,
    /// Length of the quiet phase.
    pub quiet_for: Duration,
    /// Bound on a dual-master stretch (see the module doc). The default, 6 s, is the
    /// worst path to a handover with the default timers: a higher SM that came back
    /// while the master was not looking (IsSM appearing raises no trap 144 in the
    /// simulator, nor on most HCAs) is found by the lower master's next heavy sweep
    /// (`heavy_sweep_interval`, 3 s) or by a light sweep that saw a port change
    /// (`sweep_interval`, 1 s), whose SMInfo query and HANDOVER then take at most
    /// `master_poll_interval` (1 s) plus `handover_timeout` x (1 + `handover_retries`)
    /// (0.8 s). 300 seeds measured at most 2.7 s.
    pub handover_window: Duration,
    /// After the quiet phase starts, exactly one (the best) master from this time on.
    pub converge_within: Duration,
    /// Base SMP latency (restored in the quiet phase).
    pub latency: Duration,
    /// Highest latency a fault sets.
    pub max_latency: Duration,
    /// Loss rate range of a burst.
    pub loss: (f64, f64),
    /// Election settings (port GUID and priority are set per SM).
    pub election: ElectionConfig,
    /// Subnet manager settings.
    pub subnet: SubnetConfig,
    /// Sweep timers of the SMs.
    pub timers: NodeTimers,
}

impl Default for FabricSimConfig {
    fn default() -> Self {
        FabricSimConfig {
            priorities: vec![3, 9, 5],
            radix: 4,
            warmup_limit: Duration::from_secs(10),
            faulty_for: Duration::from_secs(20),
            fault_every: Duration::from_secs(2),
            quiet_for: Duration::from_secs(12),
            handover_window: Duration::from_secs(6),
            converge_within: Duration::from_secs(6),
            latency: Duration::from_micros(50),
            max_latency: Duration::from_millis(20),
            loss: (0.05, 0.5),
            election: ElectionConfig::new(1),
            subnet: SubnetConfig {
                sweep_interval: Duration::from_secs(1),
                ..SubnetConfig::default()
            },
            timers: NodeTimers {
                standby_sweep_interval: Duration::from_secs(2),
                heavy_sweep_interval: Duration::from_secs(3),
            },
        }
    }
}
