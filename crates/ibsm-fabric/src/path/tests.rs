//! Walks and the path table against brute force: a backward BFS over the graph
//! the LFT entries of one DLID form, and MTU/rate minimums recomputed from the
//! ports of every hop; on routed fabrics, then on ones with corrupted tables and
//! pulled cables.

use std::collections::{HashMap, VecDeque};

use proptest::prelude::*;

use super::*;
use crate::gen::{self, SplitMix64};
use crate::lid::{LidConfig, LidManager};
use crate::routing::{min_hop, ForwardingTables, RoutingOptions, UNREACHABLE};
use crate::topology::{LinkSpeed, LinkWidth, NodeIdx, Rate, Topology, MTU_1024, MTU_2048};

fn routed(mut t: Topology, lmc: u8) -> (Topology, ForwardingTables) {
    LidManager::new(LidConfig { lmc }).assign(&mut t).unwrap();
    let f = min_hop(&t, &RoutingOptions::default()).unwrap();
    (t, f)
}

/// Every end port: CA/router ports and switch port 0.
fn end_ports(t: &Topology) -> Vec<(NodeIdx, u8)> {
    let mut v = Vec::new();
    for (i, n) in t.iter() {
        if n.is_switch() {
            v.push((i, 0));
        } else {
            v.extend(n.physical_ports().map(|(p, _)| (i, p)));
        }
    }
    v
}

/// Give cables random widths, speeds and MTUs (both ends alike, as the SM
/// programs them), and a few ports an MTU of their own.
fn vary_links(t: &mut Topology, seed: u64) {
    let mut rng = SplitMix64::new(seed);
    let widths = [LinkWidth::X1, LinkWidth::X4, LinkWidth::X12, LinkWidth::X2];
    let links: Vec<_> = t.links().collect();
    for ((a, pa), (b, pb)) in links {
        let w = widths[rng.below(4) as usize];
        let s = LinkSpeed::ALL[rng.below(8) as usize];
        t.set_link_rate(a, pa, w, s).unwrap();
        t.set_link_mtu(a, pa, 1 + rng.below(5) as u8).unwrap();
        if rng.below(5) == 0 {
            t.set_port_mtu(b, pb, 1 + rng.below(5) as u8).unwrap();
        }
    }
}

/// Per DLID, every switch's cable count to the owner by a backward BFS over
/// the edges "s's LFT entry leads to t" from the switches that deliver.
fn brute_links(t: &Topology, f: &ForwardingTables, dlid: u16) -> HashMap<NodeIdx, u16> {
    let lids = LidIndex::new(t);
    let owner = lids.owner(dlid);
    let mut pred: HashMap<NodeIdx, Vec<NodeIdx>> = HashMap::new();
    let mut dist = HashMap::new();
    let mut q = VecDeque::new();
    for (s, n) in t.iter().filter(|(_, n)| n.is_switch()) {
        let Some(out) = f.lft(s).and_then(|l| l.get(usize::from(dlid)).copied()) else {
            continue;
        };
        if out == 0 {
            if owner == Some((s, 0)) {
                dist.insert(s, 0);
                q.push_back(s);
            }
            continue;
        }
        if out > n.num_ports() {
            continue;
        }
        match t.neighbor(s, out) {
            Some((r, _)) if t.node(r).unwrap().is_switch() => pred.entry(r).or_default().push(s),
            Some((r, rp)) if owner == Some((r, rp)) => {
                dist.insert(s, 1);
                q.push_back(s);
            }
            _ => {}
        }
    }
    while let Some(v) = q.pop_front() {
        let dv = dist[&v];
        for &u in pred.get(&v).map_or(&[][..], Vec::as_slice) {
            if let std::collections::hash_map::Entry::Vacant(e) = dist.entry(u) {
                e.insert(dv + 1);
                q.push_back(u);
            }
        }
    }
    dist
}

/// MTU and rate over the cables of a walk, straight from the ports.
fn brute_min(t: &Topology, p: &Path) -> (u8, Rate) {
    let mut cables = Vec::new();
    if !t.node(p.source.0).unwrap().is_switch() {
        cables.push(p.source);
    }
    cables.extend(
        p.hops
            .iter()
            .filter(|h| h.out_port != 0)
            .map(|h| (h.switch, h.out_port)),
    );
    let mut mtu = u8::MAX;
    let mut rate = Rate::GBPS_1200;
    for (n, port) in cables {
        let a = &t.node(n).unwrap().ports[usize::from(port)];
        let (r, rp) = a.remote.unwrap();
        let b = &t.node(r).unwrap().ports[usize::from(rp)];
        mtu = mtu.min(a.mtu).min(b.mtu);
        rate = rate
            .min(Rate::of_link(a.link_width, a.link_speed))
            .min(Rate::of_link(b.link_width, b.link_speed));
    }
    (mtu, rate)
}

