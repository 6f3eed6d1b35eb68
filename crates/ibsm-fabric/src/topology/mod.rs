//! The topology graph: nodes (CAs, switches, routers), their ports and the
//! cables between ports.

use std::collections::HashMap;
use std::fmt;

/// Index of a node inside one [`Topology`]. Indices are dense (0..n) and
/// stable: nodes are never removed, so an index stays valid for the life of
/// the topology it came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeIdx(pub u32);

impl NodeIdx {
    /// The index as a `usize`, for slices.
    pub fn as_usize(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for NodeIdx {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}

/// NodeInfo.NodeType, numbered as in IBA (14.2.5.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum NodeType {
    /// Channel adapter (HCA or TCA).
    Ca = 1,
    /// Switch.
    Switch = 2,
    /// Router.
    Router = 3,
}

impl NodeType {
    /// Decode NodeInfo.NodeType; `None` for reserved values.
    pub fn from_iba(v: u8) -> Option<NodeType> {
        match v {
            1 => Some(NodeType::Ca),
            2 => Some(NodeType::Switch),
            3 => Some(NodeType::Router),
            _ => None,
        }
    }

    /// The IBA NodeInfo.NodeType value.
    pub fn to_iba(self) -> u8 {
        self as u8
    }
}

/// Link width, as PortInfo.LinkWidthActive encodes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum LinkWidth {
    /// 1x
    X1,
    /// 2x
    X2,
    /// 4x (the common cable, and what ibsim assumes).
    #[default]
    X4,
    /// 8x
    X8,
    /// 12x
    X12,
}

impl LinkWidth {
    /// The PortInfo.LinkWidthActive bit for this width.
    pub fn to_iba(self) -> u8 {
        match self {
            LinkWidth::X1 => 1,
            LinkWidth::X4 => 2,
            LinkWidth::X8 => 4,
            LinkWidth::X12 => 8,
            LinkWidth::X2 => 16,
        }
    }

    /// Decode a PortInfo.LinkWidthActive value (exactly one bit set).
    pub fn from_iba(v: u8) -> Option<LinkWidth> {
        match v {
            1 => Some(LinkWidth::X1),
            2 => Some(LinkWidth::X4),
            4 => Some(LinkWidth::X8),
            8 => Some(LinkWidth::X12),
            16 => Some(LinkWidth::X2),
            _ => None,
        }
    }

    /// Number of lanes.
    pub fn lanes(self) -> u8 {
        match self {
            LinkWidth::X1 => 1,
            LinkWidth::X2 => 2,
            LinkWidth::X4 => 4,
            LinkWidth::X8 => 8,
            LinkWidth::X12 => 12,
        }
    }

    /// Width from a lane count, as written in net files ("4x").
    pub fn from_lanes(n: u8) -> Option<LinkWidth> {
        match n {
            1 => Some(LinkWidth::X1),
            2 => Some(LinkWidth::X2),
            4 => Some(LinkWidth::X4),
            8 => Some(LinkWidth::X8),
            12 => Some(LinkWidth::X12),
            _ => None,
        }
    }
}

impl fmt::Display for LinkWidth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}x", self.lanes())
    }
}

/// Link speed. SDR/DDR/QDR live in PortInfo.LinkSpeedActive; FDR and later in
/// PortInfo.LinkSpeedExtActive (FDR10 is a vendor extension, kept for net files).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum LinkSpeed {
    /// 2.5 Gb/s per lane (ibsim's default).
    #[default]
    Sdr,
    /// 5 Gb/s
    Ddr,
    /// 10 Gb/s
    Qdr,
    /// 10.3125 Gb/s (Mellanox extension)
    Fdr10,
    /// 14.0625 Gb/s
    Fdr,
    /// 25.78125 Gb/s
    Edr,
    /// 53.125 Gb/s
    Hdr,
    /// 106.25 Gb/s
    Ndr,
}

