//! [`Topology`]: the node list with its GUID and name indexes, the lookups and walks
//! over it and every change to it, plus [`Counts`]. The changes stay in the file that
//! owns the private fields, so nothing else can touch the indexes and they cannot go
//! stale.

use std::collections::HashMap;

use super::error::TopologyError;
use super::link::{LinkSpeed, LinkWidth};
use super::node::{Node, NodeIdx, NodeType, Port};
use super::rate::mtu_bytes;

/// Sizes of a topology, for tests, logs and benchmarks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counts {
    /// All nodes.
    pub nodes: usize,
    /// Switches.
    pub switches: usize,
    /// Channel adapters (routers are counted in `nodes` only).
    pub hcas: usize,
    /// Physical ports with a cable.
    pub ports: usize,
    /// Cables, each counted once.
    pub links: usize,
}

/// A fabric: nodes addressed by [`NodeIdx`] plus GUID and name indexes.
///
/// The node list is only reachable through methods so that the GUID and name
/// indexes cannot go stale: identity (GUIDs, name) and cabling change only
/// through [`Topology::add_node`], [`Topology::connect`],
/// [`Topology::disconnect`] and [`Topology::set_port_guid`].
#[derive(Debug, Clone, Default)]
pub struct Topology {
    nodes: Vec<Node>,
    by_node_guid: HashMap<u64, NodeIdx>,
    by_port_guid: HashMap<u64, (NodeIdx, u8)>,
    by_name: HashMap<String, NodeIdx>,
}

impl PartialEq for Topology {
    fn eq(&self, other: &Self) -> bool {
        self.nodes == other.nodes
    }
}
impl Eq for Topology {}

impl Topology {
    /// An empty topology.
    pub fn new() -> Topology {
        Topology::default()
    }

