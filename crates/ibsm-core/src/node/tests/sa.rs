//! The node's Subnet Administrator, end to end in virtual time: an elected master on
//! the embedded simulator answers SA queries fed to it as GMPs (Get, GetTable over
//! RMPP with the receiver's ACKs, refusals with IBA statuses), and a standby
//! redirects to the master.

use std::time::Duration;

use ibsm_fabric::gen;
use ibsm_mad::sa::{
    ClassPortInfo, ComponentMask, LinkRecord, McMemberRecord, NodeRecord, PortInfoRecord,
    RmppFlags, RmppProgress, RmppReassembler, RmppType, SaAttributeId, SaMad, SaStatus,
    SmInfoRecord,
};
use ibsm_mad::{MadAddress, Method};

use super::Lab;
use crate::election::SmState;
use crate::node::*;

/// Feed one SA request to SM `i` as if it came from `from`; returns what it sent.
pub(super) fn ask(lab: &mut Lab, i: usize, req: &SaMad, from: MadAddress) -> Vec<SaMad> {
    let now = lab.now;
    lab.sms[i].gmps.clear();
    if let Some(n) = lab.sms[i].node.as_mut() {
        n.handle_input(
            now,
            Input::Gmp {
                mad: &req.encode(),
                from,
            },
        );
    }
    lab.drain(i);
    lab.sms[i]
        .gmps
        .iter()
        .map(|t| {
            assert_eq!(t.to.lid, from.lid, "answered to the requester");
            assert_eq!(t.to.qpn, from.qpn, "on its QP");
            let m = SaMad::decode(&t.mad).expect("the SA sends SA MADs");
            // The last RMPP segment is written as the headers and the data it
            // carries (PayloadLength less the SA header), nothing after it.
            let last = m.rmpp.is_active()
                && m.rmpp.rmpp_type == RmppType::DATA
                && m.rmpp.flags.contains(RmppFlags::LAST);
            let want = match last {
                true => 56 + m.rmpp.payload_length() as usize - 20,
                false => 256,
            };
            assert_eq!(t.len, want, "bytes written of {:?}", m.rmpp);
            assert_eq!(t.wire(), &t.mad[..want]);
            assert!(t.mad[want..].iter().all(|b| *b == 0), "zero past the data");
            m
        })
        .collect()
}

/// A whole GetTable: the request, then an ACK for every segment until the last,
/// as a client that does RMPP would. Returns the records.
pub(super) fn get_table(lab: &mut Lab, i: usize, req: &SaMad, from: MadAddress) -> Vec<Vec<u8>> {
    let mut segs = ask(lab, i, req, from);
    let mut r = RmppReassembler::new(1 << 20);
    loop {
        assert!(
            !segs.is_empty(),
            "the SA stopped sending before the last segment"
        );
        let mut last_seg = None;
        for s in &segs {
            assert_eq!(s.method(), Method::GET_TABLE_RESP);
            assert_eq!(s.status(), SaStatus::SUCCESS);
            match r.push(s).expect("segments arrive in order") {
                RmppProgress::Complete(m) => return m.records().map(<[u8]>::to_vec).collect(),
                RmppProgress::Incomplete { .. } => last_seg = Some(*s),
            }
        }
        let s = last_seg.expect("a segment");
        // Acknowledge and open a window of 4 more.
        let ack = s.rmpp_ack(s.rmpp.seg_num() + 4);
        segs = ask(lab, i, &ack, from);
    }
}

pub(super) fn end_lids(lab: &Lab) -> Vec<u16> {
    lab.lids()
}

