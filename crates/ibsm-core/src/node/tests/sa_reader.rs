//! [`crate::sa::SaReader`], the SubnAdmGet of fabric records a driver answers ahead of
//! the node's other work: it answers exactly what the node's SA answers (byte for
//! byte, records and refusals, trusted or not), leaves everything else to the node,
//! and exists only on the master.

use std::time::Duration;

use ibsm_fabric::gen;
use ibsm_mad::sa::{
    LinearForwardingTableRecord, LinkRecord, McMemberRecord, NodeRecord, PathRecord,
    PortInfoRecord, SaAttributeId, SaMad, SmInfoRecord,
};
use ibsm_mad::{MadAddress, Method};

use super::sa::{ask, end_lids, join_mask, port_gid_of};
use super::Lab;
use crate::sa::SaReader;

fn reader(lab: &Lab, i: usize) -> Option<SaReader> {
    let node = lab.sms[i].node.as_ref()?;
    let fabric = node.sa_reader_snapshot()?;
    Some(SaReader::new(
        node.sa().expect("running").config().clone(),
        fabric.clone(),
    ))
}

#[test]
fn the_reader_answers_fabric_gets_as_the_node_does_and_leaves_the_rest_to_it() {
    let topo = gen::fat_tree_2level(4).expect("topology");
    let mut lab = Lab::new(topo, &[10, 5]);
    lab.run_to(Duration::from_secs(4));
    assert_eq!(lab.masters(), vec![0]);
    assert!(
        reader(&lab, 1).is_none(),
        "a standby has no reader: it redirects"
    );
    let r = reader(&lab, 0).expect("the master has a reader");
    let lids = end_lids(&lab);
    let client = MadAddress {
        qpn: 7,
        ..MadAddress::gsi(lids[3])
    };

    let path = |slid: u16, dlid: u16| PathRecord {
        slid,
        dlid,
        ..PathRecord::default()
    };
    let mut queries: Vec<SaMad> = Vec::new();
    for (n, &d) in lids.iter().enumerate() {
        let mut q = SaMad::query(
            Method::GET,
            100 + n as u64,
            &path(lids[3], d),
            PathRecord::SLID | PathRecord::DLID,
        )
        .unwrap();
        // Trusted (the SA_Key) and not.
        q.sm_key = (n % 2) as u64;
        queries.push(q);
    }
    // A LID nobody has (no records), a NodeRecord by LID, the whole table by Get (too
    // many), a PortInfoRecord and LinkRecords, an LFT block.
    queries.push(
        SaMad::query(
            Method::GET,
            200,
            &path(lids[3], 0xBEEF),
            PathRecord::SLID | PathRecord::DLID,
        )
        .unwrap(),
    );
    let nr = NodeRecord {
        lid: lids[1],
        ..NodeRecord::default()
    };
    queries.push(SaMad::query(Method::GET, 201, &nr, NodeRecord::LID).unwrap());
    queries.push(SaMad::new(Method::GET, SaAttributeId::NODE_RECORD, 202));
    let pir = PortInfoRecord {
        endport_lid: lids[2],
        ..PortInfoRecord::default()
    };
    queries.push(SaMad::query(Method::GET, 203, &pir, PortInfoRecord::ENDPORT_LID).unwrap());
    queries.push(SaMad::new(Method::GET, SaAttributeId::LINK_RECORD, 204));
    queries.push(
        SaMad::query(
            Method::GET,
            205,
            &LinkRecord::default(),
            LinkRecord::FROM_LID,
        )
        .unwrap(),
    );
    queries.push(SaMad::new(
        Method::GET,
        SaAttributeId::LINEAR_FORWARDING_TABLE_RECORD,
        206,
    ));
    let _ = LinearForwardingTableRecord::default();

    let mut answered = 0;
    for q in &queries {
        let bytes = q.encode();
        let fast = r
            .answer(&bytes, client)
            .unwrap_or_else(|| panic!("the reader answers {q:?}"));
        let node = ask(&mut lab, 0, q, client);
        assert_eq!(node.len(), 1, "the node answers {q:?} with one MAD");
        assert_eq!(fast.transmit.to, lab.sms[0].gmps[0].to, "same address");
        assert_eq!(
            fast.transmit.wire(),
            lab.sms[0].gmps[0].wire(),
            "same answer to {q:?}"
        );
        assert_eq!(
            fast.error,
            node[0].status() != ibsm_mad::sa::SaStatus::SUCCESS
        );
        answered += usize::from(!fast.error);
    }
    assert!(answered >= lids.len(), "the paths were found: {answered}");

    // Not the reader's: the node's SA answers these (its state, RMPP, SMs, the
    // SA_Key check that drops a request).
    let gid = port_gid_of(&mut lab, lids[3]);
    let join = McMemberRecord {
        mgid: [0xff, 0x12, 0x40, 0x1b, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7],
        port_gid: gid,
        ..McMemberRecord::default()
    };
    let mut wrong_key = SaMad::query(
        Method::GET,
        300,
        &path(lids[3], lids[4]),
        PathRecord::SLID | PathRecord::DLID,
    )
    .unwrap();
    wrong_key.sm_key = 0xdead;
    let not_mine = [
        SaMad::query(Method::SET, 301, &join, join_mask()).unwrap(),
        SaMad::query(Method::GET, 302, &join, join_mask()).unwrap(),
        SaMad::query(
            Method::GET_TABLE,
            303,
            &path(lids[3], lids[4]),
            PathRecord::SLID | PathRecord::DLID,
        )
        .unwrap(),
        SaMad::new(Method::GET, SaAttributeId::SM_INFO_RECORD, 304),
        SaMad::new(Method::GET, SaAttributeId::CLASS_PORT_INFO, 305),
        SaMad::new(
            Method::GET,
            SaAttributeId::MULTICAST_FORWARDING_TABLE_RECORD,
            306,
        ),
        wrong_key,
    ];
    let _ = SmInfoRecord::default();
    for q in &not_mine {
        assert!(
            r.answer(&q.encode(), client).is_none(),
            "{q:?} is the node's to answer"
        );
    }
}
