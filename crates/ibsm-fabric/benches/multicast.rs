//! Multicast trees and MFT blocks on 3-level fat trees (k = 16, 24): the
//! per-topology precomputation, 100 groups of 64 random HCAs (a mix of join
//! states) plus the all-HCA broadcast group, the MFT set of all of them, and one
//! join's recompute + diff. `cargo bench -p ibsm-fabric --bench multicast`
//! prints a table; `MCAST_K=16,24,32` picks the sizes.

use std::time::{Duration, Instant};

use ibsm_fabric::gen::{self, SplitMix64};
use ibsm_fabric::multicast::{
    changed_blocks, JoinState, McastFabric, McastMember, McastTree, MftSet, TreeOptions, MLID_BASE,
};
use ibsm_fabric::{NodeIdx, NodeType, Topology};

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn groups(t: &Topology, n: usize, size: usize, seed: u64) -> Vec<Vec<McastMember>> {
    let hcas: Vec<NodeIdx> = t
        .iter()
        .filter(|(_, n)| n.node_type == NodeType::Ca)
        .map(|(i, _)| i)
        .collect();
    let mut rng = SplitMix64::new(seed);
    let mut out = vec![hcas
        .iter()
        .map(|&h| McastMember::new((h, 1), JoinState::FULL_MEMBER))
        .collect()];
    for _ in 0..n {
        out.push(
            (0..size)
                .map(|_| {
                    let h = hcas[rng.below(hcas.len() as u64) as usize];
                    let join = match rng.below(4) {
                        0 => JoinState::SEND_ONLY_NON_MEMBER,
                        1 => JoinState::NON_MEMBER,
                        _ => JoinState::FULL_MEMBER,
                    };
                    McastMember::new((h, 1), join)
                })
                .collect(),
        );
    }
    out
}

fn main() {
    let ks: Vec<u32> = std::env::var("MCAST_K")
        .ok()
        .map(|v| v.split(',').filter_map(|s| s.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![16, 24]);
    println!(
        "{:>4} {:>6} {:>5} {:>7} {:>10} {:>10} {:>11} {:>9} {:>10} {:>8}",
        "k",
        "HCAs",
        "sw",
        "groups",
        "fabric ms",
        "trees ms",
        "bcast ms",
        "MFT ms",
        "1 join ms",
        "writes"
    );
    for k in ks {
        let t = match gen::fat_tree_3level(k) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("k={k}: {e}");
                continue;
            }
        };
        let c = t.counts();
        let gs = groups(&t, 100, 64, u64::from(k));
        let t0 = Instant::now();
        let f = match McastFabric::new(&t) {
            Ok(f) => f,
            Err(e) => {
                eprintln!("k={k}: {e}");
                continue;
            }
        };
        let t_fabric = t0.elapsed();
        let t0 = Instant::now();
        let bcast = f.tree(&t, &gs[0], &TreeOptions { spread: 0 });
        let t_bcast = t0.elapsed();
        let t0 = Instant::now();
        let trees: Vec<McastTree> = gs
            .iter()
            .enumerate()
            .filter_map(|(i, m)| {
                f.tree(
                    &t,
                    m,
                    &TreeOptions {
                        spread: u64::from(MLID_BASE) + i as u64,
                    },
                )
                .ok()
            })
            .collect();
        let t_trees = t0.elapsed();
        let t0 = Instant::now();
        let set = MftSet::build(
            &t,
            trees
                .iter()
                .enumerate()
                .map(|(i, tr)| (MLID_BASE + i as u16, tr)),
        );
        let t_mft = t0.elapsed();
        let Ok(set) = set else {
            eprintln!("k={k}: MFT set failed");
            continue;
        };
        // One more member joins group 7: recompute that tree, update, diff.
        let t0 = Instant::now();
        let mut joined = gs[7].clone();
        joined.push(McastMember::new((NodeIdx(0), 1), JoinState::FULL_MEMBER));
        let mut next = set.clone();
        let mut writes = 0;
        if let Ok(tr) = f.tree(
            &t,
            &joined,
            &TreeOptions {
                spread: u64::from(MLID_BASE) + 7,
            },
        ) {
            if next.set_group(&t, MLID_BASE + 7, &tr).is_ok() {
                writes = changed_blocks(&set, &next).len();
            }
        }
        let t_join = t0.elapsed();
        let bcast_sw = bcast.map_or(0, |b| b.per_switch.len());
        println!(
            "{:>4} {:>6} {:>5} {:>7} {:>10.2} {:>10.2} {:>11.3} {:>9.2} {:>10.3} {:>8}",
            k,
            c.hcas,
            c.switches,
            trees.len(),
            ms(t_fabric),
            ms(t_trees),
            ms(t_bcast),
            ms(t_mft),
            ms(t_join),
            writes,
        );
        eprintln!(
            "  broadcast tree: {bcast_sw} switches; full MFT programming: {} SubnSets",
            set.writes().len()
        );
    }
}