#[test]
fn the_master_answers_fabric_queries_and_a_standby_redirects_to_it() {
    let topo = gen::fat_tree_2level(4).expect("topology");
    let switches = topo.iter().filter(|(_, n)| n.is_switch()).count();
    let cas = topo.iter().filter(|(_, n)| !n.is_switch()).count();
    let links = topo.links().count();
    let mut lab = Lab::new(topo, &[10, 5]);
    lab.run_to(Duration::from_secs(4));
    assert_eq!(lab.masters(), vec![0]);
    let lids = end_lids(&lab);
    let client = MadAddress {
        qpn: 7,
        ..MadAddress::gsi(lids[3])
    };

    // ClassPortInfo.
    let got = ask(
        &mut lab,
        0,
        &SaMad::new(Method::GET, SaAttributeId::CLASS_PORT_INFO, 1),
        client,
    );
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].method(), Method::GET_RESP);
    let cpi: ClassPortInfo = got[0].record().expect("ClassPortInfo");
    assert_eq!((cpi.base_version, cpi.class_version), (1, 2));

    // NodeRecord by LID: exactly the CA with that LID.
    let node0 = lab.sms[0].node.as_ref().expect("node").status().port_guid;
    let t = NodeRecord {
        lid: lids[1],
        ..NodeRecord::default()
    };
    let got = ask(
        &mut lab,
        0,
        &SaMad::query(Method::GET, 2, &t, NodeRecord::LID).unwrap(),
        client,
    );
    assert_eq!(got[0].status(), SaStatus::SUCCESS, "{:?}", got[0]);
    let nr: NodeRecord = got[0].record().unwrap();
    assert_eq!(nr.lid, lids[1]);
    assert_ne!(nr.node_info.port_guid, 0);
    assert_eq!(nr.node_info.local_port_num, 1);

    // A LID nobody has: no records; the whole table by Get: too many.
    let t = NodeRecord {
        lid: 0xBEEF,
        ..NodeRecord::default()
    };
    let got = ask(
        &mut lab,
        0,
        &SaMad::query(Method::GET, 3, &t, NodeRecord::LID).unwrap(),
        client,
    );
    assert_eq!(got[0].status(), SaStatus::ERR_NO_RECORDS);
    let got = ask(
        &mut lab,
        0,
        &SaMad::query(Method::GET, 4, &NodeRecord::default(), ComponentMask::NONE).unwrap(),
        client,
    );
    assert_eq!(got[0].status(), SaStatus::ERR_TOO_MANY_RECORDS);

    // GetTable of every NodeRecord over RMPP: one per CA port, one per switch.
    let req = SaMad::query(
        Method::GET_TABLE,
        5,
        &NodeRecord::default(),
        ComponentMask::NONE,
    )
    .unwrap();
    let recs = get_table(&mut lab, 0, &req, client);
    assert_eq!(recs.len(), cas + switches);
    let guids: std::collections::BTreeSet<u64> = recs
        .iter()
        .map(|b| NodeRecord::decode(b).unwrap().node_info.port_guid)
        .collect();
    assert_eq!(guids.len(), cas + switches, "no record twice");
    assert!(guids.contains(&node0), "the SM's own port is a node too");

    // Every PortInfoRecord of the LID's port, and LinkRecords both ways.
    let t = PortInfoRecord {
        endport_lid: lids[2],
        ..PortInfoRecord::default()
    };
    let req = SaMad::query(Method::GET_TABLE, 6, &t, PortInfoRecord::ENDPORT_LID).unwrap();
    let recs = get_table(&mut lab, 0, &req, client);
    assert_eq!(recs.len(), 1, "a CA with one port");
    let pir = PortInfoRecord::decode(&recs[0]).unwrap();
    assert_eq!(pir.port_info.lid, lids[2]);
    let master_lid = lab.sms[0].node.as_ref().unwrap().status().lid;
    assert_eq!(pir.port_info.master_sm_lid, master_lid);
    let req = SaMad::query(
        Method::GET_TABLE,
        7,
        &LinkRecord::default(),
        ComponentMask::NONE,
    )
    .unwrap();
    let recs = get_table(&mut lab, 0, &req, client);
    assert_eq!(recs.len(), 2 * links, "every cable, both directions");

    // SMInfoRecords: both SMs, the master with its state.
    let req = SaMad::query(
        Method::GET_TABLE,
        8,
        &SmInfoRecord::default(),
        ComponentMask::NONE,
    )
    .unwrap();
    let recs = get_table(&mut lab, 0, &req, client);
    let states: Vec<SmState> = recs
        .iter()
        .map(|b| SmInfoRecord::decode(b).unwrap().sm_info.sm_state)
        .collect();
    assert_eq!(recs.len(), 2, "{states:?}");
    assert!(states.contains(&SmState::Master) && states.contains(&SmState::Standby));

    // Refusals: a wrong SM_Key is dropped; a bad class version answered BAD_VERSION;
    // an unsupported method too.
    let mut bad_key =
        SaMad::query(Method::GET, 9, &NodeRecord::default(), ComponentMask::NONE).unwrap();
    bad_key.sm_key = 0x1234;
    assert!(
        ask(&mut lab, 0, &bad_key, client).is_empty(),
        "dropped silently (C15-0.1.5)"
    );
    let mut bad_version = SaMad::new(Method::GET, SaAttributeId::NODE_RECORD, 10);
    bad_version.header.class_version = 1;
    let got = ask(&mut lab, 0, &bad_version, client);
    assert_eq!(got[0].status(), SaStatus::BAD_VERSION);
    let got = ask(
        &mut lab,
        0,
        &SaMad::new(Method(0x20), SaAttributeId::NODE_RECORD, 11),
        client,
    );
    assert_eq!(got[0].status(), SaStatus::METHOD_NOT_SUPPORTED);

    // The standby answers nothing itself: it redirects to the master's LID.
    let got = ask(
        &mut lab,
        1,
        &SaMad::new(Method::GET, SaAttributeId::CLASS_PORT_INFO, 12),
        client,
    );
    assert_eq!(got[0].status(), SaStatus::REDIRECT);
    let cpi: ClassPortInfo = got[0].record().unwrap();
    assert_eq!(cpi.redirect_lid, master_lid);
}

