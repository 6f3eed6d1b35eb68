//! The master's multicast forwarding: the SA's groups as trees over the switches
//! (`ibsm_fabric::multicast`), programmed as MulticastForwardingTable blocks, only the
//! blocks that changed.
//!
//! When: a join or leave ([`SubnetManager::set_mcast_group`],
//! [`SubnetManager::remove_mcast_group`]) marks its MLID; the end of a heavy sweep
//! marks every group (the topology may have changed). Marked groups are recomputed and
//! written between sweeps (the stage is idle or a light sweep), never while a heavy
//! sweep is rebuilding the topology, so a tree is always computed on the fabric the
//! last sweep saw.
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

impl SubnetManager {
    /// The SA's group `mlid` has these members now: recompute its tree and write what
    /// changed (between sweeps).
    pub fn set_mcast_group(&mut self, now: Duration, mlid: u16, members: Vec<McastMember>) {
        self.mcast.groups.insert(mlid, members);
        self.mcast.dirty.insert(mlid);
        self.pump(now);
    }

    /// The SA's group `mlid` is gone: clear it on the switches.
    pub fn remove_mcast_group(&mut self, now: Duration, mlid: u16) {
        if self.mcast.groups.remove(&mlid).is_some() {
            self.mcast.dirty.insert(mlid);
        }
        self.pump(now);
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
    }

    /// Recompute the marked groups and queue the writes (between sweeps only).
    pub(super) fn mcast_recompute(&mut self) {
        if self.mcast.dirty.is_empty() {
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
                    return;
                }
            }
        }
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
        // Switches of the topology never written in this mastership: unknown.
        for (_, node) in topo.iter().filter(|(_, n)| n.is_switch()) {
            if !self.mcast.known.contains(&node.node_guid) {
                self.mcast.unknown.insert(node.node_guid);
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
        self.mcast_recompute();
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
