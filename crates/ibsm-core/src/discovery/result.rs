//! What a walk reports: [`DiscoveryResult`] (the topology, the route to and the
//! attributes read of every node) and its findings: far ends that never answered
//! ([`Unreachable`]), failed or rejected requests ([`DiscoveryIssue`]) and devices
//! sharing a GUID ([`DuplicateGuid`]). A leaf of plain data, so callers and the state
//! machine share it.

use std::fmt;

use ibsm_fabric::{NodeIdx, Topology};
use ibsm_mad::attr::{NodeInfo, PortInfo, SwitchInfo};
use ibsm_mad::AttributeId;

use super::limits::TopologyCap;

/// Which GUID two devices share.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DuplicateKind {
    /// NodeInfo.NodeGUID.
    NodeGuid,
    /// NodeInfo.PortGUID (a CA port, or a switch's port 0).
    PortGuid,
}

impl fmt::Display for DuplicateKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DuplicateKind::NodeGuid => "node GUID",
            DuplicateKind::PortGuid => "port GUID",
        })
    }
}

/// Two devices answering with the same GUID (see "Duplicate GUIDs" in the
/// [`discovery`](crate::discovery) doc).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DuplicateGuid {
    /// Which GUID.
    pub kind: DuplicateKind,
    /// The GUID both answer with.
    pub guid: u64,
    /// The node found first with it.
    pub first: NodeIdx,
    /// The node found later, placed as a node of its own.
    pub newcomer: NodeIdx,
    /// The directed route to the newcomer.
    pub path: Vec<u8>,
    /// The newcomer's port the route enters (NodeInfo.LocalPortNum).
    pub port: u8,
}

impl fmt::Display for DuplicateGuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "duplicate {} {:#018x}: node {} and node {} (port {} at directed route {:?})",
            self.kind, self.guid, self.first, self.newcomer, self.port, self.path
        )
    }
}

/// A far end that never answered NodeInfo.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreachable {
    /// The directed route that was tried.
    pub path: Vec<u8>,
    /// The known node and port the route leaves through (None: the SM's own node).
    pub via: Option<(NodeIdx, u8)>,
}

/// A request about a known node that failed or was rejected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiscoveryIssue {
    /// The directed route of the request.
    pub path: Vec<u8>,
    /// The attribute asked for.
    pub attr_id: AttributeId,
    /// Its AttributeModifier (the port for PortInfo).
    pub attr_mod: u32,
    /// What went wrong.
    pub reason: String,
}

/// Everything discovery learned.
#[derive(Debug, Clone, Default)]
pub struct DiscoveryResult {
    /// The fabric as discovered.
    pub topology: Topology,
    /// `paths[i]` is the directed route to `NodeIdx(i)` (empty for the SM's own node).
    pub paths: Vec<Vec<u8>>,
    /// `switch_info[i]` is the SwitchInfo of `NodeIdx(i)` if it is a switch that answered.
    pub switch_info: Vec<Option<SwitchInfo>>,
    /// `node_info[i]` is the NodeInfo `NodeIdx(i)` first answered with (its
    /// LocalPortNum and PortGUID are those of the port the walk entered it by). The SA
    /// serves NodeRecords from it: PartitionCap, Revision and the versions are in no
    /// other place.
    pub node_info: Vec<NodeInfo>,
    /// `port_info[i][p]` is the PortInfo of port `p` of `NodeIdx(i)` as read
    /// (every port of a switch, the reached ports of a CA; `None` if not read).
    /// The configurator needs it: CapabilityMask (IsSM), PortState, MTUCap,
    /// VLCap, the LID/LMC a port already carries.
    pub port_info: Vec<Vec<Option<PortInfo>>>,
    /// The SM's own node and port, if the 0-hop NodeInfo was answered.
    pub local: Option<(NodeIdx, u8)>,
    /// Far ends that did not answer NodeInfo.
    pub unreachable: Vec<Unreachable>,
    /// Other failed or rejected requests.
    pub issues: Vec<DiscoveryIssue>,
    /// Devices answering with a GUID another one has.
    pub duplicates: Vec<DuplicateGuid>,
    /// Set when the topology cap stopped the walk from growing.
    pub cap: Option<TopologyCap>,
}

impl DiscoveryResult {
    /// The directed route to `node`.
    pub fn path(&self, node: NodeIdx) -> Option<&[u8]> {
        self.paths.get(node.as_usize()).map(Vec::as_slice)
    }
}
