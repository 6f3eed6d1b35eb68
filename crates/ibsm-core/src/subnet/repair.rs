//! Repair after the fabric lost cables or nodes: only the routes that need it move.
//!
//! A fresh min-hop computation balances every switch's ports from scratch, so one
//! lost uplink shifts the rotation of every destination after it on many switches:
//! the sweep would rewrite most LFT blocks of the fabric although only the entries
//! whose route crossed the lost cable (or got longer) have to change. So when a
//! sweep's topology only *lost* cables or nodes since the last sweep (no cable or
//! node appeared, no LID assigned or moved) and the engine is min-hop, every entry a
//! switch holds is kept where it is still a shortest route in the new topology, and
//! only the others take the fresh computation's port. An entry at switch `s` for LID
//! `l` is still a shortest route when its port leads to a neighbour as many hops from
//! `l` as the neighbour the fresh tables chose (hop counts walked through the fresh
//! tables, which are min-hop). Every hop of the merged tables therefore still gets
//! one hop closer to its destination: the tables stay loop-free and min-hop, and
//! the blocks that go out are exactly those holding an entry that had to move.
//!
//! The price is balance: the ports that took over the moved routes carry a little
//! more. When cables or nodes come back, the sweep computes fresh balanced tables
//! and writes the blocks that differ; after a cable goes down and comes back, that
//! is the original balanced routing again, written in exactly the blocks the
//! repair changed. Up/down routing is always recomputed whole (keeping an entry
//! would also need its up/down legality checked).

use std::collections::HashMap;

use ibsm_fabric::routing::{ForwardingTables, UNREACHABLE};
use ibsm_fabric::{NodeIdx, Topology};

use super::config::RoutingEngine;
use super::inherit::links_of;
use super::manager::SubnetManager;
use super::sweep::Sweep;

/// Hop limit of a walk through the fresh tables (a fabric deeper than this has no
/// shortest route worth keeping).
const MAX_HOPS: u8 = 64;

impl SubnetManager {
    /// After routing: keep what the switches hold where it is still a shortest
    /// route, when this sweep only lost cables or nodes (see the module doc).
    pub(super) fn keep_unaffected_routes(&self, sweep: &mut Sweep) {
        if !matches!(self.cfg.routing, RoutingEngine::MinHop) || !sweep.lids_stable {
            return;
        }
        let Some(prev) = self.last.as_ref() else {
            return;
        };
        let now_links = links_of(&sweep.res.topology);
        let before = links_of(&prev.topology);
        if now_links.len() >= before.len() || !now_links.is_subset(&before) {
            return;
        }
        let kept = keep_shortest(
            &sweep.res.topology,
            &mut sweep.tables,
            &self.programmed.lfts,
        );
        tracing::info!(
            entries_kept = kept.kept,
            entries_moved = kept.moved,
            "cables or nodes lost: routes still shortest kept, only the others moved"
        );
    }
}

/// What [`keep_shortest`] did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct Kept {
    /// Entries where the held port differed from the fresh one and was kept.
    pub(super) kept: u64,
    /// Entries that differ from what the switch holds after the merge.
    pub(super) moved: u64,
}

/// Put back into `tables` (fresh min-hop tables for `topo`) every entry of `held`
/// (what each switch holds, by NodeGUID, with its LinearFDBTop) that is still a
/// shortest route in `topo`.
pub(super) fn keep_shortest(
    topo: &Topology,
    tables: &mut ForwardingTables,
    held: &HashMap<u64, (u16, std::sync::Arc<[u8]>)>,
) -> Kept {
    let mut out = Kept::default();
    let owner = lid_owners(topo);
    for i in 0..tables.lfts.len() {
        let Some(node) = topo.nodes().get(i) else {
            continue;
        };
        let Some((_, old)) = held.get(&node.node_guid) else {
            continue;
        };
        // The switch's own table is out while its entries are checked: a walk from
        // a neighbour on a shortest route never comes back through it (every hop
        // gets closer), and one that would is not kept anyway. Walking the tables
        // as merged so far gives the fresh tables' hop counts, since every entry
        // in them, kept or fresh, is a shortest route.
        let Some(mut lft) = tables.lfts.get_mut(i).and_then(Option::take) else {
            continue;
        };
        let s = NodeIdx(i as u32);
        for (lid, (e, &o)) in lft.iter_mut().zip(old.iter()).enumerate() {
            if *e == o {
                continue;
            }
            let Ok(lid) = u16::try_from(lid) else { break };
            let keep = o != 0
                && o != UNREACHABLE
                && *e != 0
                && *e != UNREACHABLE
                && match (topo.neighbor(s, o), topo.neighbor(s, *e)) {
                    (Some((t_old, _)), Some((t_new, _))) => {
                        let h_old = hops(topo, tables, &owner, t_old, lid);
                        h_old != u8::MAX && h_old == hops(topo, tables, &owner, t_new, lid)
                    }
                    _ => false,
                };
            if keep {
                *e = o;
                out.kept += 1;
            } else {
                out.moved += 1;
            }
        }
        if let Some(slot) = tables.lfts.get_mut(i) {
            *slot = Some(lft);
        }
    }
    out
}

/// LID -> the CA or router node whose port carries it (switch LIDs are found by
/// their port-0 entry instead).
fn lid_owners(topo: &Topology) -> HashMap<u16, NodeIdx> {
    let mut m = HashMap::new();
    for (idx, node) in topo.iter() {
        if node.is_switch() {
            continue;
        }
        for (_, p) in node.physical_ports() {
            if p.lid == 0 {
                continue;
            }
            let count = 1u16 << p.lmc.min(7);
            for l in p.lid..p.lid.saturating_add(count) {
                m.insert(l, idx);
            }
        }
    }
    m
}

/// Hops from `at` to `lid` walking `tables` (0 at the destination), `u8::MAX` when
/// the walk does not arrive.
fn hops(
    topo: &Topology,
    tables: &ForwardingTables,
    owner: &HashMap<u16, NodeIdx>,
    mut at: NodeIdx,
    lid: u16,
) -> u8 {
    for h in 0..MAX_HOPS {
        let Some(port) = tables.port(at, lid) else {
            // Not a switch: arrived only if this node carries the LID.
            return if owner.get(&lid) == Some(&at) {
                h
            } else {
                u8::MAX
            };
        };
        match port {
            0 => return h,
            UNREACHABLE => return u8::MAX,
            p => match topo.neighbor(at, p) {
                Some((next, _)) => at = next,
                None => return u8::MAX,
            },
        }
    }
    u8::MAX
}
