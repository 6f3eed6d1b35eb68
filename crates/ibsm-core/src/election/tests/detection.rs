//! The standby's detection rule with time passed in: a poll every `poll_interval`,
//! re-polls every `repoll_interval` after a miss, a late answer to any poll of the
//! streak counting, and the hung-master (stalled ActCount) window.

use std::time::Duration;

use super::*;

const ME: u64 = 0x0002_c900_0000_0001;
const PEER: u64 = 0x0002_c900_0000_0002;

fn master_info(act_count: u32) -> SmInfo {
    SmInfo {
        guid: PEER,
        sm_key: 0,
        act_count,
        priority: 5,
        sm_state: SmState::Master,
    }
}

/// Poll TIDs sent to the master since the last call.
fn polls(e: &mut Election) -> Vec<u64> {
    let sent: Vec<Transmit> = std::iter::from_fn(|| e.poll_transmit()).collect();
    gets_to(&sent, &SmRoute::Lid(PEER_LID))
}

/// The master's answer to poll `tid`, with its ActCount.
fn answer_act(e: &mut Election, now: Duration, tid: u64, act_count: u32) {
    answer(e, now, tid, master_info(act_count));
}

/// A STANDBY (priority 1) following PEER (priority 5), entered at 1 ms.
fn standby(cfg: ElectionConfig) -> Election {
    let mut e = Election::new(ElectionConfig { priority: 1, ..cfg }, ms(0)).expect("valid config");
    e.handle_sweep(
        ms(0),
        &[SmPort {
            guid: PEER,
            route: SmRoute::Lid(PEER_LID),
            lid: Some(PEER_LID),
        }],
    );
    let tids = polls(&mut e);
    assert_eq!(tids.len(), 1);
    answer_act(&mut e, ms(1), tids[0], 1);
    assert_eq!(e.state(), SmState::Standby);
    std::iter::from_fn(|| e.poll_event()).for_each(drop);
    e
}

fn lost_reason(e: &mut Election) -> Option<TransitionReason> {
    std::iter::from_fn(|| e.poll_event()).find_map(|ev| match ev {
        ElectionEvent::StateChanged {
            to: SmState::Discovering,
            reason,
            ..
        } => Some(reason),
        _ => None,
    })
}

#[test]
fn defaults_poll_every_25_ms_and_repoll_every_20_ms() {
    let c = ElectionConfig::new(ME);
    assert_eq!(c.poll_interval, ms(25));
    assert_eq!(c.repoll_interval, ms(20));
    assert_eq!(c.poll_retries, 3);
    assert_eq!(c.stall_window, Some(ms(6000)), "three 2 s light sweeps");
}

#[test]
fn an_answering_master_costs_one_poll_per_interval() {
    let mut e = standby(ElectionConfig::new(ME));
    let mut sent = 0;
    let mut act = 1;
    let mut now = ms(1);
    while now < ms(1001) {
        now = e.poll_timeout().expect("standby has a timer");
        e.handle_timeout(now);
        for tid in polls(&mut e) {
            sent += 1;
            act += 1;
            answer_act(&mut e, now + ms(1), tid, act);
        }
    }
    assert_eq!(e.state(), SmState::Standby);
    assert_eq!(sent, 40, "1 s / 25 ms");
}

#[test]
fn a_silent_master_is_lost_after_one_interval_and_two_short_repolls() {
    let mut e = standby(ElectionConfig::new(ME));
    // The poll due at 26 ms is answered; the master dies right after.
    e.handle_timeout(ms(26));
    let tid = polls(&mut e)[0];
    answer_act(&mut e, ms(27), tid, 2);
    let mut sent_at = Vec::new();
    let mut now = ms(27);
    while e.state() == SmState::Standby {
        now = e.poll_timeout().expect("standby has a timer");
        e.handle_timeout(now);
        if !polls(&mut e).is_empty() {
            sent_at.push(now);
        }
        if e.state() == SmState::Standby {
            assert!(e.missed_polls() < 3);
        }
    }
    // A poll at 51 (waits 25 ms), re-polls at 76 and 96 (20 ms each), lost at 116:
    // 89 ms after the last answer, 65 ms of silence after the first unanswered poll.
    assert_eq!(sent_at, vec![ms(51), ms(76), ms(96)]);
    assert_eq!(now, ms(116));
    assert_eq!(
        lost_reason(&mut e),
        Some(TransitionReason::MissedPolls {
            master: PEER,
            missed: 3
        })
    );
}

