//! How the master writes the SA's multicast groups to the switches: a burst of joins
//! and leaves within the hold-off (`subnet::mcast::MCAST_HOLDOFF`) is one tree per
//! group and one MulticastForwardingTable write per block that ends up changed, and a
//! group created and deleted within it is never written at all.

use std::time::Duration;

use ibsm_fabric::gen;
use ibsm_mad::sa::{JoinState, McMemberRecord, SaMad, SaStatus};
use ibsm_mad::{MadAddress, Method};

use super::sa::{ask, end_lids, join_mask, port_gid_of};
use super::Lab;

/// The (switch, block, position) writes it takes to program `mlid`'s entries on
/// switches that held none of our groups: one per position of each block holding it.
fn blocks_of(lab: &Lab, mlid: u16) -> u64 {
    let subnet = lab.sms[0].node.as_ref().unwrap().subnet().unwrap();
    subnet
        .desired_mfts()
        .switches()
        .filter(|(_, s)| !s.entry(mlid).is_empty())
        .map(|(_, s)| u64::from(s.positions()))
        .sum()
}

fn mft_writes(lab: &Lab) -> u64 {
    lab.sms[0]
        .node
        .as_ref()
        .unwrap()
        .subnet()
        .unwrap()
        .mft_writes()
        .0
}

fn join(lab: &mut Lab, lid: u16, mgid: [u8; 16], method: Method, tid: u64) -> McMemberRecord {
    let rec = McMemberRecord {
        mgid,
        port_gid: port_gid_of(lab, lid),
        join_state: JoinState::FULL_MEMBER,
        ..McMemberRecord::default()
    };
    let req = SaMad::query(method, tid, &rec, join_mask()).unwrap();
    let got = ask(lab, 0, &req, MadAddress::gsi(lid));
    assert_eq!(
        got[0].status(),
        SaStatus::SUCCESS,
        "{method:?} of LID {lid}"
    );
    got[0].record().unwrap()
}

#[test]
fn a_burst_of_joins_writes_each_changed_block_once() {
    let topo = gen::fat_tree_2level(4).expect("topology");
    let mut lab = Lab::new(topo, &[10]);
    lab.run_to(Duration::from_secs(4));
    let lids = end_lids(&lab);
    assert!(lids.len() >= 4, "CAs sharing leaves: {lids:?}");
    let bcast = crate::sa::ipoib_broadcast_mgid(0xFFFF, 2);
    let before = mft_writes(&lab);

    // Every CA joins the broadcast group, all at the same instant: several members per
    // leaf, so a write per join would rewrite the same leaf blocks again and again.
    for (i, &lid) in lids.iter().enumerate() {
        join(&mut lab, lid, bcast, Method::SET, 100 + i as u64);
    }
    assert_eq!(
        mft_writes(&lab),
        before,
        "nothing is written before the hold-off ends"
    );
    lab.run_to(lab.now + Duration::from_millis(200));
    let holders = blocks_of(&lab, 0xC000);
    assert!(holders >= 3, "the tree spans leaves and a spine: {holders}");
    assert_eq!(
        mft_writes(&lab) - before,
        holders,
        "one write per block of the final tree, not one per join"
    );

    // A group created and left again within the hold-off: nothing on the wire.
    let before = mft_writes(&lab);
    let create = McMemberRecord {
        port_gid: port_gid_of(&mut lab, lids[0]),
        join_state: JoinState::FULL_MEMBER,
        q_key: 0x1234,
        p_key: 0xFFFF,
        ..McMemberRecord::default()
    };
    let mask = join_mask()
        | McMemberRecord::Q_KEY
        | McMemberRecord::TCLASS
        | McMemberRecord::P_KEY
        | McMemberRecord::FLOW_LABEL
        | McMemberRecord::SL;
    let req = SaMad::query(Method::SET, 200, &create, mask).unwrap();
    let got = ask(&mut lab, 0, &req, MadAddress::gsi(lids[0]));
    assert_eq!(got[0].status(), SaStatus::SUCCESS);
    let created: McMemberRecord = got[0].record().unwrap();
    join(&mut lab, lids[0], created.mgid, Method::DELETE, 201);
    lab.run_to(lab.now + Duration::from_millis(200));
    assert_eq!(
        mft_writes(&lab),
        before,
        "a group that came and went within the hold-off costs no write"
    );
    assert_eq!(blocks_of(&lab, created.mlid), 0);

    // One member leaves: only the blocks whose entries change are written.
    let before = mft_writes(&lab);
    join(&mut lab, lids[0], bcast, Method::DELETE, 300);
    lab.run_to(lab.now + Duration::from_millis(200));
    let wrote = mft_writes(&lab) - before;
    assert!(
        wrote >= 1 && wrote < holders,
        "a leave rewrites its member's leaf, not the whole tree: {wrote} of {holders}"
    );
}

#[test]
fn every_join_and_leave_of_a_storm_is_on_the_event_stream() {
    // More changes than the info log takes per window (`SA_ACTIVITY_LOG_LINES`): the
    // log is sampled, the `Watch` stream is not.
    let topo = gen::fat_tree_2level(4).expect("topology");
    let mut lab = Lab::new(topo, &[10]);
    lab.run_to(Duration::from_secs(4));
    let lid = end_lids(&lab)[0];
    let port_gid = port_gid_of(&mut lab, lid);
    let groups = u64::from(crate::node::SA_ACTIVITY_LOG_LINES) + 5;
    let seen = |lab: &Lab, what: &str| {
        lab.sms[0]
            .log
            .iter()
            .filter(|l| l.contains(what) && l.contains("multicast group"))
            .count() as u64
    };
    let (joined, left) = (seen(&lab, " joined "), seen(&lab, " left "));
    for i in 0..groups {
        let create = McMemberRecord {
            port_gid,
            join_state: JoinState::FULL_MEMBER,
            q_key: 0x1234,
            p_key: 0xFFFF,
            ..McMemberRecord::default()
        };
        let mask = join_mask()
            | McMemberRecord::Q_KEY
            | McMemberRecord::TCLASS
            | McMemberRecord::P_KEY
            | McMemberRecord::FLOW_LABEL
            | McMemberRecord::SL;
        let req = SaMad::query(Method::SET, 1000 + 2 * i, &create, mask).unwrap();
        let got = ask(&mut lab, 0, &req, MadAddress::gsi(lid));
        assert_eq!(got[0].status(), SaStatus::SUCCESS, "create {i}");
        let created: McMemberRecord = got[0].record().unwrap();
        join(&mut lab, lid, created.mgid, Method::DELETE, 1001 + 2 * i);
    }
    assert_eq!(
        seen(&lab, " joined ") - joined,
        groups,
        "{:#?}",
        lab.sms[0].log
    );
    assert_eq!(seen(&lab, " left ") - left, groups, "{:#?}", lab.sms[0].log);
}
