//! The soak's SA comparison, with no I/O: an [`SaSnap`] (what the SA answered and
//! what the switches' MulticastForwardingTables hold) against the one taken before
//! cycle 1, the MFTs judged by reach over the cables (every receiving member reached
//! from every member), and the replicas' gRPC listings against the master's.
//! The rules are in the `soak` module doc.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use serde_json::Value;

/// JoinState bits that receive the group's packets: FullMember, NonMember (send-only
/// members, bits 4 and 8, only send).
const RECEIVES: u8 = 0b11;

/// What the SA serves and the switches hold, as the judge read it after a cycle.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SaSnap {
    /// MGID -> its MCMemberRecords (`ibsmctl --json sa members --mgid`), by PortGID.
    pub groups: BTreeMap<String, BTreeMap<String, Value>>,
    /// ServiceRecords, by ServiceID and ServiceGID.
    pub services: BTreeMap<String, Value>,
    /// InformInfoRecords, by their JSON text (every field is the key).
    pub informs: BTreeSet<String>,
    /// Switch node GUID -> MLID -> ports (`ibroute -M`).
    pub mft: BTreeMap<u64, BTreeMap<u32, BTreeSet<u32>>>,
    /// (port GUID, port) -> (remote port GUID, remote port): the cables on the wire
    /// (a switch by its port-0 GUID).
    pub links: BTreeMap<(u64, u32), (u64, u32)>,
    /// Port GUID -> name (NodeDescription), for the notes.
    pub names: BTreeMap<u64, String>,
}

impl SaSnap {
    /// Members of every group, ServiceRecords, subscriptions, MFT entries.
    pub fn counts(&self) -> (u64, u64, u64, u64) {
        let n = |x: usize| u64::try_from(x).unwrap_or(u64::MAX);
        (
            n(self.groups.values().map(BTreeMap::len).sum()),
            n(self.services.len()),
            n(self.informs.len()),
            n(self.mft.values().map(BTreeMap::len).sum()),
        )
    }

    fn name(&self, guid: u64) -> String {
        self.names
            .get(&guid)
            .cloned()
            .unwrap_or_else(|| format!("{guid:#018x}"))
    }
}

/// A member's JoinState bits from its record (`JoinState(FullMember|NonMember)`).
pub fn join_bits(rec: &Value) -> u8 {
    let text = rec["join_state"].as_str().unwrap_or_default();
    [
        ("FullMember", 1),
        ("NonMember", 2),
        ("SendOnlyNonMember", 4),
        ("SendOnlyFullMember", 8),
    ]
    .iter()
    .filter(|(name, _)| {
        text.trim_start_matches("JoinState(")
            .trim_end_matches(')')
            .split('|')
            .any(|t| t == *name)
    })
    .fold(0, |acc, (_, bit)| acc | bit)
}

/// The port GUID in a GID's text (its low 64 bits).
pub fn guid_of_gid(gid: &str) -> Option<u64> {
    let g: std::net::Ipv6Addr = gid.parse().ok()?;
    u64::try_from(u128::from(g) & u128::from(u64::MAX)).ok()
}

/// The record fields that differ between two records (nested ones dotted).
fn fields_differing(a: &Value, b: &Value, prefix: &str, out: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                let p = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                fields_differing(
                    x.get(k).unwrap_or(&Value::Null),
                    y.get(k).unwrap_or(&Value::Null),
                    &p,
                    out,
                );
            }
        }
        _ if a != b => out.push(format!("{prefix} {a} -> {b}")),
        _ => {}
    }
}

