//! What a new master inherits: the replicated state read from the local replica and
//! handed to the SM node ([`replicated_fabric`], [`inherited_of`]).

use std::collections::{BTreeMap, HashSet};

use ibsm_core::node::ReplicatedFabric;
use ibsm_core::subnet::PortDigest as CorePortDigest;
use ibsm_core::subnet::{Inherited, Link};
use ibsm_replica::{FabricState, LftDigest, LidRange, PortDigest, TopologySummary};

use super::handle::Replication;
use super::keys::partitions_in;
use super::sa::core_tables;

/// The replicated state as the SM node inherits it ([`ibsm_core::node::ReplicatedFabric`]): LIDs as
/// OpenSM's guid2lid text, LFT digests and cabling, the fabric's M_Key and the
/// replicated partitions, read from the local replica now.
pub fn replicated_fabric(r: &Replication) -> ReplicatedFabric {
    r.replica.with_state(|s| replicated_fabric_of(s, &mut None))
}

/// The parts of a [`ReplicatedFabric`] that cost most to build (the guid2lid text and
/// the cabling as a set), with the replica state they were built from: kept by a driver
/// between two applied entries and reused by [`replicated_fabric_cached`] while that
/// state is unchanged. Most entries change none of it (an SA write, a roster change),
/// and a k=16 fat tree's guid2lid text and cabling cost far more to rebuild than to
/// compare.
#[derive(Debug, Clone)]
pub struct ReplicatedCache {
    guid2lid: BTreeMap<u64, LidRange>,
    topology: Option<TopologySummary>,
    lft_digests: BTreeMap<u64, LftDigest>,
    lft_stamps: BTreeMap<u64, u8>,
    port_digests: BTreeMap<u64, BTreeMap<u8, PortDigest>>,
    guid2lid_file: String,
    inherited: Inherited,
}

/// [`replicated_fabric`], reusing `cache` (and refreshing it when its sources changed).
pub fn replicated_fabric_cached(
    r: &Replication,
    cache: &mut Option<ReplicatedCache>,
) -> ReplicatedFabric {
    r.replica.with_state(|s| replicated_fabric_of(s, cache))
}

/// The [`ReplicatedFabric`] of replica state `s`, the costly parts from `cache` when
/// their sources are the same, else built (and cached).
fn replicated_fabric_of(s: &FabricState, cache: &mut Option<ReplicatedCache>) -> ReplicatedFabric {
    let fresh = cache.as_ref().is_some_and(|c| {
        c.guid2lid == s.guid2lid
            && c.topology == s.topology
            && c.lft_digests == s.lft_digests
            && c.lft_stamps == s.lft_stamps
            && c.port_digests == s.port_digests
    });
    if !fresh {
        *cache = Some(ReplicatedCache {
            guid2lid: s.guid2lid.clone(),
            topology: s.topology.clone(),
            lft_digests: s.lft_digests.clone(),
            lft_stamps: s.lft_stamps.clone(),
            port_digests: s.port_digests.clone(),
            guid2lid_file: s.guid2lid_file(),
            inherited: inherited_of(s),
        });
    }
    let (guid2lid_file, inherited) = match cache {
        Some(c) => (c.guid2lid_file.clone(), c.inherited.clone()),
        None => (s.guid2lid_file(), inherited_of(s)),
    };
    ReplicatedFabric {
        epoch: s.epoch,
        master_guid: s.master_guid,
        guid2lid_file,
        guid2lid_ports: s.guid2lid.len(),
        inherited,
        m_key: s.m_key,
        partitions: partitions_in(s),
        sa: core_tables(s),
    }
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
        port_digests: state
            .port_digests
            .iter()
            .flat_map(|(g, ports)| {
                ports.iter().map(move |(p, d)| {
                    (
                        (*g, *p),
                        CorePortDigest {
                            p_key: d.p_key,
                            qos: d.qos,
                        },
                    )
                })
            })
            .collect(),
        lft_stamps: state
            .lft_stamps
            .iter()
            .filter(|(g, _)| state.lft_digests.contains_key(g))
            .map(|(g, s)| (*g, *s))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use ibsm_replica::{SaTable, TopoLink};

    use super::*;

    fn state() -> FabricState {
        let mut s = FabricState {
            epoch: 3,
            topology: Some(TopologySummary {
                sweep: 1,
                nodes: Vec::new(),
                links: vec![TopoLink {
                    node_guid_a: 0x20,
                    port_a: 1,
                    node_guid_b: 0x10,
                    port_b: 2,
                }],
            }),
            ..FabricState::default()
        };
        for g in 1..=4u64 {
            let lid = g as u16;
            s.guid2lid.insert(
                g,
                LidRange {
                    min_lid: lid,
                    max_lid: lid,
                },
            );
        }
        s.lft_digests.insert(
            0x20,
            LftDigest {
                lft_top: 4,
                digest: 7,
            },
        );
        s
    }

    /// The cached build is the uncached one, whatever changed in between: the parts it
    /// keeps are rebuilt when their sources change and only then.
    #[test]
    fn the_cached_fabric_is_always_the_fresh_one() {
        let mut s = state();
        let mut cache = None;
        assert_eq!(
            replicated_fabric_of(&s, &mut cache),
            replicated_fabric_of(&s, &mut None)
        );
        assert!(cache.is_some());

        // An SA write: the costly parts are reused, the SA tables are the new ones.
        s.sa.entry(SaTable::McGroups)
            .or_default()
            .insert(vec![0xFF; 16], vec![1, 2, 3]);
        s.epoch = 4;
        let got = replicated_fabric_of(&s, &mut cache);
        assert_eq!(got, replicated_fabric_of(&s, &mut None));
        assert_eq!(got.sa.len(), 1);

        // A LID, a cable and an LFT change: each is seen.
        s.guid2lid.insert(
            9,
            LidRange {
                min_lid: 9,
                max_lid: 9,
            },
        );
        let got = replicated_fabric_of(&s, &mut cache);
        assert_eq!(got, replicated_fabric_of(&s, &mut None));
        assert!(got.guid2lid_file.contains("0x0000000000000009 9 9"));
        if let Some(t) = s.topology.as_mut() {
            t.links.clear();
        }
        let got = replicated_fabric_of(&s, &mut cache);
        assert_eq!(got, replicated_fabric_of(&s, &mut None));
        assert_eq!(got.inherited.links.map(|l| l.len()), Some(0));
        s.lft_digests.clear();
        let got = replicated_fabric_of(&s, &mut cache);
        assert_eq!(got, replicated_fabric_of(&s, &mut None));
        assert!(got.inherited.lft_digests.is_empty());
        // A port digest written: the successor sees it, by (node GUID, port).
        let d = PortDigest {
            p_key: Some(5),
            qos: None,
        };
        s.port_digests.entry(0x20).or_default().insert(3, d);
        let got = replicated_fabric_of(&s, &mut cache);
        assert_eq!(got, replicated_fabric_of(&s, &mut None));
        assert_eq!(
            got.inherited.port_digests.get(&(0x20, 3)),
            Some(&CorePortDigest {
                p_key: Some(5),
                qos: None
            })
        );
    }
}
