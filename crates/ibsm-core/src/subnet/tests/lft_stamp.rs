//! The master writes every switch's LFT in the stamp order of `lft_stamp` (see
//! `lft_write`): read from the wire (every SMP sent and answered, in order) and
//! from the simulated switches, over the generated topology.

use std::cell::RefCell;
use std::rc::Rc;

use super::*;
use crate::subnet::lft_stamp::Stamp;

/// One SubnSet(LinearForwardingTable) the SM sent.
#[derive(Debug, Clone, Copy)]
struct LftSet {
    /// Position in the trace when it went out, and when its answer came (None: lost).
    sent: usize,
    answered: Option<usize>,
    node: NodeIdx,
    block: u32,
    /// LID 0's entry as sent (block 0: the stamp).
    lid0: u8,
}

/// The LFT Sets of the trace, in the order they went out.
fn lft_sets(lab: &Lab) -> Vec<LftSet> {
    let mut answered_at: HashMap<u64, usize> = HashMap::new();
    for (i, t) in lab.wire.traced.iter().enumerate() {
        if let Traced::Answered(tid) = t {
            answered_at.insert(*tid, i);
        }
    }
    let mut out = Vec::new();
    for (i, t) in lab.wire.traced.iter().enumerate() {
        let Traced::Sent(smp) = t else { continue };
        if smp.method != Method::SET || smp.attr_id != AttributeId::LINEAR_FORWARDING_TABLE {
            continue;
        }
        let (node, _) = target_of(&lab.topo, lab.local, smp);
        let lft = smp.attribute::<LinearForwardingTable>().unwrap();
        out.push(LftSet {
            sent: i,
            answered: answered_at.get(&smp.tid).copied(),
            node,
            block: smp.attr_mod,
            lid0: lft.ports[0],
        });
    }
    out
}

fn by_switch(sets: &[LftSet]) -> HashMap<NodeIdx, Vec<LftSet>> {
    let mut out: HashMap<NodeIdx, Vec<LftSet>> = HashMap::new();
    for s in sets {
        out.entry(s.node).or_default().push(*s);
    }
    out
}

fn switches(topo: &Topology) -> Vec<NodeIdx> {
    topo.iter()
        .filter(|(_, n)| n.is_switch())
        .map(|(i, _)| i)
        .collect()
}

/// A trap 128 from the switch at `issuer` and the heavy sweep it starts.
fn repair(lab: &mut Lab, issuer: u16, tid: u64) -> SweepReport {
    lab.link_trap(issuer, tid);
    lab.heavy().1
}

/// A fresh fabric's switches hold no stamp: each gets its blocks other than 0,
/// then block 0 (content and an even stamp) only after all of them answered; and
/// the rounds of different switches overlap (no barrier across switches).
#[test]
fn bring_up_writes_block_0_last_with_an_even_stamp() {
    let topo = gen::fat_tree_3level(4).unwrap();
    // LMC 2: more LIDs than one LFT block holds, so every switch has blocks 0 and 1.
    let mut lab = Lab::new(topo.clone(), SubnetConfig { lmc: 2, ..cfg() });
    lab.wire.trace = true;
    let (_, report) = lab.bring_up();
    assert_eq!(report.failures, 0);
    assert_eq!(
        report.lft_stamp_sets, 0,
        "block 0's content rides on the close"
    );
    let sets = by_switch(&lft_sets(&lab));
    let pmap = paths(&topo, lab.local, &HashSet::new());
    let mut rounds = Vec::new();
    for sw in switches(&topo) {
        let mine = &sets[&sw];
        assert!(mine.len() >= 2, "{sw:?}: {mine:?}");
        let close = mine.last().unwrap();
        assert_eq!(close.block, 0, "{sw:?}: block 0 is written last");
        assert_eq!(
            mine.iter().filter(|s| s.block == 0).count(),
            1,
            "{sw:?}: no stamp yet, so no open"
        );
        assert!(matches!(Stamp::of(close.lid0), Stamp::Settled(_)));
        for s in &mine[..mine.len() - 1] {
            let answered = s.answered.expect("every block answered");
            assert!(answered < close.sent, "{sw:?}: block {} {s:?}", s.block);
        }
        // The switch holds the stamp in LID 0's entry, read back by SubnGet.
        assert_eq!(lab.sim.lft_entry(sw, 0), Some(close.lid0));
        let blk = lab
            .get(&pmap[&sw], AttributeId::LINEAR_FORWARDING_TABLE, 0)
            .unwrap()
            .attribute::<LinearForwardingTable>()
            .unwrap();
        assert_eq!(blk.ports[0], close.lid0);
        assert!(close.lid0 < 254 && close.lid0.is_multiple_of(2));
        rounds.push((mine[0].sent, close.sent));
    }
    let overlapping = rounds
        .iter()
        .enumerate()
        .any(|(i, a)| rounds[i + 1..].iter().any(|b| a.0 < b.1 && b.0 < a.1));
    assert!(overlapping, "switch rounds overlap: {rounds:?}");
    check_walks(
        &topo,
        &read_back(&mut lab, 2, &HashSet::new(), &HashSet::new()),
        &HashSet::new(),
    );
}

