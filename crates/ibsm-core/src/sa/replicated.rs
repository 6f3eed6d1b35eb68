//! The SA's state as replicated tables of bytes ([`SaTables`]), and back.
//!
//! Each entry is in its IBA form, so what a successor decodes is fixed by the spec,
//! not by this crate's structs: a group is its MCMemberRecord (PortGID and JoinState
//! zero) plus one flag byte (bit 0: made by the SM), keyed by MGID; a member is
//! JoinState and ProxyJoin, keyed by MGID + PortGID. A service is its ServiceRecord,
//! keyed by ServiceID + ServiceGID + ServiceP_Key, without its expiry time (replicas
//! share no clock: a successor restarts the lease when it loads it). A subscription is
//! its InformInfoRecord (the key) and the subscriber's LID, SL and P_Key index (the
//! value: where Reports go; a GRH is not kept, subscribers are in the subnet). The
//! replica stores them opaque (see `ibsm_replica::sa`).

use std::collections::BTreeMap;

use std::time::Duration;

use ibsm_mad::sa::{Gid, InformInfoRecord, JoinState, McMemberRecord, ServiceRecord};
use ibsm_mad::MadAddress;

use super::groups::{McGroup, McGroups, Member};
use super::inform::{Informs, Subscription};
use super::services::{lease_end, Service, Services};

/// Which replicated SA table (the replica's `SaTable`, named here without it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SaTableKind {
    /// Multicast groups by MGID.
    McGroups,
    /// Group members by MGID + PortGID.
    McMembers,
    /// ServiceRecords.
    Services,
    /// InformInfo subscriptions.
    Informs,
}

/// Replicated SA tables: kind -> key -> value.
pub type SaTables = BTreeMap<SaTableKind, BTreeMap<Vec<u8>, Vec<u8>>>;

const WELL_KNOWN: u8 = 1;

impl McGroups {
    /// The groups and members as replicated tables (both present, maybe empty, so
    /// a successor can tell "no groups" from "never replicated").
    pub fn to_tables(&self, out: &mut SaTables) {
        let mut groups = BTreeMap::new();
        let mut members = BTreeMap::new();
        for g in self.iter() {
            let mut v = g.params.encode().to_vec();
            v.push(if g.well_known { WELL_KNOWN } else { 0 });
            groups.insert(g.params.mgid.to_vec(), v);
            for (gid, m) in &g.members {
                let mut k = g.params.mgid.to_vec();
                k.extend_from_slice(gid);
                members.insert(k, vec![m.join_state.0, u8::from(m.proxy_join)]);
            }
        }
        out.insert(SaTableKind::McGroups, groups);
        out.insert(SaTableKind::McMembers, members);
    }

    /// Groups from replicated tables; `None` if the tables hold no group table (the
    /// state was never replicated by an SA). An entry that does not decode is
    /// skipped and counted in the second value, never a panic.
    pub fn from_tables(tables: &SaTables) -> Option<(McGroups, usize)> {
        let groups = tables.get(&SaTableKind::McGroups)?;
        let empty = BTreeMap::new();
        let members = tables.get(&SaTableKind::McMembers).unwrap_or(&empty);
        let mut bad = 0usize;
        let mut out = McGroups::new();
        for (k, v) in groups {
            let (Ok(mgid), Some((flag, rec))) = (<Gid>::try_from(k.as_slice()), v.split_last())
            else {
                bad += 1;
                continue;
            };
            let Ok(params) = McMemberRecord::decode(rec) else {
                bad += 1;
                continue;
            };
            if params.mgid != mgid {
                bad += 1;
                continue;
            }
            let mut g = McGroup {
                params,
                members: BTreeMap::new(),
                well_known: flag & WELL_KNOWN != 0,
            };
            let lo = mgid.to_vec();
            for (mk, mv) in members.range(lo.clone()..) {
                if !mk.starts_with(&lo) {
                    break;
                }
                let (Ok(port_gid), [js, proxy]) = (<Gid>::try_from(&mk[16..]), mv.as_slice())
                else {
                    bad += 1;
                    continue;
                };
                g.members.insert(
                    port_gid,
                    Member {
                        join_state: JoinState(*js & 0x0F),
                        proxy_join: *proxy != 0,
                    },
                );
            }
            if out.insert(g).is_err() {
                bad += 1;
            }
        }
        // Loading is not a change of membership for anyone to act on twice: the
        // caller decides what to recompute.
        let _ = out.take_changes();
        Some((out, bad))
    }
}