#[test]
fn an_unacknowledged_table_is_sent_again_then_given_up() {
    let topo = gen::fat_tree_2level(4).expect("topology");
    let mut lab = Lab::new(topo, &[10]);
    lab.run_to(Duration::from_secs(4));
    let lids = end_lids(&lab);
    let client = MadAddress::gsi(lids[1]);
    let req = SaMad::query(
        Method::GET_TABLE,
        5,
        &NodeRecord::default(),
        ComponentMask::NONE,
    )
    .unwrap();
    let first = ask(&mut lab, 0, &req, client);
    assert_eq!(
        first.len(),
        1,
        "a window of one segment until the first ACK"
    );
    assert_eq!(first[0].rmpp.seg_num(), 1);
    // Nobody ACKs (saquery under umad2sim): the segment is sent again a few times.
    lab.sms[0].gmps.clear();
    lab.run_to(lab.now + Duration::from_secs(3));
    let resent = lab.sms[0]
        .gmps
        .iter()
        .filter(|t| SaMad::decode(&t.mad).is_ok_and(|m| m.tid() == 5))
        .count();
    let retries = lab.sms[0]
        .node
        .as_ref()
        .unwrap()
        .sa()
        .unwrap()
        .config()
        .rmpp_retries as usize;
    assert_eq!(resent, retries, "resent {resent} times");
    assert_eq!(
        lab.sms[0]
            .node
            .as_ref()
            .unwrap()
            .sa()
            .unwrap()
            .transfers_in_flight(),
        0
    );
    assert_eq!(
        lab.sms[0]
            .node
            .as_ref()
            .unwrap()
            .sa()
            .unwrap()
            .metrics()
            .transfers_aborted,
        1
    );
}

