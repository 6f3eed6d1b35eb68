//! The IPoIB broadcast groups the SM creates (RFC 4391's IPv4 broadcast group of a
//! partition, as OpenSM makes them from partitions.conf's `ipoib` flag): the default
//! partition's always, at MLID 0xC000, and one for every configured partition with
//! [`crate::subnet::PartitionIpoib`] parameters. [`sync_ipoib_groups`] brings the
//! groups in line with the partitions: a partition's group is created when the
//! partition gets `ipoib` (at start or at run time), and when the partition goes (or
//! loses `ipoib`) its group is deleted if it has no full member, else it becomes an
//! ordinary group that goes with its last full member, so no member loses its group
//! under it.

use std::collections::{BTreeMap, BTreeSet};

use ibsm_mad::sa::{Gid, JoinState, McMemberRecord, Selector};

use super::groups::{gid_text, McGroup, McGroups, MLID_FIRST};
use crate::subnet::PartitionIpoib;

/// The IPoIB IPv4 broadcast MGID of a partition, `ff1S:401b:PKEY::ffff:ffff` (S the
/// scope), as RFC 4391 and OpenSM name it.
pub fn ipoib_broadcast_mgid(p_key: u16, scope: u8) -> Gid {
    let mut g = [0u8; 16];
    g[0] = 0xFF;
    g[1] = 0x10 | (scope & 0x0F);
    g[2] = 0x40;
    g[3] = 0x1B;
    g[4..6].copy_from_slice(&(p_key | 0x8000).to_be_bytes());
    g[12..16].copy_from_slice(&[0xFF; 4]);
    g
}

/// Q_Key of IPoIB broadcast groups (OpenSM's default, 0x0B1B).
pub const IPOIB_Q_KEY: u32 = 0x0B1B;

/// The parameters of an IPoIB broadcast group the SM creates for a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpoibGroup {
    /// The partition's P_Key (the full-member form is used).
    pub p_key: u16,
    /// Rate code (PathRecord.Rate; 3 = 10 Gb/s, OpenSM's default).
    pub rate: u8,
    /// MTU code (4 = 2048 bytes, OpenSM's default).
    pub mtu: u8,
    /// SL.
    pub sl: u8,
    /// Scope (2: link-local).
    pub scope: u8,
    /// Q_Key.
    pub q_key: u32,
    /// PacketLifeTime (OpenSM: the subnet timeout, 18).
    pub packet_life_time: u8,
}

impl IpoibGroup {
    /// OpenSM's defaults for a partition: 10 Gb/s, 2048 bytes, SL 0, link-local,
    /// Q_Key 0x0B1B.
    pub fn defaults(p_key: u16) -> IpoibGroup {
        IpoibGroup {
            p_key,
            rate: 3,
            mtu: 4,
            sl: 0,
            scope: 2,
            q_key: IPOIB_Q_KEY,
            packet_life_time: 0x12,
        }
    }

    /// The group, well known (kept with no member), at `mlid`.
    pub fn group(&self, mlid: u16) -> McGroup {
        McGroup {
            params: McMemberRecord {
                mgid: ipoib_broadcast_mgid(self.p_key, self.scope),
                port_gid: [0; 16],
                q_key: self.q_key,
                mlid,
                mtu_selector: Selector::Exactly,
                mtu: self.mtu,
                tclass: 0,
                p_key: self.p_key | 0x8000,
                rate_selector: Selector::Exactly,
                rate: self.rate,
                packet_life_time_selector: Selector::Exactly,
                packet_life_time: self.packet_life_time,
                sl: self.sl,
                flow_label: 0,
                // Link-local needs no router hop (OpenSM: 0, else the maximum).
                hop_limit: if self.scope == 2 { 0 } else { 0xFF },
                scope: self.scope,
                join_state: JoinState(0),
                proxy_join: false,
            },
            members: BTreeMap::new(),
            well_known: true,
        }
    }
}

/// The groups an SA starts with: the default partition's IPoIB broadcast group at
/// MLID 0xC000, as OpenSM creates it.
pub fn default_groups() -> Vec<McGroup> {
    vec![IpoibGroup::defaults(0xFFFF).group(MLID_FIRST)]
}

impl IpoibGroup {
    /// The group a partition's `ipoib` settings describe (`p_key` its 15-bit P_Key).
    pub fn of_partition(p_key: u16, ipoib: &PartitionIpoib, packet_life_time: u8) -> IpoibGroup {
        IpoibGroup {
            p_key: p_key | 0x8000,
            rate: ipoib.rate,
            mtu: ipoib.mtu,
            sl: ipoib.sl,
            scope: ipoib.scope,
            q_key: ipoib.q_key,
            packet_life_time,
        }
    }
}

/// An IPv4 IPoIB broadcast MGID (`ff1x:401b:<P_Key>::ffff:ffff`), any scope.
pub fn is_ipoib_broadcast(mgid: &Gid) -> bool {
    mgid[0] == 0xFF
        && mgid[1] & 0xF0 == 0x10
        && mgid[2..4] == [0x40, 0x1B]
        && mgid[6..12] == [0; 6]
        && mgid[12..16] == [0xFF; 4]
}

