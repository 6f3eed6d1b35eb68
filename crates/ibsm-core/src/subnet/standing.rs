//! The standing read: a standby's read of every switch's LFT, kept up to date while
//! its master is alive, so a takeover reads one LFT block per switch instead of all
//! of them (see `super::lft_stamp` for the protocol and why that is safe).
//!
//! Per switch NodeGUID it keeps the settled stamp, the LinearFDBTop and the table
//! (entries `0..=top`, entry 0 [`UNREACHABLE`] as every table here), read with the
//! seqlock rule: block 0, then blocks `1..=top/64`, then block 0 again only after
//! every other answer arrived; the table is kept only if both block-0 reads carry the
//! same settled stamp. A *round* (every [`STANDING_LFT_RECHECK`], the node's timer)
//! reads block 0 of every switch of the standby's last discovery: a switch whose
//! stamp is the one kept, and whose replicated (digest, stamp) is the one it was read
//! under, is left alone; any other is read in full again (the block 0 just read
//! opens that read). Gets only, at most [`STANDING_LFT_WINDOW`] in flight, so they
//! never crowd the election's SMInfo polls.
//!
//! Sans-IO: the node asks [`StandingLfts::next_request`] for reads, sends them through
//! its own MAD agent and hands every answer (or failure) to
//! [`StandingLfts::on_block`]; [`StandingLfts::clear`] drops everything and moves the
//! generation on, so answers to reads of a dropped generation are ignored.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use ibsm_fabric::routing::UNREACHABLE;

use crate::discovery::DiscoveryResult;

use super::inherit::{copy_block, Inherited};
use super::lft_stamp::Replicated;
pub use super::lft_stamp::StandingLft;
use super::lft_stamp::{split_block0, Stamp};

/// How often a standby re-reads block 0 of every switch (a round). Each check is one
/// SMP per switch (320 on a k=16 fat tree); a master's round that brings a stamp back
/// to the same value needs 127 rounds on one switch between two checks, far more
/// than a master does in a second.
pub const STANDING_LFT_RECHECK: Duration = Duration::from_secs(1);

/// Standing-read Gets in flight at most: background reads, kept small so the
/// election's polls never queue behind them.
pub const STANDING_LFT_WINDOW: usize = 4;

fn replicated_of(inh: &Inherited, guid: u64) -> Replicated {
    (
        inh.lft_digests.get(&guid).copied(),
        inh.lft_stamps.get(&guid).copied(),
    )
}

/// Where a switch's read is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// Block 0 to compare with the kept stamp.
    Check,
    /// The first block 0 of a full read.
    Open,
    /// Blocks `1..=top/64`, this many still unanswered.
    Body(usize),
    /// The closing block 0, to compare with the opening stamp.
    Close,
}

#[derive(Debug)]
struct Reading {
    path: Vec<u8>,
    top: u16,
    step: Step,
    /// The opening read's settled stamp.
    first: u8,
    table: Vec<u8>,
    replicated: Replicated,
}

/// What the standing read did (counters, for logs and tests).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StandingStats {
    /// Rounds started.
    pub rounds: u64,
    /// Tables kept by a full read.
    pub kept: u64,
    /// Full reads not kept: the two block-0 stamps differed, a stamp was not
    /// settled, or a block went unanswered.
    pub discarded: u64,
    /// LFT Gets answered.
    pub blocks: u64,
}

/// The standing read of every switch's LFT (see the module doc).
#[derive(Debug, Default)]
pub struct StandingLfts {
    entries: HashMap<u64, StandingLft>,
    reads: HashMap<u64, Reading>,
    queue: VecDeque<(u64, u16)>,
    outstanding: usize,
    generation: u32,
    stats: StandingStats,
}

impl StandingLfts {
    /// The tables held, by switch NodeGUID.
    pub fn entries(&self) -> &HashMap<u64, StandingLft> {
        &self.entries
    }

    /// What it did so far.
    pub fn stats(&self) -> StandingStats {
        self.stats
    }

    /// The generation answers must carry (see [`StandingLfts::clear`]).
    pub fn generation(&self) -> u32 {
        self.generation
    }

    /// A round is still reading.
    pub fn is_reading(&self) -> bool {
        !self.reads.is_empty()
    }

    /// Drop every table and read; answers to reads already sent are ignored.
    pub fn clear(&mut self) {
        self.entries.clear();
        self.reads.clear();
        self.queue.clear();
        self.outstanding = 0;
        self.generation = self.generation.wrapping_add(1);
    }