/// The GID of the CA port with this LID, from the SA's own NodeRecord.
pub(super) fn port_gid_of(lab: &mut Lab, lid: u16) -> [u8; 16] {
    let t = NodeRecord {
        lid,
        ..NodeRecord::default()
    };
    let req = SaMad::query(Method::GET, 900 + u64::from(lid), &t, NodeRecord::LID).unwrap();
    let got = ask(lab, 0, &req, MadAddress::gsi(lid));
    let nr: NodeRecord = got[0].record().expect("NodeRecord");
    crate::sa::make_gid(crate::sa::DEFAULT_SUBNET_PREFIX, nr.node_info.port_guid)
}

pub(super) fn join_mask() -> ComponentMask {
    McMemberRecord::MGID | McMemberRecord::PORT_GID | McMemberRecord::JOIN_STATE
}

#[test]
fn ports_join_and_leave_groups_and_the_switches_get_the_trees() {
    use ibsm_mad::sa::{JoinState, McMemberRecord, Selector};
    let topo = gen::fat_tree_2level(4).expect("topology");
    let mut lab = Lab::new(topo, &[10]);
    lab.run_to(Duration::from_secs(4));
    let lids = end_lids(&lab);
    let bcast = crate::sa::ipoib_broadcast_mgid(0xFFFF, 2);

    // The IPoIB broadcast group exists from the start, as OpenSM's, and is seen by a
    // plain (untrusted) query as one group record.
    let t = McMemberRecord {
        mgid: bcast,
        ..McMemberRecord::default()
    };
    let req = SaMad::query(Method::GET, 1, &t, McMemberRecord::MGID).unwrap();
    let got = ask(&mut lab, 0, &req, MadAddress::gsi(lids[1]));
    assert_eq!(got[0].status(), SaStatus::SUCCESS);
    let g: McMemberRecord = got[0].record().unwrap();
    assert_eq!((g.mlid, g.p_key, g.q_key), (0xC000, 0xFFFF, 0x0B1B));

    // Two CAs on different leaves join as full members.
    let (a, b) = (lids[0], lids[lids.len() - 1]);
    for (i, lid) in [a, b].into_iter().enumerate() {
        let rec = McMemberRecord {
            mgid: bcast,
            port_gid: port_gid_of(&mut lab, lid),
            join_state: JoinState::FULL_MEMBER,
            ..McMemberRecord::default()
        };
        let req = SaMad::query(Method::SET, 10 + i as u64, &rec, join_mask()).unwrap();
        let got = ask(&mut lab, 0, &req, MadAddress::gsi(lid));
        assert_eq!(
            got[0].method(),
            Method::GET_RESP,
            "a Set is answered with GetResp"
        );
        assert_eq!(got[0].status(), SaStatus::SUCCESS, "join of LID {lid}");
        let r: McMemberRecord = got[0].record().unwrap();
        assert_eq!(r.mlid, 0xC000);
        assert_eq!(r.port_gid, rec.port_gid);
        assert!(r.join_state.contains(JoinState::FULL_MEMBER));
    }
    lab.run_to(lab.now + Duration::from_millis(200));
    let subnet = lab.sms[0].node.as_ref().unwrap().subnet().unwrap();
    let holders: Vec<u64> = subnet
        .desired_mfts()
        .switches()
        .filter(|(_, s)| !s.entry(0xC000).is_empty())
        .map(|(g, _)| g)
        .collect();
    assert!(
        holders.len() >= 2,
        "the tree spans both leaves: {holders:?}"
    );
    assert_eq!(subnet.mft_pending(), 0, "every write was sent");
    assert!(subnet.mft_writes().0 > 0);

    // A port cannot join for another one without the SA_Key.
    let rec = McMemberRecord {
        mgid: bcast,
        port_gid: port_gid_of(&mut lab, a),
        join_state: JoinState::FULL_MEMBER,
        ..McMemberRecord::default()
    };
    let req = SaMad::query(Method::SET, 20, &rec, join_mask()).unwrap();
    let got = ask(&mut lab, 0, &req, MadAddress::gsi(b));
    assert_eq!(got[0].status(), SaStatus::ERR_REQ_INVALID);

    // A new group: too few components, then all of them with an MGID to allocate.
    let mut rec = McMemberRecord {
        port_gid: port_gid_of(&mut lab, a),
        join_state: JoinState::FULL_MEMBER,
        q_key: 0x1234,
        p_key: 0xFFFF,
        ..McMemberRecord::default()
    };
    let req = SaMad::query(Method::SET, 21, &rec, join_mask()).unwrap();
    let got = ask(&mut lab, 0, &req, MadAddress::gsi(a));
    assert_eq!(got[0].status(), SaStatus::ERR_REQ_INSUFFICIENT_COMPONENTS);
    let create = join_mask()
        | McMemberRecord::Q_KEY
        | McMemberRecord::TCLASS
        | McMemberRecord::P_KEY
        | McMemberRecord::FLOW_LABEL
        | McMemberRecord::SL;
    // An MTU or rate code IBA does not define is refused whatever the selector asks
    // (osmtest's o15.0.1.8: "more than MTU code 6"), and creates nothing.
    for (mtu, rate, comp) in [
        (6u8, 0u8, McMemberRecord::MTU | McMemberRecord::MTU_SELECTOR),
        (0, 1, McMemberRecord::RATE | McMemberRecord::RATE_SELECTOR),
    ] {
        let bad = McMemberRecord {
            mtu,
            mtu_selector: Selector::GreaterThan,
            rate,
            rate_selector: Selector::GreaterThan,
            ..rec
        };
        let req = SaMad::query(Method::SET, 24, &bad, create | comp).unwrap();
        let got = ask(&mut lab, 0, &req, MadAddress::gsi(a));
        assert_eq!(got[0].status(), SaStatus::ERR_REQ_INVALID, "{mtu}/{rate}");
    }
    let groups_before = lab.sms[0]
        .node
        .as_ref()
        .unwrap()
        .sa()
        .unwrap()
        .groups()
        .len();
    assert_eq!(groups_before, 1, "the refused creations made no group");
    let req = SaMad::query(Method::SET, 22, &rec, create).unwrap();
    let got = ask(&mut lab, 0, &req, MadAddress::gsi(a));
    assert_eq!(got[0].status(), SaStatus::SUCCESS);
    let created: McMemberRecord = got[0].record().unwrap();
    assert_eq!(created.mgid[0], 0xFF, "an allocated multicast GID");
    assert_eq!(created.mlid, 0xC001, "the lowest free MLID");
    assert_eq!(created.q_key, 0x1234);

    // Its only full member leaves: the group is deleted.
    rec.mgid = created.mgid;
    let req = SaMad::query(Method::DELETE, 23, &rec, join_mask()).unwrap();
    let got = ask(&mut lab, 0, &req, MadAddress::gsi(a));
    assert_eq!(got[0].method(), Method::DELETE_RESP);
    assert_eq!(got[0].status(), SaStatus::SUCCESS);
    let sa = lab.sms[0].node.as_ref().unwrap().sa().unwrap();
    assert!(
        sa.groups().get(&created.mgid).is_none(),
        "deleted with its last full member"
    );
    assert_eq!(sa.groups().len(), 1, "the broadcast group stays");

    // Both leave the broadcast group: it stays (well known), its tree goes.
    for lid in [a, b] {
        let rec = McMemberRecord {
            mgid: bcast,
            port_gid: port_gid_of(&mut lab, lid),
            join_state: JoinState::FULL_MEMBER,
            ..McMemberRecord::default()
        };
        let req = SaMad::query(Method::DELETE, 30, &rec, join_mask()).unwrap();
        let got = ask(&mut lab, 0, &req, MadAddress::gsi(lid));
        assert_eq!(got[0].status(), SaStatus::SUCCESS);
    }
    lab.run_to(lab.now + Duration::from_millis(200));
    let node = lab.sms[0].node.as_ref().unwrap();
    assert!(node.sa().unwrap().groups().get(&bcast).is_some());
    let left = node
        .subnet()
        .unwrap()
        .desired_mfts()
        .switches()
        .filter(|(_, s)| !s.entry(0xC000).is_empty())
        .count();
    assert_eq!(left, 0, "no switch forwards the empty group");
}

