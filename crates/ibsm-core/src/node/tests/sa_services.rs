//! ServiceRecords and InformInfo end to end in virtual time: registration, queries,
//! deletion, refusals and lease expiry; a subscription to trap 64, the Report a
//! port coming back up makes, its resends until the ReportResp, and an unsubscribe
//! that stops Reports.

use std::time::Duration;

use ibsm_fabric::{gen, NodeIdx};
use ibsm_mad::sa::{
    ComponentMask, InformInfo, InformInfoRecord, NodeRecord, SaAttributeId, SaMad, SaNotice,
    SaStatus, ServiceName, ServiceRecord,
};
use ibsm_mad::{MadAddress, Method};

use super::sa::ask;
use super::Lab;
use crate::node::*;
use crate::sa::{make_gid, DEFAULT_SUBNET_PREFIX};

fn lab() -> (Lab, Vec<u16>) {
    let topo = gen::fat_tree_2level(4).expect("topology");
    let mut lab = Lab::new(topo, &[10]);
    lab.run_to(Duration::from_secs(4));
    assert_eq!(lab.masters(), vec![0]);
    let lids = lab.lids();
    (lab, lids)
}

fn client(lid: u16) -> MadAddress {
    MadAddress {
        qpn: 7,
        ..MadAddress::gsi(lid)
    }
}

/// The PortGID of the CA port with this LID (asked of the SA).
fn gid_of(lab: &mut Lab, lid: u16) -> [u8; 16] {
    let t = NodeRecord {
        lid,
        ..NodeRecord::default()
    };
    let got = ask(
        lab,
        0,
        &SaMad::query(Method::GET, 99, &t, NodeRecord::LID).unwrap(),
        client(lid),
    );
    let nr: NodeRecord = got[0].record().unwrap();
    make_gid(DEFAULT_SUBNET_PREFIX, nr.node_info.port_guid)
}

fn one(lab: &mut Lab, req: &SaMad, from: MadAddress) -> SaMad {
    let got = ask(lab, 0, req, from);
    assert_eq!(got.len(), 1, "{got:?}");
    got[0]
}

const RID: ComponentMask =
    ComponentMask(ServiceRecord::SERVICE_ID.0 | ServiceRecord::SERVICE_GID.0);

#[test]
fn services_register_answer_delete_refuse_and_expire() {
    let (mut lab, lids) = lab();
    let (a, b) = (client(lids[3]), client(lids[5]));
    let gid_a = gid_of(&mut lab, lids[3]);
    let s1 = ServiceRecord {
        service_id: 0x10,
        service_gid: gid_a,
        service_lease: 5,
        service_name: ServiceName::new("svc-one"),
        ..ServiceRecord::default()
    };
    let mask = RID | ServiceRecord::SERVICE_LEASE | ServiceRecord::SERVICE_NAME;
    let r = one(
        &mut lab,
        &SaMad::query(Method::SET, 1, &s1, mask).unwrap(),
        a,
    );
    assert_eq!(
        (r.method(), r.status()),
        (Method::GET_RESP, SaStatus::SUCCESS)
    );
    let back: ServiceRecord = r.record().unwrap();
    assert_eq!(
        back.service_p_key, 0xFFFF,
        "no P_Key given: the default one"
    );
    assert_eq!(back.service_lease, 5);

    let s2 = ServiceRecord {
        service_id: 0x20,
        service_gid: gid_a,
        service_data8: [7; 16],
        ..ServiceRecord::default()
    };
    let r = one(
        &mut lab,
        &SaMad::query(Method::SET, 2, &s2, RID).unwrap(),
        a,
    );
    assert_eq!(r.status(), SaStatus::SUCCESS);
    assert_eq!(
        r.record::<ServiceRecord>().unwrap().service_lease,
        ServiceRecord::INFINITE_LEASE,
        "no lease given: infinite"
    );

    // Refusals: another port's GID (untrusted), a GID not in the fabric, no GID in
    // the mask.
    let r = one(
        &mut lab,
        &SaMad::query(Method::SET, 3, &s1, mask).unwrap(),
        b,
    );
    assert_eq!(r.status(), SaStatus::ERR_REQ_INVALID);
    let stranger = ServiceRecord {
        service_gid: make_gid(DEFAULT_SUBNET_PREFIX, 0xDEAD_BEEF),
        ..s1
    };
    let r = one(
        &mut lab,
        &SaMad::query(Method::SET, 4, &stranger, mask).unwrap(),
        a,
    );
    assert_eq!(r.status(), SaStatus::ERR_REQ_INVALID);
    let r = one(
        &mut lab,
        &SaMad::query(Method::SET, 5, &s1, ServiceRecord::SERVICE_ID).unwrap(),
        a,
    );
    assert_eq!(r.status(), SaStatus::ERR_REQ_INVALID);

    // Get by ServiceID, and by a ServiceData8 component.
    let r = one(
        &mut lab,
        &SaMad::query(Method::GET, 6, &s1, ServiceRecord::SERVICE_ID).unwrap(),
        b,
    );
    assert_eq!(r.status(), SaStatus::SUCCESS);
    assert_eq!(
        r.record::<ServiceRecord>().unwrap().service_name,
        ServiceName::new("svc-one")
    );
    let t = ServiceRecord {
        service_data8: [7; 16],
        ..ServiceRecord::default()
    };
    let r = one(
        &mut lab,
        &SaMad::query(Method::GET, 7, &t, ServiceRecord::SERVICE_DATA8_0).unwrap(),
        b,
    );
    assert_eq!(r.status(), SaStatus::SUCCESS);
    assert_eq!(r.record::<ServiceRecord>().unwrap().service_id, 0x20);

    // Delete: not by another port; by a trusted requester (SA_Key); unknown RID.
    let r = one(
        &mut lab,
        &SaMad::query(Method::DELETE, 8, &s2, RID).unwrap(),
        b,
    );
    assert_eq!(r.status(), SaStatus::ERR_REQ_INVALID);
    let mut del = SaMad::query(Method::DELETE, 9, &s2, RID).unwrap();
    del.sm_key = 1;
    let r = one(&mut lab, &del, b);
    assert_eq!(
        (r.method(), r.status()),
        (Method::DELETE_RESP, SaStatus::SUCCESS)
    );
    let r = one(
        &mut lab,
        &SaMad::query(Method::DELETE, 10, &s2, RID).unwrap(),
        a,
    );
    assert_eq!(r.status(), SaStatus::ERR_NO_RECORDS);

    // The lease: gone once its 5 s have passed.
    let sa = lab.sms[0].node.as_ref().unwrap().sa().unwrap();
    assert_eq!(sa.services().len(), 1);
    lab.run_to(lab.now + Duration::from_secs(6));
    let r = one(
        &mut lab,
        &SaMad::query(Method::GET, 11, &s1, ServiceRecord::SERVICE_ID).unwrap(),
        a,
    );
    assert_eq!(r.status(), SaStatus::ERR_NO_RECORDS);
    let tables = lab.sms[0].node.as_ref().unwrap().sa_tables().unwrap();
    assert!(
        tables[&crate::sa::SaTableKind::Services].is_empty(),
        "the replicated table follows"
    );
    // Registration, deletion and expiry each showed on the event stream.
    let log = &lab.sms[0].log;
    for needle in [
        "service 0x0000000000000010 \"svc-one\" of port",
        "registered (lease 5 s)",
        "deleted",
        "lease expired",
    ] {
        assert!(log.iter().any(|l| l.contains(needle)), "{needle}: {log:#?}");
    }
}

