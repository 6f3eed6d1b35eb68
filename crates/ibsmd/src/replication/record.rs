//! What a master replicates about its fabric: the [`FabricRecord`] built after a heavy
//! sweep ([`record_of`], [`roster_of`]) and the ops that turn the replicated state into
//! it ([`diff_ops`]), which is all the writer sends.

use std::collections::BTreeMap;

use super::sa::{sa_ops, ReplicaSaTables};
use ibsm_core::election::SmState;
use ibsm_core::subnet::{lft_digest, links_of, Membership, SubnetManager};
use ibsm_replica::{
    FabricState, LftDigest, LidRange, Op, PortDigest, TopoLink, TopoNode, TopologySummary,
};

/// What a master publishes after a sweep: the whole desired replicated record.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FabricRecord {
    /// Port GUID -> LIDs as programmed.
    pub guid2lid: BTreeMap<u64, LidRange>,
    /// The discovered topology.
    pub topology: Option<TopologySummary>,
    /// Switch node GUID -> digest of the LFT it holds.
    pub lft_digests: BTreeMap<u64, LftDigest>,
    /// Switch node GUID -> the LFT stamp that digest was closed with.
    pub lft_stamps: BTreeMap<u64, u8>,
    /// Node GUID -> port -> what the master programmed into that port's P_Key,
    /// SLtoVL and VLArbitration tables (`ibsm_core::subnet::PortDigest`).
    pub port_digests: BTreeMap<u64, BTreeMap<u8, PortDigest>>,
    /// The M_Key the sweep programmed (None: leave the replicated one alone).
    pub m_key: Option<u64>,
    /// The partitions the sweep programmed (start-up plus replicated requests), by
    /// P_Key; None: leave the replicated ones alone.
    pub partitions: Option<BTreeMap<u16, ibsm_replica::Partition>>,
    /// The SM ports the master knows (itself included) with their last SMInfo; None:
    /// leave the replicated roster alone.
    pub sm_roster: Option<BTreeMap<u64, ibsm_replica::SmRosterEntry>>,
    /// The SA's tables (groups, members, services, subscriptions); None: leave the
    /// replicated ones alone.
    pub sa: Option<ReplicaSaTables>,
}

impl FabricRecord {
    /// Whether the record carries the SA's tables and nothing else (what
    /// `Replication::publish_sa` publishes between sweeps).
    pub fn is_sa_only(&self) -> bool {
        self.sa.is_some()
            && self.guid2lid.is_empty()
            && self.topology.is_none()
            && self.lft_digests.is_empty()
            && self.lft_stamps.is_empty()
            && self.port_digests.is_empty()
            && self.m_key.is_none()
            && self.partitions.is_none()
            && self.sm_roster.is_none()
    }
}

/// The ops that turn `have` into `want` (sets only: a port GUID stays remembered after
/// its port leaves, like OpenSM's guid2lid; a digest is replaced, never dropped).
pub fn diff_ops(have: &FabricState, want: &FabricRecord) -> Vec<Op> {
    let mut ops = Vec::new();
    for (g, r) in &want.guid2lid {
        if have.guid2lid.get(g) != Some(r) {
            ops.push(Op::SetGuid2Lid {
                port_guid: *g,
                range: *r,
            });
        }
    }
    if let Some(t) = &want.topology {
        // The sweep counter alone does not make a new topology.
        let same = have
            .topology
            .as_ref()
            .is_some_and(|h| h.nodes == t.nodes && h.links == t.links);
        if !same {
            ops.push(Op::SetTopology(t.clone()));
        }
    }
    for (g, d) in &want.lft_digests {
        let digest_moved = have.lft_digests.get(g) != Some(d);
        if digest_moved {
            ops.push(Op::SetLftDigest {
                switch_guid: *g,
                digest: *d,
            });
        }
        // After its digest (whose apply clears it): the stamp the switch was closed
        // with, the proof a standby's earlier read of it still stands.
        if let Some(s) = want.lft_stamps.get(g) {
            if digest_moved || have.lft_stamps.get(g) != Some(s) {
                ops.push(Op::SetLftStamp {
                    switch_guid: *g,
                    stamp: *s,
                });
            }
        }
    }
    // One op per port whose digest changed: after the first sweep of a mastership
    // (or a takeover that seeded them all) a sweep writes only the ports it reprogrammed.
    for (node_guid, ports) in &want.port_digests {
        let had = have.port_digests.get(node_guid);
        for (port, digest) in ports {
            if had.and_then(|h| h.get(port)) != Some(digest) {
                ops.push(Op::SetPortDigest {
                    node_guid: *node_guid,
                    port: *port,
                    digest: *digest,
                });
            }
        }
    }
    if let Some(k) = want.m_key.filter(|k| *k != have.m_key) {
        ops.push(Op::SetMKey { m_key: k });
    }
    if let Some(parts) = &want.partitions {
        for (k, p) in parts {
            if have.partitions.get(k) != Some(p) {
                ops.push(Op::SetPartition(p.clone()));
            }
        }
        for k in have.partitions.keys().filter(|k| !parts.contains_key(k)) {
            ops.push(Op::RemovePartition { p_key: *k });
        }
    }
    if let Some(roster) = &want.sm_roster {
        // ActCount moves all the time: an entry is rewritten when its priority or
        // state changed, not for its ActCount alone.
        for (g, e) in roster {
            let same = have
                .sm_roster
                .get(g)
                .is_some_and(|h| h.priority == e.priority && h.sm_state == e.sm_state);
            if !same {
                ops.push(Op::SetSm(*e));
            }
        }
        for g in have.sm_roster.keys().filter(|g| !roster.contains_key(g)) {
            ops.push(Op::RemoveSm { guid: *g });
        }
    }
    if let Some(sa) = &want.sa {
        sa_ops(have, sa, &mut ops);
    }
    ops
}

