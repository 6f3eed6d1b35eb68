//! Unit tests of the election: legality table, SM_Key, polling, stall, sticky, trap 144.

use super::*;
use std::time::Duration;

const ME: u64 = 0x0002_c903_0000_0010;
const PEER: u64 = 0x0002_c903_0000_0020;
const PEER_LID: u16 = 7;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn cfg(priority: u8) -> ElectionConfig {
    ElectionConfig {
        priority,
        ..ElectionConfig::new(ME)
    }
}

fn peer_port() -> SmPort {
    SmPort {
        guid: PEER,
        route: SmRoute::Lid(PEER_LID),
        lid: Some(PEER_LID),
    }
}

fn peer_info(state: SmState, priority: u8, act_count: u32) -> SmInfo {
    SmInfo {
        guid: PEER,
        sm_key: 0,
        act_count,
        priority,
        state,
    }
}

fn transmits(e: &mut Election) -> Vec<Transmit> {
    std::iter::from_fn(|| e.poll_transmit()).collect()
}

fn events(e: &mut Election) -> Vec<ElectionEvent> {
    std::iter::from_fn(|| e.poll_event()).collect()
}

fn gets_to(t: &[Transmit], dest: &SmRoute) -> Vec<u64> {
    t.iter()
        .filter(|t| &t.dest == dest && matches!(t.msg, SmInfoMsg::Get { .. }))
        .map(|t| t.msg.tid())
        .collect()
}

fn answer(e: &mut Election, now: Duration, tid: u64, info: SmInfo) {
    e.handle_message(
        now,
        SmRoute::Lid(PEER_LID),
        SmInfoMsg::GetResp {
            tid,
            status: 0,
            attr_mod: 0,
            info,
        },
    );
}

fn master(c: ElectionConfig) -> Election {
    let mut e = Election::new(c, ms(0)).expect("valid config");
    e.handle_sweep(ms(0), &[]);
    assert_eq!(e.state(), SmState::Master);
    transmits(&mut e);
    events(&mut e);
    e
}

/// STANDBY behind PEER (a master of priority `peer_prio`).
fn standby(c: ElectionConfig, peer_prio: u8) -> Election {
    let mut e = Election::new(c, ms(0)).expect("valid config");
    e.handle_sweep(ms(0), &[peer_port()]);
    let t = transmits(&mut e);
    let tids = gets_to(&t, &SmRoute::Lid(PEER_LID));
    assert_eq!(tids.len(), 1);
    answer(
        &mut e,
        ms(1),
        tids[0],
        peer_info(SmState::Master, peer_prio, 1),
    );
    assert_eq!(e.state(), SmState::Standby);
    assert_eq!(e.master_guid(), Some(PEER));
    transmits(&mut e);
    events(&mut e);
    e
}

fn not_active() -> Election {
    let mut e = standby(cfg(1), 5);
    set(&mut e, ControlPacket::Disable, SmState::Master, 1);
    assert_eq!(e.state(), SmState::NotActive);
    transmits(&mut e);
    events(&mut e);
    e
}

/// MASTER with a HANDOVER to PEER outstanding.
fn master_handing_over() -> Election {
    let mut e = master(cfg(1));
    e.handle_sweep(ms(10), &[peer_port()]);
    let t = transmits(&mut e);
    let tids = gets_to(&t, &SmRoute::Lid(PEER_LID));
    answer(&mut e, ms(11), tids[0], peer_info(SmState::Standby, 9, 0));
    assert_eq!(e.handover_target(), Some(PEER));
    transmits(&mut e);
    events(&mut e);
    e
}

/// Sends a control packet from PEER; returns the MAD status of our response.
fn set(e: &mut Election, packet: ControlPacket, sender_state: SmState, key: u64) -> u16 {
    set_raw(e, packet.attr_mod(), sender_state, key)
}