/// Bring the SM's IPoIB broadcast groups in line with `want` (see the module doc):
/// a missing group is created at the lowest free MLID; an existing one is kept at
/// its MLID, and takes the wanted parameters only while it has no member (members
/// joined with the old ones, so changing them under a member would break it: it is
/// logged and takes effect once the group is empty or recreated); an SM-made
/// broadcast group no longer wanted stops being well known. Changes go to
/// [`McGroups::take_changes`] like any join's.
pub fn sync_ipoib_groups(groups: &mut McGroups, want: &[IpoibGroup]) {
    let mut wanted = BTreeSet::new();
    for w in want {
        let mgid = ipoib_broadcast_mgid(w.p_key, w.scope);
        wanted.insert(mgid);
        match groups.get(&mgid) {
            None => {
                let Some(mlid) = groups.free_mlid() else {
                    tracing::error!(mgid = %gid_text(&mgid), "IPoIB broadcast group not created: no free MLID");
                    continue;
                };
                match groups.insert(w.group(mlid)) {
                    Ok(()) => tracing::info!(
                        mgid = %gid_text(&mgid),
                        mlid = format_args!("{mlid:#06x}"),
                        p_key = format_args!("{:#06x}", w.p_key),
                        "IPoIB broadcast group created for its partition"
                    ),
                    Err(e) => {
                        tracing::error!(mgid = %gid_text(&mgid), error = %e, "IPoIB broadcast group not created")
                    }
                }
            }
            Some(g) => {
                let mlid = g.params.mlid;
                let target = w.group(mlid);
                if g.params == target.params {
                    groups.set_well_known(&mgid, true);
                } else if g.members.is_empty() {
                    if let Err(e) = groups.insert(target) {
                        tracing::error!(mgid = %gid_text(&mgid), error = %e, "IPoIB broadcast group not updated");
                    }
                } else {
                    tracing::warn!(
                        mgid = %gid_text(&mgid),
                        members = g.members.len(),
                        "IPoIB broadcast group keeps its parameters while it has members; the partition's new ones apply once it is empty"
                    );
                    groups.set_well_known(&mgid, true);
                }
            }
        }
    }
    let stale: Vec<Gid> = groups
        .iter()
        .filter(|g| g.well_known && is_ipoib_broadcast(&g.params.mgid))
        .map(|g| g.params.mgid)
        .filter(|m| !wanted.contains(m))
        .collect();
    for mgid in stale {
        tracing::info!(mgid = %gid_text(&mgid), "IPoIB broadcast group: its partition is gone or has no ipoib flag");
        groups.set_well_known(&mgid, false);
    }
}

/// The broadcast groups an SM with these partitions keeps: the default partition's
/// (OpenSM's defaults) first, then each partition with `ipoib` in the order given.
pub fn ipoib_groups_of<'a>(
    partitions: impl IntoIterator<Item = (u16, &'a PartitionIpoib)>,
    packet_life_time: u8,
) -> Vec<IpoibGroup> {
    let mut v = vec![IpoibGroup::defaults(0xFFFF)];
    v.extend(
        partitions
            .into_iter()
            .map(|(p_key, i)| IpoibGroup::of_partition(p_key, i, packet_life_time)),
    );
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sa::groups::Member;

    const PARAMS: PartitionIpoib = PartitionIpoib {
        rate: 6,
        mtu: 5,
        sl: 2,
        scope: 2,
        q_key: 0x0B1B,
    };

    fn want(parts: &[(u16, PartitionIpoib)]) -> Vec<IpoibGroup> {
        ipoib_groups_of(parts.iter().map(|(k, i)| (*k, i)), 0x12)
    }

    #[test]
    fn groups_follow_the_partitions_but_never_leave_a_full_member_without_its_group() {
        let mut groups = McGroups::new();
        sync_ipoib_groups(&mut groups, &want(&[(0x12, PARAMS), (0x13, PARAMS)]));
        let (a, b) = (ipoib_broadcast_mgid(0x12, 2), ipoib_broadcast_mgid(0x13, 2));
        let mlids: Vec<u16> = groups.iter().map(|g| g.params.mlid).collect();
        assert_eq!(mlids.len(), 3);
        assert_eq!(groups.get(&a).map(|g| g.params.mlid), Some(0xC001));
        let ga = groups.get(&a).cloned().expect("created");
        assert_eq!((ga.params.rate, ga.params.mtu, ga.params.sl), (6, 5, 2));
        assert_eq!(ga.params.p_key, 0x8012);
        assert!(ga.well_known);
        assert!(is_ipoib_broadcast(&a) && !is_ipoib_broadcast(&[0xFF; 16]));

        // A full member joins group a.
        let mut with_member = ga.clone();
        with_member.members.insert(
            [1; 16],
            Member {
                join_state: JoinState::FULL_MEMBER,
                proxy_join: false,
            },
        );
        groups.insert(with_member).expect("same MLID");
        groups.take_changes();

        // New parameters: the empty group b takes them, a keeps its own.
        let changed = PartitionIpoib { sl: 9, ..PARAMS };
        sync_ipoib_groups(&mut groups, &want(&[(0x12, changed), (0x13, changed)]));
        assert_eq!(groups.get(&a).map(|g| g.params.sl), Some(2));
        assert_eq!(groups.get(&b).map(|g| g.params.sl), Some(9));
        assert_eq!(groups.get(&b).map(|g| g.params.mlid), Some(0xC002));

        // Both partitions go: b (empty) is deleted, a stays for its member as an
        // ordinary group; the default group is untouched.
        sync_ipoib_groups(&mut groups, &want(&[]));
        assert!(groups.get(&b).is_none());
        assert_eq!(groups.get(&a).map(|g| g.well_known), Some(false));
        assert!(groups.by_mlid(MLID_FIRST).is_some_and(|g| g.well_known));
        let changes = groups.take_changes();
        assert!(changes.contains(&crate::sa::GroupChange::Deleted {
            mgid: b,
            mlid: 0xC002
        }));
    }
}
