//! [`Sim`], the embedded fabric: what it holds (the fabric state, clients, the
//! delivery queue and its slots, the loss PRNG, the requests handed to clients, the
//! counters), building it, reading its state (tests and harnesses), and the lookups
//! of nodes, ports and clients every other file of the simulator uses. The fields
//! and records are `pub(super)` for those files' `impl Sim` blocks.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::fmt;
use std::time::Duration;

use ibsm_fabric::{NodeIdx, Topology};
use ibsm_mad::{MadAddress, PhysPortState, PortState};

use crate::error::SimError;
use crate::rng::SplitMix64;
use crate::state::Fabric;
use crate::wire::Mad;

use super::types::{ClientId, SimConfig, SimStats};

/// The permissive LID (IBA 4.1.2).
pub(super) const PERMISSIVE: u16 = 0xFFFF;
/// How many requests handed to clients are remembered so that their answers reach
/// the right requester (several clients may share a port).
pub(super) const FORWARD_MEMORY: usize = 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Drop {
    Link,
    Unrouted,
    BadPath,
}

#[derive(Debug, Clone)]
pub(super) struct ClientRec {
    pub(super) port: u32,
    pub(super) attached: bool,
    pub(super) is_sm: bool,
    /// GMP classes this client takes requests of (bit `class` of the 256), like the
    /// classes a process registered umad agents for on QP1.
    pub(super) gsi_classes: [u64; 4],
}

impl ClientRec {
    pub(super) fn takes_class(&self, class: u8) -> bool {
        self.gsi_classes
            .get(usize::from(class / 64))
            .is_some_and(|w| w & (1 << (class % 64)) != 0)
    }
}

