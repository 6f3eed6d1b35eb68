//! Seeded random multi-SM simulation (see the crate doc). `IBSM_SEED=<n>` replays one seed.

pub use crate::seeds::seeds;
use std::time::Duration;

use crate::rng::Rng;
use crate::world::{SmSpec, World};

/// Fault profile of one run.
#[derive(Clone, Debug)]
pub struct SimConfig {
    /// The SMs.
    pub specs: Vec<SmSpec>,
    /// Probability that an SMP is lost, during the faulty phase.
    pub loss: f64,
    /// Latency range of an SMP.
    pub latency: (Duration, Duration),
    /// Length of the faulty phase (loss, crashes, restarts).
    pub faulty_for: Duration,
    /// Mean gap between crash/restart events in the faulty phase.
    pub fault_every: Duration,
    /// Length of the quiet phase (no loss, no crash) after which one master must rule.
    pub quiet_for: Duration,
    /// Require the highest-ranked live SM to be master at the end.
    pub require_best: bool,
}

/// What a passing run looked like.
#[derive(Clone, Debug)]
pub struct SimOutcome {
    /// Steps executed.
    pub steps: u64,
    /// SMs crashed during the faulty phase.
    pub crashes: u32,
    /// Final states.
    pub end: String,
}

/// Runs one seed; `Err` carries the violation and the seed.
pub fn run(seed: u64, cfg: &SimConfig) -> Result<SimOutcome, String> {
    let mut rng = Rng::new(seed);
    let mut world = World::new(cfg.specs.clone());
    let n = cfg.specs.len();
    let (lo, hi) = cfg.latency;
    let span = hi.saturating_sub(lo).as_micros() as u64;
    let mut steps = 0u64;
    let mut crashes = 0u32;
    // Faulty phase: between fault events, run with loss.
    let mut net_rng = Rng::new(seed ^ 0x5eed_1055);
    let loss = cfg.loss;
    let mut lossy = |_: &ibsm_core::election::SmInfoMsg| {
        if net_rng.chance(loss) {
            None
        } else {
            Some(lo + Duration::from_micros(net_rng.below(span + 1)))
        }
    };
    let end_faulty = cfg.faulty_for;
    while world.now < end_faulty {
        let gap = cfg.fault_every.as_micros() as u64;
        let next = (world.now + Duration::from_micros(rng.below(2 * gap + 1))).min(end_faulty);
        world.run_until(next, &mut lossy, &mut |_| steps += 1);
        if let Some(v) = &world.violation {
            return Err(format!("seed {seed}: {v} (replay: IBSM_SEED={seed})"));
        }
        if world.now >= end_faulty {
            break;
        }
        let i = rng.below(n as u64) as usize;
        let live = world.nodes.iter().filter(|x| x.is_some()).count();
        if world.nodes.get(i).is_some_and(|x| x.is_some()) {
            if live > 1 {
                world.crash(i);
                crashes += 1;
            }
        } else {
            world.restart(i, &mut lossy);
        }
    }
    // Quiet phase: no loss, no faults.
    let mut quiet = |_: &ibsm_core::election::SmInfoMsg| {
        Some(lo + Duration::from_micros(net_rng.below(span + 1)))
    };
    let until = world.now + cfg.quiet_for;
    world.run_until(until, &mut quiet, &mut |_| steps += 1);
    if let Some(v) = &world.violation {
        return Err(format!("seed {seed}: {v} (replay: IBSM_SEED={seed})"));
    }
    world
        .check_converged(cfg.require_best)
        .map_err(|e| format!("seed {seed}: {e} (replay: IBSM_SEED={seed})"))?;
    Ok(SimOutcome {
        steps,
        crashes,
        end: world.describe(),
    })
}
