//! Directed-route discovery: a sans-IO breadth-first walk of the fabric.
//!
//! [`Discovery`] is a pure state machine: it hands out requests
//! ([`Discovery::poll_request`]) and consumes their outcomes
//! ([`Discovery::handle_response`], [`Discovery::handle_failure`]). It knows
//! nothing about TIDs, windows or time; [`DiscoveryAgent`] couples it to a
//! [`Transactions`](crate::transactions::Transactions) agent for the common case, and an SM that multiplexes
//! several activities over one MAD agent can do the same with its own token
//! type.
//!
//! The walk, starting at the port the SM is attached to (0 hops):
//!
//! 1. SubnGet(NodeInfo) by directed route. A NodeGUID seen before is the same
//!    node reached over another cable: the cable is recorded (at both ends) and
//!    the walk does not go further through it.
//! 2. For a new node: SubnGet(NodeDescription); for a switch SubnGet(SwitchInfo)
//!    and SubnGet(PortInfo) of every port 0..=NumPorts; for a CA or router
//!    SubnGet(PortInfo) of the port we came in on.
//! 3. For every switch port (and the SM's own CA port) whose PortInfo says the
//!    link is up (PortState >= Init or PortPhysicalState = LinkUp) and whose far
//!    end is not known yet: SubnGet(NodeInfo) along path + port. SMPs are not
//!    forwarded through CAs, so CAs other than our own are leaves.
//!
//! A NodeInfo that fails after the agent's retries makes the far end
//! *unreachable*: it is recorded in [`DiscoveryResult::unreachable`] and the walk
//! goes on without it, so one dead node never stalls a sweep. Other failed or
//! rejected requests are recorded as [`DiscoveryIssue`]s.
//!
//! # Duplicate GUIDs
//!
//! The walk identifies nodes by NodeGUID, so a second device answering with a
//! GUID already seen (a cloned or misprogrammed adapter, a net file giving two
//! nodes one GUID) would otherwise be folded into the first. A NodeInfo whose
//! NodeGUID is known is the *same* node only if it is consistent with one of
//! the nodes recorded under that GUID (the first, or copies placed earlier):
//! same NodeType and NumPorts, the same PortGUID (a switch's port 0; a CA's
//! port if it is known), and an entry port (LocalPortNum) that is either not
//! cabled yet or cabled to exactly the port the request left through (the
//! same cable seen from the other side). One physical port has one cable, so
//! an entry port already cabled elsewhere can only be another device. Such a
//! NodeInfo is a *duplicate NodeGUID*; a NodeInfo with a new NodeGUID whose
//! PortGUID another node already has is a *duplicate PortGUID*. Either way the
//! newcomer is placed in the topology as a node of its own
//! ([`Topology::add_duplicate_node`](ibsm_fabric::Topology::add_duplicate_node)) and walked like any other (what is behind
//! it is real), and the pair is reported in [`DiscoveryResult::duplicates`];
//! the LID manager then decides which of them keeps the LID
//! ([`ibsm_fabric::lid`]). A copy is only created when no recorded node
//! matches, so the walk stays bounded. What this cannot see: a duplicate that
//! looks exactly like a not-yet-cabled port of the first (same type, ports
//! and GUIDs, entering on a port of the first that has no cable yet) is
//! indistinguishable by NodeInfo and is taken for that port; a cable moved
//! during the sweep can look like a duplicate for one sweep.
//!
//! # Topology cap
//!
//! [`DiscoveryConfig::max_nodes`] and [`DiscoveryConfig::max_ports`] bound
//! what one walk records, so a fabric far larger than planned (or a walk
//! confused by duplicates) cannot exhaust the SM's memory: past the cap new
//! nodes are refused, the walk goes on only among known nodes, and
//! [`DiscoveryResult::cap`] says which limit stopped it and how many nodes were
//! refused.
//!
//! Every node keeps the directed route it was first reached on (replaced by a
//! shorter one if one shows up), which later programming of the node uses.
//! Requests are produced lazily (a token carries a path, not an encoded SMP),
//! so the backlog of a 50k-node fabric stays small.
//!
//! # Files
//!
//! The types a caller sees are leaves that the state machine and its steps import:
//! `limits` (the configuration and the topology cap), `token` (what a request asks
//! for), `result` (what a walk reports). `machine` is [`Discovery`] itself: its state
//! and the request/outcome interface; `walk` is what each answer records and which
//! requests it causes; `duplicates` tells a node reached again from another device
//! answering with its GUID; `agent` is [`DiscoveryAgent`].

mod agent;
mod duplicates;
mod limits;
mod machine;
mod result;
#[cfg(test)]
mod tests;
mod token;
mod walk;

pub use agent::DiscoveryAgent;
pub use limits::{CapLimit, DiscoveryConfig, TopologyCap, DEFAULT_MAX_NODES, DEFAULT_MAX_PORTS};
pub use machine::Discovery;
pub use result::{DiscoveryIssue, DiscoveryResult, DuplicateGuid, DuplicateKind, Unreachable};
pub use token::DiscoveryToken;
