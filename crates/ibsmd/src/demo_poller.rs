//! The demo's independent observer: a client on a spare CA port of the embedded fabric
//! that reads every instance port's SMInfo by directed route every 10 ms and records
//! each change (`ibsm.v1.Demo/PollSmInfo`, used by `ibsmctl drill`).
//!
//! Why on the fabric and not through the instances' APIs: a drill must judge "no
//! master" and "two masters" the way another node of the subnet would see it (as
//! `sminfo -D` does on ibsim), not by what each SM believes about itself; a killed
//! SM's API is gone, and a partitioned one may still call itself MASTER.
//!
//! An unanswered read counts as "no SM" only after [`MISSES`] rounds in a row, dated
//! at the first miss: one SMP late on a busy machine is not a dead SM (the same
//! trade-off the election's polling makes), but the gap is still measured in full.

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
            list.push(Target {
                name: name.clone(),
                path,
                guid: 0,
                state: None,
                misses: 0,
                first_miss_ms: 0,
            });
        }
        let dev = sim.attach(at.0, at.1)?;
        let log = Arc::new(Mutex::new(Log::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let (l, s) = (Arc::clone(&log), Arc::clone(&stop));
        let thread = std::thread::Builder::new()
            .name("sminfo-poller".into())
            .spawn(move || run(Box::new(dev), list, &l, &s))?;
        Ok(SmInfoPoller {
            log,
            stop,
            thread: Some(thread),
        })
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
    let mut log = log.lock().unwrap_or_else(|p| p.into_inner());
    log.next_seq += 1;
    let seq = log.next_seq;
    log.samples.push_back(Sample {
        seq,
        at_unix_ms,
        name: t.name.clone(),
        guid: t.guid,
        state: t.state,
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
                    t.guid = info.guid;
                    t.state = Some(info.sm_state);
                    if changed || !started {
                        record(log, at, t);
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