/// A fabric brought up, one uplink of edge-3-0 pulled, read back, and the edge
/// switch's LID (the trap's issuer).
fn pulled(topo: &Topology) -> (Lab, ReadBack, HashSet<(NodeIdx, u8)>, u16) {
    let mut lab = Lab::new(
        topo.clone(),
        SubnetConfig {
            sweep_interval: Duration::from_secs(3600),
            ..cfg()
        },
    );
    lab.bring_up();
    let before = read_back(&mut lab, 0, &HashSet::new(), &HashSet::new());
    let edge = topo.find_by_name("edge-3-0").unwrap();
    let (agg, agg_port) = topo.neighbor(edge, 5).unwrap();
    lab.sim.link_down(edge, 5).unwrap();
    let dead = HashSet::from([(edge, 5), (agg, agg_port)]);
    let lid = before.lids[&(edge, 0)].0;
    (lab, before, dead, lid)
}

/// A switch settled at `s` whose blocks change: block 0 with `s + 1` first, the
/// blocks only after its answer, block 0 with `s + 2` only after all of theirs;
/// a switch with no change gets no LFT Set and keeps its stamp.
#[test]
fn a_repair_opens_writes_and_closes_each_changed_switch() {
    let topo = gen::fat_tree_3level(8).unwrap();
    let (mut lab, before, dead, issuer) = pulled(&topo);
    lab.wire.trace = true;
    let report = repair(&mut lab, issuer, 0x128);
    assert_eq!((report.failures, report.lft_opens_failed), (0, 0));
    let after = read_back(&mut lab, 0, &HashSet::new(), &dead);
    check_walks(&topo, &after, &dead);
    let sets = by_switch(&lft_sets(&lab));
    let mut with_blocks = 0;
    for sw in switches(&topo) {
        let s0 = before.stamps[&sw];
        assert!(
            s0 < 254 && s0.is_multiple_of(2),
            "{sw:?} settled after bring-up: {s0}"
        );
        let Some(mine) = sets.get(&sw) else {
            assert_eq!(
                after.lfts[&sw], before.lfts[&sw],
                "{sw:?}: no Set, no change"
            );
            assert_eq!(after.stamps[&sw], s0, "{sw:?}: untouched, same stamp");
            continue;
        };
        assert_ne!(
            after.lfts[&sw], before.lfts[&sw],
            "{sw:?}: Sets without change"
        );
        assert_eq!(
            after.stamps[&sw],
            (s0 + 2) % 254,
            "{sw:?}: the stamp moved by 2"
        );
        if let [only] = mine[..] {
            // Block 0 alone changed: one Set, the close (one SMP is atomic).
            assert_eq!((only.block, only.lid0), (0, (s0 + 2) % 254), "{sw:?}");
            assert_eq!(after.lfts[&sw][64..], before.lfts[&sw][64..], "{sw:?}");
            continue;
        }
        let (open, close) = (mine[0], *mine.last().unwrap());
        assert_eq!((open.block, open.lid0), (0, (s0 + 1) % 254), "{sw:?} opens");
        assert_eq!(
            (close.block, close.lid0),
            (0, (s0 + 2) % 254),
            "{sw:?} closes"
        );
        let blocks = &mine[1..mine.len() - 1];
        assert!(!blocks.is_empty(), "{sw:?}: {mine:?}");
        with_blocks += 1;
        for b in blocks {
            assert_ne!(b.block, 0, "{sw:?}: {mine:?}");
            assert!(
                b.sent > open.answered.unwrap(),
                "{sw:?}: block before the open's answer"
            );
            assert!(
                b.answered.unwrap() < close.sent,
                "{sw:?}: close before a block's answer"
            );
        }
    }
    assert!(with_blocks > 0);
    assert_eq!(
        report.lft_stamp_sets + report.lft_blocks_sent,
        sets.values().map(|v| v.len() as u64).sum::<u64>()
    );
}

