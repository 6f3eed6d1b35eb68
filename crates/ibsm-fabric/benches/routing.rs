//! LID assignment and routing on 3-level fat trees (k = 16, 32, 58).
//! `cargo bench -p ibsm-fabric --bench routing` prints a table; the k=58
//! row is the target (LID space full, route in at most 2 s, peak
//! RSS well under 1 GiB). `-- --quick` skips k=58.

use std::time::{Duration, Instant};

use ibsm_fabric::lid::{LidConfig, LidManager};
use ibsm_fabric::routing::{self, RoutingOptions};
use ibsm_fabric::{gen, Topology};

/// Peak resident set size (VmHWM) in MiB.
fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let ks: &[u32] = if quick { &[16, 32] } else { &[16, 32, 58] };
    let opts = RoutingOptions::default();
    println!(
        "{:>4} {:>7} {:>6} {:>7} {:>9} {:>10} {:>10} {:>10} {:>9}",
        "k", "nodes", "sw", "LIDs", "unassgn", "lid ms", "minhop ms", "updown ms", "VmHWM MiB"
    );
    for &k in ks {
        let mut topo: Topology = match gen::fat_tree_3level(k) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("k={k}: {e}");
                continue;
            }
        };
        let c = topo.counts();
        let mut lm = LidManager::new(LidConfig { lmc: 0 });
        let t0 = Instant::now();
        let report = match lm.assign(&mut topo) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("k={k}: {e}");
                continue;
            }
        };
        let t_lid = t0.elapsed();
        let t0 = Instant::now();
        let mh = routing::min_hop(&topo, &opts);
        let t_mh = t0.elapsed();
        let lft_top = mh.as_ref().map_or(0, |f| f.lft_top);
        drop(mh);
        let t0 = Instant::now();
        let ud = routing::up_down(&topo, None, &opts);
        let t_ud = t0.elapsed();
        if let Err(e) = &ud {
            eprintln!("k={k}: up/down: {e}");
        }
        drop(ud);
        println!(
            "{:>4} {:>7} {:>6} {:>7} {:>9} {:>10.1} {:>10.1} {:>10.1} {:>9.0}",
            k,
            c.nodes,
            c.switches,
            lft_top,
            report.unassigned,
            ms(t_lid),
            ms(t_mh),
            ms(t_ud),
            peak_rss_mib().unwrap_or(f64::NAN)
        );
    }
}