impl LinkSpeed {
    /// All speeds, in increasing order.
    pub const ALL: [LinkSpeed; 8] = [
        LinkSpeed::Sdr,
        LinkSpeed::Ddr,
        LinkSpeed::Qdr,
        LinkSpeed::Fdr10,
        LinkSpeed::Fdr,
        LinkSpeed::Edr,
        LinkSpeed::Hdr,
        LinkSpeed::Ndr,
    ];

    /// The name used in net files and by ibnetdiscover ("SDR", "QDR"...).
    pub fn name(self) -> &'static str {
        match self {
            LinkSpeed::Sdr => "SDR",
            LinkSpeed::Ddr => "DDR",
            LinkSpeed::Qdr => "QDR",
            LinkSpeed::Fdr10 => "FDR10",
            LinkSpeed::Fdr => "FDR",
            LinkSpeed::Edr => "EDR",
            LinkSpeed::Hdr => "HDR",
            LinkSpeed::Ndr => "NDR",
        }
    }

    /// Parse a name as [`LinkSpeed::name`] prints it (case-insensitive).
    pub fn from_name(s: &str) -> Option<LinkSpeed> {
        LinkSpeed::ALL
            .into_iter()
            .find(|sp| sp.name().eq_ignore_ascii_case(s))
    }

    /// PortInfo.LinkSpeedActive: 1 = SDR, 2 = DDR, 4 = QDR. For FDR and later
    /// the base field reads SDR and the real speed is in
    /// [`LinkSpeed::speed_ext_active`].
    pub fn speed_active(self) -> u8 {
        match self {
            LinkSpeed::Ddr => 2,
            LinkSpeed::Qdr | LinkSpeed::Fdr10 => 4,
            _ => 1,
        }
    }

    /// PortInfo.LinkSpeedExtActive: 0 = none, 1 = FDR, 2 = EDR, 4 = HDR, 8 = NDR.
    pub fn speed_ext_active(self) -> u8 {
        match self {
            LinkSpeed::Fdr => 1,
            LinkSpeed::Edr => 2,
            LinkSpeed::Hdr => 4,
            LinkSpeed::Ndr => 8,
            _ => 0,
        }
    }
}

impl fmt::Display for LinkSpeed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One port of a node. `ports[p]` of a [`Node`] is port number `p`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Port {
    /// PortInfo/NodeInfo PortGUID. On a switch every port reports the switch's
    /// port-0 GUID (only port 0 has a GUID of its own). 0 = not known (yet).
    pub port_guid: u64,
    /// The (node, port number) at the other end of the cable, if any.
    pub remote: Option<(NodeIdx, u8)>,
    /// PortInfo.LID (base LID); 0 = unassigned. On a switch only port 0 has one.
    pub lid: u16,
    /// PortInfo.LMC.
    pub lmc: u8,
    /// Active link width.
    pub link_width: LinkWidth,
    /// Active link speed.
    pub link_speed: LinkSpeed,
}

impl Port {
    /// An unconnected port with the given GUID, 4x SDR, no LID.
    pub fn new(port_guid: u64) -> Port {
        Port {
            port_guid,
            remote: None,
            lid: 0,
            lmc: 0,
            link_width: LinkWidth::default(),
            link_speed: LinkSpeed::default(),
        }
    }
}

/// One node: its NodeInfo/NodeDescription identity and its ports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// NodeInfo.NodeType.
    pub node_type: NodeType,
    /// NodeInfo.NodeGUID.
    pub node_guid: u64,
    /// NodeInfo.SystemImageGUID.
    pub system_image_guid: u64,
    /// NodeDescription (at most 64 bytes on the wire).
    pub description: String,
    /// NodeInfo.VendorID (24 bits).
    pub vendor_id: u32,
    /// NodeInfo.DeviceID.
    pub device_id: u16,
    /// Node id in net files (ibsim's `"S-..."`/`"H-..."`/`"Hca1"`), unique in a
    /// topology. It is what `SIM_HOST` names. Empty for nodes found by
    /// discovery; [`Node::net_name`] then derives one from the GUID.
    pub name: String,
    /// Indexed by port number: `ports.len() == NumPorts + 1`. `ports[0]` is the
    /// management port of a switch and unused on a CA or router.
    pub ports: Vec<Port>,
}

