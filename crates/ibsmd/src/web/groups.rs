//! The fabric view of a large fabric, aggregated on the server: past [`FULL_MAX`] nodes
//! the page gets tiers of at most [`GROUPS_PER_TIER`] groups each (counts, LID ranges,
//! the links between groups summed), and asks for one group's members or a search
//! (GUID, LID or name) when the operator wants them. A k=34 fat tree (11 271 nodes)
//! is 6 MB of JSON whole; its overview is a few tens of kB.
//!
//! Tiers: hosts (CAs and routers) are tier 0, switches by hop distance from them (a fat
//! tree's leaf, spine and core); order inside a tier: tier 1 by GUID, the others by the
//! mean position of their neighbours already placed (one barycentre pass), so a group
//! holds neighbours and the links between groups stay few. The grouping is computed once
//! per published topology and kept ([`Grouped::key`]).

use std::collections::{BTreeMap, HashMap, VecDeque};

use ibsm_proto::v1 as pb;
use serde_json::{json, Value};

use super::json::{guid_hex, node_json};

/// Fabrics with more nodes than this are served aggregated.
pub const FULL_MAX: usize = 800;
/// Most groups in one tier.
pub const GROUPS_PER_TIER: usize = 40;
/// Most search hits returned.
pub const SEARCH_MAX: usize = 30;
/// Most members one group answer carries.
pub const GROUP_MAX: usize = 2_000;
/// PortState Active (IBA 14.2.5.6).
const ACTIVE: u32 = 4;

/// One group of a tier.
#[derive(Debug)]
pub struct Group {
    pub tier: usize,
    /// Indices into the nodes of [`Grouped::topo`], in tier order.
    pub members: Vec<usize>,
}

/// A topology answer with its tiers and groups.
#[derive(Debug)]
pub struct Grouped {
    /// Which answer it was made from: (instance, source, sweep time, node count).
    pub key: (String, String, u64, usize),
    pub topo: pb::TopologyResponse,
    pub tiers: usize,
    pub groups: Vec<Group>,
    /// Group of each node.
    pub group_of: Vec<usize>,
    /// Node GUID and every port GUID to the node's index.
    pub by_guid: HashMap<u64, usize>,
    /// (group a, group b) with a < b to (links, links not Active).
    pub links: BTreeMap<(usize, usize), (u32, u32)>,
}

/// The identity of `t` as served by `sm`.
pub fn key_of(sm: &str, t: &pb::TopologyResponse) -> (String, String, u64, usize) {
    (
        sm.to_string(),
        t.source.clone(),
        t.taken_unix_ms,
        t.nodes.len(),
    )
}

fn lid_of(n: &pb::TopoNodeEntry) -> u32 {
    n.ports.iter().find(|p| p.lid != 0).map_or(0, |p| p.lid)
}

