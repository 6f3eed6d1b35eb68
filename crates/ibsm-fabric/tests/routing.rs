//! Routing engines on generated fat trees and seeded random fabrics:
//! reachability by walking the LFTs, minimal hop counts, balancing,
//! deadlock freedom (and a CDG checker that does find cycles).

use std::collections::{HashMap, HashSet, VecDeque};

use ibsm_fabric::gen;
use ibsm_fabric::lid::{LidConfig, LidManager};
use ibsm_fabric::routing::{
    self, auto_roots, check_deadlock_free, min_hop, unreachable_pairs, up_down,
    verify_all_reachable, walk, ForwardingTables, RoutingError, RoutingOptions, WalkError,
};
use ibsm_fabric::{Node, NodeIdx, NodeType, Topology};

fn with_lids(mut t: Topology, lmc: u8) -> Topology {
    LidManager::new(LidConfig { lmc }).assign(&mut t).unwrap();
    t
}

fn opts() -> RoutingOptions {
    RoutingOptions::default()
}

/// Switch-graph hop counts from `s`, by plain BFS (independent of the engine).
fn switch_hops(t: &Topology, s: NodeIdx) -> HashMap<NodeIdx, usize> {
    let mut d = HashMap::from([(s, 0)]);
    let mut q = VecDeque::from([s]);
    while let Some(v) = q.pop_front() {
        let dv = d[&v];
        for (_, p) in t.node(v).unwrap().physical_ports() {
            if let Some((r, _)) = p.remote {
                if t.node(r).unwrap().is_switch() && !d.contains_key(&r) {
                    d.insert(r, dv + 1);
                    q.push_back(r);
                }
            }
        }
    }
    d
}

/// The switch a LID sits behind, and the number of switch hops to it.
fn lid_switch(t: &Topology, lid: u16) -> NodeIdx {
    for (idx, n) in t.iter() {
        if n.is_switch() && n.ports[0].lid == lid {
            return idx;
        }
        if !n.is_switch() {
            for (_, p) in n.physical_ports() {
                if p.lid != 0 && lid >= p.lid && lid < p.lid + (1 << p.lmc) {
                    return p.remote.unwrap().0;
                }
            }
        }
    }
    panic!("no owner for {lid}")
}

fn all_lids(t: &Topology) -> Vec<u16> {
    let mut v = Vec::new();
    for (_, n) in t.iter() {
        if n.is_switch() {
            v.push(n.ports[0].lid);
        } else {
            for (_, p) in n.physical_ports() {
                if p.remote.is_some() && p.lid != 0 {
                    v.extend(p.lid..p.lid + (1 << p.lmc));
                }
            }
        }
    }
    v
}

fn fabrics() -> Vec<(String, Topology)> {
    let mut v = vec![
        ("ft2-8".to_string(), gen::fat_tree_2level(8).unwrap()),
        ("ft3-4".to_string(), gen::fat_tree_3level(4).unwrap()),
        ("ft3-6".to_string(), gen::fat_tree_3level(6).unwrap()),
    ];
    for seed in 0..8u64 {
        v.push((
            format!("random-{seed}"),
            gen::random(seed, 6 + seed as u32 * 3, 30, 8).unwrap(),
        ));
    }
    v
}

#[test]
fn min_hop_reaches_every_lid_from_every_switch_by_a_shortest_path() {
    for (name, t) in fabrics() {
        for lmc in [0u8, 1] {
            let t = with_lids(t.clone(), lmc);
            let f = min_hop(&t, &opts()).unwrap();
            let pairs = verify_all_reachable(&t, &f).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(pairs > 0);
            let lids = all_lids(&t);
            assert_eq!(f.lft_top, *lids.iter().max().unwrap());
            for (s, n) in t.iter() {
                if !n.is_switch() {
                    assert!(f.lfts[s.as_usize()].is_none());
                    continue;
                }
                let hops = switch_hops(&t, s);
                for &lid in &lids {
                    let path = walk(&t, &f, s, lid).unwrap();
                    let switch_hops_taken = path
                        .iter()
                        .filter(|(x, _)| t.node(*x).unwrap().is_switch())
                        .count()
                        - 1;
                    assert_eq!(
                        switch_hops_taken,
                        hops[&lid_switch(&t, lid)],
                        "{name} lmc {lmc}: {s} -> {lid} not minimal: {path:?}"
                    );
                }
            }
        }
    }
}