impl Node {
    /// A node with `num_ports` physical ports (NodeInfo.NumPorts), none
    /// connected. On a switch all ports get `node_guid` as port GUID (port 0 is
    /// the switch's only addressable port); on a CA or router the ports get
    /// `node_guid + p` for port `p`, which is what ibsim and most HCAs do.
    pub fn new(node_type: NodeType, node_guid: u64, num_ports: u8, description: &str) -> Node {
        let ports = (0..=num_ports)
            .map(|p| match node_type {
                NodeType::Switch => Port::new(node_guid),
                _ if p == 0 => Port::new(0),
                _ => Port::new(node_guid.wrapping_add(u64::from(p))),
            })
            .collect();
        Node {
            node_type,
            node_guid,
            system_image_guid: node_guid,
            description: description.to_string(),
            vendor_id: 0,
            device_id: 0,
            name: String::new(),
            ports,
        }
    }

    /// NodeInfo.NumPorts: physical ports (not counting switch port 0).
    pub fn num_ports(&self) -> u8 {
        u8::try_from(self.ports.len().saturating_sub(1)).unwrap_or(u8::MAX)
    }

    /// True for switches.
    pub fn is_switch(&self) -> bool {
        self.node_type == NodeType::Switch
    }

    /// The port with this number, if the node has it.
    pub fn port(&self, port: u8) -> Option<&Port> {
        self.ports.get(usize::from(port))
    }

    /// Physical port numbers (1..=NumPorts).
    pub fn physical_ports(&self) -> impl Iterator<Item = (u8, &Port)> + '_ {
        self.ports
            .iter()
            .enumerate()
            .skip(1)
            .map(|(p, port)| (u8::try_from(p).unwrap_or(u8::MAX), port))
    }

    /// The net-file node id: `name`, or `S-<guid>`/`H-<guid>`/`R-<guid>` as
    /// ibnetdiscover prints it when `name` is empty.
    pub fn net_name(&self) -> String {
        if !self.name.is_empty() {
            return self.name.clone();
        }
        let prefix = match self.node_type {
            NodeType::Switch => 'S',
            NodeType::Ca => 'H',
            NodeType::Router => 'R',
        };
        format!("{prefix}-{:016x}", self.node_guid)
    }
}

/// Why a change to a [`Topology`] was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TopologyError {
    /// The index names no node of this topology.
    #[error("no node {0} in the topology")]
    NoSuchNode(NodeIdx),
    /// The node has no port with that number.
    #[error("node {node} has no port {port} (it has {num_ports} ports)")]
    NoSuchPort {
        /// The node.
        node: NodeIdx,
        /// The port asked for.
        port: u8,
        /// NodeInfo.NumPorts of the node.
        num_ports: u8,
    },
    /// Port 0 is a switch's internal management port and takes no cable.
    #[error("port 0 of node {0} cannot be cabled")]
    PortZero(NodeIdx),
    /// A cable from a port to itself.
    #[error("cannot cable port {port} of node {node} to itself")]
    SelfLink {
        /// The node.
        node: NodeIdx,
        /// The port.
        port: u8,
    },
    /// The port already has a cable (to `remote`).
    #[error("port {port} of node {node} is already connected to port {} of node {}", remote.1, remote.0)]
    AlreadyConnected {
        /// The node.
        node: NodeIdx,
        /// The port.
        port: u8,
        /// What it is connected to.
        remote: (NodeIdx, u8),
    },
    /// Another node already has this NodeGUID.
    #[error("node GUID {guid:#018x} is already used by node {existing}")]
    DuplicateNodeGuid {
        /// The GUID.
        guid: u64,
        /// The node holding it.
        existing: NodeIdx,
    },
    /// Another node's port already has this PortGUID.
    #[error("port GUID {guid:#018x} is already used by node {existing}")]
    DuplicatePortGuid {
        /// The GUID.
        guid: u64,
        /// The node holding it.
        existing: NodeIdx,
    },
    /// Another node already has this net-file name.
    #[error("node name {name:?} is already used by node {existing}")]
    DuplicateName {
        /// The name.
        name: String,
        /// The node holding it.
        existing: NodeIdx,
    },
    /// A node must have at least one physical port.
    #[error("node {0:?} has no ports")]
    NoPorts(String),
    /// More than u32::MAX nodes.
    #[error("topology is full")]
    Full,
}

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