fn set_raw(e: &mut Election, attr_mod: u32, sender_state: SmState, key: u64) -> u16 {
    let tid = 0xabc0 + u64::from(attr_mod);
    e.handle_message(
        ms(50),
        SmRoute::Lid(PEER_LID),
        SmInfoMsg::Set {
            tid,
            m_key: 0,
            attr_mod,
            info: SmInfo {
                sm_key: key,
                ..peer_info(sender_state, 9, 3)
            },
        },
    );
    let t = transmits(e);
    let resp: Vec<u16> = t
        .iter()
        .filter_map(|t| match t.msg {
            SmInfoMsg::GetResp { tid: r, status, .. } if r == tid => Some(status),
            _ => None,
        })
        .collect();
    assert_eq!(resp.len(), 1, "exactly one response to the Set: {t:?}");
    resp[0]
}

#[derive(Clone, Copy, Debug)]
enum Start {
    NotActive,
    Discovering,
    Standby,
    Master,
    MasterHandingOver,
}

fn start(s: Start) -> Election {
    match s {
        Start::NotActive => not_active(),
        Start::Discovering => Election::new(cfg(1), ms(0)).expect("valid"),
        Start::Standby => standby(cfg(1), 5),
        Start::Master => master(cfg(1)),
        Start::MasterHandingOver => master_handing_over(),
    }
}

#[test]
fn legality_table() {
    use ControlPacket as C;
    use SmState as S;
    // (state we are in, packet, accepted?, state after) with the correct sender state.
    let table: &[(Start, C, bool, S)] = &[
        (Start::NotActive, C::Handover, false, S::NotActive),
        (Start::NotActive, C::Acknowledge, false, S::NotActive),
        (Start::NotActive, C::Disable, false, S::NotActive),
        (Start::NotActive, C::Standby, true, S::Standby),
        (Start::NotActive, C::Discover, false, S::NotActive),
        (Start::Discovering, C::Handover, true, S::Discovering),
        (Start::Discovering, C::Acknowledge, false, S::Discovering),
        (Start::Discovering, C::Disable, false, S::Discovering),
        (Start::Discovering, C::Standby, false, S::Discovering),
        (Start::Discovering, C::Discover, false, S::Discovering),
        (Start::Standby, C::Handover, true, S::Master),
        (Start::Standby, C::Acknowledge, true, S::Standby),
        (Start::Standby, C::Disable, true, S::NotActive),
        (Start::Standby, C::Standby, false, S::Standby),
        (Start::Standby, C::Discover, true, S::Discovering),
        (Start::Master, C::Handover, true, S::Master),
        (Start::Master, C::Acknowledge, false, S::Master),
        (Start::Master, C::Disable, false, S::Master),
        (Start::Master, C::Standby, false, S::Master),
        (Start::Master, C::Discover, false, S::Master),
        (Start::MasterHandingOver, C::Acknowledge, true, S::Standby),
        (Start::MasterHandingOver, C::Handover, true, S::Master),
        (Start::MasterHandingOver, C::Disable, false, S::Master),
    ];
    for &(st, packet, ok, after) in table {
        let mut e = start(st);
        let status = set(&mut e, packet, packet.required_sender_state(), 1);
        let expect = if ok { 0 } else { STATUS_INVALID_VALUE };
        assert_eq!(status, expect, "{st:?} {packet}");
        assert_eq!(e.state(), after, "{st:?} {packet}");
        let ev = events(&mut e);
        assert_eq!(
            ev.iter().any(|e| matches!(
                e,
                ElectionEvent::ControlRejected {
                    reason: RejectReason::IllegalInState,
                    ..
                }
            )),
            !ok,
            "{st:?} {packet}: {ev:?}"
        );
        // The same packet with the wrong sender SMState is always rejected, state unchanged.
        let wrong = match packet.required_sender_state() {
            S::Master => S::Standby,
            _ => S::Master,
        };
        let mut e = start(st);
        let before = e.state();
        assert_eq!(
            set(&mut e, packet, wrong, 1),
            STATUS_INVALID_VALUE,
            "{st:?} {packet} wrong sender"
        );
        assert_eq!(e.state(), before);
        assert!(events(&mut e).iter().any(|e| matches!(
            e,
            ElectionEvent::ControlRejected {
                reason: RejectReason::BadSenderState,
                ..
            }
        )));
    }
    // Modifiers that are not control packets.
    for attr_mod in [0u32, 6, 0xffff_ffff] {
        let mut e = start(Start::Standby);
        assert_eq!(
            set_raw(&mut e, attr_mod, S::Master, 1),
            STATUS_INVALID_VALUE
        );
        assert_eq!(e.state(), S::Standby);
    }
    // The static table agrees with OpenSM's.
    assert!(C::Handover.legal_in(S::Discovering));
    assert!(!C::Acknowledge.legal_in(S::Master));
}