/// Every (end port, owned DLID): walk vs BFS vs table.
fn check_all(t: &Topology, f: &ForwardingTables) -> (usize, usize) {
    let lids = LidIndex::new(t);
    let table = PathTable::new(t, f);
    let eps = end_ports(t);
    let (mut ok, mut failed) = (0, 0);
    for dlid in lids.lids() {
        let bfs = brute_links(t, f, dlid);
        let owner = lids.owner(dlid).unwrap();
        for &src in &eps {
            let w = walk(t, f, src, dlid);
            let tab = table.summary(t, f, src, dlid);
            assert_eq!(
                tab,
                w.as_ref().map(|p| p.summary).map_err(Clone::clone),
                "{src:?} -> {dlid}"
            );
            let is_switch = t.node(src.0).unwrap().is_switch();
            // The BFS answer for this source.
            let expect: Option<u16> = if src == owner {
                Some(0)
            } else if is_switch {
                bfs.get(&src.0).copied()
            } else {
                match t.neighbor(src.0, src.1) {
                    None => None,
                    Some(r) if r == owner => Some(1),
                    Some((r, _)) => bfs.get(&r).map(|d| d + 1),
                }
            };
            match (&w, expect) {
                (Ok(p), Some(links)) => {
                    ok += 1;
                    assert_eq!(p.summary.links, links);
                    assert_eq!(p.destination, owner);
                    // Every hop is the LFT entry for exactly this DLID, entered
                    // over the previous hop's cable.
                    let mut prev = if is_switch {
                        None
                    } else {
                        t.neighbor(src.0, src.1)
                    };
                    for h in &p.hops {
                        let lft = f.lft(h.switch).unwrap();
                        assert_eq!(lft[usize::from(dlid)], h.out_port);
                        match prev {
                            Some((n, port)) => assert_eq!((n, port), (h.switch, h.in_port)),
                            None => assert_eq!((h.switch, h.in_port), (src.0, 0)),
                        }
                        prev = t.neighbor(h.switch, h.out_port);
                    }
                    if links > 0 {
                        assert_eq!((p.summary.mtu, p.summary.rate), brute_min(t, p));
                    }
                }
                (Err(_), None) => failed += 1,
                (w, e) => panic!("{src:?} -> {dlid:#x}: walk {w:?}, BFS {e:?}"),
            }
        }
    }
    (ok, failed)
}

#[test]
fn routed_fat_tree_every_pair_agrees() {
    let (mut t, f) = routed(gen::fat_tree_2level(8).unwrap(), 0);
    vary_links(&mut t, 7);
    let (ok, failed) = check_all(&t, &f);
    assert_eq!(failed, 0);
    assert_eq!(ok, (32 + 12) * (32 + 12));
}

#[test]
fn mtu_and_rate_are_the_minimum_on_the_way() {
    let (mut t, f) = routed(gen::fat_tree_2level(4).unwrap(), 0);
    let lids = LidIndex::new(&t);
    let hcas: Vec<_> = end_ports(&t)
        .into_iter()
        .filter(|&(n, _)| !t.node(n).unwrap().is_switch())
        .collect();
    let (a, b) = (hcas[0], hcas[hcas.len() - 1]);
    let dlid = t.node(b.0).unwrap().ports[1].lid;
    let p = walk(&t, &f, a, dlid).unwrap();
    assert_eq!(p.summary.links, 4);
    assert_eq!(p.summary.mtu, MTU_2048);
    assert_eq!(p.summary.rate, Rate::GBPS_10);
    // Slow down one spine cable of the path and shrink the far HCA's MTU.
    let mid = p.hops[1];
    t.set_link_rate(mid.switch, mid.out_port, LinkWidth::X1, LinkSpeed::Sdr)
        .unwrap();
    t.set_port_mtu(b.0, 1, MTU_1024).unwrap();
    let q = walk(&t, &f, a, dlid).unwrap();
    assert_eq!(q.summary.rate, Rate::GBPS_2_5);
    assert_eq!(q.summary.mtu, MTU_1024);
    let pp = path_params(&t, &f, &lids, t.node(a.0).unwrap().ports[1].lid, dlid).unwrap();
    assert!(pp.reversible);
    assert_eq!(pp.summary, q.summary);
    let table = PathTable::new(&t, &f);
    assert_eq!(table.path_params(&t, &f, pp.slid, dlid), Ok(pp));
    // To itself: no cable, the port's own numbers.
    let me = walk(&t, &f, b, dlid).unwrap();
    assert_eq!(me.summary.links, 0);
    assert_eq!(me.summary.mtu, MTU_1024);
    assert!(me.hops.is_empty());
}