/// Every poll answered `latency` after it was sent, until `until` or until the
/// standby leaves STANDBY; returns (when it stopped, the most misses in a row seen).
fn run_with_latency(e: &mut Election, latency: Duration, until: Duration) -> (Duration, u32) {
    let mut due: Vec<(Duration, u64)> = Vec::new();
    let mut now = ms(1);
    let mut max_missed = 0;
    while now < until && e.state() == SmState::Standby {
        let next_answer = due.iter().map(|(t, _)| *t).min();
        now = [e.poll_timeout(), next_answer]
            .into_iter()
            .flatten()
            .min()
            .expect("a timer");
        due.retain(|(t, tid)| {
            if *t <= now {
                answer_act(e, now, *tid, 2);
                false
            } else {
                true
            }
        });
        e.handle_timeout(now);
        for tid in polls(e) {
            due.push((now + latency, tid));
        }
        max_missed = max_missed.max(e.missed_polls());
    }
    (now, max_missed)
}

#[test]
fn a_late_answer_to_a_missed_poll_keeps_the_master() {
    // Every answer takes 60 ms (longer than poll_interval, so every poll first counts
    // as a miss and re-polls go out), but an answer to any poll of the streak shows
    // the master alive: no failover, ever.
    let mut e = standby(ElectionConfig::new(ME));
    let (_, max_missed) = run_with_latency(&mut e, ms(60), ms(5000));
    assert_eq!(e.state(), SmState::Standby);
    assert!(
        max_missed >= 2,
        "the slow answers did count as misses first"
    );
}

#[test]
fn answers_slower_than_the_whole_streak_lose_the_master() {
    // 70 ms answers: the first poll (25 ms) and both re-polls (20 ms each) are all
    // unanswered when the third miss is counted, 65 ms after the first went out.
    let mut e = standby(ElectionConfig::new(ME));
    let (at, _) = run_with_latency(&mut e, ms(70), ms(5000));
    assert_eq!(e.state(), SmState::Discovering);
    assert_eq!(at, ms(91), "first poll at 26, misses at 51, 71 and 91");
    assert!(matches!(
        lost_reason(&mut e),
        Some(TransitionReason::MissedPolls { missed: 3, .. })
    ));
}

#[test]
fn repolls_stop_once_the_master_answers_again() {
    let mut e = standby(ElectionConfig::new(ME));
    e.handle_timeout(ms(26));
    let first = polls(&mut e)[0];
    e.handle_timeout(ms(51)); // unanswered: a miss, re-poll
    let repoll = polls(&mut e);
    assert_eq!(repoll.len(), 1);
    assert_eq!(e.missed_polls(), 1);
    assert_eq!(
        e.poll_timeout(),
        Some(ms(71)),
        "re-poll waits repoll_interval"
    );
    answer_act(&mut e, ms(52), repoll[0], 2);
    assert_eq!(e.missed_polls(), 0);
    // The first poll's answer, late, is harmless.
    answer_act(&mut e, ms(53), first, 2);
    assert_eq!(e.state(), SmState::Standby);
    e.handle_timeout(ms(71));
    let tid = polls(&mut e)[0];
    answer_act(&mut e, ms(72), tid, 3);
    assert_eq!(e.poll_timeout(), Some(ms(96)), "back to poll_interval");
}

/// Polls answered at once for `until`; the master's ActCount moves every `every`
/// (None: never). Returns when the standby leaves STANDBY (or at `until`).
fn run_with_act_count(e: &mut Election, every: Option<Duration>, until: Duration) -> Duration {
    let mut now = ms(1);
    while e.state() == SmState::Standby && now < until {
        now = e.poll_timeout().expect("standby has a timer");
        e.handle_timeout(now);
        let act = every.map_or(1, |d| 1 + (now.as_millis() / d.as_millis()) as u32);
        for tid in polls(e) {
            answer_act(e, now + ms(1), tid, act);
        }
    }
    now
}

#[test]
fn a_hung_master_is_lost_within_three_light_sweep_intervals() {
    // A master whose ActCount never moves while it answers SMInfo: lost once it has
    // not moved for stall_window (three 2 s light sweeps), within one poll of it.
    let mut e = standby(ElectionConfig::new(ME));
    let at = run_with_act_count(&mut e, None, ms(60_000));
    assert_ne!(e.state(), SmState::Standby);
    assert!(at >= ms(6001) && at <= ms(6001) + ms(25) + ms(1), "{at:?}");
    assert!(matches!(
        lost_reason(&mut e),
        Some(TransitionReason::ActCountStalled { master: PEER, .. })
    ));
}

#[test]
fn a_master_whose_only_activity_is_its_sminfo_polls_is_not_hung() {
    // A master whose routing worker is busy for a long time sends no sweep SMPs, but
    // its election still polls the SM ports it knows every master_poll_interval (1 s),
    // which moves ActCount: never declared hung.
    let mut e = standby(ElectionConfig::new(ME));
    let poll = ElectionConfig::new(ME).master_poll_interval;
    run_with_act_count(&mut e, Some(poll), ms(60_000));
    assert_eq!(e.state(), SmState::Standby);
    // Idle between light sweeps (2 s) only: not hung either.
    let mut e = standby(ElectionConfig::new(ME));
    run_with_act_count(&mut e, Some(ms(2000)), ms(60_000));
    assert_eq!(e.state(), SmState::Standby);
}

