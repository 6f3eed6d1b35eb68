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

/// Process CPU time (user + system, all threads) from /proc/self/stat, in
/// ms (10 ms resolution). On a shared machine wall time mostly measures the
/// neighbours; CPU time shows the work.
fn cpu_ms() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return f64::NAN;
    };
    // Fields after the ")" of the command name: utime is the 12th, stime the 13th.
    let rest = stat.rsplit(')').next().unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        f.get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(f64::NAN)
    };
    (ticks(11) + ticks(12)) * 10.0
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let ks: &[u32] = if quick { &[16, 32] } else { &[16, 32, 58] };
    let opts = RoutingOptions::default();
    println!(
        "{:>4} {:>7} {:>6} {:>7} {:>8} {:>7} {:>10} {:>8} {:>10} {:>8} {:>9}",
        "k",
        "nodes",
        "sw",
        "LIDs",
        "unassgn",
        "lid ms",
        "minhop ms",
        "(cpu)",
        "updown ms",
        "(cpu)",
        "VmHWM MiB"
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
        let (t0, c0) = (Instant::now(), cpu_ms());
        let mh = routing::min_hop(&topo, &opts);
        let (t_mh, c_mh) = (t0.elapsed(), cpu_ms() - c0);
        let lft_top = mh.as_ref().map_or(0, |f| f.lft_top);
        drop(mh);
        let (t0, c0) = (Instant::now(), cpu_ms());
        let ud = routing::up_down(&topo, None, &opts);
        let (t_ud, c_ud) = (t0.elapsed(), cpu_ms() - c0);
        if let Err(e) = &ud {
            eprintln!("k={k}: up/down: {e}");
        }
        drop(ud);
        println!(
            "{:>4} {:>7} {:>6} {:>7} {:>8} {:>7.1} {:>10.1} {:>8.0} {:>10.1} {:>8.0} {:>9.0}",
            k,
            c.nodes,
            c.switches,
            lft_top,
            report.unassigned,
            ms(t_lid),
            ms(t_mh),
            c_mh,
            ms(t_ud),
            c_ud,
            peak_rss_mib().unwrap_or(f64::NAN)
        );
    }
}
