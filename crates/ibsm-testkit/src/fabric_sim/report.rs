//! What a fabric simulation run hands back: the [`FabricSimOutcome`] of a passing run
//! (equal for equal seeds), the [`Failure`] of a broken invariant with the command that
//! replays it, and [`seeds`], which reads the seeds to run from `IBSM_SEED` /
//! `IBSM_SEEDS`.

use std::fmt;
use std::time::Duration;
/// What a passing run looked like (equal for equal seeds: the replay check).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FabricSimOutcome {
    /// Loop steps.
    pub steps: u64,
    /// Faults injected, rendered in order with their times.
    pub faults: Vec<String>,
    /// State changes of all SMs, rendered in order with their times.
    pub transitions: Vec<String>,
    /// Longest counted dual-master stretch.
    pub max_dual_master: Duration,
    /// Total time with two connected masters (loss bursts included).
    pub dual_master_total: Duration,
    /// Clean master sweeps whose MasterSMLID was checked.
    pub master_sm_lid_checks: u32,
    /// The final master's GUID.
    pub master: u64,
    /// Times mastership moved to another SM (failovers and handovers).
    pub master_changes: u32,
    /// MADs the simulator delivered.
    pub delivered: u64,
    /// Virtual time at the end.
    pub end: Duration,
}

/// A violated invariant, with what is needed to replay it.
#[derive(Clone, Debug)]
pub struct Failure {
    /// The seed.
    pub seed: u64,
    /// Virtual time of the violation.
    pub at: Duration,
    /// What went wrong.
    pub what: String,
    /// The last faults and transitions before it.
    pub recent: Vec<String>,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "seed {} at {:.3} s: {}",
            self.seed,
            self.at.as_secs_f64(),
            self.what
        )?;
        for r in &self.recent {
            writeln!(f, "    {r}")?;
        }
        write!(
            f,
            "replay: IBSM_SEED={} cargo test -p ibsm-testkit fabric_sim",
            self.seed
        )
    }
}