/// What a master publishes after a heavy sweep: LIDs as programmed (switches: port
/// 0; CAs and routers: every port with a LID, 2^LMC of them), the cabling, the
/// digest of every LFT it programmed or verified, and of every port's P_Key, SLtoVL
/// and VLArbitration tables it programmed (or took as programmed at a takeover).
pub fn record_of(subnet: &SubnetManager) -> FabricRecord {
    let mut rec = FabricRecord::default();
    let Some(res) = subnet.last_discovery() else {
        return rec;
    };
    // Published after a heavy sweep, which wrote the configured key into every
    // PortInfo it reached.
    rec.m_key = Some(subnet.m_key().key);
    let t = &res.topology;
    let mut nodes = Vec::new();
    for (_, node) in t.iter() {
        nodes.push(TopoNode {
            node_guid: node.node_guid,
            node_type: match node.node_type {
                ibsm_fabric::NodeType::Ca => 1,
                ibsm_fabric::NodeType::Switch => 2,
                ibsm_fabric::NodeType::Router => 3,
            },
            num_ports: u8::try_from(node.ports.len().saturating_sub(1)).unwrap_or(u8::MAX),
            description: node.description.clone(),
        });
        let ports: Vec<&ibsm_fabric::Port> = if node.is_switch() {
            node.port(0).into_iter().collect()
        } else {
            node.physical_ports().map(|(_, p)| p).collect()
        };
        for p in ports {
            if p.lid == 0 || p.port_guid == 0 {
                continue;
            }
            let max_lid = p
                .lid
                .saturating_add((1u16 << p.lmc.min(7)) - 1)
                .min(ibsm_replica::MAX_UNICAST_LID);
            rec.guid2lid.insert(
                p.port_guid,
                LidRange {
                    min_lid: p.lid,
                    max_lid,
                },
            );
        }
    }
    nodes.sort_by_key(|n| n.node_guid);
    let mut links: Vec<TopoLink> = links_of(t)
        .into_iter()
        .map(|(a, pa, b, pb)| TopoLink {
            node_guid_a: a,
            port_a: pa,
            node_guid_b: b,
            port_b: pb,
        })
        .collect();
    links.sort_by_key(|l| (l.node_guid_a, l.port_a, l.node_guid_b, l.port_b));
    rec.topology = Some(TopologySummary {
        sweep: subnet.metrics().heavy_sweeps,
        nodes,
        links,
    });
    for (guid, top, table) in subnet.programmed_lfts() {
        rec.lft_digests.insert(
            guid,
            LftDigest {
                lft_top: top,
                digest: lft_digest(table),
            },
        );
    }
    rec.lft_stamps = subnet.programmed_lft_stamps().collect();
    for ((guid, port), d) in subnet.programmed_port_digests() {
        rec.port_digests.entry(guid).or_default().insert(
            port,
            PortDigest {
                p_key: d.p_key,
                qos: d.qos,
            },
        );
    }
    rec.partitions = Some(
        subnet
            .sweep_partitions()
            .iter()
            .map(|p| {
                let members = p
                    .members
                    .iter()
                    .map(|m| ibsm_replica::PartitionMember {
                        port_guid: m.port_guid,
                        full: m.membership == Membership::Full,
                    })
                    .collect();
                (
                    p.p_key,
                    ibsm_replica::Partition {
                        p_key: p.p_key,
                        name: p.name.clone(),
                        members,
                    },
                )
            })
            .collect(),
    );
    rec
}