/// An open that gets no answer (the switch is then skipped for the sweep) or is
/// rejected (the switch answers, its other Sets go on): none of that switch's other
/// blocks (nor its close) go out in that sweep, the other switches complete
/// theirs, and the next sweep writes the switch's table in a full round.
#[test]
fn a_failed_open_holds_the_switch_back_until_the_next_sweep() {
    // Status 0x001C: an invalid attribute modifier or value.
    for mishap in [Mishap::Lost, Mishap::Rejected(0x001C)] {
        failed_open(mishap);
    }
}

fn failed_open(mishap: Mishap) {
    let topo = gen::fat_tree_3level(8).unwrap();
    let (mut lab, before, dead, issuer) = pulled(&topo);
    // The first open that goes out, and every retry of it.
    let victim: Rc<RefCell<Option<Vec<u8>>>> = Rc::default();
    let v = victim.clone();
    lab.mishap = Some(Box::new(move |smp: &Smp| {
        let SmpRoute::Directed(dr) = &smp.route else {
            return None;
        };
        let path = dr.initial_path[1..=usize::from(dr.hop_cnt)].to_vec();
        let is_open = smp.method == Method::SET
            && smp.attr_id == AttributeId::LINEAR_FORWARDING_TABLE
            && smp.attr_mod == 0
            && smp
                .attribute::<LinearForwardingTable>()
                .is_ok_and(|t| !t.ports[0].is_multiple_of(2));
        let mut v = v.borrow_mut();
        let hit = match v.as_ref() {
            None if is_open => {
                *v = Some(path);
                true
            }
            Some(p) => is_open && *p == path,
            None => false,
        };
        hit.then_some(mishap)
    }));
    lab.wire.trace = true;
    let report = repair(&mut lab, issuer, 0x128);
    assert_eq!(report.lft_opens_failed, 1, "{mishap:?}");
    let dead_nodes = usize::from(mishap == Mishap::Lost);
    assert_eq!(report.dead_nodes, dead_nodes, "{mishap:?}");
    let sets = lft_sets(&lab);
    let open = sets
        .iter()
        .find(|s| s.block == 0 && !s.lid0.is_multiple_of(2))
        .copied()
        .unwrap();
    let mine: Vec<_> = sets.iter().filter(|s| s.node == open.node).collect();
    assert!(
        mine.iter().all(|s| s.block == 0 && s.lid0 == open.lid0),
        "{mishap:?}: only the open (and its retries) went to the switch: {mine:?}"
    );
    assert_eq!(
        lab.sim.lft_entry(open.node, 0),
        Some(before.stamps[&open.node])
    );
    // Every other switch's round completed.
    let done = by_switch(&sets);
    assert!(done.len() > 1);
    for (sw, s) in done.iter().filter(|(sw, _)| **sw != open.node) {
        let close = s.last().unwrap();
        assert_eq!(close.block, 0);
        assert_eq!(lab.sim.lft_entry(*sw, 0), Some(close.lid0), "{sw:?}");
    }

    // The next sweep (no mishap) writes the held-back switch in a full round.
    lab.mishap = None;
    lab.wire.traced.clear();
    let report = repair(&mut lab, issuer, 0x129);
    assert_eq!((report.failures, report.lft_opens_failed), (0, 0));
    let s0 = before.stamps[&open.node];
    let again = by_switch(&lft_sets(&lab));
    let mine = &again[&open.node];
    assert_eq!(mine[0].lid0, (s0 + 1) % 254, "{mine:?}");
    assert!(mine[1..mine.len() - 1].iter().all(|s| s.block != 0));
    assert!(mine.len() > 2, "{mine:?}");
    let after = read_back(&mut lab, 0, &HashSet::new(), &dead);
    check_walks(&topo, &after, &dead);
    assert_eq!(after.stamps[&open.node], (s0 + 2) % 254);
}