#[test]
fn errors_are_typed() {
    let (mut t, mut f) = routed(gen::fat_tree_2level(4).unwrap(), 0);
    let hcas: Vec<_> = end_ports(&t)
        .into_iter()
        .filter(|&(n, _)| !t.node(n).unwrap().is_switch())
        .collect();
    let (a, b) = (hcas[0], hcas[hcas.len() - 1]);
    let dlid = t.node(b.0).unwrap().ports[1].lid;
    let slid = t.node(a.0).unwrap().ports[1].lid;
    let leaf = t.neighbor(a.0, 1).unwrap().0;
    let lids = LidIndex::new(&t);
    assert_eq!(walk(&t, &f, a, 0), Err(PathError::NotUnicast(0)));
    assert_eq!(walk(&t, &f, a, 0xC000), Err(PathError::NotUnicast(0xC000)));
    assert_eq!(
        walk(&t, &f, (leaf, 1), dlid),
        Err(PathError::NotEndPort {
            node: leaf,
            port: 1
        })
    );
    assert_eq!(
        walk(&t, &f, (a.0, 0), dlid),
        Err(PathError::NotEndPort { node: a.0, port: 0 })
    );
    assert_eq!(
        walk(&t, &f, (a.0, 9), dlid),
        Err(PathError::NoSuchPort { node: a.0, port: 9 })
    );
    assert_eq!(
        walk(&t, &f, (NodeIdx(999), 1), dlid),
        Err(PathError::NoSuchNode(NodeIdx(999)))
    );
    assert_eq!(
        path_params(&t, &f, &lids, 0x7777, dlid),
        Err(PathError::UnknownLid(0x7777))
    );
    // Beyond LinearFDBTop.
    assert_eq!(
        walk(&t, &f, a, 0x7777),
        Err(PathError::NoRoute {
            switch: leaf,
            dlid: 0x7777
        })
    );
    // A loop: the leaf sends it up, the spine sends it back down.
    let up = f.lft(leaf).unwrap()[usize::from(dlid)];
    let (spine, sp) = t.neighbor(leaf, up).unwrap();
    let good = f.clone();
    f.lfts[spine.as_usize()].as_mut().unwrap()[usize::from(dlid)] = sp;
    assert_eq!(
        walk(&t, &f, a, dlid),
        Err(PathError::Loop { switch: leaf, dlid })
    );
    // The reverse direction still works, so b -> a is not reversible.
    assert!(walk(&t, &f, b, slid).is_ok());
    assert!(
        !path_params(&t, &f, &lids, t.node(b.0).unwrap().ports[1].lid, slid)
            .unwrap()
            .reversible
    );
    // Port 0 of a switch that does not own the LID; a port it does not have.
    f.lfts[spine.as_usize()].as_mut().unwrap()[usize::from(dlid)] = 0;
    assert_eq!(
        walk(&t, &f, a, dlid),
        Err(PathError::DeadEnd {
            switch: spine,
            port: 0,
            dlid
        })
    );
    f.lfts[spine.as_usize()].as_mut().unwrap()[usize::from(dlid)] = 77;
    assert_eq!(
        walk(&t, &f, a, dlid),
        Err(PathError::DeadEnd {
            switch: spine,
            port: 77,
            dlid
        })
    );
    // Delivered to the wrong HCA.
    let other = t.neighbor(leaf, 1).unwrap();
    let mut g = good.clone();
    g.lfts[leaf.as_usize()].as_mut().unwrap()[usize::from(dlid)] = 1;
    if other != a {
        assert_eq!(
            walk(&t, &g, a, dlid),
            Err(PathError::WrongDestination {
                node: other.0,
                port: other.1,
                dlid
            })
        );
    }
    // No table.
    let mut g = good.clone();
    g.lfts[spine.as_usize()] = None;
    assert_eq!(walk(&t, &g, a, dlid), Err(PathError::NoTable(spine)));
    // Port down: the uplink pulled after routing, then the HCA's own cable.
    t.disconnect(leaf, up).unwrap();
    assert_eq!(
        walk(&t, &good, a, dlid),
        Err(PathError::PortDown {
            node: leaf,
            port: up
        })
    );
    t.disconnect(a.0, 1).unwrap();
    assert_eq!(
        walk(&t, &good, a, dlid),
        Err(PathError::PortDown { node: a.0, port: 1 })
    );
    let table = PathTable::new(&t, &good);
    assert_eq!(
        table.summary(&t, &good, a, dlid),
        Err(PathError::PortDown { node: a.0, port: 1 })
    );
    let mut bigger = t.clone();
    bigger
        .add_node(crate::Node::new(crate::NodeType::Ca, 0xfeed_0000, 1, "x"))
        .unwrap();
    assert!(matches!(
        table.summary(&bigger, &good, a, dlid),
        Err(PathError::TopologyChanged { .. })
    ));
}