    /// Start a round over the switches of `res` (the standby's last discovery),
    /// under the replicated state `inh`. Ignored while the last round still reads.
    /// Tables of switches no longer in `res` are dropped.
    pub fn round(&mut self, res: &DiscoveryResult, inh: &Inherited) {
        if self.is_reading() {
            return;
        }
        self.stats.rounds += 1;
        let mut present = HashSet::new();
        for (idx, node) in res.topology.iter() {
            if !node.is_switch() {
                continue;
            }
            let (Some(Some(si)), Some(path)) = (res.switch_info.get(idx.as_usize()), res.path(idx))
            else {
                continue;
            };
            let top = si.linear_fdb_top;
            if top == 0 {
                continue;
            }
            let guid = node.node_guid;
            present.insert(guid);
            let replicated = replicated_of(inh, guid);
            let step = match self.entries.get(&guid) {
                Some(e) if e.top == top && e.replicated == replicated => Step::Check,
                _ => {
                    self.entries.remove(&guid);
                    Step::Open
                }
            };
            self.reads.insert(
                guid,
                Reading {
                    path: path.to_vec(),
                    top,
                    step,
                    first: 0,
                    table: Vec::new(),
                    replicated,
                },
            );
            self.queue.push_back((guid, 0));
        }
        self.entries.retain(|g, _| present.contains(g));
    }

    /// The next read to send while fewer than `window` are in flight: (switch
    /// NodeGUID, LFT block, directed route).
    pub fn next_request(&mut self, window: usize) -> Option<(u64, u16, Vec<u8>)> {
        while self.outstanding < window {
            let (guid, block) = self.queue.pop_front()?;
            let Some(r) = self.reads.get(&guid) else {
                continue;
            };
            self.outstanding += 1;
            return Some((guid, block, r.path.clone()));
        }
        None
    }

