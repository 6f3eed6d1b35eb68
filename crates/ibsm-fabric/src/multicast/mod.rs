//! Multicast routing: one spanning tree over the switches per multicast group,
//! as the port masks of every switch's MulticastForwardingTable (MFT) entry for
//! the group's MLID, and the MFT block writes that program them.
//!
//! Pure and deterministic: the SA (ibsm-core) owns the groups and their members,
//! calls this on join, leave and topology change, and sends the writes.
//!
//! # The tree ([`McastFabric::tree`])
//!
//! * **Members** are end ports (a CA or router port, or a switch's port 0) with a
//!   [`JoinState`]. FullMember and NonMember ports receive; SendOnly ports only
//!   send. Every member sends, so the tree spans the switches of all members,
//!   but a port is *delivered to* (its bit set on its switch) only if it
//!   receives: a send-only HCA's cable never carries the group's packets back
//!   to it, and port 0 of a switch is set only when the switch itself is a
//!   receiving member. A member that cannot be placed (unknown GUID, link down,
//!   cabled to a CA, in another fabric component than the root) is left off
//!   and reported in [`McastTree::excluded`], never an error for the group.
//!   With no receiver the tree is empty (nothing would be delivered).
//! * **Root**: the switch that minimises, in order, the members it cannot
//!   reach, the maximum hop count to a member (a CA member counts its cable:
//!   OpenSM's `mcast_mgr_compute_max_hops`) and the total hop count over
//!   members; ties are broken by NodeGUID, taking the `spread % count`-th
//!   ([`TreeOptions::spread`]: 0 is the lowest GUID, OpenSM's choice; the
//!   MLID spreads groups over a fat tree's spines).
//! * **Shape**: every member switch climbs to the root through a neighbor one
//!   hop closer to it (lowest port first, or `spread % count` among parallel
//!   candidates), so each switch has one parent and the union of the climbs
//!   is a tree of shortest paths, i.e. loop-free; switches with no member
//!   below them are never on it.
//! * **Masks**: IBA switches forward a multicast packet to every port of the
//!   entry except the one it came in on, so a tree edge carries a direction
//!   only when needed: towards the parent when the subtree below has a member
//!   and some receiver is outside it, towards the child when the subtree has a
//!   receiver and some member is outside it. A branch of send-only members
//!   therefore forwards up but receives nothing.
//!
//! Root choice needs hop counts between every switch and every member switch,
//! so [`McastFabric`] computes all-pairs switch hops once per topology (the
//! routing engines' bit-parallel BFS, one byte per switch pair); a group then
//! costs O(switches x member switches) plus its tree, which keeps recomputing
//! one group on a join or leave cheap and all groups after a topology change
//! fast (`benches/multicast.rs`).
//!
//! # MFT blocks ([`MftSet`], [`changed_blocks`])
//!
//! [`MftSet`] is the desired MFT of every switch (by NodeGUID, which survives
//! rediscovery) for every group, updated one MLID at a time;
//! [`changed_blocks`] lists the (switch, block, position) SubnSets whose 32
//! PortMasks differ between two sets, including blocks that became zero when
//! a group was deleted, and [`MftSet::writes`] everything for a switch whose
//! MFT is unknown. Layout (IBA 14.2.5.12, see [`mft_block`]):
//! MLIDs from 0xC000, 32 per block, 16 ports per position.

mod mask;
mod member;
mod mft;
mod tree;

pub use mask::PortMask;
pub use member::{EndPort, Excluded, JoinState, McastError, McastMember, MemberIssue};
pub use mft::{
    changed_blocks, mft_block, mft_positions, MftSet, MftWrite, SwitchMft, MFT_BLOCK_MLIDS,
    MFT_POSITION_PORTS, MLID_BASE, MLID_LAST,
};
pub use tree::{McastFabric, McastTree, TreeOptions};

#[cfg(test)]
mod tests;
