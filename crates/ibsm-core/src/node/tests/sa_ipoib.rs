//! Partitions with the `ipoib` option, end to end in virtual time: the master's SA
//! answers MCMemberRecord queries for the partition's IPoIB broadcast group with the
//! partition's parameters (only to ports of the partition), members join it and the
//! switches get its MFT; a partition with `ipoib` set at run time gets its group, and
//! loses it when it is deleted.

use std::time::Duration;

use ibsm_fabric::gen;
use ibsm_mad::sa::{JoinState, McMemberRecord, SaMad, SaStatus};
use ibsm_mad::{MadAddress, Method};

use super::sa::{ask, end_lids, get_table, join_mask, port_gid_of};
use super::Lab;
use crate::node::*;
use crate::sa::ipoib_broadcast_mgid;
use crate::subnet::{Membership, Partition, PartitionIpoib, PartitionMember};

fn ca_guids(lab: &Lab) -> Vec<u64> {
    lab.topo
        .iter()
        .filter(|(_, n)| !n.is_switch())
        .map(|(_, n)| n.ports[1].port_guid)
        .collect()
}

fn partition(p_key: u16, members: &[u64], ipoib: PartitionIpoib) -> Partition {
    Partition {
        groups: Vec::new(),
        index0: false,
        name: format!("ipoib-{p_key:x}"),
        p_key,
        members: members
            .iter()
            .map(|g| PartitionMember {
                port_guid: *g,
                membership: Membership::Full,
            })
            .collect(),
        ipoib: Some(ipoib),
    }
}

fn groups_seen_by(lab: &mut Lab, lid: u16) -> Vec<McMemberRecord> {
    let req = SaMad::query(
        Method::GET_TABLE,
        77,
        &McMemberRecord::default(),
        Default::default(),
    )
    .unwrap();
    get_table(lab, 0, &req, MadAddress::gsi(lid))
        .iter()
        .map(|b| McMemberRecord::decode(b).expect("an MCMemberRecord"))
        .collect()
}

const PARAMS: PartitionIpoib = PartitionIpoib {
    rate: 7,
    mtu: 5,
    sl: 3,
    scope: 5,
    q_key: 0x0001_2345,
};

#[test]
fn a_partition_with_ipoib_has_its_broadcast_group_answered_and_programmed() {
    let topo = gen::fat_tree_2level(4).expect("topology");
    let guids: Vec<u64> = topo
        .iter()
        .filter(|(_, n)| !n.is_switch())
        .map(|(_, n)| n.ports[1].port_guid)
        .collect();
    let outsider = guids.len() - 1;
    let parts = vec![partition(0x0012, &guids[..outsider], PARAMS)];
    let mut lab = Lab::with_partitions(topo, &[10], parts);
    lab.run_to(Duration::from_secs(4));
    assert_eq!(lab.masters(), vec![0]);
    let lids = end_lids(&lab);
    let mgid = ipoib_broadcast_mgid(0x0012, 5);
    assert_eq!(
        std::net::Ipv6Addr::from(mgid).to_string(),
        "ff15:401b:8012::ffff:ffff",
        "OpenSM's name: scope 5, the P_Key with its full-member bit"
    );

    // A port of the partition sees the group with the partition's parameters.
    let seen = groups_seen_by(&mut lab, lids[1]);
    let g = seen
        .iter()
        .find(|r| r.mgid == mgid)
        .unwrap_or_else(|| panic!("the partition's broadcast group: {seen:?}"));
    assert_eq!(g.mlid, 0xC001, "the next MLID after the default group's");
    assert_eq!(g.p_key, 0x8012);
    assert_eq!(g.q_key, 0x0001_2345);
    assert_eq!((g.mtu, g.rate, g.sl, g.scope), (5, 7, 3, 5));
    assert_eq!(g.hop_limit, 0xFF, "not link-local: routers may forward it");
    assert!(
        seen.iter().any(|r| r.mlid == 0xC000),
        "the default group too"
    );
    // A port outside the partition does not see it.
    let seen = groups_seen_by(&mut lab, lids[outsider]);
    assert!(seen.iter().all(|r| r.mgid != mgid), "{seen:?}");

    // Two members on different leaves join (with the group's Q_Key and MTU, as IPoIB
    // does); one asking for another Q_Key is refused, and so is the outsider.
    let members = [lids[0], lids[outsider - 1]];
    for (i, lid) in members.into_iter().enumerate() {
        let rec = McMemberRecord {
            mgid,
            port_gid: port_gid_of(&mut lab, lid),
            join_state: JoinState::FULL_MEMBER,
            q_key: 0x0001_2345,
            mtu: 5,
            ..McMemberRecord::default()
        };
        let mask = join_mask() | McMemberRecord::Q_KEY | McMemberRecord::MTU;
        let req = SaMad::query(Method::SET, 20 + i as u64, &rec, mask).unwrap();
        let got = ask(&mut lab, 0, &req, MadAddress::gsi(lid));
        assert_eq!(got[0].status(), SaStatus::SUCCESS, "join of LID {lid}");
        let r: McMemberRecord = got[0].record().unwrap();
        assert_eq!((r.mlid, r.q_key, r.sl), (0xC001, 0x0001_2345, 3));
    }
    let wrong = McMemberRecord {
        mgid,
        port_gid: port_gid_of(&mut lab, lids[2]),
        join_state: JoinState::FULL_MEMBER,
        q_key: 0x0B1B,
        ..McMemberRecord::default()
    };
    let req = SaMad::query(Method::SET, 30, &wrong, join_mask() | McMemberRecord::Q_KEY).unwrap();
    assert_eq!(
        ask(&mut lab, 0, &req, MadAddress::gsi(lids[2]))[0].status(),
        SaStatus::ERR_REQ_INVALID
    );
    let out = McMemberRecord {
        mgid,
        port_gid: port_gid_of(&mut lab, lids[outsider]),
        join_state: JoinState::FULL_MEMBER,
        ..McMemberRecord::default()
    };
    let req = SaMad::query(Method::SET, 31, &out, join_mask()).unwrap();
    assert_eq!(
        ask(&mut lab, 0, &req, MadAddress::gsi(lids[outsider]))[0].status(),
        SaStatus::ERR_REQ_INVALID,
        "a port without the P_Key cannot join"
    );

    // Each join is a line on the event stream, with the port and its JoinState.
    let joined: Vec<&String> = lab.sms[0]
        .log
        .iter()
        .filter(|l| {
            l.contains(
                "joined multicast group ff15:401b:8012::ffff:ffff (MLID 0xc001) as full member",
            )
        })
        .collect();
    assert_eq!(joined.len(), 2, "{:#?}", lab.sms[0].log);

    // The switches now forward MLID 0xC001 to both members.
    lab.run_to(lab.now + Duration::from_millis(300));
    let cas: Vec<_> = lab
        .topo
        .iter()
        .filter(|(_, n)| !n.is_switch())
        .map(|(i, n)| (i, n.ports[1].remote))
        .collect();
    for lid in members {
        let i = lids.iter().position(|l| *l == lid).unwrap();
        let (leaf, port) = cas[i].1.expect("a cabled CA");
        let ports = lab.sim.mft_ports(leaf, 0xC001).expect("a switch");
        assert!(
            ports.contains(&port),
            "the leaf of LID {lid} forwards the group to it: {ports:?}"
        );
    }
    let (outsider_leaf, outsider_port) = cas[outsider].1.expect("cabled");
    let ports = lab.sim.mft_ports(outsider_leaf, 0xC001).expect("a switch");
    assert!(!ports.contains(&outsider_port), "{ports:?}");
    let subnet = lab.sms[0].node.as_ref().unwrap().subnet().unwrap();
    assert_eq!(subnet.mft_pending(), 0, "every MFT write was sent");
}

