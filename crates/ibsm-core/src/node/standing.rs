//! STANDBY: the standing read of every switch's LFT (`subnet::StandingLfts`), kept
//! while this node follows a master that is the replica's current master, so a
//! takeover reads one LFT block per switch instead of all of them (the
//! `subnet::lft_stamp` module says why that still verifies the fabric).
//!
//! It is kept only while all of these hold: replication on, the election STANDBY,
//! and the master it polls is the replica's master at the replica's epoch. When the
//! followed master or the epoch changes, or the node leaves STANDBY, everything read
//! is dropped (a takeover already prepared keeps the copy it was handed). A round
//! every [`STANDING_LFT_RECHECK`] reads block 0 of every switch of the last standby
//! discovery and re-reads in full the switches whose stamp or replicated digest
//! moved; rounds pause while a takeover is being prepared. The reads go through the
//! node's own MAD agent, at most [`STANDING_LFT_WINDOW`] in flight.

use std::collections::HashMap;
use std::time::Duration;

use ibsm_mad::{AttributeId, Smp};

use crate::election::SmState;
use crate::subnet::{StandingLft, STANDING_LFT_RECHECK, STANDING_LFT_WINDOW};

use super::state::{Job, Running, Timer};
use super::types::ReplicatedFabric;

impl Running {
    /// The (master, epoch) a standing read may be kept under now, if any.
    fn standing_key(&self) -> Option<(u64, u64)> {
        if !self.cfg.replicated
            || self.election.state() != SmState::Standby
            || self.subnet.is_active()
        {
            return None;
        }
        let master = self.election.master_guid()?;
        let rep = self.replicated.as_ref()?;
        (rep.master_guid == Some(master)).then_some((master, rep.epoch))
    }

    /// Start, keep or drop the standing read as the election and the replica say.
    pub(crate) fn tend_standing(&mut self, now: Duration) {
        let want = self.standing_key();
        if want == self.standing_under {
            return;
        }
        if let Some((master, epoch)) = self.standing_under {
            tracing::info!(
                master = format_args!("{master:#018x}"),
                epoch,
                switches = self.standing.entries().len(),
                state = %self.election.state(),
                "standing LFT read dropped: no longer following the replica's master"
            );
            self.standing.clear();
        }
        self.standing_under = want;
        if let Some((master, epoch)) = want {
            tracing::info!(
                master = format_args!("{master:#018x}"),
                epoch,
                "standing LFT read started"
            );
            self.set_timer(Timer::StandingLft, now);
        }
    }

    /// A round is due: block 0 of every known switch (see `subnet::StandingLfts`).
    pub(crate) fn standing_round(&mut self, now: Duration) {
        self.set_timer(Timer::StandingLft, now.saturating_add(STANDING_LFT_RECHECK));
        // A takeover being prepared has the fabric (and the standing copy) to itself.
        if self.subnet.is_preparing() || self.subnet.is_active() {
            return;
        }
        let (Some((_, _, _, res)), Some(rep)) = (&self.last_discovery, &self.replicated) else {
            return;
        };
        self.standing.round(res, &rep.inherited);
    }

    /// Hand the standing read's requests to the node's agent; true if any went.
    pub(crate) fn feed_standing(&mut self, now: Duration) -> bool {
        let generation = self.standing.generation();
        let mut progressed = false;
        while let Some((guid, block, path)) = self.standing.next_request(STANDING_LFT_WINDOW) {
            progressed = true;
            match Smp::try_get_dr(
                &path,
                AttributeId::LINEAR_FORWARDING_TABLE,
                u32::from(block),
                0,
            ) {
                Ok(smp) => self.tx.submit(
                    now,
                    smp,
                    Job::StandingLft {
                        generation,
                        guid,
                        block,
                    },
                ),
                Err(err) => {
                    tracing::debug!(%err, guid = format_args!("{guid:#018x}"), "cannot address a switch");
                    self.standing.on_block(generation, guid, block, None);
                }
            }
        }
        progressed
    }

    /// The standing tables a takeover may use: only if they were read under the
    /// master and epoch of `rep` (the replica as the takeover starts from it).
    pub(crate) fn standing_for_takeover(
        &self,
        rep: &ReplicatedFabric,
    ) -> HashMap<u64, StandingLft> {
        match self.standing_under {
            Some((master, epoch)) if rep.master_guid == Some(master) && rep.epoch == epoch => {
                self.standing.entries().clone()
            }
            _ => HashMap::new(),
        }
    }
}