#[test]
fn handover_in_standby_makes_master_and_acknowledges() {
    let mut e = standby(cfg(1), 5);
    e.handle_message(
        ms(50),
        SmRoute::Lid(PEER_LID),
        SmInfoMsg::Set {
            tid: 42,
            m_key: 0,
            attr_mod: ControlPacket::Handover.attr_mod(),
            info: SmInfo {
                sm_key: 1,
                ..peer_info(SmState::Master, 5, 3)
            },
        },
    );
    assert_eq!(e.state(), SmState::Master);
    let t = transmits(&mut e);
    assert!(t.iter().any(|t| matches!(
        t.msg,
        SmInfoMsg::GetResp {
            tid: 42,
            status: 0,
            ..
        }
    )));
    let ack: Vec<&Transmit> = t
        .iter()
        .filter(|t| matches!(t.msg, SmInfoMsg::Set { attr_mod: 2, .. }))
        .collect();
    assert_eq!(ack.len(), 1);
    assert_eq!(ack[0].dest, SmRoute::Lid(PEER_LID));
    match &ack[0].msg {
        SmInfoMsg::Set { info, .. } => {
            assert_eq!(info.state, SmState::Standby, "ACKNOWLEDGE carries STANDBY");
            assert_eq!(info.guid, ME);
        }
        m => panic!("unexpected {m:?}"),
    }
    let ev = events(&mut e);
    assert_eq!(
        ev[0].to_string(),
        format!("sm state: STANDBY -> MASTER (HANDOVER from {PEER:#018x})")
    );
}

#[test]
fn handover_sent_completes_on_status_zero_without_acknowledge() {
    // OpenSM as the receiver: accepts the Set, never sends ACKNOWLEDGE.
    let mut e = master(cfg(1));
    e.handle_sweep(ms(10), &[peer_port()]);
    let t = transmits(&mut e);
    let tids = gets_to(&t, &SmRoute::Lid(PEER_LID));
    answer(&mut e, ms(11), tids[0], peer_info(SmState::Standby, 9, 0));
    let t = transmits(&mut e);
    let ho: Vec<&Transmit> = t
        .iter()
        .filter(|t| matches!(t.msg, SmInfoMsg::Set { attr_mod: 1, .. }))
        .collect();
    assert_eq!(ho.len(), 1);
    let (tid, info) = match &ho[0].msg {
        SmInfoMsg::Set { tid, info, .. } => (*tid, *info),
        m => panic!("{m:?}"),
    };
    assert_eq!(info.state, SmState::Master, "HANDOVER carries MASTER");
    assert_eq!(info.sm_key, 1);
    // Lost once: retried with the same TID.
    e.handle_timeout(ms(11) + e.config().handover_timeout);
    let t = transmits(&mut e);
    assert!(t.iter().any(|t| t.msg.tid() == tid));
    e.handle_message(
        ms(300),
        SmRoute::Lid(PEER_LID),
        SmInfoMsg::GetResp {
            tid,
            status: 0,
            attr_mod: 1,
            info: peer_info(SmState::Standby, 9, 0),
        },
    );
    assert_eq!(e.state(), SmState::Standby);
    assert_eq!(e.master_guid(), Some(PEER));
}

