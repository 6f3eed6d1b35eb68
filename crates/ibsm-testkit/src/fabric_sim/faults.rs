//! The seeded fault schedule of a [`Run`]: the gap to the next fault, injecting one
//! (SM crash or restart, loss burst, latency change, pulled cable), ending loss bursts
//! and plugging cables back when their time comes, and the start of the quiet phase.
//! Every fault is logged with its time for the report.

use std::time::Duration;

use super::world::Run;
use crate::rng::Rng;
impl Run<'_> {
    pub(super) fn gap(&self, rng: &mut Rng) -> Duration {
        let g = self.cfg.fault_every.as_micros() as u64;
        Duration::from_micros(1 + rng.below(2 * g + 1))
    }

    pub(super) fn next_scheduled(&self) -> Duration {
        let mut t = Duration::MAX;
        for (_, at) in &self.down {
            t = t.min(*at);
        }
        if let Some(l) = self.loss_until {
            t = t.min(l);
        }
        t
    }

    /// Ends the loss burst and plugs back the cables whose time has come.
    pub(super) fn end_scheduled(&mut self) -> Result<(), String> {
        if self.loss_until.is_some_and(|t| t <= self.now) {
            self.loss_until = None;
            self.sim
                .set_loss(0.0, 0)
                .map_err(|e| format!("set_loss: {e}"))?;
            self.fault("loss burst ends".into());
            self.last_net_change = self.now;
        }
        let now = self.now;
        let (due, keep): (Vec<_>, Vec<_>) = self.down.drain(..).partition(|(_, at)| *at <= now);
        self.down = keep;
        for ((node, port), _) in due {
            self.sim
                .link_up(node, port)
                .map_err(|e| format!("link_up: {e}"))?;
            self.fault(format!("cable {}/{} plugged back", node.0, port));
            self.last_net_change = self.now;
        }
        Ok(())
    }

    fn fault(&mut self, text: String) {
        self.last_fault = self.now;
        tracing::debug!(at = ?self.now, "{text}");
        self.faults
            .push(format!("{:>9.3} s  {text}", self.now.as_secs_f64()));
    }

    pub(super) fn inject(&mut self, rng: &mut Rng) -> Result<(), String> {
        match rng.below(5) {
            0 | 1 => {
                let i = rng.below(self.slots.len() as u64) as usize;
                let live = self.slots.iter().filter(|s| s.node.is_some()).count();
                let is_live = self.slots.get(i).is_some_and(|s| s.node.is_some());
                if is_live && live > 1 {
                    self.crash_sm(i)?;
                    self.fault(format!("SM {:#x} crashes", self.slot_guid(i)));
                } else if !is_live {
                    self.start_sm(i)?;
                    self.fault(format!("SM {:#x} restarts", self.slot_guid(i)));
                }
            }
            2 => {
                if self.loss_until.is_none() {
                    let (lo, hi) = self.cfg.loss;
                    let rate = lo + (hi - lo) * (rng.below(1001) as f64 / 1000.0);
                    let dur = Duration::from_millis(100 + rng.below(1500));
                    self.sim
                        .set_loss(rate, rng.next_u64())
                        .map_err(|e| format!("set_loss: {e}"))?;
                    self.loss_until = Some(self.now + dur);
                    self.fault(format!(
                        "loss burst {:.0}% for {} ms",
                        rate * 100.0,
                        dur.as_millis()
                    ));
                }
            }
            3 => {
                let max = self.cfg.max_latency.as_micros() as u64;
                let l = Duration::from_micros(1 + rng.below(max));
                self.sim.set_latency(l);
                self.fault(format!("latency {} us", l.as_micros()));
                self.last_net_change = self.now;
            }
            _ => {
                let cables = self.cables();
                let pick = rng.below(cables.len() as u64) as usize;
                if let Some(&(node, port)) = cables.get(pick) {
                    if !self.is_down(node, port) {
                        let dur = Duration::from_millis(200 + rng.below(3000));
                        self.sim
                            .link_down(node, port)
                            .map_err(|e| format!("link_down: {e}"))?;
                        self.down.push(((node, port), self.now + dur));
                        self.fault(format!(
                            "cable {}/{} pulled for {} ms",
                            node.0,
                            port,
                            dur.as_millis()
                        ));
                        self.last_net_change = self.now;
                    }
                }
            }
        }
        Ok(())
    }

    /// The quiet phase begins: every cable back, no loss, base latency; crashed SMs
    /// come back or not (seeded).
    pub(super) fn quiet(&mut self, rng: &mut Rng) -> Result<(), String> {
        let down: Vec<_> = self.down.drain(..).collect();
        for ((node, port), _) in down {
            self.sim
                .link_up(node, port)
                .map_err(|e| format!("link_up: {e}"))?;
        }
        self.loss_until = None;
        self.sim
            .set_loss(0.0, 0)
            .map_err(|e| format!("set_loss: {e}"))?;
        self.sim.set_latency(self.cfg.latency);
        for i in 0..self.slots.len() {
            if self.slots.get(i).is_some_and(|s| s.node.is_none()) && rng.below(2) == 0 {
                self.start_sm(i)?;
                self.fault(format!("SM {:#x} restarts", self.slot_guid(i)));
            }
        }
        self.fault("quiet phase: all cables up, no loss, base latency".into());
        self.last_net_change = self.now;
        Ok(())
    }
}
