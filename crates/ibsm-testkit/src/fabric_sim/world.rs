//! The simulated world of one run: the [`Run`] state (the embedded fat tree, the SM
//! slots with their live nodes, the cables pulled, the counters the invariants keep),
//! its construction from a seed and a config, starting and crashing an SM, and the
//! topology questions (which cables exist, which are down, which nodes still reach each
//! other). The event loop, the faults and the checks are `impl Run` blocks in their
//! own files; they all build on this one.

use std::collections::BTreeSet;
use std::time::Duration;

use ibsm_core::election::ElectionConfig;
use ibsm_fabric::{gen, NodeIdx, Topology};
use ibsm_sim::{Sim, SimConfig};

use super::config::FabricSimConfig;
use crate::sim_driver::SmNode;
/// An SM slot: its spec, and the live node if it is up.
pub(super) struct Slot {
    pub(super) guid: u64,
    pub(super) priority: u8,
    pub(super) at: (NodeIdx, u8),
    pub(super) node: Option<SmNode>,
}

/// The state of one run: the fabric, the SMs, the faults in force and what the
/// invariants have seen so far.
pub(super) struct Run<'a> {
    pub(super) cfg: &'a FabricSimConfig,
    pub(super) seed: u64,
    pub(super) topo: Topology,
    pub(super) sim: Sim,
    pub(super) slots: Vec<Slot>,
    /// Slot of each simulator client, by ClientId.
    pub(super) client_slot: Vec<Option<usize>>,
    pub(super) now: Duration,
    pub(super) same_instant: u32,
    pub(super) steps: u64,
    /// Cables pulled now: (node, port) of one end, with when they come back.
    pub(super) down: Vec<((NodeIdx, u8), Duration)>,
    pub(super) loss_until: Option<Duration>,
    /// Last fault of any kind (MasterSMLID is checked only after sweeps that began later).
    pub(super) last_fault: Duration,
    /// Last change of what lets SMs talk (loss burst end, cable, latency).
    pub(super) last_net_change: Duration,
    /// Since when two connected SMs are MASTER with no loss burst on.
    pub(super) dual_since: Option<Duration>,
    /// Whether two connected SMs were MASTER after the last step.
    pub(super) dual_raw: bool,
    pub(super) dual_total: Duration,
    pub(super) max_dual: Duration,
    /// First LID seen per end port GUID.
    pub(super) lids: std::collections::BTreeMap<u64, u16>,
    /// End ports (CA ports and switch port 0) as (node, port, guid).
    pub(super) end_ports: Vec<(NodeIdx, u8, u64)>,
    pub(super) faults: Vec<String>,
    pub(super) transitions: Vec<String>,
    pub(super) master_sm_lid_checks: u32,
    /// The last step that ended with more than one SM in MASTER: a sweep that overlapped
    /// it may have been overwritten by the other master.
    pub(super) last_multi_master: Option<Duration>,
    /// The last SM seen as sole master, and how often that changed.
    pub(super) last_master: Option<u64>,
    pub(super) master_changes: u32,
    pub(super) faulty: bool,
    pub(super) quiet_since: Option<Duration>,
    pub(super) clean_sweep_after_converge: bool,
}

impl<'a> Run<'a> {
    pub(super) fn new(seed: u64, cfg: &'a FabricSimConfig) -> Result<Run<'a>, String> {
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

    pub(super) fn slot_guid(&self, i: usize) -> u64 {
        self.slots.get(i).map_or(0, |s| s.guid)
    }

    pub(super) fn describe(&self) -> String {
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

    pub(super) fn start_sm(&mut self, i: usize) -> Result<(), String> {
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

    pub(super) fn crash_sm(&mut self, i: usize) -> Result<(), String> {
        let Some(sm) = self.slots.get_mut(i).and_then(|s| s.node.take()) else {
            return Ok(());
        };
        self.sim
            .detach(sm.client)
            .map_err(|e| format!("detach SM {i}: {e}"))
    }

    /// Every cable once, as (node, port) of its lower end.
    pub(super) fn cables(&self) -> Vec<(NodeIdx, u8)> {
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

    pub(super) fn is_down(&self, node: NodeIdx, port: u8) -> bool {
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
    pub(super) fn components(&self) -> Vec<usize> {
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
}
