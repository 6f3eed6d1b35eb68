//! A deterministic multi-SM simulation on the embedded fabric (`ibsm-sim`), replayable
//! from a seed.
//!
//! N SMs ([`SmNode`]: the shipped `ibsm_core::node::Node`, driven as the daemon does) are
//! attached at HCAs under different leaf switches of a generated 2-level fat tree. One
//! event loop advances virtual time to the next thing due (a delivery, a timer of any
//! SM, a fault) and steps the simulator and the SMs; nothing reads a clock and nothing
//! iterates a hash map, so a seed determines the run bit for bit.
//!
//! # Run shape
//!
//! 1. **Warm-up** (no faults) until one master has brought the subnet up and every end
//!    port has a LID: the LID invariant below is about *keeping* LIDs, so the first
//!    assignment must happen on a quiet fabric.
//! 2. **Faulty phase** (`faulty_for`): at seeded gaps, one of: SM crash (client
//!    detached, IsSM cleared, state dropped) or restart (re-attached, IsSM set, fresh
//!    state), a MAD loss burst (`Sim::set_loss` for a while), a latency change, a
//!    cable pulled and plugged back later (any cable, SM HCAs' included).
//! 3. **Quiet phase** (`quiet_for`): every cable back, no loss, base latency, and
//!    crashed SMs restarted or not (seeded). Then the end checks.
//!
//! # Invariants, checked after every step
//!
//! * **Bounded dual mastership**: two SMs in MASTER that can reach each other (same
//!   connected component of live cables) must not stay so for longer than
//!   `handover_window`, counted from when the fabric last let them talk (they both became
//!   master and connected, and no loss burst since). Partitions legitimately have one
//!   master each, so they are not counted; total dual-master time is reported.
//! * **Convergence**: from `converge_within` after the quiet phase starts to the end,
//!   exactly one live SM is MASTER and it is the highest-ranked live SM (priority, then
//!   lower port GUID).
//! * **MasterSMLID**: after every heavy sweep of a sole master that ran with no fault
//!   injected and no SMP failure, every Active port in its component (CA ports, switch
//!   port 0) has MasterSMLID = the master's LID; and at the end, after the master's
//!   first clean sweep since convergence.
//! * **LIDs are kept**: once an end port (CA port, switch port 0) has a LID, it never
//!   changes to another non-zero LID, across failovers and partitions.
//! * **No harness bug**: every SMP an SM builds is accepted by the simulator; no livelock.
//!
//! A failure is a [`Failure`] whose `Display` ends with
//! `IBSM_SEED=<n> cargo test -p ibsm-testkit fabric_sim`, which replays it exactly.

use std::collections::BTreeSet;
use std::fmt;
use std::time::Duration;

use ibsm_core::election::{ElectionConfig, SmState};
use ibsm_core::subnet::SubnetConfig;
use ibsm_fabric::{gen, NodeIdx, Topology};
use ibsm_mad::PortState;
use ibsm_sim::{Sim, SimConfig};

use crate::rng::Rng;
pub use crate::sim_driver::{NodeNote, NodeTimers, SmNode};

/// Settings of a fabric simulation run.
#[derive(Clone, Debug)]
pub struct FabricSimConfig {
    /// Priority of each SM (2..=4 SMs).
    pub priorities: Vec<u8>,
    /// Radix of the 2-level fat tree (even, >= 4 so the SMs sit under different leaves).
    pub radix: u32,
    /// Longest warm-up before the run is declared stuck.
    pub warmup_limit: Duration,
    /// Length of the faulty phase.
    pub faulty_for: Duration,
    /// Mean gap between fault events.
    pub fault_every: Duration,
    /// Length of the quiet phase.
    pub quiet_for: Duration,
    /// Bound on a dual-master stretch (see the module doc). The default, 6 s, is the
    /// worst path to a handover with the default timers: a higher SM that came back
    /// while the master was not looking (IsSM appearing raises no trap 144 in the
    /// simulator, nor on most HCAs) is found by the lower master's next heavy sweep
    /// (`heavy_sweep_interval`, 3 s) or by a light sweep that saw a port change
    /// (`sweep_interval`, 1 s), whose SMInfo query and HANDOVER then take at most
    /// `master_poll_interval` (1 s) plus `handover_timeout` x (1 + `handover_retries`)
    /// (0.8 s). 300 seeds measured at most 2.7 s.
    pub handover_window: Duration,
    /// After the quiet phase starts, exactly one (the best) master from this time on.
    pub converge_within: Duration,
    /// Base SMP latency (restored in the quiet phase).
    pub latency: Duration,
    /// Highest latency a fault sets.
    pub max_latency: Duration,
    /// Loss rate range of a burst.
    pub loss: (f64, f64),
    /// Election settings (port GUID and priority are set per SM).
    pub election: ElectionConfig,
    /// Subnet manager settings.
    pub subnet: SubnetConfig,
    /// Sweep timers of the SMs.
    pub timers: NodeTimers,
}

