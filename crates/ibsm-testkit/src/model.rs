//! Exhaustive bounded model checker of the election (see the crate doc). Depth-first
//! with hashed states, so memory stays at depth x branching.
//!
//! Actions from a state: deliver any in-flight message (any order: reordering and
//! arbitrary delay), drop one (loss, budgeted), fire any SM's next timer (the clock
//! jumps to it, so timers may also overtake messages), crash a live SM or restart a
//! crashed one (budgeted). States are deduplicated by hash. Every reached state must
//! satisfy the world's safety invariants and, after a loss-free settle of
//! `settle_for` virtual time (messages delivered in time order with 1 ms latency),
//! have exactly one master which (if `require_best`) is the highest-ranked live SM.

use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::time::Duration;

use crate::world::{SmSpec, World};

/// What to explore.
#[derive(Clone, Debug)]
pub struct ModelConfig {
    /// The SMs.
    pub specs: Vec<SmSpec>,
    /// Longest action sequence explored.
    pub max_depth: usize,
    /// Messages that may be dropped on one path.
    pub max_drops: u32,
    /// Crashes on one path (each crashed SM may also restart).
    pub max_crashes: u32,
    /// Loss-free virtual time given to converge, from every reached state.
    pub settle_for: Duration,
    /// Require the highest-ranked live SM to be the master (false in sticky mode).
    pub require_best: bool,
    /// Safety stop: give up (and say so) beyond this many states.
    pub max_states: usize,
    /// Where exploration starts: `None` = every SM just booted.
    pub warmup: Option<Warmup>,
    /// Indices of rogue SMs (outside the others' `trusted_sm_guids`): convergence is
    /// checked among the other SMs only, a rogue may end in any state, MASTER included.
    pub rogues: Vec<usize>,
}

/// A loss-free run that positions the explorer just before an interesting moment
/// (e.g. a HANDOVER), so the bounded depth is spent on faults around it.
#[derive(Clone, Debug)]
pub struct Warmup {
    /// SMs that are down at boot.
    pub start_crashed: Vec<usize>,
    /// Loss-free time before they are restarted.
    pub settle: Duration,
    /// Then run (loss-free) until this holds, at most `max` more.
    pub until: fn(&World) -> bool,
    /// Bound of that second run.
    pub max: Duration,
}

/// A path to a violation.
#[derive(Clone, Debug)]
pub struct Counterexample {
    /// The actions from the initial state, one line each.
    pub trace: Vec<String>,
    /// What went wrong.
    pub violation: String,
}

/// The checker's verdict.
#[derive(Clone, Debug)]
pub struct Report {
    /// States explored (a state reached again at a smaller depth counts again).
    pub states: usize,
    /// Whether `max_states` cut the search short.
    pub truncated: bool,
    /// The first violation found.
    pub counterexample: Option<Counterexample>,
}

struct Node {
    world: World,
    drops: u32,
    crashes: u32,
    depth: usize,
    trace: usize,
}

fn fixed_latency(_: &ibsm_core::election::SmInfoMsg) -> Option<Duration> {
    Some(Duration::from_millis(1))
}

fn state_hash(w: &World, drops: u32, crashes: u32) -> u64 {
    let mut h = DefaultHasher::new();
    w.hash(&mut h);
    drops.hash(&mut h);
    crashes.hash(&mut h);
    h.finish()
}

fn trace_of(arena: &[(usize, String)], mut idx: usize) -> Vec<String> {
    let mut out = Vec::new();
    while let Some((parent, what)) = arena.get(idx) {
        if idx == 0 {
            break;
        }
        out.push(what.clone());
        idx = *parent;
    }
    out.reverse();
    out
}