#[cfg(test)]
mod tests {
    use super::*;

    fn two_hcas_one_switch() -> (Topology, NodeIdx, NodeIdx, NodeIdx) {
        let mut t = Topology::new();
        let sw = t
            .add_node(Node::new(NodeType::Switch, 0x100, 8, "sw"))
            .unwrap();
        let h1 = t.add_node(Node::new(NodeType::Ca, 0x200, 2, "h1")).unwrap();
        let h2 = t.add_node(Node::new(NodeType::Ca, 0x300, 1, "h2")).unwrap();
        t.connect(sw, 1, h1, 1).unwrap();
        t.connect(h2, 1, sw, 5).unwrap();
        (t, sw, h1, h2)
    }

    #[test]
    fn node_type_numbers_follow_iba() {
        assert_eq!(NodeType::Ca.to_iba(), 1);
        assert_eq!(NodeType::Switch.to_iba(), 2);
        assert_eq!(NodeType::Router.to_iba(), 3);
        for v in 0..=255u8 {
            if let Some(t) = NodeType::from_iba(v) {
                assert_eq!(t.to_iba(), v);
            }
        }
    }

    #[test]
    fn lookups_and_neighbors() {
        let (t, sw, h1, h2) = two_hcas_one_switch();
        assert_eq!(t.find_by_guid(0x200), Some(h1));
        assert_eq!(t.find_by_guid(0x201), None);
        assert_eq!(t.find_by_port_guid(0x201), Some((h1, 1)));
        assert_eq!(t.find_by_port_guid(0x202), Some((h1, 2)));
        assert_eq!(t.find_by_port_guid(0x100), Some((sw, 0)));
        assert_eq!(t.neighbor(sw, 1), Some((h1, 1)));
        assert_eq!(t.neighbor(h1, 1), Some((sw, 1)));
        assert_eq!(t.neighbor(sw, 5), Some((h2, 1)));
        assert_eq!(t.neighbor(sw, 2), None);
        assert_eq!(t.neighbor(sw, 99), None);
        assert_eq!(t.neighbor(NodeIdx(42), 1), None);
        assert_eq!(t.node(sw).map(|n| n.num_ports()), Some(8));
    }

    #[test]
    fn counts_count_cables_once() {
        let (t, ..) = two_hcas_one_switch();
        assert_eq!(
            t.counts(),
            Counts {
                nodes: 3,
                switches: 1,
                hcas: 2,
                ports: 4,
                links: 2
            }
        );
        assert!(t.is_connected());
    }

    #[test]
    fn connect_validates() {
        let (mut t, sw, h1, h2) = two_hcas_one_switch();
        assert_eq!(
            t.connect(sw, 1, h1, 2),
            Err(TopologyError::AlreadyConnected {
                node: sw,
                port: 1,
                remote: (h1, 1)
            })
        );
        assert!(matches!(
            t.connect(sw, 9, h1, 2),
            Err(TopologyError::NoSuchPort { port: 9, .. })
        ));
        assert_eq!(t.connect(sw, 0, h1, 2), Err(TopologyError::PortZero(sw)));
        assert_eq!(
            t.connect(sw, 2, NodeIdx(7), 1),
            Err(TopologyError::NoSuchNode(NodeIdx(7)))
        );
        assert_eq!(
            t.connect(sw, 2, sw, 2),
            Err(TopologyError::SelfLink { node: sw, port: 2 })
        );
        assert!(matches!(
            t.connect(h1, 2, h2, 1),
            Err(TopologyError::AlreadyConnected { node, .. }) if node == h2
        ));
        // A failed connect changes nothing.
        assert_eq!(t.neighbor(h1, 2), None);
        // Loopback cable between two ports of one switch is one link.
        t.connect(sw, 2, sw, 3).unwrap();
        assert_eq!(t.counts().links, 3);
        assert_eq!(t.counts().ports, 6);
    }