#[test]
fn handover_unanswered_stays_master() {
    let mut e = master_handing_over();
    let c = e.config().clone();
    let mut now = ms(11);
    for _ in 0..=c.handover_retries {
        now += c.handover_timeout;
        e.handle_timeout(now);
    }
    assert_eq!(e.state(), SmState::Master);
    assert_eq!(e.handover_target(), None);
    assert!(events(&mut e).iter().any(|e| matches!(
        e,
        ElectionEvent::HandoverFailed {
            to: PEER,
            status: None
        }
    )));
}

#[test]
fn get_answer_carries_sm_key_only_to_authenticated_requesters() {
    let c = ElectionConfig {
        sm_key: 0x1234,
        ..cfg(3)
    };
    let mut e = master(c);
    let mut ask = |m_key: u64, payload_key: u64| {
        e.handle_message(
            ms(5),
            SmRoute::Lid(PEER_LID),
            SmInfoMsg::Get {
                tid: 9,
                m_key,
                info: SmInfo {
                    sm_key: payload_key,
                    ..peer_info(SmState::Standby, 0, 0)
                },
            },
        );
        match transmits(&mut e).pop().map(|t| t.msg) {
            Some(SmInfoMsg::GetResp {
                info,
                status: 0,
                tid: 9,
                ..
            }) => info,
            m => panic!("{m:?}"),
        }
    };
    let anon = ask(0, 0);
    assert_eq!(anon.sm_key, 0);
    assert_eq!(
        (anon.guid, anon.priority, anon.state),
        (ME, 3, SmState::Master)
    );
    assert_eq!(ask(0x1234, 0).sm_key, 0x1234, "M_Key matches");
    assert_eq!(ask(0, 0x1234).sm_key, 0x1234, "payload presents the SM_Key");
    assert_eq!(ask(0x9999, 1).sm_key, 0, "wrong keys");
}

#[test]
fn set_with_wrong_sm_key_is_rejected_and_counted() {
    let mut e = standby(cfg(1), 5);
    assert_eq!(
        set(&mut e, ControlPacket::Discover, SmState::Master, 2),
        STATUS_INVALID_VALUE
    );
    assert_eq!(
        set(&mut e, ControlPacket::Discover, SmState::Master, 0),
        STATUS_INVALID_VALUE
    );
    assert_eq!(e.sm_key_violations(), 2);
    assert_eq!(e.state(), SmState::Standby);
    assert!(events(&mut e).iter().all(|e| matches!(
        e,
        ElectionEvent::ControlRejected {
            reason: RejectReason::SmKeyMismatch,
            ..
        }
    )));

    let mut e = standby(
        ElectionConfig {
            sm_key_policy: SmKeyPolicy::AllowZero,
            ..cfg(1)
        },
        5,
    );
    assert_eq!(
        set(&mut e, ControlPacket::Handover, SmState::Master, 2),
        STATUS_INVALID_VALUE
    );
    assert_eq!(
        set(&mut e, ControlPacket::Handover, SmState::Master, 0),
        0,
        "OpenSM's HANDOVER"
    );
    assert_eq!(e.state(), SmState::Master);

    let mut e = standby(
        ElectionConfig {
            sm_key_policy: SmKeyPolicy::Off,
            ..cfg(1)
        },
        5,
    );
    assert_eq!(set(&mut e, ControlPacket::Disable, SmState::Master, 77), 0);
    assert_eq!(e.sm_key_violations(), 0);
}

#[test]
fn foreign_sm_key_in_answer_is_ignored() {
    let mut e = Election::new(cfg(1), ms(0)).expect("valid");
    e.handle_sweep(ms(0), &[peer_port()]);
    let tids = gets_to(&transmits(&mut e), &SmRoute::Lid(PEER_LID));
    answer(
        &mut e,
        ms(1),
        tids[0],
        SmInfo {
            sm_key: 99,
            ..peer_info(SmState::Master, 9, 1)
        },
    );
    assert_eq!(
        e.state(),
        SmState::Master,
        "the foreign master does not count"
    );
    assert!(events(&mut e)
        .iter()
        .any(|e| matches!(e, ElectionEvent::RemoteSmKeyMismatch { guid: PEER })));
}