fn trap64(subscribe: u8) -> InformInfo {
    InformInfo {
        lid_range_begin: 0xFFFF,
        is_generic: 1,
        subscribe,
        notice_type: 0xFFFF,
        trap_number: 64,
        producer_type: 0xFF_FFFF,
        ..InformInfo::default()
    }
}

/// Reports (and their TIDs) the master sent to `to` since the last call.
fn reports(lab: &mut Lab, to: MadAddress) -> Vec<(u64, SaNotice)> {
    let out = lab.sms[0]
        .gmps
        .iter()
        .filter(|t| t.to.lid == to.lid && t.mad[3] == Method::REPORT.0)
        .map(|t| {
            assert_eq!(t.to.qpn, to.qpn, "to the subscriber's QP");
            let m = SaMad::decode(&t.mad).unwrap();
            assert_eq!(m.attribute_id(), SaAttributeId::NOTICE);
            (m.tid(), m.record::<SaNotice>().unwrap())
        })
        .collect();
    lab.sms[0].gmps.clear();
    out
}

fn bounce(lab: &mut Lab, ca: NodeIdx) {
    lab.sim.link_down(ca, 1).unwrap();
    lab.run_to(lab.now + Duration::from_secs(3));
    lab.sim.link_up(ca, 1).unwrap();
    lab.run_to(lab.now + Duration::from_millis(2500));
}

