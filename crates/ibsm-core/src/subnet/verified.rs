//! Where a takeover's discovery ends: walked, or verified ([`super::verify`]). The
//! verification itself is a machine of its own in `verify.rs`; these are the
//! configurator's steps after it, kept apart so that the sweep's stages can name the
//! verification without importing the configurator.

use std::time::Duration;

use crate::discovery::{Discovery, DiscoveryResult};

use super::events::SubnetEvent;
use super::manager::SubnetManager;
use super::sweep::Stage;
use super::verify::{VerificationReport, Verify};

impl SubnetManager {
    /// Discovery (walked or verified) is done: LIDs next. A prepared takeover's
    /// election gets its SM ports.
    pub(super) fn discovered(&mut self, now: Duration, res: DiscoveryResult) -> Stage {
        self.mark(1, now);
        let sweep = self.after_discovery(res);
        if self.preparing.is_some() {
            self.events.push_back(SubnetEvent::PreparedDiscovery {
                sm_ports: sweep.report.sm_ports.clone(),
            });
        }
        self.wake_now = Some(now);
        Stage::LidsDone(sweep)
    }

    /// The verification ended: continue from the known discovery, or walk the fabric.
    pub(super) fn verified(&mut self, now: Duration, v: Verify) -> Stage {
        let smps = self
            .tx
            .counters()
            .sent
            .saturating_sub(self.mark_sent.first().copied().unwrap_or(0));
        let took = now.saturating_sub(self.marks.first().copied().unwrap_or(now));
        let report = VerificationReport {
            nodes: v.res.topology.len(),
            matched: v.matched,
            smps,
            difference: v.failed.clone(),
        };
        self.verification = Some(report);
        match v.failed {
            None => {
                tracing::info!(
                    nodes = v.res.topology.len(),
                    reads = v.matched,
                    smps,
                    took_ms = took.as_millis(),
                    "takeover: the known fabric verified, no discovery"
                );
                let mut stage = self.discovered(now, v.res);
                if let Stage::LidsDone(sw) = &mut stage {
                    sw.verified = true;
                }
                stage
            }
            Some(why) => {
                tracing::info!(
                    %why,
                    smps,
                    took_ms = took.as_millis(),
                    "takeover: the known fabric differs; discovering it from scratch"
                );
                // Answers to the verification and the read-back still in flight
                // are not this walk's (its node indices differ too).
                self.generation = self.generation.wrapping_add(1);
                self.early_readback = None;
                Stage::Discovering(Box::new(Discovery::new(self.cfg.discovery.clone())))
            }
        }
    }
}
