//! The master's multicast forwarding: the SA's groups as trees over the switches
//! (`ibsm_fabric::multicast`), programmed as MulticastForwardingTable blocks, only the
//! blocks that changed.
//!
//! When: a join or leave ([`SubnetManager::set_mcast_group`],
//! [`SubnetManager::remove_mcast_group`]) marks its MLID, and the marked groups are
//! recomputed [`MCAST_HOLDOFF`] after the first mark; the end of a heavy sweep (the
//! topology may have changed) and a new mastership mark every group, due at once.
//! Marked groups are recomputed and written between sweeps (the stage is idle or a
//! light sweep), never while a heavy sweep is rebuilding the topology, so a tree is
//! always computed on the fabric the last sweep saw.
//!
//! Why the hold-off: the SA answers a join before its MFTs are written (as OpenSM's
//! does; the switches are programmed behind the answer either way), and joins come in
//! bursts (every IPoIB port of a fabric re-joins its broadcast group after a
//! ClientReregister; MPI jobs create and leave groups by the hundred). Within the
//! hold-off a burst is one recomputation per group and one write per block whose
//! final contents differ from what the switch holds: N joins to one group cost one
//! tree and its changed blocks, not N, and a group created and deleted within the
//! hold-off costs nothing on the wire.
//!
//! What the switches hold: `programmed` is what our writes left; a switch this
//! mastership has not written yet (or whose write failed) is "unknown" and gets every
//! block that holds one of our groups. Blocks a previous SM left with entries for
//! groups we do not know are not cleared (that would cost every block of every
//! switch at bring-up); see the SA docs.

use std::collections::HashSet;
use std::time::Duration;

use ibsm_fabric::multicast::{
    changed_blocks, McastFabric, McastMember, MftSet, MftWrite, TreeOptions,
};
use ibsm_mad::attr::MulticastForwardingTable;
use ibsm_mad::Smp;

use super::manager::SubnetManager;
use super::sweep::{Tagged, Token};

/// How long a join or leave waits before its group's tree is recomputed and written,
/// so a burst of changes is written once (see the module docs).
pub const MCAST_HOLDOFF: Duration = Duration::from_millis(5);

impl SubnetManager {
    /// The SA's group `mlid` has these members now: recompute its tree and write what
    /// changed (between sweeps).
    pub fn set_mcast_group(&mut self, now: Duration, mlid: u16, members: Vec<McastMember>) {
        self.mcast.groups.insert(mlid, members);
        self.mark_mcast(now, mlid);
        self.pump(now);
    }

    /// The SA's group `mlid` is gone: clear it on the switches.
    pub fn remove_mcast_group(&mut self, now: Duration, mlid: u16) {
        if self.mcast.groups.remove(&mlid).is_some() {
            self.mark_mcast(now, mlid);
        }
        self.pump(now);
    }

    /// Mark `mlid` for recomputation at the end of the hold-off that the first
    /// marked group started.
    fn mark_mcast(&mut self, now: Duration, mlid: u16) {
        self.mcast.dirty.insert(mlid);
        if self.mcast.due.is_none() {
            self.mcast.due = Some(now + MCAST_HOLDOFF);
        }
    }

    /// When marked groups are due for recomputation, if they can be recomputed then
    /// (a master between heavy sweeps, with a topology); for `poll_timeout`.
    pub(super) fn mcast_due(&self) -> Option<Duration> {
        if self.mcast.dirty.is_empty() || self.last.is_none() || !self.active {
            return None;
        }
        self.mcast.due
    }

    /// The MFTs the master wants the switches to hold (every group's tree).
    pub fn desired_mfts(&self) -> &MftSet {
        &self.mcast.desired
    }

    /// MFT blocks written in this process's life, and writes that failed.
    pub fn mft_writes(&self) -> (u64, u64) {
        (self.mcast.writes, self.mcast.failures)
    }

    /// MFT writes waiting to be sent.
    pub fn mft_pending(&self) -> usize {
        self.mcast.queue.len() + self.mcast.dirty.len()
    }

    /// After a heavy sweep: every group's tree is recomputed on the new topology.
    pub(super) fn mcast_after_sweep(&mut self) {
        let groups: Vec<u16> = self.mcast.groups.keys().copied().collect();
        self.mcast.dirty.extend(groups);
        // Groups that are gone still have entries to clear.
        let stale: Vec<u16> = self.mcast.desired.mlids().collect();
        self.mcast.dirty.extend(stale);
        self.mcast.due = Some(Duration::ZERO);
    }