fn poll_once(e: &mut Election, now: Duration) -> Option<u64> {
    e.handle_timeout(now);
    gets_to(&transmits(e), &SmRoute::Lid(PEER_LID))
        .first()
        .copied()
}

#[test]
fn missed_polls_fail_over_after_retries() {
    let mut e = standby(cfg(1), 5);
    let c = e.config().clone();
    let mut now = ms(1);
    let mut polls = 0;
    while e.state() == SmState::Standby {
        now = e.poll_timeout().expect("standby has a timer");
        if poll_once(&mut e, now).is_some() && e.state() == SmState::Standby {
            polls += 1;
        }
        assert!(now < ms(1000));
    }
    assert_eq!(polls, c.poll_retries);
    assert_eq!(e.state(), SmState::Discovering);
    assert!(now <= ms(1) + c.poll_interval * (c.poll_retries + 1));
    let ev = events(&mut e);
    assert_eq!(
        ev[0].to_string(),
        format!("sm state: STANDBY -> DISCOVERING (master {PEER:#018x} missed 3 polls)")
    );
}

#[test]
fn answered_polls_keep_standby() {
    let mut e = standby(cfg(1), 5);
    let mut act = 1;
    for i in 1..=50u64 {
        let now = ms(1) + e.config().poll_interval * i as u32;
        let tid = poll_once(&mut e, now).expect("poll sent");
        act += 1;
        answer(&mut e, now + ms(2), tid, peer_info(SmState::Master, 5, act));
    }
    assert_eq!(e.state(), SmState::Standby);
}

#[test]
fn stalled_act_count_declares_master_lost_then_we_take_over() {
    let c = ElectionConfig {
        stall_window: Some(ms(500)),
        ..cfg(1)
    };
    let mut e = standby(c, 5);
    let mut now = ms(1);
    while e.state() == SmState::Standby {
        now = e.poll_timeout().expect("timer");
        if let Some(tid) = poll_once(&mut e, now) {
            answer(&mut e, now + ms(1), tid, peer_info(SmState::Master, 5, 1));
        }
        assert!(now < ms(2000));
    }
    assert!(now >= ms(500));
    let ev = events(&mut e);
    assert!(
        matches!(
            ev[0],
            ElectionEvent::StateChanged {
                to: SmState::Discovering,
                reason: TransitionReason::ActCountStalled {
                    master: PEER,
                    act_count: 1,
                    ..
                },
                ..
            }
        ),
        "{ev:?}"
    );
    assert!(
        ev[0].to_string().contains("ActCount stalled at 1"),
        "{}",
        ev[0]
    );
    // Discovery: the stalled master still claims MASTER, but with the same ActCount.
    let t = transmits(&mut e);
    let tids = gets_to(&t, &SmRoute::Lid(PEER_LID));
    answer(
        &mut e,
        now + ms(2),
        tids[0],
        peer_info(SmState::Master, 5, 1),
    );
    assert_eq!(e.state(), SmState::Master);
}

