//! All-to-all PathRecords on 3-level fat trees routed min-hop (k = 16 by
//! default: 1,024 HCAs, 1M pairs): building the [`PathTable`], then every
//! (HCA, HCA LID) pair by table lookup, with Reversible (two lookups a pair), and
//! the same pairs by walking. `cargo bench -p ibsm-fabric --bench path`;
//! `PATH_K=16,24` picks the sizes.

use std::time::{Duration, Instant};

use ibsm_fabric::gen;
use ibsm_fabric::lid::{LidConfig, LidManager};
use ibsm_fabric::path::{walk, PathTable};
use ibsm_fabric::routing::{self, RoutingOptions};
use ibsm_fabric::{NodeIdx, NodeType};

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() {
    let ks: Vec<u32> = std::env::var("PATH_K")
        .ok()
        .map(|v| v.split(',').filter_map(|s| s.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![16]);
    println!(
        "{:>4} {:>6} {:>6} {:>9} {:>9} {:>10} {:>11} {:>10} {:>8}",
        "k", "HCAs", "LIDs", "pairs", "table ms", "lookup ms", "+reverse ms", "walk ms", "failed"
    );
    for k in ks {
        let mut t = match gen::fat_tree_3level(k) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("k={k}: {e}");
                continue;
            }
        };
        if let Err(e) = LidManager::new(LidConfig { lmc: 0 }).assign(&mut t) {
            eprintln!("k={k}: {e}");
            continue;
        }
        let f = match routing::min_hop(&t, &RoutingOptions::default()) {
            Ok(f) => f,
            Err(e) => {
                eprintln!("k={k}: {e}");
                continue;
            }
        };
        let hcas: Vec<(NodeIdx, u16)> = t
            .iter()
            .filter(|(_, n)| n.node_type == NodeType::Ca)
            .filter_map(|(i, n)| Some((i, n.port(1)?.lid)))
            .collect();
        let t0 = Instant::now();
        let table = PathTable::new(&t, &f);
        let t_table = t0.elapsed();
        let mut failed = 0usize;
        let mut links = 0u64;
        let t0 = Instant::now();
        for &(src, _) in &hcas {
            for &(_, dlid) in &hcas {
                match table.summary(&t, &f, (src, 1), dlid) {
                    Ok(s) => links += u64::from(s.links),
                    Err(_) => failed += 1,
                }
            }
        }
        let t_lookup = t0.elapsed();
        let t0 = Instant::now();
        let mut reversible = 0usize;
        for &(_, slid) in &hcas {
            for &(_, dlid) in &hcas {
                if table
                    .path_params(&t, &f, slid, dlid)
                    .is_ok_and(|p| p.reversible)
                {
                    reversible += 1;
                }
            }
        }
        let t_params = t0.elapsed();
        let t0 = Instant::now();
        let mut walked = 0u64;
        for &(src, _) in &hcas {
            for &(_, dlid) in &hcas {
                if let Ok(p) = walk(&t, &f, (src, 1), dlid) {
                    walked += u64::from(p.summary.links);
                }
            }
        }
        let t_walk = t0.elapsed();
        let pairs = hcas.len() * hcas.len();
        println!(
            "{:>4} {:>6} {:>6} {:>9} {:>9.1} {:>10.1} {:>11.1} {:>10.1} {:>8}",
            k,
            hcas.len(),
            table.dlids().len(),
            pairs,
            ms(t_table),
            ms(t_lookup),
            ms(t_params),
            ms(t_walk),
            failed
        );
        if walked != links || reversible + failed != pairs {
            eprintln!("k={k}: table and walks disagree ({links} vs {walked} cables)");
        }
    }
}
