//! Unit tests of the election: legality table, SM_Key, polling, stall, sticky, trap 144.

mod defer_sweep;
mod detection;
mod false_takeover;

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
        sm_state: state,
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
            assert_eq!(
                info.sm_state,
                SmState::Standby,
                "ACKNOWLEDGE carries STANDBY"
            );
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
    assert_eq!(info.sm_state, SmState::Master, "HANDOVER carries MASTER");
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
    // Our port has an M_Key: the M_Key rule applies.
    let c = ElectionConfig {
        sm_key: 0x1234,
        m_key: 0x77,
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
        // The answer (a master also reads back an SM it does not know yet).
        match transmits(&mut e)
            .into_iter()
            .map(|t| t.msg)
            .find(|m| matches!(m, SmInfoMsg::GetResp { .. }))
        {
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
        (anon.guid, anon.priority, anon.sm_state),
        (ME, 3, SmState::Master)
    );
    assert_eq!(ask(0x77, 0).sm_key, 0x1234, "M_Key matches our port's");
    assert_eq!(
        ask(0x1234, 0).sm_key,
        0,
        "an SMP M_Key equal to the SM_Key is no M_Key"
    );
    assert_eq!(ask(0, 0x1234).sm_key, 0x1234, "payload presents the SM_Key");
    assert_eq!(ask(0x9999, 1).sm_key, 0, "wrong keys");
}