impl Services {
    /// The services as a replicated table (present, maybe empty).
    pub fn to_tables(&self, out: &mut SaTables) {
        let mut t = BTreeMap::new();
        for s in self.iter() {
            let r = &s.record;
            let mut k = r.service_id.to_be_bytes().to_vec();
            k.extend_from_slice(&r.service_gid);
            k.extend_from_slice(&r.service_p_key.to_be_bytes());
            t.insert(k, r.encode().to_vec());
        }
        out.insert(SaTableKind::Services, t);
    }

    /// Services from replicated tables, leases starting at `now`; `None` if there is
    /// no service table. Entries that do not decode are skipped and counted.
    pub fn from_tables(tables: &SaTables, now: Duration) -> Option<(Services, usize)> {
        let t = tables.get(&SaTableKind::Services)?;
        let mut out = Services::new();
        let mut bad = 0usize;
        for v in t.values() {
            match ServiceRecord::decode(v) {
                Ok(record) => out.insert(Service {
                    record,
                    expires: lease_end(now, record.service_lease),
                }),
                Err(_) => bad += 1,
            }
        }
        let _ = out.take_changed();
        Some((out, bad))
    }
}

impl Informs {
    /// The subscriptions as a replicated table (present, maybe empty).
    pub fn to_tables(&self, out: &mut SaTables) {
        let mut t = BTreeMap::new();
        for s in self.iter() {
            let mut v = s.to.lid.to_be_bytes().to_vec();
            v.push(s.to.sl);
            v.extend_from_slice(&s.to.pkey_index.to_be_bytes());
            t.insert(s.record.encode().to_vec(), v);
        }
        out.insert(SaTableKind::Informs, t);
    }