#[test]
fn a_takeover_from_a_replica_with_the_sas_state_asks_no_client_to_re_register() {
    use ibsm_mad::sa::JoinState;
    let topo = gen::fat_tree_2level(4).expect("topology");
    // Nodes that replicate: start the standby's node only after the flag is set.
    let mut lab = Lab::new(topo, &[10]);
    lab.replicated = true;
    lab.kill(0);
    lab.start(0);
    lab.sms.push(super::Member {
        at: lab.sms[0].at,
        client: lab.sms[0].client,
        node: None,
        priority: 5,
        done: Vec::new(),
        log: Vec::new(),
        gmps: Vec::new(),
    });
    let cas: Vec<ibsm_fabric::NodeIdx> = lab
        .topo
        .iter()
        .filter(|(_, n)| !n.is_switch())
        .map(|(i, _)| i)
        .collect();
    lab.sms[1].at = cas[3];
    lab.start(1);
    lab.run_to(Duration::from_secs(4));
    assert_eq!(lab.masters(), vec![0]);
    let first = lab.sms[0]
        .node
        .as_ref()
        .unwrap()
        .subnet()
        .unwrap()
        .metrics();
    assert!(
        first.client_reregisters > 0,
        "a first master with no replicated SA state asks clients to re-register"
    );

    // A client joins the broadcast group; the standby's replica gets the SA state.
    let lids = end_lids(&lab);
    let lid = lids[1];
    let rec = McMemberRecord {
        mgid: crate::sa::ipoib_broadcast_mgid(0xFFFF, 2),
        port_gid: port_gid_of(&mut lab, lid),
        join_state: JoinState::FULL_MEMBER,
        ..McMemberRecord::default()
    };
    let req = SaMad::query(Method::SET, 1, &rec, join_mask()).unwrap();
    assert_eq!(
        ask(&mut lab, 0, &req, MadAddress::gsi(lid))[0].status(),
        SaStatus::SUCCESS
    );
    let rep = ReplicatedFabric {
        sa: lab.sms[0].node.as_ref().unwrap().sa_tables().unwrap(),
        ..ReplicatedFabric::default()
    };
    let now = lab.now;
    lab.sms[1]
        .node
        .as_mut()
        .unwrap()
        .handle_input(now, Input::Replicated(std::sync::Arc::new(rep)));
    lab.drain(1);
    assert_eq!(
        lab.sms[1]
            .node
            .as_ref()
            .unwrap()
            .sa()
            .unwrap()
            .groups()
            .member_count(),
        1,
        "the standby mirrors the replica"
    );

    // The master dies: the standby takes over with the SA's state and sets no
    // ClientReregister anywhere.
    lab.kill(0);
    lab.run_to(lab.now + Duration::from_secs(3));
    assert_eq!(lab.masters(), vec![1]);
    let node = lab.sms[1].node.as_ref().unwrap();
    assert_eq!(node.subnet().unwrap().metrics().client_reregisters, 0);
    assert_eq!(node.sa().unwrap().groups().member_count(), 1);
    let mlid = node
        .sa()
        .unwrap()
        .groups()
        .get(&rec.mgid)
        .map(|g| g.params.mlid);
    assert_eq!(mlid, Some(0xC000), "the same MLID");
}