/// Explores and reports.
pub fn check(cfg: &ModelConfig) -> Report {
    let mut net = fixed_latency;
    let mut init = match &cfg.warmup {
        None => World::new(cfg.specs.clone()),
        Some(w) => {
            let mut world = World::with_crashed(cfg.specs.clone(), &w.start_crashed);
            let t = world.now + w.settle;
            world.run_until(t, &mut net, &mut |_| {});
            for &i in &w.start_crashed {
                world.restart(i, &mut net);
            }
            let until = w.until;
            let t = world.now + w.max;
            if !world.run_while(t, &mut net, &mut |x| !until(x)) {
                return Report {
                    states: 0,
                    truncated: true,
                    counterexample: Some(Counterexample {
                        trace: vec![],
                        violation: String::from("warm-up never reached its condition"),
                    }),
                };
            }
            world
        }
    };
    // Messages sent during the warm-up are still in flight; clear the clock skew.
    init.now = init.now.max(Duration::ZERO);
    // DFS (memory = depth x branching); a state is re-explored when reached at a
    // smaller depth than before, so the bounded search stays complete.
    let mut seen: HashMap<u64, usize> = HashMap::new();
    let mut arena: Vec<(usize, String)> = vec![(0, String::from("start"))];
    let mut queue = Vec::new();
    seen.insert(state_hash(&init, 0, 0), 0);
    queue.push(Node {
        world: init,
        drops: 0,
        crashes: 0,
        depth: 0,
        trace: 0,
    });
    let mut states = 0usize;
    while let Some(node) = queue.pop() {
        states += 1;
        if states > cfg.max_states {
            return Report {
                states,
                truncated: true,
                counterexample: None,
            };
        }
        let fail = |violation: String, arena: &[(usize, String)]| Report {
            states,
            truncated: false,
            counterexample: Some(Counterexample {
                trace: trace_of(arena, node.trace),
                violation,
            }),
        };
        if let Some(v) = &node.world.violation {
            return fail(v.clone(), &arena);
        }
        // Liveness within a bound: settle without loss and look.
        let mut settled = node.world.clone();
        let until = settled.now + cfg.settle_for;
        settled.run_until(until, &mut net, &mut |_| {});
        if let Some(v) = settled.violation.clone() {
            return fail(format!("while settling: {v}"), &arena);
        }
        if let Err(e) = settled.check_converged_ignoring(cfg.require_best, &cfg.rogues) {
            return fail(
                format!(
                    "not converged {:?} after the last fault: {e}",
                    cfg.settle_for
                ),
                &arena,
            );
        }
        if node.depth >= cfg.max_depth {
            continue;
        }
        let w = &node.world;
        let n = w.nodes.len();
        let mut children: Vec<(World, u32, u32, String)> = Vec::new();
        for k in 0..w.inflight.len() {
            if w.inflight
                .get(..k)
                .is_some_and(|before| before.iter().any(|m| Some(m) == w.inflight.get(k)))
            {
                continue;
            }
            let Some(m) = w.inflight.get(k) else { continue };
            let desc = format!("SM{}->SM{} {:?}", m.from, m.to, m.msg);
            let mut c = w.clone();
            c.deliver(k, false, &mut net);
            children.push((c, node.drops, node.crashes, format!("deliver {desc}")));
            if node.drops < cfg.max_drops {
                let mut c = w.clone();
                c.drop_msg(k);
                children.push((c, node.drops + 1, node.crashes, format!("drop {desc}")));
            }
        }
        for i in 0..n {
            if let Some(t) = w.timer(i) {
                let mut c = w.clone();
                c.fire(i, &mut net);
                children.push((c, node.drops, node.crashes, format!("timer SM{i} at {t:?}")));
            }
            match w.nodes.get(i) {
                Some(Some(_)) if node.crashes < cfg.max_crashes => {
                    let mut c = w.clone();
                    c.crash(i);
                    children.push((c, node.drops, node.crashes + 1, format!("crash SM{i}")));
                }
                Some(None) => {
                    let mut c = w.clone();
                    c.restart(i, &mut net);
                    children.push((c, node.drops, node.crashes, format!("restart SM{i}")));
                }
                _ => {}
            }
        }
        for (c, drops, crashes, what) in children {
            let h = state_hash(&c, drops, crashes);
            let depth = node.depth + 1;
            if seen.get(&h).is_none_or(|&d| depth < d) {
                seen.insert(h, depth);
                arena.push((node.trace, what));
                queue.push(Node {
                    world: c,
                    drops,
                    crashes,
                    depth,
                    trace: arena.len() - 1,
                });
            }
        }
    }
    Report {
        states,
        truncated: false,
        counterexample: None,
    }
}

/// Config the checks use: the default election timings, a master poll of 500 ms so a
/// settle of a few virtual seconds covers a full re-election, stall detection off
/// (ActCount is exercised by unit tests and the simulation).
pub fn model_spec(guid: u64, priority: u8) -> SmSpec {
    let mut s = SmSpec::new(guid, priority);
    s.config.master_poll_interval = Duration::from_millis(500);
    s.config.stall_window = None;
    s
}

/// Warm-up condition: some SM has a HANDOVER outstanding.
pub fn handover_outstanding(w: &World) -> bool {
    w.nodes
        .iter()
        .flatten()
        .any(|e| e.handover_target().is_some())
}