/// The SA's records now against the snapshot before cycle 1: every record lost, new
/// or with a field changed, named.
pub fn diff_records(base: &SaSnap, now: &SaSnap) -> Vec<String> {
    let mut out = Vec::new();
    for (mgid, members) in &base.groups {
        let Some(got) = now.groups.get(mgid) else {
            out.push(format!("group {mgid}: not answered"));
            continue;
        };
        for (gid, rec) in members {
            match got.get(gid) {
                None => out.push(format!("MCMemberRecord {mgid} / {gid}: lost")),
                Some(r) if r != rec => {
                    let mut f = Vec::new();
                    fields_differing(rec, r, "", &mut f);
                    out.push(format!("MCMemberRecord {mgid} / {gid}: {}", f.join(", ")));
                }
                Some(_) => {}
            }
        }
        for gid in got.keys().filter(|g| !members.contains_key(*g)) {
            out.push(format!("MCMemberRecord {mgid} / {gid}: new"));
        }
    }
    for (key, rec) in &base.services {
        match now.services.get(key) {
            None => out.push(format!("ServiceRecord {key}: lost")),
            Some(r) if r != rec => {
                let mut f = Vec::new();
                fields_differing(rec, r, "", &mut f);
                out.push(format!("ServiceRecord {key}: {}", f.join(", ")));
            }
            Some(_) => {}
        }
    }
    for key in now
        .services
        .keys()
        .filter(|k| !base.services.contains_key(*k))
    {
        out.push(format!("ServiceRecord {key}: new"));
    }
    for r in base.informs.difference(&now.informs) {
        out.push(format!("InformInfoRecord lost or changed: {r}"));
    }
    for r in now.informs.difference(&base.informs) {
        out.push(format!("InformInfoRecord new or changed: {r}"));
    }
    out
}

/// MFT entries (switch, MLID) that differ between two reads.
pub fn diff_mft(prev: &SaSnap, now: &SaSnap) -> Vec<String> {
    let mut out = Vec::new();
    let switches: BTreeSet<&u64> = prev.mft.keys().chain(now.mft.keys()).collect();
    let empty = BTreeMap::new();
    for sw in switches {
        let (a, b) = (
            prev.mft.get(sw).unwrap_or(&empty),
            now.mft.get(sw).unwrap_or(&empty),
        );
        let mlids: BTreeSet<&u32> = a.keys().chain(b.keys()).collect();
        for m in mlids {
            let (x, y) = (a.get(m), b.get(m));
            if x != y {
                let show =
                    |p: Option<&BTreeSet<u32>>| p.map_or("none".to_string(), |p| format!("{p:?}"));
                out.push(format!(
                    "MFT of {} for MLID {m:#06x}: ports {} -> {}",
                    now.name(*sw),
                    show(x),
                    show(y)
                ));
            }
        }
    }
    out
}

/// Every group's tree on the wire: a packet a member sends to the MLID, forwarded by
/// each switch to the ports of its MFT entry but the one it came in on, reaches every
/// receiving member (FullMember or NonMember) but the sender. The pairs it misses.
pub fn unreached(now: &SaSnap) -> Vec<String> {
    let mut out = Vec::new();
    for (mgid, members) in &now.groups {
        let Some(mlid) = members
            .values()
            .find_map(|r| r["mlid"].as_u64())
            .and_then(|m| u32::try_from(m).ok())
        else {
            continue;
        };
        let ports: Vec<(u64, u8)> = members
            .keys()
            .filter_map(|gid| guid_of_gid(gid))
            .zip(members.values().map(join_bits))
            .collect();
        for &(from, _) in &ports {
            let got = flood(now, mlid, from);
            for &(to, bits) in &ports {
                if to != from && bits & RECEIVES != 0 && !got.contains(&to) {
                    out.push(format!(
                        "group {mgid} (MLID {mlid:#06x}): {} does not reach {} through the MFTs",
                        now.name(from),
                        now.name(to)
                    ));
                }
            }
        }
    }
    out
}

