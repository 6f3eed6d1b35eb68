//! A replicated standby's standing LFT read (`node::standing`): with it, a takeover
//! of an unchanged stamped fabric reads one LFT block per switch; without it (the
//! replica names another master, or a new epoch just began) it reads every block.

use std::time::Duration;

use ibsm_fabric::{gen, NodeIdx};
use ibsm_mad::{AttributeId, Method};

use super::takeover::replicated_pair_on;
use super::{Lab, ReplicatedFabric};
use crate::subnet::InheritReport;

/// The stamp the tests write into every switch, as a stamping master would have.
const STAMP: u8 = 20;

/// A replicated pair on a 2-level fat tree of radix 12 (90 LIDs: two LFT blocks per
/// switch), every switch stamped [`STAMP`], and the standby handed a replica whose
/// master is node 0 at epoch 1 and whose stamps are [`STAMP`]. Returns the lab and
/// the replica fed.
fn stamped_pair() -> (Lab, ReplicatedFabric) {
    let (mut lab, _) = replicated_pair_on(gen::fat_tree_2level(12).expect("radix 12"));
    let switches: Vec<(NodeIdx, u64)> = lab
        .topo
        .iter()
        .filter(|(_, n)| n.is_switch())
        .map(|(i, n)| (i, n.node_guid))
        .collect();
    let mut inherited = crate::subnet::inherit::tests::inherited(lab.subnet(0));
    for &(sw, guid) in &switches {
        assert!(lab.sim.set_lft_entry(sw, 0, STAMP));
        inherited.lft_stamps.insert(guid, STAMP);
    }
    let master = lab
        .topo
        .node(lab.sms[0].at)
        .and_then(|n| n.port(1))
        .map(|p| p.port_guid);
    let rep = ReplicatedFabric {
        epoch: 1,
        master_guid: master,
        inherited,
        ..ReplicatedFabric::default()
    };
    lab.replicate(1, rep.clone());
    lab.run_to(lab.now + Duration::from_secs(3));
    (lab, rep)
}

fn standing(lab: &Lab) -> usize {
    lab.sms[1].node.as_ref().map_or(0, |n| n.standing_lfts())
}

fn switches(lab: &Lab) -> usize {
    lab.topo.iter().filter(|(_, n)| n.is_switch()).count()
}

/// Kill the master, let the standby take over; (its read-back report, the LFT Gets
/// its configurator sent, the LFT blocks it wrote).
fn take_over(lab: &mut Lab) -> (InheritReport, usize, usize) {
    lab.record_sent = true;
    lab.kill(0);
    lab.run_to(lab.now + Duration::from_secs(1));
    assert_eq!(lab.masters(), vec![1]);
    let rep = lab
        .subnet(1)
        .last_inherit()
        .cloned()
        .expect("LFTs read back");
    let lft = |m: Method| {
        lab.sent
            .iter()
            .filter(|(i, s)| {
                // The configurator's TIDs (`SUBNET_TIDS`), not the standing read's.
                *i == 1
                    && s.attr_id == AttributeId::LINEAR_FORWARDING_TABLE
                    && s.method == m
                    && (s.tid & 0xFFFF_FFFF) < u64::from(crate::node::NODE_TIDS.base)
            })
            .count()
    };
    (rep, lft(Method::GET), lft(Method::SET))
}

/// (a) The standby holds every switch's table; after the kill its takeover sends
/// one LFT Get per switch, trusts the rest, adopts and writes no LFT block.
#[test]
fn a_standing_read_leaves_one_lft_get_per_switch_to_the_takeover() {
    let (mut lab, _) = stamped_pair();
    let n = switches(&lab);
    assert_eq!(standing(&lab), n, "every switch held");
    let (rep, gets, sets) = take_over(&mut lab);
    eprintln!("takeover read-back: {rep:?}");
    assert!(rep.adopted, "{rep:?}");
    assert_eq!(gets, n, "exactly one LFT Get per switch");
    assert_eq!((rep.switches_standing, rep.blocks_read), (n, n as u64));
    assert_eq!(
        rep.blocks_trusted, n as u64,
        "block 1 of each switch trusted"
    );
    assert_eq!(sets, 0);
}

/// (d) A replica that names another master, or a new epoch, drops the standing
/// read at once; a takeover without one reads every block, as before it existed.
#[test]
fn the_standing_read_is_dropped_when_the_replicas_master_or_epoch_changes() {
    let (mut lab, rep) = stamped_pair();
    let n = switches(&lab);
    assert_eq!(standing(&lab), n);
    lab.replicate(
        1,
        ReplicatedFabric {
            epoch: 2,
            ..rep.clone()
        },
    );
    assert_eq!(standing(&lab), 0, "a new epoch drops it");
    lab.run_to(lab.now + Duration::from_secs(2));
    assert_eq!(standing(&lab), n, "read again under the new epoch");
    lab.replicate(
        1,
        ReplicatedFabric {
            epoch: 3,
            master_guid: Some(0xdead),
            ..rep
        },
    );
    assert_eq!(standing(&lab), 0, "another master in the replica drops it");
    lab.run_to(lab.now + Duration::from_secs(2));
    assert_eq!(standing(&lab), 0, "and it is not read again");
    let (rep, gets, sets) = take_over(&mut lab);
    eprintln!("takeover read-back: {rep:?}");
    assert_eq!(rep.switches_standing, 0, "{rep:?}");
    assert_eq!(gets, 2 * n, "both blocks of every switch");
    assert!(rep.adopted, "{rep:?}");
    assert_eq!(sets, 0);
}
