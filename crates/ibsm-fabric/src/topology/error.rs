//! [`TopologyError`]: why a change to a [`crate::Topology`] was refused. The graph
//! methods raise it and the generator, LID manager and net file errors wrap it, so it
//! stands on its own, needing only [`NodeIdx`].

use super::node::NodeIdx;

/// Why a change to a [`Topology`](crate::Topology) was refused.
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
    /// An MTU that is not an IBA MTU code (1 = 256 ... 5 = 4096).
    #[error("MTU code {mtu} for node {node} port {port} is not 1 (256) ... 5 (4096)")]
    BadMtu {
        /// The node.
        node: NodeIdx,
        /// The port.
        port: u8,
        /// The code given.
        mtu: u8,
    },
    /// A node must have at least one physical port.
    #[error("node {0:?} has no ports")]
    NoPorts(String),
    /// More than u32::MAX nodes.
    #[error("topology is full")]
    Full,
}
