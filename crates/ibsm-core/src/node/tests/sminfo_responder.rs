//! `Node::sminfo_responder`: an answer built off the node is the node's own answer,
//! byte for byte (SM_Key zeroed for a requester without rights, the M_Key rule,
//! `trusted_sm_guids`), and a request handed back as `Input::SmInfoAnswered` is counted
//! but not answered twice.

use std::collections::BTreeSet;

use ibsm_mad::SmInfo as MadSmInfo;

use super::*;
use crate::election::{SmInfoAnswer, SmInfoResponder};

const GUID: u64 = 0xabc;

/// A node past start-up (its port read: GUID 0xabc, LID 7).
fn started(cfg: NodeConfig) -> Node {
    let mut node = Node::new(cfg, Duration::ZERO);
    for step in 1..=2u32 {
        let req = transmits(&mut node);
        assert_eq!(req.len(), 1, "one start-up read at a time");
        let answer = answer_startup(&req[0], GUID);
        node.handle_input(
            MS * step,
            Input::Mad {
                mad: &answer,
                slid: 0,
            },
        );
    }
    transmits(&mut node);
    assert!(node.status().started);
    node
}

/// A SubnGet(SMInfo) whose payload names a requester presenting `sm_key`, with SMP
/// M_Key `m_key`, directed (`lid_routed` false) or LID-routed.
fn get(tid: u64, m_key: u64, sm_key: u64, lid_routed: bool) -> [u8; 256] {
    let smp = if lid_routed {
        Smp::get_lid(AttributeId::SM_INFO, 0, tid)
    } else {
        Smp::get_dr(&[], AttributeId::SM_INFO, 0, tid)
    };
    Smp { m_key, ..smp }
        .with_attribute(&MadSmInfo {
            guid: 0x77,
            sm_key,
            act_count: 3,
            priority: 5,
            sm_state: SmState::Standby,
        })
        .encode()
}

/// The node's own answer to `mad` (its SubnGetResp(SMInfo) with that TID).
fn node_answer(node: &mut Node, now: Duration, mad: &[u8; 256], slid: u16) -> SmInfoAnswer {
    node.handle_input(now, Input::Mad { mad, slid });
    let tid = Smp::decode(mad).unwrap().tid;
    transmits(node)
        .into_iter()
        .find(|o| Smp::decode(&o.mad).is_ok_and(|s| s.method == Method::GET_RESP && s.tid == tid))
        .map(|o| SmInfoAnswer {
            mad: o.mad,
            dlid: o.dlid,
        })
        .expect("the node answers its SubnGet(SMInfo)")
}

fn answered_sm_key(a: &SmInfoAnswer) -> u64 {
    Smp::decode(&a.mad)
        .unwrap()
        .attribute::<MadSmInfo>()
        .unwrap()
        .sm_key
}

#[test]
fn an_answer_built_off_the_node_is_the_nodes_own_answer() {
    let mut c = cfg(9);
    c.election.sm_key = 0x5eed;
    c.subnet.m_key.key = 0xbeef;
    let mut node = started(c);
    // (tid, SMP M_Key, payload SM_Key, LID-routed, slid, SM_Key expected in the answer)
    let cases = [
        (0x10, 0, 0, false, 0, 0),           // no rights: SM_Key reads 0
        (0x11, 0xbeef, 0, false, 0, 0x5eed), // our M_Key
        (0x12, 0, 0x5eed, true, 12, 0x5eed), // our SM_Key in the payload, by LID
        (0x13, 0x1234, 0x9999, true, 13, 0), // wrong keys, by LID
        (0x14, 0, 0, true, 0, 0),            // LID-routed with no SLID
    ];
    for (i, (tid, m_key, sm_key, lid_routed, slid, want_key)) in cases.into_iter().enumerate() {
        let mad = get(tid, m_key, sm_key, lid_routed);
        let responder = node.sminfo_responder().expect("running");
        let fast = responder.answer(&mad, slid).expect("a SubnGet(SMInfo)");
        let now = MS * (10 + u32::try_from(i).unwrap());
        let own = node_answer(&mut node, now, &mad, slid);
        assert_eq!(
            fast, own,
            "case {i}: the same bytes and LID as the node's answer"
        );
        assert_eq!(
            answered_sm_key(&fast),
            want_key,
            "case {i}: the SM_Key rule"
        );
        let info = responder.info();
        assert_eq!((info.guid, info.priority), (GUID, 9));
    }
    // Not a SubnGet(SMInfo): nothing to answer off the node.
    let responder = node.sminfo_responder().unwrap();
    let ni = Smp::get_dr(&[], AttributeId::NODE_INFO, 0, 0x20).encode();
    assert!(!SmInfoResponder::is_sminfo_get(&ni));
    assert_eq!(responder.answer(&ni, 0), None);
}

#[test]
fn with_trusted_sms_an_unknown_requester_reads_no_sm_key_either_way() {
    let mut c = cfg(9);
    c.election.sm_key = 0x5eed;
    c.election.trusted_sm_guids = Some(BTreeSet::from([0x77]));
    let mut node = started(c);
    // The payload names a trusted GUID and presents our key, but no sweep found the
    // port it came from: untrusted, in both answers.
    let mad = get(0x30, 0, 0x5eed, true);
    let fast = node
        .sminfo_responder()
        .unwrap()
        .answer(&mad, 21)
        .expect("answer");
    let own = node_answer(&mut node, MS * 30, &mad, 21);
    assert_eq!(fast, own);
    assert_eq!(answered_sm_key(&fast), 0);
}

#[test]
fn a_request_the_driver_answered_is_counted_and_not_answered_again() {
    let mut node = started(cfg(9));
    let before = node.status().sminfo_requests;
    let mad = get(0x40, 0, 0, false);
    node.handle_input(MS * 40, Input::SmInfoAnswered { mad: &mad, slid: 0 });
    let sent = transmits(&mut node);
    assert!(
        !sent
            .iter()
            .any(|o| Smp::decode(&o.mad).is_ok_and(|s| s.method == Method::GET_RESP)),
        "no second answer: {sent:?}"
    );
    assert_eq!(node.status().sminfo_requests, before + 1, "still counted");
    // The next request, not answered by the driver, is answered by the node.
    let mad = get(0x41, 0, 0, false);
    node_answer(&mut node, MS * 41, &mad, 0);
}

#[test]
fn act_count_in_the_answer_moves_only_with_the_nodes_work() {
    let mut node = started(cfg(9));
    let responder = node.sminfo_responder().unwrap();
    let mad = get(0x50, 0, 0, false);
    let a = responder.answer(&mad, 0).unwrap();
    let b = responder.answer(&mad, 0).unwrap();
    assert_eq!(a, b, "answering does not move ActCount");
    // The node works (its timers: sweeps, polls): ActCount moves in the next value.
    let before = responder.info().act_count;
    let mut now = MS * 50;
    for _ in 0..50 {
        if node.sminfo_responder().unwrap().info().act_count != before {
            break;
        }
        now = node.poll_timeout().unwrap_or(now + MS).max(now + MS);
        node.handle_timeout(now);
        transmits(&mut node);
    }
    assert_ne!(node.sminfo_responder().unwrap().info().act_count, before);
}
