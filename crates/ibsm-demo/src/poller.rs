//! The demo's independent observer: a client on a spare CA port of the embedded fabric
//! that reads every instance port's SMInfo by directed route every 10 ms and records
//! each change (`ibsm.demo.v1.Demo/PollSmInfo`, used by `ibsmctl drill`).
//!
//! Why on the fabric and not through the instances' APIs: a drill must judge "no
//! master" and "two masters" the way another node of the subnet would see it (as
//! `sminfo -D` does on ibsim), not by what each SM believes about itself; a killed
//! SM's API is gone, and a partitioned one may still call itself MASTER.
//!
//! The same loop runs in two places: in-process on the embedded fabric
//! ([`SmInfoPoller::start`]), and on ibsim as the hidden `ibsmd sminfo-poll` process
//! under umad2sim on a spare HCA ([`SmInfoPoller::start_on_device`] over a
//! `UmadDevice`), which prints one [`PollLine`] of JSON per change and a heartbeat
//! per second; `ibsmd demo --fabric ibsim:` reads those lines back into the same log
//! ([`SmInfoPoller::from_lines`]), so `PollSmInfo` has one meaning on both fabrics.
//!
//! An unanswered read counts as "no SM" only after [`MISSES`] rounds in a row, dated
//! at the first miss: one SMP late on a busy machine is not a dead SM (the same
//! trade-off the election's polling makes), but the gap is still measured in full.
//!
//! # When a change is dated
//!
//! A round sends every read at once, but each SM answers at its own instant, so two
//! answers of one round are not simultaneous: in a handover, the old master can answer
//! MASTER just before it steps down and the new one MASTER just after it took over,
//! in the same round, with no instant when both were MASTER. So the timeline is dated
//! to count only what the answers prove, in the direction that is pessimistic for
//! masterless time: leaving MASTER is dated at the last round that still saw MASTER,
//! and entering MASTER at the first round that saw it. Two masters then show only when
//! one SM answered MASTER both before and after another one's first MASTER answer;
//! the unknown stretch between the last MASTER answer and the next one counts as no
//! master.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ibsm_fabric::{NodeIdx, Topology};
use ibsm_mad::{AttributeId, Method, SmInfo, SmState, Smp};
use ibsm_transport::{MadDevice, SharedSim};

/// Poll period.
pub const INTERVAL: Duration = Duration::from_millis(10);
/// How long a round waits for its answers.
const ROUND_WAIT: Duration = Duration::from_millis(40);
/// Unanswered rounds in a row before a port counts as "no SM".
pub const MISSES: u32 = 3;
/// Changes kept (oldest dropped first).
const KEEP: usize = 100_000;
/// TIDs of the poller (its own client: no other agent shares them).
const TID_BASE: u64 = 0x5000_0000;

/// One change seen on one SM port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sample {
    /// Increasing sequence number.
    pub seq: u64,
    /// Round time, ms since the Unix epoch.
    pub at_unix_ms: u64,
    /// Demo member name.
    pub name: String,
    /// Port GUID from the last SMInfo (0 if never answered).
    pub guid: u64,
    /// SMState; `None`: no SMInfo answer (no SM behind the port).
    pub state: Option<SmState>,
}

#[derive(Debug, Default)]
struct Log {
    samples: VecDeque<Sample>,
    next_seq: u64,
    rounds: u64,
    /// The last (GUID, state) recorded per name.
    latest: BTreeMap<String, (u64, Option<SmState>)>,
}

/// One line of `ibsmd sminfo-poll`'s output: a heartbeat (`sample` absent) or a change.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PollLine {
    /// Rounds polled so far.
    pub rounds: u64,
    /// The change, if this line reports one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sample: Option<LineSample>,
}

/// A change as printed by `ibsmd sminfo-poll`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LineSample {
    /// Round time, ms since the Unix epoch (the poller's clock: same machine).
    pub at_unix_ms: u64,
    /// Member name.
    pub name: String,
    /// Port GUID from the last SMInfo.
    pub guid: u64,
    /// `MASTER`, `STANDBY`, `DISCOVERING`, `NOTACTIVE`, or absent: no answer.
    #[serde(default)]
    pub state: Option<String>,
}

/// Why a poller line was not understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PollLineError {
    /// Not JSON of the [`PollLine`] shape.
    #[error("sminfo-poll line {line:?}: {why}")]
    Json { line: String, why: String },
    /// An SMState name nobody knows.
    #[error("sminfo-poll line {line:?}: unknown SMState {state:?}")]
    State { line: String, state: String },
}