impl Default for FabricSimConfig {
    fn default() -> Self {
        FabricSimConfig {
            priorities: vec![3, 9, 5],
            radix: 4,
            warmup_limit: Duration::from_secs(10),
            faulty_for: Duration::from_secs(20),
            fault_every: Duration::from_secs(2),
            quiet_for: Duration::from_secs(12),
            handover_window: Duration::from_secs(6),
            converge_within: Duration::from_secs(6),
            latency: Duration::from_micros(50),
            max_latency: Duration::from_millis(20),
            loss: (0.05, 0.5),
            election: ElectionConfig::new(1),
            subnet: SubnetConfig {
                sweep_interval: Duration::from_secs(1),
                ..SubnetConfig::default()
            },
            timers: NodeTimers {
                standby_sweep_interval: Duration::from_secs(2),
                heavy_sweep_interval: Duration::from_secs(3),
            },
        }
    }
}

/// What a passing run looked like (equal for equal seeds: the replay check).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FabricSimOutcome {
    /// Loop steps.
    pub steps: u64,
    /// Faults injected, rendered in order with their times.
    pub faults: Vec<String>,
    /// State changes of all SMs, rendered in order with their times.
    pub transitions: Vec<String>,
    /// Longest counted dual-master stretch.
    pub max_dual_master: Duration,
    /// Total time with two connected masters (loss bursts included).
    pub dual_master_total: Duration,
    /// Clean master sweeps whose MasterSMLID was checked.
    pub master_sm_lid_checks: u32,
    /// The final master's GUID.
    pub master: u64,
    /// Times mastership moved to another SM (failovers and handovers).
    pub master_changes: u32,
    /// MADs the simulator delivered.
    pub delivered: u64,
    /// Virtual time at the end.
    pub end: Duration,
}

/// A violated invariant, with what is needed to replay it.
#[derive(Clone, Debug)]
pub struct Failure {
    /// The seed.
    pub seed: u64,
    /// Virtual time of the violation.
    pub at: Duration,
    /// What went wrong.
    pub what: String,
    /// The last faults and transitions before it.
    pub recent: Vec<String>,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "seed {} at {:.3} s: {}",
            self.seed,
            self.at.as_secs_f64(),
            self.what
        )?;
        for r in &self.recent {
            writeln!(f, "    {r}")?;
        }
        write!(
            f,
            "replay: IBSM_SEED={} cargo test -p ibsm-testkit fabric_sim",
            self.seed
        )
    }
}

/// An SM slot: its spec, and the live node if it is up.
struct Slot {
    guid: u64,
    priority: u8,
    at: (NodeIdx, u8),
    node: Option<SmNode>,
}

struct Run<'a> {
    cfg: &'a FabricSimConfig,
    seed: u64,
    topo: Topology,
    sim: Sim,
    slots: Vec<Slot>,
    /// Slot of each simulator client, by ClientId.
    client_slot: Vec<Option<usize>>,
    now: Duration,
    same_instant: u32,
    steps: u64,
    /// Cables pulled now: (node, port) of one end, with when they come back.
    down: Vec<((NodeIdx, u8), Duration)>,
    loss_until: Option<Duration>,
    /// Last fault of any kind (MasterSMLID is checked only after sweeps that began later).
    last_fault: Duration,
    /// Last change of what lets SMs talk (loss burst end, cable, latency).
    last_net_change: Duration,
    /// Since when two connected SMs are MASTER with no loss burst on.
    dual_since: Option<Duration>,
    /// Whether two connected SMs were MASTER after the last step.
    dual_raw: bool,
    dual_total: Duration,
    max_dual: Duration,
    /// First LID seen per end port GUID.
    lids: std::collections::BTreeMap<u64, u16>,
    /// End ports (CA ports and switch port 0) as (node, port, guid).
    end_ports: Vec<(NodeIdx, u8, u64)>,
    faults: Vec<String>,
    transitions: Vec<String>,
    master_sm_lid_checks: u32,
    /// The last step that ended with more than one SM in MASTER: a sweep that overlapped
    /// it may have been overwritten by the other master.
    last_multi_master: Option<Duration>,
    /// The last SM seen as sole master, and how often that changed.
    last_master: Option<u64>,
    master_changes: u32,
    faulty: bool,
    quiet_since: Option<Duration>,
    clean_sweep_after_converge: bool,
}