#[test]
fn tie_breaks_by_lower_guid() {
    // Same priority, PEER has the higher GUID: we do not follow it, we become master.
    let mut e = Election::new(cfg(4), ms(0)).expect("valid");
    e.handle_sweep(ms(0), &[peer_port()]);
    let tids = gets_to(&transmits(&mut e), &SmRoute::Lid(PEER_LID));
    answer(
        &mut e,
        ms(1),
        tids[0],
        peer_info(SmState::Discovering, 4, 0),
    );
    assert_eq!(e.state(), SmState::Master);
    // Same priority, PEER has a lower GUID: we follow it.
    let low = SmPort {
        guid: 1,
        ..peer_port()
    };
    let mut e = Election::new(cfg(4), ms(0)).expect("valid");
    e.handle_sweep(ms(0), &[low]);
    let tids = gets_to(&transmits(&mut e), &SmRoute::Lid(PEER_LID));
    answer(
        &mut e,
        ms(1),
        tids[0],
        SmInfo {
            guid: 1,
            ..peer_info(SmState::Discovering, 4, 0)
        },
    );
    assert_eq!(e.state(), SmState::Standby);
    assert_eq!(e.master_guid(), Some(1));
}

#[test]
fn sticky_master_elevates_and_keeps_mastership() {
    let c = ElectionConfig {
        sticky_priority: Some(15),
        ..cfg(2)
    };
    let mut e = Election::new(c, ms(0)).expect("valid");
    e.handle_sweep(ms(0), &[]);
    assert_eq!(e.state(), SmState::Master);
    assert_eq!(e.priority(), 15);
    assert_eq!(e.configured_priority(), 2);
    assert!(events(&mut e)
        .iter()
        .any(|e| matches!(e, ElectionEvent::PriorityChanged { from: 2, to: 15 })));
    // A returning SM with configured priority 9 shows up as STANDBY: no handover.
    e.handle_sweep(ms(10), &[peer_port()]);
    let tids = gets_to(&transmits(&mut e), &SmRoute::Lid(PEER_LID));
    answer(&mut e, ms(11), tids[0], peer_info(SmState::Standby, 9, 0));
    assert_eq!(e.handover_target(), None);
    assert!(transmits(&mut e).is_empty());
    // Our SMInfo advertises the elevated priority.
    assert_eq!(e.sm_info().priority, 15);

    // The same without sticky hands over.
    let mut e = master(cfg(2));
    e.handle_sweep(ms(10), &[peer_port()]);
    let tids = gets_to(&transmits(&mut e), &SmRoute::Lid(PEER_LID));
    answer(&mut e, ms(11), tids[0], peer_info(SmState::Standby, 9, 0));
    assert_eq!(e.handover_target(), Some(PEER));
}

#[test]
fn priority_raise_in_standby_sends_trap_144_and_master_hands_over() {
    // Standby side.
    let mut s = standby(cfg(1), 5);
    s.set_local_lid(3);
    s.set_priority(ms(20), 9).expect("in range");
    let t = transmits(&mut s);
    let trap: Vec<&Transmit> = t
        .iter()
        .filter(|t| matches!(t.msg, SmInfoMsg::Trap144 { .. }))
        .collect();
    assert_eq!(trap.len(), 1);
    assert_eq!(trap[0].dest, SmRoute::Lid(PEER_LID), "to the master's LID");
    let trap_msg = trap[0].msg.clone();
    assert!(matches!(
        trap_msg,
        SmInfoMsg::Trap144 {
            issuer_lid: 3,
            issuer_guid: ME,
            ..
        }
    ));
    // Retransmitted until TrapRepress.
    s.handle_timeout(ms(20) + s.config().query_timeout);
    assert!(transmits(&mut s).iter().any(|t| t.msg == trap_msg));
    s.handle_message(
        ms(150),
        SmRoute::Lid(PEER_LID),
        SmInfoMsg::TrapRepress {
            tid: trap_msg.tid(),
        },
    );
    s.handle_timeout(ms(150) + s.config().query_timeout * 5);
    assert!(!transmits(&mut s).iter().any(|t| t.msg == trap_msg));
    assert!(s.set_priority(ms(200), 16).is_err());

    // Master side: PEER (now the standby, priority 9) traps us (priority 5).
    let mut m = master(cfg(5));
    m.handle_sweep(ms(0), &[peer_port()]);
    let first = gets_to(&transmits(&mut m), &SmRoute::Lid(PEER_LID));
    answer(&mut m, ms(1), first[0], peer_info(SmState::Standby, 1, 0));
    assert_eq!(m.handover_target(), None, "PEER is lower for now");
    m.handle_message(
        ms(30),
        SmRoute::Lid(PEER_LID),
        SmInfoMsg::Trap144 {
            tid: 77,
            issuer_lid: PEER_LID,
            issuer_guid: 0,
        },
    );
    let t = transmits(&mut m);
    assert!(t
        .iter()
        .any(|t| t.msg == SmInfoMsg::TrapRepress { tid: 77 }));
    let q = gets_to(&t, &SmRoute::Lid(PEER_LID));
    assert_eq!(q.len(), 1, "master re-reads the trapper's SMInfo");
    answer(&mut m, ms(31), q[0], peer_info(SmState::Standby, 9, 0));
    assert_eq!(m.handover_target(), Some(PEER));
}