#[test]
fn without_an_m_key_every_requester_reads_our_sm_key() {
    // Our port has no M_Key (the default): everyone passes the M_Key rule, as with
    // OpenSM; OpenSM ignores a peer whose answer carries an SM_Key other than its own,
    // so this is what lets OpenSM (key 1) see us at all.
    let mut e = master(cfg(3));
    // OpenSM's SubnGet(SMInfo): M_Key 0, all-zero payload.
    e.handle_message(
        ms(5),
        SmRoute::Lid(PEER_LID),
        SmInfoMsg::Get {
            tid: 9,
            m_key: 0,
            info: SmInfo {
                guid: 0,
                sm_key: 0,
                act_count: 0,
                priority: 0,
                sm_state: SmState::NotActive,
            },
        },
    );
    match transmits(&mut e).pop().map(|t| t.msg) {
        Some(SmInfoMsg::GetResp { info, .. }) => assert_eq!(info.sm_key, 1),
        m => panic!("{m:?}"),
    }
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
fn a_master_lost_to_missed_polls_is_not_asked_again_over_the_same_route() {
    // The failover budget: the polls and re-polls were the lost master's last queries
    // over its route, so the round sends it none (no query_timeout added to every
    // failover) and concludes as soon as the fresh sweep finds it over the same route.
    let mut e = standby(cfg(1), 5);
    let mut now = ms(1);
    let mut queries_to_lost = 0;
    while e.state() == SmState::Standby {
        now = e.poll_timeout().expect("standby has a timer");
        e.handle_timeout(now);
        let sent = gets_to(&transmits(&mut e), &SmRoute::Lid(PEER_LID)).len();
        if e.state() == SmState::Discovering {
            queries_to_lost += sent; // what the round sent with the transition
        }
    }
    assert_eq!(queries_to_lost, 0, "no query to the lost master");
    assert_eq!(e.poll_timeout(), None, "nothing to wait for but the sweep");
    // Silent over the route the last sweep recorded: the round asks for a fresh sweep
    // (once) instead of concluding; the sweep finds the same route, so it is dead.
    assert_eq!(e.state(), SmState::Discovering);
    let evs = events(&mut e);
    assert_eq!(
        evs.iter()
            .filter(|v| **v == ElectionEvent::DiscoveryNeeded)
            .count(),
        1,
        "{evs:?}"
    );
    e.handle_sweep(now, &[peer_port()]);
    assert_eq!(
        e.state(),
        SmState::Master,
        "concluded without waiting for it"
    );
    // As MASTER it confirms the SM that never answered (see
    // `false_takeover_ends_within_a_re_poll_of_the_old_master_answering`).
    let confirm = gets_to(&transmits(&mut e), &SmRoute::Lid(PEER_LID));
    assert_eq!(confirm.len(), 1, "one confirmation query, after MASTER");
}

/// Standby behind PEER whose polls all went unanswered until DISCOVERING, and the
/// one query to the lost master timed out: the round now waits for a fresh sweep.
fn lost_master_waiting_for_a_sweep() -> (Election, Duration) {
    let mut e = standby(cfg(1), 5);
    let mut now = ms(1);
    while e.state() == SmState::Standby {
        now = e.poll_timeout().expect("standby has a timer");
        e.handle_timeout(now);
    }
    while let Some(t) = e.poll_timeout() {
        now = t;
        e.handle_timeout(now);
    }
    transmits(&mut e);
    assert!(events(&mut e).contains(&ElectionEvent::DiscoveryNeeded));
    assert_eq!(
        e.state(),
        SmState::Discovering,
        "no MASTER before a fresh sweep"
    );
    (e, now)
}

#[test]
fn a_lost_master_reached_by_a_new_route_is_asked_again_and_followed() {
    // A cable on the directed route to the master went down: the polls and the last
    // query die on the old path, but the master is alive. The fresh sweep finds it over
    // another path; asked there, it answers MASTER, and we stay a standby behind it
    // (no false failover, no two masters).
    let (mut e, now) = lost_master_waiting_for_a_sweep();
    let new_route = SmRoute::Directed(DrRoute::new(&[0, 2, 3]));
    e.handle_sweep(
        now,
        &[SmPort {
            route: new_route.clone(),
            ..peer_port()
        }],
    );
    assert_eq!(e.state(), SmState::Discovering);
    let tids = gets_to(&transmits(&mut e), &new_route);
    assert_eq!(tids.len(), 1, "asked over the new route");
    e.handle_message(
        now + ms(1),
        new_route.clone(),
        SmInfoMsg::GetResp {
            tid: tids[0],
            status: 0,
            attr_mod: 0,
            info: peer_info(SmState::Master, 5, 40),
        },
    );
    assert_eq!(e.state(), SmState::Standby);
    assert_eq!(e.master_guid(), Some(PEER));
}

#[test]
fn a_new_route_in_the_fresh_sweep_is_asked_at_once() {
    // The lost master's polls died on the old route; the fresh sweep reports it over
    // a new one: it is asked there (with retries) before anyone declares it dead.
    let mut e = standby(cfg(1), 5);
    let mut now = ms(1);
    while e.state() == SmState::Standby {
        now = e.poll_timeout().expect("standby has a timer");
        e.handle_timeout(now);
        transmits(&mut e);
    }
    let new_route = SmRoute::Directed(DrRoute::new(&[0, 2, 3]));
    e.handle_sweep(
        now + ms(1),
        &[SmPort {
            route: new_route.clone(),
            ..peer_port()
        }],
    );
    assert_eq!(e.state(), SmState::Discovering, "not declared dead");
    let tids = gets_to(&transmits(&mut e), &new_route);
    assert_eq!(tids.len(), 1, "asked over the new route");
    let t = e.poll_timeout().expect("the query's timeout");
    e.handle_timeout(t);
    let retry = gets_to(&transmits(&mut e), &new_route);
    assert_eq!(retry, tids, "retried, not given up");
    e.handle_message(
        t + ms(1),
        new_route,
        SmInfoMsg::GetResp {
            tid: tids[0],
            status: 0,
            attr_mod: 0,
            info: peer_info(SmState::Master, 5, 40),
        },
    );
    assert_eq!(e.state(), SmState::Standby);
}

#[test]
fn a_lost_master_gone_from_the_fresh_sweep_leaves_us_master() {
    let (mut e, now) = lost_master_waiting_for_a_sweep();
    e.handle_sweep(now, &[]);
    assert_eq!(e.state(), SmState::Master);
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
    // A suspect master is no master: the round waits for its fresh sweep.
    assert_eq!(e.state(), SmState::Discovering);
    e.handle_sweep(now + ms(3), &[peer_port()]);
    assert!(
        gets_to(&transmits(&mut e), &SmRoute::Lid(PEER_LID)).is_empty(),
        "the same route is not asked again"
    );
    assert_eq!(e.state(), SmState::Master);
}

#[test]
fn a_round_after_the_followed_sm_stands_by_waits_for_a_fresh_sweep() {
    // Seen on ibsim: we followed a higher SM that was itself STANDBY (the real master
    // came up after our last sweep). The followed SM answers STANDBY, we go
    // DISCOVERING; the round must not re-follow it from the stale port list (a loop
    // every poll) nor, once we outrank it, take MASTER beside the real master: it
    // waits for a sweep, which finds the master.
    const REAL: u64 = 0x0002_c903_0000_0030;
    let mut e = Election::new(cfg(1), ms(0)).expect("valid");
    e.handle_sweep(ms(0), &[peer_port()]);
    let tids = gets_to(&transmits(&mut e), &SmRoute::Lid(PEER_LID));
    answer(&mut e, ms(1), tids[0], peer_info(SmState::Standby, 5, 0));
    assert_eq!(e.state(), SmState::Standby, "behind the higher STANDBY");
    events(&mut e);
    let (now, tid) = loop {
        let now = e.poll_timeout().expect("timer");
        if let Some(t) = poll_once(&mut e, now) {
            break (now, t);
        }
    };
    answer(&mut e, now + ms(1), tid, peer_info(SmState::Standby, 5, 0));
    assert_eq!(e.state(), SmState::Discovering);
    assert!(events(&mut e).contains(&ElectionEvent::DiscoveryNeeded));
    // The stale round's query of PEER answers STANDBY again: no conclusion yet.
    if let Some(t) = gets_to(&transmits(&mut e), &SmRoute::Lid(PEER_LID)).first() {
        answer(&mut e, now + ms(2), *t, peer_info(SmState::Standby, 5, 0));
    }
    assert_eq!(
        e.state(),
        SmState::Discovering,
        "no conclusion from a stale list"
    );
    // The fresh sweep finds the real master.
    let real = SmPort {
        guid: REAL,
        route: SmRoute::Lid(9),
        lid: Some(9),
    };
    e.handle_sweep(now + ms(3), &[peer_port(), real]);
    let tids = gets_to(&transmits(&mut e), &SmRoute::Lid(9));
    assert_eq!(tids.len(), 1, "the new SM port is asked");
    e.handle_message(
        now + ms(4),
        SmRoute::Lid(9),
        SmInfoMsg::GetResp {
            tid: tids[0],
            status: 0,
            attr_mod: 0,
            info: SmInfo {
                guid: REAL,
                sm_key: 0,
                act_count: 7,
                priority: 10,
                sm_state: SmState::Master,
            },
        },
    );
    assert_eq!(e.state(), SmState::Standby);
    assert_eq!(e.master_guid(), Some(REAL));
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

// ----- a followed SM that is not the master (the demo's sm3-behind-sm2 bug) -----------

const REAL: u64 = 0x0002_c903_0000_0030;
const REAL_LID: u16 = 9;

fn real_port() -> SmPort {
    SmPort {
        guid: REAL,
        route: SmRoute::Lid(REAL_LID),
        lid: Some(REAL_LID),
    }
}

fn answer_from(e: &mut Election, now: Duration, from: u16, tid: u64, info: SmInfo) {
    e.handle_message(
        now,
        SmRoute::Lid(from),
        SmInfoMsg::GetResp {
            tid,
            status: 0,
            attr_mod: 0,
            info,
        },
    );
}

/// STANDBY behind PEER (master, priority 5), REAL also known (a standby, priority 9).
fn standby_with_two_peers() -> Election {
    let mut e = Election::new(cfg(1), ms(0)).expect("valid");
    e.handle_sweep(ms(0), &[peer_port(), real_port()]);
    let t = transmits(&mut e);
    let p = gets_to(&t, &SmRoute::Lid(PEER_LID));
    let r = gets_to(&t, &SmRoute::Lid(REAL_LID));
    answer(&mut e, ms(1), p[0], peer_info(SmState::Master, 5, 1));
    answer_from(
        &mut e,
        ms(1),
        REAL_LID,
        r[0],
        SmInfo {
            guid: REAL,
            ..peer_info(SmState::Standby, 9, 1)
        },
    );
    assert_eq!(e.master_guid(), Some(PEER));
    transmits(&mut e);
    events(&mut e);
    e
}

#[test]
fn followed_sm_answering_standby_is_not_our_master_and_we_find_the_real_one() {
    let mut e = standby_with_two_peers();
    // REAL took MASTER (PEER handed over to it); PEER, which outranks us, is STANDBY now.
    let tid = poll_once(&mut e, ms(101)).expect("poll");
    answer(&mut e, ms(102), tid, peer_info(SmState::Standby, 5, 2));
    assert_eq!(e.state(), SmState::Discovering);
    let ev = events(&mut e);
    assert!(
        matches!(
            ev.first(),
            Some(ElectionEvent::StateChanged {
                to: SmState::Discovering,
                reason: TransitionReason::FollowedNotMaster {
                    guid: PEER,
                    state: SmState::Standby,
                    ..
                },
                ..
            })
        ),
        "{ev:?}"
    );
    assert!(
        ev[0]
            .to_string()
            .contains("reports STANDBY: it is not the master"),
        "{}",
        ev[0]
    );
    // Discovery asks both; REAL answers MASTER.
    let t = transmits(&mut e);
    let p = gets_to(&t, &SmRoute::Lid(PEER_LID));
    let r = gets_to(&t, &SmRoute::Lid(REAL_LID));
    assert_eq!((p.len(), r.len()), (1, 1), "{t:?}");
    answer(&mut e, ms(103), p[0], peer_info(SmState::Standby, 5, 2));
    answer_from(
        &mut e,
        ms(103),
        REAL_LID,
        r[0],
        SmInfo {
            guid: REAL,
            ..peer_info(SmState::Master, 9, 5)
        },
    );
    assert_eq!(e.state(), SmState::Standby);
    assert_eq!(e.master_guid(), Some(REAL));
}

#[test]
fn followed_sm_answering_standby_is_left_even_when_it_outranks_us() {
    // Before the fix a higher STANDBY counted as alive forever (OpenSM's rule).
    let mut e = standby(cfg(1), 5);
    for i in 1..=5u64 {
        if e.state() != SmState::Standby {
            break;
        }
        let now = ms(1) + e.config().poll_interval * i as u32;
        let tid = poll_once(&mut e, now).expect("poll");
        answer(&mut e, now + ms(1), tid, peer_info(SmState::Standby, 15, 2));
    }
    assert_eq!(e.state(), SmState::Discovering);
}

/// Follows PEER found DISCOVERING with a higher priority.
fn standby_behind_discovering_peer(c: ElectionConfig) -> Election {
    let mut e = Election::new(c, ms(0)).expect("valid");
    e.handle_sweep(ms(0), &[peer_port()]);
    let tids = gets_to(&transmits(&mut e), &SmRoute::Lid(PEER_LID));
    answer(
        &mut e,
        ms(1),
        tids[0],
        peer_info(SmState::Discovering, 9, 0),
    );
    assert_eq!(e.state(), SmState::Standby);
    assert_eq!(e.master_guid(), Some(PEER));
    transmits(&mut e);
    events(&mut e);
    e
}

#[test]
fn followed_sm_answering_discovering_is_tolerated_for_the_grace_only() {
    let c = cfg(1);
    let grace = c.discovering_grace;
    let poll = c.poll_interval;
    let mut e = standby_behind_discovering_peer(c);
    let mut now = ms(1);
    let mut answered = 0u32;
    while e.state() == SmState::Standby {
        now = e.poll_timeout().expect("timer");
        if let Some(tid) = poll_once(&mut e, now) {
            answered += 1;
            answer(
                &mut e,
                now + ms(1),
                tid,
                peer_info(SmState::Discovering, 9, 0),
            );
        }
        assert!(now < grace * 3, "never left a DISCOVERING SM");
    }
    // Every poll was answered, so not MissedPolls: more than poll_retries polls passed.
    assert!(answered > e.config().poll_retries, "{answered} polls");
    assert!(
        now + ms(1) >= ms(1) + grace,
        "left before the grace: {now:?}"
    );
    assert!(
        now <= ms(1) + grace + poll * 2,
        "left long after the grace: {now:?}"
    );
    let ev = events(&mut e);
    match &ev[0] {
        ElectionEvent::StateChanged {
            reason:
                TransitionReason::FollowedNotMaster {
                    guid: PEER,
                    state: SmState::Discovering,
                    waited,
                },
            ..
        } => assert!(*waited >= grace, "{waited:?}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn discovering_sm_that_becomes_master_is_kept() {
    let c = cfg(1);
    let grace = c.discovering_grace;
    let mut e = standby_behind_discovering_peer(c);
    let mut now = ms(1);
    let mut act = 0;
    while now < grace * 4 {
        now = e.poll_timeout().expect("timer");
        if let Some(tid) = poll_once(&mut e, now) {
            act += 1;
            // DISCOVERING for a while, then MASTER.
            let st = if now < grace / 2 {
                SmState::Discovering
            } else {
                SmState::Master
            };
            answer(&mut e, now + ms(1), tid, peer_info(st, 9, act));
        }
        assert_eq!(e.state(), SmState::Standby, "at {now:?}");
    }
    assert_eq!(e.master_guid(), Some(PEER));
}

#[test]
fn followed_sm_answering_lower_discovering_or_notactive_is_left_at_once() {
    for st in [SmState::Discovering, SmState::NotActive] {
        let mut e = standby(cfg(7), 9);
        let tid = poll_once(&mut e, ms(101)).expect("poll");
        // Priority 2 < ours (7): a DISCOVERING SM we outrank is no master of ours.
        answer(&mut e, ms(102), tid, peer_info(st, 2, 2));
        assert_eq!(e.state(), SmState::Discovering, "{st}");
        assert!(events(&mut e).iter().any(|ev| matches!(
            ev,
            ElectionEvent::StateChanged {
                reason: TransitionReason::MasterResigned { master: PEER, .. },
                ..
            }
        )));
    }
}

// ----- SM_Key 0 in HANDOVER (OpenSM before 3.3.21) --------------------------------------

#[test]
fn strict_accepts_zero_key_handover_only_from_the_master_we_follow() {
    // From the SM we follow: accepted, not counted.
    let mut e = standby(cfg(1), 5);
    assert_eq!(set(&mut e, ControlPacket::Handover, SmState::Master, 0), 0);
    assert_eq!(e.state(), SmState::Master);
    assert_eq!(e.sm_key_violations(), 0);

    // A zero key in any other packet from the same master: rejected and counted.
    for packet in [ControlPacket::Disable, ControlPacket::Discover] {
        let mut e = standby(cfg(1), 5);
        assert_eq!(
            set(&mut e, packet, SmState::Master, 0),
            STATUS_INVALID_VALUE,
            "{packet}"
        );
        assert_eq!(e.state(), SmState::Standby);
        assert_eq!(e.sm_key_violations(), 1);
    }

    // A non-zero wrong key, even in HANDOVER from our master: rejected and counted.
    let mut e = standby(cfg(1), 5);
    assert_eq!(
        set(&mut e, ControlPacket::Handover, SmState::Master, 0x99),
        STATUS_INVALID_VALUE
    );
    assert_eq!(e.state(), SmState::Standby);
    assert_eq!(e.sm_key_violations(), 1);

    // Zero-key HANDOVER from an SM that is not the one we follow: rejected, counted.
    let mut e = standby_with_two_peers();
    e.handle_message(
        ms(50),
        SmRoute::Lid(REAL_LID),
        SmInfoMsg::Set {
            tid: 5,
            m_key: 0,
            attr_mod: ControlPacket::Handover.attr_mod(),
            info: SmInfo {
                guid: REAL,
                ..peer_info(SmState::Master, 9, 3)
            },
        },
    );
    assert_eq!(e.state(), SmState::Standby);
    assert_eq!(e.sm_key_violations(), 1);
    assert!(transmits(&mut e).iter().any(|t| matches!(
        t.msg,
        SmInfoMsg::GetResp {
            tid: 5,
            status: STATUS_INVALID_VALUE,
            ..
        }
    )));

    // A zero-key HANDOVER to a MASTER (a second master yielding without our key).
    let mut m = master(cfg(1));
    assert_eq!(
        set(&mut m, ControlPacket::Handover, SmState::Master, 0),
        STATUS_INVALID_VALUE
    );
    assert_eq!(m.sm_key_violations(), 1);
}

// ----- planned handover: handover_to / best_standby -------------------------------------

/// MASTER of priority `prio` that has read PEER's SMInfo (state, priority).
fn master_knowing_peer(c: ElectionConfig, st: SmState, peer_prio: u8) -> Election {
    let mut e = master(c);
    e.handle_sweep(ms(10), &[peer_port()]);
    let tids = gets_to(&transmits(&mut e), &SmRoute::Lid(PEER_LID));
    answer(&mut e, ms(11), tids[0], peer_info(st, peer_prio, 0));
    assert_eq!(e.handover_target(), None, "no automatic handover");
    assert_eq!(e.peer_state(PEER), Some((peer_prio, st)));
    transmits(&mut e);
    events(&mut e);
    e
}

fn handover_set(t: &[Transmit]) -> (u64, SmInfo) {
    let ho: Vec<(u64, SmInfo)> = t
        .iter()
        .filter_map(|t| match &t.msg {
            SmInfoMsg::Set {
                tid,
                attr_mod: 1,
                info,
                ..
            } if t.dest == SmRoute::Lid(PEER_LID) => Some((*tid, *info)),
            _ => None,
        })
        .collect();
    assert_eq!(ho.len(), 1, "one HANDOVER to PEER: {t:?}");
    ho[0]
}

#[test]
fn handover_to_a_lower_standby_completes_and_sticks() {
    // We (priority 9, lower GUID) hand over to PEER (STANDBY, priority 5).
    let mut e = master_knowing_peer(cfg(9), SmState::Standby, 5);
    e.handover_to(ms(20), PEER).expect("handover");
    assert_eq!(e.handover_target(), Some(PEER));
    assert!(events(&mut e).contains(&ElectionEvent::HandoverStarted { to: PEER }));
    let (tid, info) = handover_set(&transmits(&mut e));
    assert_eq!((info.sm_state, info.sm_key), (SmState::Master, 1));
    // Nothing changes before it is accepted.
    assert_eq!(e.priority(), 9);
    // A second one while it is outstanding is refused.
    assert_eq!(
        e.handover_to(ms(21), PEER),
        Err(ElectionError::HandoverInProgress { target: PEER })
    );
    // OpenSM-style acceptance: status 0, no ACKNOWLEDGE.
    e.handle_message(
        ms(22),
        SmRoute::Lid(PEER_LID),
        SmInfoMsg::GetResp {
            tid,
            status: 0,
            attr_mod: 1,
            info: peer_info(SmState::Standby, 5, 0),
        },
    );
    assert_eq!(e.state(), SmState::Standby);
    assert_eq!(e.master_guid(), Some(PEER));
    // Equal priority would still win on our lower GUID: 4 is the highest below PEER.
    assert_eq!(e.priority(), 4);
    assert_eq!(e.yielded_priority(), Some(4));
    assert_eq!(e.configured_priority(), 9);
    assert_eq!(e.sm_info().priority, 4, "advertised");
    let ev = events(&mut e);
    assert!(
        ev.contains(&ElectionEvent::PriorityChanged { from: 9, to: 4 }),
        "{ev:?}"
    );
    // No trap 144: we no longer outrank the new master.
    assert!(!transmits(&mut e)
        .iter()
        .any(|t| matches!(t.msg, SmInfoMsg::Trap144 { .. })));
    // Polls answered by the new master keep us STANDBY.
    let mut act = 0;
    for i in 1..=20u64 {
        let now = ms(22) + e.config().poll_interval * i as u32;
        if let Some(tid) = poll_once(&mut e, now) {
            act += 1;
            answer(&mut e, now + ms(1), tid, peer_info(SmState::Master, 5, act));
        }
        assert!(!transmits(&mut e)
            .iter()
            .any(|t| matches!(t.msg, SmInfoMsg::Trap144 { .. })));
    }
    assert_eq!(e.state(), SmState::Standby);
    // The operator sets a priority again: the yield ends and, now outranking the
    // master, we trap 144 so it hands back.
    e.set_priority(ms(5000), 9).expect("in range");
    assert_eq!(e.priority(), 9);
    assert_eq!(e.yielded_priority(), None);
    assert!(transmits(&mut e)
        .iter()
        .any(|t| matches!(t.msg, SmInfoMsg::Trap144 { .. })));
}

#[test]
fn handover_to_completes_on_acknowledge_and_yields_to_equal_priority_with_higher_guid() {
    // PEER has a LOWER GUID than ours here: equal priority already ranks us below it.
    let low = SmPort {
        guid: 1,
        ..peer_port()
    };
    let mut e = master(cfg(9));
    e.handle_sweep(ms(10), &[low]);
    let tids = gets_to(&transmits(&mut e), &SmRoute::Lid(PEER_LID));
    answer(
        &mut e,
        ms(11),
        tids[0],
        SmInfo {
            guid: 1,
            ..peer_info(SmState::Standby, 6, 0)
        },
    );
    transmits(&mut e);
    e.handover_to(ms(20), 1).expect("handover");
    transmits(&mut e);
    // ACKNOWLEDGE from the target.
    e.handle_message(
        ms(21),
        SmRoute::Lid(PEER_LID),
        SmInfoMsg::Set {
            tid: 0x77,
            m_key: 0,
            attr_mod: ControlPacket::Acknowledge.attr_mod(),
            info: SmInfo {
                guid: 1,
                sm_key: 1,
                ..peer_info(SmState::Standby, 6, 1)
            },
        },
    );
    assert_eq!(e.state(), SmState::Standby);
    assert_eq!(e.master_guid(), Some(1));
    assert_eq!(e.priority(), 6, "equal priority, higher GUID ranks below");
}

#[test]
fn handover_to_a_higher_sm_changes_no_priority() {
    // PEER (STANDBY, 7) outranks us (3): the automatic HANDOVER is outstanding.
    let mut e = master_handing_over();
    assert_eq!(
        e.handover_to(ms(12), PEER),
        Err(ElectionError::HandoverInProgress { target: PEER })
    );
    // It times out; before the next master poll the operator asks for it.
    let c = e.config().clone();
    let mut now = ms(11);
    for _ in 0..=c.handover_retries {
        now += c.handover_timeout;
        e.handle_timeout(now);
    }
    assert_eq!(e.handover_target(), None);
    transmits(&mut e);
    e.handover_to(now, PEER).expect("handover");
    let (tid, _) = handover_set(&transmits(&mut e));
    answer(&mut e, now + ms(1), tid, peer_info(SmState::Standby, 9, 0));
    assert_eq!(e.state(), SmState::Standby);
    assert_eq!(e.priority(), 1, "we rank below already: no yield");
    assert_eq!(e.yielded_priority(), None);
}

#[test]
fn handover_to_a_sticky_master_yields_from_the_elevated_priority() {
    let c = ElectionConfig {
        sticky_priority: Some(15),
        ..cfg(2)
    };
    let mut e = master_knowing_peer(c, SmState::Standby, 8);
    assert_eq!(e.priority(), 15);
    e.handover_to(ms(20), PEER).expect("handover");
    let (tid, _) = handover_set(&transmits(&mut e));
    answer(&mut e, ms(21), tid, peer_info(SmState::Standby, 8, 0));
    assert_eq!(e.state(), SmState::Standby);
    // Configured 2 already ranks below 8: no yield needed once the elevation is gone.
    assert_eq!(e.priority(), 2);
    assert_eq!(e.yielded_priority(), None);
}

#[test]
fn failed_handover_to_leaves_master_and_priority_alone() {
    let mut e = master_knowing_peer(cfg(9), SmState::Standby, 5);
    e.handover_to(ms(20), PEER).expect("handover");
    let (tid, _) = handover_set(&transmits(&mut e));
    e.handle_message(
        ms(21),
        SmRoute::Lid(PEER_LID),
        SmInfoMsg::GetResp {
            tid,
            status: STATUS_INVALID_VALUE,
            attr_mod: 1,
            info: peer_info(SmState::Standby, 5, 0),
        },
    );
    assert_eq!(e.state(), SmState::Master);
    assert_eq!(e.priority(), 9);
    assert_eq!(e.handover_target(), None);
    assert!(events(&mut e).iter().any(|ev| matches!(
        ev,
        ElectionEvent::HandoverFailed {
            to: PEER,
            status: Some(STATUS_INVALID_VALUE)
        }
    )));
    // Unanswered: the same.
    e.handover_to(ms(30), PEER).expect("again");
    let c = e.config().clone();
    let mut now = ms(30);
    for _ in 0..=c.handover_retries {
        now += c.handover_timeout;
        e.handle_timeout(now);
    }
    assert_eq!(e.state(), SmState::Master);
    assert_eq!(e.priority(), 9);
    // And a later automatic handover (none here: PEER is lower) would not yield.
    assert_eq!(e.yielded_priority(), None);
}

#[test]
fn handover_to_refusals_are_precise() {
    // Not master.
    let mut s = standby(cfg(1), 5);
    assert_eq!(
        s.handover_to(ms(5), PEER),
        Err(ElectionError::NotMaster {
            packet: ControlPacket::Handover,
            state: SmState::Standby
        })
    );
    // Unknown port.
    let mut m = master(cfg(9));
    assert_eq!(
        m.handover_to(ms(5), PEER),
        Err(ElectionError::UnknownPeer { guid: PEER })
    );
    // Known but never answered.
    m.handle_sweep(ms(6), &[peer_port()]);
    transmits(&mut m);
    let err = m.handover_to(ms(7), PEER).expect_err("not queried");
    assert_eq!(err, ElectionError::PeerNotQueried { guid: PEER });
    assert!(
        err.to_string().contains("has not answered SMInfo yet"),
        "{err}"
    );
    // Last seen DISCOVERING / NOTACTIVE.
    for st in [SmState::Discovering, SmState::NotActive] {
        let mut m = master_knowing_peer(cfg(9), st, 5);
        assert_eq!(
            m.handover_to(ms(20), PEER),
            Err(ElectionError::TargetNotReady {
                guid: PEER,
                state: st
            })
        );
        assert!(transmits(&mut m).is_empty());
    }
    // Priority 0 and a higher GUID than ours: nothing ranks below it.
    let mut m = master_knowing_peer(cfg(9), SmState::Standby, 0);
    let err = m.handover_to(ms(20), PEER).expect_err("cannot rank below");
    assert_eq!(
        err,
        ElectionError::CannotRankBelow {
            guid: PEER,
            ours: ME
        }
    );
    assert!(
        err.to_string()
            .contains("priority 0 and a higher port GUID"),
        "{err}"
    );
    assert_eq!(m.handover_target(), None);
    assert!(transmits(&mut m).is_empty());
    // Priority 0 with a lower GUID than ours: 0 ranks below it, accepted.
    let low = SmPort {
        guid: 1,
        ..peer_port()
    };
    let mut m = master(cfg(9));
    m.handle_sweep(ms(10), &[low]);
    let tids = gets_to(&transmits(&mut m), &SmRoute::Lid(PEER_LID));
    answer(
        &mut m,
        ms(11),
        tids[0],
        SmInfo {
            guid: 1,
            ..peer_info(SmState::Standby, 0, 0)
        },
    );
    m.handover_to(ms(20), 1)
        .expect("priority 0 ranks below GUID 1 at 0");
}

#[test]
fn best_standby_is_the_highest_ranked_known_standby() {
    let a = SmPort {
        guid: 0x40,
        route: SmRoute::Lid(11),
        lid: Some(11),
    };
    let b = SmPort {
        guid: 0x30,
        route: SmRoute::Lid(12),
        lid: Some(12),
    };
    let c = SmPort {
        guid: 0x50,
        route: SmRoute::Lid(13),
        lid: Some(13),
    };
    let d = SmPort {
        guid: 0x20,
        route: SmRoute::Lid(14),
        lid: Some(14),
    };
    let mut m = master(cfg(15));
    assert_eq!(m.best_standby(), None);
    m.handle_sweep(ms(10), &[a.clone(), b.clone(), c.clone(), d.clone()]);
    let t = transmits(&mut m);
    let reply = |m: &mut Election, p: &SmPort, prio: u8, st: SmState| {
        let SmRoute::Lid(l) = p.route else { return };
        let tid = gets_to(&t, &p.route)[0];
        answer_from(
            m,
            ms(11),
            l,
            tid,
            SmInfo {
                guid: p.guid,
                sm_key: 0,
                act_count: 0,
                priority: prio,
                sm_state: st,
            },
        );
    };
    reply(&mut m, &a, 6, SmState::Standby);
    reply(&mut m, &b, 6, SmState::Standby); // same priority, lower GUID: better
    reply(&mut m, &c, 3, SmState::Standby);
    reply(&mut m, &d, 9, SmState::NotActive); // higher, but not STANDBY
    assert_eq!(m.best_standby(), Some(0x30));
    // A port gone from the sweep is forgotten.
    m.handle_sweep(ms(20), &[a.clone(), c.clone(), d.clone()]);
    assert_eq!(m.best_standby(), Some(0x40));
    assert_eq!(m.peer_state(0x30), None);
}

#[test]
fn unanswered_handover_to_completes_when_the_target_turns_up_master() {
    // The target accepted, but its response was lost every time: the next master
    // query finds it MASTER, and the planned move completes (and sticks) instead of the
    // lower new master handing mastership back to us.
    let mut e = master_knowing_peer(cfg(9), SmState::Standby, 5);
    e.handover_to(ms(20), PEER).expect("handover");
    transmits(&mut e);
    let c = e.config().clone();
    let mut now = ms(20);
    for _ in 0..=c.handover_retries {
        now += c.handover_timeout;
        e.handle_timeout(now);
    }
    assert_eq!(e.state(), SmState::Master);
    assert!(events(&mut e).iter().any(|ev| matches!(
        ev,
        ElectionEvent::HandoverFailed {
            to: PEER,
            status: None
        }
    )));
    transmits(&mut e);
    // Next master poll.
    now = e.poll_timeout().expect("master poll");
    e.handle_timeout(now);
    let q = gets_to(&transmits(&mut e), &SmRoute::Lid(PEER_LID));
    answer(&mut e, now + ms(1), q[0], peer_info(SmState::Master, 5, 3));
    assert_eq!(e.state(), SmState::Standby);
    assert_eq!(e.master_guid(), Some(PEER));
    assert_eq!(e.priority(), 4);
}

/// An SM that came up after the master's last heavy sweep (its IsSM moves no PortState,
/// and a lower newcomer sends no trap 144) is learnt from the SMInfo Get it sends: the
/// master reads its SMInfo back along the request's path and asks for one heavy sweep.
#[test]
fn master_learns_an_unknown_sm_that_queries_it() {
    let mut e = master(cfg(10));
    let get = |tid: u64, guid: u64| SmInfoMsg::Get {
        tid,
        m_key: 0,
        info: SmInfo {
            guid,
            sm_key: 0,
            act_count: 3,
            priority: 6,
            sm_state: SmState::Discovering,
        },
    };
    e.handle_message(ms(20), SmRoute::Lid(PEER_LID), get(0xa, PEER));
    let t = transmits(&mut e);
    assert!(
        t.iter().any(|t| t.dest == SmRoute::Lid(PEER_LID)
            && matches!(t.msg, SmInfoMsg::GetResp { tid: 0xa, .. })),
        "answered: {t:?}"
    );
    let back = gets_to(&t, &SmRoute::Lid(PEER_LID));
    assert_eq!(back.len(), 1, "its SMInfo is read back: {t:?}");
    assert_eq!(
        events(&mut e),
        vec![ElectionEvent::HeavySweepRequested],
        "one heavy sweep finds its port"
    );
    // Its polls do not sweep again and again.
    e.handle_message(ms(120), SmRoute::Lid(PEER_LID), get(0xb, PEER));
    assert!(gets_to(&transmits(&mut e), &SmRoute::Lid(PEER_LID)).is_empty());
    assert!(events(&mut e).is_empty());
    // A requester without a GUID (sminfo, OpenSM, a poller) changes nothing.
    e.handle_message(ms(130), SmRoute::Lid(9), get(0xc, 0));
    assert!(gets_to(&transmits(&mut e), &SmRoute::Lid(9)).is_empty());
    assert!(events(&mut e).is_empty());
    // Once a sweep found its port it is a known SM like the others.
    e.handle_sweep(ms(200), &[peer_port()]);
    assert!(transmits(&mut e).len() <= 1);
    e.handle_message(ms(300), SmRoute::Lid(PEER_LID), get(0xd, PEER));
    assert!(events(&mut e).is_empty());
    // Its own word on its state refreshes what handover_to checks: a peer last read
    // DISCOVERING that polls us as STANDBY is a valid handover target at once.
    assert_eq!(e.peer_state(PEER), Some((6, SmState::Discovering)));
    e.handle_message(
        ms(310),
        SmRoute::Lid(PEER_LID),
        SmInfoMsg::Get {
            tid: 0xe,
            m_key: 0,
            info: SmInfo {
                guid: PEER,
                sm_key: 0,
                act_count: 4,
                priority: 6,
                sm_state: SmState::Standby,
            },
        },
    );
    assert_eq!(e.peer_state(PEER), Some((6, SmState::Standby)));
    assert_eq!(e.handover_to(ms(320), PEER), Ok(()));
}

/// A STANDBY answering Gets never sweeps for them: only the MASTER keeps the roster.
#[test]
fn standby_ignores_unknown_requesters() {
    let mut e = standby(cfg(3), 9);
    e.handle_message(
        ms(20),
        SmRoute::Lid(11),
        SmInfoMsg::Get {
            tid: 0xa,
            m_key: 0,
            info: SmInfo {
                guid: 0x0002_c903_0000_0099,
                sm_key: 0,
                act_count: 0,
                priority: 1,
                sm_state: SmState::Discovering,
            },
        },
    );
    assert!(gets_to(&transmits(&mut e), &SmRoute::Lid(11)).is_empty());
    assert!(events(&mut e).is_empty());
}

/// Drill planned-handover, cycle 2: the SM that stepped down (yielding its priority
/// below the target's) gets the subnet handed back. Its yield ends on that HANDOVER:
/// kept, its first master poll finds the old master outranking it and hands straight
/// back (the old master did not yield, having read our priority before our yield).
#[test]
fn handover_back_to_an_sm_that_yielded_ends_its_yield_and_sticks() {
    let mut e = master_knowing_peer(cfg(9), SmState::Standby, 5);
    e.handover_to(ms(20), PEER).expect("handover");
    let (tid, _) = handover_set(&transmits(&mut e));
    e.handle_message(
        ms(22),
        SmRoute::Lid(PEER_LID),
        SmInfoMsg::GetResp {
            tid,
            status: 0,
            attr_mod: 1,
            info: peer_info(SmState::Standby, 5, 0),
        },
    );
    assert_eq!(e.state(), SmState::Standby);
    assert_eq!(e.yielded_priority(), Some(4));
    events(&mut e);
    transmits(&mut e);
    // PEER (priority 5, MASTER) hands the subnet back to us.
    assert_eq!(set(&mut e, ControlPacket::Handover, SmState::Master, 1), 0);
    assert_eq!(e.state(), SmState::Master);
    assert_eq!(e.yielded_priority(), None);
    assert_eq!(e.priority(), 9);
    assert!(events(&mut e).contains(&ElectionEvent::PriorityChanged { from: 4, to: 9 }));
    // Our master polls of PEER (still MASTER a moment, then STANDBY) hand nothing back.
    let mut now = ms(50);
    for state in [SmState::Master, SmState::Standby, SmState::Standby] {
        now += e.config().master_poll_interval;
        e.handle_timeout(now);
        let t = transmits(&mut e);
        for tid in gets_to(&t, &SmRoute::Lid(PEER_LID)) {
            answer(&mut e, now + ms(1), tid, peer_info(state, 5, 7));
        }
        let t = transmits(&mut e);
        assert!(
            !t.iter().any(|t| matches!(t.msg, SmInfoMsg::Set { .. })),
            "no HANDOVER back: {t:?}"
        );
        assert_eq!(e.state(), SmState::Master);
    }
}

/// Drill master-port-down: a MASTER whose own link goes down leaves MASTER at once,
/// does not make itself MASTER of nothing while cut off (its discovery round cannot
/// conclude), and when the link is back waits for a fresh sweep, then follows the
/// master that took over instead of answering MASTER beside it.
#[test]
fn a_master_cut_off_by_its_own_link_rediscovers_and_follows_the_new_master() {
    let mut e = master(cfg(10));
    e.handle_sweep(ms(10), &[peer_port()]);
    let t = transmits(&mut e);
    for tid in gets_to(&t, &SmRoute::Lid(PEER_LID)) {
        answer(&mut e, ms(11), tid, peer_info(SmState::Standby, 8, 0));
    }
    events(&mut e);
    e.handle_local_port(ms(100), false);
    assert_eq!(e.state(), SmState::Discovering);
    assert!(events(&mut e).iter().any(|ev| matches!(
        ev,
        ElectionEvent::StateChanged {
            to: SmState::Discovering,
            reason: TransitionReason::LocalPortDown,
            ..
        }
    )));
    // Cut off: every query times out and sweeps see our node alone; still DISCOVERING.
    let mut now = ms(100);
    for _ in 0..20 {
        now += e.config().query_timeout;
        e.handle_timeout(now);
        transmits(&mut e);
    }
    e.handle_sweep(now, &[]);
    now += e.config().query_timeout;
    e.handle_timeout(now);
    assert_eq!(e.state(), SmState::Discovering, "never MASTER of nothing");
    // The link is back: nothing concludes before the next sweep.
    e.handle_local_port(now, true);
    assert_eq!(e.state(), SmState::Discovering);
    assert!(transmits(&mut e).is_empty());
    e.handle_sweep(now + ms(5), &[peer_port()]);
    let t = transmits(&mut e);
    let tids = gets_to(&t, &SmRoute::Lid(PEER_LID));
    assert_eq!(tids.len(), 1, "{t:?}");
    answer(
        &mut e,
        now + ms(6),
        tids[0],
        peer_info(SmState::Master, 8, 5),
    );
    assert_eq!(e.state(), SmState::Standby);
    assert_eq!(e.master_guid(), Some(PEER));
    // We outrank it: trap 144 asks it to hand the subnet back (no second MASTER).
    assert!(transmits(&mut e)
        .iter()
        .any(|t| matches!(t.msg, SmInfoMsg::Trap144 { .. })));
}

/// A link that was never lost changes nothing (the driver reports every read).
#[test]
fn local_port_up_reports_change_nothing() {
    let mut e = master(cfg(10));
    e.handle_local_port(ms(5), true);
    e.handle_local_port(ms(6), true);
    assert_eq!(e.state(), SmState::Master);
    assert!(events(&mut e).is_empty());
    assert!(transmits(&mut e).is_empty());
}

#[test]
fn our_sminfo_requests_carry_the_fabric_m_key() {
    // A peer applying the M_Key rule with the fabric's key authenticates our polls;
    // the standby keeps polling whatever the key (SMInfo is not guarded by the SMA).
    let c = ElectionConfig {
        m_key: 0x5EC0,
        ..cfg(1)
    };
    let mut e = Election::new(c, ms(0)).expect("valid config");
    e.handle_sweep(ms(0), &[peer_port()]);
    let t = transmits(&mut e);
    let first: Vec<u64> = t
        .iter()
        .filter_map(|t| match t.msg {
            SmInfoMsg::Get { m_key, .. } => Some(m_key),
            _ => None,
        })
        .collect();
    assert_eq!(first, vec![0x5EC0]);
    let tid = gets_to(&t, &SmRoute::Lid(PEER_LID))[0];
    answer(&mut e, ms(1), tid, peer_info(SmState::Master, 5, 1));
    assert_eq!(e.state(), SmState::Standby);
    transmits(&mut e);
    let now = ms(1) + e.config().poll_interval;
    e.handle_timeout(now);
    let polls: Vec<u64> = transmits(&mut e)
        .iter()
        .filter_map(|t| match t.msg {
            SmInfoMsg::Get { m_key, .. } => Some(m_key),
            _ => None,
        })
        .collect();
    assert_eq!(polls, vec![0x5EC0], "standby polls carry the key");
}

// ----- trusted SMs (trusted_sm_guids) ---------------------------------------------------

/// `cfg(priority)` trusting only the given GUIDs (and ourselves).
fn trusting(priority: u8, guids: &[u64]) -> ElectionConfig {
    ElectionConfig {
        trusted_sm_guids: Some(guids.iter().copied().collect()),
        ..cfg(priority)
    }
}

/// A fresh SM that swept `ports` and got `info` from PEER.
fn discover_peer(c: ElectionConfig, info: SmInfo) -> (Election, Vec<Transmit>, Vec<ElectionEvent>) {
    let mut e = Election::new(c, ms(0)).expect("valid config");
    e.handle_sweep(ms(0), &[peer_port()]);
    let t = transmits(&mut e);
    let tids = gets_to(&t, &SmRoute::Lid(PEER_LID));
    assert_eq!(tids.len(), 1);
    answer(&mut e, ms(1), tids[0], info);
    let t = transmits(&mut e);
    let ev = events(&mut e);
    (e, t, ev)
}

fn is_trap144(t: &Transmit) -> bool {
    matches!(t.msg, SmInfoMsg::Trap144 { .. })
}

fn is_handover(t: &Transmit) -> bool {
    matches!(t.msg, SmInfoMsg::Set { attr_mod, .. } if attr_mod == ControlPacket::Handover.attr_mod())
}

#[test]
fn an_untrusted_master_is_not_followed_and_we_take_over() {
    let rogue = peer_info(SmState::Master, 15, 1);
    // Control: trusting everyone, we follow it and trap 144 it (we outrank? no: it is 15).
    let (e, _, _) = discover_peer(cfg(5), rogue);
    assert_eq!(e.state(), SmState::Standby);
    // Trusting only ourselves: the fabric is masterless for us.
    let (e, t, ev) = discover_peer(trusting(5, &[]), rogue);
    assert_eq!(e.state(), SmState::Master, "{ev:?}");
    assert!(!t.iter().any(is_trap144), "no trap 144 to a rogue: {t:?}");
    assert!(ev.contains(&ElectionEvent::RogueMaster {
        guid: PEER,
        priority: 15,
        our_state: SmState::Discovering,
    }));
    assert_eq!(
        e.untrusted_sms().collect::<Vec<_>>(),
        vec![(PEER, 15, SmState::Master)]
    );
    assert!(!e.is_trusted(PEER));
    assert!(e.is_trusted(ME), "our own port is always trusted");
}

#[test]
fn a_trusted_master_is_followed() {
    let (e, _, ev) = discover_peer(trusting(5, &[PEER]), peer_info(SmState::Master, 15, 1));
    assert_eq!(e.state(), SmState::Standby);
    assert_eq!(e.master_guid(), Some(PEER));
    assert_eq!(e.untrusted_sms().count(), 0);
    assert!(!ev.iter().any(|v| matches!(
        v,
        ElectionEvent::RogueMaster { .. } | ElectionEvent::UntrustedSmSeen { .. }
    )));
}

#[test]
fn an_untrusted_higher_sm_is_not_waited_for() {
    // Trusting everyone, a higher STANDBY is followed (it is about to be master).
    let (e, _, _) = discover_peer(cfg(5), peer_info(SmState::Standby, 15, 1));
    assert_eq!(e.state(), SmState::Standby);
    let (e, _, ev) = discover_peer(trusting(5, &[]), peer_info(SmState::Standby, 15, 1));
    assert_eq!(e.state(), SmState::Master);
    assert!(ev.contains(&ElectionEvent::UntrustedSmSeen {
        guid: PEER,
        priority: 15,
        state: SmState::Standby,
    }));
}

/// MASTER that knows PEER (untrusted unless `trust_peer`) and read its SMInfo `info`.
fn master_with_peer(
    trust_peer: bool,
    info: SmInfo,
) -> (Election, Vec<Transmit>, Vec<ElectionEvent>) {
    let trusted: &[u64] = if trust_peer { &[PEER] } else { &[] };
    let mut e = master(trusting(5, trusted));
    e.handle_sweep(ms(10), &[peer_port()]);
    let t = transmits(&mut e);
    let tids = gets_to(&t, &SmRoute::Lid(PEER_LID));
    assert_eq!(tids.len(), 1);
    answer(&mut e, ms(11), tids[0], info);
    let t = transmits(&mut e);
    let ev = events(&mut e);
    (e, t, ev)
}

#[test]
fn a_master_never_hands_over_to_an_untrusted_higher_sm() {
    // Control: a trusted higher standby gets HANDOVER.
    let (e, t, _) = master_with_peer(true, peer_info(SmState::Standby, 15, 1));
    assert!(t.iter().any(is_handover));
    assert_eq!(e.handover_target(), Some(PEER));

    let (mut e, t, ev) = master_with_peer(false, peer_info(SmState::Standby, 15, 1));
    assert!(!t.iter().any(is_handover), "{t:?}");
    assert_eq!(e.handover_target(), None);
    assert!(ev.contains(&ElectionEvent::UntrustedSmSeen {
        guid: PEER,
        priority: 15,
        state: SmState::Standby,
    }));
    // Its trap 144 is repressed and its SMInfo read, but still no HANDOVER.
    e.handle_message(
        ms(20),
        SmRoute::Lid(PEER_LID),
        SmInfoMsg::Trap144 {
            tid: 0x99,
            issuer_lid: PEER_LID,
            issuer_guid: 0,
        },
    );
    let t = transmits(&mut e);
    assert!(t
        .iter()
        .any(|t| t.msg == SmInfoMsg::TrapRepress { tid: 0x99 }));
    let tids = gets_to(&t, &SmRoute::Lid(PEER_LID));
    assert_eq!(tids.len(), 1, "{t:?}");
    answer(&mut e, ms(21), tids[0], peer_info(SmState::Standby, 15, 2));
    assert!(!transmits(&mut e).iter().any(is_handover));
    assert_eq!(e.state(), SmState::Master);
    assert!(
        events(&mut e).is_empty(),
        "an unchanged untrusted SM is reported once"
    );
}

#[test]
fn a_trusted_master_keeps_mastership_beside_a_rogue_master() {
    let (mut e, t, ev) = master_with_peer(false, peer_info(SmState::Master, 15, 1));
    assert!(!t.iter().any(is_handover), "{t:?}");
    assert_eq!(e.state(), SmState::Master);
    assert!(ev.contains(&ElectionEvent::RogueMaster {
        guid: PEER,
        priority: 15,
        our_state: SmState::Master,
    }));
    assert!(ev
        .iter()
        .find(|v| matches!(v, ElectionEvent::RogueMaster { .. }))
        .is_some_and(|v| v.to_string().contains("keep mastership")));
    // It stays a rogue on every master poll, and we keep polling (sweeping) as MASTER.
    for round in 0..3u64 {
        let now = ms(1100 + round * 1000);
        e.handle_timeout(now);
        let t = transmits(&mut e);
        let tids = gets_to(&t, &SmRoute::Lid(PEER_LID));
        assert_eq!(tids.len(), 1, "master poll {round}: {t:?}");
        answer(
            &mut e,
            now,
            tids[0],
            peer_info(SmState::Master, 15, 2 + round as u32),
        );
        assert!(!transmits(&mut e).iter().any(is_handover));
        assert_eq!(e.state(), SmState::Master);
    }
    // Its HANDOVER (or any control packet) does not reach us either.
    let status = set(&mut e, ControlPacket::Handover, SmState::Master, 1);
    assert_ne!(status, 0);
    assert_eq!(e.state(), SmState::Master);
}

#[test]
fn handover_to_an_untrusted_sm_is_refused() {
    let (mut e, _, _) = master_with_peer(false, peer_info(SmState::Standby, 3, 1));
    assert_eq!(
        e.handover_to(ms(30), PEER),
        Err(ElectionError::UntrustedTarget { guid: PEER })
    );
    assert!(ElectionError::UntrustedTarget { guid: PEER }
        .to_string()
        .contains("not a trusted SM"));
    assert_eq!(e.best_standby(), None, "an untrusted standby is no target");
    assert!(!transmits(&mut e).iter().any(is_handover));
    // Trusted, the same call goes out.
    let (mut e, _, _) = master_with_peer(true, peer_info(SmState::Standby, 3, 1));
    assert_eq!(e.best_standby(), Some(PEER));
    assert_eq!(e.handover_to(ms(30), PEER), Ok(()));
    assert!(transmits(&mut e).iter().any(is_handover));
}

const ROGUE: u64 = 0x0002_c903_0000_0005;
const ROGUE_LID: u16 = 11;

fn rogue_port() -> SmPort {
    SmPort {
        guid: ROGUE,
        route: SmRoute::Lid(ROGUE_LID),
        lid: Some(ROGUE_LID),
    }
}

/// A control packet arriving by `from` with `guid` in the payload (our SM_Key, the
/// sender state the packet needs); returns the status of our answer.
fn set_from(e: &mut Election, from: SmRoute, packet: ControlPacket, guid: u64) -> u16 {
    let tid = 0x5e70 + u64::from(packet.attr_mod());
    e.handle_message(
        ms(60),
        from,
        SmInfoMsg::Set {
            tid,
            m_key: 0,
            attr_mod: packet.attr_mod(),
            info: SmInfo {
                guid,
                sm_key: 1,
                act_count: 1,
                priority: 15,
                sm_state: packet.required_sender_state(),
            },
        },
    );
    transmits(e)
        .iter()
        .find_map(|t| match t.msg {
            SmInfoMsg::GetResp { tid: r, status, .. } if r == tid => Some(status),
            _ => None,
        })
        .expect("every Set is answered")
}

/// STANDBY behind PEER (trusted master), ROGUE also a known SM port.
fn trusted_standby_with_rogue() -> Election {
    let mut e = Election::new(trusting(1, &[PEER]), ms(0)).expect("valid");
    e.handle_sweep(ms(0), &[peer_port(), rogue_port()]);
    let t = transmits(&mut e);
    let p = gets_to(&t, &SmRoute::Lid(PEER_LID));
    let r = gets_to(&t, &SmRoute::Lid(ROGUE_LID));
    answer(&mut e, ms(1), p[0], peer_info(SmState::Master, 5, 1));
    answer_from(
        &mut e,
        ms(1),
        ROGUE_LID,
        r[0],
        SmInfo {
            guid: ROGUE,
            ..peer_info(SmState::Standby, 15, 1)
        },
    );
    assert_eq!(e.master_guid(), Some(PEER));
    transmits(&mut e);
    events(&mut e);
    e
}

#[test]
fn control_packets_from_untrusted_senders_are_refused() {
    use ControlPacket as C;
    for packet in [C::Handover, C::Disable, C::Discover, C::Acknowledge] {
        let mut e = trusted_standby_with_rogue();
        // From the rogue's port, naming itself or naming the trusted master.
        for guid in [ROGUE, PEER] {
            let status = set_from(&mut e, SmRoute::Lid(ROGUE_LID), packet, guid);
            assert_ne!(status, 0, "{packet} from the rogue naming {guid:#x}");
            assert_eq!(e.state(), SmState::Standby);
            assert!(events(&mut e).contains(&ElectionEvent::ControlRejected {
                attr_mod: packet.attr_mod(),
                from: guid,
                reason: RejectReason::UntrustedSender,
            }));
        }
        // From a LID no known SM port has.
        assert_ne!(set_from(&mut e, SmRoute::Lid(40), packet, PEER), 0);
        assert_eq!(e.sm_key_violations(), 0, "not an SM_Key failure");
    }
    // The trusted master's own DISCOVER is obeyed.
    let mut e = trusted_standby_with_rogue();
    assert_eq!(
        set_from(&mut e, SmRoute::Lid(PEER_LID), C::Discover, PEER),
        0
    );
    assert_eq!(e.state(), SmState::Discovering);
    // NOTACTIVE: a STANDBY from the rogue does not wake us.
    let mut e = trusted_standby_with_rogue();
    assert_eq!(
        set_from(&mut e, SmRoute::Lid(PEER_LID), C::Disable, PEER),
        0
    );
    assert_eq!(e.state(), SmState::NotActive);
    assert_ne!(
        set_from(&mut e, SmRoute::Lid(ROGUE_LID), C::Standby, ROGUE),
        0
    );
    assert_eq!(e.state(), SmState::NotActive);
    assert_eq!(
        set_from(&mut e, SmRoute::Lid(PEER_LID), C::Standby, PEER),
        0
    );
    assert_eq!(e.state(), SmState::Standby);
}

#[test]
fn sm_key_is_answered_only_to_requesters_known_to_be_trusted() {
    let dr_peer = SmPort {
        guid: PEER,
        route: SmRoute::Directed(DrRoute::new(&[1, 3])),
        lid: Some(PEER_LID),
    };
    let mut e = master(ElectionConfig {
        sm_key: 0x1234,
        ..trusting(5, &[PEER])
    });
    e.handle_sweep(ms(10), &[dr_peer, rogue_port()]);
    transmits(&mut e);
    events(&mut e);
    let mut ask = |from: SmRoute, guid: u64| {
        e.handle_message(
            ms(20),
            from,
            SmInfoMsg::Get {
                tid: 0x77,
                m_key: 0,
                info: SmInfo {
                    guid,
                    sm_key: 0x1234,
                    act_count: 0,
                    priority: 0,
                    sm_state: SmState::Standby,
                },
            },
        );
        transmits(&mut e)
            .into_iter()
            .find_map(|t| match t.msg {
                SmInfoMsg::GetResp {
                    tid: 0x77, info, ..
                } => Some(info.sm_key),
                _ => None,
            })
            .expect("answered")
    };
    let dr = |return_path: Vec<u8>| {
        SmRoute::Directed(DrRoute {
            hop_cnt: 2,
            initial_path: vec![0, 2, 4],
            return_path,
            dr_slid: 0xffff,
            dr_dlid: 0xffff,
        })
    };
    assert_eq!(
        ask(SmRoute::Lid(PEER_LID), PEER),
        0x1234,
        "trusted, by its SLID"
    );
    assert_eq!(
        ask(dr(vec![0, 3, 1]), PEER),
        0x1234,
        "trusted, by its return path"
    );
    assert_eq!(
        ask(SmRoute::Lid(ROGUE_LID), ROGUE),
        0,
        "untrusted, even with our key"
    );
    assert_eq!(
        ask(SmRoute::Lid(ROGUE_LID), PEER),
        0,
        "a payload GUID proves nothing"
    );
    assert_eq!(ask(SmRoute::Lid(41), PEER), 0, "a LID of no known SM port");
    assert_eq!(ask(dr(vec![0, 3, 2]), PEER), 0, "another path");
    assert_eq!(ask(dr(vec![]), PEER), 0, "no recorded return path");
    assert_eq!(e.requester_port(&dr(vec![0, 3, 1])), Some(PEER));
    assert_eq!(e.requester_port(&SmRoute::Lid(ROGUE_LID)), Some(ROGUE));
}

#[test]
fn an_answer_after_a_trap_from_an_unknown_port_never_leads_to_handover_when_trusting() {
    // A trap 144 from a LID no swept SM port has: we read that port's SMInfo, but its
    // answer names itself, so with trusted_sm_guids a trusted GUID there proves nothing.
    let run = |c: ElectionConfig| {
        let mut e = master(c);
        e.handle_message(
            ms(20),
            SmRoute::Lid(50),
            SmInfoMsg::Trap144 {
                tid: 0x98,
                issuer_lid: 50,
                issuer_guid: 0,
            },
        );
        let t = transmits(&mut e);
        let tids = gets_to(&t, &SmRoute::Lid(50));
        assert_eq!(tids.len(), 1, "{t:?}");
        answer_from(
            &mut e,
            ms(21),
            50,
            tids[0],
            peer_info(SmState::Standby, 15, 1),
        );
        transmits(&mut e).iter().any(is_handover)
    };
    assert!(
        run(cfg(5)),
        "control: trusting everyone, the higher SM gets HANDOVER"
    );
    assert!(
        !run(trusting(5, &[PEER])),
        "a self-named trusted GUID is not enough"
    );
}

// ----- never masterless: a higher STANDBY that has not noticed the master is gone ------

/// What REAL (priority 9, an OpenSM-like standby that polls its dead master slowly)
/// does in [`drive_masterless`]: answers STANDBY to every SMInfo query until a HANDOVER
/// arrives (answered with status 0, OpenSM's acceptance), MASTER after it, or always
/// `DISCOVERING` when `real_state` says so.
struct Masterless {
    e: Election,
    now: Duration,
    real_state: SmState,
    real_master: bool,
    handovers_to_real: u32,
    masters: Vec<(Duration, TransitionReason)>,
}

/// STANDBY behind PEER (priority 5) with REAL (priority 9) known; PEER then dies. Runs
/// until `until`, answering for REAL and giving a sweep 5 ms after each DiscoveryNeeded.
fn drive_masterless(c: ElectionConfig, real_state: SmState, until: Duration) -> Masterless {
    let mut e = Election::new(c, ms(0)).expect("valid");
    e.handle_sweep(ms(0), &[peer_port(), real_port()]);
    let t = transmits(&mut e);
    let p = gets_to(&t, &SmRoute::Lid(PEER_LID));
    let r = gets_to(&t, &SmRoute::Lid(REAL_LID));
    answer(&mut e, ms(1), p[0], peer_info(SmState::Master, 5, 1));
    let real = |state| SmInfo {
        guid: REAL,
        ..peer_info(state, 9, 1)
    };
    answer_from(&mut e, ms(1), REAL_LID, r[0], real(SmState::Standby));
    assert_eq!(e.master_guid(), Some(PEER));
    events(&mut e);
    let mut m = Masterless {
        e,
        now: ms(1),
        real_state,
        real_master: false,
        handovers_to_real: 0,
        masters: Vec::new(),
    };
    let mut sweep_at: Option<Duration> = None;
    while m.now < until {
        let next = [m.e.poll_timeout(), sweep_at]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(until)
            .max(m.now);
        m.now = next;
        if sweep_at.is_some_and(|s| s <= m.now) {
            sweep_at = None;
            m.e.handle_sweep(m.now, &[real_port()]);
        }
        m.e.handle_timeout(m.now);
        // Answer what went to REAL; PEER is dead.
        loop {
            let out = transmits(&mut m.e);
            if out.is_empty() {
                break;
            }
            for t in out {
                if t.dest != SmRoute::Lid(REAL_LID) {
                    continue;
                }
                let state = if m.real_master {
                    SmState::Master
                } else {
                    m.real_state
                };
                match t.msg {
                    SmInfoMsg::Get { tid, .. } => {
                        answer_from(&mut m.e, m.now + ms(1), REAL_LID, tid, real(state))
                    }
                    SmInfoMsg::Set { tid, attr_mod, .. }
                        if attr_mod == ControlPacket::Handover.attr_mod() =>
                    {
                        m.handovers_to_real += 1;
                        m.real_master = true;
                        m.e.handle_message(
                            m.now + ms(1),
                            SmRoute::Lid(REAL_LID),
                            SmInfoMsg::GetResp {
                                tid,
                                status: 0,
                                attr_mod,
                                info: real(SmState::Standby),
                            },
                        );
                    }
                    _ => {}
                }
            }
        }
        for ev in events(&mut m.e) {
            match ev {
                ElectionEvent::DiscoveryNeeded => {
                    sweep_at.get_or_insert(m.now + ms(5));
                }
                ElectionEvent::StateChanged {
                    to: SmState::Master,
                    reason,
                    ..
                } => m.masters.push((m.now, reason)),
                _ => {}
            }
        }
    }
    m
}

#[test]
fn a_higher_standby_that_misses_the_loss_gets_the_subnet_through_us_after_the_bound() {
    let c = cfg(1);
    let bound = c.masterless_takeover.expect("on by default");
    let m = drive_masterless(c, SmState::Standby, ms(5000));
    // We took MASTER once, past the bound, naming REAL as the SM that had not noticed.
    assert_eq!(m.masters.len(), 1, "{:?}", m.masters);
    let (at, reason) = &m.masters[0];
    match reason {
        TransitionReason::HigherSmIdle {
            guid,
            priority,
            masterless_for,
        } => {
            assert_eq!((*guid, *priority), (REAL, 9));
            assert!(*masterless_for >= bound, "{masterless_for:?}");
        }
        r => panic!("took MASTER for {r}"),
    }
    assert!(*at < ms(1) + bound * 3, "took MASTER only at {at:?}");
    // ... then handed the subnet to REAL, which outranks us, and follow it.
    assert_eq!(m.handovers_to_real, 1);
    assert_eq!(m.e.state(), SmState::Standby);
    assert_eq!(m.e.master_guid(), Some(REAL));
}

#[test]
fn a_higher_sm_that_answers_discovering_is_waited_for_past_the_bound() {
    // DISCOVERING means it noticed and is about to take MASTER itself: taking the
    // subnet from under it would only give two masters for a moment.
    let m = drive_masterless(cfg(1), SmState::Discovering, ms(5000));
    assert!(m.masters.is_empty(), "{:?}", m.masters);
    assert_eq!(m.handovers_to_real, 0);
}

#[test]
fn without_masterless_takeover_we_wait_for_the_higher_standby() {
    let c = ElectionConfig {
        masterless_takeover: None,
        ..cfg(1)
    };
    let m = drive_masterless(c, SmState::Standby, ms(5000));
    assert!(m.masters.is_empty(), "{:?}", m.masters);
    assert_ne!(m.e.state(), SmState::Master);
}

#[test]
fn a_sticky_sm_that_took_a_masterless_subnet_keeps_it() {
    // Sticky priority 12 ranks above REAL's 9 once we are MASTER: no HANDOVER.
    let c = ElectionConfig {
        sticky_priority: Some(12),
        ..cfg(1)
    };
    let m = drive_masterless(c, SmState::Standby, ms(5000));
    assert_eq!(m.masters.len(), 1, "{:?}", m.masters);
    assert_eq!(m.handovers_to_real, 0);
    assert_eq!(m.e.state(), SmState::Master);
}