/// The CA port GUIDs a packet for `mlid` sent by the CA port `from` reaches (every
/// switch is in `s.mft`, with no entry when its table is empty).
fn flood(s: &SaSnap, mlid: u32, from: u64) -> BTreeSet<u64> {
    let mut reached = BTreeSet::new();
    let mut seen = BTreeSet::new();
    let mut queue: VecDeque<(u64, u32)> = s
        .links
        .iter()
        .filter(|((g, _), _)| *g == from && !s.mft.contains_key(g))
        .map(|(_, remote)| *remote)
        .collect();
    while let Some((node, in_port)) = queue.pop_front() {
        if !seen.insert((node, in_port)) {
            continue;
        }
        let Some(table) = s.mft.get(&node) else {
            // Not a switch: a CA port the packet arrived at.
            reached.insert(node);
            continue;
        };
        for p in table.get(&mlid).into_iter().flatten() {
            if *p == in_port || *p == 0 {
                continue;
            }
            if let Some(next) = s.links.get(&(node, *p)) {
                queue.push_back(*next);
            }
        }
    }
    reached
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Two switches (GUIDs 100, 200) joined by ports 3; CAs 1, 2 on switch 100 (ports 1,
    /// 2), CA 3 on switch 200 (port 1).
    fn fabric() -> SaSnap {
        let mut s = SaSnap::default();
        for (a, b) in [
            ((1, 1), (100, 1)),
            ((2, 1), (100, 2)),
            ((3, 1), (200, 1)),
            ((100, 3), (200, 3)),
        ] {
            s.links.insert(a, b);
            s.links.insert(b, a);
        }
        let member = |gid: &str, state: &str| {
            (
                gid.to_string(),
                json!({"mgid": "ff12::1", "port_gid": gid, "mlid": 0xc000, "join_state": state}),
            )
        };
        s.groups.insert(
            "ff12::1".into(),
            [
                member("fe80::1", "JoinState(FullMember)"),
                member("fe80::2", "JoinState(SendOnlyNonMember)"),
                member("fe80::3", "JoinState(NonMember)"),
            ]
            .into(),
        );
        s.mft.insert(100, [(0xc000, [1, 3].into())].into());
        s.mft.insert(200, [(0xc000, [1, 3].into())].into());
        s
    }

    #[test]
    fn a_tree_that_reaches_every_receiver_passes_and_a_cut_one_is_named() {
        let s = fabric();
        assert_eq!(unreached(&s), Vec::<String>::new());
        // The send-only member is not a receiver: port 2 needs no entry.
        let mut cut = s.clone();
        cut.mft.insert(200, [(0xc000, [3].into())].into());
        let u = unreached(&cut);
        assert!(
            u.len() == 2 && u.iter().all(|x| x.contains("does not reach")),
            "members 1 and 2 no longer reach 3: {u:?}"
        );
        assert_eq!(diff_mft(&s, &cut).len(), 1);
        assert!(diff_mft(&s, &s).is_empty());
    }

    #[test]
    fn records_lost_new_or_changed_are_named() {
        let base = fabric();
        assert!(diff_records(&base, &base).is_empty());
        let mut now = base.clone();
        let g = now.groups.get_mut("ff12::1").expect("group");
        g.remove("fe80::3");
        g.insert("fe80::9".into(), json!({"mlid": 0xc000}));
        if let Some(r) = g.get_mut("fe80::1") {
            r["mlid"] = json!(0xc001);
        }
        now.services.insert("1 fe80::1".into(), json!({}));
        now.informs.insert("{}".into());
        let d = diff_records(&base, &now);
        let all = d.join("\n");
        assert_eq!(d.len(), 5, "{all}");
        assert!(
            all.contains("fe80::3: lost") && all.contains("fe80::9: new"),
            "{all}"
        );
        assert!(all.contains("mlid 49152 -> 49153"), "{all}");
        assert_eq!(
            join_bits(&json!({"join_state": "JoinState(FullMember|NonMember)"})),
            3
        );
        assert_eq!(guid_of_gid("fe80::2:c903:0:1"), Some(0x0002_c903_0000_0001));
    }
}