#[test]
fn lmc_paths_use_the_exact_dlid() {
    let (t, f) = routed(gen::fat_tree_2level(8).unwrap(), 2);
    let table = PathTable::new(&t, &f);
    let eps = end_ports(&t);
    let hcas: Vec<_> = eps
        .iter()
        .copied()
        .filter(|&(n, _)| !t.node(n).unwrap().is_switch())
        .collect();
    let (a, b) = (hcas[0], hcas[hcas.len() - 1]);
    let base = t.node(b.0).unwrap().ports[1].lid;
    let mut spines = std::collections::BTreeSet::new();
    for k in 0..4 {
        let p = walk(&t, &f, a, base + k).unwrap();
        assert_eq!(p.destination, b);
        assert_eq!(
            p.hops[0].out_port,
            f.lft(p.hops[0].switch).unwrap()[usize::from(base + k)]
        );
        spines.insert(p.hops[1].switch);
        assert_eq!(table.summary(&t, &f, a, base + k), Ok(p.summary));
    }
    // The four LIDs of one port leave over four different spines.
    assert_eq!(spines.len(), 4);
    assert_eq!(check_all(&t, &f).1, 0);
}

#[test]
fn tables_by_guid_walk_the_same() {
    let (t, f) = routed(gen::fat_tree_2level(4).unwrap(), 0);
    let by_guid: HashMap<u64, Vec<u8>> = t
        .iter()
        .filter_map(|(i, n)| Some((n.node_guid, f.lft(i)?.to_vec())))
        .collect();
    let lfts = LftsByGuid::new(&t, |g| by_guid.get(&g).map(Vec::as_slice));
    let lids = LidIndex::new(&t);
    for src in end_ports(&t) {
        for dlid in lids.lids() {
            assert_eq!(walk(&t, &lfts, src, dlid), walk(&t, &f, src, dlid));
        }
    }
    // A CA has no table through the adapter.
    let ca = end_ports(&t)
        .into_iter()
        .find(|&(n, _)| !t.node(n).unwrap().is_switch())
        .unwrap();
    assert!(lfts.lft(ca.0).is_none());
    assert_eq!(
        PathTable::new(&t, &lfts).summary(&t, &lfts, ca, lids.lids().last().unwrap()),
        PathTable::new(&t, &f).summary(&t, &f, ca, lids.lids().last().unwrap())
    );
}

#[test]
fn table_for_some_dlids_walks_for_the_rest() {
    let (t, f) = routed(gen::fat_tree_2level(4).unwrap(), 0);
    let lids = LidIndex::new(&t);
    let some: Vec<u16> = lids.lids().step_by(3).collect();
    let table = PathTable::for_dlids(&t, &f, some.iter().copied().chain([0x9999]));
    assert_eq!(table.dlids(), &some[..]);
    for src in end_ports(&t) {
        for dlid in lids.lids() {
            assert_eq!(
                table.summary(&t, &f, src, dlid),
                walk(&t, &f, src, dlid).map(|p| p.summary)
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Random fabrics, routed, then damaged: random LFT entries overwritten
    /// (0, 0xFF, real and missing ports), tables dropped, cables pulled.
    #[test]
    fn damaged_tables_walks_bfs_and_table_agree(
        seed in any::<u64>(),
        sw in 1u32..9,
        hcas in 1u32..12,
        lmc in 0u8..3,
        damage in 0usize..40,
        cuts in 0usize..3,
    ) {
        let Ok(t) = gen::random(seed, sw, hcas, 8) else { return Ok(()) };
        let (mut t, mut f) = routed(t, lmc);
        vary_links(&mut t, seed);
        let mut rng = SplitMix64::new(seed ^ 0xbad);
        let switches: Vec<NodeIdx> =
            t.iter().filter(|(_, n)| n.is_switch()).map(|(i, _)| i).collect();
        for _ in 0..damage {
            let s = switches[rng.below(switches.len() as u64) as usize];
            let Some(lft) = f.lfts[s.as_usize()].as_mut() else { continue };
            if lft.is_empty() {
                continue;
            }
            let i = rng.below(lft.len() as u64) as usize;
            lft[i] = match rng.below(4) {
                0 => 0,
                1 => UNREACHABLE,
                _ => rng.below(11) as u8,
            };
        }
        if damage % 7 == 3 {
            let s = switches[rng.below(switches.len() as u64) as usize];
            f.lfts[s.as_usize()] = None;
        }
        let links: Vec<_> = t.links().collect();
        for _ in 0..cuts.min(links.len()) {
            let ((a, pa), _) = links[rng.below(links.len() as u64) as usize];
            t.disconnect(a, pa).unwrap();
        }
        check_all(&t, &f);
    }
}