#[test]
fn a_takeover_without_the_sas_state_asks_clients_to_re_register() {
    let topo = gen::fat_tree_2level(4).expect("topology");
    let mut lab = Lab::new(topo, &[10, 5]);
    lab.run_to(Duration::from_secs(4));
    assert_eq!(lab.masters(), vec![0]);
    lab.kill(0);
    lab.run_to(lab.now + Duration::from_secs(3));
    assert_eq!(lab.masters(), vec![1]);
    let m = lab.sms[1]
        .node
        .as_ref()
        .unwrap()
        .subnet()
        .unwrap()
        .metrics();
    assert!(
        m.client_reregisters > 0,
        "no replicated SA state: every client must re-join, so it is asked to"
    );
}

/// What saquery on ibsim showed against OpenSM on the same LIDs: a switch's
/// NodeRecord carries port 0 as LocalPortNum (the record's port, not the port the
/// SM's discovery came in through), and a PortInfoRecord holds what the port holds
/// after the master's SubnSet (the fields the Set left as "no change" included), not
/// the Set's own payload.
#[test]
fn records_say_what_the_ports_hold() {
    let topo = gen::fat_tree_2level(4).expect("topology");
    let mut lab = Lab::new(topo, &[10]);
    lab.run_to(Duration::from_secs(4));
    assert_eq!(lab.masters(), vec![0]);
    let lids = end_lids(&lab);
    let client = MadAddress {
        qpn: 7,
        ..MadAddress::gsi(lids[3])
    };
    let mut tid = 100;
    let mut checked = (0, 0);
    let nodes: Vec<_> = lab.topo.iter().map(|(i, n)| (i, n.is_switch())).collect();
    for (idx, is_switch) in nodes {
        let port = u8::from(!is_switch);
        let lid = lab.sim.port_lid(idx, port).expect("LID");
        tid += 1;
        let t = NodeRecord {
            lid,
            ..NodeRecord::default()
        };
        let got = ask(
            &mut lab,
            0,
            &SaMad::query(Method::GET, tid, &t, NodeRecord::LID).unwrap(),
            client,
        );
        let nr: NodeRecord = got[0].record().expect("NodeRecord");
        assert_eq!(nr.node_info.local_port_num, port, "LID {lid}: {nr:?}");
        // Every cabled port (inter-switch ones too) and a switch's port 0.
        let ports: Vec<u8> = std::iter::once(port)
            .chain(
                lab.topo
                    .node(idx)
                    .into_iter()
                    .flat_map(|n| n.physical_ports())
                    .filter(|(p, info)| *p != port && info.remote.is_some())
                    .map(|(p, _)| p),
            )
            .collect();
        for port in ports {
            tid += 1;
            let t = PortInfoRecord {
                endport_lid: lid,
                port_num: port,
                ..PortInfoRecord::default()
            };
            let mask = PortInfoRecord::ENDPORT_LID | PortInfoRecord::PORT_NUM;
            let got = ask(
                &mut lab,
                0,
                &SaMad::query(Method::GET, tid, &t, mask).unwrap(),
                client,
            );
            let pir: PortInfoRecord = got[0].record().expect("PortInfoRecord");
            let held = lab.sim.port_info(idx, port).expect("PortInfo");
            let fields = |pi: &ibsm_mad::PortInfo| {
                (
                    pi.link_width_enabled,
                    pi.link_speed_enabled,
                    pi.link_down_default_state,
                    pi.gid_prefix,
                    pi.lid,
                    pi.master_sm_lid,
                    pi.subnet_timeout,
                )
            };
            if port != 0 {
                assert_ne!(held.link_width_enabled, 0, "a link port has a width");
            }
            assert_eq!(
                fields(&pir.port_info),
                fields(&held),
                "LID {lid} port {port}"
            );
        }
        if is_switch {
            checked.0 += 1;
        } else {
            checked.1 += 1;
        }
    }
    assert!(checked.0 > 0 && checked.1 > 0, "{checked:?}");
}
