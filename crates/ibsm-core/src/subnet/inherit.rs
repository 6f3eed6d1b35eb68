//! Taking over a running fabric from a previous master without touching it.
//!
//! A new master's own routing would differ from its predecessor's even on an
//! unchanged fabric (min-hop balances in discovery order, and discovery starts
//! from a different port), so recomputing and rewriting would move traffic for
//! nothing. Instead, in the first heavy sweep after [`super::SubnetManager::inherit`]:
//!
//! 1. after discovery and LIDs, every switch's LFT is **read back**
//!    (SubnGet(LinearForwardingTable), blocks `0..=LinearFDBTop/64`, many in flight);
//! 2. each table is compared with the digest the previous master replicated
//!    ([`lft_digest`] of entries `0..=LinearFDBTop`, the same FNV-1a 64 as
//!    `ibsm_replica::lft_digest`);
//! 3. if the cabling equals the replicated one, no LID moved, and every switch
//!    answered with the replicated digest, the tables read are **adopted as the
//!    routing** (nothing is computed, nothing is written);
//! 4. otherwise routing is computed as usual, but what was read back is what the
//!    switches are known to hold, so only the blocks that differ are rewritten.
//!
//! Chosen over seeding from the digests alone (a digest cannot say which block
//! differs, and trusting it would skip verifying the fabric) and over replicating
//! whole LFTs (megabytes per sweep on large fabrics, and still unverified). The
//! price is one SMP per 64 LIDs per switch: ~7k SMPs on a k=16 fat tree.
//!
//! # Prepared before MASTER
//!
//! Discovery plus read-back are ~20k SMPs on a k=16 fat tree (~10k when the
//! standby's known fabric is verified instead, see `super::verify`), ~0.2 s of what
//! ibsim answers, and the fabric (not the SMP window: 64 vs 256 made no
//! difference) bounds their rate. So the daemon starts them *before* MASTER, with
//! [`super::SubnetManager::prepare_takeover`], once its election has missed all
//! but one poll of the master (or went DISCOVERING): Gets only, no Raft claim,
//! and the sweep parks when the read-back is complete. `become_master` continues
//! it and compares the tables with the replicated digests *as they are at
//! MASTER* (a fresh [`super::SubnetManager::inherit`]), so "verified" still means
//! every LFT read from the fabric after the old master fell silent, and a
//! fabric walked then, matched against the replicated state. The daemon drops a
//! preparation when the master answers again, when anything may have changed the
//! fabric meanwhile (a trap, another MASTER, a sweep request), when the
//! replicated guid2lid moved, or when it is over 2 s old
//! ([`super::SubnetManager::abandon_prepared`]: the agent and its TIDs carry on,
//! answers to the dropped requests are discarded by generation).
//!
//! # Standing reads: one block per switch
//!
//! A replicated standby keeps a standing read of every switch's LFT while its master
//! is alive (`super::standing`, driven by the node while it follows the replica's
//! master), and hands it to the prepared takeover
//! ([`super::SubnetManager::prepare_takeover_standing`]). A switch whose standing
//! table was read at the stamp the replica says its digest was closed with
//! ([`Inherited::lft_stamps`]) and at the LinearFDBTop read now is queued with block 0
//! alone; if that block carries the same settled stamp its standing table is the
//! table read (counted in [`InheritReport::switches_standing`] and
//! [`InheritReport::blocks_trusted`]), else the rest of its blocks are queued. Why
//! "verified" still holds (`super::lft_stamp`): the standing table was read between
//! two block-0 reads with the same even stamp, so it is one settled state of the
//! switch; every write by a stamping master opens with an odd stamp and closes with
//! a different even one, and a reset switch has no stamp, so the same even stamp in
//! block 0 read after the master fell silent proves the switch still holds that
//! table. Requiring the replicated stamp excludes writes by a non-stamping master
//! (the replica clears the stamp of a digest written without one). The digest
//! comparison and the adopt rule are the same for both kinds of read.

use std::collections::{HashMap, HashSet, VecDeque};