    #[test]
    fn add_node_rejects_duplicates() {
        let (mut t, sw, h1, _) = two_hcas_one_switch();
        assert_eq!(
            t.add_node(Node::new(NodeType::Ca, 0x100, 1, "x")),
            Err(TopologyError::DuplicateNodeGuid {
                guid: 0x100,
                existing: sw
            })
        );
        // Node GUID free but its port 1 GUID (0x201) is h1's.
        assert_eq!(
            t.add_node(Node::new(NodeType::Ca, 0x200 - 0x1 + 0x1000, 1, "x"))
                .map(|_| ()),
            Ok(())
        );
        let mut n = Node::new(NodeType::Ca, 0x5000, 1, "x");
        n.ports[1].port_guid = 0x201;
        assert_eq!(
            t.add_node(n),
            Err(TopologyError::DuplicatePortGuid {
                guid: 0x201,
                existing: h1
            })
        );
        let mut a = Node::new(NodeType::Ca, 0x6000, 1, "a");
        a.name = "same".into();
        let mut b = Node::new(NodeType::Ca, 0x7000, 1, "b");
        b.name = "same".into();
        let ia = t.add_node(a).unwrap();
        assert_eq!(t.find_by_name("same"), Some(ia));
        assert!(matches!(
            t.add_node(b),
            Err(TopologyError::DuplicateName { .. })
        ));
        let mut none = Node::new(NodeType::Ca, 0x8000, 1, "n");
        none.ports.truncate(1);
        assert!(matches!(t.add_node(none), Err(TopologyError::NoPorts(_))));
    }

    #[test]
    fn disconnect_and_set_port_guid() {
        let (mut t, sw, h1, _) = two_hcas_one_switch();
        assert_eq!(t.disconnect(h1, 1), Ok(Some((sw, 1))));
        assert_eq!(t.neighbor(sw, 1), None);
        assert_eq!(t.disconnect(h1, 1), Ok(None));
        assert_eq!(t.counts().links, 1);
        t.set_port_guid(h1, 2, 0xabc).unwrap();
        assert_eq!(t.find_by_port_guid(0xabc), Some((h1, 2)));
        assert_eq!(t.find_by_port_guid(0x202), None);
        t.set_port_guid(sw, 0, 0xdef).unwrap();
        assert_eq!(t.find_by_port_guid(0xdef), Some((sw, 0)));
        assert!(t.nodes()[sw.as_usize()]
            .ports
            .iter()
            .all(|p| p.port_guid == 0xdef));
        assert!(t.set_port_guid(h1, 1, 0xdef).is_err());
    }

    #[test]
    fn link_encodings() {
        assert_eq!(LinkWidth::X4.to_iba(), 2);
        for w in [
            LinkWidth::X1,
            LinkWidth::X2,
            LinkWidth::X4,
            LinkWidth::X8,
            LinkWidth::X12,
        ] {
            assert_eq!(LinkWidth::from_iba(w.to_iba()), Some(w));
            assert_eq!(LinkWidth::from_lanes(w.lanes()), Some(w));
        }
        for s in LinkSpeed::ALL {
            assert_eq!(LinkSpeed::from_name(s.name()), Some(s));
        }
        assert_eq!(LinkSpeed::Qdr.speed_active(), 4);
        assert_eq!(LinkSpeed::Edr.speed_ext_active(), 2);
    }
}