    /// Recompute the marked groups and queue the writes (between sweeps only, once
    /// they are due).
    pub(super) fn mcast_recompute(&mut self, now: Duration) {
        if self.mcast.dirty.is_empty() {
            self.mcast.due = None;
            return;
        }
        if self.mcast.due.is_some_and(|due| due > now) {
            return;
        }
        let Some(res) = self.last.as_ref() else {
            return;
        };
        let topo = &res.topology;
        let sweep = self.metrics.heavy_sweeps;
        if self.mcast.fabric.is_none() || self.mcast.fabric_sweep != sweep {
            match McastFabric::new(topo) {
                Ok(f) => {
                    self.mcast.fabric = Some(f);
                    self.mcast.fabric_sweep = sweep;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "multicast: cannot index the topology");
                    // Tried again at the next change or sweep, not on every pump.
                    self.mcast.due = None;
                    return;
                }
            }
            // A new topology (or mastership): its switches never written in this
            // mastership are unknown. Between sweeps the set only changes by writes
            // (known) and failed writes (unknown again, `on_mft`).
            for (_, node) in topo.iter().filter(|(_, n)| n.is_switch()) {
                if !self.mcast.known.contains(&node.node_guid) {
                    self.mcast.unknown.insert(node.node_guid);
                }
            }
        }
        self.mcast.due = None;
        let Some(fabric) = self.mcast.fabric.as_ref() else {
            return;
        };
        for mlid in std::mem::take(&mut self.mcast.dirty) {
            let result = match self.mcast.groups.get(&mlid) {
                Some(members) => fabric
                    .tree(topo, members, &TreeOptions { spread: 0 })
                    .and_then(|tree| {
                        for ex in &tree.excluded {
                            tracing::debug!(mlid, member = ?ex.member.port, issue = %ex.issue, "multicast member left off the tree");
                        }
                        self.mcast.desired.set_group(topo, mlid, &tree)
                    }),
                None => self.mcast.desired.remove_group(mlid),
            };
            if let Err(e) = result {
                tracing::warn!(mlid, error = %e, "multicast: group not programmed");
            }
        }
        let unknown = &self.mcast.unknown;
        let mut writes: Vec<MftWrite> = changed_blocks(&self.mcast.programmed, &self.mcast.desired)
            .into_iter()
            .filter(|w| !unknown.contains(&w.switch))
            .collect();
        writes.extend(
            self.mcast
                .desired
                .writes()
                .into_iter()
                .filter(|w| unknown.contains(&w.switch)),
        );
        let desired_switches: HashSet<u64> =
            self.mcast.desired.switches().map(|(g, _)| g).collect();
        // An unknown switch with no group entry needs nothing written yet; it stays
        // unknown until it gets one.
        self.mcast.unknown.retain(|g| !desired_switches.contains(g));
        for g in desired_switches {
            self.mcast.known.insert(g);
        }
        self.mcast.programmed = self.mcast.desired.clone();
        self.mcast.queue.extend(writes);
    }

    /// Submit queued MFT writes while the agent has room; true if any was.
    pub(super) fn feed_mft(&mut self, now: Duration) -> bool {
        self.mcast_recompute(now);
        let window = self.tx.config().window;
        let mut progressed = false;
        while self.tx.queued() < window {
            let Some(w) = self.mcast.queue.pop_front() else {
                break;
            };
            progressed = true;
            let Some(res) = self.last.as_ref() else { break };
            let path = res
                .topology
                .find_by_guid(w.switch)
                .and_then(|idx| res.path(idx));
            let Some(path) = path else {
                // The switch left the fabric: nothing to write.
                continue;
            };
            let block = MulticastForwardingTable {
                port_mask: w.port_masks,
            };
            let smp = Smp::set_dr_attr(path, w.attribute_modifier(), 0, &block);
            self.mcast.writes += 1;
            self.tx.submit(
                now,
                smp,
                Tagged {
                    generation: self.generation,
                    token: Token::Mft(w),
                },
            );
        }
        progressed
    }

    /// The outcome of one MFT write.
    pub(super) fn on_mft(&mut self, w: MftWrite, ok: bool) {
        if ok {
            return;
        }
        self.mcast.failures += 1;
        tracing::warn!(
            switch = format_args!("{:#018x}", w.switch),
            block = w.block,
            position = w.position,
            "MulticastForwardingTable write failed; the switch is rewritten whole at the next recompute"
        );
        // Written whole at the next recompute (a change or the next heavy sweep),
        // not at once: a switch that refuses MFTs must not be hammered.
        self.mcast.unknown.insert(w.switch);
        self.mcast.known.remove(&w.switch);
    }
}