/// The roster a master replicates: every SM port it knows, itself included, with the
/// SMInfo it last read (an SM that never answered is left out: no state to record).
pub fn roster_of(sms: &[ibsm_core::node::PeerView]) -> BTreeMap<u64, ibsm_replica::SmRosterEntry> {
    sms.iter()
        .filter_map(|p| {
            let sm_state = match p.state? {
                SmState::NotActive => ibsm_replica::SmState::NotActive,
                SmState::Discovering => ibsm_replica::SmState::Discovering,
                SmState::Standby => ibsm_replica::SmState::Standby,
                SmState::Master => ibsm_replica::SmState::Master,
            };
            Some((
                p.guid,
                ibsm_replica::SmRosterEntry {
                    guid: p.guid,
                    priority: p.priority,
                    sm_state,
                    act_count: p.act_count,
                },
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only a record of SA tables alone may be held back by the writer
    /// (`SA_WRITE_INTERVAL`); a sweep's record, which also carries the SA, never is.
    #[test]
    fn only_a_record_of_sa_tables_alone_is_sa_only() {
        let sa = FabricRecord {
            sa: Some(ReplicaSaTables::new()),
            ..FabricRecord::default()
        };
        assert!(sa.is_sa_only());
        assert!(!FabricRecord::default().is_sa_only());
        let mut sweep = sa.clone();
        sweep.guid2lid.insert(
            1,
            LidRange {
                min_lid: 1,
                max_lid: 1,
            },
        );
        assert!(!sweep.is_sa_only());
        let mut roster = sa;
        roster.sm_roster = Some(BTreeMap::new());
        assert!(!roster.is_sa_only());
    }

    /// A port digest is written when it changed and only then: a sweep that
    /// reprogrammed one port writes one op, a takeover that seeded every port none.
    #[test]
    fn only_changed_port_digests_are_written() {
        let d = |k| PortDigest {
            p_key: Some(k),
            qos: Some(1),
        };
        let mut have = FabricState::default();
        have.port_digests
            .entry(0x10)
            .or_default()
            .extend([(1, d(1)), (2, d(2))]);
        let mut want = FabricRecord {
            port_digests: have.port_digests.clone(),
            ..FabricRecord::default()
        };
        assert!(diff_ops(&have, &want).is_empty());
        want.port_digests.entry(0x10).or_default().insert(2, d(3));
        want.port_digests.entry(0x20).or_default().insert(0, d(4));
        let ops = diff_ops(&have, &want);
        assert_eq!(
            ops,
            vec![
                Op::SetPortDigest {
                    node_guid: 0x10,
                    port: 2,
                    digest: d(3)
                },
                Op::SetPortDigest {
                    node_guid: 0x20,
                    port: 0,
                    digest: d(4)
                },
            ]
        );
        for op in &ops {
            have.apply_op(op);
        }
        assert!(diff_ops(&have, &want).is_empty());
        assert!(!want.is_sa_only());
    }

    /// Drive `sm` as master on `sim` (its port `client`) until its next heavy
    /// sweep is done.
    fn heavy_sweep(
        sim: &mut ibsm_sim::Sim,
        client: ibsm_sim::ClientId,
        sm: &mut SubnetManager,
        now: &mut std::time::Duration,
    ) {
        use ibsm_core::subnet::{SubnetEvent, SweepKind};
        for _ in 0..1_000_000 {
            let mut busy = false;
            while let Some(o) = sm.poll_transmit() {
                busy = true;
                let r = match o.dlid {
                    None => sim.send(*now, client, &o.mad),
                    Some(l) => sim.send_to(*now, client, l, &o.mad),
                };
                r.expect("well-formed MAD");
            }
            while let Some((c, mad)) = sim.poll_delivery(*now) {
                busy = true;
                if c == client {
                    sm.handle_incoming(*now, &mad);
                }
            }
            while let Some(ev) = sm.poll_event() {
                if let SubnetEvent::SweepDone {
                    kind: SweepKind::Heavy,
                    ..
                } = ev
                {
                    return;
                }
            }
            if !busy {
                let next = [sm.poll_timeout(), sim.poll_timeout()]
                    .into_iter()
                    .flatten()
                    .min()
                    .expect("something pending");
                *now = next.max(*now);
                sm.handle_timeout(*now);
            }
        }
        panic!("no heavy sweep completed");
    }

    /// After a master's sweep, the record carries every switch's LFT digest and
    /// the stamp the master closed it with, which is the one the switch holds in
    /// LID 0's entry; the stamp op follows its digest's.
    #[test]
    fn the_record_carries_the_stamp_each_switch_was_closed_with() {
        let topo = ibsm_fabric::gen::fat_tree_2level(4).expect("topology");
        let mut sim = ibsm_sim::Sim::new(&topo, ibsm_sim::SimConfig::default());
        let ca = topo
            .iter()
            .find(|(_, n)| !n.is_switch())
            .map(|(i, _)| i)
            .expect("a CA");
        let client = sim.attach(ca, 1).expect("attach");
        sim.set_is_sm(client, true).expect("IsSM");
        let mut sm = SubnetManager::new(ibsm_core::subnet::SubnetConfig::default()).expect("cfg");
        let mut now = std::time::Duration::ZERO;
        sm.become_master(now);
        heavy_sweep(&mut sim, client, &mut sm, &mut now);
        let rec = record_of(&sm);
        let switches: Vec<_> = topo.iter().filter(|(_, n)| n.is_switch()).collect();
        assert_eq!(rec.lft_digests.len(), switches.len());
        assert_eq!(rec.lft_stamps.len(), switches.len());
        for (idx, node) in &switches {
            let stamp = rec.lft_stamps[&node.node_guid];
            assert!(stamp < 254 && stamp.is_multiple_of(2), "{stamp}");
            assert_eq!(sim.lft_entry(*idx, 0), Some(stamp));
        }
        let ops = diff_ops(&FabricState::default(), &rec);
        for (_, node) in &switches {
            let at = |want: fn(&Op, u64) -> bool| {
                ops.iter()
                    .position(|o| want(o, node.node_guid))
                    .expect("op written")
            };
            let digest =
                at(|o, g| matches!(o, Op::SetLftDigest { switch_guid, .. } if *switch_guid == g));
            let stamp =
                at(|o, g| matches!(o, Op::SetLftStamp { switch_guid, .. } if *switch_guid == g));
            assert!(digest < stamp);
        }
    }

    #[test]
    fn the_programmed_partitions_and_the_sm_roster_are_replicated_and_pruned() {
        let entry = |guid, priority, sm_state| ibsm_replica::SmRosterEntry {
            guid,
            priority,
            sm_state,
            act_count: 7,
        };
        let part = |p_key| ibsm_replica::Partition {
            p_key,
            name: format!("p{p_key:x}"),
            members: vec![ibsm_replica::PartitionMember {
                port_guid: 9,
                full: true,
            }],
        };
        let mut have = FabricState::default();
        have.partitions.insert(0x7fff, part(0x7fff));
        have.partitions.insert(0x10, part(0x10));
        have.sm_roster
            .insert(1, entry(1, 10, ibsm_replica::SmState::Master));
        have.sm_roster
            .insert(3, entry(3, 5, ibsm_replica::SmState::Standby));
        let want = FabricRecord {
            partitions: Some([(0x7fff, part(0x7fff)), (0x20, part(0x20))].into()),
            sm_roster: Some(
                [
                    // Only the ActCount moved: not rewritten.
                    (
                        1,
                        ibsm_replica::SmRosterEntry {
                            act_count: 99,
                            ..entry(1, 10, ibsm_replica::SmState::Master)
                        },
                    ),
                    (2, entry(2, 8, ibsm_replica::SmState::Standby)),
                ]
                .into(),
            ),
            ..FabricRecord::default()
        };
        let ops = diff_ops(&have, &want);
        assert_eq!(
            ops,
            vec![
                Op::SetPartition(part(0x20)),
                Op::RemovePartition { p_key: 0x10 },
                Op::SetSm(entry(2, 8, ibsm_replica::SmState::Standby)),
                Op::RemoveSm { guid: 3 },
            ]
        );
        for op in &ops {
            have.apply_op(op);
        }
        assert!(
            diff_ops(&have, &want).is_empty(),
            "applied: nothing left to write"
        );
        // A record that says nothing about them leaves them alone.
        assert!(diff_ops(&have, &FabricRecord::default()).is_empty());
    }
}