    /// An empty topology with room for `nodes` nodes.
    pub fn with_capacity(nodes: usize) -> Topology {
        Topology {
            nodes: Vec::with_capacity(nodes),
            by_node_guid: HashMap::with_capacity(nodes),
            by_port_guid: HashMap::with_capacity(nodes),
            by_name: HashMap::with_capacity(nodes),
        }
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// True when there are no nodes.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The node at `idx`.
    pub fn node(&self, idx: NodeIdx) -> Option<&Node> {
        self.nodes.get(idx.as_usize())
    }

    /// All nodes; `nodes()[i]` has index `NodeIdx(i)`.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// All nodes with their indexes.
    pub fn iter(&self) -> impl Iterator<Item = (NodeIdx, &Node)> + '_ {
        self.nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (NodeIdx(i as u32), n))
    }

    /// The node with this NodeGUID.
    pub fn find_by_guid(&self, node_guid: u64) -> Option<NodeIdx> {
        self.by_node_guid.get(&node_guid).copied()
    }

    /// The node and port number with this PortGUID. For a switch this is
    /// port 0.
    pub fn find_by_port_guid(&self, port_guid: u64) -> Option<(NodeIdx, u8)> {
        self.by_port_guid.get(&port_guid).copied()
    }

    /// The node with this net-file name (see [`Node::name`]).
    pub fn find_by_name(&self, name: &str) -> Option<NodeIdx> {
        self.by_name.get(name).copied()
    }

    /// What is at the other end of `port` of `idx`.
    pub fn neighbor(&self, idx: NodeIdx, port: u8) -> Option<(NodeIdx, u8)> {
        self.node(idx)?.port(port)?.remote
    }

    /// Add a node. Its NodeGUID, non-zero PortGUIDs and non-empty name must be
    /// unused; its ports must not be cabled yet (cable with
    /// [`Topology::connect`]). A switch's ports all share its port-0 GUID.
    pub fn add_node(&mut self, mut node: Node) -> Result<NodeIdx, TopologyError> {
        let idx = NodeIdx(u32::try_from(self.nodes.len()).map_err(|_| TopologyError::Full)?);
        if node.ports.len() < 2 {
            return Err(TopologyError::NoPorts(node.net_name()));
        }
        if let Some(&existing) = self.by_node_guid.get(&node.node_guid) {
            return Err(TopologyError::DuplicateNodeGuid {
                guid: node.node_guid,
                existing,
            });
        }
        if !node.name.is_empty() {
            if let Some(&existing) = self.by_name.get(&node.name) {
                return Err(TopologyError::DuplicateName {
                    name: node.name.clone(),
                    existing,
                });
            }
        }
        let port_guids = self.node_port_guids(&node);
        for &(guid, _) in &port_guids {
            if let Some(&(existing, _)) = self.by_port_guid.get(&guid) {
                return Err(TopologyError::DuplicatePortGuid { guid, existing });
            }
        }
        // A CA port GUID repeated inside the node itself.
        for (i, &(g, _)) in port_guids.iter().enumerate() {
            if port_guids.iter().skip(i + 1).any(|&(h, _)| h == g) {
                return Err(TopologyError::DuplicatePortGuid {
                    guid: g,
                    existing: idx,
                });
            }
        }
        for p in &mut node.ports {
            p.remote = None;
        }
        self.by_node_guid.insert(node.node_guid, idx);
        for (guid, port) in port_guids {
            self.by_port_guid.insert(guid, (idx, port));
        }
        if !node.name.is_empty() {
            self.by_name.insert(node.name.clone(), idx);
        }
        self.nodes.push(node);
        Ok(idx)
    }

    /// Add a node whose NodeGUID or PortGUIDs may already be used by another
    /// node: a second device answering with the same GUID, which discovery
    /// must still place in the graph so that routing and the LID manager see
    /// both ends (see `ibsm_core::discovery`). GUIDs already taken stay
    /// indexed to the node that holds them ([`Topology::find_by_guid`] keeps
    /// naming the first); free ones are indexed to this node. Names must still
    /// be unique; its ports must not be cabled yet.
    pub fn add_duplicate_node(&mut self, mut node: Node) -> Result<NodeIdx, TopologyError> {
        let idx = NodeIdx(u32::try_from(self.nodes.len()).map_err(|_| TopologyError::Full)?);
        if node.ports.len() < 2 {
            return Err(TopologyError::NoPorts(node.net_name()));
        }
        if !node.name.is_empty() {
            if let Some(&existing) = self.by_name.get(&node.name) {
                return Err(TopologyError::DuplicateName {
                    name: node.name.clone(),
                    existing,
                });
            }
            self.by_name.insert(node.name.clone(), idx);
        }
        for p in &mut node.ports {
            p.remote = None;
        }
        self.by_node_guid.entry(node.node_guid).or_insert(idx);
        for (guid, port) in self.node_port_guids(&node) {
            self.by_port_guid.entry(guid).or_insert((idx, port));
        }
        self.nodes.push(node);
        Ok(idx)
    }

    /// The (guid, port) pairs a node contributes to the port-GUID index.
    fn node_port_guids(&self, node: &Node) -> Vec<(u64, u8)> {
        if node.is_switch() {
            match node.ports.first() {
                Some(p0) if p0.port_guid != 0 => vec![(p0.port_guid, 0)],
                _ => Vec::new(),
            }
        } else {
            node.physical_ports()
                .filter(|(_, p)| p.port_guid != 0)
                .map(|(n, p)| (p.port_guid, n))
                .collect()
        }
    }

    fn check_port(&self, idx: NodeIdx, port: u8) -> Result<&Port, TopologyError> {
        let node = self.node(idx).ok_or(TopologyError::NoSuchNode(idx))?;
        if port == 0 {
            return Err(TopologyError::PortZero(idx));
        }
        node.port(port).ok_or(TopologyError::NoSuchPort {
            node: idx,
            port,
            num_ports: node.num_ports(),
        })
    }

    fn port_mut(&mut self, idx: NodeIdx, port: u8) -> Option<&mut Port> {
        self.nodes
            .get_mut(idx.as_usize())?
            .ports
            .get_mut(usize::from(port))
    }

    /// Cable port `pa` of `a` to port `pb` of `b`. Both ports must exist, be
    /// physical (not 0), be free, and be different ports.
    pub fn connect(&mut self, a: NodeIdx, pa: u8, b: NodeIdx, pb: u8) -> Result<(), TopologyError> {
        let port_a = self.check_port(a, pa)?;
        if let Some(remote) = port_a.remote {
            return Err(TopologyError::AlreadyConnected {
                node: a,
                port: pa,
                remote,
            });
        }
        let port_b = self.check_port(b, pb)?;
        if let Some(remote) = port_b.remote {
            return Err(TopologyError::AlreadyConnected {
                node: b,
                port: pb,
                remote,
            });
        }
        if a == b && pa == pb {
            return Err(TopologyError::SelfLink { node: a, port: pa });
        }
        if let Some(p) = self.port_mut(a, pa) {
            p.remote = Some((b, pb));
        }
        if let Some(p) = self.port_mut(b, pb) {
            p.remote = Some((a, pa));
        }
        Ok(())
    }

    /// Remove the cable at port `pa` of `a` (both ends). Returns the far end
    /// it was connected to, or `None` if the port had no cable.
    pub fn disconnect(
        &mut self,
        a: NodeIdx,
        pa: u8,
    ) -> Result<Option<(NodeIdx, u8)>, TopologyError> {
        let remote = self.check_port(a, pa)?.remote;
        if let Some((b, pb)) = remote {
            if let Some(p) = self.port_mut(a, pa) {
                p.remote = None;
            }
            if let Some(p) = self.port_mut(b, pb) {
                p.remote = None;
            }
        }
        Ok(remote)
    }

    /// Set the PortGUID of a CA/router port (e.g. when discovery first reaches
    /// it). On a switch this sets the GUID of every port, as they share it.
    pub fn set_port_guid(
        &mut self,
        idx: NodeIdx,
        port: u8,
        guid: u64,
    ) -> Result<(), TopologyError> {
        let node = self.node(idx).ok_or(TopologyError::NoSuchNode(idx))?;
        let is_switch = node.is_switch();
        let key_port = if is_switch { 0 } else { port };
        let old = node
            .port(port)
            .ok_or(TopologyError::NoSuchPort {
                node: idx,
                port,
                num_ports: node.num_ports(),
            })?
            .port_guid;
        if old == guid {
            return Ok(());
        }
        if guid != 0 {
            if let Some(&(existing, _)) = self.by_port_guid.get(&guid) {
                return Err(TopologyError::DuplicatePortGuid { guid, existing });
            }
        }
        if old != 0 {
            self.by_port_guid.remove(&old);
        }
        if guid != 0 {
            self.by_port_guid.insert(guid, (idx, key_port));
        }
        if let Some(node) = self.nodes.get_mut(idx.as_usize()) {
            if is_switch {
                node.ports.iter_mut().for_each(|p| p.port_guid = guid);
            } else if let Some(p) = node.ports.get_mut(usize::from(port)) {
                p.port_guid = guid;
            }
        }
        Ok(())
    }

    /// Set PortInfo.LID and LMC of a port (port 0 for a switch).
    pub fn set_port_lid(
        &mut self,
        idx: NodeIdx,
        port: u8,
        lid: u16,
        lmc: u8,
    ) -> Result<(), TopologyError> {
        let num_ports = self
            .node(idx)
            .ok_or(TopologyError::NoSuchNode(idx))?
            .num_ports();
        let p = self.port_mut(idx, port).ok_or(TopologyError::NoSuchPort {
            node: idx,
            port,
            num_ports,
        })?;
        p.lid = lid;
        p.lmc = lmc;
        Ok(())
    }

    /// Set the active width and speed of both ends of the cable at `pa` of
    /// `a` (only that port if it has no cable).
    pub fn set_link_rate(
        &mut self,
        a: NodeIdx,
        pa: u8,
        width: LinkWidth,
        speed: LinkSpeed,
    ) -> Result<(), TopologyError> {
        let remote = self.check_port(a, pa)?.remote;
        for (n, p) in std::iter::once((a, pa)).chain(remote) {
            if let Some(port) = self.port_mut(n, p) {
                port.link_width = width;
                port.link_speed = speed;
            }
        }
        Ok(())
    }

    /// Set the MTU of one port (PortInfo.NeighborMTU as discovery reads it, or
    /// MTUCap for a switch's port 0; see [`Port::mtu`]). `mtu` is an IBA MTU
    /// code, 1 (256) ... 5 (4096).
    pub fn set_port_mtu(&mut self, idx: NodeIdx, port: u8, mtu: u8) -> Result<(), TopologyError> {
        let num_ports = self
            .node(idx)
            .ok_or(TopologyError::NoSuchNode(idx))?
            .num_ports();
        if mtu_bytes(mtu).is_none() {
            return Err(TopologyError::BadMtu {
                node: idx,
                port,
                mtu,
            });
        }
        let p = self.port_mut(idx, port).ok_or(TopologyError::NoSuchPort {
            node: idx,
            port,
            num_ports,
        })?;
        p.mtu = mtu;
        Ok(())
    }

    /// Set the MTU of both ends of the cable at `pa` of `a` (only that port if
    /// it has no cable): what the SM programs as NeighborMTU on both ends.
    pub fn set_link_mtu(&mut self, a: NodeIdx, pa: u8, mtu: u8) -> Result<(), TopologyError> {
        let remote = self.check_port(a, pa)?.remote;
        if mtu_bytes(mtu).is_none() {
            return Err(TopologyError::BadMtu {
                node: a,
                port: pa,
                mtu,
            });
        }
        for (n, p) in std::iter::once((a, pa)).chain(remote) {
            if let Some(port) = self.port_mut(n, p) {
                port.mtu = mtu;
            }
        }
        Ok(())
    }

    /// Change a node's description, vendor and device ids (nothing indexed).
    pub fn set_node_info(
        &mut self,
        idx: NodeIdx,
        description: &str,
        vendor_id: u32,
        device_id: u16,
        system_image_guid: u64,
    ) -> Result<(), TopologyError> {
        let node = self
            .nodes
            .get_mut(idx.as_usize())
            .ok_or(TopologyError::NoSuchNode(idx))?;
        node.description = description.to_string();
        node.vendor_id = vendor_id;
        node.device_id = device_id;
        node.system_image_guid = system_image_guid;
        Ok(())
    }

    /// Every cable once, as ((a, pa), (b, pb)) with (a, pa) < (b, pb).
    pub fn links(&self) -> impl Iterator<Item = ((NodeIdx, u8), (NodeIdx, u8))> + '_ {
        self.iter().flat_map(|(idx, node)| {
            node.physical_ports().filter_map(move |(p, port)| {
                let remote = port.remote?;
                ((idx, p) < remote).then_some(((idx, p), remote))
            })
        })
    }

    /// Node, switch, CA, connected-port and cable counts.
    pub fn counts(&self) -> Counts {
        let mut c = Counts {
            nodes: self.nodes.len(),
            ..Counts::default()
        };
        for node in &self.nodes {
            match node.node_type {
                NodeType::Switch => c.switches += 1,
                NodeType::Ca => c.hcas += 1,
                NodeType::Router => {}
            }
            c.ports += node
                .physical_ports()
                .filter(|(_, port)| port.remote.is_some())
                .count();
        }
        c.links = self.links().count();
        c
    }

    /// True when every node can reach every other over cables (an empty
    /// topology is connected).
    pub fn is_connected(&self) -> bool {
        let n = self.nodes.len();
        if n == 0 {
            return true;
        }
        let mut seen = vec![false; n];
        let mut stack = vec![0usize];
        if let Some(s) = seen.first_mut() {
            *s = true;
        }
        let mut reached = 1;
        while let Some(i) = stack.pop() {
            let Some(node) = self.nodes.get(i) else {
                continue;
            };
            for (_, port) in node.physical_ports() {
                if let Some((r, _)) = port.remote {
                    if let Some(s) = seen.get_mut(r.as_usize()) {
                        if !*s {
                            *s = true;
                            reached += 1;
                            stack.push(r.as_usize());
                        }
                    }
                }
            }
        }
        reached == n
    }
}