use ibsm_fabric::{routing, Topology};

use crate::discovery::DiscoveryResult;

use super::lft_stamp::StandingLft;

/// A cable, `(node GUID, port, node GUID, port)` with the smaller end first.
pub type Link = (u64, u8, u64, u8);

/// What the previous master left, from the replicated state.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Inherited {
    /// Switch NodeGUID -> (LinearFDBTop, [`lft_digest`] of entries `0..=top`).
    pub lft_digests: HashMap<u64, (u16, u64)>,
    /// The cabling it last saw (`None`: unknown, so never adopt).
    pub links: Option<HashSet<Link>>,
    /// What it programmed into each port's P_Key, SLtoVL and VLArbitration
    /// tables, by (node GUID, port) (see the `port_digest` module; empty: a
    /// replica of a release without them, so every table is written).
    pub port_digests: HashMap<(u64, u8), PortDigest>,
    /// Switch NodeGUID -> the LFT stamp its replicated digest was closed with (see
    /// `super::lft_stamp`); absent: no earlier read of that switch may be trusted.
    pub lft_stamps: HashMap<u64, u8>,
}

/// What a master programmed into one port (see the `port_digest` module): `None` where it
/// wrote no such table.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct PortDigest {
    /// FNV-1a 64 of P_Key block 0 as written.
    pub p_key: Option<u64>,
    /// FNV-1a 64 of the SLtoVL table (when written to this port) and of every
    /// VLArbitration block written, in order.
    pub qos: Option<u64>,
}

/// What the seeding of a verified takeover found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SeedReport {
    /// Port tables (a P_Key block, or a port's QoS tables) taken as programmed.
    pub seeded: usize,
    /// Port tables whose desired digest differs from the replicated one, or that
    /// the replica does not know: written as usual.
    pub differ: usize,
}

/// What the read-back found (see [`super::SubnetManager::last_inherit`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InheritReport {
    /// Switches whose LFT was read.
    pub switches_read: usize,
    /// Read tables matching the replicated digest.
    pub verified: usize,
    /// Read tables that differ from it (or switches the replica did not know).
    pub mismatched: usize,
    /// Switches that did not answer every block (or whose LinearFDBTop differed).
    pub unread: usize,
    /// LFT blocks read.
    pub blocks_read: u64,
    /// Switches whose table is the standby's standing read, proved current by one
    /// block 0 carrying the stamp it was read at (see the module doc).
    pub switches_standing: usize,
    /// LFT blocks those switches were not read for (trusted from the standing read).
    pub blocks_trusted: u64,
    /// The cabling equals the replicated one.
    pub topology_unchanged: bool,
    /// The tables read were adopted as this sweep's routing.
    pub adopted: bool,
}

