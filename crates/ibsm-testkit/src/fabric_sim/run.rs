//! [`run`]: one seed from start to report. The three phases of the module doc (warm-up,
//! faulty, quiet) and the event loop that advances virtual time to the next thing due,
//! delivers MADs, fires the SMs' timers, then collects their notes and checks the
//! invariants after every step.

use std::time::Duration;

use super::config::FabricSimConfig;
use super::report::{FabricSimOutcome, Failure};
use super::world::Run;
use crate::rng::Rng;
/// Runs one seed.
pub fn run(seed: u64, cfg: &FabricSimConfig) -> Result<FabricSimOutcome, Box<Failure>> {
    let mut r = Run::new(seed, cfg).map_err(|what| {
        Box::new(Failure {
            seed,
            at: Duration::ZERO,
            what,
            recent: Vec::new(),
        })
    })?;
    let res = r.go();
    match res {
        Ok(()) => Ok(r.outcome()),
        Err(what) => {
            let mut recent: Vec<String> = r.faults.iter().rev().take(6).cloned().collect();
            recent.extend(r.transitions.iter().rev().take(10).cloned());
            recent.push(r.describe());
            Err(Box::new(Failure {
                seed,
                at: r.now,
                what,
                recent,
            }))
        }
    }
}

/// Steps allowed at one virtual instant before the run is declared a livelock.
const SAME_INSTANT_LIMIT: u32 = 100_000;

impl Run<'_> {
    fn outcome(&self) -> FabricSimOutcome {
        FabricSimOutcome {
            steps: self.steps,
            faults: self.faults.clone(),
            transitions: self.transitions.clone(),
            max_dual_master: self.max_dual,
            dual_master_total: self.dual_total,
            master_sm_lid_checks: self.master_sm_lid_checks,
            master: self.masters().first().map_or(0, |&i| self.slot_guid(i)),
            master_changes: self.master_changes,
            delivered: self.sim.stats().delivered,
            end: self.now,
        }
    }

    // ---- the loop --------------------------------------------------------------------

    fn go(&mut self) -> Result<(), String> {
        // Warm-up.
        let limit = self.cfg.warmup_limit;
        let mut up = false;
        while self.now < limit {
            self.step(limit)?;
            if self.subnet_is_up() {
                up = true;
                break;
            }
        }
        if !up {
            return Err(format!(
                "warm-up: no master brought the subnet up within {:?}",
                limit
            ));
        }
        // Faulty phase.
        self.faulty = true;
        let start = self.now;
        let end = start + self.cfg.faulty_for;
        let mut rng = Rng::new(self.seed);
        let mut next_fault = start + self.gap(&mut rng);
        while self.now < end {
            let until = next_fault.min(end).min(self.next_scheduled());
            self.run_until(until)?;
            self.end_scheduled()?;
            if self.now >= next_fault && self.now < end {
                self.inject(&mut rng)?;
                next_fault = self.now + self.gap(&mut rng);
            }
        }
        // Quiet phase.
        self.faulty = false;
        self.quiet(&mut rng)?;
        let q = self.now;
        self.quiet_since = Some(q);
        self.run_until(q + self.cfg.quiet_for)?;
        if !self.clean_sweep_after_converge {
            return Err(format!(
                "the master completed no clean heavy sweep in the {:?} after convergence, so MasterSMLID was never verified",
                self.cfg.quiet_for.saturating_sub(self.cfg.converge_within)
            ));
        }
        self.check_master_sm_lid("end of run")?;
        Ok(())
    }

    fn run_until(&mut self, until: Duration) -> Result<(), String> {
        while self.now < until {
            self.step(until)?;
        }
        Ok(())
    }

    /// Advances to the next thing due (at most `until`) and handles everything due then.
    fn step(&mut self, until: Duration) -> Result<(), String> {
        let mut next = until;
        if let Some(t) = self.sim.poll_timeout() {
            next = next.min(t);
        }
        for s in &self.slots {
            if let Some(t) = s.node.as_ref().and_then(|n| n.next_wake(self.now)) {
                next = next.min(t);
            }
        }
        let next = next.max(self.now);
        if next == self.now {
            self.same_instant += 1;
            if self.same_instant > SAME_INSTANT_LIMIT {
                return Err(format!(
                    "livelock: {SAME_INSTANT_LIMIT} steps without virtual time advancing"
                ));
            }
        } else {
            self.same_instant = 0;
        }
        self.advance_dual(next);
        self.now = next;
        let now = self.now;
        while let Some(d) = self.sim.poll_delivery_from(now) {
            let slot = self.client_slot.get(d.client.0 as usize).copied().flatten();
            if let Some(sm) = slot
                .and_then(|i| self.slots.get_mut(i))
                .and_then(|s| s.node.as_mut())
                .filter(|n| n.client == d.client)
            {
                sm.incoming(now, &mut self.sim, d.slid, &d.mad);
            }
        }
        for s in &mut self.slots {
            if let Some(n) = s.node.as_mut() {
                if n.next_wake(now).is_some_and(|t| t <= now) {
                    n.on_timers(now, &mut self.sim);
                }
            }
        }
        self.steps += 1;
        self.collect_notes()?;
        self.check()
    }
}
