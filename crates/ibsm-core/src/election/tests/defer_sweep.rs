//! A standby that lost its master and finds a higher SM answering DISCOVERING (it is
//! taking over) follows it without waiting for its own fresh sweep, once per masterless
//! period ([`ElectionEvent::DiscoveryWithdrawn`]); a STANDBY answer, or a second round
//! in the same masterless period, waits for the sweep as before. A round that finds a
//! MASTER before its sweep withdraws the sweep too.

use std::time::Duration;

use super::*;

/// The SM that will win (priority 8, between the dead master's 10 and our 6).
const NEXT: u64 = 0x0002_c903_0000_0040;
const NEXT_LID: u16 = 11;

fn next_port() -> SmPort {
    SmPort {
        guid: NEXT,
        route: SmRoute::Lid(NEXT_LID),
        lid: Some(NEXT_LID),
    }
}

fn next_info(state: SmState) -> SmInfo {
    SmInfo {
        guid: NEXT,
        sm_key: 0,
        act_count: 1,
        priority: 8,
        sm_state: state,
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Step {
    Election(ElectionEvent),
    /// The driver reported a sweep (`handle_sweep`).
    Swept,
}

/// What happened, with when.
struct Run {
    e: Election,
    /// When the master's loss was declared (STANDBY -> DISCOVERING, MissedPolls).
    lost_at: Duration,
    steps: Vec<(Duration, Step)>,
}

impl Run {
    /// The steps from the `n`-th DiscoveryNeeded (0-based) on.
    fn after_round(&self, n: usize) -> &[(Duration, Step)] {
        let i = self
            .steps
            .iter()
            .enumerate()
            .filter(|(_, (_, s))| *s == Step::Election(ElectionEvent::DiscoveryNeeded))
            .nth(n)
            .map(|(i, _)| i)
            .unwrap_or_else(|| panic!("no round {n}: {:?}", self.steps));
        &self.steps[i..]
    }

    fn count(&self, step: &Step) -> usize {
        self.steps.iter().filter(|(_, s)| s == step).count()
    }
}

/// We (priority 6) follow PEER (MASTER, priority 10) with NEXT (STANDBY, priority 8)
/// known. PEER dies at once; NEXT answers every query with `next(t)`. The driver
/// reports a sweep `sweep_takes` after each DiscoveryNeeded (a k=16 discovery takes
/// ~180 ms). Runs until `until`.
fn run(
    c: ElectionConfig,
    next: impl Fn(Duration) -> SmState,
    sweep_takes: Duration,
    until: Duration,
) -> Run {
    let mut e = Election::new(c, ms(0)).expect("valid");
    e.handle_sweep(ms(0), &[peer_port(), next_port()]);
    let t = transmits(&mut e);
    let p = gets_to(&t, &SmRoute::Lid(PEER_LID));
    let n = gets_to(&t, &SmRoute::Lid(NEXT_LID));
    answer(&mut e, ms(1), p[0], peer_info(SmState::Master, 10, 1));
    answer_from(&mut e, ms(1), NEXT_LID, n[0], next_info(SmState::Standby));
    assert_eq!(e.master_guid(), Some(PEER));
    events(&mut e);
    let mut now = ms(1);
    let mut lost_at = None;
    let mut steps = Vec::new();
    let mut sweep_at: Option<Duration> = None;
    while now < until {
        now = [e.poll_timeout(), sweep_at]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(until)
            .max(now);
        if sweep_at.is_some_and(|s| s <= now) {
            sweep_at = None;
            e.handle_sweep(now, &[peer_port(), next_port()]);
            steps.push((now, Step::Swept));
        }
        e.handle_timeout(now);
        loop {
            let out = transmits(&mut e);
            if out.is_empty() {
                break;
            }
            for t in out {
                if let (SmRoute::Lid(NEXT_LID), SmInfoMsg::Get { tid, .. }) = (&t.dest, &t.msg) {
                    answer_from(&mut e, now + ms(1), NEXT_LID, *tid, next_info(next(now)));
                }
            }
        }
        for ev in events(&mut e) {
            if let ElectionEvent::StateChanged {
                reason: TransitionReason::MissedPolls { .. },
                ..
            } = ev
            {
                lost_at.get_or_insert(now);
            }
            if ev == ElectionEvent::DiscoveryNeeded {
                sweep_at.get_or_insert(now + sweep_takes);
            }
            steps.push((now, Step::Election(ev)));
        }
    }
    Run {
        e,
        lost_at: lost_at.expect("the master's loss was declared"),
        steps,
    }
}

/// The round swept, then went STANDBY behind NEXT (it waited for its sweep).
fn assert_swept_before_following_next(round: &[(Duration, Step)]) {
    let sweep = round
        .iter()
        .position(|(_, s)| *s == Step::Swept)
        .unwrap_or_else(|| panic!("no sweep: {round:?}"));
    let conclude = round
        .iter()
        .position(|(_, s)| is_standby_behind_next(s))
        .unwrap_or_else(|| panic!("never followed NEXT: {round:?}"));
    assert!(sweep < conclude, "concluded before its sweep: {round:?}");
}

fn is_standby_behind_next(s: &Step) -> bool {
    matches!(
        s,
        Step::Election(ElectionEvent::StateChanged {
            from: SmState::Discovering,
            to: SmState::Standby,
            reason: TransitionReason::FoundHigherSm { guid: NEXT, .. },
        })
    )
}

const SWEEP: Duration = Duration::from_millis(180);

#[test]
fn a_higher_sm_taking_over_is_followed_without_the_fresh_sweep() {
    let r = run(cfg(6), |_| SmState::Discovering, SWEEP, ms(400));
    let round = r.after_round(0);
    // DiscoveryNeeded, STANDBY behind NEXT, DiscoveryWithdrawn: before any sweep.
    let conclude = round
        .iter()
        .position(|(_, s)| is_standby_behind_next(s))
        .unwrap_or_else(|| panic!("{round:?}"));
    assert!(
        !round[..conclude].iter().any(|(_, s)| *s == Step::Swept),
        "waited for the sweep: {round:?}"
    );
    assert_eq!(
        round.get(conclude + 1).map(|(_, s)| s),
        Some(&Step::Election(ElectionEvent::DiscoveryWithdrawn)),
        "{round:?}"
    );
    assert!(round[conclude].0 < r.lost_at + SWEEP, "{round:?}");
    assert_eq!(r.e.state(), SmState::Standby);
    assert_eq!(r.e.master_guid(), Some(NEXT));
    assert_eq!(
        r.count(&Step::Election(ElectionEvent::DiscoveryWithdrawn)),
        1
    );
}

#[test]
fn a_higher_sm_still_discovering_after_the_grace_waits_for_the_sweep_next_time() {
    // NEXT never becomes MASTER: after discovering_grace the next round of the same
    // masterless period must not follow it unswept again (the stale-view loop).
    let c = cfg(6);
    let grace = c.discovering_grace;
    // A sweep slower than the round's query of the dead master (which the round after
    // FollowedNotMaster asks again, with retries): only the sweep holds the round.
    let slow = c.query_timeout * (c.query_retries + 1) + ms(200);
    let r = run(c, |_| SmState::Discovering, slow, grace * 3);
    assert!(
        r.steps.iter().any(|(_, s)| matches!(
            s,
            Step::Election(ElectionEvent::StateChanged {
                to: SmState::Discovering,
                reason: TransitionReason::FollowedNotMaster {
                    guid: NEXT,
                    state: SmState::Discovering,
                    ..
                },
                ..
            })
        )),
        "{:?}",
        r.steps
    );
    assert_swept_before_following_next(r.after_round(1));
    assert_eq!(
        r.count(&Step::Election(ElectionEvent::DiscoveryWithdrawn)),
        1,
        "{:?}",
        r.steps
    );
    // Still waiting for NEXT (DISCOVERING is never overtaken by the masterless bound).
    assert_ne!(r.e.state(), SmState::Master);
}

#[test]
fn a_higher_standby_does_not_end_the_round_before_the_sweep() {
    let c = ElectionConfig {
        masterless_takeover: None,
        ..cfg(6)
    };
    let r = run(c, |_| SmState::Standby, SWEEP, ms(400));
    assert_swept_before_following_next(r.after_round(0));
    assert_eq!(
        r.count(&Step::Election(ElectionEvent::DiscoveryWithdrawn)),
        0
    );
}

#[test]
fn following_a_discovering_sm_keeps_the_masterless_clock() {
    // NEXT answers DISCOVERING (we follow it unswept), then, after the grace, STANDBY:
    // it never takes over. The masterless bound still counts from the master's loss,
    // not from when we followed NEXT.
    let c = cfg(6);
    let grace = c.discovering_grace;
    let bound = c.masterless_takeover.expect("on by default");
    let r = run(
        c,
        move |t| {
            if t < grace {
                SmState::Discovering
            } else {
                SmState::Standby
            }
        },
        SWEEP,
        grace * 4,
    );
    let (at, waited) = r
        .steps
        .iter()
        .find_map(|(t, s)| match s {
            Step::Election(ElectionEvent::StateChanged {
                to: SmState::Master,
                reason: TransitionReason::HigherSmIdle { masterless_for, .. },
                ..
            }) => Some((*t, *masterless_for)),
            _ => None,
        })
        .unwrap_or_else(|| panic!("never took the masterless subnet: {:?}", r.steps));
    assert!(waited >= bound, "{waited:?}");
    assert_eq!(waited, at - r.lost_at, "clock restarted: {:?}", r.steps);
    assert_eq!(
        r.count(&Step::Election(ElectionEvent::DiscoveryWithdrawn)),
        1
    );
}

#[test]
fn a_master_found_before_the_sweep_withdraws_it_too() {
    // NEXT already took MASTER when we ask: we follow it, and the sweep the round asked
    // for would only compete with the new master's. Not bound to the masterless guard.
    let r = run(cfg(6), |_| SmState::Master, SWEEP, ms(400));
    let round = r.after_round(0);
    let conclude = round
        .iter()
        .position(|(_, s)| {
            matches!(
                s,
                Step::Election(ElectionEvent::StateChanged {
                    to: SmState::Standby,
                    reason: TransitionReason::FoundMaster { master: NEXT },
                    ..
                })
            )
        })
        .unwrap_or_else(|| panic!("{round:?}"));
    assert_eq!(
        round.get(conclude + 1).map(|(_, s)| s),
        Some(&Step::Election(ElectionEvent::DiscoveryWithdrawn)),
        "{round:?}"
    );
    assert_eq!(r.e.master_guid(), Some(NEXT));
}

/// Our round after PEER (MASTER, 10) went silent, NEXT (8) having answered its query
/// STANDBY (it has not noticed the loss yet): waiting for the sweep.
fn next_answered_standby() -> (Election, Duration) {
    let mut e = Election::new(cfg(6), ms(0)).expect("valid");
    e.handle_sweep(ms(0), &[peer_port(), next_port()]);
    let t = transmits(&mut e);
    let p = gets_to(&t, &SmRoute::Lid(PEER_LID));
    let n = gets_to(&t, &SmRoute::Lid(NEXT_LID));
    answer(&mut e, ms(1), p[0], peer_info(SmState::Master, 10, 1));
    answer_from(&mut e, ms(1), NEXT_LID, n[0], next_info(SmState::Standby));
    let mut now = ms(1);
    let mut asked = Vec::new();
    while e.state() == SmState::Standby {
        now = e.poll_timeout().expect("standby has a timer");
        e.handle_timeout(now);
        asked = gets_to(&transmits(&mut e), &SmRoute::Lid(NEXT_LID));
    }
    assert_eq!(asked.len(), 1, "the round asks NEXT");
    answer_from(
        &mut e,
        now + ms(1),
        NEXT_LID,
        asked[0],
        next_info(SmState::Standby),
    );
    assert_eq!(
        e.state(),
        SmState::Discovering,
        "a STANDBY answer waits for the sweep"
    );
    events(&mut e);
    (e, now + ms(1))
}

/// NEXT's own round queries us, its payload naming it `state`; returns what we sent.
fn next_queries_us(e: &mut Election, now: Duration, state: SmState) -> Vec<u64> {
    e.handle_message(
        now,
        SmRoute::Lid(NEXT_LID),
        SmInfoMsg::Get {
            tid: 0x77,
            m_key: 0,
            info: next_info(state),
        },
    );
    gets_to(&transmits(e), &SmRoute::Lid(NEXT_LID))
}

#[test]
fn a_higher_sm_that_answered_standby_then_queries_us_discovering_is_asked_again() {
    // Both standbys missed the dead master's polls, we a poll earlier: NEXT answered
    // STANDBY. Its own round then queries us, naming itself DISCOVERING: asked again, it
    // answers DISCOVERING, and we follow it without the sweep.
    let (mut e, now) = next_answered_standby();
    let again = next_queries_us(&mut e, now + ms(2), SmState::Discovering);
    assert_eq!(again.len(), 1, "asked again at once");
    answer_from(
        &mut e,
        now + ms(3),
        NEXT_LID,
        again[0],
        next_info(SmState::Discovering),
    );
    assert_eq!(e.state(), SmState::Standby);
    assert_eq!(e.master_guid(), Some(NEXT));
    assert!(events(&mut e).contains(&ElectionEvent::DiscoveryWithdrawn));
}

#[test]
fn a_payload_is_no_answer() {
    // The payload only triggers the query: NEXT answering STANDBY keeps us waiting for
    // the sweep, and a STANDBY payload triggers nothing.
    let (mut e, now) = next_answered_standby();
    assert!(next_queries_us(&mut e, now + ms(2), SmState::Standby).is_empty());
    let again = next_queries_us(&mut e, now + ms(2), SmState::Discovering);
    assert_eq!(again.len(), 1);
    assert!(
        next_queries_us(&mut e, now + ms(2), SmState::Discovering).is_empty(),
        "one query at a time"
    );
    answer_from(
        &mut e,
        now + ms(3),
        NEXT_LID,
        again[0],
        next_info(SmState::Standby),
    );
    assert_eq!(e.state(), SmState::Discovering);
    assert!(!events(&mut e).contains(&ElectionEvent::DiscoveryWithdrawn));
    e.handle_sweep(now + ms(10), &[peer_port(), next_port()]);
    assert_eq!(
        e.state(),
        SmState::Standby,
        "the sweep concludes it as before"
    );
    assert_eq!(e.master_guid(), Some(NEXT));
}