/// The SMState's name on a [`PollLine`].
pub fn state_name(s: SmState) -> &'static str {
    match s {
        SmState::NotActive => "NOTACTIVE",
        SmState::Discovering => "DISCOVERING",
        SmState::Standby => "STANDBY",
        SmState::Master => "MASTER",
    }
}

fn state_from_name(n: &str) -> Option<SmState> {
    Some(match n {
        "NOTACTIVE" => SmState::NotActive,
        "DISCOVERING" => SmState::Discovering,
        "STANDBY" => SmState::Standby,
        "MASTER" => SmState::Master,
        _ => return None,
    })
}

impl PollLine {
    /// The JSON line for a recorded sample.
    pub fn of_sample(s: &Sample, rounds: u64) -> PollLine {
        PollLine {
            rounds,
            sample: Some(LineSample {
                at_unix_ms: s.at_unix_ms,
                name: s.name.clone(),
                guid: s.guid,
                state: s.state.map(|st| state_name(st).to_string()),
            }),
        }
    }

    /// Parse one line; returns the rounds and, for a change, (time, name, GUID, state).
    pub fn parse(line: &str) -> Result<PollLine, PollLineError> {
        let l: PollLine = serde_json::from_str(line).map_err(|e| PollLineError::Json {
            line: line.chars().take(200).collect(),
            why: e.to_string(),
        })?;
        if let Some(st) = l.sample.as_ref().and_then(|s| s.state.as_deref()) {
            if state_from_name(st).is_none() {
                return Err(PollLineError::State {
                    line: line.chars().take(200).collect(),
                    state: st.to_string(),
                });
            }
        }
        Ok(l)
    }

    /// The sample's SMState (`None`: no answer, or a heartbeat).
    pub fn sm_state(&self) -> Option<SmState> {
        self.sample
            .as_ref()
            .and_then(|s| s.state.as_deref())
            .and_then(state_from_name)
    }
}

/// What [`SmInfoPoller::since`] returns.
#[derive(Debug, Clone)]
pub struct PollView {
    /// Changes with seq > the cursor.
    pub samples: Vec<Sample>,
    /// Cursor for the next call.
    pub next_seq: u64,
    /// Rounds so far.
    pub rounds: u64,
}

/// The running poller; stops its thread when dropped.
pub struct SmInfoPoller {
    log: Arc<Mutex<Log>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for SmInfoPoller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SmInfoPoller")
    }
}

