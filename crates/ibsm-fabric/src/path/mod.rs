//! Unicast paths through the programmed LFTs, for the SA's PathRecords.
//!
//! The SA answers a PathRecord query with what the fabric actually does, so
//! paths here are read from the LinearForwardingTables as programmed
//! ([`Lfts`]: the routing result, or ibsm-core's tables by switch NodeGUID
//! through [`LftsByGuid`]), never recomputed from the graph:
//!
//! * [`walk`] follows one (source end port, DLID) hop by hop: the switches
//!   passed with their ingress and egress ports, or a typed [`PathError`] (no
//!   route, dead end, port down, loop, wrong destination). It uses the exact
//!   DLID: with LMC > 0 each of a port's 2^LMC LIDs has its own entries and
//!   may go another way.
//! * [`PathSummary`] is what a PathRecord reports of a path: cables traversed,
//!   the smallest MTU and the slowest rate over every port the packet leaves
//!   or enters over a cable (both ends of each cable, as OpenSM checks the
//!   egress and ingress ports); [`Rate`](crate::Rate) orders by bandwidth,
//!   not by code. A switch's port 0 is no cable and adds nothing (OpenSM also
//!   folds in the end ports' MTUCap and port 0's PortInfo; here the ports'
//!   `mtu`, which discovery fills from NeighborMTU, already is the MTU each
//!   link runs at).
//! * [`path_params`] adds PathRecord.Reversible (the walk back from the
//!   destination to the SLID succeeds).
//! * [`PathTable`] precomputes every switch's summary towards every DLID in one
//!   pass per DLID over the LFT in-tree (see its module doc), so all-to-all
//!   PathRecords on a k=16 fat tree (1M pairs) are O(1) lookups
//!   (`benches/path.rs`). It agrees with [`walk`] on every pair and falls back
//!   to it for failures, to name the reason.
//!
//! Port state: the topology records a cable only for a link that is up
//! (discovery follows ports in Init or above), so "port down" means no cable.

mod lfts;
mod table;
mod walk;

pub use lfts::{owns, Lfts, LftsByGuid, LidIndex, MAX_UNICAST_LID};
pub use table::PathTable;
pub use walk::{path_params, walk, Path, PathError, PathHop, PathParams, PathSummary};

#[cfg(test)]
mod tests;