    /// Subscriptions from replicated tables; `None` if there is no subscription
    /// table. Entries that do not decode are skipped and counted.
    pub fn from_tables(tables: &SaTables) -> Option<(Informs, usize)> {
        let t = tables.get(&SaTableKind::Informs)?;
        let mut out = Informs::new();
        let mut bad = 0usize;
        for (k, v) in t {
            let (Ok(record), [l0, l1, sl, p0, p1]) = (InformInfoRecord::decode(k), v.as_slice())
            else {
                bad += 1;
                continue;
            };
            let to = MadAddress {
                sl: *sl,
                pkey_index: u16::from_be_bytes([*p0, *p1]),
                qpn: record.inform_info.qpn,
                ..MadAddress::gsi(u16::from_be_bytes([*l0, *l1]))
            };
            out.insert(Subscription { record, to });
        }
        let _ = out.take_changed();
        Some((out, bad))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sa::ipoib::{default_groups, IpoibGroup};

    fn sample() -> McGroups {
        let mut g = McGroups::new();
        for x in default_groups() {
            g.insert(x).unwrap();
        }
        let mut other = IpoibGroup::defaults(0x0012).group(0xC001);
        other.well_known = false;
        other.members.insert(
            [7; 16],
            Member {
                join_state: JoinState::FULL_MEMBER,
                proxy_join: false,
            },
        );
        other.members.insert(
            [9; 16],
            Member {
                join_state: JoinState::SEND_ONLY_NON_MEMBER,
                proxy_join: true,
            },
        );
        g.insert(other).unwrap();
        let _ = g.take_changes();
        g
    }

    #[test]
    fn groups_survive_the_tables_exactly() {
        let g = sample();
        let mut t = SaTables::new();
        g.to_tables(&mut t);
        let (back, bad) = McGroups::from_tables(&t).expect("tables present");
        assert_eq!(bad, 0);
        let a: Vec<&McGroup> = g.iter().collect();
        let b: Vec<&McGroup> = back.iter().collect();
        assert_eq!(a, b);
        assert_eq!(back.by_mlid(0xC001).map(|x| x.members.len()), Some(2));
    }

    #[test]
    fn no_group_table_means_never_replicated_and_garbage_is_skipped() {
        assert!(McGroups::from_tables(&SaTables::new()).is_none());
        let mut t = SaTables::new();
        sample().to_tables(&mut t);
        let groups = t.get_mut(&SaTableKind::McGroups).unwrap();
        groups.insert(vec![1, 2, 3], vec![0; 53]);
        groups.insert([0xFF; 16].to_vec(), vec![0; 3]);
        let (back, bad) = McGroups::from_tables(&t).unwrap();
        assert_eq!(bad, 2);
        assert_eq!(back.len(), 2, "the good groups are kept");
    }

    #[test]
    fn replacing_reports_only_what_differs() {
        let mut mine = sample();
        let mut theirs = sample();
        mine.replace_with(sample());
        assert!(
            mine.take_changes().is_empty(),
            "same groups: nothing to recompute"
        );
        let mgid = theirs.by_mlid(0xC001).unwrap().params.mgid;
        let mut t = SaTables::new();
        theirs.clear();
        let _ = theirs.take_changes();
        theirs.to_tables(&mut t);
        let (empty, _) = McGroups::from_tables(&t).unwrap();
        mine.replace_with(empty);
        let ch = mine.take_changes();
        assert!(
            ch.contains(&crate::sa::GroupChange::Deleted { mgid, mlid: 0xC001 }),
            "{ch:?}"
        );
    }

    #[test]
    fn services_survive_the_tables_and_their_leases_restart_at_load() {
        use crate::sa::{Service, Services};
        use ibsm_mad::sa::{ServiceName, ServiceRecord};
        let mut s = Services::new();
        for (id, lease) in [(1u64, 30u32), (2, ServiceRecord::INFINITE_LEASE)] {
            s.insert(Service {
                record: ServiceRecord {
                    service_id: id,
                    service_gid: [3; 16],
                    service_p_key: 0xFFFF,
                    service_lease: lease,
                    service_name: ServiceName::new("x"),
                    ..ServiceRecord::default()
                },
                expires: crate::sa::lease_end(Duration::from_secs(100), lease),
            });
        }
        let mut t = SaTables::new();
        s.to_tables(&mut t);
        let load = Duration::from_secs(7);
        let (back, bad) = Services::from_tables(&t, load).expect("table present");
        assert_eq!(bad, 0);
        let recs: Vec<_> = back.iter().map(|x| (x.record, x.expires)).collect();
        let want: Vec<_> = s
            .iter()
            .map(|x| (x.record, crate::sa::lease_end(load, x.record.service_lease)))
            .collect();
        assert_eq!(recs, want, "same records, leases counted from the load");
        assert_eq!(back.poll_timeout(), Some(Duration::from_secs(37)));
        t.get_mut(&SaTableKind::Services)
            .unwrap()
            .insert(vec![0], vec![1, 2]);
        assert_eq!(Services::from_tables(&t, load).unwrap().1, 1);
        assert!(Services::from_tables(&SaTables::new(), load).is_none());
    }

    #[test]
    fn subscriptions_survive_the_tables_with_their_address() {
        use crate::sa::{Informs, Subscription};
        use ibsm_mad::sa::{InformInfo, InformInfoRecord};
        use ibsm_mad::MadAddress;
        let mut s = Informs::new();
        s.insert(Subscription {
            record: InformInfoRecord {
                subscriber_gid: [5; 16],
                subscriber_enum: 0,
                inform_info: InformInfo {
                    lid_range_begin: 0xFFFF,
                    is_generic: 1,
                    notice_type: 0xFFFF,
                    trap_number: 64,
                    qpn: 9,
                    producer_type: 0xFF_FFFF,
                    ..InformInfo::default()
                },
            },
            to: MadAddress {
                qpn: 9,
                sl: 2,
                pkey_index: 3,
                ..MadAddress::gsi(17)
            },
        });
        let mut t = SaTables::new();
        s.to_tables(&mut t);
        let (back, bad) = Informs::from_tables(&t).expect("table present");
        assert_eq!(bad, 0);
        let a: Vec<_> = s.iter().collect();
        let b: Vec<_> = back.iter().collect();
        assert_eq!(a, b);
        t.get_mut(&SaTableKind::Informs)
            .unwrap()
            .insert(vec![0; 60], vec![1]);
        assert_eq!(Informs::from_tables(&t).unwrap().1, 1);
        assert!(Informs::from_tables(&SaTables::new()).is_none());
    }
}
