//! ibsm-fabric: the topology graph of an InfiniBand subnet.
//!
//! * [`Topology`] holds nodes (CAs, switches, routers) addressed by a dense
//!   [`NodeIdx`]; each [`Node`] keeps its ports in a `Vec` indexed by port
//!   number, so `ports[0]` is a switch's management port (and unused on a CA).
//!   Cables are stored at both ends (`Port::remote`), which makes
//!   [`Topology::neighbor`] O(1) and lets routing walk the graph without maps.
//! * The node list is private: GUID and name lookups go through hash indexes
//!   that must never go stale, so identity and cabling only change through
//!   methods that validate (typed [`TopologyError`]s; nothing panics on input).
//! * Nodes are compact (a few dozen bytes plus 24 bytes per port) because a
//!   k=58 three-level fat tree has ~53k nodes and must build in well under a
//!   second.
//! * Switch ports all report the switch's port-0 GUID, as IBA switches do;
//!   `find_by_port_guid` of a switch answers port 0.
//!
//! * [`netfile`] reads and writes ibnetdiscover/ibsim net files the way
//!   ibsim reads them (GUIDs from ibsim's per-type counters, not from node
//!   names), so a parsed topology predicts what ibsim's SMAs report; the
//!   `tests/ibsim_lab.rs` tests check that against ibsim + ibnetdiscover.
//! * [`gen`] builds 2/3-level fat trees and seeded random fabrics without a
//!   `rand` dependency (splitmix64), identical for identical arguments.
//! * [`lid`] is the LID manager: unicast LIDs 0x0001-0xBFFF, 2^LMC-aligned
//!   blocks for CA/router ports (switches LMC 0). Claims win in the order
//!   remembered-by-GUID (previous sweeps / imported OpenSM `guid2lid`) >
//!   LID the port already carries > fresh block, so a takeover or a
//!   restart does not renumber the subnet; duplicates are moved (lowest
//!   `NodeIdx` keeps the LID); when the space runs out end ports win over
//!   switches (a switch without a LID still forwards). It is pure: the SM
//!   core writes the result with PortInfo Sets.
//! * [`routing`] holds the min-hop and up/down engines and their checks
//!   (walks, channel-dependency-graph cycle search). Both engines work on
//!   switch-to-switch distance matrices (bit-parallel BFS for min-hop,
//!   two DPs over the up/down order), never per LID, then fill one LFT
//!   byte per switch per LID on `RoutingOptions::threads` scoped threads
//!   (no rayon: two plain threads over interleaved source switches are all
//!   this needs, and results are identical for any thread count). A k=58
//!   three-level fat tree (49,151 LIDs, 4,205 switches) routes in under a
//!   second in release; the LFTs (~200 MB) dominate memory.
//!   `benches/routing.rs` measures it.
//! * [`multicast`] computes, per multicast group, a loop-free tree over the
//!   switches (root by OpenSM's max-hop rule, shortest-path climbs to it) and
//!   every switch's MFT port mask, delivering only to receiving members
//!   (send-only ports get no bit); [`multicast::MftSet`] holds the desired MFTs
//!   by switch NodeGUID and [`multicast::changed_blocks`] lists only the MFT
//!   (block, position) writes that differ. All-pairs switch hops are
//!   computed once per topology so that a join or leave recomputes one group
//!   in well under a millisecond on a k=24 fat tree (`benches/multicast.rs`).
//! * [`path`] walks the *programmed* LFTs from an end port to a DLID for the
//!   SA's PathRecords (hops, cables, minimum MTU and [`Rate`], reversibility,
//!   typed errors), and [`path::PathTable`] precomputes every (switch, DLID)
//!   answer in one pass per DLID, so all-to-all PathRecords on a k=16 fat tree
//!   are 1M O(1) lookups (`benches/path.rs`). Ports carry an MTU
//!   ([`Port::mtu`], default 2048 as ibsim reports) that discovery fills from
//!   PortInfo.
//!
//! The crate deliberately does not depend on `ibsm-mad`: link width/speed and
//! node type carry their IBA encodings (`to_iba`) so the SMA simulator and
//! discovery can convert without a shared type.

pub mod gen;
pub mod lid;
pub mod multicast;
pub mod netfile;
pub mod path;
pub mod routing;
pub mod topology;

pub use gen::GenError;
pub use netfile::{NetFileError, NetFileErrorKind};
pub use topology::{
    mtu_bytes, Counts, LinkSpeed, LinkWidth, Node, NodeIdx, NodeType, Port, Rate, Topology,
    TopologyError,
};