#[test]
fn a_partition_with_ipoib_set_at_run_time_gets_its_group_and_loses_it_when_deleted() {
    let topo = gen::fat_tree_2level(4).expect("topology");
    let mut lab = Lab::new(topo, &[]);
    lab.replicated = true;
    lab.sms.push(super::Member {
        at: lab
            .topo
            .iter()
            .find(|(_, n)| !n.is_switch())
            .map(|(i, _)| i)
            .unwrap(),
        client: ibsm_sim::ClientId(0),
        node: None,
        priority: 10,
        done: Vec::new(),
        log: Vec::new(),
        gmps: Vec::new(),
    });
    lab.start(0);
    lab.run_to(Duration::from_secs(4));
    assert_eq!(lab.masters(), vec![0]);
    let guids = ca_guids(&lab);
    let mgid = ipoib_broadcast_mgid(0x0020, 2);
    let has_group = |lab: &Lab| {
        lab.sms[0]
            .node
            .as_ref()
            .unwrap()
            .sa()
            .unwrap()
            .groups()
            .get(&mgid)
            .map(|g| (g.params.mlid, g.params.q_key, g.well_known))
    };
    assert_eq!(has_group(&lab), None);

    let feed = |lab: &mut Lab, partitions: Vec<Partition>| {
        let sa = lab.sms[0].node.as_ref().unwrap().sa_tables().unwrap();
        let rep = ReplicatedFabric {
            partitions,
            sa,
            ..ReplicatedFabric::default()
        };
        lab.replicate(0, rep);
        lab.run_to(lab.now + Duration::from_millis(500));
    };
    let p = partition(0x0020, &guids, PartitionIpoib::default());
    feed(&mut lab, vec![p]);
    assert_eq!(
        has_group(&lab),
        Some((0xC001, 0x0B1B, true)),
        "created with OpenSM's defaults at the next free MLID"
    );
    let table = lab.sms[0].node.as_ref().unwrap().sa_tables().unwrap();
    let replicated = crate::sa::McGroups::from_tables(&table).expect("groups").0;
    assert!(replicated.get(&mgid).is_some(), "and replicated");

    // Deleted: the group has no member, so it goes.
    feed(&mut lab, Vec::new());
    assert_eq!(has_group(&lab), None);
    let lids = end_lids(&lab);
    let seen = groups_seen_by(&mut lab, lids[1]);
    assert!(seen.iter().all(|r| r.mgid != mgid), "{seen:?}");
}