#[test]
fn results_do_not_depend_on_thread_count() {
    for (name, t) in fabrics() {
        let t = with_lids(t, 1);
        let one = RoutingOptions { threads: 1 };
        let three = RoutingOptions { threads: 3 };
        assert_eq!(
            min_hop(&t, &one).unwrap(),
            min_hop(&t, &three).unwrap(),
            "{name}"
        );
        assert_eq!(
            up_down(&t, None, &one).unwrap(),
            up_down(&t, None, &three).unwrap(),
            "{name}"
        );
    }
}

/// Up/down is deadlock-free everywhere; every CA LID is reachable from
/// every switch and every LID from every CA-attached switch; whatever is
/// unreachable is a switch LID seen from a switch without CAs.
#[test]
fn up_down_is_deadlock_free_and_reaches_hosts() {
    for (name, t) in fabrics() {
        for lmc in [0u8, 2] {
            let t = with_lids(t.clone(), lmc);
            let f = up_down(&t, None, &opts()).unwrap();
            if let Err(cycle) = check_deadlock_free(&t, &f) {
                panic!("{name}: up/down CDG cycle {cycle:?}");
            }
            for (s, lid, e) in unreachable_pairs(&t, &f) {
                let from = t.node(s).unwrap();
                let has_ca = from.physical_ports().any(|(_, p)| {
                    p.remote
                        .is_some_and(|(r, _)| !t.node(r).unwrap().is_switch())
                });
                let target = t.node(lid_switch(&t, lid)).unwrap();
                assert!(
                    !has_ca && target.ports[0].lid == lid,
                    "{name}: {s} cannot reach {lid}: {e}"
                );
                assert!(matches!(e, WalkError::Unreachable { .. }), "{e}");
            }
        }
    }
}

#[test]
fn up_down_auto_roots_are_the_top_of_a_fat_tree() {
    let t = with_lids(gen::fat_tree_3level(4).unwrap(), 0);
    let mut roots = auto_roots(&t).unwrap();
    roots.sort_unstable();
    let mut cores: Vec<u64> = t
        .nodes()
        .iter()
        .filter(|n| n.name.starts_with("core-"))
        .map(|n| n.node_guid)
        .collect();
    cores.sort_unstable();
    assert_eq!(roots, cores);
    // Giving the same roots explicitly gives the same tables.
    assert_eq!(
        up_down(&t, Some(&cores), &opts()).unwrap(),
        up_down(&t, None, &opts()).unwrap()
    );
    let t2 = with_lids(gen::fat_tree_2level(6).unwrap(), 0);
    let spines: HashSet<u64> = t2
        .nodes()
        .iter()
        .filter(|n| n.name.starts_with("spine-"))
        .map(|n| n.node_guid)
        .collect();
    assert_eq!(
        auto_roots(&t2).unwrap().into_iter().collect::<HashSet<_>>(),
        spines
    );
    // In a 2-level fat tree with spine roots, every leaf reaches everything.
    let f = up_down(&t2, None, &opts()).unwrap();
    for (s, n) in t2.iter() {
        if n.name.starts_with("leaf-") {
            for lid in all_lids(&t2) {
                walk(&t2, &f, s, lid).unwrap();
            }
        }
    }
}

#[test]
fn up_down_with_explicit_roots_and_bad_roots() {
    let t = with_lids(gen::random(7, 12, 20, 8).unwrap(), 0);
    let root = t.nodes().iter().find(|n| n.is_switch()).unwrap().node_guid;
    let f = up_down(&t, Some(&[root]), &opts()).unwrap();
    assert!(check_deadlock_free(&t, &f).is_ok());
    // A single root connects everything, switch LIDs included.
    verify_all_reachable(&t, &f).unwrap();
    assert_eq!(
        up_down(&t, Some(&[0xdead]), &opts()).unwrap_err(),
        RoutingError::UnknownRoot(0xdead)
    );
    let hca = t.nodes().iter().find(|n| !n.is_switch()).unwrap().node_guid;
    assert_eq!(
        up_down(&t, Some(&[hca]), &opts()).unwrap_err(),
        RoutingError::RootNotSwitch(hca)
    );
}

