//! The cluster's own view as a drill's judge (`--members` without or besides
//! `--judge`): every member's `GetStatus` and `ListSms`, polled every [`POLL_EVERY`]
//! with one call in flight per member and a [`CALL_DEADLINE`] per call, so a killed
//! member costs a failed call, not a stalled loop.
//!
//! The timeline of each SM ([`merge`]): its own answer while its API answers, each
//! change dated by the SM itself (`Status.state_for_ms`: read time minus how long it
//! has been in the state, never before its previous answer), so two SMs' changes are
//! ordered to the millisecond whatever the order their calls came back in. An answer
//! that took longer than [`SLOW_ANSWER`] is left out (a restarted member's first call
//! waits for its connection). A change out of MASTER by a completed HANDOVER
//! (`Status.handed_over_to`) is kept as a [`Handover`]: both SMs are MASTER for that
//! exchange's round trip, which a drill reports apart from two masters. Once it stops
//! answering, what the other members last saw
//! of it on the fabric: each `ListSms` entry says how long ago that SM's last SMInfo
//! reached the member (`answered_ms_ago`), so the drill dates the state it reported
//! at `read time - age` with no clock shared between hosts. The silent SM keeps its
//! last state until the latest such dated answer (or its first unanswered API call,
//! whichever is later) and is "no answer" from then on. A member whose API is gone but
//! whose SM the others still see answering MASTER is MASTER in this timeline, and two
//! SMs MASTER at overlapping dated times are two masters.
//!
//! [`Recorder`] keeps only what the merge needs (own state changes, the start of each
//! silence, peers' dated answers during it); [`merge`] is pure and recomputed on each
//! `Drill::poll`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ibsm_proto::v1 as pb;
use ibsm_proto::v1::control_client::ControlClient;

use super::timeline::{dual_windows, now_ms, Change};
use crate::control::AuthChannel;

/// How often every member is asked.
pub const POLL_EVERY: Duration = Duration::from_millis(25);
/// How long one call may take before the member counts as not answering this round.
pub const CALL_DEADLINE: Duration = Duration::from_millis(150);
/// An answer slower than this is not placed at its round's instant (see the module doc).
pub const SLOW_ANSWER: Duration = Duration::from_millis(50);
/// Two peers' dated answers this close with the same state are one answer (the read
/// times of two polls differ by the network's latency).
const SAME_ANSWER_MS: u64 = 5;

/// `from` left MASTER at `at` by a completed HANDOVER to `to`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Handover {
    pub at: u64,
    pub from: String,
    pub to: String,
}

/// One thing the poller learned about an SM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Obs {
    /// The SM's own API answered this state (recorded when it changes).
    Own {
        at: u64,
        name: String,
        state: &'static str,
    },
    /// The SM's API stopped answering at `at` (the first call of a silence).
    Silent { at: u64, name: String },
    /// Member `by` last received `name`'s SMInfo, saying `state`, at `at` (the
    /// drill's read time minus the member's `answered_ms_ago`).
    Peer {
        at: u64,
        name: String,
        by: String,
        state: &'static str,
    },
}

impl Obs {
    fn at(&self) -> u64 {
        match self {
            Obs::Own { at, .. } | Obs::Silent { at, .. } | Obs::Peer { at, .. } => *at,
        }
    }
    fn name(&self) -> &str {
        match self {
            Obs::Own { name, .. } | Obs::Silent { name, .. } | Obs::Peer { name, .. } => name,
        }
    }
    /// Own answers before peers' at the same time: own is authoritative.
    fn rank(&self) -> u8 {
        match self {
            Obs::Own { .. } => 0,
            Obs::Silent { .. } => 1,
            Obs::Peer { .. } => 2,
        }
    }
}

