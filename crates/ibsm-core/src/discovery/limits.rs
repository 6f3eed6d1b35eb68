//! The limits of one walk: [`DiscoveryConfig`] (route length, the topology cap) and
//! what the walk reports when the cap stops it ([`TopologyCap`]). A leaf: the state
//! machine and its result both name these types.

use std::fmt;

use ibsm_mad::MAX_HOPS;

/// Tunables of a [`Discovery`](crate::discovery::Discovery).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiscoveryConfig {
    /// Longest directed route to follow (IBA allows 63 hops).
    pub max_hops: usize,
    /// Most nodes one walk records (see "Topology cap" in the [`discovery`](crate::discovery) doc).
    pub max_nodes: usize,
    /// Most physical ports (sum of NumPorts) one walk records.
    pub max_ports: usize,
}

/// Default [`DiscoveryConfig::max_nodes`]: well above the largest fabrics
/// built (a 3-level k=58 fat tree has ~50k nodes) and the 48k unicast LIDs.
pub const DEFAULT_MAX_NODES: usize = 65_536;
/// Default [`DiscoveryConfig::max_ports`]: 64k nodes of 40 ports on average.
pub const DEFAULT_MAX_PORTS: usize = 65_536 * 40;

impl Default for DiscoveryConfig {
    fn default() -> Self {
        DiscoveryConfig {
            max_hops: MAX_HOPS,
            max_nodes: DEFAULT_MAX_NODES,
            max_ports: DEFAULT_MAX_PORTS,
        }
    }
}

/// Which limit of [`DiscoveryConfig`] stopped the topology from growing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CapLimit {
    /// [`DiscoveryConfig::max_nodes`].
    Nodes,
    /// [`DiscoveryConfig::max_ports`].
    Ports,
}

/// The walk reached its topology cap (see the [`discovery`](crate::discovery) doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TopologyCap {
    /// The limit reached first.
    pub limit: CapLimit,
    /// Its value.
    pub max: usize,
    /// New nodes refused after it was reached (NodeInfo answers not recorded).
    pub refused: usize,
}

impl fmt::Display for TopologyCap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.limit {
            CapLimit::Nodes => "nodes",
            CapLimit::Ports => "ports",
        };
        write!(
            f,
            "topology cap of {} {what} reached: {} more node(s) not recorded; raise the cap if the fabric is really this large",
            self.max, self.refused
        )
    }
}
