//! Who is in a multicast group: [`McastMember`] (an end port and its
//! [`JoinState`]), how a member is named ([`EndPort`]), why one is left off a tree
//! ([`MemberIssue`]) and the errors of the multicast layer ([`McastError`]). Leaf
//! types: the tree and MFT code both use them.

use std::fmt;

use crate::topology::{NodeIdx, Topology};

/// MCMemberRecord.JoinState (IBA 15.2.5.17), a set of bits: FullMember,
/// NonMember, SendOnlyNonMember and (IBA 1.3) SendOnlyFullMember. A port that
/// joined several times holds the union.
///
/// FullMember and NonMember ports *receive* the group's packets;
/// SendOnlyNonMember and SendOnlyFullMember ports only send: the tree carries
/// their packets to the receivers but never delivers to them.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct JoinState(u8);

impl JoinState {
    /// FullMember (bit 0).
    pub const FULL_MEMBER: JoinState = JoinState(1);
    /// NonMember (bit 1).
    pub const NON_MEMBER: JoinState = JoinState(2);
    /// SendOnlyNonMember (bit 2).
    pub const SEND_ONLY_NON_MEMBER: JoinState = JoinState(4);
    /// SendOnlyFullMember (bit 3, IBA 1.3).
    pub const SEND_ONLY_FULL_MEMBER: JoinState = JoinState(8);

    /// From the 4-bit JoinState field (higher bits are dropped).
    pub fn from_bits(bits: u8) -> JoinState {
        JoinState(bits & 0x0F)
    }

    /// The 4-bit JoinState field.
    pub fn bits(self) -> u8 {
        self.0
    }

    /// No join state at all (not a member).
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// True when the port receives the group's packets (FullMember or
    /// NonMember).
    pub fn receives(self) -> bool {
        self.0 & 0b11 != 0
    }

    /// Both sets of bits.
    pub fn union(self, other: JoinState) -> JoinState {
        JoinState(self.0 | other.0)
    }
}

impl std::ops::BitOr for JoinState {
    type Output = JoinState;
    fn bitor(self, rhs: JoinState) -> JoinState {
        self.union(rhs)
    }
}

impl fmt::Debug for JoinState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names = [
            "FullMember",
            "NonMember",
            "SendOnlyNonMember",
            "SendOnlyFullMember",
        ];
        let mut first = true;
        for (i, n) in names.iter().enumerate() {
            if self.0 & (1 << i) != 0 {
                if !first {
                    f.write_str("|")?;
                }
                f.write_str(n)?;
                first = false;
            }
        }
        if first {
            f.write_str("None")?;
        }
        Ok(())
    }
}

/// An end port of the fabric: a CA or router port, or a switch's port 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EndPort {
    /// By node and port number (port 0 for a switch).
    Port(NodeIdx, u8),
    /// By PortGUID (MCMemberRecord.PortGID's interface ID); a switch's GUID
    /// names its port 0.
    Guid(u64),
}

impl From<(NodeIdx, u8)> for EndPort {
    fn from((n, p): (NodeIdx, u8)) -> EndPort {
        EndPort::Port(n, p)
    }
}

impl EndPort {
    /// The (node, port) this names in `topo`, if it is an end port there.
    pub fn resolve(self, topo: &Topology) -> Result<(NodeIdx, u8), MemberIssue> {
        let (node, port) = match self {
            EndPort::Port(n, p) => (n, p),
            EndPort::Guid(g) => topo
                .find_by_port_guid(g)
                .ok_or(MemberIssue::UnknownGuid(g))?,
        };
        let n = topo.node(node).ok_or(MemberIssue::NoSuchNode(node))?;
        if n.port(port).is_none() {
            return Err(MemberIssue::NoSuchPort { node, port });
        }
        if n.is_switch() != (port == 0) {
            return Err(MemberIssue::NotEndPort { node, port });
        }
        Ok((node, port))
    }
}

/// One member of a multicast group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct McastMember {
    /// The member's end port.
    pub port: EndPort,
    /// How it joined.
    pub join: JoinState,
}

impl McastMember {
    /// A member.
    pub fn new(port: impl Into<EndPort>, join: JoinState) -> McastMember {
        McastMember {
            port: port.into(),
            join,
        }
    }
}

/// Why a member is not on a tree. A member with an issue is left off (and
/// listed in `McastTree::excluded`); the rest of the group is still served.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MemberIssue {
    /// No port has this GUID.
    #[error("no port has GUID {0:#018x}")]
    UnknownGuid(u64),
    /// The node index names no node.
    #[error("no node {0}")]
    NoSuchNode(NodeIdx),
    /// The node has no such port.
    #[error("node {node} has no port {port}")]
    NoSuchPort {
        /// The node.
        node: NodeIdx,
        /// The port.
        port: u8,
    },
    /// A switch's physical port, or port 0 of a CA or router.
    #[error("node {node} port {port} is not an end port")]
    NotEndPort {
        /// The node.
        node: NodeIdx,
        /// The port.
        port: u8,
    },
    /// The CA/router port has no cable (its link is down).
    #[error("node {node} port {port} is not cabled")]
    NotCabled {
        /// The node.
        node: NodeIdx,
        /// The port.
        port: u8,
    },
    /// The CA/router port is cabled to another CA or router, not a switch.
    #[error("node {node} port {port} is not cabled to a switch")]
    NoSwitch {
        /// The node.
        node: NodeIdx,
        /// The port.
        port: u8,
    },
    /// The member's switch has no path to the tree's root (another fabric
    /// component than most of the group).
    #[error("switch {switch} has no path to the tree root")]
    Unreachable {
        /// The member's switch.
        switch: NodeIdx,
    },
    /// The join state has no bit set.
    #[error("empty join state")]
    EmptyJoinState,
}

/// A member left off a tree, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Excluded {
    /// The member as given.
    pub member: McastMember,
    /// Why.
    pub issue: MemberIssue,
}

/// Why a multicast computation was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum McastError {
    /// Not a multicast LID (0xC000 ..= 0xFFFE).
    #[error("LID {0:#06x} is not a multicast LID (0xC000..=0xFFFE)")]
    BadMlid(u16),
    /// Some switch is 255 or more switch hops from another.
    #[error("the switch graph is deeper than 254 hops")]
    TooDeep,
    /// The topology is not the one the [`McastFabric`](crate::multicast::McastFabric)
    /// was built from (its node count differs).
    #[error("topology has {got} nodes, the multicast fabric was built from {built}")]
    TopologyChanged {
        /// Nodes when built.
        built: usize,
        /// Nodes now.
        got: usize,
    },
    /// A tree names a node that is not a switch of the topology.
    #[error("node {0} in the tree is not a switch")]
    NotASwitch(NodeIdx),
    /// A tree sets a port the switch does not have.
    #[error("switch {switch} has no port {port}")]
    NoSuchPort {
        /// The switch.
        switch: NodeIdx,
        /// The port.
        port: u8,
    },
}