impl Grouped {
    /// Tiers and groups of `topo`.
    pub fn new(sm: &str, topo: pb::TopologyResponse) -> Grouped {
        let key = key_of(sm, &topo);
        let nodes = &topo.nodes;
        let mut by_guid = HashMap::with_capacity(nodes.len() * 2);
        for (i, n) in nodes.iter().enumerate() {
            by_guid.insert(n.node_guid, i);
            for p in &n.ports {
                if p.port_guid != 0 {
                    by_guid.entry(p.port_guid).or_insert(i);
                }
            }
        }
        let node_idx: HashMap<u64, usize> = nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.node_guid, i))
            .collect();
        let peers = |i: usize| {
            nodes[i]
                .ports
                .iter()
                .filter_map(|p| node_idx.get(&p.remote_node_guid).copied())
        };
        // Tiers by BFS from the hosts.
        let mut level: Vec<Option<usize>> = vec![None; nodes.len()];
        let mut queue = VecDeque::new();
        for (i, n) in nodes.iter().enumerate() {
            if n.node_type != 2 {
                level[i] = Some(0);
                queue.push_back(i);
            }
        }
        if queue.is_empty() && !nodes.is_empty() {
            level[0] = Some(1);
            queue.push_back(0);
        }
        while let Some(i) = queue.pop_front() {
            let l = level[i].unwrap_or(0);
            for j in peers(i) {
                if level[j].is_none() {
                    level[j] = Some(l + 1);
                    queue.push_back(j);
                }
            }
        }
        let top = level.iter().flatten().copied().max().unwrap_or(0).max(1);
        let mut tier_list: Vec<Vec<usize>> = vec![Vec::new(); top + 2];
        for (i, l) in level.iter().enumerate() {
            tier_list[l.unwrap_or(top + 1)].push(i);
        }
        while tier_list.len() > 2 && tier_list.last().is_some_and(Vec::is_empty) {
            tier_list.pop();
        }
        // Order: tier 1 by GUID, then hosts and upper tiers by barycentre.
        let mut order: Vec<Option<f64>> = vec![None; nodes.len()];
        let place = |tier: &mut Vec<usize>, order: &mut Vec<Option<f64>>, by_mean: bool| {
            if by_mean {
                let mean = |i: usize| {
                    let (s, c) = peers(i)
                        .filter_map(|j| order[j])
                        .fold((0.0, 0u32), |(s, c), o| (s + o, c + 1));
                    if c == 0 {
                        f64::MAX
                    } else {
                        s / f64::from(c)
                    }
                };
                let mut keyed: Vec<(f64, usize)> = tier.iter().map(|&i| (mean(i), i)).collect();
                keyed.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
                *tier = keyed.into_iter().map(|(_, i)| i).collect();
            } else {
                tier.sort_by_key(|&i| nodes[i].node_guid);
            }
            for (pos, &i) in tier.iter().enumerate() {
                order[i] = Some(pos as f64);
            }
        };
        if let Some(t1) = tier_list.get_mut(1) {
            place(t1, &mut order, false);
        }
        place(&mut tier_list[0], &mut order, true);
        for t in tier_list.iter_mut().skip(2) {
            place(t, &mut order, true);
        }
        let mut groups = Vec::new();
        let mut group_of = vec![0; nodes.len()];
        for (l, tier) in tier_list.iter().enumerate() {
            if tier.is_empty() {
                continue;
            }
            let per = tier.len().div_ceil(GROUPS_PER_TIER);
            for chunk in tier.chunks(per) {
                for &i in chunk {
                    group_of[i] = groups.len();
                }
                groups.push(Group {
                    tier: l,
                    members: chunk.to_vec(),
                });
            }
        }
        let mut links: BTreeMap<(usize, usize), (u32, u32)> = BTreeMap::new();
        for (i, n) in nodes.iter().enumerate() {
            for p in &n.ports {
                let Some(&j) = node_idx.get(&p.remote_node_guid) else {
                    continue;
                };
                let (a, b) = (group_of[i], group_of[j]);
                // Each cable once (from its lower end), and none inside a group.
                if a == b || (n.node_guid, p.num) > (nodes[j].node_guid, p.remote_port) {
                    continue;
                }
                let e = links.entry((a.min(b), a.max(b))).or_default();
                e.0 += 1;
                let far = nodes[j].ports.iter().find(|q| q.num == p.remote_port);
                let down = |s: u32| s != 0 && s != ACTIVE;
                if down(p.port_state) || far.is_some_and(|q| down(q.port_state)) {
                    e.1 += 1;
                }
            }
        }
        Grouped {
            key,
            tiers: tier_list.len(),
            topo,
            groups,
            group_of,
            by_guid,
            links,
        }
    }

    /// The overview the page draws first: counts per group and the links between them.
    pub fn overview(&self) -> Value {
        let nodes = &self.topo.nodes;
        let groups: Vec<Value> = self
            .groups
            .iter()
            .enumerate()
            .map(|(id, g)| {
                let lids: Vec<u32> = g
                    .members
                    .iter()
                    .map(|&i| lid_of(&nodes[i]))
                    .filter(|&l| l != 0)
                    .collect();
                let switches = g
                    .members
                    .iter()
                    .filter(|&&i| nodes[i].node_type == 2)
                    .count();
                let first = g.members.first().map_or("", |&i| &nodes[i].description);
                let last = g.members.last().map_or("", |&i| &nodes[i].description);
                json!({"id": id, "tier": g.tier, "count": g.members.len(), "switches": switches,
                       "lid_min": lids.iter().min(), "lid_max": lids.iter().max(),
                       "first": first, "last": last})
            })
            .collect();
        let links: Vec<Value> = self
            .links
            .iter()
            .map(|((a, b), (n, down))| json!([a, b, n, down]))
            .collect();
        let t = &self.topo;
        json!({"aggregate": true, "source": t.source, "taken_unix_ms": t.taken_unix_ms,
               "switches": t.switches, "cas": t.cas, "routers": t.routers, "links": t.links,
               "node_count": nodes.len(), "tiers": self.tiers, "groups": groups,
               "group_links": links})
    }

    /// One group's members, as the full topology answer lists nodes.
    pub fn group(&self, id: usize) -> Option<Value> {
        let g = self.groups.get(id)?;
        let members: Vec<Value> = g
            .members
            .iter()
            .take(GROUP_MAX)
            .map(|&i| node_json(&self.topo.nodes[i]))
            .collect();
        Some(json!({"id": id, "tier": g.tier, "count": g.members.len(), "nodes": members}))
    }

    /// The group holding a node or port GUID.
    pub fn group_of_guid(&self, guid: u64) -> Option<usize> {
        self.by_guid.get(&guid).map(|&i| self.group_of[i])
    }

    /// Nodes matching `q`: a LID (decimal or 0x hex, within base..base+2^LMC), else a
    /// part of a node or port GUID (hex) or of the node description.
    pub fn search(&self, q: &str) -> Value {
        let q = q.trim().to_lowercase();
        let lid = q.strip_prefix("0x").map_or_else(
            || q.parse::<u32>().ok(),
            |h| u32::from_str_radix(h, 16).ok(),
        );
        let hex = q.trim_start_matches("0x");
        let hex_ok = hex.len() >= 2 && hex.chars().all(|c| c.is_ascii_hexdigit());
        let mut hits = Vec::new();
        let mut total = 0usize;
        for (i, n) in self.topo.nodes.iter().enumerate() {
            let by_lid = lid.is_some_and(|l| {
                n.ports
                    .iter()
                    .any(|p| p.lid != 0 && (p.lid..p.lid + (1 << p.lmc.min(7))).contains(&l))
            });
            let by_text = !q.is_empty()
                && (n.description.to_lowercase().contains(&q)
                    || hex_ok
                        && (format!("{:016x}", n.node_guid).contains(hex)
                            || n.ports
                                .iter()
                                .any(|p| format!("{:016x}", p.port_guid).contains(hex))));
            if by_lid || by_text {
                total += 1;
                if hits.len() < SEARCH_MAX {
                    hits.push(json!({"guid": guid_hex(n.node_guid), "desc": n.description,
                        "type": n.node_type, "lid": lid_of(n), "group": self.group_of[i],
                        "tier": self.groups[self.group_of[i]].tier}));
                }
            }
        }
        json!({"query": q, "total": total, "hits": hits})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A two-level fat tree: `leaves` leaf switches with `hosts` hosts each, every leaf
    /// cabled to each of `spines` spines.
    fn fat(leaves: u64, spines: u64, hosts: u64) -> pb::TopologyResponse {
        let mut nodes: Vec<pb::TopoNodeEntry> = Vec::new();
        let mut lid = 1;
        let mut node = |guid: u64, ty: u32, desc: String| {
            nodes.push(pb::TopoNodeEntry {
                node_guid: guid,
                node_type: ty,
                description: desc,
                num_ports: 0,
                ports: Vec::new(),
            });
            nodes.len() - 1
        };
        let mut cables = Vec::new();
        for s in 0..spines {
            node(0x100 + s, 2, format!("spine-{s}"));
        }
        for l in 0..leaves {
            let li = node(0x1000 + l, 2, format!("leaf-{l}"));
            for s in 0..spines {
                cables.push((li, s as usize));
            }
            for h in 0..hosts {
                let hi = node(0x10_0000 + l * hosts + h, 1, format!("host-{l}-{h}"));
                cables.push((hi, li));
            }
        }
        for (a, b) in cables {
            let (ga, gb) = (nodes[a].node_guid, nodes[b].node_guid);
            let (pa, pb_) = (
                nodes[a].ports.len() as u32 + 1,
                nodes[b].ports.len() as u32 + 1,
            );
            for (i, g, p, rp) in [(a, gb, pa, pb_), (b, ga, pb_, pa)] {
                let own_lid = if nodes[i].node_type == 2 { 0 } else { lid };
                let port_guid = nodes[i].node_guid + 0x1_0000_0000;
                nodes[i].ports.push(pb::TopoPort {
                    num: p,
                    port_guid,
                    lid: own_lid,
                    remote_node_guid: g,
                    remote_port: rp,
                    port_state: ACTIVE,
                    ..Default::default()
                });
                if own_lid != 0 {
                    lid += 1;
                }
            }
        }
        pb::TopologyResponse {
            source: "master".into(),
            nodes,
            ..Default::default()
        }
    }

    #[test]
    fn a_large_fabric_is_tiers_of_bounded_groups_and_every_cable_counts_once() {
        let t = fat(100, 20, 20);
        let cables = 100 * 20 + 100 * 20;
        let g = Grouped::new("sm1", t);
        assert_eq!(g.tiers, 3, "hosts, leaves, spines");
        for tier in 0..3 {
            let n = g.groups.iter().filter(|x| x.tier == tier).count();
            assert!(
                (1..=GROUPS_PER_TIER).contains(&n),
                "tier {tier}: {n} groups"
            );
        }
        let inside: u32 = g
            .topo
            .nodes
            .iter()
            .enumerate()
            .flat_map(|(i, n)| n.ports.iter().map(move |p| (i, p)))
            .filter(|(i, p)| {
                g.by_guid
                    .get(&p.remote_node_guid)
                    .is_some_and(|&j| g.group_of[j] == g.group_of[*i])
            })
            .count() as u32
            / 2;
        let between: u32 = g.links.values().map(|v| v.0).sum();
        assert_eq!(between + inside, cables);
        // Hosts sit in the group under their leaf (barycentre order).
        let leaf0 = g.by_guid[&0x1000];
        let host0 = g.by_guid[&0x10_0000];
        let (gl, gh) = (g.group_of[leaf0], g.group_of[host0]);
        assert!(g.links.contains_key(&(gh.min(gl), gh.max(gl))));
        let v = g.overview();
        assert!(v.to_string().len() < 32_000, "overview is small");
        assert_eq!(v["node_count"], 100 + 20 + 2000);
    }

    #[test]
    fn search_finds_by_lid_guid_and_name_and_is_bounded() {
        let g = Grouped::new("sm1", fat(10, 4, 10));
        let by_name = g.search("host-3-7");
        assert_eq!(by_name["total"], 1);
        let lid = by_name["hits"][0]["lid"].as_u64().expect("lid");
        let by_lid = g.search(&lid.to_string());
        assert_eq!(by_lid["hits"][0]["desc"], "host-3-7");
        assert_eq!(
            g.search(&format!("{lid:#x}"))["hits"][0]["desc"],
            "host-3-7"
        );
        assert_eq!(g.search("0x1005")["hits"][0]["desc"], "leaf-5");
        let many = g.search("host");
        assert_eq!(many["total"], 100);
        assert_eq!(many["hits"].as_array().map(Vec::len), Some(SEARCH_MAX));
        let grp = g.group(by_name["hits"][0]["group"].as_u64().unwrap_or(0) as usize);
        let grp = grp.expect("the hit's group");
        assert!(grp["nodes"]
            .as_array()
            .expect("nodes")
            .iter()
            .any(|n| n["desc"] == "host-3-7"));
    }

    #[test]
    fn links_not_active_are_counted_apart() {
        let mut t = fat(4, 2, 2);
        for n in &mut t.nodes {
            if n.description == "leaf-1" {
                n.ports[0].port_state = 1;
            }
        }
        let g = Grouped::new("sm1", t);
        let down: u32 = g.links.values().map(|v| v.1).sum();
        assert_eq!(down, 1);
    }
}