/// A ring of `n` switches, one HCA each.
fn ring(n: u64) -> Topology {
    let mut t = Topology::new();
    let sws: Vec<NodeIdx> = (0..n)
        .map(|i| {
            t.add_node(Node::new(NodeType::Switch, 0x1000 + i, 4, "sw"))
                .unwrap()
        })
        .collect();
    for i in 0..n as usize {
        let h = t
            .add_node(Node::new(NodeType::Ca, 0x10_0000 + 16 * i as u64, 1, "h"))
            .unwrap();
        t.connect(sws[i], 3, h, 1).unwrap();
        t.connect(sws[i], 1, sws[(i + 1) % n as usize], 2).unwrap();
    }
    t
}

fn assert_is_cycle(t: &Topology, cycle: &[(NodeIdx, u8)]) {
    assert!(cycle.len() >= 2, "{cycle:?}");
    for (i, &(node, port)) in cycle.iter().enumerate() {
        let (next_node, _) = cycle[(i + 1) % cycle.len()];
        assert_eq!(t.neighbor(node, port).unwrap().0, next_node, "{cycle:?}");
    }
}

#[test]
fn cdg_checker_finds_min_hop_cycles_that_up_down_avoids() {
    let t = with_lids(ring(6), 0);
    let mh = min_hop(&t, &opts()).unwrap();
    verify_all_reachable(&t, &mh).unwrap();
    let cycle = check_deadlock_free(&t, &mh).unwrap_err();
    assert_is_cycle(&t, &cycle);
    let ud = up_down(&t, None, &opts()).unwrap();
    check_deadlock_free(&t, &ud).unwrap();
    verify_all_reachable(&t, &ud).unwrap();

    // Torus-like random fabrics: min-hop deadlocks on some, up/down never.
    let mut cyclic = 0;
    for seed in 0..12 {
        let t = with_lids(gen::random(seed, 16, 24, 8).unwrap(), 0);
        let mh = min_hop(&t, &opts()).unwrap();
        if let Err(c) = check_deadlock_free(&t, &mh) {
            assert_is_cycle(&t, &c);
            cyclic += 1;
        }
        let ud = up_down(&t, None, &opts()).unwrap();
        assert!(check_deadlock_free(&t, &ud).is_ok(), "seed {seed}");
    }
    assert!(cyclic > 0, "no random fabric had a min-hop CDG cycle");
}

/// Ports of `s` that lead to a switch.
fn uplinks(t: &Topology, s: NodeIdx) -> HashSet<u8> {
    t.node(s)
        .unwrap()
        .physical_ports()
        .filter(|(_, p)| {
            p.remote
                .is_some_and(|(r, _)| t.node(r).unwrap().is_switch())
        })
        .map(|(n, _)| n)
        .collect()
}

fn check_balance(t: &Topology, f: &ForwardingTables, engine: &str) {
    for (leaf, n) in t.iter() {
        if !n.name.starts_with("leaf-") {
            continue;
        }
        let ups = uplinks(t, leaf);
        assert_eq!(ups.len(), 4);
        let lft = f.lft(leaf).unwrap();
        // The 4 LIDs of every remote HCA leave over 4 different uplinks.
        for (h, hn) in t.iter() {
            if hn.is_switch() || hn.ports[1].remote.unwrap().0 == leaf {
                continue;
            }
            let base = hn.ports[1].lid;
            let ports: HashSet<u8> = (base..base + 4).map(|l| lft[usize::from(l)]).collect();
            assert_eq!(ports.len(), 4, "{engine}: {h} from {leaf}");
            assert!(ports.is_subset(&ups));
        }
        // Per-uplink load of LIDs is even within 1.
        let mut load: HashMap<u8, usize> = ups.iter().map(|&p| (p, 0)).collect();
        for &e in lft.iter() {
            if let Some(c) = load.get_mut(&e) {
                *c += 1;
            }
        }
        let max = load.values().max().unwrap();
        let min = load.values().min().unwrap();
        assert!(max - min <= 1, "{engine}: leaf {leaf} load {load:?}");
        assert!(*min > 0);
    }
}

