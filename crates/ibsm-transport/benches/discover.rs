//! Discovery throughput in the embedded simulator (real clock, one thread).
//!
//! `cargo bench -p ibsm-transport --bench discover [-- K...]` (or
//! `bench/discover.sh`): for each 3-level fat tree of radix K (default 16, 34
//! and 58: ~1.3k, ~11k and ~53k nodes) it builds the topology, runs
//! `run_discovery` over a `SimDevice` with the default MAD agent (window 16),
//! checks the discovered counts against the generated ones and prints a
//! table. Set `IBSM_BENCH_WINDOW` to try another window.

use std::time::{Duration, Instant};

use ibsm_transport::{run_discovery, DiscoverConfig, SimDevice};

fn main() {
    let mut radixes: Vec<u32> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    if radixes.is_empty() {
        radixes = vec![16, 34, 58];
    }
    let mut config = DiscoverConfig::default();
    if let Some(w) = std::env::var("IBSM_BENCH_WINDOW")
        .ok()
        .and_then(|w| w.parse().ok())
    {
        config.transactions.window = w;
    }
    config.deadline = Duration::from_secs(3600);
    println!(
        "{:>4} {:>7} {:>6} {:>8} {:>7} {:>9} {:>9} {:>10} {:>11}",
        "k", "nodes", "sw", "links", "window", "setup_s", "disc_s", "smps", "smps_per_s"
    );
    for k in radixes {
        let t0 = Instant::now();
        let topo = match ibsm_fabric::gen::fat_tree_3level(k) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("k={k}: cannot generate: {e}");
                continue;
            }
        };
        let mut dev = match SimDevice::on_first_ca(&topo) {
            Ok(d) => d,
            Err(e) => {
                eprintln!("k={k}: cannot start the simulator: {e}");
                continue;
            }
        };
        let build = t0.elapsed();
        let report = match run_discovery(&mut dev, &config) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("k={k}: discovery failed: {e}");
                continue;
            }
        };
        let got = report.result.topology.counts();
        let want = topo.counts();
        let ok = if got == want { "" } else { "  MISMATCH" };
        let secs = report.elapsed.as_secs_f64();
        println!(
            "{:>4} {:>7} {:>6} {:>8} {:>7} {:>9.3} {:>9.3} {:>10} {:>11.0}{ok}",
            k,
            got.nodes,
            got.switches,
            got.links,
            config.transactions.window,
            build.as_secs_f64(),
            secs,
            report.counters.sent,
            report.counters.sent as f64 / secs.max(1e-9),
        );
        if !ok.is_empty() {
            eprintln!("discovered {got:?}, generated {want:?}");
        }
    }
}