/// Runs one seed.
pub fn run(seed: u64, cfg: &FabricSimConfig) -> Result<FabricSimOutcome, Box<Failure>> {
    let mut r = Run::new(seed, cfg).map_err(|what| {
        Box::new(Failure {
            seed,
            at: Duration::ZERO,
            what,
            recent: Vec::new(),
        })
    })?;
    let res = r.go();
    match res {
        Ok(()) => Ok(r.outcome()),
        Err(what) => {
            let mut recent: Vec<String> = r.faults.iter().rev().take(6).cloned().collect();
            recent.extend(r.transitions.iter().rev().take(10).cloned());
            recent.push(r.describe());
            Err(Box::new(Failure {
                seed,
                at: r.now,
                what,
                recent,
            }))
        }
    }
}

/// Seeds to run: `IBSM_SEED` if set (one seed), else `IBSM_SEEDS` seeds from 0 (more
/// seeds for a soak), else `0..default_count`.
pub fn seeds(default_count: u64) -> Result<Vec<u64>, String> {
    if let Ok(s) = std::env::var("IBSM_SEED") {
        return s
            .trim()
            .parse::<u64>()
            .map(|v| vec![v])
            .map_err(|e| format!("IBSM_SEED={s:?} is not a u64: {e}"));
    }
    if let Ok(s) = std::env::var("IBSM_SEEDS") {
        return s
            .trim()
            .parse::<u64>()
            .map(|n| (0..n).collect())
            .map_err(|e| format!("IBSM_SEEDS={s:?} is not a u64: {e}"));
    }
    Ok((0..default_count).collect())
}

fn rank(priority: u8, guid: u64) -> (u8, std::cmp::Reverse<u64>) {
    (priority, std::cmp::Reverse(guid))
}

/// Steps allowed at one virtual instant before the run is declared a livelock.
const SAME_INSTANT_LIMIT: u32 = 100_000;