#[test]
fn a_subscriber_gets_reports_until_it_answers_and_none_after_unsubscribing() {
    let (mut lab, lids) = lab();
    let a = client(lids[3]);
    let cas: Vec<NodeIdx> = lab
        .topo
        .iter()
        .filter(|(_, n)| !n.is_switch())
        .map(|(i, _)| i)
        .collect();
    let r = one(
        &mut lab,
        &SaMad::query(Method::SET, 1, &trap64(1), ComponentMask::NONE).unwrap(),
        a,
    );
    assert_eq!(
        (r.method(), r.status()),
        (Method::GET_RESP, SaStatus::SUCCESS)
    );
    assert_eq!(r.record::<InformInfo>().unwrap(), trap64(1), "echoed");

    // InformInfoRecord: the subscriber sees its own; another port nothing.
    let t = InformInfoRecord {
        inform_info: trap64(0),
        ..InformInfoRecord::default()
    };
    let q = SaMad::query(Method::GET, 2, &t, InformInfoRecord::TRAP_NUMBER).unwrap();
    let r = one(&mut lab, &q, a);
    assert_eq!(r.status(), SaStatus::SUCCESS);
    assert_eq!(r.record::<InformInfoRecord>().unwrap().inform_info.qpn, 7);
    let r = one(&mut lab, &q, client(lids[5]));
    assert_eq!(r.status(), SaStatus::ERR_NO_RECORDS);

    // A port goes and comes back: trap 65 (not asked for), then 64: one Report,
    // resent while unanswered.
    lab.sms[0].gmps.clear();
    let gid5 = gid_of(&mut lab, lids[5]);
    lab.sms[0].gmps.clear();
    lab.sim.link_down(cas[5], 1).unwrap();
    lab.run_to(lab.now + Duration::from_secs(3));
    assert!(reports(&mut lab, a).is_empty(), "trap 65 is not subscribed");
    lab.sim.link_up(cas[5], 1).unwrap();
    lab.run_to(lab.now + Duration::from_millis(1500));
    let got = reports(&mut lab, a);
    assert!(got.len() >= 2, "a Report and its resends: {got:?}");
    let tid = got[0].0;
    assert!(got.iter().all(|(t, _)| *t == tid), "one Report: {got:?}");
    assert_eq!(got[0].1.notice.trap_number(), Some(64));
    assert_eq!(&got[0].1.notice.data_details[6..22], &gid5[..]);

    // The ReportResp ends the resends.
    let mut resp = SaMad::new(Method::REPORT_RESP, SaAttributeId::NOTICE, tid);
    resp.set_data(&got[0].1.encode());
    let now = lab.now;
    lab.sms[0].node.as_mut().unwrap().handle_input(
        now,
        Input::Gmp {
            mad: &resp.encode(),
            from: a,
        },
    );
    lab.drain(0);
    let sa = lab.sms[0].node.as_ref().unwrap().sa().unwrap();
    assert_eq!(sa.informs().reports_in_flight(), 0);
    assert_eq!(sa.informs().reports_acked, 1);
    lab.run_to(lab.now + Duration::from_secs(3));
    assert!(
        reports(&mut lab, a).is_empty(),
        "no resend after the ReportResp"
    );

    // Unsubscribe: no more Reports; a second unsubscribe is refused.
    let r = one(
        &mut lab,
        &SaMad::query(Method::SET, 3, &trap64(0), ComponentMask::NONE).unwrap(),
        a,
    );
    assert_eq!(r.status(), SaStatus::SUCCESS);
    let r = one(
        &mut lab,
        &SaMad::query(Method::SET, 4, &trap64(0), ComponentMask::NONE).unwrap(),
        a,
    );
    assert_eq!(r.status(), SaStatus::ERR_REQ_INVALID);
    bounce(&mut lab, cas[5]);
    assert!(reports(&mut lab, a).is_empty(), "unsubscribed");
}

#[test]
fn creating_and_deleting_a_group_is_reported_as_traps_66_and_67() {
    use ibsm_mad::sa::{JoinState, McMemberRecord};
    let (mut lab, lids) = lab();
    let a = client(lids[3]);
    let all = InformInfo {
        trap_number: 0xFFFF,
        ..trap64(1)
    };
    let r = one(
        &mut lab,
        &SaMad::query(Method::SET, 1, &all, ComponentMask::NONE).unwrap(),
        a,
    );
    assert_eq!(r.status(), SaStatus::SUCCESS);
    let mgid = [
        0xFF, 0x12, 0xA0, 0x1B, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x42,
    ];
    let join = McMemberRecord {
        mgid,
        port_gid: gid_of(&mut lab, lids[3]),
        q_key: 0x1234,
        p_key: 0xFFFF,
        join_state: JoinState::FULL_MEMBER,
        ..McMemberRecord::default()
    };
    let mask = McMemberRecord::MGID
        | McMemberRecord::PORT_GID
        | McMemberRecord::JOIN_STATE
        | McMemberRecord::Q_KEY
        | McMemberRecord::TCLASS
        | McMemberRecord::P_KEY
        | McMemberRecord::FLOW_LABEL
        | McMemberRecord::SL;
    let trap_of = |got: &[SaMad]| -> Vec<Option<u16>> {
        got.iter()
            .filter(|m| m.method() == Method::REPORT)
            .map(|m| m.record::<SaNotice>().unwrap().notice.trap_number())
            .collect()
    };
    let got = ask(
        &mut lab,
        0,
        &SaMad::query(Method::SET, 2, &join, mask).unwrap(),
        a,
    );
    assert_eq!(got[0].status(), SaStatus::SUCCESS, "{got:?}");
    assert_eq!(trap_of(&got), vec![Some(66)]);
    let got = ask(
        &mut lab,
        0,
        &SaMad::query(Method::DELETE, 3, &join, mask).unwrap(),
        a,
    );
    assert_eq!(got[0].status(), SaStatus::SUCCESS, "{got:?}");
    assert_eq!(trap_of(&got), vec![Some(67)]);
}