/// What the poller keeps (see the module doc).
#[derive(Debug, Default)]
pub struct Recorder {
    obs: Vec<Obs>,
    /// Per SM: `Some(state)` while its API answers, `None` while silent (since the
    /// time in the second field).
    own: BTreeMap<String, (Option<&'static str>, u64)>,
    /// Per SM: the last peer answer recorded during its current silence.
    peer_last: BTreeMap<String, (u64, &'static str)>,
    /// Per SM: when its API last answered.
    seen_at: BTreeMap<String, u64>,
    handovers: Vec<Handover>,
    /// Calls made and failed, for the report.
    pub calls: u64,
    pub failed: u64,
    /// Answers left out as slower than [`SLOW_ANSWER`].
    pub slow: u64,
}

impl Recorder {
    /// `name`'s API answered `state`, read at `read`, in it for `state_for` ms; when
    /// that state came from handing the subnet over, to whom.
    pub fn own_answer(
        &mut self,
        read: u64,
        name: &str,
        state: &'static str,
        state_for: u64,
        handed_over_to: Option<&str>,
    ) {
        let prev_seen = self.seen_at.insert(name.to_string(), read);
        if self.own.get(name).is_some_and(|(s, _)| *s == Some(state)) {
            return;
        }
        // Dated by the SM; never before we last saw it in its previous state.
        let at = read
            .saturating_sub(state_for)
            .max(prev_seen.unwrap_or(0))
            .max(self.own.get(name).map_or(0, |(_, since)| *since));
        if let Some(to) = handed_over_to {
            self.handovers.push(Handover {
                at,
                from: name.to_string(),
                to: to.to_string(),
            });
        }
        self.own.insert(name.to_string(), (Some(state), at));
        self.peer_last.remove(name);
        self.obs.push(Obs::Own {
            at,
            name: name.to_string(),
            state,
        });
    }

    /// `name`'s API did not answer at `at`.
    pub fn own_silent(&mut self, at: u64, name: &str) {
        if self.own.get(name).is_some_and(|(s, _)| s.is_none()) {
            return;
        }
        self.own.insert(name.to_string(), (None, at));
        self.obs.push(Obs::Silent {
            at,
            name: name.to_string(),
        });
    }

    /// Member `by` says `name`'s last SMInfo (`state`) reached it at `at`. Kept only
    /// while `name` itself is silent and for answers since that silence began: while
    /// its API answers, its own word is the timeline.
    pub fn peer_seen(&mut self, at: u64, name: &str, by: &str, state: &'static str) {
        let Some((None, since)) = self.own.get(name) else {
            return;
        };
        if at < *since {
            return;
        }
        if let Some((last, s)) = self.peer_last.get(name) {
            if *s == state && last.abs_diff(at) <= SAME_ANSWER_MS {
                return;
            }
        }
        self.peer_last.insert(name.to_string(), (at, state));
        self.obs.push(Obs::Peer {
            at,
            name: name.to_string(),
            by: by.to_string(),
            state,
        });
    }

    /// Everything recorded so far.
    pub fn observations(&self) -> &[Obs] {
        &self.obs
    }

    /// The handovers seen so far.
    pub fn handovers(&self) -> &[Handover] {
        &self.handovers
    }
}

/// The timeline of each SM from the observations (see the module doc): own answers
/// while answering; during a silence, the state peers last saw, at the time they saw
/// it; "no answer" (`state: None`) from the later of the silence's start and the last
/// such dated answer.
pub fn merge(obs: &[Obs]) -> Vec<Change> {
    let mut by_sm: BTreeMap<&str, Vec<&Obs>> = BTreeMap::new();
    for o in obs {
        by_sm.entry(o.name()).or_default().push(o);
    }
    let mut out = Vec::new();
    for (name, mut list) in by_sm {
        list.sort_by_key(|o| (o.at(), o.rank()));
        let mut cur: Option<Option<&'static str>> = None;
        // During a silence: when "no answer" starts (moved by every dated answer).
        let mut silent_until: Option<u64> = None;
        let mut emit =
            |at: u64, state: Option<&'static str>, cur: &mut Option<Option<&'static str>>| {
                if *cur != Some(state) {
                    out.push(Change {
                        at,
                        seq: 0,
                        name: name.to_string(),
                        state,
                    });
                    *cur = Some(state);
                }
            };
        for o in list {
            match o {
                Obs::Own { at, state, .. } => {
                    if let Some(end) = silent_until.take() {
                        emit(end.min(*at), None, &mut cur);
                    }
                    emit(*at, Some(state), &mut cur);
                }
                Obs::Silent { at, .. } => silent_until = Some(*at),
                Obs::Peer { at, state, .. } => {
                    if let Some(end) = silent_until.as_mut() {
                        emit(*at, Some(state), &mut cur);
                        *end = (*end).max(*at);
                    }
                }
            }
        }
        if let Some(end) = silent_until {
            emit(end, None, &mut cur);
        }
    }
    out.sort_by(|a, b| (a.at, &a.name).cmp(&(b.at, &b.name)));
    for (i, c) in out.iter_mut().enumerate() {
        c.seq = u64::try_from(i).unwrap_or(u64::MAX);
    }
    out
}

/// The longest two-MASTER stretch still taken for a HANDOVER's own exchange: the
/// HANDOVER and its answer are one SMP round trip (1-6 ms seen on ibsim); a stretch
/// longer than the sender's first HANDOVER timeout (200 ms) means both SMs acted as
/// master, and counts as two masters whatever ended it.
pub const HANDOVER_EXCHANGE_MAX_MS: u64 = 200;

/// Of the stretches with two MASTERs, those that are a HANDOVER's own exchange: two
/// SMs, ending when one of them left MASTER by handing the subnet to the other (the
/// target takes over on the HANDOVER, the sender leaves on its answer), and no longer
/// than [`HANDOVER_EXCHANGE_MAX_MS`]. Their total time and number.
pub fn handover_overlap(
    changes: &[Change],
    handovers: &[Handover],
    from: u64,
    to: u64,
) -> (u64, u64) {
    dual_windows(changes, from, to)
        .iter()
        .filter(|(start, end, sms)| {
            end - start <= HANDOVER_EXCHANGE_MAX_MS
                && sms.len() == 2
                && handovers
                    .iter()
                    .any(|h| h.at == *end && sms.contains(&h.from) && sms.contains(&h.to))
        })
        .fold((0, 0), |(ms, n), (a, b, _)| (ms + (b - a), n + 1))
}

/// The SMState name a timeline uses.
pub fn state_name(raw: i32) -> &'static str {
    match pb::SmState::try_from(raw) {
        Ok(pb::SmState::Master) => "MASTER",
        Ok(pb::SmState::Standby) => "STANDBY",
        Ok(pb::SmState::Discovering) => "DISCOVERING",
        _ => "NOTACTIVE",
    }
}

/// One member the poller asks.
#[derive(Clone)]
pub struct Polled {
    pub name: String,
    pub guid: u64,
    pub control: ControlClient<AuthChannel>,
}

/// The running poller: its recorder, and the task (stopped when this is dropped).
pub struct MembersView {
    pub recorder: Arc<Mutex<Recorder>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for MembersView {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl MembersView {
    /// Start polling `members` every [`POLL_EVERY`].
    pub fn start(members: Vec<Polled>) -> MembersView {
        let recorder = Arc::new(Mutex::new(Recorder::default()));
        let rec = recorder.clone();
        let task = tokio::spawn(async move {
            let names: BTreeMap<u64, String> =
                members.iter().map(|m| (m.guid, m.name.clone())).collect();
            loop {
                let started = std::time::Instant::now();
                let round_at = now_ms();
                let mut set = tokio::task::JoinSet::new();
                for m in &members {
                    let round_start = started;
                    let mut c = m.control.clone();
                    let name = m.name.clone();
                    set.spawn(async move {
                        let st = tokio::time::timeout(
                            CALL_DEADLINE,
                            c.get_status(pb::GetStatusRequest {}),
                        )
                        .await;
                        let st = match st {
                            Ok(Ok(_)) if round_start.elapsed() > SLOW_ANSWER => {
                                return (name, Err(()), None)
                            }
                            Ok(Ok(r)) => (now_ms(), r.into_inner()),
                            _ => return (name, Ok(None), None),
                        };
                        let sms =
                            tokio::time::timeout(CALL_DEADLINE, c.list_sms(pb::ListSmsRequest {}))
                                .await;
                        let read = now_ms();
                        let sms = match sms {
                            Ok(Ok(r)) => Some((read, r.into_inner().sms)),
                            _ => None,
                        };
                        (name, Ok(Some(st)), sms)
                    });
                }
                let mut round = Vec::new();
                while let Some(r) = set.join_next().await {
                    if let Ok(r) = r {
                        round.push(r);
                    }
                }
                if let Ok(mut rec) = rec.lock() {
                    // Own answers first: a peer's word counts only for a silent SM.
                    for (name, st, _) in &round {
                        rec.calls += 1;
                        match st {
                            Ok(Some((read, s))) => {
                                let to = (s.handed_over_to != 0)
                                    .then(|| names.get(&s.handed_over_to))
                                    .flatten();
                                rec.own_answer(
                                    *read,
                                    name,
                                    state_name(s.state),
                                    s.state_for_ms,
                                    to.map(String::as_str),
                                );
                            }
                            Ok(None) => {
                                rec.failed += 1;
                                rec.own_silent(round_at, name);
                            }
                            Err(()) => rec.slow += 1,
                        }
                    }
                    for (by, _, sms) in &round {
                        let Some((read, sms)) = sms else { continue };
                        for e in sms.iter().filter(|e| !e.is_self) {
                            let (Some(ago), Some(name)) = (e.answered_ms_ago, names.get(&e.guid))
                            else {
                                continue;
                            };
                            rec.peer_seen(read.saturating_sub(ago), name, by, state_name(e.state));
                        }
                    }
                }
                tokio::time::sleep(POLL_EVERY.saturating_sub(started.elapsed())).await;
            }
        });
        MembersView { recorder, task }
    }

    /// The merged timeline now, and the handovers.
    pub fn changes(&self) -> (Vec<Change>, Vec<Handover>) {
        let r = match self.recorder.lock() {
            Ok(r) => r,
            Err(p) => p.into_inner(),
        };
        (merge(r.observations()), r.handovers().to_vec())
    }

    /// (calls made, calls that failed, answers left out as slow).
    pub fn calls(&self) -> (u64, u64, u64) {
        let r = match self.recorder.lock() {
            Ok(r) => r,
            Err(p) => p.into_inner(),
        };
        (r.calls, r.failed, r.slow)
    }
}

#[cfg(test)]
mod tests {
    use super::super::timeline::master_gaps_windows;
    use super::*;

    fn states(t: &[Change], name: &str) -> Vec<(u64, Option<&'static str>)> {
        t.iter()
            .filter(|c| c.name == name)
            .map(|c| (c.at, c.state))
            .collect()
    }

    /// A master whose API goes silent at 1030 while its SM keeps answering the
    /// others' SMInfo polls: sm2 saw it MASTER 100 ms before the read at 1500, so
    /// it was MASTER until 1400, overlapping sm2's own mastership from 1200.
    #[test]
    fn a_silent_members_last_state_is_dated_by_the_peers_ages() {
        let mut r = Recorder::default();
        r.own_answer(0, "sm1", "MASTER", 0, None);
        r.own_answer(0, "sm2", "STANDBY", 0, None);
        // While sm1 answers itself, peers' word about it is not kept.
        r.peer_seen(900, "sm1", "sm2", "STANDBY");
        r.own_silent(1030, "sm1");
        r.own_answer(1200, "sm2", "MASTER", 0, None);
        // Read at 1500: sm2's answered_ms_ago for sm1 is 100.
        r.peer_seen(1500 - 100, "sm1", "sm2", "MASTER");
        // The same answer read again a poll later (ages moved by the same 25 ms,
        // latency 2 ms): one answer.
        r.peer_seen(1525 - 123, "sm1", "sm2", "MASTER");
        // An answer from before the silence: older than sm1's own word.
        r.peer_seen(1000, "sm1", "sm2", "MASTER");
        assert_eq!(r.observations().len(), 5, "{:?}", r.observations());
        let t = merge(r.observations());
        assert_eq!(
            states(&t, "sm1"),
            vec![(0, Some("MASTER")), (1400, None)],
            "sm1 is MASTER until the dated answer, then silent"
        );
        let g = master_gaps_windows(&t, 0, 2000);
        assert_eq!((g.dual, g.dual_windows), (200, 1), "{t:?}");
        assert_eq!(g.none_total, 0, "sm2 is MASTER from 1200 on");

        // Had the drill taken the read time (1500) instead of the dated answer, the
        // overlap would be 300 ms; without the peers' view there is none at all.
        let no_peers: Vec<Obs> = r
            .observations()
            .iter()
            .filter(|o| !matches!(o, Obs::Peer { .. }))
            .cloned()
            .collect();
        let t = merge(&no_peers);
        assert_eq!(states(&t, "sm1"), vec![(0, Some("MASTER")), (1030, None)]);
        let g = master_gaps_windows(&t, 0, 2000);
        assert_eq!((g.dual, g.none_total), (0, 170));
    }

    /// A planned handover: the target reports MASTER since 990, the old master
    /// STANDBY since 996 by handing over to it; each change is dated by the SM itself
    /// (read time minus state_for_ms), whatever order the calls came back in, and the
    /// 6 ms both were MASTER is the HANDOVER's exchange, not two masters.
    #[test]
    fn a_handover_is_dated_by_the_sms_and_its_overlap_told_apart() {
        let mut r = Recorder::default();
        r.own_answer(0, "sm1", "MASTER", 0, None);
        r.own_answer(0, "sm2", "STANDBY", 0, None);
        r.own_answer(1003, "sm1", "STANDBY", 7, Some("sm2"));
        r.own_answer(1000, "sm2", "MASTER", 10, None);
        let t = merge(r.observations());
        assert_eq!(
            states(&t, "sm2"),
            vec![(0, Some("STANDBY")), (990, Some("MASTER"))]
        );
        assert_eq!(
            states(&t, "sm1"),
            vec![(0, Some("MASTER")), (996, Some("STANDBY"))]
        );
        let g = master_gaps_windows(&t, 0, 2000);
        assert_eq!(g.dual, 6);
        let h = r.handovers().to_vec();
        assert_eq!(handover_overlap(&t, &h, 0, 2000), (6, 1));
        // Without the old master's word that it handed over, it is two masters.
        assert_eq!(handover_overlap(&t, &[], 0, 2000), (0, 0));
        // A third SM MASTER meanwhile is two masters whatever the handover.
        let mut three = t.clone();
        three.push(Change {
            at: 992,
            seq: 99,
            name: "sm3".into(),
            state: Some("MASTER"),
        });
        assert_eq!(handover_overlap(&three, &h, 0, 2000).0, 0);
        // Two masters for longer than a HANDOVER's exchange: both acted as master.
        let mut slow = t.clone();
        for c in slow.iter_mut().filter(|c| c.name == "sm2" && c.at == 990) {
            c.at = 990 - HANDOVER_EXCHANGE_MAX_MS;
        }
        assert_eq!(handover_overlap(&slow, &h, 0, 2000), (0, 0));
    }

    /// A killed master: the peers' last answers predate its silence, so it is
    /// "no answer" from its first unanswered call; the failover's masterless window
    /// runs from there to the standby's own MASTER answer. A peer that saw it
    /// DISCOVERING after its API went (a hung API) shows that state.
    #[test]
    fn a_killed_master_ends_at_its_silence_and_comes_back_as_itself() {
        let mut r = Recorder::default();
        r.own_answer(0, "a", "MASTER", 0, None);
        r.own_answer(0, "b", "STANDBY", 0, None);
        r.own_silent(500, "a");
        r.own_silent(525, "a");
        r.peer_seen(480, "a", "b", "MASTER");
        r.own_answer(900, "b", "MASTER", 0, None);
        r.own_answer(2000, "a", "STANDBY", 0, None);
        let t = merge(r.observations());
        assert_eq!(
            states(&t, "a"),
            vec![(0, Some("MASTER")), (500, None), (2000, Some("STANDBY"))]
        );
        let g = master_gaps_windows(&t, 0, 3000);
        assert_eq!((g.none_total, g.dual), (400, 0));

        let mut r = Recorder::default();
        r.own_answer(0, "a", "MASTER", 0, None);
        r.own_silent(500, "a");
        r.peer_seen(600, "a", "b", "DISCOVERING");
        r.peer_seen(700, "a", "c", "DISCOVERING");
        let t = merge(r.observations());
        assert_eq!(
            states(&t, "a"),
            vec![(0, Some("MASTER")), (600, Some("DISCOVERING")), (700, None)]
        );
    }
}