/// FNV-1a 64 of an LFT (`lft[lid]` = egress port), as `ibsm_replica::lft_digest`.
pub fn lft_digest(lft: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in lft {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The cables of a topology as [`Link`]s.
pub fn links_of(t: &Topology) -> HashSet<Link> {
    t.links()
        .filter_map(|((a, pa), (b, pb))| {
            let ga = t.node(a)?.node_guid;
            let gb = t.node(b)?.node_guid;
            Some(if (ga, pa) < (gb, pb) {
                (ga, pa, gb, pb)
            } else {
                (gb, pb, ga, pa)
            })
        })
        .collect()
}

/// The read-back in progress.
#[derive(Debug, Default)]
pub(super) struct Readback {
    /// (NodeIdx, block) still to request.
    pub queue: VecDeque<(u32, u16)>,
    pub outstanding: usize,
    /// NodeIdx -> (LinearFDBTop read, table so far).
    pub tables: HashMap<u32, (u16, Vec<u8>)>,
    /// Switches with a block that failed.
    pub failed: HashSet<u32>,
    pub blocks_read: u64,
    /// NodeIdx -> the LFT stamp its block 0 carried (see `super::lft_stamp`; the
    /// table keeps entry 0 unreachable).
    pub stamps: HashMap<u32, super::lft_stamp::Stamp>,
    /// NodeIdx -> the standing read queued with block 0 only: its table if block 0
    /// carries its stamp, else the other blocks are queued.
    pub standing: HashMap<u32, StandingLft>,
    /// Switches whose standing table was taken, and the blocks not read for them.
    pub switches_standing: usize,
    pub blocks_trusted: u64,
}

impl Readback {
    /// Store block `block` of switch `node` (block 0's stamp apart).
    pub fn store(&mut self, node: u32, block: u16, ports: &[u8; 64]) {
        let clean;
        let ports = if block == 0 {
            let (stamp, c) = super::lft_stamp::split_block0(ports);
            self.stamps.insert(node, stamp);
            self.settle_standing(node, stamp);
            clean = c;
            &clean
        } else {
            ports
        };
        self.blocks_read += 1;
        if let Some((_, t)) = self.tables.get_mut(&node) {
            copy_block(t, block, ports);
        }
    }
}

/// Put LFT block `block` (64 entries) into `table` (entries `0..=top`; what lies
/// beyond the table's end is dropped).
pub(super) fn copy_block(table: &mut [u8], block: u16, ports: &[u8; 64]) {
    let first = usize::from(block) * 64;
    let end = (first + 64).min(table.len());
    if let (Some(dst), Some(src)) = (
        table.get_mut(first..end),
        ports.get(..end.saturating_sub(first)),
    ) {
        dst.copy_from_slice(src);
    }
}

impl Readback {
    /// Block 0 of `node` carried `stamp`: if `node` was queued on the strength of a
    /// standing read, take its table when the stamp is the one it was read at, else
    /// queue the rest of its blocks (a full read).
    fn settle_standing(&mut self, node: u32, stamp: super::lft_stamp::Stamp) {
        let Some(e) = self.standing.remove(&node) else {
            return;
        };
        let Some((top, t)) = self.tables.get_mut(&node) else {
            return;
        };
        if stamp == super::lft_stamp::Stamp::Settled(e.stamp) && t.len() == e.table.len() {
            t.copy_from_slice(&e.table);
            self.switches_standing += 1;
            self.blocks_trusted += u64::from(*top / 64);
        } else {
            tracing::debug!(
                node,
                ?stamp,
                standing = e.stamp,
                "standing LFT moved: read in full"
            );
            let last = *top / 64;
            self.queue.extend((1..=last).map(|b| (node, b)));
        }
    }
}

/// The read-back plan: every block `0..=LinearFDBTop/64` of every switch, but only
/// block 0 of a switch whose `standing` read carries the stamp the replica says its
/// digest was closed with (`inh`'s `lft_stamps`) and the LinearFDBTop of `res`.
pub(super) fn start_readback(
    res: &DiscoveryResult,
    inh: Option<&Inherited>,
    standing: &HashMap<u64, StandingLft>,
) -> Readback {
    let mut rb = Readback::default();
    for (idx, node) in res.topology.iter() {
        if !node.is_switch() {
            continue;
        }
        let (Ok(n32), Some(Some(si))) = (
            u32::try_from(idx.as_usize()),
            res.switch_info.get(idx.as_usize()),
        ) else {
            continue;
        };
        let top = si.linear_fdb_top;
        if top == 0 {
            continue; // never programmed
        }
        rb.tables
            .insert(n32, (top, vec![routing::UNREACHABLE; usize::from(top) + 1]));
        let replicated = inh.and_then(|i| i.lft_stamps.get(&node.node_guid));
        match standing.get(&node.node_guid) {
            Some(e) if e.top == top && replicated == Some(&e.stamp) => {
                rb.standing.insert(n32, e.clone());
                rb.queue.push_back((n32, 0));
            }
            _ => rb.queue.extend((0..=top / 64).map(|b| (n32, b))),
        }
    }
    rb
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::subnet::{SubnetConfig, SubnetEvent, SubnetManager, SweepReport};
    use ibsm_fabric::{gen, NodeIdx};
    use ibsm_mad::{AttributeId, Method, Smp};
    use ibsm_sim::{ClientId, Sim, SimConfig};
    use std::time::Duration;

    /// Drive `sm` on `sim` until the next heavy sweep completes.
    pub(in crate::subnet) fn sweep(
        sim: &mut Sim,
        client: ClientId,
        sm: &mut SubnetManager,
        now: &mut Duration,
    ) -> SweepReport {
        sweep_recording(sim, client, sm, now).0
    }

    /// [`sweep`], also recording every SMP `sm` sent during it.
    pub(in crate::subnet) fn sweep_recording(
        sim: &mut Sim,
        client: ClientId,
        sm: &mut SubnetManager,
        now: &mut Duration,
    ) -> (SweepReport, Vec<Smp>) {
        let mut sent = Vec::new();
        for _ in 0..1_000_000 {
            let before = sent.len();
            send_queued(sim, client, sm, *now, &mut sent);
            let mut busy = sent.len() > before;
            while let Some((c, mad)) = sim.poll_delivery(*now) {
                busy = true;
                if c == client {
                    sm.handle_incoming(*now, &mad);
                }
            }
            while let Some(ev) = sm.poll_event() {
                if let SubnetEvent::SweepDone {
                    kind: crate::subnet::SweepKind::Heavy,
                    report,
                    ..
                } = ev
                {
                    return (report, sent);
                }
            }
            if !busy {
                let next = [sm.poll_timeout(), sim.poll_timeout()]
                    .into_iter()
                    .flatten()
                    .min()
                    .expect("something pending");
                *now = next.max(*now);
                sm.handle_timeout(*now);
            }
        }
        panic!("no heavy sweep completed");
    }

    pub(in crate::subnet) fn master_at(sim: &mut Sim, node: NodeIdx) -> (ClientId, SubnetManager) {
        let client = sim.attach(node, 1).expect("attach");
        sim.set_is_sm(client, true).expect("IsSM");
        let sm = SubnetManager::new(SubnetConfig::default()).expect("config");
        (client, sm)
    }

    pub(crate) fn inherited(sm: &SubnetManager) -> Inherited {
        Inherited {
            lft_digests: sm
                .programmed_lfts()
                .map(|(g, top, t)| (g, (top, lft_digest(t))))
                .collect(),
            links: sm.last_discovery().map(|r| links_of(&r.topology)),
            port_digests: sm.programmed_port_digests().into_iter().collect(),
            lft_stamps: sm.programmed_lft_stamps().collect(),
        }
    }

    /// A second master on another port, handed the first one's digests and cabling,
    /// reads every LFT back, adopts them and writes none; its next sweep writes none
    /// either. With one digest wrong it verifies the others, recomputes, and rewrites
    /// only the blocks that differ from what the switches hold.
    #[test]
    fn a_new_master_adopts_verified_lfts_and_writes_nothing() {
        let topo = gen::fat_tree_3level(4).expect("k=4");
        let cas: Vec<NodeIdx> = topo
            .iter()
            .filter(|(_, n)| !n.is_switch())
            .map(|(i, _)| i)
            .collect();
        let mut sim = Sim::new(&topo, SimConfig::default());
        let mut now = Duration::ZERO;
        let (c1, mut first) = master_at(&mut sim, cas[0]);
        first.become_master(now);
        let r1 = sweep(&mut sim, c1, &mut first, &mut now);
        assert!(r1.lft_blocks_sent > 0, "{r1:?}");
        let inh = inherited(&first);
        assert_eq!(inh.lft_digests.len(), 20);
        first.stop();
        sim.detach(c1).expect("detach");

        // The successor on the last CA: discovery order differs, routing would too.
        let (c2, mut second) = master_at(&mut sim, cas[cas.len() - 1]);
        second.inherit(inh.clone());
        second.become_master(now);
        let r2 = sweep(&mut sim, c2, &mut second, &mut now);
        let rep = second.last_inherit().cloned().expect("read back");
        assert!(rep.adopted, "{rep:?}");
        assert_eq!((rep.verified, rep.mismatched, rep.unread), (20, 0, 0));
        assert_eq!(
            r2.lft_blocks_sent, 0,
            "an adopting master writes no LFT block"
        );
        assert_eq!(inherited(&second).lft_digests, inh.lft_digests);
        second.start_heavy_sweep(now);
        let r3 = sweep(&mut sim, c2, &mut second, &mut now);
        assert_eq!(r3.lft_blocks_sent, 0, "a stable fabric keeps its routes");
        second.stop();
        sim.detach(c2).expect("detach");

        // One wrong digest: no adoption; routing recomputed from another discovery
        // order, but only blocks that differ from the switches' go out.
        let mut bad = inh.clone();
        if let Some(d) = bad.lft_digests.values_mut().next() {
            d.1 ^= 1;
        }
        let (c3, mut third) = master_at(&mut sim, cas[cas.len() / 2]);
        third.inherit(bad);
        third.become_master(now);
        let r4 = sweep(&mut sim, c3, &mut third, &mut now);
        let rep = third.last_inherit().cloned().expect("read back");
        assert!(!rep.adopted);
        assert_eq!((rep.verified, rep.mismatched), (19, 1), "{rep:?}");
        assert!(
            r4.lft_blocks_sent < r1.lft_blocks_sent,
            "only differing blocks: {} of {}",
            r4.lft_blocks_sent,
            r1.lft_blocks_sent
        );
    }

    /// Send what `sm` has queued into `sim` (recording every SMP), without
    /// delivering anything back.
    pub(in crate::subnet) fn send_queued(
        sim: &mut Sim,
        client: ClientId,
        sm: &mut SubnetManager,
        now: Duration,
        sent: &mut Vec<Smp>,
    ) {
        while let Some(o) = sm.poll_transmit() {
            if let Ok(smp) = Smp::decode(&o.mad) {
                sent.push(smp);
            }
            let r = match o.dlid {
                None => sim.send(now, client, &o.mad),
                Some(l) => sim.send_to(now, client, l, &o.mad),
            };
            r.expect("well-formed MAD");
        }
    }

    /// Drive `sm` until nothing is on the wire and it asks for no timeout (a
    /// prepared takeover waiting for MASTER), recording every SMP it sends.
    pub(in crate::subnet) fn until_quiet(
        sim: &mut Sim,
        client: ClientId,
        sm: &mut SubnetManager,
        now: &mut Duration,
        sent: &mut Vec<Smp>,
    ) {
        for _ in 0..1_000_000 {
            let before = sent.len();
            send_queued(sim, client, sm, *now, sent);
            let mut busy = sent.len() > before;
            while let Some((c, mad)) = sim.poll_delivery(*now) {
                busy = true;
                if c == client {
                    sm.handle_incoming(*now, &mad);
                }
            }
            if !busy {
                let Some(next) = [sm.poll_timeout(), sim.poll_timeout()]
                    .into_iter()
                    .flatten()
                    .min()
                else {
                    return;
                };
                *now = next.max(*now);
                sm.handle_timeout(*now);
            }
        }
        panic!("never quiet");
    }

    /// A standby about to take over prepares: discovery and every LFT read with
    /// Gets only, and nothing compared until MASTER; `become_master` then adopts
    /// without walking the fabric again or writing an LFT block. An abandoned
    /// preparation's answers still in flight are dropped, not fed to the next
    /// sweep, and a stopped one leaves the SM idle.
    #[test]
    fn a_prepared_takeover_reads_only_and_continues_at_master() {
        let topo = gen::fat_tree_3level(4).expect("k=4");
        let cas: Vec<NodeIdx> = topo
            .iter()
            .filter(|(_, n)| !n.is_switch())
            .map(|(i, _)| i)
            .collect();
        let mut sim = Sim::new(&topo, SimConfig::default());
        let mut now = Duration::ZERO;
        let (c1, mut first) = master_at(&mut sim, cas[0]);
        first.become_master(now);
        sweep(&mut sim, c1, &mut first, &mut now);
        let inh = inherited(&first);
        first.stop();
        sim.detach(c1).expect("detach");

        let (c2, mut second) = master_at(&mut sim, cas[cas.len() - 1]);
        second.prepare_takeover(now, inh.clone());
        assert!(second.is_preparing() && !second.is_active());
        let mut sent = Vec::new();
        until_quiet(&mut sim, c2, &mut second, &mut now, &mut sent);
        assert!(
            sent.iter().all(|s| s.method == Method::GET),
            "a preparation writes nothing"
        );
        let lft_gets = sent
            .iter()
            .filter(|s| s.attr_id == AttributeId::LINEAR_FORWARDING_TABLE)
            .count();
        assert!(lft_gets >= 20, "every switch's LFT read: {lft_gets}");
        assert!(
            second.last_inherit().is_none(),
            "nothing compared before MASTER"
        );
        assert!(second.is_preparing(), "still waiting for MASTER");
        second.inherit(inh.clone());
        second.become_master(now);
        let mut at_master = Vec::new();
        send_queued(&mut sim, c2, &mut second, now, &mut at_master);
        let r = sweep(&mut sim, c2, &mut second, &mut now);
        let rep = second.last_inherit().cloned().expect("compared at MASTER");
        assert!(rep.adopted, "{rep:?}");
        assert_eq!((rep.verified, rep.mismatched, rep.unread), (20, 0, 0));
        assert_eq!(r.lft_blocks_sent, 0);
        assert!(
            !at_master
                .iter()
                .any(|s| s.attr_id == AttributeId::NODE_INFO),
            "MASTER does not walk the fabric again"
        );
        second.stop();
        sim.detach(c2).expect("detach");

        // Abandoned with its first requests still unanswered: those answers arrive
        // during the next sweep and must not be taken for its own.
        let (c3, mut third) = master_at(&mut sim, cas[cas.len() / 2]);
        third.prepare_takeover(now, inh.clone());
        let mut sent = Vec::new();
        send_queued(&mut sim, c3, &mut third, now, &mut sent);
        assert!(!sent.is_empty());
        third.abandon_prepared();
        assert!(!third.is_preparing());
        third.inherit(inh.clone());
        third.become_master(now);
        sweep(&mut sim, c3, &mut third, &mut now);
        let rep = third.last_inherit().cloned().expect("read back");
        assert!(rep.adopted, "{rep:?}");
        assert_eq!((rep.verified, rep.mismatched, rep.unread), (20, 0, 0));
        third.stop();
        sim.detach(c3).expect("detach");

        // Stopped (another SM won): idle, nothing more goes out.
        let (c4, mut fourth) = master_at(&mut sim, cas[1]);
        fourth.prepare_takeover(now, inh);
        fourth.stop();
        assert!(!fourth.is_preparing() && !fourth.is_sweeping());
        assert!(fourth.poll_transmit().is_none() && fourth.poll_timeout().is_none());
        sim.detach(c4).expect("detach");
    }

    #[test]
    fn digest_is_fnv1a_64() {
        // FNV-1a 64 reference values.
        assert_eq!(lft_digest(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(lft_digest(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_ne!(lft_digest(&[1, 2]), lft_digest(&[2, 1]));
    }

    #[test]
    fn store_fills_the_block_and_clips_at_top() {
        let mut r = Readback::default();
        r.tables.insert(3, (69, vec![0xFF; 70]));
        let mut ports = [7u8; 64];
        ports[0] = 1;
        r.store(3, 1, &ports);
        let t = &r.tables[&3].1;
        assert_eq!(t[63], 0xFF);
        assert_eq!(t[64], 1);
        assert_eq!(t[69], 7);
        assert_eq!(t.len(), 70);
        r.store(3, 9, &ports); // beyond the table: ignored
        r.store(4, 0, &ports); // unknown switch: ignored
        assert_eq!(r.blocks_read, 3);
    }
}