impl<'a> Run<'a> {
    fn new(seed: u64, cfg: &'a FabricSimConfig) -> Result<Run<'a>, String> {
        let n = cfg.priorities.len();
        if !(2..=4).contains(&n) {
            return Err(format!("{n} SMs: the harness runs 2 to 4"));
        }
        let topo = gen::fat_tree_2level(cfg.radix).map_err(|e| e.to_string())?;
        let mut sim = Sim::new(
            &topo,
            SimConfig {
                latency: cfg.latency,
                ..SimConfig::default()
            },
        );
        // One HCA under each of the first N leaves.
        let mut leaves_used = BTreeSet::new();
        let mut spots = Vec::new();
        for (idx, node) in topo.iter() {
            if node.is_switch() {
                continue;
            }
            let Some((leaf, _)) = node.port(1).and_then(|p| p.remote) else {
                continue;
            };
            if leaves_used.insert(leaf) {
                spots.push((idx, 1u8, node.port(1).map_or(0, |p| p.port_guid)));
            }
        }
        if spots.len() < n {
            return Err(format!(
                "fat tree radix {} has {} leaves, fewer than {n} SMs",
                cfg.radix,
                spots.len()
            ));
        }
        let mut end_ports = Vec::new();
        for (idx, node) in topo.iter() {
            if node.is_switch() {
                if let Some(p) = node.port(0) {
                    end_ports.push((idx, 0, p.port_guid));
                }
            } else {
                for (num, p) in node.physical_ports() {
                    end_ports.push((idx, num, p.port_guid));
                }
            }
        }
        let slots: Vec<Slot> = cfg
            .priorities
            .iter()
            .zip(&spots)
            .map(|(&priority, &(node, port, guid))| Slot {
                guid,
                priority,
                at: (node, port),
                node: None,
            })
            .collect();
        let mut run = Run {
            cfg,
            seed,
            topo,
            sim: {
                sim.set_latency(cfg.latency);
                sim
            },
            slots,
            client_slot: Vec::new(),
            now: Duration::ZERO,
            same_instant: 0,
            steps: 0,
            down: Vec::new(),
            loss_until: None,
            last_fault: Duration::ZERO,
            last_net_change: Duration::ZERO,
            dual_since: None,
            dual_raw: false,
            dual_total: Duration::ZERO,
            max_dual: Duration::ZERO,
            lids: std::collections::BTreeMap::new(),
            end_ports,
            faults: Vec::new(),
            transitions: Vec::new(),
            master_sm_lid_checks: 0,
            last_multi_master: None,
            last_master: None,
            master_changes: 0,
            faulty: false,
            quiet_since: None,
            clean_sweep_after_converge: false,
        };
        for i in 0..run.slots.len() {
            run.start_sm(i)?;
        }
        Ok(run)
    }

    fn outcome(&self) -> FabricSimOutcome {
        FabricSimOutcome {
            steps: self.steps,
            faults: self.faults.clone(),
            transitions: self.transitions.clone(),
            max_dual_master: self.max_dual,
            dual_master_total: self.dual_total,
            master_sm_lid_checks: self.master_sm_lid_checks,
            master: self.masters().first().map_or(0, |&i| self.slot_guid(i)),
            master_changes: self.master_changes,
            delivered: self.sim.stats().delivered,
            end: self.now,
        }
    }

    fn slot_guid(&self, i: usize) -> u64 {
        self.slots.get(i).map_or(0, |s| s.guid)
    }

    fn describe(&self) -> String {
        let parts: Vec<String> = self
            .slots
            .iter()
            .map(|s| match &s.node {
                Some(n) => format!(
                    "{:#x}(p{}, lid {}) {}",
                    s.guid,
                    s.priority,
                    n.lid,
                    n.state()
                ),
                None => format!("{:#x}(p{}) crashed", s.guid, s.priority),
            })
            .collect();
        format!(
            "SMs: {}; cables down: {}",
            parts.join(", "),
            self.down.len()
        )
    }

    // ---- SM lifecycle ----------------------------------------------------------------

    fn start_sm(&mut self, i: usize) -> Result<(), String> {
        let Some(slot) = self.slots.get(i) else {
            return Ok(());
        };
        let (node, port) = slot.at;
        let client = self
            .sim
            .attach(node, port)
            .map_err(|e| format!("attach SM {i}: {e}"))?;
        self.sim
            .set_is_sm(client, true)
            .map_err(|e| format!("IsSM of SM {i}: {e}"))?;
        // The daemon's bootstrap reads its LID with a 0-hop SubnGet(PortInfo).
        let lid = self.sim.port_lid(node, port).unwrap_or(0);
        let ecfg = ElectionConfig {
            priority: slot.priority,
            ..self.cfg.election.clone()
        };
        let sm = SmNode::start(
            self.now,
            slot.guid,
            lid,
            (node, port),
            client,
            ecfg,
            self.cfg.subnet.clone(),
            self.cfg.timers.clone(),
            &mut self.sim,
        )?;
        let c = client.0 as usize;
        if self.client_slot.len() <= c {
            self.client_slot.resize(c + 1, None);
        }
        if let Some(x) = self.client_slot.get_mut(c) {
            *x = Some(i);
        }
        if let Some(s) = self.slots.get_mut(i) {
            s.node = Some(sm);
        }
        Ok(())
    }

    fn crash_sm(&mut self, i: usize) -> Result<(), String> {
        let Some(sm) = self.slots.get_mut(i).and_then(|s| s.node.take()) else {
            return Ok(());
        };
        self.sim
            .detach(sm.client)
            .map_err(|e| format!("detach SM {i}: {e}"))
    }

    // ---- the loop --------------------------------------------------------------------

    fn go(&mut self) -> Result<(), String> {
        // Warm-up.
        let limit = self.cfg.warmup_limit;
        let mut up = false;
        while self.now < limit {
            self.step(limit)?;
            if self.subnet_is_up() {
                up = true;
                break;
            }
        }
        if !up {
            return Err(format!(
                "warm-up: no master brought the subnet up within {:?}",
                limit
            ));
        }
        // Faulty phase.
        self.faulty = true;
        let start = self.now;
        let end = start + self.cfg.faulty_for;
        let mut rng = Rng::new(self.seed);
        let mut next_fault = start + self.gap(&mut rng);
        while self.now < end {
            let until = next_fault.min(end).min(self.next_scheduled());
            self.run_until(until)?;
            self.end_scheduled()?;
            if self.now >= next_fault && self.now < end {
                self.inject(&mut rng)?;
                next_fault = self.now + self.gap(&mut rng);
            }
        }
        // Quiet phase.
        self.faulty = false;
        self.quiet(&mut rng)?;
        let q = self.now;
        self.quiet_since = Some(q);
        self.run_until(q + self.cfg.quiet_for)?;
        if !self.clean_sweep_after_converge {
            return Err(format!(
                "the master completed no clean heavy sweep in the {:?} after convergence, so MasterSMLID was never verified",
                self.cfg.quiet_for.saturating_sub(self.cfg.converge_within)
            ));
        }
        self.check_master_sm_lid("end of run")?;
        Ok(())
    }

    fn gap(&self, rng: &mut Rng) -> Duration {
        let g = self.cfg.fault_every.as_micros() as u64;
        Duration::from_micros(1 + rng.below(2 * g + 1))
    }

    fn next_scheduled(&self) -> Duration {
        let mut t = Duration::MAX;
        for (_, at) in &self.down {
            t = t.min(*at);
        }
        if let Some(l) = self.loss_until {
            t = t.min(l);
        }
        t
    }

    /// Ends the loss burst and plugs back the cables whose time has come.
    fn end_scheduled(&mut self) -> Result<(), String> {
        if self.loss_until.is_some_and(|t| t <= self.now) {
            self.loss_until = None;
            self.sim
                .set_loss(0.0, 0)
                .map_err(|e| format!("set_loss: {e}"))?;
            self.fault("loss burst ends".into());
            self.last_net_change = self.now;
        }
        let now = self.now;
        let (due, keep): (Vec<_>, Vec<_>) = self.down.drain(..).partition(|(_, at)| *at <= now);
        self.down = keep;
        for ((node, port), _) in due {
            self.sim
                .link_up(node, port)
                .map_err(|e| format!("link_up: {e}"))?;
            self.fault(format!("cable {}/{} plugged back", node.0, port));
            self.last_net_change = self.now;
        }
        Ok(())
    }

    fn fault(&mut self, text: String) {
        self.last_fault = self.now;
        tracing::debug!(at = ?self.now, "{text}");
        self.faults
            .push(format!("{:>9.3} s  {text}", self.now.as_secs_f64()));
    }

    fn inject(&mut self, rng: &mut Rng) -> Result<(), String> {
        match rng.below(5) {
            0 | 1 => {
                let i = rng.below(self.slots.len() as u64) as usize;
                let live = self.slots.iter().filter(|s| s.node.is_some()).count();
                let is_live = self.slots.get(i).is_some_and(|s| s.node.is_some());
                if is_live && live > 1 {
                    self.crash_sm(i)?;
                    self.fault(format!("SM {:#x} crashes", self.slot_guid(i)));
                } else if !is_live {
                    self.start_sm(i)?;
                    self.fault(format!("SM {:#x} restarts", self.slot_guid(i)));
                }
            }
            2 => {
                if self.loss_until.is_none() {
                    let (lo, hi) = self.cfg.loss;
                    let rate = lo + (hi - lo) * (rng.below(1001) as f64 / 1000.0);
                    let dur = Duration::from_millis(100 + rng.below(1500));
                    self.sim
                        .set_loss(rate, rng.next_u64())
                        .map_err(|e| format!("set_loss: {e}"))?;
                    self.loss_until = Some(self.now + dur);
                    self.fault(format!(
                        "loss burst {:.0}% for {} ms",
                        rate * 100.0,
                        dur.as_millis()
                    ));
                }
            }
            3 => {
                let max = self.cfg.max_latency.as_micros() as u64;
                let l = Duration::from_micros(1 + rng.below(max));
                self.sim.set_latency(l);
                self.fault(format!("latency {} us", l.as_micros()));
                self.last_net_change = self.now;
            }
            _ => {
                let cables = self.cables();
                let pick = rng.below(cables.len() as u64) as usize;
                if let Some(&(node, port)) = cables.get(pick) {
                    if !self.is_down(node, port) {
                        let dur = Duration::from_millis(200 + rng.below(3000));
                        self.sim
                            .link_down(node, port)
                            .map_err(|e| format!("link_down: {e}"))?;
                        self.down.push(((node, port), self.now + dur));
                        self.fault(format!(
                            "cable {}/{} pulled for {} ms",
                            node.0,
                            port,
                            dur.as_millis()
                        ));
                        self.last_net_change = self.now;
                    }
                }
            }
        }
        Ok(())
    }

    /// The quiet phase begins: every cable back, no loss, base latency; crashed SMs
    /// come back or not (seeded).
    fn quiet(&mut self, rng: &mut Rng) -> Result<(), String> {
        let down: Vec<_> = self.down.drain(..).collect();
        for ((node, port), _) in down {
            self.sim
                .link_up(node, port)
                .map_err(|e| format!("link_up: {e}"))?;
        }
        self.loss_until = None;
        self.sim
            .set_loss(0.0, 0)
            .map_err(|e| format!("set_loss: {e}"))?;
        self.sim.set_latency(self.cfg.latency);
        for i in 0..self.slots.len() {
            if self.slots.get(i).is_some_and(|s| s.node.is_none()) && rng.below(2) == 0 {
                self.start_sm(i)?;
                self.fault(format!("SM {:#x} restarts", self.slot_guid(i)));
            }
        }
        self.fault("quiet phase: all cables up, no loss, base latency".into());
        self.last_net_change = self.now;
        Ok(())
    }

    /// Every cable once, as (node, port) of its lower end.
    fn cables(&self) -> Vec<(NodeIdx, u8)> {
        let mut out = Vec::new();
        for (idx, node) in self.topo.iter() {
            for (num, p) in node.physical_ports() {
                if let Some((rn, rp)) = p.remote {
                    if (idx, num) < (rn, rp) {
                        out.push((idx, num));
                    }
                }
            }
        }
        out
    }

    fn is_down(&self, node: NodeIdx, port: u8) -> bool {
        let other = self
            .topo
            .node(node)
            .and_then(|n| n.port(port))
            .and_then(|p| p.remote);
        self.down
            .iter()
            .any(|((n, p), _)| (*n, *p) == (node, port) || Some((*n, *p)) == other)
    }

    /// Connected component id of every node over the cables that are up.
    fn components(&self) -> Vec<usize> {
        let n = self.topo.len();
        let mut comp = vec![usize::MAX; n];
        let mut next = 0;
        for start in 0..n {
            if comp.get(start).is_some_and(|c| *c != usize::MAX) {
                continue;
            }
            let mut stack = vec![start];
            if let Some(c) = comp.get_mut(start) {
                *c = next;
            }
            while let Some(x) = stack.pop() {
                let Some(node) = self.topo.node(NodeIdx(x as u32)) else {
                    continue;
                };
                for (num, p) in node.physical_ports() {
                    let Some((rn, _)) = p.remote else { continue };
                    if self.is_down(NodeIdx(x as u32), num) {
                        continue;
                    }
                    if let Some(c) = comp.get_mut(rn.as_usize()) {
                        if *c == usize::MAX {
                            *c = next;
                            stack.push(rn.as_usize());
                        }
                    }
                }
            }
            next += 1;
        }
        comp
    }

    fn run_until(&mut self, until: Duration) -> Result<(), String> {
        while self.now < until {
            self.step(until)?;
        }
        Ok(())
    }

    /// Advances to the next thing due (at most `until`) and handles everything due then.
    fn step(&mut self, until: Duration) -> Result<(), String> {
        let mut next = until;
        if let Some(t) = self.sim.poll_timeout() {
            next = next.min(t);
        }
        for s in &self.slots {
            if let Some(t) = s.node.as_ref().and_then(|n| n.next_wake(self.now)) {
                next = next.min(t);
            }
        }
        let next = next.max(self.now);
        if next == self.now {
            self.same_instant += 1;
            if self.same_instant > SAME_INSTANT_LIMIT {
                return Err(format!(
                    "livelock: {SAME_INSTANT_LIMIT} steps without virtual time advancing"
                ));
            }
        } else {
            self.same_instant = 0;
        }
        self.advance_dual(next);
        self.now = next;
        let now = self.now;
        while let Some(d) = self.sim.poll_delivery_from(now) {
            let slot = self.client_slot.get(d.client.0 as usize).copied().flatten();
            if let Some(sm) = slot
                .and_then(|i| self.slots.get_mut(i))
                .and_then(|s| s.node.as_mut())
                .filter(|n| n.client == d.client)
            {
                sm.incoming(now, &mut self.sim, d.slid, &d.mad);
            }
        }
        for s in &mut self.slots {
            if let Some(n) = s.node.as_mut() {
                if n.next_wake(now).is_some_and(|t| t <= now) {
                    n.on_timers(now, &mut self.sim);
                }
            }
        }
        self.steps += 1;
        self.collect_notes()?;
        self.check()
    }

    // ---- invariants ------------------------------------------------------------------

    /// Live SMs in MASTER, by slot.
    fn masters(&self) -> Vec<usize> {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, s)| {
                s.node
                    .as_ref()
                    .is_some_and(|n| n.state() == SmState::Master)
            })
            .map(|(i, _)| i)
            .collect()
    }

    /// The highest-ranked live SM.
    fn best_live(&self) -> Option<usize> {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.node.is_some())
            .max_by_key(|(_, s)| rank(s.priority, s.guid))
            .map(|(i, _)| i)
    }

    fn component_of(&self, comps: &[usize], i: usize) -> Option<usize> {
        let (node, _) = self.slots.get(i)?.at;
        comps.get(node.as_usize()).copied()
    }

    /// Two masters that can reach each other.
    fn connected_dual(&self, comps: &[usize]) -> Option<(usize, usize)> {
        let m = self.masters();
        for (k, &a) in m.iter().enumerate() {
            for &b in m.iter().skip(k + 1) {
                if self.component_of(comps, a) == self.component_of(comps, b) {
                    return Some((a, b));
                }
            }
        }
        None
    }

    /// Accounts the time from `self.now` to `next` (the state is constant in between).
    fn advance_dual(&mut self, next: Duration) {
        if self.dual_raw {
            self.dual_total += next.saturating_sub(self.now);
        }
    }

    /// A master's heavy sweep completed: the subnet is up when it was clean and every
    /// end port has a LID.
    fn subnet_is_up(&self) -> bool {
        let m = self.masters();
        m.len() == 1
            && self.master_sm_lid_checks > 0
            && self
                .end_ports
                .iter()
                .all(|&(n, p, _)| self.sim.port_lid(n, p).is_ok_and(|l| l != 0))
    }

    fn collect_notes(&mut self) -> Result<(), String> {
        for i in 0..self.slots.len() {
            let Some(sm) = self.slots.get_mut(i).and_then(|s| s.node.as_mut()) else {
                continue;
            };
            let guid = sm.guid;
            let notes = sm.take_notes();
            for note in notes {
                match note {
                    NodeNote::Bug(b) => return Err(b),
                    NodeNote::State { from, to, reason } => self.transitions.push(format!(
                        "{:>9.3} s  SM {guid:#x}: {from} -> {to} ({reason})",
                        self.now.as_secs_f64()
                    )),
                    NodeNote::MasterSweepDone { started, report } => {
                        let comps = self.components();
                        let mine = self.component_of(&comps, i);
                        let others = self
                            .masters()
                            .into_iter()
                            .filter(|&j| j != i && self.component_of(&comps, j) == mine)
                            .count();
                        let clean = report.failures == 0
                            && started >= self.last_fault
                            && match self.last_multi_master {
                                Some(t) => started > t,
                                None => true,
                            }
                            && (self.now > self.last_fault || !self.faulty)
                            && others == 0
                            && self.masters().contains(&i);
                        if clean {
                            self.check_master_sm_lid_of(i, &comps, "after a clean heavy sweep")?;
                            self.master_sm_lid_checks += 1;
                            if self
                                .quiet_since
                                .is_some_and(|q| started >= q + self.cfg.converge_within)
                            {
                                self.clean_sweep_after_converge = true;
                            }
                        }
                    }
                }
            }
        }
        Ok(())
    }

    fn check_master_sm_lid(&self, when: &str) -> Result<(), String> {
        let m = self.masters();
        let [i] = m.as_slice() else {
            return Err(format!("{when}: {} masters, expected one", m.len()));
        };
        self.check_master_sm_lid_of(*i, &self.components(), when)
    }

    /// Every Active end port in the master's component points at the master's LID.
    fn check_master_sm_lid_of(&self, i: usize, comps: &[usize], when: &str) -> Result<(), String> {
        let Some(slot) = self.slots.get(i) else {
            return Ok(());
        };
        let (mn, mp) = slot.at;
        let master_lid = self
            .sim
            .port_lid(mn, mp)
            .map_err(|e| format!("master's port: {e}"))?;
        if master_lid == 0 {
            return Err(format!("{when}: master {:#x} has no LID", slot.guid));
        }
        let mine = comps.get(mn.as_usize());
        for &(n, p, guid) in &self.end_ports {
            if comps.get(n.as_usize()) != mine {
                continue;
            }
            let pi = self
                .sim
                .port_info(n, p)
                .map_err(|e| format!("PortInfo of {}/{p}: {e}", n.0))?;
            if pi.port_state != PortState::Active {
                continue;
            }
            if pi.master_sm_lid != master_lid {
                return Err(format!(
                    "{when}: port {guid:#x} (node {} port {p}) is Active with MasterSMLID {} but master {:#x} has LID {master_lid}",
                    n.0, pi.master_sm_lid, slot.guid
                ));
            }
        }
        Ok(())
    }

    fn check(&mut self) -> Result<(), String> {
        // LIDs are kept.
        for &(n, p, guid) in &self.end_ports {
            let lid = self.sim.port_lid(n, p).unwrap_or(0);
            if lid == 0 {
                continue;
            }
            match self.lids.entry(guid) {
                std::collections::btree_map::Entry::Vacant(v) => {
                    v.insert(lid);
                }
                std::collections::btree_map::Entry::Occupied(o) => {
                    if *o.get() != lid {
                        return Err(format!(
                            "port {guid:#x} (node {} port {p}) changed LID {} -> {lid}",
                            n.0,
                            o.get()
                        ));
                    }
                }
            }
        }
        if self.masters().len() > 1 {
            self.last_multi_master = Some(self.now);
        }
        if let [m] = self.masters().as_slice() {
            let g = self.slot_guid(*m);
            if self.last_master.is_some_and(|l| l != g) {
                self.master_changes += 1;
            }
            self.last_master = Some(g);
        }
        // Bounded dual mastership.
        let comps = self.components();
        let dual = self.connected_dual(&comps);
        self.dual_raw = dual.is_some();
        match dual {
            Some((a, b)) if self.loss_until.is_none() => {
                let since = *self.dual_since.get_or_insert(self.now);
                let from = since.max(self.last_net_change);
                let d = self.now.saturating_sub(from);
                self.max_dual = self.max_dual.max(d);
                if d > self.cfg.handover_window {
                    return Err(format!(
                        "SMs {:#x} and {:#x} both MASTER and connected for {} ms (> handover window {} ms)",
                        self.slot_guid(a),
                        self.slot_guid(b),
                        d.as_millis(),
                        self.cfg.handover_window.as_millis()
                    ));
                }
            }
            _ => self.dual_since = None,
        }
        // Convergence.
        if let Some(q) = self.quiet_since {
            if self.now >= q + self.cfg.converge_within {
                let m = self.masters();
                let best = self.best_live();
                if m.len() != 1 || m.first().copied() != best {
                    let names: Vec<String> = m
                        .iter()
                        .map(|&i| format!("{:#x}", self.slot_guid(i)))
                        .collect();
                    return Err(format!(
                        "{} ms after faults stopped: masters [{}], expected exactly the best live SM {:#x}",
                        self.now.saturating_sub(q).as_millis(),
                        names.join(", "),
                        best.map_or(0, |i| self.slot_guid(i))
                    ));
                }
            }
        }
        Ok(())
    }
}