#[test]
fn lmc_paths_spread_over_uplinks_and_load_is_even() {
    let t = with_lids(gen::fat_tree_2level(8).unwrap(), 2);
    check_balance(&t, &min_hop(&t, &opts()).unwrap(), "min-hop");
    check_balance(&t, &up_down(&t, None, &opts()).unwrap(), "up/down");
}

#[test]
fn bad_lids_are_refused() {
    let mut t = with_lids(gen::fat_tree_2level(4).unwrap(), 0);
    let a = t.find_by_name("hca-0").unwrap();
    let b = t.find_by_name("hca-1").unwrap();
    let lid = t.node(a).unwrap().ports[1].lid;
    t.set_port_lid(b, 1, lid, 0).unwrap();
    assert!(matches!(
        min_hop(&t, &opts()).unwrap_err(),
        RoutingError::DuplicateLid { first, second, .. } if first == (a, 1) && second == (b, 1)
    ));
    t.set_port_lid(b, 1, 0xC000, 0).unwrap();
    assert!(matches!(
        up_down(&t, None, &opts()).unwrap_err(),
        RoutingError::BadLid { lid: 0xC000, .. }
    ));
    t.set_port_lid(b, 1, 5, 1).unwrap();
    assert!(matches!(
        min_hop(&t, &opts()).unwrap_err(),
        RoutingError::BadLid { .. }
    ));
    // An empty topology routes to nothing.
    let f = min_hop(&Topology::new(), &opts()).unwrap();
    assert!(f.lfts.is_empty());
    assert_eq!(routing::UNREACHABLE, 0xFF);
}

#[test]
fn walk_reports_broken_tables() {
    let t = with_lids(gen::fat_tree_2level(4).unwrap(), 0);
    let mut f = min_hop(&t, &opts()).unwrap();
    let leaf = t.find_by_name("leaf-0").unwrap();
    let h = t.find_by_name("hca-7").unwrap();
    let lid = t.node(h).unwrap().ports[1].lid;
    // From an HCA: first hop out of its port, ending at the owner.
    let src = t.find_by_name("hca-0").unwrap();
    let path = walk(&t, &f, src, lid).unwrap();
    assert_eq!(path.first(), Some(&(src, 1)));
    assert_eq!(path.last(), Some(&(h, 1)));
    let lft = f.lfts[leaf.as_usize()].as_mut().unwrap();
    lft[usize::from(lid)] = 0xFF;
    assert_eq!(
        walk(&t, &f, leaf, lid).unwrap_err(),
        WalkError::Unreachable {
            at: leaf,
            dlid: lid
        }
    );
    assert!(verify_all_reachable(&t, &f).is_err());
    // Send it back down to a local HCA: wrong node.
    let lft = f.lfts[leaf.as_usize()].as_mut().unwrap();
    lft[usize::from(lid)] = 1;
    assert!(matches!(
        walk(&t, &f, leaf, lid).unwrap_err(),
        WalkError::WrongNode { .. }
    ));
    // Bounce between leaf-0 and spine-0: a loop.
    let spine = t.find_by_name("spine-0").unwrap();
    let up = (1..=4u8)
        .find(|&p| t.neighbor(leaf, p).map(|r| r.0) == Some(spine))
        .unwrap();
    let down = t.neighbor(leaf, up).unwrap().1;
    f.lfts[leaf.as_usize()].as_mut().unwrap()[usize::from(lid)] = up;
    f.lfts[spine.as_usize()].as_mut().unwrap()[usize::from(lid)] = down;
    assert_eq!(
        walk(&t, &f, leaf, lid).unwrap_err(),
        WalkError::Loop {
            from: leaf,
            dlid: lid
        }
    );
}
