//! What a new master inherits: the replicated state read from the local replica and
//! handed to the SM node ([`replicated_fabric`], [`inherited_of`]).

use std::collections::HashSet;

use ibsm_core::node::ReplicatedFabric;
use ibsm_core::subnet::{Inherited, Link};
use ibsm_replica::FabricState;

use super::handle::Replication;
use super::keys::partitions_in;
use super::sa::core_tables;

/// The replicated state as the SM node inherits it ([`ibsm_core::node::ReplicatedFabric`]): LIDs as
/// OpenSM's guid2lid text, LFT digests and cabling, the fabric's M_Key and the
/// replicated partitions, read from the local replica now.
pub fn replicated_fabric(r: &Replication) -> ReplicatedFabric {
    r.replica.with_state(|s| ReplicatedFabric {
        epoch: s.epoch,
        guid2lid_file: s.guid2lid_file(),
        guid2lid_ports: s.guid2lid.len(),
        inherited: inherited_of(s),
        m_key: s.m_key,
        partitions: partitions_in(s),
        sa: core_tables(s),
    })
}

/// The core's view of what the previous master left.
pub fn inherited_of(state: &FabricState) -> Inherited {
    Inherited {
        lft_digests: state
            .lft_digests
            .iter()
            .map(|(g, d)| (*g, (d.lft_top, d.digest)))
            .collect(),
        links: state.topology.as_ref().map(|t| {
            t.links
                .iter()
                .map(|l| {
                    let (a, b) = ((l.node_guid_a, l.port_a), (l.node_guid_b, l.port_b));
                    let (x, y) = if a < b { (a, b) } else { (b, a) };
                    (x.0, x.1, y.0, y.1)
                })
                .collect::<HashSet<Link>>()
        }),
    }
}
