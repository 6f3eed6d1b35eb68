//! [`Node`] and its [`Port`]s, with the [`NodeIdx`] that addresses a node and its
//! [`NodeType`]: what one node of a topology is, apart from the indexes that
//! find it (those are [`crate::Topology`]'s).

use std::fmt;

use super::link::{LinkSpeed, LinkWidth};
use super::rate::MTU_2048;

/// Index of a node inside one [`Topology`](crate::Topology). Indices are dense (0..n) and
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
    /// The MTU this port sends with, IBA encoding (1 = 256 ... 5 = 4096, see
    /// [`mtu_bytes`](crate::topology::mtu_bytes)): PortInfo.NeighborMTU of a
    /// physical port (the SM programs both ends of a cable with the smaller
    /// MTUCap, so they agree), PortInfo.MTUCap of a switch's port 0 (which has
    /// no neighbor). Discovery fills it from the PortInfo it reads; until then
    /// it is [`MTU_2048`], what ibsim reports on every cabled port (NeighborMTU
    /// and MTUCap 4 in its `swport`/`hcaport` templates), so net files and
    /// generated fabrics predict ibsim. Path MTUs ([`crate::path`]) are the
    /// minimum over the ports a packet leaves and enters.
    pub mtu: u8,
}

impl Port {
    /// An unconnected port with the given GUID, 4x SDR, MTU 2048, no LID.
    pub fn new(port_guid: u64) -> Port {
        Port {
            port_guid,
            remote: None,
            lid: 0,
            lmc: 0,
            link_width: LinkWidth::default(),
            link_speed: LinkSpeed::default(),
            mtu: MTU_2048,
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
