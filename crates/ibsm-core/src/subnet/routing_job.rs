//! Routing (LFT computation) by the configured engine, here or handed to the driver
//! as a [`RoutingJob`] (`SubnetConfig::offload_routing`) that owns its inputs and
//! can run on another thread; its [`RoutingDone`] comes back to the sweep waiting
//! for it.

use ibsm_fabric::routing::{self, ForwardingTables, RoutingOptions};

use super::config::RoutingEngine;

/// A routing computation handed to the driver (see
/// [`SubnetConfig::offload_routing`](super::config::SubnetConfig::offload_routing)):
/// it owns a copy of the topology, so the driver can run it on another thread while
/// its own thread keeps answering SMPs (SMInfo polls above all: a master silent for
/// the length of a big routing computation looks dead to its standbys).
#[derive(Debug, Clone)]
pub struct RoutingJob {
    pub(super) id: u64,
    pub(super) engine: RoutingEngine,
    pub(super) topology: ibsm_fabric::Topology,
}

impl RoutingJob {
    /// Compute the tables (the expensive part; reads no clock, does no I/O).
    pub fn run(self) -> RoutingDone {
        RoutingDone {
            id: self.id,
            tables: compute_routing(&self.engine, &self.topology),
        }
    }
}

/// The result of [`RoutingJob::run`], for
/// [`SubnetManager::handle_routing_done`](super::SubnetManager::handle_routing_done).
#[derive(Debug, Clone)]
pub struct RoutingDone {
    pub(super) id: u64,
    pub(super) tables: ForwardingTables,
}

/// The configured engine's tables, or none at all if it fails (LFTs stay as
/// they are rather than be cleared).
pub(super) fn compute_routing(
    engine: &RoutingEngine,
    t: &ibsm_fabric::Topology,
) -> ForwardingTables {
    let opts = RoutingOptions::default();
    let computed = match engine {
        RoutingEngine::MinHop => routing::min_hop(t, &opts),
        RoutingEngine::UpDown { roots } => {
            routing::up_down(t, (!roots.is_empty()).then_some(roots.as_slice()), &opts)
        }
    };
    match computed {
        Ok(t) => t,
        Err(err) => {
            tracing::error!(%err, "routing failed; LFTs left unchanged");
            ForwardingTables::default()
        }
    }
}