/// A request handed to a client: who asked, so that the answer finds its requester.
#[derive(Debug, Clone, Copy)]
pub(super) struct Forwarded {
    pub(super) tid: u64,
    pub(super) responder: ClientId,
    pub(super) requester: ClientId,
    pub(super) requester_port: u32,
    pub(super) requester_lid: u16,
    /// A GMP request (its answers, RMPP segments and all, keep the record) rather than
    /// an SMP (its one answer consumes it); the two never match each other's answers.
    pub(super) gmp: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct QKey {
    pub(super) due: Duration,
    pub(super) seq: u64,
    pub(super) slot: u32,
}

#[derive(Clone)]
pub(super) struct Slot {
    pub(super) client: ClientId,
    pub(super) from: MadAddress,
    pub(super) mad: Mad,
}

/// The embedded fabric. See the crate documentation. `Clone` gives an independent
/// copy (fabric, queue, PRNG state), handy for snapshotting a scenario.
#[derive(Clone)]
pub struct Sim {
    pub(super) fabric: Fabric,
    pub(super) cfg: SimConfig,
    pub(super) clients: Vec<ClientRec>,
    pub(super) queue: BinaryHeap<Reverse<QKey>>,
    pub(super) slots: Vec<Slot>,
    pub(super) free_slots: Vec<u32>,
    pub(super) seq: u64,
    pub(super) latency: Duration,
    pub(super) loss_rate: f64,
    pub(super) rng: SplitMix64,
    pub(super) forwarded: VecDeque<Forwarded>,
    pub(super) stats: SimStats,
}

impl fmt::Debug for Sim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sim")
            .field("nodes", &self.fabric.nodes.len())
            .field("ports", &self.fabric.ports.len())
            .field("clients", &self.clients.len())
            .field("queued", &self.queue.len())
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl Sim {
    /// Builds the fabric: every cabled port trained to Init/LinkUp, LIDs as the topology
    /// carries them (usually 0), no forwarding tables, no clients.
    pub fn new(topology: &Topology, config: SimConfig) -> Sim {
        let fabric = Fabric::build(topology, &config);
        tracing::debug!(
            nodes = fabric.nodes.len(),
            ports = fabric.ports.len(),
            switches = fabric.switches.len(),
            "simulated fabric built"
        );
        Sim {
            fabric,
            latency: config.latency,
            cfg: config,
            clients: Vec::new(),
            queue: BinaryHeap::new(),
            slots: Vec::new(),
            free_slots: Vec::new(),
            seq: 0,
            loss_rate: 0.0,
            rng: SplitMix64::new(0),
            forwarded: VecDeque::with_capacity(FORWARD_MEMORY),
            stats: SimStats::default(),
        }
    }
    /// Counters of what happened to MADs so far.
    pub fn stats(&self) -> SimStats {
        self.stats
    }

    /// Number of nodes.
    pub fn num_nodes(&self) -> usize {
        self.fabric.nodes.len()
    }

    /// PortInfo.PortState of a port.
    pub fn port_state(&self, node: NodeIdx, port: u8) -> Result<PortState, SimError> {
        let idx = self.user_port(node, port)?;
        Ok(PortState::from(
            self.fabric.port(idx).map_or(0, |p| p.state),
        ))
    }

    /// PortInfo.PortPhysicalState of a port.
    pub fn phys_state(&self, node: NodeIdx, port: u8) -> Result<PhysPortState, SimError> {
        let idx = self.user_port(node, port)?;
        Ok(PhysPortState::from(
            self.fabric.port(idx).map_or(0, |p| p.phys),
        ))
    }

    /// PortInfo.LID of a port (switches: port 0 holds the switch LID).
    pub fn port_lid(&self, node: NodeIdx, port: u8) -> Result<u16, SimError> {
        let idx = self.user_port(node, port)?;
        Ok(self.fabric.port(idx).map_or(0, |p| p.lid))
    }

    /// The PortInfo a SubnGet would return for this port (LocalPortNum = `port`).
    pub fn port_info(&self, node: NodeIdx, port: u8) -> Result<ibsm_mad::PortInfo, SimError> {
        let idx = self.user_port(node, port)?;
        self.fabric
            .port_info_view(idx, idx)
            .ok_or(SimError::NoSuchPort {
                node,
                port,
                num_ports: 0,
            })
    }

    /// LinearForwardingTable entry of a switch for `lid` (None: not a switch, or unprogrammed).
    pub fn lft_entry(&self, node: NodeIdx, lid: u16) -> Option<u8> {
        let n = self.fabric.nodes.get(node.as_usize())?;
        let sw = self.fabric.switches.get(n.switch as usize)?;
        sw.lft.get(usize::from(lid)).copied().filter(|&p| p != 0xFF)
    }

    /// Test support: set a switch's LinearForwardingTable entry for `lid` to `port`
    /// as a SubnSet would (e.g. LID 0's entry, where ibsm keeps its LFT stamp).
    /// False when `node` is not a switch or `lid` is beyond its table.
    pub fn set_lft_entry(&mut self, node: NodeIdx, lid: u16, port: u8) -> bool {
        let Some(n) = self.fabric.nodes.get(node.as_usize()) else {
            return false;
        };
        let si = n.switch as usize;
        match self
            .fabric
            .switches
            .get_mut(si)
            .and_then(|sw| sw.lft.get_mut(usize::from(lid)))
        {
            Some(slot) => {
                *slot = port;
                true
            }
            None => false,
        }
    }

    /// One MulticastForwardingTable block of a switch as the SM wrote it: the 32 port
    /// masks (bit `p` = port `16 * position + p`) of MLIDs `0xC000 + 32 * block` onwards.
    /// None for a non-switch or a block/position outside the table; never written is all
    /// zeros.
    pub fn mft_block(&self, node: NodeIdx, block: u16, position: u8) -> Option<[u16; 32]> {
        let n = self.fabric.nodes.get(node.as_usize())?;
        if n.switch == crate::state::NONE
            || u32::from(block) >= u32::from(self.cfg.multicast_fdb_cap).div_ceil(32)
            || position > n.num_ports / 16
        {
            return None;
        }
        let raw = self
            .fabric
            .tables
            .mft
            .get(&(n.switch, block, position))
            .copied()
            .unwrap_or([0u8; 64]);
        let mut out = [0u16; 32];
        for (o, c) in out.iter_mut().zip(raw.chunks_exact(2)) {
            *o = u16::from_be_bytes([c[0], c[1]]);
        }
        Some(out)
    }

    /// The ports (0..=NumPorts) a switch's MulticastForwardingTable forwards `mlid` to,
    /// ascending. None for a non-switch or an MLID outside 0xC000..0xC000+MulticastFDBCap.
    pub fn mft_ports(&self, node: NodeIdx, mlid: u16) -> Option<Vec<u8>> {
        let index = mlid.checked_sub(0xC000)?;
        let n = self.fabric.nodes.get(node.as_usize())?;
        let mut ports = Vec::new();
        for position in 0..=n.num_ports / 16 {
            let masks = self.mft_block(node, index / 32, position)?;
            let mask = masks.get(usize::from(index % 32)).copied().unwrap_or(0);
            for bit in 0..16u8 {
                let port = u16::from(position) * 16 + u16::from(bit);
                if mask & (1 << bit) != 0 && port <= u16::from(n.num_ports) {
                    ports.push(u8::try_from(port).unwrap_or(u8::MAX));
                }
            }
        }
        Some(ports)
    }

    /// SwitchInfo.PortStateChange of a switch (None for non-switches).
    pub fn port_state_change(&self, node: NodeIdx) -> Option<bool> {
        let n = self.fabric.nodes.get(node.as_usize())?;
        self.fabric
            .switches
            .get(n.switch as usize)
            .map(|s| s.port_state_change)
    }

    /// Approximate heap bytes of the fabric state (nodes, ports, LFTs).
    pub fn heap_bytes(&self) -> usize {
        self.fabric.heap_bytes()
    }

    pub(super) fn node_rec(&self, node: NodeIdx) -> Result<&crate::state::NodeRec, SimError> {
        self.fabric
            .nodes
            .get(node.as_usize())
            .ok_or(SimError::UnknownNode(node))
    }

    /// Global index of (node, port), port 0..=NumPorts.
    pub(super) fn user_port(&self, node: NodeIdx, port: u8) -> Result<u32, SimError> {
        let rec = self.node_rec(node)?;
        if port > rec.num_ports {
            return Err(SimError::NoSuchPort {
                node,
                port,
                num_ports: rec.num_ports,
            });
        }
        Ok(rec.first_port + u32::from(port))
    }

    /// Global index of a physical port (1..=NumPorts).
    pub(super) fn link_port(&self, node: NodeIdx, port: u8) -> Result<u32, SimError> {
        let rec = self.node_rec(node)?;
        if port == 0 || port > rec.num_ports {
            return Err(SimError::NoSuchPort {
                node,
                port,
                num_ports: rec.num_ports,
            });
        }
        Ok(rec.first_port + u32::from(port))
    }

    pub(super) fn client_rec(&self, client: ClientId) -> Result<&ClientRec, SimError> {
        self.clients
            .get(client.0 as usize)
            .filter(|c| c.attached)
            .ok_or(SimError::UnknownClient(client))
    }
}

pub(super) fn wire_tid(m: &Mad) -> u64 {
    ibsm_mad::peek_tid(m).unwrap_or(0)
}