/// Directed route (egress ports, first = ours) from CA port `from` to CA port `to`,
/// breadth first through switches.
pub fn dr_path(t: &Topology, from: (NodeIdx, u8), to: (NodeIdx, u8)) -> Option<Vec<u8>> {
    let first = t.node(from.0)?.port(from.1)?.remote?;
    if first == to {
        return Some(vec![from.1]);
    }
    let mut parent: HashMap<NodeIdx, (NodeIdx, u8)> = HashMap::new();
    let mut queue = VecDeque::from([first.0]);
    let mut seen = std::collections::HashSet::from([first.0]);
    while let Some(sw) = queue.pop_front() {
        let node = t.node(sw)?;
        if !node.is_switch() {
            continue;
        }
        for (p, port) in node.physical_ports() {
            let Some(next) = port.remote else { continue };
            if next == to {
                let mut rev = vec![p];
                let mut at = sw;
                while let Some((prev, out)) = parent.get(&at) {
                    rev.push(*out);
                    at = *prev;
                }
                rev.push(from.1);
                rev.reverse();
                return Some(rev);
            }
            if t.node(next.0).is_some_and(|n| n.is_switch()) && seen.insert(next.0) {
                parent.insert(next.0, (sw, p));
                queue.push_back(next.0);
            }
        }
    }
    None
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

struct Target {
    name: String,
    path: Vec<u8>,
    guid: u64,
    state: Option<SmState>,
    misses: u32,
    first_miss_ms: u64,
    /// Round time of the last answer.
    last_answer_ms: u64,
}

impl SmInfoPoller {
    /// Attach to CA port `at` of `sim` and poll `targets` (member name, CA node, port).
    pub fn start(
        sim: &SharedSim,
        topology: &Topology,
        at: (NodeIdx, u8),
        targets: &[(String, NodeIdx, u8)],
    ) -> anyhow::Result<SmInfoPoller> {
        let mut list = Vec::new();
        for (name, node, port) in targets {
            let path = dr_path(topology, at, (*node, *port)).ok_or_else(|| {
                anyhow::anyhow!("SMInfo poller: no path from the poller's port to {name}")
            })?;
            list.push((name.clone(), path));
        }
        let dev = sim.attach(at.0, at.1)?;
        SmInfoPoller::start_on_device(Box::new(dev), list)
    }

    /// Poll `targets` (member name, directed route from the device's port) over any
    /// device: the embedded simulator, or a `UmadDevice` (`ibsmd sminfo-poll`).
    pub fn start_on_device(
        dev: Box<dyn MadDevice + Send>,
        targets: Vec<(String, Vec<u8>)>,
    ) -> anyhow::Result<SmInfoPoller> {
        let list: Vec<Target> = targets
            .into_iter()
            .map(|(name, path)| Target {
                name,
                path,
                guid: 0,
                state: None,
                misses: 0,
                first_miss_ms: 0,
                last_answer_ms: 0,
            })
            .collect();
        let log = Arc::new(Mutex::new(Log::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let (l, s) = (Arc::clone(&log), Arc::clone(&stop));
        let thread = std::thread::Builder::new()
            .name("sminfo-poller".into())
            .spawn(move || run(dev, list, &l, &s))?;
        Ok(SmInfoPoller {
            log,
            stop,
            thread: Some(thread),
        })
    }

    /// A poller fed by another process's [`PollLine`]s (`ibsmd sminfo-poll`'s stdout):
    /// a detached thread records each change until the pipe closes. Lines it does not
    /// understand are logged and skipped (the process also logs to stderr).
    pub fn from_lines<R: std::io::BufRead + Send + 'static>(reader: R) -> SmInfoPoller {
        let log = Arc::new(Mutex::new(Log::default()));
        let l = Arc::clone(&log);
        let spawned = std::thread::Builder::new()
            .name("sminfo-poll-reader".into())
            .spawn(move || {
                for line in reader.lines() {
                    let Ok(line) = line else { break };
                    if line.trim().is_empty() {
                        continue;
                    }
                    match PollLine::parse(&line) {
                        Ok(p) => {
                            let state = p.sm_state();
                            if let Some(s) = p.sample {
                                record_sample(&l, s.at_unix_ms, &s.name, s.guid, state);
                            }
                            if let Ok(mut g) = l.lock() {
                                g.rounds = g.rounds.max(p.rounds);
                            }
                        }
                        Err(e) => tracing::warn!(%e, "SMInfo poller process"),
                    }
                }
                tracing::info!("the SMInfo poller process closed its output");
            });
        if let Err(e) = spawned {
            tracing::error!(%e, "cannot start the SMInfo poller reader thread");
        }
        SmInfoPoller {
            log,
            stop: Arc::new(AtomicBool::new(false)),
            // Detached: it ends when the process's pipe closes.
            thread: None,
        }
    }

    /// The last (GUID, state) seen for `name` (`None`: nothing recorded yet).
    pub fn latest(&self, name: &str) -> Option<(u64, Option<SmState>)> {
        let log = self.log.lock().unwrap_or_else(|p| p.into_inner());
        log.latest.get(name).copied()
    }

    /// Changes after `after_seq`.
    pub fn since(&self, after_seq: u64) -> PollView {
        let log = self.log.lock().unwrap_or_else(|p| p.into_inner());
        PollView {
            samples: log
                .samples
                .iter()
                .filter(|s| s.seq > after_seq)
                .cloned()
                .collect(),
            next_seq: log.next_seq,
            rounds: log.rounds,
        }
    }
}

impl Drop for SmInfoPoller {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn record(log: &Mutex<Log>, at_unix_ms: u64, t: &Target) {
    record_sample(log, at_unix_ms, &t.name, t.guid, t.state);
}

fn record_sample(log: &Mutex<Log>, at_unix_ms: u64, name: &str, guid: u64, state: Option<SmState>) {
    let mut log = log.lock().unwrap_or_else(|p| p.into_inner());
    log.next_seq += 1;
    let seq = log.next_seq;
    log.latest.insert(name.to_string(), (guid, state));
    log.samples.push_back(Sample {
        seq,
        at_unix_ms,
        name: name.to_string(),
        guid,
        state,
    });
    while log.samples.len() > KEEP {
        log.samples.pop_front();
    }
}

fn run(
    mut dev: Box<dyn MadDevice + Send>,
    mut targets: Vec<Target>,
    log: &Mutex<Log>,
    stop: &AtomicBool,
) {
    let mut round: u64 = 0;
    // Record the initial "unknown" so the timeline starts at the first round.
    let mut started = false;
    while !stop.load(Ordering::SeqCst) {
        let began = Instant::now();
        let at = unix_ms();
        round += 1;
        let mut pending: BTreeMap<u32, usize> = BTreeMap::new();
        for (i, t) in targets.iter().enumerate() {
            let tid = TID_BASE + (round << 8) + u64::try_from(i).unwrap_or(0);
            if let Ok(smp) = Smp::try_get_dr(&t.path, AttributeId::SM_INFO, 0, tid) {
                if dev.send(&smp.encode()).is_ok() {
                    pending.insert(tid as u32, i);
                }
            }
        }
        let mut answers: Vec<Option<SmInfo>> = vec![None; targets.len()];
        let deadline = began + ROUND_WAIT;
        while !pending.is_empty() {
            let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                break;
            };
            let Ok(Some(r)) = dev.recv(left) else {
                if stop.load(Ordering::SeqCst) {
                    return;
                }
                continue;
            };
            let Ok(smp) = Smp::decode(&r.mad) else {
                continue;
            };
            if smp.method != Method::GET_RESP || smp.attr_id != AttributeId::SM_INFO {
                continue;
            }
            let Some(i) = pending.remove(&(smp.tid as u32)) else {
                continue;
            };
            if smp.status == 0 {
                if let (Ok(info), Some(slot)) = (smp.attribute::<SmInfo>(), answers.get_mut(i)) {
                    *slot = Some(info);
                }
            }
        }
        for (t, a) in targets.iter_mut().zip(answers) {
            match a {
                Some(info) => {
                    t.misses = 0;
                    let changed = t.state != Some(info.sm_state) || t.guid != info.guid;
                    // See "When a change is dated" in the module doc.
                    let left_master = t.state == Some(SmState::Master)
                        && (info.sm_state != SmState::Master || t.guid != info.guid);
                    let when = if left_master && started {
                        t.last_answer_ms
                    } else {
                        at
                    };
                    t.guid = info.guid;
                    t.state = Some(info.sm_state);
                    t.last_answer_ms = at;
                    if changed || !started {
                        record(log, when, t);
                    }
                }
                None => {
                    if t.misses == 0 {
                        t.first_miss_ms = at;
                    }
                    t.misses = t.misses.saturating_add(1);
                    if (t.misses >= MISSES && t.state.is_some()) || (!started && t.state.is_none())
                    {
                        t.state = None;
                        record(log, if started { t.first_miss_ms } else { at }, t);
                    }
                }
            }
        }
        started = true;
        if let Ok(mut l) = log.lock() {
            l.rounds = round;
        }
        if let Some(rest) = INTERVAL.checked_sub(began.elapsed()) {
            std::thread::sleep(rest);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ibsm_transport::ReceivedMad;

    #[test]
    fn poll_lines_round_trip_into_the_log() {
        let s = Sample {
            seq: 7,
            at_unix_ms: 1234,
            name: "sm2".into(),
            guid: 0x10_0002,
            state: Some(SmState::Master),
        };
        let line = serde_json::to_string(&PollLine::of_sample(&s, 40)).expect("json");
        let none = Sample {
            state: None,
            ..s.clone()
        };
        let line2 = serde_json::to_string(&PollLine::of_sample(&none, 41)).expect("json");
        let beat = serde_json::to_string(&PollLine {
            rounds: 99,
            sample: None,
        })
        .expect("json");
        let input = format!("{line}\n\n{beat}\nnot json\n{{\"rounds\":1,\"sample\":{{\"at_unix_ms\":1,\"name\":\"x\",\"guid\":0,\"state\":\"BOSS\"}}}}\n{line2}\n");
        let p = SmInfoPoller::from_lines(std::io::Cursor::new(input.into_bytes()));
        let deadline = Instant::now() + Duration::from_secs(5);
        while p.since(0).samples.len() < 2 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        let v = p.since(0);
        assert_eq!(v.samples.len(), 2, "{:?}", v.samples);
        assert_eq!(v.samples[0].state, Some(SmState::Master));
        assert_eq!(v.samples[0].at_unix_ms, 1234);
        assert_eq!(v.samples[1].state, None);
        assert_eq!(v.rounds, 99);
        assert_eq!(p.latest("sm2"), Some((0x10_0002, None)));
        assert!(matches!(
            PollLine::parse(
                r#"{"rounds":1,"sample":{"at_unix_ms":1,"name":"x","guid":0,"state":"BOSS"}}"#
            ),
            Err(PollLineError::State { .. })
        ));
    }

    /// Answers each SM's SMInfo from a script: `script(target, nth read)`; target 0
    /// is the path `[1]`, target 1 the path `[2]`.
    struct Scripted {
        reads: [usize; 2],
        queue: VecDeque<ReceivedMad>,
        script: fn(usize, usize) -> SmState,
    }

    impl MadDevice for Scripted {
        fn send(
            &mut self,
            mad: &[u8; ibsm_mad::MAD_SIZE],
        ) -> Result<(), ibsm_transport::TransportError> {
            let smp = Smp::decode(mad).expect("an SMP");
            let target = match smp.directed().map(|d| d.path().to_vec()).as_deref() {
                Some([1]) => 0,
                Some([2]) => 1,
                other => panic!("unexpected path {other:?}"),
            };
            let n = self.reads[target];
            self.reads[target] += 1;
            let info = SmInfo {
                guid: 0x100 + target as u64,
                sm_key: 0,
                act_count: 0,
                priority: 0,
                sm_state: (self.script)(target, n),
            };
            self.queue.push_back(ReceivedMad::smp(
                smp.response().with_attribute(&info).encode(),
                0xffff,
            ));
            Ok(())
        }

        fn recv(
            &mut self,
            timeout: Duration,
        ) -> Result<Option<ReceivedMad>, ibsm_transport::TransportError> {
            match self.queue.pop_front() {
                Some(m) => Ok(Some(m)),
                None => {
                    std::thread::sleep(timeout.min(Duration::from_millis(5)));
                    Ok(None)
                }
            }
        }
    }

    /// Runs the poller over `script` until both targets were read 12 times; returns
    /// (when target 0 left MASTER, when target 1 became MASTER).
    fn handover_dates(script: fn(usize, usize) -> SmState) -> (u64, u64) {
        let dev = Scripted {
            reads: [0; 2],
            queue: VecDeque::new(),
            script,
        };
        let p = SmInfoPoller::start_on_device(
            Box::new(dev),
            vec![("a".into(), vec![1]), ("b".into(), vec![2])],
        )
        .expect("poller");
        let deadline = Instant::now() + Duration::from_secs(10);
        while p.since(0).rounds < 12 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let v = p.since(0);
        let at = |name: &str, master: bool| {
            v.samples
                .iter()
                .find(|s| {
                    s.name == name
                        && (s.state == Some(SmState::Master)) == master
                        && (master || v.samples.iter().any(|m| m.name == name && m.seq < s.seq))
                })
                .map(|s| s.at_unix_ms)
                .unwrap_or_else(|| panic!("no change of {name}: {:?}", v.samples))
        };
        (at("a", false), at("b", true))
    }

    #[test]
    fn one_round_that_saw_both_masters_of_a_handover_is_no_overlap() {
        // Round 5 (read 4): a still answered MASTER, b already MASTER; a stood down
        // before b's answer as far as anyone can tell.
        let (a_left, b_came) = handover_dates(|t, n| match (t, n) {
            (0, n) if n <= 4 => SmState::Master,
            (0, _) => SmState::Standby,
            (_, n) if n >= 4 => SmState::Master,
            _ => SmState::Standby,
        });
        assert!(a_left <= b_came, "a left at {a_left}, b came at {b_came}");
    }

    #[test]
    fn a_master_seen_before_and_after_another_ones_first_answer_is_an_overlap() {
        let (a_left, b_came) = handover_dates(|t, n| match (t, n) {
            (0, n) if n <= 6 => SmState::Master,
            (0, _) => SmState::Standby,
            (_, n) if n >= 4 => SmState::Master,
            _ => SmState::Standby,
        });
        assert!(a_left > b_came, "a left at {a_left}, b came at {b_came}");
    }

    #[test]
    fn paths_go_through_switches() {
        let t = ibsm_fabric::gen::fat_tree_3level(4).expect("fat tree");
        let cas: Vec<(NodeIdx, u8)> = t
            .iter()
            .filter(|(_, n)| !n.is_switch())
            .filter_map(|(i, n)| {
                n.physical_ports()
                    .find(|(_, p)| p.remote.is_some())
                    .map(|(p, _)| (i, p))
            })
            .collect();
        let (a, b) = (cas[0], cas[cas.len() - 1]);
        let path = dr_path(&t, a, b).expect("path");
        assert_eq!(path.first(), Some(&a.1));
        // Follow it: it must end at b.
        let mut at = t
            .node(a.0)
            .and_then(|n| n.port(a.1))
            .and_then(|p| p.remote)
            .expect("cable");
        for p in &path[1..] {
            at = t
                .node(at.0)
                .and_then(|n| n.port(*p))
                .and_then(|p| p.remote)
                .expect("hop");
        }
        assert_eq!(at, b);
    }
}