#[test]
fn not_active_leaves_only_on_standby() {
    let mut e = not_active();
    // Time passes: nothing happens.
    e.handle_timeout(ms(100_000));
    assert_eq!(e.state(), SmState::NotActive);
    assert!(transmits(&mut e).is_empty());
    assert_eq!(e.poll_timeout(), None);
    assert_eq!(set(&mut e, ControlPacket::Standby, SmState::Master, 1), 0);
    assert_eq!(e.state(), SmState::Standby);
    assert_eq!(e.master_guid(), Some(PEER));
}

#[test]
fn config_is_validated() {
    assert!(Election::new(ElectionConfig::new(0), ms(0)).is_err());
    assert!(Election::new(cfg(16), ms(0)).is_err());
    let mut c = cfg(1);
    c.poll_interval = Duration::ZERO;
    assert!(Election::new(c, ms(0)).is_err());
    let mut c = cfg(1);
    c.sticky_priority = Some(20);
    assert!(Election::new(c, ms(0)).is_err());
}

#[test]
fn master_sends_control_packets_only_as_master() {
    let mut s = standby(cfg(1), 5);
    assert!(matches!(
        s.send_control(ms(5), PEER, ControlPacket::Disable),
        Err(ElectionError::NotMaster { .. })
    ));
    let mut m = master(cfg(1));
    assert!(matches!(
        m.send_control(ms(5), PEER, ControlPacket::Disable),
        Err(ElectionError::UnknownPeer { .. })
    ));
    m.handle_sweep(ms(6), &[peer_port()]);
    transmits(&mut m);
    assert!(m
        .send_control(ms(7), PEER, ControlPacket::Handover)
        .is_err());
    m.send_control(ms(7), PEER, ControlPacket::Disable)
        .expect("master");
    let t = transmits(&mut m);
    let tid = t
        .iter()
        .find(|t| matches!(t.msg, SmInfoMsg::Set { attr_mod: 3, .. }))
        .map(|t| t.msg.tid())
        .expect("DISABLE sent");
    m.handle_message(
        ms(8),
        SmRoute::Lid(PEER_LID),
        SmInfoMsg::GetResp {
            tid,
            status: 0,
            attr_mod: 3,
            info: peer_info(SmState::Standby, 0, 0),
        },
    );
    assert!(events(&mut m).iter().any(|e| matches!(
        e,
        ElectionEvent::ControlAnswered {
            to: PEER,
            packet: ControlPacket::Disable,
            status: Some(0)
        }
    )));
}

#[test]
fn directed_reply_route_reverses_the_return_path() {
    let from = SmRoute::Directed(DrRoute {
        hop_cnt: 2,
        initial_path: vec![0, 3, 5],
        return_path: vec![0, 7, 9],
        dr_slid: 0xffff,
        dr_dlid: 0xffff,
    });
    assert_eq!(
        route_for_new_request(&from),
        SmRoute::Directed(DrRoute::new(&[9, 7]))
    );
    assert_eq!(
        SmRoute::Directed(DrRoute::new(&[9, 7])).to_string(),
        "dr 9,7"
    );
}