/// The master is the Raft leader and its heartbeat reaches us every 50 ms (the last
/// one at the latest multiple of 50 ms before `now`), from `guid`.
fn heartbeat(e: &mut Election, now: Duration, guid: u64) {
    let at = ms((now.as_millis() as u64 / 50) * 50);
    e.handle_leader_contact(guid, at);
}

/// A silent master (it answered the poll at 26 ms, nothing after): when the standby
/// declares it lost. `contact` feeds the Raft heartbeat at each step.
fn silent_master_lost_at(
    cfg: ElectionConfig,
    mut contact: impl FnMut(&mut Election, Duration),
) -> Duration {
    let mut e = standby(cfg);
    e.handle_timeout(ms(26));
    let tid = polls(&mut e)[0];
    answer_act(&mut e, ms(27), tid, 2);
    let mut now = ms(27);
    while e.state() == SmState::Standby && now < ms(10_000) {
        now = e.poll_timeout().expect("standby has a timer");
        contact(&mut e, now);
        e.handle_timeout(now);
        polls(&mut e);
    }
    assert!(
        matches!(
            lost_reason(&mut e),
            Some(TransitionReason::MissedPolls { master: PEER, .. })
        ),
        "lost for its missed polls"
    );
    now
}

#[test]
fn a_busy_master_whose_raft_heartbeat_arrives_is_not_lost_for_slow_answers() {
    // 200 ms answers lose the master at 91 ms on polls alone (see above); with the
    // master's Raft heartbeat fresh, the standby polls on and every late answer ends
    // the streak: no failover in 5 s.
    let mut e = standby(ElectionConfig::new(ME));
    let mut due: Vec<(Duration, u64)> = Vec::new();
    let mut now = ms(1);
    while now < ms(5000) {
        now = [e.poll_timeout(), due.iter().map(|(t, _)| *t).min()]
            .into_iter()
            .flatten()
            .min()
            .expect("a timer");
        heartbeat(&mut e, now, PEER);
        due.retain(|(t, tid)| {
            if *t <= now {
                answer_act(&mut e, now, *tid, 2);
                false
            } else {
                true
            }
        });
        e.handle_timeout(now);
        for tid in polls(&mut e) {
            due.push((now + ms(200), tid));
        }
        assert_eq!(e.state(), SmState::Standby, "lost at {now:?}");
    }
    assert!(
        e.losses_held_off() >= 10,
        "each 200 ms streak was held off: {}",
        e.losses_held_off()
    );
}

#[test]
fn a_killed_master_is_lost_as_fast_as_on_polls_alone() {
    // Its last heartbeat came with its last answer (27 ms): 89 ms old when the third
    // miss is counted at 116 ms, over the 75 ms bound.
    let lost = silent_master_lost_at(ElectionConfig::new(ME), |e, _| {
        e.handle_leader_contact(PEER, ms(27))
    });
    assert_eq!(lost, ms(116));
    // A heartbeat just before it died (50 ms) is 66 ms old at 116: one more re-poll.
    let lost = silent_master_lost_at(ElectionConfig::new(ME), |e, _| {
        e.handle_leader_contact(PEER, ms(50))
    });
    assert_eq!(lost, ms(136));
}

#[test]
fn a_live_raft_leader_holds_a_dead_sm_port_off_for_the_grace_only() {
    // The master's process lives (heartbeats every 50 ms) but its SM port answers
    // nothing: held from the third miss (116 ms) for the 1 s grace, then lost.
    let lost = silent_master_lost_at(ElectionConfig::new(ME), |e, now| heartbeat(e, now, PEER));
    assert_eq!(lost, ms(1116));
    let cfg = ElectionConfig {
        leader_heartbeat_grace: Some(ms(200)),
        ..ElectionConfig::new(ME)
    };
    assert_eq!(
        silent_master_lost_at(cfg, |e, now| heartbeat(e, now, PEER)),
        ms(316)
    );
}

#[test]
fn a_heartbeat_holds_nothing_when_off_or_from_another_leader() {
    let other = |e: &mut Election, now| heartbeat(e, now, 0x0002_c900_0000_0009);
    assert_eq!(
        silent_master_lost_at(ElectionConfig::new(ME), other),
        ms(116)
    );
    let off = ElectionConfig {
        leader_heartbeat_grace: None,
        ..ElectionConfig::new(ME)
    };
    assert_eq!(
        silent_master_lost_at(off, |e, now| heartbeat(e, now, PEER)),
        ms(116)
    );
}