    /// The answer to a read of `generation`: block `block` of switch `guid`, `None`
    /// when it failed (no answer, an error status, or it could not be sent).
    pub fn on_block(&mut self, generation: u32, guid: u64, block: u16, ports: Option<&[u8; 64]>) {
        if generation != self.generation {
            return;
        }
        self.outstanding = self.outstanding.saturating_sub(1);
        let Some(r) = self.reads.get_mut(&guid) else {
            return;
        };
        let Some(ports) = ports else {
            if r.step != Step::Check {
                self.stats.discarded += 1;
            }
            self.reads.remove(&guid);
            self.entries.remove(&guid);
            return;
        };
        self.stats.blocks += 1;
        match (r.step, block) {
            (Step::Check | Step::Open, 0) => {
                let (stamp, clean) = split_block0(ports);
                if r.step == Step::Check {
                    if self.entries.get(&guid).map(|e| e.stamp) == stamp.settled() {
                        self.reads.remove(&guid);
                        return;
                    }
                    // Moved on: this read opens a full one.
                    self.entries.remove(&guid);
                }
                let Stamp::Settled(s) = stamp else {
                    tracing::debug!(
                        guid = format_args!("{guid:#018x}"),
                        ?stamp,
                        "standing LFT read: no settled stamp, not kept"
                    );
                    self.stats.discarded += 1;
                    self.reads.remove(&guid);
                    return;
                };
                r.first = s;
                r.table = vec![UNREACHABLE; usize::from(r.top) + 1];
                copy_block(&mut r.table, 0, &clean);
                let last = r.top / 64;
                if last == 0 {
                    r.step = Step::Close;
                    self.queue.push_back((guid, 0));
                } else {
                    r.step = Step::Body(usize::from(last));
                    self.queue.extend((1..=last).map(|b| (guid, b)));
                }
            }
            (Step::Body(left), b) if b > 0 => {
                copy_block(&mut r.table, b, ports);
                let left = left.saturating_sub(1);
                r.step = Step::Body(left);
                if left == 0 {
                    // Every other block answered: now the closing block 0.
                    r.step = Step::Close;
                    self.queue.push_back((guid, 0));
                }
            }
            (Step::Close, 0) => {
                let (stamp, _) = split_block0(ports);
                let Some(r) = self.reads.remove(&guid) else {
                    return;
                };
                if stamp == Stamp::Settled(r.first) {
                    self.stats.kept += 1;
                    self.entries.insert(
                        guid,
                        StandingLft {
                            stamp: r.first,
                            top: r.top,
                            table: Arc::from(r.table),
                            replicated: r.replicated,
                        },
                    );
                } else {
                    tracing::debug!(
                        guid = format_args!("{guid:#018x}"),
                        opened = r.first,
                        ?stamp,
                        "standing LFT read: written while read, not kept"
                    );
                    self.stats.discarded += 1;
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::subnet::inherit::tests::{master_at, sweep};
    use ibsm_fabric::{gen, NodeIdx};

    /// Drive `s` against answers made by `answer(guid, block, nth read of that
    /// block)` until nothing is queued.
    fn drive(s: &mut StandingLfts, mut answer: impl FnMut(u64, u16, usize) -> Option<[u8; 64]>) {
        let mut seen: HashMap<(u64, u16), usize> = HashMap::new();
        let g = s.generation();
        while let Some((guid, block, _)) = s.next_request(STANDING_LFT_WINDOW) {
            let n = seen.entry((guid, block)).or_default();
            *n += 1;
            let a = answer(guid, block, *n);
            s.on_block(g, guid, block, a.as_ref());
        }
    }

    /// A k=4 3-level fat tree programmed by a master, its discovery and replicated state.
    fn programmed() -> (
        DiscoveryResult,
        Inherited,
        ibsm_sim::Sim,
        HashMap<u64, NodeIdx>,
    ) {
        let topo = gen::fat_tree_3level(4).expect("k=4");
        let ca = topo
            .iter()
            .find(|(_, n)| !n.is_switch())
            .map(|(i, _)| i)
            .expect("a CA");
        let mut sim = ibsm_sim::Sim::new(&topo, ibsm_sim::SimConfig::default());
        let mut now = Duration::ZERO;
        let (c, mut sm) = master_at(&mut sim, ca);
        sm.become_master(now);
        sweep(&mut sim, c, &mut sm, &mut now);
        // A discovery that reads the LinearFDBTop the first sweep programmed.
        sm.start_heavy_sweep(now);
        sweep(&mut sim, c, &mut sm, &mut now);
        let res = sm.last_discovery().cloned().expect("discovered");
        let inh = crate::subnet::inherit::tests::inherited(&sm);
        let at = topo.iter().map(|(i, n)| (n.node_guid, i)).collect();
        (res, inh, sim, at)
    }

    fn block_of(
        sim: &ibsm_sim::Sim,
        at: &HashMap<u64, NodeIdx>,
        guid: u64,
        block: u16,
    ) -> [u8; 64] {
        let idx = at.get(&guid).copied().unwrap_or(NodeIdx(0));
        std::array::from_fn(|i| {
            let lid = usize::from(block) * 64 + i;
            u16::try_from(lid)
                .ok()
                .and_then(|l| sim.lft_entry(idx, l))
                .unwrap_or(UNREACHABLE)
        })
    }

    /// (e) A full read whose two block-0 reads carry different stamps keeps nothing;
    /// one with the same settled stamp keeps the table; an unsettled or missing
    /// stamp is never kept; a later round checks block 0 only.
    #[test]
    fn a_read_is_kept_only_between_two_equal_settled_stamps() {
        let (res, inh, sim, at) = programmed();
        let switches = res.topology.iter().filter(|(_, n)| n.is_switch()).count();
        let stamped = |guid: u64, block: u16, stamp: u8| {
            let mut b = block_of(&sim, &at, guid, block);
            if block == 0 {
                b[0] = stamp;
            }
            Some(b)
        };
        let mut s = StandingLfts::default();
        s.round(&res, &inh);
        // Every switch: the closing block 0 shows the stamp moved (written meanwhile).
        drive(&mut s, |g, b, n| stamped(g, b, if n == 1 { 4 } else { 6 }));
        assert!(s.entries().is_empty());
        assert_eq!(s.stats().discarded, switches as u64);

        // InProgress (odd) and no stamp (255): not kept either.
        s.round(&res, &inh);
        drive(&mut s, |g, b, _| stamped(g, b, 5));
        s.round(&res, &inh);
        drive(&mut s, |g, b, _| stamped(g, b, 255));
        assert!(s.entries().is_empty());

        s.round(&res, &inh);
        drive(&mut s, |g, b, _| stamped(g, b, 8));
        assert_eq!(s.entries().len(), switches);
        for (g, e) in s.entries() {
            assert_eq!(e.stamp, 8);
            assert_eq!(e.table[0], UNREACHABLE, "entry 0 kept unreachable");
            let (top, digest) = inh.lft_digests[g];
            assert_eq!(
                (e.top, super::super::inherit::lft_digest(&e.table)),
                (top, digest)
            );
        }
        // The next round reads block 0 of each switch and nothing else.
        let before = s.stats().blocks;
        s.round(&res, &inh);
        drive(&mut s, |g, b, _| stamped(g, b, 8));
        assert_eq!(s.stats().blocks - before, switches as u64);
        assert_eq!(s.entries().len(), switches);

        // One failed answer drops that switch; a stale generation's answer is ignored.
        s.round(&res, &inh);
        let gen = s.generation();
        let (g0, b0, _) = s.next_request(1).expect("a read");
        s.clear();
        s.on_block(gen, g0, b0, None);
        assert!(s.entries().is_empty() && !s.is_reading());
    }

    use crate::subnet::inherit::tests::{send_queued, sweep_recording, until_quiet};
    use crate::subnet::InheritReport;
    use ibsm_mad::attr::LinearForwardingTable;
    use ibsm_mad::{Method, Smp, SmpRoute};
    use ibsm_sim::{ClientId, Sim};

    /// The stamp the tests' "master" closed every switch with.
    const STAMP: u8 = 10;

    /// Read `res`'s switches once, as a standby's standing read would, over `sim`.
    fn standing_read(
        sim: &mut Sim,
        client: ClientId,
        res: &DiscoveryResult,
        inh: &Inherited,
        now: &mut Duration,
    ) -> StandingLfts {
        let mut s = StandingLfts::default();
        s.round(res, inh);
        let g = s.generation();
        while let Some((guid, block, path)) = s.next_request(1) {
            let smp = Smp::try_get_dr(
                &path,
                AttributeId::LINEAR_FORWARDING_TABLE,
                u32::from(block),
                0,
            )
            .expect("addressable");
            sim.send(*now, client, &smp.encode()).expect("sent");
            *now = sim.poll_timeout().expect("an answer due");
            let (_, mad) = sim.poll_delivery(*now).expect("answered");
            let ports = Smp::decode(&mad)
                .ok()
                .filter(|r| r.status == 0)
                .and_then(|r| r.attribute::<LinearForwardingTable>().ok())
                .map(|t| t.ports);
            s.on_block(g, guid, block, ports.as_ref());
        }
        s
    }

    use ibsm_mad::AttributeId;

    /// What [`take_over_after`] saw: the read-back's report, the LFT Gets per switch
    /// NodeGUID, the LFT blocks written, and the switches (NodeIdx, NodeGUID).
    type Takeover = (InheritReport, HashMap<u64, usize>, u64, Vec<(NodeIdx, u64)>);

    /// A 2-level fat tree (radix 12: 90 LIDs, two LFT blocks per switch) programmed by
    /// a master on CA 0, every switch stamped [`STAMP`] and the replica saying so; a
    /// standing read of it from the same port; then `change` (the fabric after the
    /// read), and a takeover from that port prepared with the standing read. Returns
    /// the read-back's report, the LFT Gets it sent per switch (by NodeGUID), the LFT
    /// blocks it wrote, and the switches' NodeIdx by NodeGUID.
    fn take_over_after(change: impl FnOnce(&mut Sim, &[(NodeIdx, u64)])) -> Takeover {
        let topo = gen::fat_tree_2level(12).expect("radix 12");
        let ca = topo
            .iter()
            .find(|(_, n)| !n.is_switch())
            .map(|(i, _)| i)
            .expect("a CA");
        let mut sim = Sim::new(&topo, ibsm_sim::SimConfig::default());
        let mut now = Duration::ZERO;
        let (c1, mut first) = master_at(&mut sim, ca);
        first.become_master(now);
        sweep(&mut sim, c1, &mut first, &mut now);
        // A discovery that reads the LinearFDBTop the first sweep programmed.
        first.start_heavy_sweep(now);
        sweep(&mut sim, c1, &mut first, &mut now);
        let switches: Vec<(NodeIdx, u64)> = topo
            .iter()
            .filter(|(_, n)| n.is_switch())
            .map(|(i, n)| (i, n.node_guid))
            .collect();
        let mut inh = crate::subnet::inherit::tests::inherited(&first);
        for &(sw, guid) in &switches {
            assert!(sim.set_lft_entry(sw, 0, STAMP));
            inh.lft_stamps.insert(guid, STAMP);
        }
        let res = first.last_discovery().cloned().expect("discovered");
        first.stop();
        sim.detach(c1).expect("detach");

        let (c2, mut second) = master_at(&mut sim, ca);
        let standing = standing_read(&mut sim, c2, &res, &inh, &mut now);
        assert_eq!(
            standing.entries().len(),
            switches.len(),
            "every switch kept"
        );
        change(&mut sim, &switches);

        let mut sent = Vec::new();
        second.prepare_takeover_standing(now, inh.clone(), None, standing.entries().clone());
        until_quiet(&mut sim, c2, &mut second, &mut now, &mut sent);
        second.inherit(inh);
        second.become_master(now);
        send_queued(&mut sim, c2, &mut second, now, &mut sent);
        let (r, more) = sweep_recording(&mut sim, c2, &mut second, &mut now);
        sent.extend(more);
        let rep = second.last_inherit().cloned().expect("read back");
        let by_path: HashMap<Vec<u8>, u64> = res
            .topology
            .iter()
            .filter(|(_, n)| n.is_switch())
            .filter_map(|(i, n)| Some((res.path(i)?.to_vec(), n.node_guid)))
            .collect();
        let mut gets: HashMap<u64, usize> = HashMap::new();
        for smp in sent.iter().filter(|s| {
            s.attr_id == AttributeId::LINEAR_FORWARDING_TABLE && s.method == Method::GET
        }) {
            let SmpRoute::Directed(dr) = smp.route else {
                continue;
            };
            let path = dr.initial_path[1..=usize::from(dr.hop_cnt)].to_vec();
            *gets.entry(by_path[&path]).or_default() += 1;
        }
        (rep, gets, r.lft_blocks_sent, switches)
    }

    /// (a) An unchanged stamped fabric: one LFT Get per switch, every table the
    /// standing one, adopted, nothing written.
    #[test]
    fn a_standing_read_makes_the_takeover_read_block_0_only() {
        let (rep, gets, written, switches) = take_over_after(|_, _| {});
        assert!(rep.adopted, "{rep:?}");
        assert_eq!(rep.switches_standing, switches.len(), "{rep:?}");
        assert_eq!(rep.blocks_read, switches.len() as u64);
        assert_eq!(
            rep.blocks_trusted,
            switches.len() as u64,
            "one more block each"
        );
        assert!(gets.values().all(|n| *n == 1), "{gets:?}");
        assert_eq!(gets.len(), switches.len());
        assert_eq!(written, 0);
    }

    /// (b) A switch written after the standing read (a block changed and its stamp
    /// moved, the replica not yet told): read in full, the others not; its table
    /// no longer matches the replicated digest, so nothing is adopted.
    #[test]
    fn a_switch_whose_stamp_moved_is_read_in_full() {
        let mut moved = 0;
        let (rep, gets, _, switches) = take_over_after(|sim, sws| {
            let (sw, guid) = sws[3];
            moved = guid;
            let port = sim.lft_entry(sw, 70).expect("routes LID 70");
            assert!(sim.set_lft_entry(sw, 70, if port == 1 { 2 } else { 1 }));
            assert!(sim.set_lft_entry(sw, 0, STAMP + 2));
        });
        assert_eq!(gets[&moved], 2, "block 0, then block 1: {gets:?}");
        assert!(gets.iter().all(|(g, n)| *g == moved || *n == 1), "{gets:?}");
        assert_eq!(rep.switches_standing, switches.len() - 1, "{rep:?}");
        assert_eq!((rep.mismatched, rep.adopted), (1, false), "{rep:?}");
    }

    /// (c) A switch left InProgress (odd stamp) and one without a stamp (a reset):
    /// both read in full; their contents still match, so the fabric is adopted.
    #[test]
    fn an_open_or_missing_stamp_is_read_in_full() {
        let mut full = Vec::new();
        let (rep, gets, written, switches) = take_over_after(|sim, sws| {
            assert!(sim.set_lft_entry(sws[0].0, 0, STAMP + 1));
            assert!(sim.set_lft_entry(sws[5].0, 0, 0xFF));
            full = vec![sws[0].1, sws[5].1];
        });
        for g in &full {
            assert_eq!(gets[g], 2, "{gets:?}");
        }
        assert!(
            gets.iter().all(|(g, n)| full.contains(g) || *n == 1),
            "{gets:?}"
        );
        assert_eq!(rep.switches_standing, switches.len() - 2, "{rep:?}");
        assert!(rep.adopted, "{rep:?}");
        assert_eq!(written, 0);
    }
}
